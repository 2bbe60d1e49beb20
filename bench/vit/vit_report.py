#!/usr/bin/env python3
"""From a timing file (vit_time.py): the cost model fitted to the encoder, and the balance in
milliseconds of global batches assigned by every method.

    vit_report.py timings.json.gz [--dp 16,64,256] [--ga 16] [--json report.json]

Prints Markdown: per encoder, the calibration table (coefficients, R^2, relative errors, where the
model misses, the preset to ship), then per encoder, stream and dp the balance table. Exits 3
when a target is missed (the tables say which), 0 when every target is met.

Calibration: packswap.calibrate fits the terms vit_fixed (a pack with images runs the encoder at
all), vit_per_image_token and vit_attention (sum over images of tokens^2) to the calibration
packs' median times. A pack without images costs 0: the encoder does not run. Relative error is
predicted / measured - 1, on the calibration packs (median of several runs each) and on the
stream packs, which the fit never saw (one run each). Target: p95 |relative error| <= 5% on the
calibration packs.

Balance: the global batch of shape dp x ga is the first dp * ga packs of a stream, rank r having
loaded packs [r * ga, (r + 1) * ga), one pack per cell. Every method assigns from the calibrated
model's costs (what a trainer knows before the step); each cell then takes its pack's measured
time wherever it runs. One more row solves on the default cost model's costs (what a user who
does not calibrate gets). Per method: A (per micro-step, the slowest rank, summed), B (the
slowest rank's total), and waste 1 - ideal / actual with ideal = total / dp, measured and as the
model predicts. Targets: packswap (eps 0) measured A within 1% of LB_A of the measured times,
and the measured waste reduction (no rebalancing -> packswap eps 0, of A and of B) within 10% of
the model's.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

import packswap
import vit_baselines as vb
import vit_timings as vt

TERMS = ("vit_fixed", "vit_per_image_token", "vit_attention")
P95_TARGET = 0.05
A_TARGET = 0.01
REDUCTION_TARGET = 0.10
IMAGE_GROUPS = ((1, 1, "1 image"), (2, 3, "2-3 images"), (4, 7, "4-7 images"),
                (8, 1 << 30, "8 or more images"))
LARGEST_GROUPS = ((1, 1023, "largest image < 1,024 tokens"),
                  (1024, 4095, "largest image 1,024-4,095"),
                  (4096, 1 << 30, "largest image >= 4,096 (video-like)"))


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-quantile by nearest rank (the smallest value with at least q of them at or below
    it), as packswap's metrics take percentiles."""
    v = sorted(values)
    if not v:
        return float("nan")
    return v[max(int(math.ceil(q * len(v))) - 1, 0)]


def error_stats(rel: Sequence[float]) -> Dict[str, float]:
    a = [abs(x) for x in rel]
    return {"n": len(a), "median": nearest_rank(a, 0.5), "p95": nearest_rank(a, 0.95),
            "max": max(a) if a else float("nan"),
            "signed_median": nearest_rank(list(rel), 0.5)}


def features_matrix(doc: dict, ids: Sequence[int]) -> np.ndarray:
    return np.array([doc["packs"][i]["features"] for i in ids], dtype=np.int64).reshape(-1, 7)


def nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min |a x - b| with x >= 0, by calibrate's rule: fix the most negative at 0, fit again."""
    active = list(range(a.shape[1]))
    x = np.zeros(a.shape[1])
    while active:
        scale = np.linalg.norm(a[:, active], axis=0)
        scale[scale == 0] = 1.0
        sol = np.linalg.lstsq(a[:, active] / scale, b, rcond=None)[0] / scale
        if sol.min() >= 0:
            x[active] = sol
            break
        active.pop(int(np.argmin(sol)))
    return x


