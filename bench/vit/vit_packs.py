"""The packs the encoder is timed on, built with packswap's generators and packers.

Two kinds of pack lists:

- the calibration set: packs drawn from several sources, each spanning its range of image tokens
  (``stratified``), so that the fit sees one large image and many small ones, little and much
  image content, and video-like sequences of one long image;
- streams: the packs of a workload preset in loader order, packed 1D into 8,192-token packs with
  the default packer, as the C++ benchmarks build their global batches
  (bench/support/workloads.hpp): the global batch of shape dp x ga is the stream's first dp * ga
  packs, rank r having loaded packs [r * ga, (r + 1) * ga).

Every list is a pure function of its arguments (packswap's generators and packers are
bit-identical on every platform), so the timing file records only what was built, and the report
can check it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

import packswap

CAPACITY = 8192
"""Tokens per pack, the packers' default."""

# The calibration sources: name -> (workload, packer). Workloads are preset names or "video".
CALIBRATION_SOURCES: Dict[str, Tuple[str, str]] = {
    "vlm-pretrain": ("vlm-pretrain", "1d"),      # the default mix: 1 to ~12 images per pack
    "captioning": ("captioning", "1d"),          # many small images per pack
    "high-res": ("high-res", "1d"),              # one to three large images per pack
    "video": ("video", "1d"),                    # one long image (4,096 to 8,100 tokens)
    "vlm-pretrain/2d-1024": ("vlm-pretrain", "2d-1024"),  # little image content per pack
    "captioning/2d-512": ("captioning", "2d-512"),        # the low end: a few small images
}


@dataclass
class Pack:
    """One pack: where it came from, its images' token counts, and its features."""

    source: str
    images: List[int]
    features: List[int]  # packswap.FEATURES order
    id: int = -1

    @property
    def image_tokens(self) -> int:
        return self.features[packswap.FEATURES.index("image_tokens")]


@dataclass
class PackSet:
    """Packs with ids 0, 1, ... and the named lists of them (the calibration set, streams)."""

    packs: List[Pack] = field(default_factory=list)
    calibration: List[int] = field(default_factory=list)
    streams: Dict[str, dict] = field(default_factory=dict)

    def add(self, pack: Pack) -> int:
        pack.id = len(self.packs)
        self.packs.append(pack)
        return pack.id


def video_workload() -> "packswap.Workload":
    """Video-like samples: 30% one clip of 4,096 to 8,100 tokens (64 to 90 patches a side: the
    frames of a short clip as one sequence that attends within itself) with a short caption, 70%
    small captioned images that fill the packs around the clips."""
    return packswap.Workload(
        "video",
        [
            packswap.SampleKind("clip", weight=30, min_images=1, max_images=1,
                                image_sides=[(1, 64, 90)], text_tokens=[(1, 16, 256)]),
            packswap.SampleKind("caption", weight=70, min_images=1, max_images=1,
                                image_sides=[(1, 8, 24)], text_tokens=[(1, 8, 128)]),
        ],
        max_sample_tokens=CAPACITY,
        description="video-like: long single-sequence clips among small captioned images")


def workload(name: str) -> "packswap.Workload":
    return video_workload() if name == "video" else packswap.workload_preset(name)


def packer(name: str):
    """'1d': GreedyPacker; '2d-B': BudgetedPacker with image budget B, leaving out samples whose
    images alone exceed it (both 8,192 tokens)."""
    if name == "1d":
        return packswap.GreedyPacker(capacity=CAPACITY)
    if name.startswith("2d-"):
        return packswap.BudgetedPacker(capacity=CAPACITY, image_budget=int(name[3:]),
                                       on_oversize="skip")
    raise ValueError(f"unknown packer '{name}' (known: 1d, 2d-<image budget>)")


def packs_of(source: str, samples, packs) -> List[Pack]:
    """Every pack of ``packs`` (packed from ``samples``) as a Pack."""
    features = packswap.features_of(samples, packs)
    out = []
    for p in range(len(packs)):
        images: List[int] = []
        for s in packs.samples(p):
            images.extend(int(t) for t in samples.images(int(s)))
        out.append(Pack(source, images, [int(v) for v in features[p]]))
    return out


def stream(preset: str, count: int, seed: int) -> List[Pack]:
    """The first ``count`` packs of ``preset``'s stream: 1D packs of 8,192 tokens from
    ``count * 4 + 1000`` samples of seed ``seed``, the sample count doubled until there are
    enough (as bench/support/workloads.hpp's preset_batch)."""
    if count < 1:
        raise ValueError(f"a stream of {count} packs: must be >= 1")
    n = count * 4 + 1000
    while True:
        samples = packswap.generate(workload(preset), n, seed)
        packs = packer("1d")(samples)
        if len(packs) >= count:
            return packs_of(preset, samples, packs)[:count]
        n *= 2


def stratified(image_tokens: Sequence[int], n: int) -> List[int]:
    """Indices of ``n`` packs with images whose image tokens are nearest to ``n`` targets evenly
    spaced between the smallest and the largest (each index once; ties to the lower index)."""
    candidates = [i for i, t in enumerate(image_tokens) if t > 0]
    if not candidates or n < 1:
        return []
    lo = min(image_tokens[i] for i in candidates)
    hi = max(image_tokens[i] for i in candidates)
    chosen: List[int] = []
    free = sorted(candidates, key=lambda i: (image_tokens[i], i))
    for j in range(min(n, len(free))):
        target = lo + (hi - lo) * j / max(n - 1, 1)
        best = min(range(len(free)), key=lambda k: (abs(image_tokens[free[k]] - target), free[k]))
        chosen.append(free.pop(best))
    return sorted(chosen)


def calibration_packs(per_source: int, seed: int, samples_per_source: int = 3000,
                      sources: Sequence[str] = tuple(CALIBRATION_SOURCES)) -> List[Pack]:
    """``per_source`` packs from each source, stratified by image tokens."""
    out: List[Pack] = []
    for name in sources:
        if name not in CALIBRATION_SOURCES:
            raise ValueError(f"unknown calibration source '{name}' "
                             f"(known: {', '.join(CALIBRATION_SOURCES)})")
        wl, pk = CALIBRATION_SOURCES[name]
        samples = packswap.generate(workload(wl), samples_per_source, seed)
        pool = packs_of(name, samples, packer(pk)(samples))
        picked = stratified([p.image_tokens for p in pool], per_source)
        out.extend(pool[i] for i in picked)
    return out


def build(calibration_per_source: int, streams: Dict[str, int], seed: int,
          sources: Sequence[str] = tuple(CALIBRATION_SOURCES)) -> PackSet:
    """The calibration set and the streams (preset name -> pack count), as one PackSet."""
    ps = PackSet()
    for pack in calibration_packs(calibration_per_source, seed, sources=sources):
        ps.calibration.append(ps.add(pack))
    for preset, count in streams.items():
        ids = [ps.add(p) for p in stream(preset, count, seed)]
        ps.streams[preset] = {
            "workload": preset,
            "seed": seed,
            "packer": f"greedy, capacity {CAPACITY}, buffer 1000",
            "packs": ids,
        }
    return ps
