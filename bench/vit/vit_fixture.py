#!/usr/bin/env python3
"""Writes the synthetic timing file the tests read: the packs a GPU run would time (fewer of
them), with times made up from a known cost function plus noise. Not a measurement.

    PYTHONPATH=build/dev/python python3 bench/vit/vit_fixture.py \\
        bench/vit/testdata/synthetic-timings.json

With --full, the GPU run's own packs (vit_time.py's defaults) and 48 repeats: what-ifs for the
report, e.g. how far one run's noise, or a per-image cost the model cannot express, moves its
figures (docs/vit-calibration.md quotes these):

    vit_fixture.py --full --noise 0.01 /tmp/s.json && vit_report.py /tmp/s.json
    vit_fixture.py --full --noise 0.01 --per-image-ms 0.3 /tmp/s.json && vit_report.py /tmp/s.json

Each encoder's time of a pack with images, in microseconds, is

    t = fixed + per_token * image_tokens + per_token_sq * (sum over images of tokens^2)

(the form of packswap's cost model, so a fit must find these coefficients back), plus
--per-image-ms per image (0 by default), times exp(noise * N(0, 1)) per run: 1% noise by default,
drawn with numpy's RandomState (the same numbers on every platform). Calibration packs get 5 runs,
stream packs 1, and 16 stream packs (48 with --full) a repeat; forward is a third of each run.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Dict, Optional, Sequence

import numpy as np

import vit_model as vm
import vit_packs as vp
import vit_timings as vt

# encoder -> (fixed us, us per image token, us per image token^2)
TRUTH: Dict[str, tuple] = {
    "vit-l14": (2500.0, 2.2, 1.1e-4),
    "so400m": (3200.0, 3.0, 1.4e-4),
}
NOISE = 0.01
SEED = 7
CALIBRATION_PER_SOURCE = 6
STREAMS = {"vlm-pretrain": 256, "high-res": 64}


def true_us(encoder: str, images: Sequence[int], per_image_ms: float = 0.0) -> float:
    fixed, per_token, per_sq = TRUTH[encoder]
    return (fixed + per_token * sum(images) + per_sq * sum(t * t for t in images)
            + per_image_ms * 1e3 * len(images))


def build(full: bool = False, noise: float = NOISE, per_image_ms: float = 0.0) -> dict:
    if full:
        import vit_time

        streams = {}
        for _, stream, count in vit_time.parse_jobs(vit_time.DEFAULT_JOBS):
            streams[stream] = max(streams.get(stream, 0), count)
        packset = vp.build(vit_time.DEFAULT_CALIBRATION, streams, seed=1)
    else:
        packset = vp.build(CALIBRATION_PER_SOURCE, STREAMS, seed=1)
    repeats = 48 if full else 16
    doc = vt.empty(
        {"device": "synthetic", "dtype": "bfloat16", "torch": None, "cuda": None,
         "gpu": None, "driver": None, "packswap": None, "commit": None, "date": None},
        {"warmup": 0, "repeats": 5, "seed": 1, "capacity": vp.CAPACITY,
         "calibration_per_source": len(packset.calibration) // len(vp.CALIBRATION_SOURCES),
         "noise": noise, "noise_seed": SEED, "per_image_ms": per_image_ms})
    doc["synthetic"] = (
        "made by bench/vit/vit_fixture.py from t_us = fixed + per_token * image_tokens + "
        "per_token_sq * sum(tokens^2), with (fixed, per_token, per_token_sq) = "
        + "; ".join(f"{k} {v}" for k, v in TRUTH.items())
        + (f", plus {per_image_ms} ms per image" if per_image_ms else "")
        + f", times exp({noise} * N(0, 1)) per run")
    doc["packs"] = vt.pack_entries(packset.packs)
    doc["calibration"] = list(packset.calibration)
    doc["streams"] = packset.streams
    rng = np.random.RandomState(SEED)
    calib = set(packset.calibration)
    for encoder in TRUTH:
        doc["encoders"][encoder] = vm.SHAPES[encoder].entry("synthetic")
        table = {}
        for p in packset.packs:
            if not p.images:
                continue
            runs = 5 if p.id in calib else 1
            ms = [true_us(encoder, p.images, per_image_ms) / 1e3
                  * math.exp(noise * rng.standard_normal()) for _ in range(runs)]
            table[str(p.id)] = {"ms": [round(x, 4) for x in ms],
                                "fwd_ms": [round(x / 3, 4) for x in ms]}
        doc["timings"][encoder] = table
        streamed = [k for k in table if int(k) not in calib]
        doc["repeat"][encoder] = {
            k: round(true_us(encoder, doc["packs"][int(k)]["images"], per_image_ms) / 1e3
                     * math.exp(noise * rng.standard_normal()), 4)
            for k in streamed[:: max(len(streamed) // repeats, 1)][:repeats]}
    return doc


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the timing file to write")
    ap.add_argument("--full", action="store_true",
                    help="the GPU run's packs instead of the tests' few")
    ap.add_argument("--noise", type=float, default=NOISE, help="noise per run (%(default)s)")
    ap.add_argument("--per-image-ms", type=float, default=0.0,
                    help="a cost per image, which the cost model cannot express")
    args = ap.parse_args(argv)
    vt.save(build(args.full, args.noise, args.per_image_ms), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