def calibration_of(doc: dict, encoder: str) -> Optional[dict]:
    """The fit and its errors for one encoder; None when fewer packs than terms were timed."""
    packs = doc["packs"]
    fit_ids = [i for i in doc["calibration"]
               if packs[i]["images"] and vt.median_ms(doc, encoder, i) is not None]
    if len(fit_ids) < len(TERMS):
        return None
    calib = set(doc["calibration"])
    held_ids = sorted(int(k) for k in doc["timings"][encoder] if int(k) not in calib)
    x_fit = features_matrix(doc, fit_ids)
    y_fit = np.array([vt.median_ms(doc, encoder, i) * 1e3 for i in fit_ids])  # microseconds
    fit = packswap.calibrate(x_fit, y_fit, terms=list(TERMS))
    model = fit.model

    def rel_errors(ids: Sequence[int]) -> List[float]:
        if not ids:
            return []
        pred = model.costs(features_matrix(doc, ids)).astype(np.float64)
        meas = np.array([vt.median_ms(doc, encoder, i) * 1e3 for i in ids])
        return list(pred / meas - 1.0)

    rel_fit, rel_held = rel_errors(fit_ids), rel_errors(held_ids)
    rel_all = dict(zip(fit_ids + held_ids, rel_fit + rel_held))

    def group(key, bounds) -> List[dict]:
        rows = []
        for lo, hi, label in bounds:
            members = [rel_all[i] for i in rel_all if lo <= key(packs[i]) <= hi]
            if members:
                rows.append({"group": label, **error_stats(members)})
        return rows

    # Diagnostic: the same fit with a per-image term, which CostModel does not have.
    def design(ids, per_image):
        f = features_matrix(doc, ids).astype(np.float64)
        cols = [np.ones(len(ids)), f[:, 2], f[:, 4]] + ([f[:, 3]] if per_image else [])
        return np.stack(cols, axis=1)

    y_held = np.array([vt.median_ms(doc, encoder, i) * 1e3 for i in held_ids])
    coef = nonnegative_lstsq(design(fit_ids, True), y_fit)
    extended = {
        "per_image_us": float(coef[3]),
        "fit": error_stats(list(design(fit_ids, True) @ coef / y_fit - 1.0)),
        "held_out": error_stats(list(design(held_ids, True) @ coef / y_held - 1.0)
                                if held_ids else []),
    }

    fwd_share = []
    for i in fit_ids:
        t = doc["timings"][encoder][str(i)]
        if t.get("fwd_ms"):
            fwd_share.append(float(np.median(t["fwd_ms"]) / np.median(t["ms"])))

    repeat, log_ratio = [], []
    for k, ms in doc.get("repeat", {}).get(encoder, {}).items():
        first = doc["timings"][encoder][k]["ms"][0]
        if first > 0 and ms > 0:
            repeat.append(ms / first - 1.0)
            log_ratio.append(math.log(ms / first))

    return {
        "encoder": encoder,
        "model": {name: getattr(model, name) for name in MODEL_FIELDS},
        "zeroed": list(fit.zeroed),
        "r_squared": fit.r_squared,
        "rms_error_us": fit.rms_error_us,
        "packs_fit": len(fit_ids),
        "packs_held_out": len(held_ids),
        "fit": error_stats(rel_fit),
        "held_out": error_stats(rel_held),
        "by_images": group(lambda p: len(p["images"]), IMAGE_GROUPS),
        "by_largest": group(lambda p: max(p["images"]), LARGEST_GROUPS),
        "extended": extended,
        "forward_share": nearest_rank(fwd_share, 0.5) if fwd_share else None,
        "repeat": error_stats(repeat) if repeat else None,
        # one run's noise: the spread of log(second / first) is sqrt(2) times it
        "run_noise": float(np.std(log_ratio) / math.sqrt(2)) if len(log_ratio) >= 8 else None,
        "target_met": bool(error_stats(rel_fit)["p95"] <= P95_TARGET),
    }


def cost_model_of(cal: dict) -> "packswap.CostModel":
    return packswap.CostModel(**cal["model"])


def ratio_to(a: float, lower_bound: float) -> float:
    """a / lower_bound, 1 where both are 0 (a batch of packs without images)."""
    return a / lower_bound if lower_bound > 0 else (1.0 if a <= 0 else math.inf)


