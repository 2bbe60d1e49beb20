"""scripts/fewest_within_limit.py against exhaustive search: on small batches (ties, zeros, tight
and loose limits) its integer program finds exactly the fewest bytes any assignment keeping
A = LB_A and every load within the limit moves."""

import itertools
import pathlib
import random
import sys

import pytest

pytest.importorskip("scipy")

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import fewest_within_limit as fw  # noqa: E402


def exhaustive(costs, bytes_, homes, dp, ga, limit):
    """The fewest bytes over every split of the packs into dp ranks of ga packs (None if none
    fits), each rank's packs fitting its slots under the caps and its load within the limit."""
    _, caps = fw.levels(costs, dp, ga)
    best = None

    def deal(rank, left, ranks):
        nonlocal best
        if rank == dp:
            moved = fw.moved_bytes(bytes_, homes, ranks)
            best = moved if best is None else min(best, moved)
            return
        for group in itertools.combinations(left, ga):
            held = [costs[p] for p in group]
            if sum(held) > limit or not fw.fits(held, caps):
                continue
            for p in group:
                ranks[p] = rank
            deal(rank + 1, [p for p in left if p not in group], ranks)

    deal(0, list(range(len(costs))), [0] * len(costs))
    return best


def batch(rng, dp, ga, kind):
    n = dp * ga
    if kind == "ties":
        costs = [rng.choice([0, 5, 5, 9]) for _ in range(n)]
    elif kind == "zeros":
        costs = [0 if rng.random() < 0.3 else rng.randint(1, 40) for _ in range(n)]
    else:
        costs = [rng.randint(1, 100) for _ in range(n)]
    bytes_ = [rng.randint(0, 50) for _ in range(n)]
    homes = [p // ga for p in range(n)]
    return costs, bytes_, homes


SHAPES = [(2, 3), (3, 2), (2, 4), (3, 3), (4, 2)]
KINDS = ["distinct", "ties", "zeros"]


def cases(dp, ga, kind):
    """Six batches of the shape and kind, each under limits from the mean load (often no split
    fits) to none at all: (costs, bytes, homes, limit)."""
    rng = random.Random(1000 * dp + 10 * ga + len(kind))
    for _ in range(6):
        costs, bytes_, homes = batch(rng, dp, ga, kind)
        total = sum(costs)
        for limit in sorted({-(-total // dp), -(-total // dp) + 3, max(costs) * ga, total}):
            yield costs, bytes_, homes, limit


@pytest.mark.parametrize("dp,ga", SHAPES)
@pytest.mark.parametrize("kind", KINDS)
def test_the_program_finds_the_fewest_bytes_within_the_limit(dp, ga, kind):
    solved = 0
    for costs, bytes_, homes, limit in cases(dp, ga, kind):
        want = exhaustive(costs, bytes_, homes, dp, ga, limit)
        if want is None:
            continue
        lower, upper, ranks = fw.fewest(costs, bytes_, homes, dp, ga, limit, time_limit=30)
        assert lower == upper == want, (costs, bytes_, limit)
        assert fw.check(costs, homes, ranks, dp, ga, limit)
        assert fw.moved_bytes(bytes_, homes, ranks) == want
        solved += 1
    assert solved >= 6


def test_the_cases_include_limits_that_cost_bytes():
    binding = 0
    for dp, ga in SHAPES:
        for kind in KINDS:
            for costs, bytes_, homes, limit in cases(dp, ga, kind):
                want = exhaustive(costs, bytes_, homes, dp, ga, limit)
                free = exhaustive(costs, bytes_, homes, dp, ga, sum(costs))
                binding += want is not None and want > free
    assert binding >= 20


def test_records_name_their_batch_files(tmp_path):
    record = {"dist": "synthetic:vlm", "dp": 4, "ga": 16, "mbs": 1, "seed": 7}
    assert fw.batch_file(tmp_path, record) == tmp_path / "synthetic_vlm-4x16-s7.csv"
    (tmp_path / "b.csv").write_text("pack,source_rank,cost,bytes\n0,0,5,9\n1,1,3,2\n")
    costs, bytes_, homes = fw.read_batch(tmp_path / "b.csv")
    assert list(costs) == [5, 3] and list(bytes_) == [9, 2] and list(homes) == [0, 1]
