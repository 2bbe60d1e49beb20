#!/usr/bin/python3
"""Summary tables of docs/solver-worst-case.md from the stress benchmark's records.

    build/release/bench/refine/packswap-bench-refine-stress --json stress.json
    /usr/bin/python3 scripts/stress_tables.py stress.json

Reads one record per solved batch (every seed and eps) and prints, as Markdown: per cost
distribution, the worst cell at the main pack count (time, its ratio to the reference batch
solved in the same run, cells over 3x the reference and over 15 ms, batches stopped by the work
bound, moved bytes against Karmarkar-Karp's); the large batches by ga; the cells of several packs
against the lower bound on A; per eps, the batches over each time target and the slowest; and
the targets' tallies. Every figure is a worst case over seeds
and eps, never a median.
"""

import json
import sys
from collections import defaultdict

TIME_RATIO_TARGET = 3.0
TIME_MS_TARGET = 15.0
MOVED_TARGET = {0.0: 0.5, 0.01: 0.40}
# Time targets of the large pack counts, in ms.
LARGE_MS_TARGET = {262144: 100.0, 1048576: 500.0}


def shape_name(r):
    name = f"{r['dp']} x {r['ga']}"
    return name if r["mbs"] == 1 else f"{name} x {r['mbs']}"


def cells(records):
    """Groups records by (dist, dp, ga, mbs): one cell holds every seed and eps."""
    out = defaultdict(list)
    for r in records:
        out[(r["dist"], r["dp"], r["ga"], r["mbs"])].append(r)
    return out


def by_dist(rows):
    """Groups records by distribution, in the order the run solved them."""
    out = defaultdict(list)
    for r in rows:
        out[r["dist"]].append(r)
    return out


def over_targets(cs):
    """How many cells' worst time is above 3x the reference, and above 15 ms."""
    over_ratio = sum(1 for c in cs.values() if max(r["x_ref"] for r in c) > TIME_RATIO_TARGET)
    over_ms = sum(1 for c in cs.values() if max(r["ms"] for r in c) > TIME_MS_TARGET)
    return over_ratio, over_ms


def worst(rs, key):
    return max(rs, key=lambda r: r[key])


def moved_at(rs, eps):
    chosen = [r for r in rs if abs(r["eps"] - eps) < 1e-12]
    return max(chosen, key=lambda r: r["moved_bytes_vs_kk"]) if chosen else None


def fmt_ms(ms):
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}"