def noise_floor(cells: vb.Cells, predicted: np.ndarray, dp: int, ga: int, noise: float,
                trials: int = 32) -> Dict[str, float]:
    """What A / LB_A of an assignment would be if the model were exact and each time carried one
    run's noise: times = predicted * exp(noise * N(0, 1)), over `trials` seeded draws (median and
    p95). A single run's noise alone lifts measured A above LB_A of the measured times: the
    solver balances the prediction, LB_A sorts the noisy times."""
    rng = np.random.RandomState(12345)
    ratios = []
    for _ in range(trials):
        times = predicted * np.exp(noise * rng.standard_normal(predicted.size))
        ratios.append(ratio_to(vb.a_of(vb.loads(times, cells, dp, ga)), vb.lb_a(times, dp, ga)))
    return {"noise": noise, "median": nearest_rank(ratios, 0.5), "p95": nearest_rank(ratios, 0.95)}


def balance_of(doc: dict, encoder: str, stream: str, dp: int, ga: int,
               model: "packswap.CostModel", run_noise: Optional[float] = None) -> Optional[dict]:
    """Every method's A, B and waste for the stream's first dp * ga packs; None when they were
    not all timed. With `run_noise` (one run's relative noise), also packswap eps 0's
    `noise_floor`."""
    n = dp * ga
    if vt.measured_prefix(doc, encoder, stream) < n:
        return None
    ids = doc["streams"][stream]["packs"][:n]
    features = features_matrix(doc, ids)
    costs = model.costs(features)  # microseconds, what every method sees
    nbytes = packswap.PayloadModel().bytes(features)
    source = np.arange(n) // ga
    measured = np.array([vt.median_ms(doc, encoder, i) for i in ids])
    predicted = costs.astype(np.float64) / 1e3

    methods: Dict[str, Tuple[str, vb.Cells]] = {}
    for name, (what, fn) in vb.BASELINES.items():
        methods[name] = (what, fn(costs, dp, ga))
    for eps in (0.0, 0.01):
        sol = packswap.solve(costs, nbytes, source, dp=dp, ga=ga, eps=eps)
        methods[f"packswap eps {eps:g}"] = (
            f"packswap, eps {eps:g}", (np.asarray(sol.rank), np.asarray(sol.micro_step)))
    # What a user who does not calibrate gets: the same solve on DESIGN.md's default costs.
    sol = packswap.solve(packswap.CostModel().costs(features), nbytes, source, dp=dp, ga=ga)
    methods["packswap eps 0 default model"] = (
        "packswap, eps 0, on the default cost model (not calibrated)",
        (np.asarray(sol.rank), np.asarray(sol.micro_step)))

    rows = []
    for name, (what, cells) in methods.items():
        row = {"method": name, "what": what,
               "moved": int(np.count_nonzero(np.asarray(cells[0]) != source))}
        for label, times in (("measured", measured), ("model", predicted)):
            load = vb.loads(times, cells, dp, ga)
            a, b = vb.a_of(load), vb.b_of(load)
            total = float(times.sum())
            row[label] = {"A_ms": a, "B_ms": b, "waste_A": vb.waste(total, dp, a),
                          "waste_B": vb.waste(total, dp, b)}
        rows.append(row)

    by = {r["method"]: r for r in rows}
    out = {
        "encoder": encoder, "stream": stream, "dp": dp, "ga": ga, "packs": n,
        "with_images": int(sum(1 for i in ids if doc["packs"][i]["images"])),
        "lb_a_ms": {"measured": vb.lb_a(measured, dp, ga), "model": vb.lb_a(predicted, dp, ga)},
        "lb_b_ms": {"measured": vb.lb_b(measured, dp), "model": vb.lb_b(predicted, dp)},
        "ideal_ms": {"measured": float(measured.sum()) / dp,
                     "model": float(predicted.sum()) / dp},
        "rows": rows,
    }
    ps, none = by["packswap eps 0"], by["none"]
    targets = []
    ratio = ratio_to(ps["measured"]["A_ms"], out["lb_a_ms"]["measured"])
    targets.append({"what": "packswap eps 0: measured A / LB_A(measured)", "value": ratio,
                    "limit": 1 + A_TARGET, "met": bool(ratio <= 1 + A_TARGET)})
    for key in ("waste_A", "waste_B"):
        meas = none["measured"][key] - ps["measured"][key]
        pred = none["model"][key] - ps["model"][key]
        # (both 0 where no method can do better than the loader's order)
        met = bool(abs(meas - pred) <= REDUCTION_TARGET * abs(pred) + 1e-12)
        targets.append({"what": f"{key} reduction, no rebalancing -> packswap eps 0",
                        "measured": meas, "model": pred, "met": met})
    out["noise_floor"] = (noise_floor(methods["packswap eps 0"][1], predicted, dp, ga, run_noise)
                          if run_noise is not None else None)
    out["eps_0.01_A_over_lb_a"] = ratio_to(by["packswap eps 0.01"]["measured"]["A_ms"],
                                           out["lb_a_ms"]["measured"])
    out["targets"] = targets
    return out


