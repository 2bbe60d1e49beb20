"""packswap.torch.Rebalancer: the C++ engine's exchange, for torch.distributed trainers."""

import datetime
import itertools
import math
import sys
import warnings

import numpy as np
import torch
import torch.distributed as dist

from .. import _core
from .._errors import Error
from . import _groups, _wire

_MAGIC = 0x7061636B73776170  # "packswap"
_PROTOCOL = 2
_HEADER = 8  # words before the per-pack records of the metadata all-gather
_RECORD = 3  # words per pack: cost, padded bytes, schema words
_DIGEST = 4  # words of the per-batch digest all-gather

# Stages of a batch, in order: its metadata all-gather is in flight; the solve worker has it;
# its plan is known and the digest all-gather in flight; the digests agreed.
_GATHERING, _SOLVING, _PLANNED, _VERIFIED = range(4)
# The metadata all-gather per rank: a header of _HEADER words (magic, batch, packs, schema
# words, schema capacity, 0, 0, 0), _RECORD words per pack, then the schemas padded to the
# capacity.


class _Batch:
    __slots__ = ("index", "packs", "tensors", "flat", "capacity", "stage", "work", "mine",
                 "gathered", "costs", "sizes", "schema_words", "schema_at", "schemas", "need",
                 "ticket", "solution", "moved_steps", "submit_event")

    def __init__(self, index):
        self.index = index
        self.stage = _GATHERING
        self.costs = None
        self.work = None
        self.schemas = None
        self.solution = None
        self.submit_event = None


