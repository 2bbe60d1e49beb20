"""packswap.torch.Rebalancer delivers every pack to its planned (rank, micro-step) exactly once,
intact; kept packs are the objects submitted. World sizes 1-4 x ga 1, 2, 4 x mbs 1, 2, on Gloo."""

import itertools

import pytest

import distributed
import ranks

CONFIGS = list(itertools.product([1, 2, 4], [1, 2]))
BATCHES = 3


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_pack_arrives_once_at_its_planned_cell_and_intact(world):
    results = distributed.run(ranks.delivery, world, CONFIGS, BATCHES)
    for ci, (ga, mbs) in enumerate(CONFIGS):
        ppr = ga * mbs
        per_rank = [r[ci] for r in results]
        for b in range(BATCHES):
            # Every rank solved the same batch identically.
            cells = per_rank[0]["cells"][b]
            assert all(r["cells"][b] == cells for r in per_rank)
            rank_of, step_of = cells
            delivered = sorted(p for r in per_rank for p, _ in r["got"][b])
            assert delivered == list(range(world * ppr))  # each pack exactly once
            for r, got in enumerate(per_rank):
                for pack, m in got["got"][b]:
                    assert (rank_of[pack], step_of[pack]) == (r, m)
        stats = [r["stats"] for r in per_rank]
        assert sum(s["packs_kept"] + s["packs_received"] for s in stats) == world * ppr * BATCHES
        assert sum(s["bytes_sent"] for s in stats) == sum(s["bytes_received"] for s in stats)
        if world > 1 and ga > 1:
            assert sum(s["packs_received"] for s in stats) > 0  # the costs make packs move


def test_a_data_parallel_subgroup_balances_within_itself():
    results = distributed.run(ranks.subgroups, 4)
    for rank, r in enumerate(results):
        group = {0, 1} if rank < 2 else {2, 3}
        assert set(r["seen"]) <= group
    assert sum(r["moved"] for r in results) > 0
