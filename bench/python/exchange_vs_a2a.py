"""The Rebalancer's time per micro-step against a bare all_to_all_single of the same bytes, on
Gloo (CPU), in one run.

    PYTHONPATH=build/release/python OMP_NUM_THREADS=1 \\
        /usr/bin/python3 bench/python/exchange_vs_a2a.py --ranks 4 --pack-kib 1024 --rounds 7

Every rank submits ga packs of one float32 tensor of --pack-kib KiB each, the same every step;
ranks 0 and 1 load heavy packs and ranks 2 and 3 light ones, so balancing every micro-step moves
exactly half of the packs. Each round runs --pairs pairs of two phases of --steps global batches
each, a barrier before and after each phase:
  rebalancer: --steps global batches through Rebalancer.wrap (metadata all-gather, solve, digest
              check, the packs' serialisation, one all_to_all_single per micro-step, handing out
              the received tensors), nothing computed;
  bare:       the same steps of all_to_all_single of preallocated byte buffers with the split
              sizes the Rebalancer's plan used, on a Gloo group of their own, synchronously.
Prints each round's time per micro-step of both phases (and the CPU time rank 0's calling thread
and Gloo's threads spent in it) and their ratio, and the median and worst ratio over rounds (rank
0's clock).
"""

import argparse
import datetime
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, store, args, out):
    from packswap.torch import Rebalancer

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    bare_group = dist.new_group(backend="gloo")
    ga = args.ga
    numel = args.pack_kib * 1024 // 4
    heavy = rank < world // 2
    local = [{"data": torch.full((numel,), float(rank * ga + i))} for i in range(ga)]
    cost = {id(p): (1000 if heavy else 0) + 10 * i + 5 * (rank % 2) for i, p in enumerate(local)}

    def stream():
        while True:
            yield from local

    with Rebalancer(ga=ga, cost=lambda p: cost[id(p)], timeout=300) as rb:
        packs = rb.wrap(stream())
        for _ in range(ga):  # the first batch: solve and learn the plan (the same every batch)
            next(packs)
        sol = rb.solution
        size = numel * 4
        splits = []
        for m in range(ga):
            send = [0] * world
            recv = [0] * world
            for _, peer in sol.sends(rank, m).tolist():
                send[peer] += size
            for _, peer in sol.receives(rank, m).tolist():
                recv[peer] += size
            splits.append((send, recv))
        send_bufs = [torch.zeros(sum(s), dtype=torch.uint8) for s, _ in splits]
        recv_bufs = [torch.empty(sum(r), dtype=torch.uint8) for _, r in splits]
        moved = sol.metrics["moved"] / (world * ga)
        counts = torch.tensor([sum(send) for send, _ in splits], dtype=torch.int64)
        dist.all_reduce(counts)  # a micro-step nobody sends in is skipped by both phases

        def rebalancer_phase():
            for _ in range(args.steps * ga):
                micro = next(packs)
                micro["data"]  # handed out, not computed on

        def bare_phase():
            for _ in range(args.steps):
                for m in range(ga):
                    if counts[m] == 0:
                        continue
                    send, recv = splits[m]
                    dist.all_to_all_single(recv_bufs[m], send_bufs[m], recv, send,
                                           group=bare_group)

        def timed(phase, spent):
            dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            phase()
            c1 = time.process_time()
            dist.barrier()
            spent[0] += time.perf_counter() - t0
            spent[1] += c1 - c0

        rows = []
        micro_steps = args.pairs * args.steps * ga
        for _ in range(args.rounds):
            # Pairs of phases close in time, so that the machine's other load hits both alike.
            rb, bare = [0.0, 0.0], [0.0, 0.0]
            for _ in range(args.pairs):
                timed(rebalancer_phase, rb)
                timed(bare_phase, bare)
            rows.append([x / micro_steps for x in rb + bare])
    if rank == 0:
        out.put((moved, rows))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--ga", type=int, default=8)
    parser.add_argument("--pack-kib", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=5, help="global batches per phase")
    parser.add_argument("--pairs", type=int, default=4, help="phase pairs per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    store = os.path.join(tempfile.mkdtemp(prefix="packswap-bench-"), "store")
    mp.start_processes(rank_main, args=(args.ranks, store, args, out), nprocs=args.ranks,
                       start_method="spawn")
    moved, rows = out.get()
    print(f"torch {torch.__version__}, Gloo, {args.ranks} ranks, ga {args.ga}, packs of "
          f"{args.pack_kib} KiB, {moved:.0%} of them moving; per round {args.pairs} pairs of "
          f"phases of {args.steps} batches")
    ratios = []
    for r, (rb, rb_cpu, bare, bare_cpu) in enumerate(rows):
        ratios.append(rb / bare)
        print(f"  round {r}: per micro-step, Rebalancer {rb * 1e3:6.3f} ms ({rb_cpu * 1e3:6.3f} ms "
              f"CPU), bare all_to_all_single {bare * 1e3:6.3f} ms ({bare_cpu * 1e3:6.3f} ms CPU), "
              f"ratio {rb / bare:.3f}")
    print(f"Rebalancer / bare: median {statistics.median(ratios):.3f}, worst {max(ratios):.3f}")


if __name__ == "__main__":
    main()
