"""Runs a function on several processes joined by torch.distributed over Gloo (CPU), for the
tests of packswap.torch. Not a test module."""

import os
import queue as queue_module
import tempfile
import time
import traceback

import torch.multiprocessing as mp

# One intra-op thread per rank: the tests run several ranks on two cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def run(target, world, *args, timeout=240, dies=()):
    """target(rank, world, *args) on `world` spawned processes; returns each rank's result
    (None for the ranks listed in `dies`, which are expected to end their process themselves).

    A rank that raises, dies unexpectedly or is still running at `timeout` seconds fails the test
    with what is known of every rank. Every process ends with os._exit, so that a broken process
    group cannot hang its teardown."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    store = os.path.join(tempfile.mkdtemp(prefix="packswap-dist-"), "store")
    procs = [ctx.Process(target=_entry,
                         args=(target, rank, world, store, args, results, not dies))
             for rank in range(world)]
    for p in procs:
        p.start()
    outcome = {}
    deadline = time.monotonic() + timeout
    while len(outcome) < world and time.monotonic() < deadline:
        try:
            rank, status, value = results.get(timeout=0.5)
            outcome[rank] = (status, value)
        except queue_module.Empty:
            for rank, p in enumerate(procs):
                if rank not in outcome and p.exitcode is not None and results.empty():
                    outcome[rank] = ("died", p.exitcode)
    for p in procs:
        p.join(timeout=max(1.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    problems = []
    for rank in range(world):
        status, value = outcome.get(rank, ("hung", None))
        if rank in dies and status == "died":
            outcome[rank] = ("ok", None)
        elif status != "ok":
            problems.append(f"rank {rank} {status}: {value}")
    if problems:
        raise AssertionError("\n".join(problems))
    return [outcome[rank][1] for rank in range(world)]


def _entry(target, rank, world, store, args, results, barrier):
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    status, value = "ok", None
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=120))
        value = target(rank, world, *args)
        if barrier:
            dist.barrier()  # nobody leaves while another still talks to it
    except BaseException:
        status, value = "raised", traceback.format_exc()
    results.put((rank, status, value))
    results.close()
    results.join_thread()
    os._exit(0)
