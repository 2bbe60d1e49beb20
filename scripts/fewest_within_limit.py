#!/usr/bin/python3
"""The fewest bytes any answer moves within the limit on B, exactly, by an integer program.

    build/release/bench/refine/packswap-bench-refine-stress --shapes 4x1024 --dists lognormal \\
        --eps 0 --kept --json stress.json --write-batches batches
    /usr/bin/python3 scripts/fewest_within_limit.py stress.json batches [--dp-up-to 4] \\
        [--above 0.5] [--gap 0.01] [--time-limit 300]

The stress benchmark's lower bound on moved bytes (tests/support/moved_flow.hpp) is the fewest of
any assignment with A = LB_A, and ignores the limit on B but at dp 2. This tool adds the limit:
for every batch of the benchmark's records with one pack per cell, dp at most --dp-up-to, and an
answer moving more than --above of Karmarkar-Karp's bytes and more than --gap above the flow bound
(the fewest lies between the two), the fewest bytes moved by an assignment that keeps A = LB_A
and every rank's load within the record's limit (stage 1's B, relaxed by eps), solved as an
integer program by HiGHS (scipy.optimize.milp, Debian's python3-scipy).

The model is moved_flow.hpp's: caps[j] is the cost of the (j dp)-th largest pack, a pack's level
the last j with caps[j] >= its cost, and a rank holds at most j + 1 packs of level <= j for every
j, ga in all (Hall's condition for its packs to fill slots 0..ga-1, slot j taking costs up to
caps[j]). A binary x[p][r] places pack p on rank r; the loads are the limit's rows. O(n dp)
variables: small dp only.

Prints, as Markdown, per batch: the answer's and the flow bound's bytes over Karmarkar-Karp's,
and the fewest within the limit: one figure where HiGHS proves it within --time-limit seconds,
else the interval between its lower bound and the best assignment it found. The assignment it
returns is checked in integers (every rank within the limit, its packs fitting its slots) before
its bytes count. The answer is one assignment of the kind and the flow bound drops only the limit,
so the fewest lies between them: where it does not, the tool names the batch and exits 1 (the
model would not be the solver's); it exits 77 where scipy is missing.
"""

import argparse
import json
import pathlib
import sys
import time

import numpy as np

# Exit status where scipy is missing (a ctest skip).
NO_SCIPY = 77


def levels(costs, dp, ga):
    """Each pack's level and the caps: caps[j] the (j dp)-th largest cost (A = LB_A's maxima)."""
    costs = np.asarray(costs, dtype=np.int64)
    caps = np.sort(costs)[::-1][::dp][:ga]
    # The last j with caps[j] >= cost: caps is non-increasing.
    level = np.searchsorted(-caps, -costs, side="right") - 1
    return level, caps


def fits(rank_costs, caps):
    """Whether a rank's packs fill its slots, slot j taking costs up to caps[j]."""
    ordered = sorted(rank_costs, reverse=True)
    return len(ordered) == len(caps) and all(c <= cap for c, cap in zip(ordered, caps))


def moved_bytes(bytes_, homes, ranks):
    return int(sum(b for b, h, r in zip(bytes_, homes, ranks) if h != r))


def check(costs, homes, ranks, dp, ga, limit):
    """Whether `ranks` (one per pack) keeps A = LB_A and every load within `limit`, in integers."""
    _, caps = levels(costs, dp, ga)
    held = [[] for _ in range(dp)]
    for c, r in zip(costs, ranks):
        held[r].append(int(c))
    return all(fits(h, caps) and sum(h) <= limit for h in held)


