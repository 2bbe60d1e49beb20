#!/usr/bin/env python3
"""Turns the raw outputs of scripts/measure (its OUT folder) into the Markdown tables of
docs/performance.md. Sections whose outputs are missing are left out."""

import json
import os
import re
import statistics
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "build/measure"


def path(name):
    return os.path.join(out, name)


def have(name):
    return os.path.exists(path(name)) and os.path.getsize(path(name)) > 0


def load(name):
    with open(path(name)) as f:
        return json.load(f)


def table(header, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def ms(x):
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def grouped_times(bench_json, field="real_time"):
    """{name: [value of every repetition]} from a Google Benchmark JSON file, for the benchmarks
    that report `field`."""
    runs = {}
    for b in bench_json["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration" or field not in b:
            continue
        runs.setdefault(b["run_name"], []).append(b[field])
    return runs


def median_worst(values, worst=max):
    return statistics.median(values), worst(values)


sections = []

if have("machine.txt"):
    with open(path("machine.txt")) as f:
        info = dict(line.rstrip("\n").split(": ", 1) for line in f if ": " in line)
    sections.append(
        "## Machine\n\n"
        f"packswap {info.get('packswap')}, {info.get('cpu')}, "
        f"{info.get('cores')} cores, {info.get('memory')}, {info.get('compiler')}, "
        f"{info.get('date')}; timed figures are medians of {info.get('runs')} runs with the "
        "slowest run beside them.")

if have("pack.txt"):
    with open(path("pack.txt")) as f:
        report = f.read().rstrip()
    text = "## Packing\n\n`build/release/examples/pack/packswap-pack`:\n\n```\n" + report + "\n```"
    if have("pack-high-res.json"):
        hr = {r["packer"]: r for r in load("pack-high-res.json")}
        text += ("\n\n`packswap-pack --preset high-res`: 1D "
                 f"{100 * hr['1d']['efficiency']:.1f}%, 2D {100 * hr['2d']['efficiency']:.1f}% "
                 f"({hr['1d']['packs']:,} and {hr['2d']['packs']:,} packs).")
    sections.append(text)

if have("pack-bench.json"):
    runs = grouped_times(load("pack-bench.json"), "items_per_second")
    rows = []
    for name, v in runs.items():
        med, worst = median_worst(v, min)
        rows.append([f"`{name}`", f"{med / 1e6:.2f} M/s", f"{worst / 1e6:.2f} M/s"])
    sections.append(
        "## Packing throughput\n\n`build/release/bench/packing/packswap-bench-packing-pack "
        "--benchmark_repetitions=N` (samples per second, one core):\n\n" +
        table(["benchmark", "median", "slowest run"], rows))

if have("solve.json"):
    # CPU time: on a shared machine the wall clock also counts the time other processes held
    # the core.
    solve_json = load("solve.json")
    runs = grouped_times(solve_json, "cpu_time")
    kinds = ["balance_plan", "solve", "solve_all", "solve_once"]
    sizes = sorted({int(n.split("/")[1]) for n in runs})
    rows = []
    for n in sizes:
        row = [f"{n:,}"]
        for k in kinds:
            v = runs.get(f"{k}/{n}")
            row.append("" if not v else "{} ({})".format(*map(ms, median_worst(v))))
        rows.append(row)
    sections.append(
        "## Solve time\n\n`build/release/bench/balance/packswap-bench-balance-solve "
        "--benchmark_repetitions=N` (CPU ms, median (slowest run)):\n\n" +
        table(["packs (dp x 16)", "stage 1 + own plan", "full solve, own plan",
               "full solve, every plan + peers", "full solve, `packswap::solve()`"], rows))
    if all("faults" in b for b in solve_json["benchmarks"]):
        faults = grouped_times(solve_json, "faults")
        rows = []
        for n in sizes:
            row = [f"{n:,}"]
            for k in ["solve", "solve_all", "solve_once"]:
                v = faults.get(f"{k}/{n}")
                row.append("" if not v else f"{statistics.median(v):,.0f}")
            rows.append(row)
        text = ("Minor page faults per solve (the benchmark's `faults` counter, median; a fault "
                "is a 4 KiB page touched for the first time):\n\n" +
                table(["packs (dp x 16)", "kept `solver`, own plan", "kept `solver`, every plan",
                       "`packswap::solve()`, own plan"], rows))
        # What a fresh page cost in this run: the free function's time over the kept solver's
        # (both own plan), per extra fault, at the largest batch.
        n = sizes[-1]
        pair = [f"solve_once/{n}", f"solve/{n}"]
        extra_ms = extra_faults = 0
        if all(k in runs and k in faults for k in pair):
            extra_ms = statistics.median(runs[pair[0]]) - statistics.median(runs[pair[1]])
            extra_faults = statistics.median(faults[pair[0]]) - statistics.median(faults[pair[1]])
        if extra_faults > 0:
            text += (f"\n\nAt {n:,} packs the free function's extra time over the kept solver, "
                     f"per extra fault: {1000 * extra_ms / extra_faults:.1f} us per page.")
        sections.append(text)
    held = grouped_times(solve_json, "kept_bytes")  # kept solvers only, where mallinfo2 exists
    if held:
        rows = []
        for n in sizes:
            row = [f"{n:,}"]
            for k in ["solve", "solve_all"]:
                v = held.get(f"{k}/{n}")
                per_pack = statistics.median(v) if v else 0
                row.append(f"{per_pack:.0f} ({per_pack * n / 2**20:.1f} MiB)" if v else "")
            rows.append(row)
        sections.append(
            "Memory a kept solver and its solution hold after their first solve (the benchmark's "
            "`kept_bytes` counter: bytes per pack, and in all):\n\n" +
            table(["packs (dp x 16)", "own plan", "every plan + peers"], rows))

if have("methods.json"):
    runs = load("methods.json")["runs"]
    labels = {
        "identity": "identity (no rebalancing)",
        "round-robin": "sorted round-robin (TensorRT-LLM)",
        "snake": "snake (ERNIE)",
        "lpt-per-micro-step": "LPT per micro-step (Megatron Bridge, VeOmni)",
        "kk-per-step": "Karmarkar–Karp per step (verl)",
    }
    rows = []
    for r in runs:
        if r["workload"] != "vlm-pretrain" or r["dp"] != 1024:
            continue
        if r["method"].startswith("packswap") and r["method"] not in ("packswap eps=0",
                                                                      "packswap eps=0.01"):
            continue
        name = labels.get(r["method"], "**" + r["method"].replace("eps=", "eps = ") + "**")
        kk = f"{r['moved_bytes_vs_kk']:.3f}" if r["moved_bytes_vs_kk"] > 0 else "—"
        rows.append([name, f"{r['a_over_lb_a']:.3f}", f"{r['b_over_lb_b']:.4f}",
                     f"{100 * r['moved']:.1f}%", f"{100 * r['moved_bytes']:.1f}%", kk,
                     ms(r["solve_ms"])])
    text = ("## Side by side with the public methods\n\n"
            "`build/release/bench/refine/packswap-bench-refine-side_by_side --dp 64,256,1024 "
            "--eps 0,0.001,0.01,0.05 --repeat N --json`; default workload, dp = 1,024 (16,384 "
            "packs), solve time the median of N:\n\n" +
            table(["method", "A / LB_A", "B / LB_B", "packs moved", "bytes moved", "bytes vs KK",
                   "solve ms"], rows))
    eps_list = sorted({float(r["method"].split("=")[1]) for r in runs
                       if r["method"].startswith("packswap eps=")})
    workloads = list(dict.fromkeys(r["workload"] for r in runs))
    dps = sorted({r["dp"] for r in runs})
    rows = []
    for w in workloads:
        row = [w, " / ".join(f"{d:,}" for d in dps)]
        for e in eps_list:
            vals = []
            for d in dps:
                v = [r["moved_bytes_vs_kk"] for r in runs if r["workload"] == w and r["dp"] == d
                     and r["method"].startswith("packswap eps=")
                     and float(r["method"].split("=")[1]) == e]
                vals.append(f"{v[0]:.3f}" if v else "")
            row.append(" / ".join(vals))
        rows.append(row)
    exact = all(r["a_over_lb_a"] == 1 for r in runs if r["method"].startswith("packswap"))
    text += ("\n\nMoved bytes relative to Karmarkar–Karp's, every workload (A == LB_A in every "
             f"row: {'yes' if exact else 'NO'}):\n\n" +
             table(["workload", "dp"] + [f"eps {e:g}" for e in eps_list], rows))
    sections.append(text)

if have("seeds.jsonl"):
    rows_by = {}
    a_exact = True
    nseeds = 0
    with open(path("seeds.jsonl")) as f:
        for line in f:
            if not line.strip():
                continue
            nseeds += 1
            for r in json.loads(line)["runs"]:
                if not r["method"].startswith("packswap eps="):
                    continue
                a_exact &= r["a_over_lb_a"] == 1
                key = (r["workload"], float(r["method"].split("=")[1]), r["dp"])
                rows_by.setdefault(key, []).append(r["moved_bytes_vs_kk"])
    workloads = list(dict.fromkeys(k[0] for k in rows_by))
    cols = sorted({(k[1], k[2]) for k in rows_by})
    rows = []
    for w in workloads:
        row = [w]
        for e, d in cols:
            v = rows_by.get((w, e, d), [])
            row.append(f"{statistics.mean(v):.3f} / {max(v):.3f}" if v else "")
        rows.append(row)
    sections.append(
        f"## Moved bytes over {nseeds} seeds\n\n`for s in $(seq {nseeds}); do "
        "build/release/bench/refine/packswap-bench-refine-side_by_side --dp 64,256 --eps 0,0.01 "
        "--seed $s --repeat 1 --json; done` (field `moved_bytes_vs_kk`), mean / worst; "
        f"A == LB_A on every batch: {'yes' if a_exact else 'NO'}:\n\n" +
        table(["workload"] + [f"eps {e:g}, dp {d}" for e, d in cols], rows))

if have("sim.json"):
    runs = load("sim.json")["runs"]

    def get(rs, dp, method, field):
        for r in rs:
            if r["dp"] == dp and r["method"] == method:
                return r[field]
        return None

    rows = []
    for dp in sorted({r["dp"] for r in runs}):
        rows.append([
            f"{dp:,}",
            f"{100 * get(runs, dp, 'baseline', 'waste'):.1f}%",
            f"{100 * get(runs, dp, 'local', 'waste'):.1f}%",
            f"{100 * get(runs, dp, '2d', 'efficiency'):.1f}% / "
            f"{100 * get(runs, dp, '2d', 'waste'):.1f}% / "
            f"{get(runs, dp, '2d', 'relative_throughput'):.2f}x",
            f"{100 * get(runs, dp, 'rebalance-overlap', 'waste'):.1f}% / "
            f"{get(runs, dp, 'rebalance-overlap', 'relative_throughput'):.2f}x / "
            f"{get(runs, dp, 'rebalance-overlap', 'bytes_moved_per_rank') / 1e6:.0f} MB",
        ])
    text = ("## Straggler simulator\n\n`build/release/examples/sim/packswap-sim --json` "
            "(`vlm-pretrain`, ga 16, ranks meet every micro-step):\n\n" +
            table(["GPUs", "baseline waste", "local waste", "2d: full / waste / throughput",
                   "rebalance-overlap: waste / throughput / sent per rank per step"], rows))
    if have("sim-per-step.json"):
        ps = load("sim-per-step.json")["runs"]
        w = [r["waste"] for r in ps if r["method"] == "rebalance-overlap"]
        b = [r["waste"] for r in ps if r["method"] == "baseline"]
        text += ("\n\n`packswap-sim --sync per-step` (DDP): rebalance-overlap waste "
                 f"{100 * min(w):.2f}–{100 * max(w):.2f}% over every GPU count, baseline "
                 f"{100 * min(b):.1f}–{100 * max(b):.1f}%.")
    if have("sim-slow-network.json"):
        sn = load("sim-slow-network.json")["runs"]
        parts = []
        for dp in sorted({r["dp"] for r in sn}):
            parts.append(f"{dp:,} GPUs: sync {get(sn, dp, 'rebalance-sync', 'relative_throughput'):.2f}x, "
                         f"overlap {get(sn, dp, 'rebalance-overlap', 'relative_throughput'):.2f}x")
        text += ("\n\n`packswap-sim --dp 64,512,4096 --inter-gbps 0.05` (a slow network): "
                 + "; ".join(parts) + ".")
    if have("sim-high-res.json"):
        hr = load("sim-high-res.json")["runs"]
        parts = []
        for dp in sorted({r["dp"] for r in hr}):
            parts.append(f"{dp:,} GPUs: 2d {100 * get(hr, dp, '2d', 'efficiency'):.1f}% full, "
                         f"{get(hr, dp, '2d', 'relative_throughput'):.2f}x; rebalance-overlap "
                         f"{get(hr, dp, 'rebalance-overlap', 'relative_throughput'):.2f}x")
        text += ("\n\n`packswap-sim --workload high-res --dp 64,512,4096`: " + "; ".join(parts) + ".")
    if have("sim-times.txt"):
        with open(path("sim-times.txt")) as f:
            t = [list(map(float, line.split())) for line in f if re.match(r"^[0-9.]+ ", line)]
        wall = [x[0] for x in t]
        cpu = [x[1] + x[2] for x in t]
        text += ("\n\n`packswap-sim --dp 4096 --steps 100`: "
                 f"{statistics.median(wall):.1f} s (slowest {max(wall):.1f} s) wall, "
                 f"{statistics.median(cpu):.1f} s of CPU, over {len(t)} runs.")
    sections.append(text)

def short(sym):
    """packswap::detail::radix_order<packswap::detail::order_asc(...)::{lambda}> ->
    radix_order<order_asc>; a lambda keeps the function it is in."""
    sym = sym.replace("packswap::detail::", "").replace("packswap::", "")
    lam = re.match(r"^([\w:]+)\(.*\)::\{lambda\(.*\)#(\d+)\}", sym)
    if lam:
        return f"{lam.group(1)}, lambda #{lam.group(2)}"
    head = re.match(r"^([\w:]+)(<\s*([\w:]+))?", sym)
    if head.group(1) == "solve_into":
        return "solve_into"  # the whole solve
    return head.group(1) + (f"<{head.group(3)}>" if head.group(2) else "")


if have("phases.txt"):
    shares = []
    with open(path("phases.txt")) as f:
        for line in f:
            m = re.match(r"^\s+([0-9.]+)%\s+([0-9.]+)%\s+\S+\s+\S+\s+\[\.\]\s+(.*)$", line)
            if m:
                shares.append((float(m.group(1)), float(m.group(2)), m.group(3).strip()))
    root = next((s for s in shares if s[2].startswith("packswap::detail::solve_into")), None)
    if root:
        rows = []
        # The workload generator and packer run before the timed loop, outside the solve.
        outside = ("generate", "pack_buffered", "sample_set", "make_pack_meta", "features_of",
                   "pack_list")
        for incl, own, sym in shares:
            if not sym.startswith("packswap::") or incl < 0.005 * root[0]:
                continue
            if any(o in sym.split("(")[0] for o in outside):
                continue
            rows.append([f"`{short(sym)}`", f"{100 * incl / root[0]:.1f}%",
                         f"{100 * own / root[0]:.1f}%"])
        per_solve = ""
        if have("phases-run.txt"):
            with open(path("phases-run.txt")) as f:
                m = re.search(r"solve/262144\s+([0-9.]+) ms", f.read())
                per_solve = f" ({m.group(1)} ms per solve in that build)" if m else ""
        sections.append(
            "## Where the solve's time goes\n\n`perf record --call-graph=fp` around "
            "`solve/262144` of bench/balance/solve.cpp built with `-O3 -fno-omit-frame-pointer "
            f"-fno-inline-functions-called-once`{per_solve}; share of the solve's samples, "
            "with callees and without:\n\n" +
            table(["function", "with callees", "own"], rows))

if have("instructions.txt"):
    with open(path("instructions.txt")) as f:
        m = re.match(r"^\s*([0-9,]+)", f.read())
    if m:
        sections.append("## Instructions per solve\n\n`valgrind --tool=callgrind` around one "
                        "`solve/262144` of the profile build: "
                        f"{int(m.group(1).replace(',', '')) / 1e9:.3f} G instructions.")

if have("soak.txt"):
    with open(path("soak.txt")) as f:
        m = re.search(r"MESSAGE: (.*micro-steps per rank.*)", f.read())
    if m:
        sections.append("## Exchange soak\n\n`PACKSWAP_SOAK_MICRO_STEPS=100000 "
                        "build/release/tests/exchange/packswap_exchange_test_soak`: " +
                        m.group(1))

print("\n\n".join(sections))