class _RecvPool:
    """Receive buffers for CPU exchanges, reused once nothing refers to them any more.

    Received tensors are views into their micro-step's buffer and may outlive the micro-step;
    a buffer is reused only after every such view is gone. Each buffer is a numpy array whose
    torch tensors (torch.from_numpy) hold a reference to it, so its reference count says whether
    any tensor still uses it. Reusing warm memory spares the page faults that a fresh buffer of
    megabytes costs on every micro-step. At most `keep` buffers are pooled; each grows (by half
    at least) to the largest micro-step seen; more in use at once are allocated unpooled."""

    def __init__(self, keep):
        self._keep = keep
        self._arrays = []

    def take(self, nbytes):
        free = [i for i in range(len(self._arrays)) if _unused(self._arrays[i])]
        for i in free:
            if self._arrays[i].nbytes >= nbytes:
                return torch.from_numpy(self._arrays[i][:nbytes])
        grown = max(nbytes, 4096)
        if free:
            i = free[0]
            grown = max(grown, self._arrays[i].nbytes * 3 // 2)
            self._arrays[i] = np.empty(grown, dtype=np.uint8)
            return torch.from_numpy(self._arrays[i][:nbytes])
        a = np.empty(grown, dtype=np.uint8)
        if len(self._arrays) < self._keep:
            self._arrays.append(a)
        return torch.from_numpy(a[:nbytes])

    def clear(self):
        self._arrays = []


def _unused(array):
    # Nobody else refers to a pooled array when its only references are the pool's list, this
    # function's parameter and getrefcount's own argument.
    return sys.getrefcount(array) <= 3


class _Exchange:
    __slots__ = ("seq", "batch", "step", "work", "recv", "recv_at", "holds", "empty")

    def __init__(self, seq, batch, step):
        self.seq = seq
        self.batch = batch
        self.step = step
        self.work = None
        self.recv = None
        self.recv_at = {}
        self.holds = []
        self.empty = True


class Rebalancer:
    """Balances the packs of a data-parallel torch.distributed job by swapping whole packs.

    Every global batch, each rank submits its ``ga * mbs`` packs (dicts of name -> tensor, all on
    this rank's device); the ranks all-gather each pack's cost and size (fixed-size int64
    tensors), every rank runs the same packswap solve on one worker thread, and the packs move
    with one ``all_to_all_single`` of bytes per micro-step, micro-step m+1 (up to
    ``prefetch_depth`` ahead) while the caller computes m. Packs that stay on their rank are
    handed out as the very objects submitted.

        with Rebalancer(ga=16, cost=lambda pack: vit_cost(pack)) as rb:
            for packs in rb.wrap(loader):          # balanced packs, one batch read ahead
                model(**packs).backward()
                ...

    Arguments:
        ga: micro-steps per global batch (gradient accumulation).
        cost: ``cost(pack) -> int >= 0``, the pack's compute cost in any integer unit that is the
            same on every rank (e.g. ``packswap.CostModel`` microseconds).
        group: the data-parallel process group (default: the whole world). The Rebalancer makes
            its own process groups over the same ranks (never the trainer's), so the constructor
            is collective over the whole world, like ``torch.distributed.new_group``.
        mbs: packs per micro-batch.
        prefetch_depth: micro-steps exchanged ahead of the one being computed (>= 1).
        eps: balance that may be traded for less movement (``packswap.solve``'s eps).
        work_scale: scales the solver's deterministic work bound (``packswap.solve``'s
            work_scale, in [0.001, 64]): below 1 a faster worst-case solve, for more bytes moved
            on the batches whose search needs the work.
        mode: ``"per_micro_step"`` (ranks meet every micro-step: FSDP, TP, EP) or
            ``"per_step"`` (DDP).
        device: where packs live; default: ``cuda:<current device>`` when the default group is
            NCCL, else CPU. CUDA packs move over an NCCL group on a side stream.
        timeout: seconds any collective or the solve may take before every rank fails with
            ``packswap.Error`` (code ``"timeout"``); also the process groups' timeout.
        ranks_per_node, inter_node_weight: the node layout the solver weighs moved bytes with.
        ctas: CTA (SM) limit of the NCCL exchange group: ``"auto"`` (the C++ ``cta_policy``
            rule: ``choose_ctas(exchange_bytes_hint, compute_ms_hint)``, 4 without hints), an
            int, or None for NCCL's default. Applied where torch exposes ``ncclConfig_t``
            (torch >= 2.1 built with NCCL >= 2.17); see ``ctas_applied``.

    Every rank must construct it with the same arguments (checked: a mismatch fails on every
    rank) and make the same sequence of calls. Collectives are issued only from the calling
    thread, at points fixed by that sequence. Not thread-safe: one thread drives a Rebalancer.
    """

    def __init__(self, ga, cost, group=None, mbs=1, prefetch_depth=1, eps=0.0, *,
                 mode="per_micro_step", device=None, timeout=600.0, ranks_per_node=0,
                 inter_node_weight=4, ctas="auto", exchange_bytes_hint=0, compute_ms_hint=0.0,
                 work_scale=1.0):
        self._closed = True  # until the constructor succeeds; close() is then a no-op
        self._worker = None
        self._groups = None
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("torch.distributed is not initialized: call "
                             "torch.distributed.init_process_group first")
        ga, mbs, prefetch_depth = (_int_arg(ga, "ga", 1), _int_arg(mbs, "mbs", 1),
                                   _int_arg(prefetch_depth, "prefetch_depth", 1))
        if prefetch_depth > 64:
            raise ValueError(f"prefetch_depth is {prefetch_depth}, must be in [1, 64]")
        if not callable(cost):
            raise ValueError(f"cost must be callable as cost(pack) -> int, got "
                             f"{type(cost).__name__}")
        if not (isinstance(eps, (int, float)) and 0.0 <= eps <= 1.0):
            raise ValueError(f"eps is {eps!r}, must be in [0, 1]")
        if not (isinstance(work_scale, (int, float)) and 0.001 <= work_scale <= 64.0):
            raise ValueError(f"work_scale is {work_scale!r}, must be in [0.001, 64]")
        if mode not in ("per_micro_step", "per-micro-step", "per_step", "per-step"):
            raise ValueError(f"mode is {mode!r}, expected 'per_micro_step' or 'per_step'")
        if isinstance(timeout, datetime.timedelta):
            timeout = timeout.total_seconds()
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout is {timeout!r} s, must be a positive number of seconds")
        ranks_per_node = _int_arg(ranks_per_node, "ranks_per_node", 0)
        inter_node_weight = _int_arg(inter_node_weight, "inter_node_weight", 1)
        if ctas is not None and ctas != "auto":
            ctas = _int_arg(ctas, "ctas", 1)
            if ctas > 64:
                raise ValueError(f"ctas is {ctas}, must be in [1, 64], 'auto' or None")

        self.ga = ga
        self.mbs = mbs
        self.prefetch_depth = prefetch_depth
        self.eps = float(eps)
        self.work_scale = float(work_scale)
        self.mode = mode.replace("-", "_")
        self.timeout = float(timeout)
        self._cost = cost
        self._ppr = ga * mbs
        self._solve_kwargs = dict(mbs=mbs, mode=self.mode, eps=self.eps,
                                  ranks_per_node=ranks_per_node,
                                  inter_node_weight=inter_node_weight,
                                  work_scale=self.work_scale)

        if device is None:
            # torch 2.x may name a mixed default backend, e.g. "cpu:gloo,cuda:nccl".
            if "nccl" in str(dist.get_backend()) and torch.cuda.is_available():
                device = torch.device("cuda", torch.cuda.current_device())
            else:
                device = torch.device("cpu")
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"device is {device}; packswap exchanges CPU tensors over Gloo and "
                             f"CUDA tensors over NCCL")
        self.device = device
        self._cuda = device.type == "cuda"

        self._groups = _groups.make(group, self._cuda, datetime.timedelta(seconds=timeout),
                                    ctas, exchange_bytes_hint, compute_ms_hint)
        self.rank = dist.get_rank(self._groups.meta)
        self.dp = dist.get_world_size(self._groups.meta)
        self.ctas_applied = self._groups.ctas
        if self._cuda and isinstance(ctas, int) and self.ctas_applied is None:
            warnings.warn(f"packswap: torch {torch.__version__} cannot limit a process group's "
                          f"CTAs (that needs torch >= 2.1 built with NCCL >= 2.17); the exchange "
                          f"runs with NCCL's own choice, ctas={ctas} is not applied",
                          RuntimeWarning, stacklevel=2)
        self._worker = _core.SolveWorker()
        self._closed = False
        self._failed = None
        self._submitted = 0
        self._released = 0
        self._issued = 0
        self._held = False
        self._batches = {}
        self._exchanges = {}
        self._retired = []
        self._solution = None
        self._costs = None
        self._nslots = prefetch_depth + 1
        self._schema_capacity = 24 * self._ppr  # words; grows to what the packs need
        self._zeros = torch.zeros(_wire.ALIGN, dtype=torch.uint8, device=device)
        # CUDA buffers come from torch's caching allocator, which reuses memory by itself.
        self._recv_pool = _RecvPool(self._nslots + 2)
        self._stream = torch.cuda.Stream(device=device) if self._cuda else None
        self._stats = dict(batches=0, micro_steps=0, packs_kept=0, packs_received=0,
                           bytes_sent=0, bytes_received=0, exchanges_skipped=0)
        try:
            self._handshake(ranks_per_node, inter_node_weight)
        except BaseException:
            self.close()
            raise

    # ---- the public calls --------------------------------------------------------------------

    def submit(self, packs):
        """Hands over this rank's ``ga * mbs`` packs of the next global batch, in loader order,
        and starts the metadata all-gather. At most one batch may be submitted ahead of the one
        being iterated. Raises ValueError (before any communication) for a wrong pack count, a
        pack that is not a dict of tensors on this device, or a cost that is not an int >= 0."""
        self._check_usable()
        packs = list(packs)
        if len(packs) != self._ppr:
            raise ValueError(f"rank {self.rank}: submit() got {len(packs)} packs, each rank "
                             f"submits ga * mbs = {self._ppr}")
        finished = self._released // self.ga
        if self._submitted - finished >= 2:
            raise ValueError(f"rank {self.rank}: submit() of batch {self._submitted} while "
                             f"batches {finished} and {finished + 1} are unfinished; submit at "
                             f"most one batch ahead")
        b = _Batch(self._submitted)
        b.packs = packs
        b.tensors, words_of = [], []
        costs = np.empty(self._ppr, dtype=np.int64)
        sizes = np.empty(self._ppr, dtype=np.int64)
        nwords = np.empty(self._ppr, dtype=np.int64)
        for i, pack in enumerate(packs):
            words, tensors, size = _wire.describe(pack, i, self.device, f"rank {self.rank}: ")
            costs[i] = _wire.cost_of(self._cost, pack, i, f"rank {self.rank}: ")
            sizes[i] = size
            nwords[i] = len(words)
            words_of.append(words)
            b.tensors.append(tensors)
        # The schemas ride along when they fit the capacity every rank agreed on so far; when
        # one rank's do not, a second all-gather carries them (see _plan).
        total = int(nwords.sum())
        b.capacity = self._schema_capacity
        block = np.zeros(b.capacity, dtype=np.int64)
        b.flat = list(itertools.chain.from_iterable(words_of))
        if total <= b.capacity:
            block[:total] = b.flat
        header = [_MAGIC, b.index, self._ppr, total, b.capacity, 0, 0, 0]
        records = np.stack([costs, sizes, nwords], axis=1).reshape(-1)
        b.mine = torch.from_numpy(np.concatenate([np.array(header, dtype=np.int64), records,
                                                  block]))
        if self._cuda:
            b.submit_event = torch.cuda.Event()
            b.submit_event.record(torch.cuda.current_stream(self.device))
        b.gathered = [torch.empty_like(b.mine) for _ in range(self.dp)]
        b.work = self._collective(b, "metadata all-gather", lambda: dist.all_gather(
            b.gathered, b.mine, group=self._groups.meta, async_op=True))
        self._batches[b.index] = b
        self._submitted += 1
        self._stats["batches"] += 1
        self._pump()

    def acquire(self, micro_step):
        """This rank's micro-batch ``micro_step`` of the current batch: the pack dict (mbs = 1) or
        a list of ``mbs`` pack dicts, in ascending pack id. Micro-steps are acquired in order,
        each released before the next. Blocks until the packs arrived (CPU), or makes the current
        CUDA stream wait for them (CUDA)."""
        self._check_usable()
        s = self._released
        k, m = divmod(s, self.ga)
        if self._held:
            raise ValueError(f"rank {self.rank}: acquire({micro_step}) while micro-step {m} is "
                             f"not released")
        if micro_step != m:
            raise ValueError(f"rank {self.rank}: acquire({micro_step}), the next micro-step of "
                             f"batch {k} is {m}")
        if k >= self._submitted:
            raise ValueError(f"rank {self.rank}: acquire({micro_step}) of batch {k}, which was "
                             f"not submitted")
        self._pump()
        b = self._batches[k]
        if b.stage < _VERIFIED:
            self._verify(b)
        ex = self._exchanges[s]
        if ex.work is not None:
            self._wait(ex.work, b, f"micro-step {m}: exchange")
            ex.work = None
        cell = b.solution.compute(self.rank, m)
        out = []
        base = self.rank * self._ppr
        for pack in cell:
            pack = int(pack)
            if base <= pack < base + self._ppr:
                out.append(b.packs[pack - base])
                self._stats["packs_kept"] += 1
            else:
                out.append(_wire.rebuild(ex.recv, ex.recv_at[pack], self._schema(b, pack)))
                self._stats["packs_received"] += 1
        if self._cuda and ex.recv is not None:
            # The views live on as long as the caller keeps them: the allocator must not hand
            # their memory out before the caller's stream is past their last use.
            ex.recv.record_stream(torch.cuda.current_stream(self.device))
        self._held = True
        self._solution = b.solution
        self._costs = b.costs
        return out[0] if self.mbs == 1 else out

    def release(self, micro_step):
        """Ends micro-step ``micro_step``: the exchanges further ahead may start. Received tensors
        stay valid as long as the caller holds them."""
        self._check_usable()
        s = self._released
        k, m = divmod(s, self.ga)
        if not self._held or micro_step != m:
            what = f"the acquired micro-step is {m}" if self._held else "nothing is acquired"
            raise ValueError(f"rank {self.rank}: release({micro_step}) but {what}")
        ex = self._exchanges.pop(s)
        if self._cuda:
            # What the exchange read and wrote stays referenced until the caller's stream is past
            # this point, so no allocator reuses it while a kernel may still touch it.
            done = torch.cuda.Event()
            done.record(torch.cuda.current_stream(self.device))
            self._retired.append((done, ex.holds, ex.recv))
            self._retired = [r for r in self._retired if not r[0].query()]
        self._held = False
        self._released += 1
        self._stats["micro_steps"] += 1
        if m == self.ga - 1:
            del self._batches[k]
        self._pump()

    def step(self, packs):
        """Submits this rank's packs of one global batch and returns an iterator over its ``ga``
        balanced micro-batches, in execution order (each a pack dict when mbs = 1, a list of
        ``mbs`` dicts otherwise). Micro-step m+1 is exchanged while the caller works on m."""
        if self._submitted * self.ga != self._released:
            raise ValueError(f"rank {self.rank}: step() while batch {self._released // self.ga} "
                             f"is unfinished; iterate the previous step() to its end")
        self.submit(packs)
        return self._iterate(self._submitted - 1)

    def wrap(self, iterable):
        """Balanced packs forever from a DataLoader-like iterable of packs: reads ``ga * mbs``
        packs at a time, one batch ahead (so its all-gather and solve overlap the current batch),
        and yields micro-batches as ``step`` does. Stops when the iterable cannot fill a batch
        (a partial last batch is dropped with a warning); every rank must stop at the same
        batch."""
        it = iter(iterable)

        def take():
            packs = list(itertools.islice(it, self._ppr))
            if 0 < len(packs) < self._ppr:
                warnings.warn(f"packswap: rank {self.rank}: the iterable ended with "
                              f"{len(packs)} packs, fewer than the ga * mbs = {self._ppr} of a "
                              f"batch; they were dropped", RuntimeWarning, stacklevel=3)
            return packs if len(packs) == self._ppr else None

        current = take()
        if current is None:
            return
        self.submit(current)
        while True:
            ahead = None
            for m in range(self.ga):
                cell = self.acquire(m)
                if m == 0:
                    ahead = take()
                    if ahead is not None:
                        self.submit(ahead)
                yield cell
                self.release(m)
            if ahead is None:
                return

    @property
    def solution(self):
        """The current batch's ``packswap.Solution`` (None before the first acquire): A, B,
        moved bytes in ``solution.metrics``, this rank's lists in ``solution.sends`` etc."""
        return self._solution

    @property
    def costs(self):
        """The current batch's gathered costs, an int64 array of (dp, ga * mbs): rank r's packs
        in the order r submitted them (None before the first acquire). With
        ``solution.metrics`` it tells what the batch would have cost without rebalancing."""
        return self._costs

    @property
    def stats(self):
        """Counters: batches, micro_steps, packs_kept, packs_received, bytes_sent,
        bytes_received, exchanges_skipped (micro-steps where no rank moved anything)."""
        return dict(self._stats)

    def close(self):
        """Waits for the collectives already issued (each bounded by the timeout), joins the
        solve worker and frees the process groups. Idempotent; the Rebalancer is unusable
        afterwards."""
        if self._closed:
            if self._worker is not None:
                self._worker.close()
            return
        self._closed = True
        try:
            for b in self._batches.values():
                _quiet_wait(b.work)
            for ex in self._exchanges.values():
                _quiet_wait(ex.work)
            if self._cuda:
                for done, _, _ in self._retired:
                    done.synchronize()
                self._stream.synchronize()
        finally:
            self._batches.clear()
            self._exchanges.clear()
            self._retired.clear()
            self._recv_pool.clear()
            self._worker.close()
            self._groups.destroy()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if not getattr(self, "_closed", True):
            warnings.warn("packswap.torch.Rebalancer was not closed: use it as a context "
                          "manager or call close()", ResourceWarning, stacklevel=2)

    # ---- the pipeline ------------------------------------------------------------------------

    def _iterate(self, k):
        for m in range(self.ga):
            if self._released != k * self.ga + m:
                raise ValueError(f"rank {self.rank}: the micro-batches of batch {k} were "
                                 f"acquired or released outside its step() iterator")
            cell = self.acquire(m)
            yield cell
            self.release(m)

    def _pump(self):
        """Moves every batch on by what the calls so far allow. Whether a collective starts here
        depends only on the sequence of calls, never on timing, so every rank starts the same
        collectives in the same order; what needs no collective (reading a finished metadata
        all-gather, handing the batch to the solve worker) happens as soon as it can."""
        for b in self._batches.values():
            if b.stage == _GATHERING and b.costs is None and b.work.is_completed():
                self._wait(b.work, b, "metadata all-gather")  # raises if it failed
                self._read_metadata(b)
                if b.schemas is not None:
                    self._solve(b)
        while (self._issued < self._released + self._nslots
               and self._issued // self.ga < self._submitted):
            s = self._issued
            b = self._batches[s // self.ga]
            if b.stage < _PLANNED:
                self._plan(b)
            self._issue(s, b)
            self._issued += 1

    def _plan(self, b):
        """Brings batch b to its plan, waiting for what is missing, and starts the digest
        all-gather. Called where its first exchange must start: the same call on every rank."""
        if b.stage == _GATHERING:
            if b.costs is None:
                self._wait(b.work, b, "metadata all-gather")
                self._read_metadata(b)
            if b.schemas is None:
                # Every rank saw the same totals: all make the same second all-gather here and
                # grow the capacity alike (with room, so that it rarely happens twice).
                self._schema_capacity = max(self._schema_capacity, b.need + b.need // 4)
                mine = np.zeros(b.need, dtype=np.int64)
                mine[:len(b.flat)] = b.flat
                b.mine = torch.from_numpy(mine)
                b.gathered = [torch.empty_like(b.mine) for _ in range(self.dp)]
                b.work = self._collective(b, "schema all-gather", lambda: dist.all_gather(
                    b.gathered, b.mine, group=self._groups.meta, async_op=True))
                self._wait(b.work, b, "schema all-gather")
                b.schemas = torch.stack(b.gathered).numpy()
            self._solve(b)
        try:
            sol = self._worker.result(b.ticket, self.timeout)
        except (ValueError, RuntimeError) as e:
            raise self._fail("mismatch" if isinstance(e, ValueError) else "internal",
                             f"batch {b.index}: the solve failed: {e}") from e
        if sol is None:
            raise self._fail("timeout", f"batch {b.index}: the solve took longer than "
                                        f"{self.timeout:g} s")
        b.solution = sol
        src = np.repeat(np.arange(self.dp), self._ppr)
        moved = sol.rank != src
        b.moved_steps = np.bincount(sol.micro_step[moved], minlength=self.ga)
        meta_digest = _core.digest(np.concatenate(
            [b.costs.reshape(-1), b.sizes.reshape(-1), b.schema_words.reshape(-1),
             b.schemas.reshape(-1)]))
        words = [_MAGIC ^ 1, b.index, meta_digest, sol.digest()]
        b.mine = torch.tensor([_signed(w) for w in words], dtype=torch.int64)
        b.gathered = [torch.empty_like(b.mine) for _ in range(self.dp)]
        b.work = self._collective(b, "digest all-gather", lambda: dist.all_gather(
            b.gathered, b.mine, group=self._groups.meta, async_op=True))
        b.stage = _PLANNED

    def _verify(self, b):
        """Waits for batch b's digests: nothing of it is handed out before every rank gathered
        the same metadata and solved the same plan."""
        self._wait(b.work, b, "digest all-gather")
        b.work = None
        mine = b.mine.tolist()
        for r, t in enumerate(b.gathered):
            theirs = t.tolist()
            if theirs[:2] != mine[:2]:
                raise self._fail("mismatch", f"batch {b.index}: rank {r} checks batch "
                                             f"{theirs[1]}: the ranks' calls went apart")
            if theirs[2] != mine[2]:
                raise self._fail("mismatch", f"batch {b.index}: rank {r} gathered other "
                                             f"metadata (digest {_hex(theirs[2])}, here "
                                             f"{_hex(mine[2])})")
            if theirs[3] != mine[3]:
                raise self._fail("mismatch", f"batch {b.index}: rank {r} solved another plan "
                                             f"(digest {_hex(theirs[3])}, here "
                                             f"{_hex(mine[3])})")
        b.gathered = b.mine = None
        b.stage = _VERIFIED

    def _read_metadata(self, b):
        """Reads the gathered metadata of batch b (b.schemas stays None when one rank's schemas
        did not fit the capacity)."""
        rows = torch.stack(b.gathered).numpy()
        b.gathered = None
        want = [_signed(_MAGIC), b.index, self._ppr]
        for r in range(self.dp):
            h = rows[r, :_HEADER].tolist()
            if h[:3] != want or h[4] != b.capacity:
                raise self._fail("mismatch", f"batch {b.index}: rank {r} sent the metadata "
                                             f"header {h[:5]}, expected batch {b.index} of "
                                             f"{self._ppr} packs, schema capacity "
                                             f"{b.capacity}")
        end = _HEADER + _RECORD * self._ppr
        records = rows[:, _HEADER:end].reshape(self.dp, self._ppr, _RECORD)
        b.costs = records[:, :, 0].copy()
        b.sizes = records[:, :, 1].copy()
        b.schema_words = records[:, :, 2].copy()
        b.schema_at = np.zeros_like(b.schema_words)
        b.schema_at[:, 1:] = np.cumsum(b.schema_words[:, :-1], axis=1)
        b.need = int(rows[:, 3].max())
        b.schemas = rows[:, end:].copy() if b.need <= b.capacity else None

    def _solve(self, b):
        """Hands batch b to the solve worker: from here to its first exchange it is solved off
        the caller's thread."""
        src = np.repeat(np.arange(self.dp, dtype=np.int64), self._ppr)
        b.ticket = self._worker.submit(b.costs.reshape(-1), b.sizes.reshape(-1), src,
                                       dp=self.dp, ga=self.ga, plan_rank=self.rank,
                                       **self._solve_kwargs)
        b.work = b.gathered = b.mine = None
        b.stage = _SOLVING

    def _schema(self, b, pack):
        r, i = divmod(pack, self._ppr)
        return _wire.parse(b.schemas[r], int(b.schema_at[r, i]))

    def _issue(self, s, b):
        """Starts the exchange of micro-step s: every rank takes part, with the split sizes every
        rank derives from the same plan."""
        m = s % self.ga
        ex = _Exchange(s, b.index, m)
        self._exchanges[s] = ex
        if b.moved_steps[m] == 0:
            self._stats["exchanges_skipped"] += 1
            return
        sol = b.solution
        sends = sol.sends(self.rank, m)
        receives = sol.receives(self.rank, m)
        send_split = [0] * self.dp
        recv_split = [0] * self.dp
        base = self.rank * self._ppr
        for pack, peer in sends.tolist():
            send_split[peer] += int(b.sizes[self.rank, pack - base])
        offset = 0
        for pack, peer in receives.tolist():
            size = int(b.sizes.reshape(-1)[pack])
            recv_split[peer] += size
            ex.recv_at[pack] = offset
            offset += size
        self._stats["bytes_sent"] += sum(send_split)
        self._stats["bytes_received"] += offset

        def start():
            pieces = []
            for pack, _ in sends.tolist():
                pieces += _wire.byte_pieces(b.tensors[pack - base], self._zeros)
            if len(pieces) == 1:
                send = pieces[0]  # one contiguous tensor: sent where it lies
            elif pieces:
                send = torch.cat(pieces)
            else:
                send = torch.empty(0, dtype=torch.uint8, device=self.device)
            recv = (torch.empty(offset, dtype=torch.uint8, device=self.device) if self._cuda
                    else self._recv_pool.take(offset))
            ex.recv = recv
            ex.holds = [send, b.tensors]
            return dist.all_to_all_single(recv, send, recv_split, send_split,
                                          group=self._groups.exchange, async_op=True)

        if self._cuda:
            with torch.cuda.stream(self._stream):
                self._stream.wait_event(b.submit_event)
                ex.work = self._collective(b, f"micro-step {m}: exchange", start)
        else:
            ex.work = self._collective(b, f"micro-step {m}: exchange", start)

    # ---- errors ------------------------------------------------------------------------------

    def _collective(self, b, what, start):
        try:
            return start()
        except Exception as e:
            code = _code_of(e)
            raise self._fail(code, f"batch {b.index}, {what} could not start: {e}"
                             f"{self._hint(code)}") from e

    def _wait(self, work, b, what):
        try:
            work.wait()
        except Exception as e:
            code = _code_of(e)
            raise self._fail(code, f"batch {b.index}, {what} failed: {e}{self._hint(code)}") from e

    def _hint(self, code):
        if code == "timeout":
            return (f" (not every rank took part within the timeout of {self.timeout:g} s: a "
                    f"rank failed, hangs, or stopped calling its Rebalancer)")
        return " (a rank failed or left)"

    def _fail(self, code, message):
        if self._failed is None:
            self._failed = (code, f"rank {self.rank}: {message}")
        return Error(*self._failed)

    def _check_usable(self):
        if self._failed is not None:
            raise Error(*self._failed)
        if self._closed:
            raise Error("cancelled", "this Rebalancer was closed")

    def _handshake(self, ranks_per_node, inter_node_weight):
        # The library's version too: another solver may plan the same batch differently.
        major, minor, patch = (int(x) for x in _core.__version__.split("."))
        names = ["protocol", "packswap version", "ga", "mbs", "prefetch_depth", "eps_ppm", "mode",
                 "ranks_per_node", "inter_node_weight", "dp", "device_type",
                 "work_scale_permille"]
        values = [_PROTOCOL, major * 1_000_000 + minor * 1_000 + patch, self.ga, self.mbs,
                  self.prefetch_depth, round(self.eps * 1e6),
                  0 if self.mode == "per_micro_step" else 1, ranks_per_node, inter_node_weight,
                  self.dp, 1 if self._cuda else 0, round(self.work_scale * 1000)]
        mine = torch.tensor([_signed(_MAGIC)] + values, dtype=torch.int64)
        gathered = [torch.empty_like(mine) for _ in range(self.dp)]
        try:
            dist.all_gather(gathered, mine, group=self._groups.meta, async_op=True).wait()
        except Exception as e:
            raise Error(_code_of(e), f"rank {self.rank}: the configuration handshake failed: "
                                     f"{e}") from e
        problems = []
        for r, t in enumerate(gathered):
            theirs = t.tolist()
            if theirs[0] != mine[0].item():
                problems.append(f"rank {r} is not a packswap Rebalancer of this protocol")
                continue
            for name, a, b in zip(names, values, theirs[1:]):
                if a != b:
                    problems.append(f"rank {r} has {name}={b}, rank {self.rank} has {name}={a}")
        if problems:
            raise Error("mismatch", f"rank {self.rank}: the ranks were constructed differently: "
                                    + "; ".join(problems))


def _int_arg(value, name, lowest):
    if isinstance(value, bool):
        raise ValueError(f"{name} is {value!r}, must be an int >= {lowest}")
    try:
        value = int(value) if isinstance(value, np.integer) else value
        if not isinstance(value, int) or value < lowest:
            raise TypeError
    except TypeError:
        raise ValueError(f"{name} is {value!r}, must be an int >= {lowest}") from None
    return value


def _signed(word):
    word = int(word) & (2**64 - 1)
    return word - 2**64 if word >= 2**63 else word


def _hex(word):
    return f"{word & (2**64 - 1):016x}"


def _code_of(e):
    text = str(e)
    if "imed out" in text or "imeout" in text:
        return "timeout"
    return "transport"


def _quiet_wait(work):
    if work is None:
        return
    try:
        work.wait()
    except Exception:  # closing: the failure was (or will be) reported by the call that met it
        pass