def main_table(records, packs):
    rows = [r for r in records if r["mbs"] == 1 and r["section"] == f"{packs} packs"]
    if not rows:
        return []
    lines = [
        f"| distribution | worst ms (shape) | x ref | cells over 3x ref | over 15 ms | bound hit "
        "| worst moved / KK at eps 0 (shape) | at eps 0.01 | lower bound there |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for dist, rs in by_dist(rows).items():
        cs = cells(rs)
        slow = worst(rs, "ms")
        over_ratio, over_ms = over_targets(cs)
        hit = sum(1 for r in rs if r["bound_hit"])
        m0 = moved_at(rs, 0.0)
        m1 = moved_at(rs, 0.01)
        lines.append(
            f"| {dist} | {fmt_ms(slow['ms'])} ({shape_name(slow)}) | {slow['x_ref']:.1f} "
            f"| {over_ratio} of {len(cs)} | {over_ms} of {len(cs)} | {hit} of {len(rs)} "
            f"| {m0['moved_bytes_vs_kk']:.3f} ({shape_name(m0)}) "
            f"| {m1['moved_bytes_vs_kk']:.3f} | {m0['moved_lower_bound_vs_kk']:.3f} |"
            if m0 and m1 else f"| {dist} | {fmt_ms(slow['ms'])} ({shape_name(slow)}) | |")
    return lines


def large_table(records, packs):
    rows = [r for r in records if r["mbs"] == 1 and r["section"] == f"{packs} packs"]
    if not rows:
        return []
    gas = sorted({r["ga"] for r in rows})
    head = " | ".join(f"ga {g}" for g in gas)
    lines = [f"| distribution | {head} | bound hit | worst moved / KK at eps 0 / 0.01 "
             "| lower bound there |",
             "| --- | " + " | ".join("---:" for _ in gas) + " | --- | --- | ---: |"]
    for dist, rs in by_dist(rows).items():
        times = []
        for g in gas:
            at = [r["ms"] for r in rs if r["ga"] == g]
            times.append(fmt_ms(max(at)) if at else "")
        hit = sum(1 for r in rs if r["bound_hit"])
        m0, m1 = moved_at(rs, 0.0), moved_at(rs, 0.01)
        moved = (f"{m0['moved_bytes_vs_kk']:.3f} / {m1['moved_bytes_vs_kk']:.3f} "
                 f"| {m0['moved_lower_bound_vs_kk']:.3f}" if m0 and m1 else " |")
        lines.append(f"| {dist} | " + " | ".join(times) + f" | {hit} of {len(rs)} | {moved} |")
    return lines


def eps_table(records, packs):
    """Per eps, the batches (not cells: a cell holds every eps) over each time target, and the
    slowest, at every pack count of the grid."""
    rows = [r for r in records if r["mbs"] == 1 and r["section"].endswith(" packs")]
    if not rows:
        return []
    # The pack counts with a time target: the main one and the large ones.
    counts = sorted({int(r["section"].split()[0]) for r in rows} & ({packs} | set(LARGE_MS_TARGET)))
    head, align = ["eps"], ["---:"]
    for n in counts:
        head.append(f"{n:,} packs: over 3x ref / over 15 ms" if n == packs else
                    f"{n:,} packs: over {fmt_ms(LARGE_MS_TARGET[n])} ms")
        head.append("slowest")
        align += ["---:", "---"]
    head.append("bound hit")
    align.append("---:")
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    for eps in sorted({r["eps"] for r in rows}):
        at_eps = [r for r in rows if r["eps"] == eps]
        line = [f"{eps:g}"]
        for n in counts:
            rs = [r for r in at_eps if r["section"] == f"{n} packs"]
            if n == packs:
                over_ratio = sum(1 for r in rs if r["x_ref"] > TIME_RATIO_TARGET)
                over_ms = sum(1 for r in rs if r["ms"] > TIME_MS_TARGET)
                line.append(f"{over_ratio} / {over_ms} of {len(rs)}")
            else:
                over = sum(1 for r in rs if r["ms"] > LARGE_MS_TARGET[n])
                line.append(f"{over} of {len(rs)}")
            slow = worst(rs, "ms")
            ratio = f", {slow['x_ref']:.1f}x" if n == packs else ""
            line.append(f"{fmt_ms(slow['ms'])} ms{ratio} ({slow['dist']} {shape_name(slow)})")
        hit = sum(1 for r in at_eps if r["bound_hit"])
        line.append(f"{hit} of {len(at_eps)}")
        lines.append("| " + " | ".join(line) + " |")
    return lines


def cells_table(records):
    rows = [r for r in records if r["mbs"] > 1]
    if not rows:
        return []
    lines = ["| distribution | worst A / LB_A (shape) | A over the former bound there "
             "| worst over the former bound (shape) | worst ms (shape) | x ref |",
             "| --- | --- | ---: | --- | --- | ---: |"]
    for dist, rs in by_dist(rows).items():
        w = worst(rs, "a_over_lb_a")
        f = worst(rs, "a_over_former_lb_a")
        t = worst(rs, "ms")
        lines.append(f"| {dist} | {w['a_over_lb_a']:.3f} ({shape_name(w)}) "
                     f"| {w['a_over_former_lb_a']:.3f} "
                     f"| {f['a_over_former_lb_a']:.3f} ({shape_name(f)}) "
                     f"| {fmt_ms(t['ms'])} ({shape_name(t)}) | {t['x_ref']:.1f} |")
    cs = cells(rows)
    over_ratio, over_ms = over_targets(cs)
    lines.append("")
    lines.append(f"Cells over 3x the reference: {over_ratio} of {len(cs)}; over 15 ms: "
                 f"{over_ms}.")
    stronger = sum(1 for r in rows if r["a_over_former_lb_a"] > r["a_over_lb_a"] + 1e-12)
    lines.append("")
    lines.append(f"The bound is strictly larger than the former in {stronger} of {len(rows)} "
                 "batches.")
    return lines


def shapes_table(records):
    """The cells of a run with --shapes: one row per distribution and shape."""
    rows = [r for r in records if r["section"] == "shapes"]
    if not rows:
        return []
    lines = ["| distribution | shape | batches | worst ms | x ref | bound hit "
             "| moved / KK at eps 0: mean / worst | at eps 0.01: mean / worst "
             "| lower bound: mean / worst |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    for (dist, dp, ga, mbs), rs in cells(rows).items():
        slow = worst(rs, "ms")
        hit = sum(1 for r in rs if r["bound_hit"])
        moved = []
        for eps in (0.0, 0.01):
            at = [r["moved_bytes_vs_kk"] for r in rs if abs(r["eps"] - eps) < 1e-12]
            moved.append(f"{sum(at) / len(at):.3f} / {max(at):.3f}" if at else "")
        # One value per seed: the bound at the first eps (at dp 2 it counts the limit on B too).
        lb = [r["moved_lower_bound_vs_kk"] for r in rs if abs(r["eps"] - rs[0]["eps"]) < 1e-12]
        lines.append(f"| {dist} | {shape_name(slow)} | {len(rs)} | {fmt_ms(slow['ms'])} "
                     f"| {slow['x_ref']:.1f} | {hit} | {moved[0]} | {moved[1]} "
                     f"| {sum(lb) / len(lb):.3f} / {max(lb):.3f} |")
    return lines


def tallies(records, packs):
    lines = []
    mbs1 = [r for r in records if r["mbs"] == 1]
    exact = sum(1 for r in mbs1 if abs(r["a_over_lb_a"] - 1.0) < 1e-12)
    b_ok = sum(1 for r in mbs1 if r["b_over_limit"] <= 1.0 + 1e-12)
    lines.append(f"- One pack per cell, every pack count: A == LB_A in {exact:,} of {len(mbs1):,} "
                 f"batches; B <= (1 + eps) B_KK in {b_ok:,} of {len(mbs1):,}.")
    main = [r for r in mbs1 if r["section"] == f"{packs} packs"]
    cs = cells(main)
    if not cs:
        main = [r for r in mbs1 if r["section"] == "shapes"]
        cs = cells(main)
    over_ratio, over_ms = over_targets(cs)
    within, under = len(cs) - over_ratio, len(cs) - over_ms
    where = f"{packs:,} packs: " if packs else ""
    lines.append(f"- {where}{within} of {len(cs)} cells within 3x the reference, {under} of "
                 f"{len(cs)} within 15 ms.")
    for eps, target in MOVED_TARGET.items():
        at = [r for r in mbs1 if abs(r["eps"] - eps) < 1e-12]
        ok = sum(1 for r in at if r["moved_bytes_vs_kk"] <= target)
        # Batches where no assignment with A = LB_A meets the target (the lower bound is above
        # it), and those within 0.05 of Karmarkar-Karp's bytes of the lower bound.
        beyond = sum(1 for r in at if r["moved_lower_bound_vs_kk"] > target)
        near = sum(1 for r in at
                   if r["moved_bytes_vs_kk"] <= r["moved_lower_bound_vs_kk"] + 0.05)
        lines.append(f"- Moved bytes <= {target} of Karmarkar-Karp's at eps = {eps:g}: {ok:,} of "
                     f"{len(at):,} batches; out of reach (the lower bound above it) in "
                     f"{beyond:,}; within 0.05 of the lower bound in {near:,}.")
    hit = sum(1 for r in mbs1 if r["bound_hit"])
    lines.append(f"- The work bound ended the search in {hit:,} of {len(mbs1):,} batches.")
    # The work of stage 2 where the bound did not end it (the search's answer, or a fallback after
    # an attempt failed on its own), per pack count (records written before the field existed have
    # none).
    for n in sorted({r["dp"] * r["ga"] for r in mbs1}):
        done = sorted(r["stage2_work"] for r in mbs1
                      if r["dp"] * r["ga"] == n and not r["bound_hit"] and "stage2_work" in r)
        if len(done) >= 10:
            lines.append(f"- {n:,} packs, not ended by the bound ({len(done):,}): work per pack "
                         f"median {done[len(done) // 2] / n:.1f}, 90th percentile "
                         f"{done[len(done) * 9 // 10] / n:.1f}, largest {done[-1] / n:.1f}.")
    return lines


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        data = json.load(f)
    records = data["batches"]
    sections = sorted({r["section"] for r in records})
    packs_main = min((int(s.split()[0]) for s in sections if s.endswith(" packs")),
                     default=0)
    kept = "; one solver kept across calls" if data.get("solver") == "kept" else ""
    print(f"{data.get('cpu', '')}: reference batch {data['reference_ms']:.2f} ms (median){kept}\n")
    if packs_main:
        lines = main_table(records, packs_main)
        print(f"### {packs_main:,} packs\n")
        print("\n".join(lines) + "\n")
    large = sorted(int(s.split()[0]) for s in sections if s.endswith(" packs"))
    for n in large:
        if n != packs_main:
            print(f"### {n:,} packs\n")
            print("\n".join(large_table(records, n)) + "\n")
    by_eps = eps_table(records, packs_main)
    if by_eps:
        print("### By eps\n")
        print("\n".join(by_eps) + "\n")
    own = shapes_table(records)
    if own:
        print("### Shapes\n")
        print("\n".join(own) + "\n")
    cl = cells_table(records)
    if cl:
        print("### Cells of several packs\n")
        print("\n".join(cl) + "\n")
    print("### Tallies\n")
    print("\n".join(tallies(records, packs_main)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
