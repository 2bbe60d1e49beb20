"""What each rank runs in the multi-process tests of packswap.torch (see distributed.py).
Each function runs on every rank and returns plain data for the test to check."""

import gc
import os
import time

import numpy as np
import torch
import torch.distributed as dist

import packswap
from packswap.torch import Rebalancer


# ---- packs ---------------------------------------------------------------------------------

def make_pack(batch, source, index):
    """A pack whose every tensor follows from (batch, source rank, index): any rank can rebuild
    what it should have received. Dtypes, 0-d, empty and non-contiguous tensors, and key sets
    that differ between packs."""
    g = torch.Generator().manual_seed(batch * 1_000_003 + source * 1009 + index)
    n = int(torch.randint(1, 40, (1,), generator=g))
    pack = {
        "id": torch.tensor([batch, source, index], dtype=torch.int64),
        "tokens": torch.randint(-2**31, 2**31 - 1, (n,), generator=g, dtype=torch.int32),
        "pixels": torch.randn(n, 3, generator=g),
        "half": torch.randn(n, generator=g).to(torch.bfloat16),
        "mask": torch.rand(n, generator=g) > 0.5,
        "scalar": torch.tensor(float(index) / 7, dtype=torch.float64),
        "empty": torch.empty(0, 4),
        # Non-contiguous: the transpose of a (5, n) matrix.
        "strided": torch.arange(5 * n, dtype=torch.int64).reshape(5, n).t(),
    }
    if index % 3 == 1:
        del pack["half"]
        pack["bytes"] = torch.randint(0, 255, (2 * n + 1,), generator=g, dtype=torch.uint8)
    return pack


def pack_cost(pack):
    batch, source, index = pack["id"].tolist()
    # Uneven on purpose: some ranks' loaders produce much heavier packs than others.
    return (source * 37 + index * 101 + batch * 13) % 97 * (1 + (source % 2) * 5)


def check_same(got, want):
    assert list(got) == list(want), (list(got), list(want))
    for name, t in want.items():
        g = got[name]
        assert g.dtype == t.dtype and g.shape == t.shape, (name, g.dtype, g.shape, t.dtype,
                                                            t.shape)
        assert torch.equal(g, t), name


def threads():
    return len(os.listdir("/proc/self/task"))


def thread_names():
    names = []
    for task in sorted(os.listdir("/proc/self/task")):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # ended meanwhile
            pass
    return names


def threads_settled(baseline, within=5.0):
    """The thread count once it is back at `baseline`, or after `within` seconds. A Gloo process
    group's threads end with the last reference to the group, which a reference cycle (through a
    caught exception's traceback) can hold until the garbage collector runs: it is run between
    reads. A thread still running after that is left running, and counted."""
    end = time.monotonic() + within
    while True:
        n = threads()
        if n <= baseline or time.monotonic() > end:
            return n
        gc.collect()
        time.sleep(0.05)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ---- delivery ------------------------------------------------------------------------------

