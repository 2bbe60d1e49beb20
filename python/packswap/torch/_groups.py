"""The process groups a Rebalancer makes for itself: a Gloo group for metadata and an exchange
group (Gloo for CPU packs, NCCL for CUDA packs) over the ranks of the trainer's data-parallel
group, so that its collectives never queue behind or between the trainer's own."""

import torch
import torch.distributed as dist

from .. import _core


class Groups:
    def __init__(self, meta, exchange, owned, ctas):
        self.meta = meta
        self.exchange = exchange
        self._owned = owned
        self.ctas = ctas

    def destroy(self):
        """Destroys the groups; their threads and sockets go with the last reference, so none
        is kept here."""
        owned, self._owned = self._owned, []
        self.meta = self.exchange = None
        for g in owned:
            try:
                dist.destroy_process_group(g)
            except Exception:  # already gone (the default group was destroyed first)
                pass


def group_ranks(group):
    """The global ranks of `group`, in group-rank order."""
    if hasattr(dist, "get_process_group_ranks"):
        return list(dist.get_process_group_ranks(group))
    ranks = dist.distributed_c10d._pg_group_ranks[group]  # torch before 1.13
    return [g for g, _ in sorted(ranks.items(), key=lambda kv: kv[1])]


def nccl_options(ctas, bytes_hint, compute_ms_hint):
    """ProcessGroupNCCL options limiting the exchange group's CTAs, and the limit applied.

    torch exposes ``ncclConfig_t`` as ``ProcessGroupNCCL.Options().config`` from 2.1 on, when
    built with NCCL 2.17 or newer; older versions get None (NCCL's own CTA choice)."""
    if ctas is None:
        return None, None
    if ctas == "auto":
        ctas = _core_choose_ctas(bytes_hint, compute_ms_hint)
    pg_nccl = getattr(dist, "ProcessGroupNCCL", None)
    options = pg_nccl.Options() if pg_nccl is not None else None
    config = getattr(options, "config", None)
    if config is None or not hasattr(config, "max_ctas"):
        return None, None
    config.min_ctas = ctas
    config.max_ctas = ctas
    return options, ctas


def _core_choose_ctas(bytes_hint, compute_ms_hint):
    """The C++ cta_policy::automatic() rule (include/packswap/exchange/cta.hpp)."""
    return _core.choose_ctas(int(bytes_hint), int(compute_ms_hint * 1e6))


def make(group, cuda, timeout, ctas, bytes_hint, compute_ms_hint):
    """New groups over the ranks of `group` (None: the world). new_group is collective over the
    whole world, so with a subgroup every rank learns every rank's data-parallel group first and
    all create all of them, in the same order."""
    world = dist.get_world_size()
    if group is None or group is dist.group.WORLD:
        member_lists = [None]
    else:
        if group is dist.GroupMember.NON_GROUP_MEMBER:
            raise ValueError("this rank is not a member of `group`")
        mine = group_ranks(group)
        probe = dist.new_group(backend="gloo", timeout=timeout)
        try:
            row = torch.full((world + 1,), -1, dtype=torch.int64)
            row[0] = len(mine)
            row[1:1 + len(mine)] = torch.tensor(mine, dtype=torch.int64)
            rows = [torch.empty_like(row) for _ in range(world)]
            dist.all_gather(rows, row, group=probe)
        finally:
            dist.destroy_process_group(probe)
        member_lists = []
        for r in rows:
            ranks = r[1:1 + int(r[0])].tolist()
            if ranks not in member_lists:
                member_lists.append(ranks)
    options, applied = (nccl_options(ctas, bytes_hint, compute_ms_hint) if cuda
                        else (None, None))
    meta = exchange = None
    owned = []
    me = dist.get_rank()
    for ranks in member_lists:
        g_meta = dist.new_group(ranks, backend="gloo", timeout=timeout)
        kwargs = dict(backend="nccl" if cuda else "gloo", timeout=timeout)
        if options is not None:
            kwargs["pg_options"] = options
        g_exchange = dist.new_group(ranks, **kwargs)
        if ranks is None or me in ranks:
            meta, exchange = g_meta, g_exchange
            owned += [g_meta, g_exchange]
    return Groups(meta, exchange, owned, applied)