def fewest(costs, bytes_, homes, dp, ga, limit, time_limit=300.0):
    """(lower, upper, ranks): the fewest bytes moved within `limit` lies in [lower, upper]; `ranks`
    is an assignment moving `upper` (checked), or None with upper = None where none was found or
    it failed the check. lower == upper where HiGHS proved it."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    costs = np.asarray(costs, dtype=np.int64)
    bytes_ = np.asarray(bytes_, dtype=np.int64)
    homes = np.asarray(homes, dtype=np.int64)
    n = len(costs)
    level, _ = levels(costs, dp, ga)
    # Variables: x[p, r] (n dp, binary), then z[r, j] = packs of level <= j on r (dp ga,
    # continuous: integral once x is).
    nx = n * dp
    total = nx + dp * ga
    packs = np.arange(n)
    rows, cols, vals, rhs = [], [], [], []

    def row(cs, vs, b):
        rows.extend([len(rhs)] * len(cs))
        cols.extend(cs)
        vals.extend(vs)
        rhs.append(b)

    for p in range(n):  # every pack on one rank
        row([p * dp + r for r in range(dp)], [1.0] * dp, 1.0)
    members = [packs[level == lv] for lv in range(ga)]
    for r in range(dp):
        for j in range(ga):  # z[r, j] = z[r, j - 1] + the x[p, r] of level j
            held = [p * dp + r for p in members[j]]
            cs = [nx + r * ga + j] + held + ([nx + r * ga + j - 1] if j else [])
            row(cs, [1.0] + [-1.0] * len(held) + ([-1.0] if j else []), 0.0)
        row([nx + r * ga + ga - 1], [1.0], float(ga))  # ga packs in all
    equal = coo_matrix((vals, (rows, cols)), shape=(len(rhs), total)).tocsr()
    load_rows = np.repeat(np.arange(dp), n)
    load_cols = np.tile(packs * dp, dp) + load_rows
    loads = coo_matrix((np.tile(costs.astype(float), dp), (load_rows, load_cols)),
                       shape=(dp, total)).tocsr()
    lower_bounds = np.zeros(total)
    upper_bounds = np.concatenate([np.ones(nx), np.tile(np.arange(1, ga + 1, dtype=float), dp)])
    integrality = np.concatenate([np.ones(nx), np.zeros(dp * ga)])
    # Minimise the bytes moved = all bytes - the bytes of packs placed on their home rank.
    objective = np.zeros(total)
    objective[packs * dp + homes] = -bytes_.astype(float)
    rhs = np.asarray(rhs)
    res = milp(objective, integrality=integrality, bounds=Bounds(lower_bounds, upper_bounds),
               constraints=[LinearConstraint(equal, rhs, rhs),
                            LinearConstraint(loads, -np.inf, float(limit))],
               options={"time_limit": float(time_limit), "mip_rel_gap": 0.0})
    ranks, upper = None, None
    if res.x is not None:
        ranks = np.round(res.x[:nx]).reshape(n, dp).argmax(axis=1)
        upper = moved_bytes(bytes_, homes, ranks)
        if not check(costs, homes, ranks, dp, ga, limit):
            ranks, upper = None, None
    if res.status == 0 and upper is not None:
        return upper, upper, ranks
    dual = getattr(res, "mip_dual_bound", None)
    if dual is None or not np.isfinite(dual):
        return 0, upper, ranks
    # The bound is on real-valued bytes (a float within HiGHS's tolerances): an integer count
    # moves at least its ceiling.
    return max(0, int(np.ceil(int(bytes_.sum()) + dual - 0.5))), upper, ranks


def read_batch(path):
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    return data[:, 2], data[:, 3], data[:, 1]  # costs, bytes, source ranks


def batch_file(directory, r):
    shape = f"{r['dp']}x{r['ga']}" + ("" if r["mbs"] == 1 else f"x{r['mbs']}")
    return pathlib.Path(directory) / f"{r['dist'].replace(':', '_')}-{shape}-s{r['seed']}.csv"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("records", help="the stress benchmark's --json file")
    ap.add_argument("batches", help="the stress benchmark's --write-batches folder")
    ap.add_argument("--dp-up-to", type=int, default=4, help="largest dp solved (default 4)")
    ap.add_argument("--above", type=float, default=0.0,
                    help="only answers moving more than this share of Karmarkar-Karp's bytes")
    ap.add_argument("--gap", type=float, default=0.01,
                    help="only answers moving more than the flow bound by this share of "
                         "Karmarkar-Karp's bytes (the fewest lies between them; default 0.01)")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds per batch")
    args = ap.parse_args(argv)
    try:
        import scipy  # noqa: F401
    except ImportError:
        print("scipy is missing (Debian: python3-scipy): nothing solved", file=sys.stderr)
        return NO_SCIPY
    records = json.load(open(args.records))["batches"]
    print("| distribution | shape | eps | seed | answer | flow bound | fewest within the limit "
          "| seconds |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    failed = False
    for r in records:
        if (r["mbs"] != 1 or r["dp"] > args.dp_up_to or r["moved_bytes_vs_kk"] <= args.above or
                r["moved_bytes_vs_kk"] - r["moved_lower_bound_vs_kk"] <= args.gap):
            continue
        costs, bytes_, homes = read_batch(batch_file(args.batches, r))
        start = time.monotonic()
        lower, upper, _ = fewest(costs, bytes_, homes, r["dp"], r["ga"], r["limit"],
                                 args.time_limit)
        seconds = time.monotonic() - start
        kk = r["kk_moved_bytes"]

        def share(v):
            return "?" if v is None else f"{v / kk:.4f}"

        if lower == upper:
            within = share(lower)
        elif lower == 0 and upper is None:
            within = f"none in {args.time_limit:g} s"
        else:
            within = f"{share(lower)} - {share(upper)}"
        print(f"| {r['dist']} | {r['dp']} x {r['ga']} | {r['eps']:g} | {r['seed']} | "
              f"{r['moved_bytes'] / kk:.4f} | {r['moved_lower_bound_vs_kk']:.4f} | {within} | "
              f"{seconds:.0f} |", flush=True)
        # The answer is one such assignment, and the flow bound drops only the limit: the fewest
        # lies between them, or the model is not the solver's.
        flow_bound = r["moved_lower_bound_vs_kk"] * kk
        if lower > r["moved_bytes"] or lower < flow_bound * (1 - 1e-9) - 1:
            print(f"inconsistent: {r['dist']} {r['dp']} x {r['ga']} eps {r['eps']:g} seed "
                  f"{r['seed']}: fewest at least {lower} bytes, the answer moves "
                  f"{r['moved_bytes']}, the flow bound {flow_bound:.0f}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