def delivery(rank, world, configs, batches):
    """Every (ga, mbs) of `configs`, `batches` global batches each, through step(), wrap() and
    submit/acquire/release one batch ahead. Returns, per config and batch, the solution's cells
    and what this rank got: (pack id, micro-step)."""
    out = []
    for ci, (ga, mbs) in enumerate(configs):
        ppr = ga * mbs
        local = [[make_pack(b, rank, i) for i in range(ppr)] for b in range(batches)]
        got = [[] for _ in range(batches)]
        cells = []
        # Received packs kept past their micro-step stay intact: their receive buffer is not
        # reused while they live (checked again once all batches are through).
        held = []
        with Rebalancer(ga=ga, cost=pack_cost, mbs=mbs, timeout=60) as rb:

            def take(b, m, micro):
                items = [micro] if mbs == 1 else micro
                assert len(items) == mbs
                for p in items:
                    batch, source, index = p["id"].tolist()
                    assert batch == b
                    if source == rank:
                        assert p is local[b][index]  # kept: the very object submitted
                    else:
                        check_same(p, make_pack(batch, source, index))
                        assert all(t.is_contiguous() for t in p.values())
                        held.append(p)
                    got[b].append((source * ppr + index, m))

            how = ci % 3
            if how == 0:
                for b in range(batches):
                    for m, micro in enumerate(rb.step(local[b])):
                        take(b, m, micro)
                    cells.append((rb.solution.rank.tolist(), rb.solution.micro_step.tolist()))
            elif how == 1:
                flat = (p for b in range(batches) for p in local[b])
                for n, micro in enumerate(rb.wrap(flat)):
                    b, m = divmod(n, ga)
                    take(b, m, micro)
                    if m == ga - 1:
                        cells.append((rb.solution.rank.tolist(),
                                      rb.solution.micro_step.tolist()))
            else:
                rb.submit(local[0])
                for b in range(batches):
                    for m in range(ga):
                        micro = rb.acquire(m)
                        if m == 0 and b + 1 < batches:
                            rb.submit(local[b + 1])
                        take(b, m, micro)
                        rb.release(m)
                    cells.append((rb.solution.rank.tolist(), rb.solution.micro_step.tolist()))
            stats = rb.stats
        for p in held:
            check_same(p, make_pack(*p["id"].tolist()))
        out.append(dict(ga=ga, mbs=mbs, cells=cells, got=got, stats=stats))
    return out


def subgroups(rank, world):
    """Two data-parallel groups of two ranks each ({0, 1} and {2, 3}): each Rebalancer balances
    within its own group."""
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    mine = groups[rank // 2]
    ga = 4
    local = [make_pack(0, rank, i) for i in range(ga)]
    seen = []
    with Rebalancer(ga=ga, cost=pack_cost, group=mine, timeout=60) as rb:
        assert rb.dp == 2 and rb.rank == rank % 2
        for micro in rb.step(local):
            batch, source, index = micro["id"].tolist()
            seen.append(source)
            if source != rank:
                check_same(micro, make_pack(batch, source, index))
        moved = rb.solution.metrics["moved"]
    return dict(seen=seen, moved=moved)


# ---- training equivalence ------------------------------------------------------------------

def training(rank, world, steps, ga):
    """A float64 model trained `steps` optimizer steps with and without the Rebalancer: gradients
    summed over ranks, so both runs compute the same sums (in another order). Returns the
    per-step losses and final parameters of both runs."""

    def batch_of(step):
        packs = []
        for i in range(ga):
            g = torch.Generator().manual_seed(step * 7919 + rank * 131 + i)
            rows = int(torch.randint(1, 64, (1,), generator=g))
            packs.append({"x": torch.randn(rows, 8, generator=g, dtype=torch.float64),
                          "y": torch.randn((), generator=g, dtype=torch.float64)})
        return packs

    def train(balanced):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 1)).double()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        losses = []

        def run_step(micro_batches):
            total = torch.zeros((), dtype=torch.float64)
            for pack in micro_batches:
                loss = (model(pack["x"]).sum() - pack["y"]) ** 2
                loss.backward()
                total += loss.detach()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            dist.all_reduce(total)
            losses.append(total.item())
            opt.step()
            opt.zero_grad()

        if balanced:
            with Rebalancer(ga=ga, cost=lambda p: p["x"].shape[0], timeout=60) as rb:
                for step in range(steps):
                    run_step(rb.step(batch_of(step)))
                moved = rb.stats["packs_received"]
        else:
            for step in range(steps):
                run_step(batch_of(step))
            moved = 0
        return losses, [p.detach().clone() for p in model.parameters()], moved

    plain_losses, plain_params, _ = train(False)
    losses, params, moved = train(True)
    loss_err = max(abs(a - b) / abs(a) for a, b in zip(plain_losses, losses))
    # Relative to each parameter tensor's magnitude: an entry near 0 is the difference of
    # larger sums, whose last bits the summation order decides.
    param_err = max(float((a - b).abs().max() / a.abs().max())
                    for a, b in zip(plain_params, params))
    changed = max(float((a - b).abs().max()) for a, b in zip(plain_params, params))
    return dict(loss_err=loss_err, param_err=param_err, moved=moved, steps=len(losses),
                differs_bitwise=changed > 0)


