"""The public methods packswap is compared against, for one global batch of dp ranks x ga
micro-steps with one pack per cell (mbs 1), written from their published descriptions as the C++
benchmarks' bench/support/baselines.hpp writes them (same orders, same tie-breaks).

Each method maps the solver's input (one integer cost per pack, pack p loaded by rank p // ga) to
a cell per pack: ``(rank, micro_step)`` as two int arrays. Costs are what a trainer knows before
running the batch: the cost model's prediction, not the measured time.
"""

from __future__ import annotations

import heapq
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

Cells = Tuple[np.ndarray, np.ndarray]


def _check(costs: Sequence[int], dp: int, ga: int) -> np.ndarray:
    c = np.asarray(costs, dtype=np.int64)
    if dp < 1 or ga < 1:
        raise ValueError(f"dp {dp} and ga {ga} must be >= 1")
    if c.ndim != 1 or c.size != dp * ga:
        raise ValueError(f"got {c.size} costs, dp {dp} x ga {ga} needs {dp * ga}")
    if c.size and c.min() < 0:
        raise ValueError(f"pack {int(np.argmin(c))} has cost {int(c.min())}, must be >= 0")
    return c


def by_cost(costs: np.ndarray) -> np.ndarray:
    """Pack ids by cost descending, ties by id."""
    return np.lexsort((np.arange(costs.size), -costs))


def _heavy_first_steps(costs: np.ndarray, dp: int, rank_of: np.ndarray) -> Cells:
    """Given each pack's rank, each rank computes its packs heaviest first."""
    step = np.zeros(costs.size, dtype=np.int64)
    fill = np.zeros(dp, dtype=np.int64)
    for p in by_cost(costs):
        r = rank_of[p]
        step[p] = fill[r]
        fill[r] += 1
    return rank_of.astype(np.int64), step


def no_rebalancing(costs: Sequence[int], dp: int, ga: int) -> Cells:
    """Every rank computes what its loader produced, in loader order."""
    c = _check(costs, dp, ga)
    p = np.arange(c.size)
    return p // ga, p % ga


def local_reordering(costs: Sequence[int], dp: int, ga: int) -> Cells:
    """Each rank keeps its own packs and computes them heaviest first (ties by pack id): no
    communication (packswap's ``local_placement``, the simulator's ``local``)."""
    c = _check(costs, dp, ga)
    return _heavy_first_steps(c, dp, np.arange(c.size) // ga)


def lpt_per_micro_step(costs: Sequence[int], dp: int, ga: int) -> Cells:
    """Equal-count LPT one micro-step at a time (Megatron Bridge's MIMO reorder buffer, VeOmni):
    micro-step m takes the m-th loaded pack of every rank, and its packs, heaviest first, go to
    the least-loaded rank of that micro-step that still has room (ties: lowest rank). With one
    pack per cell that rank is the lowest one not yet given a pack, so the method only permutes
    each micro-step's packs among the ranks: the heaviest to rank 0, the next to rank 1, ..."""
    c = _check(costs, dp, ga)
    rank = np.zeros(c.size, dtype=np.int64)
    step = np.zeros(c.size, dtype=np.int64)
    for m in range(ga):
        ids = np.arange(dp) * ga + m
        ids = ids[np.lexsort((ids, -c[ids]))]
        rank[ids] = np.arange(dp)
        step[ids] = m
    return rank, step


def karmarkar_karp(costs: Sequence[int], dp: int, ga: int) -> Cells:
    """Equal-size Karmarkar-Karp over the whole batch (verl's sequence-length balancing):
    packs by cost descending cut into chunks of dp, each chunk a partial solution of dp sets of
    one pack; the two partial solutions with the largest spread (max - min set sum; ties: lowest
    index) are merged, the heaviest set of one with the lightest of the other, until one remains;
    its set i goes to rank i, which computes it heaviest first."""
    c = _check(costs, dp, ga)
    order = by_cost(c)
    sums: List[List[int]] = []
    items: List[List[List[int]]] = []
    for chunk in range(c.size // dp):
        ids = order[chunk * dp:(chunk + 1) * dp]
        sums.append([int(c[p]) for p in ids])
        items.append([[int(p)] for p in ids])
    heap = [(-(s[0] - s[-1]), i) for i, s in enumerate(sums)]
    heapq.heapify(heap)
    while len(heap) > 1:
        _, x = heapq.heappop(heap)
        _, y = heapq.heappop(heap)
        merged = [(sums[x][i] + sums[y][dp - 1 - i], items[x][i] + items[y][dp - 1 - i])
                  for i in range(dp)]
        # stable sort by sum descending, as std::stable_sort on the merged index order
        merged = [merged[i] for i in sorted(range(dp), key=lambda i: -merged[i][0])]
        sums[x] = [m[0] for m in merged]
        items[x] = [m[1] for m in merged]
        heapq.heappush(heap, (-(sums[x][0] - sums[x][-1]), x))
    rank_of = np.zeros(c.size, dtype=np.int64)
    final = heap[0][1]
    for r in range(dp):
        rank_of[items[final][r]] = r
    return _heavy_first_steps(c, dp, rank_of)


BASELINES: Dict[str, Tuple[str, Callable[[Sequence[int], int, int], Cells]]] = {
    "none": ("no rebalancing: loader order", no_rebalancing),
    "local": ("local reordering: each rank sorts its own packs", local_reordering),
    "lpt": ("LPT per micro-step (Megatron Bridge reorder buffer)", lpt_per_micro_step),
    "kk": ("Karmarkar-Karp over the batch (verl)", karmarkar_karp),
}
"""name -> (what it is, function), in reporting order."""


def loads(times: Sequence[float], cells: Cells, dp: int, ga: int) -> np.ndarray:
    """(dp, ga) array: the summed time of the packs of each cell."""
    rank, step = cells
    out = np.zeros((dp, ga), dtype=np.float64)
    np.add.at(out, (np.asarray(rank), np.asarray(step)), np.asarray(times, dtype=np.float64))
    return out


def a_of(load: np.ndarray) -> float:
    """A: per micro-step, the slowest rank; summed over micro-steps."""
    return float(load.max(axis=0).sum())


def b_of(load: np.ndarray) -> float:
    """B: the slowest rank's total."""
    return float(load.sum(axis=1).max())


def lb_a(times: Sequence[float], dp: int, ga: int) -> float:
    """The optimum of A over every placement of one pack per cell: times descending, cut into ga
    groups of dp, the groups' maxima summed."""
    t = np.sort(np.asarray(times, dtype=np.float64))[::-1]
    return float(t[::dp][:ga].sum())


def lb_b(times: Sequence[float], dp: int) -> float:
    """A lower bound on B: max(total / dp, largest pack)."""
    t = np.asarray(times, dtype=np.float64)
    return float(max(t.sum() / dp, t.max(initial=0.0)))


def waste(total: float, dp: int, step: float) -> float:
    """Straggler waste 1 - ideal / actual, ideal = total / dp (perfectly even load)."""
    return 0.0 if step <= 0 else 1.0 - (total / dp) / step
