"""packswap.Solver.solve from Python against the C++ solver, on the same batch, in one process.

    PYTHONPATH=build/release/python:build/release/bench/python \\
        /usr/bin/python3 bench/python/solve_vs_cpp.py --packs 16384 --rounds 7

The batch is the first global batch of the vlm-pretrain preset packed into 8K packs (ga = 16, dp =
packs / 16), priced by the default cost and payload models: what bench/balance/solve.cpp solves.
After one warm-up round, each round times `--reps` solves by one C++ packswap::solver (its working
memory and solution kept, as bench/balance/solve.cpp's `solve_all`/`solve` rows) and then `--reps`
calls of one packswap.Solver's solve (inputs as int64 numpy arrays, a new Solution each call with
its rank and micro_step arrays), and compares their medians. Prints each round's ratio and the median and worst
ratio over rounds, for every rank's plan (the default, plan_rank = -1) and one rank's (what a
trainer's rank runs, plan_rank = 0).
"""

import argparse
import statistics
import time

import numpy as np
import packswap
import packswap_bench_native


def preset_batch(preset, dp, ga, seed):
    need = dp * ga
    count = need * 4 + 1000
    while True:
        samples = packswap.generate(preset, count, seed)
        packs = packswap.GreedyPacker()(samples)
        if len(packs) >= need:
            return packswap.make_pack_meta(packswap.features_of(samples, packs)[:need], dp, ga)
        count *= 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packs", type=int, default=16384)
    parser.add_argument("--ga", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reps", type=int, default=20, help="solves per side per round")
    parser.add_argument("--preset", default="vlm-pretrain")
    args = parser.parse_args()
    dp = args.packs // args.ga
    cost, nbytes, source = preset_batch(args.preset, dp, args.ga, 42)
    print(f"packswap {packswap.__version__}: {args.packs} packs (dp {dp}, ga {args.ga}), "
          f"{args.preset}; {args.rounds} rounds of {args.reps} solves per side, C++ then Python")
    for plan_rank in (-1, 0):
        solver = packswap.Solver()
        native = packswap_bench_native.NativeSolver(cost, nbytes, source, dp, args.ga, plan_rank)

        def python_times(reps):
            out = []
            for _ in range(reps):
                t0 = time.perf_counter()
                solver.solve(cost, nbytes, source, dp=dp, ga=args.ga, plan_rank=plan_rank)
                out.append(time.perf_counter() - t0)
            return out

        native.time(args.reps)  # warm-up: both keep their working memory from here on
        python_times(args.reps)
        ratios = []
        for r in range(args.rounds):
            c = statistics.median(native.time(args.reps))
            p = statistics.median(python_times(args.reps))
            ratios.append(p / c)
            print(f"  plan_rank {plan_rank:2d} round {r}: C++ {c * 1e3:8.3f} ms, "
                  f"Python {p * 1e3:8.3f} ms, ratio {p / c:.3f}")
        print(f"plan_rank {plan_rank}: Python / C++ median {statistics.median(ratios):.3f}, "
              f"worst {max(ratios):.3f}")
        sol = solver.solve(cost, nbytes, source, dp=dp, ga=args.ga, plan_rank=plan_rank)
        assert sol.metrics["A"] >= sol.metrics["LB_A"] and np.all(sol.rank < dp)


if __name__ == "__main__":
    main()
