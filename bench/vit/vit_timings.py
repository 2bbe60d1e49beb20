"""The timing file: what vit_time.py measured, in a form vit_report.py (and anyone) can read back.

JSON (gzip-compressed when the name ends in .gz), one object:

    format       "packswap-vit-timings/1"
    synthetic    null for measurements; for generated test data, a sentence saying how it was made
    machine      {gpu, driver, cuda, torch, python, packswap, commit, date, device, dtype}
    settings     {warmup, repeats, seed, capacity, budget_s, ...}: how the packs were timed
    encoders     name -> {shape: {layers, hidden, heads, mlp, patch}, attention, parameters}
    packs        [{id, source, images: [tokens per image], features: [FEATURES order]}]
    calibration  [pack ids]: timed `warmup` + `repeats` times each, median used
    streams      name -> {workload, seed, packer, packs: [pack ids in loader order]}
    timings      encoder -> {pack id (string) -> {ms: [forward + backward per run],
                                                  fwd_ms: [forward per run]}}
    repeat       encoder -> {pack id (string) -> ms}: stream packs timed a second time, to show
                 how far one run is from the next
    notes        [strings]: what was skipped and why

A pack without images has no timing: the encoder does not run for it (0 ms).
"""

from __future__ import annotations

import gzip
import io
import json
import statistics
from typing import Dict, List, Optional

FORMAT = "packswap-vit-timings/1"
FEATURES = ("samples", "tokens", "image_tokens", "images", "image_tokens_sq", "documents",
            "document_tokens_sq")


def _open(path: str, mode: str):
    if str(path).endswith(".gz"):
        # mtime 0: the same content gives the same bytes
        raw = open(path, mode + "b")
        if mode == "w":
            return io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0),
                                    encoding="utf-8"), raw
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="rb"), encoding="utf-8"), raw
    f = open(path, mode, encoding="utf-8")
    return f, None


def dumps(doc: dict) -> str:
    """The document as JSON with one pack, one timing entry per line (diffs stay readable)."""
    lines = ["{"]
    keys = list(doc)
    for n, key in enumerate(keys):
        comma = "," if n + 1 < len(keys) else ""
        value = doc[key]
        if key == "packs":
            lines.append(f'"packs": [')
            for i, p in enumerate(value):
                end = "," if i + 1 < len(value) else ""
                lines.append("  " + json.dumps(p, separators=(", ", ": ")) + end)
            lines.append("]" + comma)
        elif key in ("timings", "repeat", "streams"):
            lines.append(f'"{key}": {{')
            names = list(value)
            for j, name in enumerate(names):
                lines.append(f"  {json.dumps(name)}: {{")
                entries = list(value[name].items())
                for i, (k, v) in enumerate(entries):
                    end = "," if i + 1 < len(entries) else ""
                    lines.append(f"    {json.dumps(k)}: {json.dumps(v)}{end}")
                lines.append("  }" + ("," if j + 1 < len(names) else ""))
            lines.append("}" + comma)
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def save(doc: dict, path: str) -> None:
    validate(doc)
    f, raw = _open(path, "w")
    try:
        f.write(dumps(doc))
    finally:
        f.close()
        if raw is not None:
            raw.close()


def load(path: str) -> dict:
    f, raw = _open(path, "r")
    try:
        doc = json.load(f)
    finally:
        f.close()
        if raw is not None:
            raw.close()
    validate(doc, path)
    return doc


def validate(doc: dict, where: str = "timing file") -> None:
    """Raises ValueError naming the first thing wrong with ``doc``."""

    def fail(msg: str) -> None:
        raise ValueError(f"{where}: {msg}")

    if doc.get("format") != FORMAT:
        fail(f"format is {doc.get('format')!r}, expected {FORMAT!r}")
    for key in ("machine", "settings", "encoders", "packs", "calibration", "streams", "timings"):
        if key not in doc:
            fail(f"has no '{key}'")
    packs = doc["packs"]
    for i, p in enumerate(packs):
        if p.get("id") != i:
            fail(f"pack {i} has id {p.get('id')!r}: ids must be 0, 1, ... in order")
        images, features = p.get("images"), p.get("features")
        if not isinstance(images, list) or any((not isinstance(t, int)) or t < 1 for t in images):
            fail(f"pack {i} has images {images!r}: token counts >= 1")
        if not isinstance(features, list) or len(features) != len(FEATURES):
            fail(f"pack {i} has features {features!r}: {len(FEATURES)} integers {FEATURES}")
        f = dict(zip(FEATURES, features))
        if f["images"] != len(images) or f["image_tokens"] != sum(images) or \
                f["image_tokens_sq"] != sum(t * t for t in images):
            fail(f"pack {i}: features {features} disagree with its images {images}")
    n = len(packs)
    for i in doc["calibration"]:
        if not (isinstance(i, int) and 0 <= i < n):
            fail(f"calibration lists pack {i!r}, not one of the {n} packs")
    for name, s in doc["streams"].items():
        for i in s.get("packs", []):
            if not (isinstance(i, int) and 0 <= i < n):
                fail(f"stream '{name}' lists pack {i!r}, not one of the {n} packs")
    for enc, table in doc["timings"].items():
        if enc not in doc["encoders"]:
            fail(f"timings for encoder '{enc}', which 'encoders' does not describe")
        for key, t in table.items():
            if not key.isdigit() or int(key) >= n:
                fail(f"encoder '{enc}' times pack {key!r}, not one of the {n} packs")
            if not packs[int(key)]["images"]:
                fail(f"encoder '{enc}' times pack {key}, which has no images")
            ms = t.get("ms")
            if not isinstance(ms, list) or not ms or any(not (x >= 0) for x in ms):
                fail(f"encoder '{enc}' pack {key}: ms {ms!r} must be a non-empty list of "
                     "times >= 0")
    for enc, table in doc.get("repeat", {}).items():
        for key, ms in table.items():
            if key not in doc["timings"].get(enc, {}):
                fail(f"encoder '{enc}' repeats pack {key!r}, which it did not time")
            if not (isinstance(ms, (int, float)) and ms >= 0):
                fail(f"encoder '{enc}' repeats pack {key} in {ms!r} ms, must be >= 0")


def median_ms(doc: dict, encoder: str, pack: int) -> Optional[float]:
    """The median measured time of ``pack`` under ``encoder``: 0.0 for a pack without images,
    None where the pack was not timed."""
    if not doc["packs"][pack]["images"]:
        return 0.0
    t = doc["timings"].get(encoder, {}).get(str(pack))
    return None if t is None else statistics.median(t["ms"])


def measured_prefix(doc: dict, encoder: str, stream: str) -> int:
    """How many packs of ``stream``, from its start, have a time under ``encoder``."""
    n = 0
    for pack in doc["streams"][stream]["packs"]:
        if median_ms(doc, encoder, pack) is None:
            break
        n += 1
    return n


def empty(machine: Dict[str, object], settings: Dict[str, object]) -> dict:
    return {
        "format": FORMAT,
        "synthetic": None,
        "machine": machine,
        "settings": settings,
        "encoders": {},
        "packs": [],
        "calibration": [],
        "streams": {},
        "timings": {},
        "repeat": {},
        "notes": [],
    }


def pack_entries(packs) -> List[dict]:
    """vit_packs.Pack objects as the file's pack entries."""
    return [{"id": p.id, "source": p.source, "images": list(p.images),
             "features": list(p.features)} for p in packs]