# ---- soak ----------------------------------------------------------------------------------

def soak(rank, world, micro_steps, ga):
    """`micro_steps` micro-steps through wrap(): threads and resident memory after warm-up and
    at the end."""

    def stream():
        i = 0
        while True:
            g = torch.Generator().manual_seed(i * 17 + rank)
            n = int(torch.randint(1, 64, (1,), generator=g))
            yield {"x": torch.randn(n, generator=g), "i": torch.tensor(i)}
            i += 1

    warmup = micro_steps // 10
    samples = []
    with Rebalancer(ga=ga, cost=lambda p: p["x"].numel() * (1 + rank), timeout=60) as rb:
        t0 = time.monotonic()
        for n, micro in enumerate(rb.wrap(stream())):
            micro["x"].sum()
            if n + 1 == warmup or (n + 1) % (micro_steps // 10) == 0:
                samples.append((n + 1, threads(), rss_bytes()))
            if n + 1 == micro_steps:
                break
        seconds = time.monotonic() - t0
        stats = rb.stats
    return dict(samples=samples, seconds=seconds, stats=stats)


# ---- faults --------------------------------------------------------------------------------

def _resync():
    dist.barrier()


def _run_batches(rb, rank, batches, fault=None):
    """Runs `batches` batches of step(); `fault(b, m)` may act inside the loop. Returns
    ("ok", None) or the packswap error's code, message and how long the failing call took."""
    ga = rb.ga
    for b in range(batches):
        local = [make_pack(b, rank, i) for i in range(ga)]
        start = time.monotonic()
        try:
            it = rb.step(local)
            for m in range(ga):
                start = time.monotonic()
                next(it)
                if fault is not None:
                    fault(b, m)
            start = time.monotonic()
            for _ in it:
                pass
        except packswap.Error as e:
            return ("error", e.code, str(e), time.monotonic() - start)
    return ("ok", None, None, 0.0)


def faults(rank, world, timeout):
    """The failures of one rank that every rank must turn into a clear error within the timeout,
    one after another in the same processes. Returns what each rank saw of each."""
    seen = {}
    baseline = threads()

    # 1. Bad input raises ValueError before any communication: afterwards a normal batch works.
    with Rebalancer(ga=2, cost=pack_cost, timeout=timeout) as rb:
        good = [make_pack(0, rank, i) for i in range(2)]
        bad_inputs = {
            "count": good[:1],
            "not a dict": [good[0], [torch.zeros(1)]],
            "not a tensor": [good[0], {"x": [1, 2]}],
            "key": [good[0], {3: torch.zeros(1)}],
            "device": [good[0], {"x": torch.empty(2, device="meta")}],
            "sparse": [good[0], {"x": torch.zeros(2, 2).to_sparse()}],
            "dtype": [good[0], {"x": torch.quantize_per_tensor(torch.zeros(2), 0.1, 0,
                                                                torch.quint8)}],
        }
        messages = {}
        for name, packs in bad_inputs.items():
            try:
                rb.submit(packs)
                messages[name] = None
            except ValueError as e:
                messages[name] = str(e)
        for name, fn in (("negative cost", lambda p: -1), ("float cost", lambda p: 0.5)):
            rb._cost = fn
            try:
                rb.submit(good)
                messages[name] = None
            except ValueError as e:
                messages[name] = str(e)
        rb._cost = pack_cost
        for name, call in (("acquire early", lambda: rb.acquire(0)),
                           ("release early", lambda: rb.release(0))):
            try:
                call()
                messages[name] = None
            except ValueError as e:
                messages[name] = str(e)
        ids = [micro["id"].tolist() for micro in rb.step(good)]
        seen["bad input"] = dict(messages=messages, ids=ids)

    # 2. Ranks constructed with different ga: every rank fails at construction.
    _resync()
    try:
        Rebalancer(ga=2 if rank == 1 else 4, cost=pack_cost, timeout=timeout).close()
        seen["different ga"] = None
    except packswap.Error as e:
        seen["different ga"] = (e.code, str(e))
    # ... or a different work_scale, with which the ranks could plan differently.
    _resync()
    try:
        Rebalancer(ga=4, cost=pack_cost, timeout=timeout,
                   work_scale=0.5 if rank == 1 else 1.0).close()
        seen["different work_scale"] = None
    except packswap.Error as e:
        seen["different work_scale"] = (e.code, str(e))

    # 3. One rank plans differently (as another solver or other options would): every rank
    # fails before anything of the batch is handed out.
    _resync()
    rb = Rebalancer(ga=4, cost=pack_cost, timeout=timeout)
    if rank == 1:
        rb._solve_kwargs["mode"] = "per_step"
    seen["plans differ"] = _run_batches(rb, rank, 1)
    rb.close()

    # 4-6. One rank fails mid-batch and stays alive: the others time out.
    def raise_mid_step(b, m):
        if rank == 1 and b == 1 and m == 1:
            raise RuntimeError("boom")

    bad_batches = {"malformed pack": [make_pack(9, rank, 0), {"x": "not a tensor"}],
                   "wrong pack count": [make_pack(9, rank, 0)] * 3}

    # The faulty rank 1 either closes its Rebalancer (leaving the `with`: the others see its
    # groups go) or keeps it open and falls silent (the others must time out).
    for name in ("raise mid-step", "malformed pack", "wrong pack count"):
        _resync()
        t0 = time.monotonic()
        rb = Rebalancer(ga=2, cost=pack_cost, timeout=timeout)
        try:
            if name == "raise mid-step":
                result = _run_batches(rb, rank, 4, raise_mid_step)
                rb.close()
            else:
                with rb:
                    result = _ahead_batches(rb, rank, 4, bad_batches[name])
        except (RuntimeError, ValueError) as e:
            result = ("raised", type(e).__name__, str(e), time.monotonic() - t0)
            if rank == 1:
                time.sleep(timeout + 2)  # alive, but silent
            rb.close()
        seen[name] = dict(result=result, worker_closed=rb._worker.closed,
                          threads_after=threads_settled(baseline), baseline=baseline,
                          thread_names=thread_names())
    return seen


def _ahead_batches(rb, rank, batches, bad_packs):
    """Like _run_batches, but submitting each next batch one ahead (after acquire(0)), as wrap()
    does; rank 1 submits `bad_packs` instead of batch 2."""
    ga = rb.ga
    start = time.monotonic()
    try:
        rb.submit([make_pack(0, rank, i) for i in range(ga)])
        for b in range(batches):
            for m in range(ga):
                start = time.monotonic()
                rb.acquire(m)
                if m == 0 and b + 1 < batches:
                    nxt = [make_pack(b + 1, rank, i) for i in range(ga)]
                    rb.submit(bad_packs if rank == 1 and b == 1 else nxt)
                start = time.monotonic()
                rb.release(m)
    except packswap.Error as e:
        return ("error", e.code, str(e), time.monotonic() - start)
    return ("ok", None, None, 0.0)


def dies(rank, world, timeout):
    """Rank 1's process ends mid-batch: the others fail fast."""
    with Rebalancer(ga=2, cost=pack_cost, timeout=timeout) as rb:
        def fault(b, m):
            if rank == 1 and b == 1 and m == 0:
                os._exit(3)
        return _run_batches(rb, rank, 4, fault)