# ---- Markdown ------------------------------------------------------------------------------------


def pct(x: Optional[float], signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    v = round(x * 100, 1) + 0.0  # no "-0.0"
    return f"{v:+.1f}%" if signed else f"{v:.1f}%"


def preset_name(encoder: str, machine: dict) -> str:
    gpu = machine.get("gpu") or machine.get("device", "cpu")
    words = str(gpu).replace("NVIDIA", "").split()
    slug = "".join(ch for ch in (words[0] if words else "gpu").lower() if ch.isalnum())
    dtype = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(
        machine.get("dtype", ""), machine.get("dtype", ""))
    return f"{encoder.replace('-', '_')}_{slug}_{dtype}"


MODEL_FIELDS = ("pack_fs", "vit_fixed_fs", "vit_per_image_token_fs", "vit_attention_fs",
                "llm_per_token_fs", "llm_attention_fs")
"""packswap::cost_model's members, in declaration order."""


def fs(v: int) -> str:
    return f"{v:,}".replace(",", "'")


def preset_text(doc: dict, cal: dict) -> str:
    """The fitted model as a C++ preset, ready to paste."""
    m, enc = doc["machine"], doc["encoders"][cal["encoder"]]
    name = preset_name(cal["encoder"], m)
    where = machine_line(m)
    comment = (f"{enc.get('title') or cal['encoder']} encoder ({enc['description']}), "
               f"forward + backward of one pack, attention per image "
               f"({enc['attention']}): fitted by bench/vit/vit_report.py on {where}; "
               f"{cal['packs_fit']} packs: R^2 {cal['r_squared']:.4f}, relative error median "
               f"{pct(cal['fit']['median'])}, p95 {pct(cal['fit']['p95'])}.")
    lines = ["/// " + line for line in textwrap.wrap(comment, 96)]
    # cost_model's members in declaration order, each named, one a line (as clang-format sets it)
    terms = [f"/*{key}=*/{fs(cal['model'].get(key, 0))}" for key in MODEL_FIELDS]
    body = ["  return {" + terms[0] + ","] + [" " * 10 + t + "," for t in terms[1:-1]]
    body.append(" " * 10 + terms[-1] + "};")
    lines += [f"[[nodiscard]] inline cost_model {name}() noexcept {{"] + body + ["}"]
    return "\n".join(lines)


def machine_line(m: dict) -> str:
    """GPU, driver, CUDA, torch, dtype, packswap version and commit, date: what was known."""
    if m.get("gpu"):
        where = f"{m['gpu']} (driver {m.get('driver')}, CUDA {m.get('cuda')})"
    else:
        where = f"{m.get('device', 'cpu')} ({m.get('host_cpu', 'unknown processor')})"
    version = f"packswap {m['packswap']} ({m.get('commit')})" if m.get("packswap") else \
        f"packswap commit {m.get('commit')}"
    return f"{where}, torch {m.get('torch')}, {m.get('dtype')}, {version}, {m.get('date')}"


def render(doc: dict, calibrations: List[dict], balances: List[dict]) -> str:
    m = doc["machine"]
    out: List[str] = []
    w = out.append
    w("# The vision encoder's cost, calibrated, and the balance in milliseconds")
    w("")
    if doc.get("synthetic"):
        w(f"**Synthetic data, not a measurement:** {doc['synthetic']}")
        w("")
    if not doc.get("synthetic"):
        w(f"Measured on {machine_line(m)}. Calibration packs: {doc['settings'].get('warmup')} "
          f"warm-up + {doc['settings'].get('repeats')} timed runs each, median; stream packs: one "
          "run each.")
    for note in doc.get("notes", []):
        w(f"- note: {note}")
    for cal in calibrations:
        enc = doc["encoders"][cal["encoder"]]
        w("")
        timing = {"cuda graphs": "; each pack replayed as CUDA graphs",
                  "eager": "; run eagerly"}.get(enc.get("timing"), "")
        w(f"## Calibration: {cal['encoder']} ({enc['description']}; {enc['attention']} "
          f"attention{timing})")
        w("")
        w(f"Fitted on {cal['packs_fit']} calibration packs; {cal['packs_held_out']} stream packs "
          "held out. Terms fixed at 0 by the fit: "
          + (", ".join(cal["zeroed"]) if cal["zeroed"] else "none") + ".")
        w("")
        w("| term | coefficient | per |")
        w("|---|---:|---|")
        model = cal["model"]
        w(f"| vit_fixed | {model['vit_fixed_fs'] / 1e12:.3f} ms | pack with images |")
        w(f"| vit_per_image_token | {model['vit_per_image_token_fs'] / 1e9:.4f} us | image token |")
        w(f"| vit_attention | {model['vit_attention_fs'] / 1e6:.4f} ns | image token^2, summed "
          "over images |")
        w("")
        w("| packs | n | median \\|error\\| | p95 \\|error\\| | max \\|error\\| | median error |")
        w("|---|---:|---:|---:|---:|---:|")
        for label, st in (("calibration (fit)", cal["fit"]), ("stream (held out)",
                                                              cal["held_out"])):
            if st["n"]:
                w(f"| {label} | {st['n']} | {pct(st['median'])} | {pct(st['p95'])} | "
                  f"{pct(st['max'])} | {pct(st['signed_median'], True)} |")
        for row in cal["by_images"] + cal["by_largest"]:
            w(f"| {row['group']} | {row['n']} | {pct(row['median'])} | {pct(row['p95'])} | "
              f"{pct(row['max'])} | {pct(row['signed_median'], True)} |")
        w("")
        ok = "met" if cal["target_met"] else "MISSED"
        w(f"R^2 {cal['r_squared']:.4f}, RMS error {cal['rms_error_us'] / 1e3:.3f} ms. Target p95 "
          f"|error| <= 5% on the calibration packs: {ok} ({pct(cal['fit']['p95'])}).")
        ext = cal["extended"]
        w(f"With a per-image term as well (not in CostModel; {ext['per_image_us'] / 1e3:.3f} ms "
          f"per image): p95 {pct(ext['fit']['p95'])} on the calibration packs, "
          f"{pct(ext['held_out']['p95'])} held out.")
        if cal["forward_share"] is not None:
            w(f"Forward share of forward + backward (median): {pct(cal['forward_share'])}.")
        if cal["repeat"]:
            r = cal["repeat"]
            w(f"One run against the next ({r['n']} stream packs timed twice): median |difference| "
              f"{pct(r['median'])}, p95 {pct(r['p95'])}, max {pct(r['max'])}.")
        w("")
        if doc.get("synthetic"):
            w("(No preset from synthetic data.)")
        else:
            w("Preset (docs/vit-calibration.md says where it goes):")
            w("")
            w("```cpp")
            w(preset_text(doc, cal))
            w("```")
            w("")
            w("From Python: `packswap.CostModel(" + ", ".join(
                f"{k}={v}" for k, v in cal["model"].items() if v) + ")`.")
    for bal in balances:
        w("")
        w(f"## Balance in milliseconds: {bal['encoder']}, {bal['stream']}, dp {bal['dp']} x ga "
          f"{bal['ga']} ({bal['packs']:,} packs, {bal['with_images']:,} with images)")
        w("")
        w("Every method assigns by the calibrated model's costs; each cell then takes its pack's "
          "measured time. Measured / model.")
        w("")
        w("| method | A ms | B ms | waste A | waste B | A / LB_A | moved packs |")
        w("|---|---:|---:|---:|---:|---:|---:|")
        for row in bal["rows"]:
            me, mo = row["measured"], row["model"]
            w(f"| {row['what']} | {me['A_ms']:,.1f} / {mo['A_ms']:,.1f} | "
              f"{me['B_ms']:,.1f} / {mo['B_ms']:,.1f} | {pct(me['waste_A'])} / "
              f"{pct(mo['waste_A'])} | {pct(me['waste_B'])} / {pct(mo['waste_B'])} | "
              f"{ratio_to(me['A_ms'], bal['lb_a_ms']['measured']):.4f} / "
              f"{ratio_to(mo['A_ms'], bal['lb_a_ms']['model']):.4f} | {row['moved']:,} |")
        w("")
        w(f"LB_A {bal['lb_a_ms']['measured']:,.1f} / {bal['lb_a_ms']['model']:,.1f} ms, LB_B "
          f"{bal['lb_b_ms']['measured']:,.1f} / {bal['lb_b_ms']['model']:,.1f} ms, ideal "
          f"(total / dp) {bal['ideal_ms']['measured']:,.1f} / {bal['ideal_ms']['model']:,.1f} ms.")
        for t in bal["targets"]:
            ok = "met" if t["met"] else "MISSED"
            if "value" in t:
                w(f"- {t['what']}: {t['value']:.4f} (<= {t['limit']:.2f}): {ok}")
                floor = bal.get("noise_floor")
                if floor:
                    w(f"  - what one run's noise alone gives (an exact model, times with the "
                      f"repeat check's {pct(floor['noise'])} noise per run): "
                      f"{floor['median']:.4f} (median of 32 draws; p95 {floor['p95']:.4f})")
            else:
                w(f"- {t['what']}: measured {t['measured'] * 100:.2f} points, model "
                  f"{t['model'] * 100:.2f} (within 10%): {ok}")
        w(f"- packswap eps 0.01 (may exceed LB_A by 1% in model costs): measured A / LB_A "
          f"{bal['eps_0.01_A_over_lb_a']:.4f}")
    return "\n".join(out) + "\n"


def report(doc: dict, dps: Sequence[int], ga: int) -> Tuple[List[dict], List[dict]]:
    calibrations, balances = [], []
    for encoder in doc["encoders"]:
        cal = calibration_of(doc, encoder)
        if cal is None:
            continue
        calibrations.append(cal)
        model = cost_model_of(cal)
        for stream in doc["streams"]:
            for dp in dps:
                bal = balance_of(doc, encoder, stream, dp, ga, model, cal["run_noise"])
                if bal is not None:
                    balances.append(bal)
    return calibrations, balances


def targets_met(calibrations: List[dict], balances: List[dict]) -> bool:
    return all(c["target_met"] for c in calibrations) and all(
        t["met"] for b in balances for t in b["targets"])


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("timings", help="timing file from vit_time.py (.json or .json.gz)")
    ap.add_argument("--dp", default="16,64,256", help="data-parallel sizes (%(default)s)")
    ap.add_argument("--ga", type=int, default=16, help="micro-steps per global batch (%(default)s)")
    ap.add_argument("--json", help="also write every figure to this JSON file")
    args = ap.parse_args(argv)
    doc = vt.load(args.timings)
    dps = [int(x) for x in args.dp.split(",") if x]
    calibrations, balances = report(doc, dps, args.ga)
    sys.stdout.write(render(doc, calibrations, balances))
    if not calibrations:
        print("no encoder has enough timed calibration packs to fit", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"calibrations": calibrations, "balances": balances}, f, indent=1)
    if not balances:
        print("no global batch of the given shapes was timed in full", file=sys.stderr)
    ok = targets_met(calibrations, balances)
    print("\nall targets met" if ok else "\nTARGETS MISSED (see above)")
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
