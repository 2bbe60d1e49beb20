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
   warms up eagerly on the largest calibration pack, checks that a CUDA graph replay computes
   what an eager run does (and stops if a pack cannot be captured), then times every
   calibration pack --warmup + --repeats times (median used), in a shuffled order;
3. runs the --jobs in order: ENCODER:STREAM:N times the first N packs of STREAM once each (a
   global batch's packs each timed once), those an earlier job timed excepted. Before each job
   it estimates the job's time from the calibration fit and the measured overhead per pack, and
   skips a job that would not end inside the budget (the timing file's notes say which and
   why), then tries the next;
4. times up to 48 stream packs of each encoder a second time (how far one run is from the next);
5. writes the timing file (vit_timings.py).

Times come from CUDA events around the encoder's forward and its backward (parameter gradients,
set to None before each run so that every run writes them afresh), each run synchronised; on the
CPU, from the wall clock. On a GPU each pack is captured as CUDA graphs and replayed (--timing
graphs, the default; Timer says why): eagerly, a ViT-L/14 on an H200 took 52 to 62 ms for a pack
of 80 image tokens that replays in 5.7 ms, the time its host took to launch the kernels. Exits 77
without a CUDA GPU when --device is cuda (nothing measured).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
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

# Smallest batches first: dp 16 x ga 16 (256 packs, about 80 s on an H200 with capture), then
# dp 64 x ga 16 (1,024) of each shape and preset, then the rest of dp 256 x ga 16 (4,096); each
# job times only the packs an earlier one did not.
DEFAULT_JOBS = ("vit-l14:vlm-pretrain:256,so400m:vlm-pretrain:256,vit-l14:high-res:256,"
                "vit-l14:vlm-pretrain:1024,so400m:vlm-pretrain:1024,vit-l14:high-res:1024,"
                "so400m:high-res:1024,vit-l14:vlm-pretrain:4096,so400m:vlm-pretrain:4096")


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
    """Times one encoder on packs.

    Eagerly, each run goes through Python and the autograd engine op by op, and the GPU waits for
    every launch: where launching a pack's few thousand kernels takes longer than running them
    (small packs, a slow host), the events time the host, not the GPU. With ``graphs`` (CUDA
    only), each pack's forward (with the loss) and its backward are captured once as two CUDA
    graphs sharing one memory pool and replayed, so the events time the GPU's work alone, as a
    trainer whose launches run ahead of the GPU sees it. The first replay after a capture uploads
    the graphs and is not timed.
    """

    def __init__(self, model: vm.VisionEncoder, device: torch.device, dtype: torch.dtype,
                 graphs: bool = False):
        self.model, self.device, self.dtype = model, device, dtype
        self.graphs = graphs and device.type == "cuda"
        self.clock = Clock(device, 3)
        self.runs = 0  # timed runs, warm-ups included
        self.packs = 0
        self.gpu_ms = 0.0  # summed forward + backward of every run, warm-ups included
        if self.graphs:
            self.stream = torch.cuda.Stream(device)

    def _loss(self, pixels: torch.Tensor, layout: vm.PackLayout) -> torch.Tensor:
        return self.model(pixels, layout).float().square().mean()

    def _inputs(self, images: Sequence[int]) -> Tuple[torch.Tensor, vm.PackLayout]:
        """A pack's synthetic pixels and its layout, on the device."""
        layout = vm.PackLayout(images, self.device)
        return vm.random_pixels(layout, self.model.shape, self.dtype), layout

    @contextlib.contextmanager
    def _on_capture_stream(self):
        """Runs the block on the capture stream, after the current stream's work so far and
        before its work to come."""
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            yield
        torch.cuda.current_stream().wait_stream(self.stream)

    def run(self, images: Sequence[int], runs: int) -> Tuple[List[float], List[float]]:
        pixels, layout = self._inputs(images)
        total, forward = (self._replay if self.graphs else self._eager)(pixels, layout, runs)
        self.runs += runs
        self.packs += 1
        self.gpu_ms += sum(total)
        return total, forward

    def _eager(self, pixels: torch.Tensor, layout: vm.PackLayout,
               runs: int) -> Tuple[List[float], List[float]]:
        total, forward = [], []
        for _ in range(runs):
            self.model.zero_grad(set_to_none=True)
            self.clock.mark(0)
            loss = self._loss(pixels, layout)
            self.clock.mark(1)
            loss.backward()
            self.clock.mark(2)
            total.append(self.clock.ms(0, 2))
            forward.append(self.clock.ms(0, 1))
            del loss
        return total, forward

    def warm_up_eagerly(self, images: Sequence[int], runs: int) -> List[float]:
        """Eager runs, on the capture stream with graphs (what capturing needs first: the
        libraries' lazy set-up happens outside a capture); returns their times."""
        pixels, layout = self._inputs(images)
        with self._on_capture_stream() if self.graphs else contextlib.nullcontext():
            times = self._eager(pixels, layout, runs)[0]
        self.model.zero_grad(set_to_none=True)
        return times

    def _capture(self, pixels: torch.Tensor, layout: vm.PackLayout):
        """Captures the pack's forward (with the loss) and its backward as two graphs; returns
        them and the loss. Gradients are None at the capture, so the backward graph writes them
        afresh on every replay, as the eager runs do; both graphs are captured on one stream, so
        the backward's kernels follow the forward's as autograd runs them."""
        self.model.zero_grad(set_to_none=True)
        # As torch.cuda.graph does: free what earlier packs left (their autograd contexts can
        # sit in reference cycles) and return the cached memory, since a capture cannot.
        gc.collect()
        torch.cuda.empty_cache()
        fwd, bwd = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with self._on_capture_stream():
            fwd.capture_begin()
            try:
                loss = self._loss(pixels, layout)
            finally:
                fwd.capture_end()
            bwd.capture_begin(pool=fwd.pool())
            try:
                loss.backward()
            finally:
                bwd.capture_end()
        return fwd, bwd, loss

    def _replay(self, pixels: torch.Tensor, layout: vm.PackLayout,
                runs: int) -> Tuple[List[float], List[float]]:
        fwd, bwd, loss = self._capture(pixels, layout)
        total, forward = [], []
        for r in range(runs + 1):
            self.clock.mark(0)
            fwd.replay()
            self.clock.mark(1)
            bwd.replay()
            self.clock.mark(2)
            if r > 0:
                total.append(self.clock.ms(0, 2))
                forward.append(self.clock.ms(0, 1))
        torch.cuda.synchronize(self.device)
        del loss, fwd, bwd
        self.model.zero_grad(set_to_none=True)
        return total, forward

    def check_replay(self, images: Sequence[int]) -> float:
        """The largest difference between the loss and parameter gradients that one replay
        computes and an eager run's, on one pack, relative to each tensor's largest value."""
        pixels, layout = self._inputs(images)
        self.model.zero_grad(set_to_none=True)
        # On the capture stream, and the autograd graph dropped before capturing: a gradient
        # accumulator made on another stream and still alive would break the capture.
        with self._on_capture_stream():
            loss = self._loss(pixels, layout)
            loss.backward()
            eager = [loss.detach().float()] + [p.grad.float().clone()
                                               for p in self.model.parameters()]
        del loss
        fwd, bwd, loss = self._capture(pixels, layout)
        fwd.replay()
        bwd.replay()
        torch.cuda.synchronize(self.device)
        replayed = [loss.detach().float()] + [p.grad.float() for p in self.model.parameters()]
        worst = max(float((a - b).abs().max()) / max(float(a.abs().max()), 1e-30)
                    for a, b in zip(eager, replayed))
        del loss, fwd, bwd, replayed, eager
        self.model.zero_grad(set_to_none=True)
        return worst

    def pack_s(self, images: Sequence[int], runs: int, estimate, overhead_s: float) -> float:
        """Seconds a pack of ``runs`` timed runs will take: the GPU's time plus the host's
        overhead, measured per pack with graphs (capture, upload replay) and per run eagerly."""
        gpu = estimate(images) / 1e3
        return runs * gpu + overhead_s if self.graphs else runs * (gpu + overhead_s)


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
        # "+changes" when tracked files differ from that commit: the code that ran is not it
        changed = subprocess.run(["git", "-C", here, "status", "--porcelain",
                                  "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=20, check=True)
        info["commit"] = out.stdout.strip() + ("+changes" if changed.stdout.strip() else "")
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
    ap.add_argument("--timing", default="graphs", choices=["graphs", "eager"],
                    help="on a GPU, replay each pack as CUDA graphs (the GPU's time alone) or run "
                         "it eagerly (the host's launches included); the CPU runs eagerly")
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
        timer = Timer(model, device, dtype, graphs=args.timing == "graphs")
        timers[name] = timer
        doc["encoders"][name] = shape.entry(attention)
        doc["encoders"][name]["timing"] = "cuda graphs" if timer.graphs else "eager"
        table: Dict[str, dict] = {}
        doc["timings"][name] = table
        estimate[name], overhead_s[name] = quick_fit([]), 0.0
        if not order:
            continue
        largest = max(order, key=lambda p: (sum(p["images"]), -p["id"]))
        warm = timer.warm_up_eagerly(largest["images"], 3)
        log(f"{name}: {shape.parameter_count() / 1e6:.0f}M parameters, {attention} attention; "
            f"eager warm-up on {sum(largest['images'])} image tokens: "
            + ", ".join(f"{x:.1f}" for x in warm) + " ms")
        if timer.graphs:
            most = max(order, key=lambda p: (len(p["images"]), -p["id"]))
            try:
                diff = timer.check_replay(most["images"])
            except Exception as e:
                # A failed capture leaves CUDA's state unusable for eager runs in this process.
                log(f"{name}: capturing a pack as CUDA graphs failed ({type(e).__name__}: {e}); "
                    "--timing eager times eagerly (the host's launches included)")
                return 1
            replays, _ = timer.run(largest["images"], 3)
            log(f"{name}: CUDA graphs: a replay's loss and gradients match an eager run's within "
                f"{diff:.3g} ({len(most['images'])} images); replays of the warm-up pack: "
                + ", ".join(f"{x:.1f}" for x in replays) + " ms")
            if diff > 0.05:
                note = (f"{name}: a CUDA graph replay differs from an eager run by {diff:.3g} "
                        "(relative, loss and gradients)")
                doc["notes"].append(note)
                log(note)
        t0, gpu0, runs0, packs0 = time.monotonic(), timer.gpu_ms, timer.runs, timer.packs
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
        per = timer.packs - packs0 if timer.graphs else timer.runs - runs0
        overhead_s[name] = max(wall - (timer.gpu_ms - gpu0) / 1e3, 0.0) / max(per, 1)
        estimate[name] = quick_fit([(p["images"], statistics.median(table[str(p["id"])]["ms"]))
                                    for p in order if str(p["id"]) in table])
        log(f"{name}: {len(table)} calibration packs x {args.warmup + args.repeats} runs in "
            f"{wall:.1f} s ({overhead_s[name] * 1e3:.1f} ms per "
            f"{'pack' if timer.graphs else 'run'} outside the timed GPU work)")

    for name, stream, count in jobs:
        ids = doc["streams"][stream]["packs"][:count]
        table = doc["timings"][name]
        todo = [i for i in ids if packs[i]["images"] and str(i) not in table]
        need = sum(timers[name].pack_s(packs[i]["images"], 1, estimate[name], overhead_s[name])
                   for i in todo)
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
        need = sum(timers[name].pack_s(packs[i]["images"], 1, estimate[name], overhead_s[name])
                   for i in picked)
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
