#!/usr/bin/env python3
"""Times a vision encoder, forward + backward, on packs from packswap's packers and presets.

    vit_time.py --out timings.json.gz                      # on a GPU: the full run
    vit_time.py --device cpu --dtype float32 --encoders tiny --calibration 2 \\
                --jobs tiny:captioning:32 --out /tmp/t.json        # a CPU smoke run
    vit_time.py --packs-only --out packs.json              # only the packs (needs no GPU)
    vit_time.py --packs-from packs.json --out timings.json.gz   # time packs made elsewhere

What it does, in order, within --budget-s seconds of its start:
1. builds the packs: --calibration packs from each calibration source, stratified by image
   tokens, and the streams the --jobs name (vit_packs.py, which needs the packswap module), or
   reads them from --packs-from (a timing file, or one written by --packs-only);
2. per encoder (--encoders): builds it with random weights in --dtype, picks the attention
   backend (the first that matches per-image attention on a small pack, forward and backward),
   warms up on the largest calibration pack, then times every calibration pack --warmup +
   --repeats times (median used), in a shuffled order;
3. runs the --jobs in order: ENCODER:STREAM:N times the first N packs of STREAM once each (a
   global batch's packs each timed once), those an earlier job timed excepted. Before each job it estimates the job's time from the
   calibration fit and the measured overhead per pack, and skips a job that would not end inside
   the budget (the timing file's notes say which and why), then tries the next;
4. times up to 48 stream packs of each encoder a second time (how far one run is from the next);
5. writes the timing file (vit_timings.py).

Times come from CUDA events around the encoder's forward and its backward (parameter gradients,
set to None before each run so that every run writes them afresh), each run synchronised; on the
CPU, from the wall clock. Exits 77 without a CUDA GPU when --device is cuda (nothing measured).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

import torch

import vit_model as vm
import vit_timings as vt

SKIPPED = 77

# dp 64 x ga 16 first (1,024 packs), then the rest of dp 256 x ga 16 (4,096: the first 1,024 are
# timed already), then the second shape and the image-heavy preset.
DEFAULT_JOBS = ("vit-l14:vlm-pretrain:1024,vit-l14:vlm-pretrain:4096,so400m:vlm-pretrain:1024,"
                "vit-l14:high-res:1024,so400m:high-res:1024,so400m:vlm-pretrain:4096")


DEFAULT_CALIBRATION = 16  # packs per calibration source


def parse_jobs(text: str) -> List[Tuple[str, str, int]]:
    jobs = []
    for item in filter(None, text.split(",")):
        parts = item.split(":")
        if len(parts) != 3 or not parts[2].isdigit() or int(parts[2]) < 1:
            raise ValueError(f"job '{item}': expected ENCODER:STREAM:PACKS, e.g. "
                             "vit-l14:vlm-pretrain:1024")
        jobs.append((parts[0], parts[1], int(parts[2])))
    return jobs


class Clock:
    """Marks points of one run: CUDA events on a GPU, the wall clock on the CPU."""

    def __init__(self, device: torch.device, points: int) -> None:
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.events = [torch.cuda.Event(enable_timing=True) for _ in range(points)]
        self.walls = [0.0] * points

    def mark(self, i: int) -> None:
        if self.cuda:
            self.events[i].record()
        else:
            self.walls[i] = time.perf_counter()

    def ms(self, a: int, b: int) -> float:
        """Milliseconds from mark a to mark b (waits for b on a GPU)."""
        if self.cuda:
            self.events[b].synchronize()
            return self.events[a].elapsed_time(self.events[b])
        return (self.walls[b] - self.walls[a]) * 1e3


class Timer:
    """Times one encoder on packs."""

    def __init__(self, model: vm.VisionEncoder, device: torch.device, dtype: torch.dtype):
        self.model, self.device, self.dtype = model, device, dtype
        self.clock = Clock(device, 3)
        self.runs = 0
        self.gpu_ms = 0.0  # summed forward + backward of every run, warm-ups included

    def run(self, images: Sequence[int], runs: int) -> Tuple[List[float], List[float]]:
        layout = vm.PackLayout(images, self.device)
        pixels = vm.random_pixels(layout, self.model.shape, self.dtype)
        total, forward = [], []
        for _ in range(runs):
            self.model.zero_grad(set_to_none=True)
            self.clock.mark(0)
            out = self.model(pixels, layout)
            self.clock.mark(1)
            out.float().square().mean().backward()
            self.clock.mark(2)
            total.append(self.clock.ms(0, 2))
            forward.append(self.clock.ms(0, 1))
            del out
        self.runs += runs
        self.gpu_ms += sum(total)
        return total, forward


def machine_info(device: torch.device, dtype: torch.dtype) -> Dict[str, object]:
    info: Dict[str, object] = {
        "device": device.type,
        "dtype": str(dtype).replace("torch.", ""),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host_cpu": platform.processor() or platform.machine(),
    }
    try:
        import packswap
        info["packswap"] = packswap.__version__
    except Exception:
        pass
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info["gpu"] = props.name
        info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        info["sms"] = props.multi_processor_count
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20, check=True)
            info["driver"] = out.stdout.strip().splitlines()[0]
        except Exception:
            info["driver"] = None
    else:
        info["gpu"] = None
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=20, check=True)
        info["commit"] = out.stdout.strip()
    except Exception:
        info["commit"] = None
    return info


def quick_fit(rows: List[Tuple[List[int], float]]):
    """ms ~ a + b * image_tokens + c * sum of squares, by least squares over (images, ms) rows:
    only to estimate how long a job will take."""
    import numpy as np

    if len(rows) < 3:
        return lambda images: max((ms for _, ms in rows), default=0.0)
    a = np.array([[1.0, sum(im), sum(t * t for t in im)] for im, _ in rows])
    b = np.array([ms for _, ms in rows])
    coef = np.linalg.lstsq(a, b, rcond=None)[0]
    return lambda im: max(float(coef @ np.array([1.0, sum(im), sum(t * t for t in im)])), 0.0)


def main(argv: Optional[Sequence[str]] = None) -> int:
    start = time.monotonic()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="timing file to write (.json or .json.gz)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--encoders", default="vit-l14,so400m",
                    help=f"encoder shapes to calibrate ({', '.join(vm.SHAPES)})")
    ap.add_argument("--calibration", type=int, default=DEFAULT_CALIBRATION,
                    help="calibration packs per source (%(default)s)")
    ap.add_argument("--sources", default=None,
                    help="calibration sources, comma-separated (default: all of vit_packs)")
    ap.add_argument("--jobs", default=DEFAULT_JOBS,
                    help="ENCODER:STREAM:PACKS,... stream packs to time once each, in priority "
                         "order (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs per calibration pack")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per calibration pack")
    ap.add_argument("--repeat-check", type=int, default=48,
                    help="stream packs per encoder timed a second time (%(default)s)")
    ap.add_argument("--attention", default=None, choices=list(vm.ATTENTION),
                    help="attention backend (default: the first that works, in this order)")
    ap.add_argument("--budget-s", type=float, default=200.0,
                    help="seconds this program may run; jobs that would not fit are skipped")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--packs-from", help="read the packs from this file instead of building them")
    ap.add_argument("--packs-only", action="store_true",
                    help="write the packs (no timings) to --out and stop")
    args = ap.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available() and not args.packs_only:
        print(f"no CUDA GPU visible to torch {torch.__version__}: nothing to time (skipped)",
              file=sys.stderr)
        return SKIPPED
    dtype = getattr(torch, args.dtype)
    encoders = [e for e in args.encoders.split(",") if e]
    jobs = parse_jobs(args.jobs)
    for name in encoders + [j[0] for j in jobs]:
        if name not in vm.SHAPES:
            ap.error(f"unknown encoder '{name}' (known: {', '.join(vm.SHAPES)})")
    for j in jobs:
        if j[0] not in encoders:
            ap.error(f"job {':'.join(map(str, j))} names encoder '{j[0]}', not in --encoders")

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - start:7.1f} s] {msg}", flush=True)

    streams: Dict[str, int] = {}
    for _, s, n in jobs:
        streams[s] = max(streams.get(s, 0), n)
    doc = vt.empty({}, {
        "warmup": args.warmup, "repeats": args.repeats, "seed": args.seed,
        "calibration_per_source": args.calibration, "jobs": args.jobs,
        "budget_s": args.budget_s,
        "loss": "mean of squared outputs; parameter gradients set to None before each run",
    })
    if args.packs_from:
        made = vt.load(args.packs_from)
        for key in ("packs", "calibration", "streams"):
            doc[key] = made[key]
        doc["settings"]["packs_from"] = os.path.basename(args.packs_from)
        for s, n in streams.items():
            have = len(doc["streams"].get(s, {}).get("packs", []))
            if have < n:
                ap.error(f"{args.packs_from} has {have} packs of stream '{s}', the jobs need {n}")
    else:
        import vit_packs as vp  # needs the packswap module

        sources = args.sources.split(",") if args.sources else list(vp.CALIBRATION_SOURCES)
        packset = vp.build(args.calibration, streams, args.seed, sources=sources)
        doc["packs"] = vt.pack_entries(packset.packs)
        doc["calibration"] = list(packset.calibration)
        doc["streams"] = packset.streams
        doc["settings"].update({"capacity": vp.CAPACITY, "sources": sources})
    packs = doc["packs"]
    log(f"{len(packs)} packs: {len(doc['calibration'])} for calibration, streams "
        + ", ".join(f"{k} ({len(v['packs'])})" for k, v in doc["streams"].items()))
    if args.packs_only:
        vt.save(doc, args.out)
        log(f"wrote the packs to {args.out}")
        return 0
    doc["machine"] = machine_info(device, dtype)
    log("machine: " + ", ".join(f"{k} {v}" for k, v in doc["machine"].items()))

    timers: Dict[str, Timer] = {}
    estimate = {}
    overhead_s: Dict[str, float] = {}
    calib = [packs[i] for i in doc["calibration"] if packs[i]["images"]]
    order = list(calib)
    random.Random(args.seed).shuffle(order)
    for name in encoders:
        shape = vm.SHAPES[name]
        attention = vm.choose_attention(device, dtype, shape.head_dim, prefer=args.attention,
                                        log=lambda s, n=name: log(f"{n}: {s}"))
        model = vm.VisionEncoder(shape, attention=attention, seed=args.seed, device=device,
                                 dtype=dtype)
        timer = Timer(model, device, dtype)
        timers[name] = timer
        doc["encoders"][name] = shape.entry(attention)
        table: Dict[str, dict] = {}
        doc["timings"][name] = table
        estimate[name], overhead_s[name] = quick_fit([]), 0.0
        if not order:
            continue
        largest = max(order, key=lambda p: (sum(p["images"]), -p["id"]))
        warm, _ = timer.run(largest["images"], 3)
        log(f"{name}: {shape.parameter_count() / 1e6:.0f}M parameters, {attention} attention; "
            f"warm-up on {sum(largest['images'])} image tokens: "
            + ", ".join(f"{x:.1f}" for x in warm) + " ms")
        t0, gpu0, runs0 = time.monotonic(), timer.gpu_ms, timer.runs
        for n, p in enumerate(order):
            if time.monotonic() - start > args.budget_s:
                note = f"{name}: out of budget after {n} of {len(order)} calibration packs"
                doc["notes"].append(note)
                log(note)
                break
            ms, fwd = timer.run(p["images"], args.warmup + args.repeats)
            table[str(p["id"])] = {"ms": [round(x, 4) for x in ms[args.warmup:]],
                                   "fwd_ms": [round(x, 4) for x in fwd[args.warmup:]]}
        wall = time.monotonic() - t0
        runs = timer.runs - runs0
        overhead_s[name] = max(wall - (timer.gpu_ms - gpu0) / 1e3, 0.0) / max(runs, 1)
        estimate[name] = quick_fit([(p["images"], statistics.median(table[str(p["id"])]["ms"]))
                                    for p in order if str(p["id"]) in table])
        log(f"{name}: {len(table)} calibration packs x {args.warmup + args.repeats} runs in "
            f"{wall:.1f} s ({overhead_s[name] * 1e3:.1f} ms per run outside the encoder)")

    for name, stream, count in jobs:
        ids = doc["streams"][stream]["packs"][:count]
        table = doc["timings"][name]
        todo = [i for i in ids if packs[i]["images"] and str(i) not in table]
        need = sum(estimate[name](packs[i]["images"]) / 1e3 + overhead_s[name] for i in todo)
        left = args.budget_s - (time.monotonic() - start)
        job = f"{name}:{stream}:{count}"
        if need * 1.15 > left:
            note = (f"skipped {job}: {len(todo)} packs need about {need:.0f} s, "
                    f"{left:.0f} s of the budget left")
            doc["notes"].append(note)
            log(note)
            continue
        t0 = time.monotonic()
        for i in todo:
            ms, fwd = timers[name].run(packs[i]["images"], 1)
            table[str(i)] = {"ms": [round(ms[0], 4)], "fwd_ms": [round(fwd[0], 4)]}
        log(f"{job}: {len(todo)} packs timed once each in {time.monotonic() - t0:.1f} s "
            f"(estimated {need:.1f} s)")

    for name in encoders:
        table = doc["timings"][name]
        calib_ids = set(doc["calibration"])
        timed = sorted(int(k) for k in table if int(k) not in calib_ids)
        if not timed or args.repeat_check < 1:
            continue
        step = max(len(timed) // args.repeat_check, 1)
        picked = timed[::step][:args.repeat_check]
        need = sum(statistics.median(table[str(i)]["ms"]) / 1e3 + overhead_s[name] for i in picked)
        if need * 1.15 > args.budget_s - (time.monotonic() - start):
            doc["notes"].append(f"skipped the repeat check of {name}: out of budget")
            continue
        doc["repeat"][name] = {str(i): round(timers[name].run(packs[i]["images"], 1)[0][0], 4)
                               for i in picked}
        log(f"{name}: {len(picked)} stream packs timed a second time")

    vt.save(doc, args.out)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
