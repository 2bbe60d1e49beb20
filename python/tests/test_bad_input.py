"""Bad input to the solver raises ValueError with the C++ message; nothing crashes."""

import math

import numpy as np
import pytest

import packswap

COST = np.array([5, 1, 4, 2, 3, 3, 0, 7], dtype=np.int64)
BYTES = np.full(8, 100, dtype=np.int64)
SOURCE = np.repeat(np.arange(2, dtype=np.int64), 4)


def solve(cost=COST, nbytes=BYTES, source=SOURCE, **kw):
    kw.setdefault("dp", 2)
    kw.setdefault("ga", 4)
    return packswap.solve(cost, nbytes, source, **kw)


@pytest.mark.parametrize("args, message", [
    (dict(cost=np.where(np.arange(8) == 3, -7, COST)),
     r"packswap \[invalid_argument\]: pack 3 has cost -7, must be >= 0"),
    (dict(nbytes=np.where(np.arange(8) == 5, -1, BYTES)),
     r"pack 5 has -1 bytes, must be >= 0"),
    (dict(cost=COST[:7]), r"one entry per pack; got 7, 8 and 8 entries"),
    (dict(dp=3), r"got 8 packs, shape dp=3 ga=4 mbs=1 needs 12"),
    (dict(ga=2, mbs=3), r"got 8 packs, shape dp=2 ga=2 mbs=3 needs 12"),
    (dict(eps=1.5), r"eps is 1.5, must be in \[0, 1\]"),
    (dict(eps=-0.1), r"eps is -0.1, must be in \[0, 1\]"),
    (dict(eps=math.nan), r"eps is nan, must be in \[0, 1\]"),
    (dict(work_scale=0.0), r"work_scale is 0, must be in \[0.001, 64\]"),
    (dict(work_scale=100.0), r"work_scale is 100, must be in \[0.001, 64\]"),
    (dict(work_scale=math.nan), r"work_scale is nan, must be in \[0.001, 64\]"),
    (dict(cost=COST.astype(np.float64)), r"cost must hold integers, got dtype float64"),
    (dict(nbytes=BYTES.astype(np.float32)), r"bytes must hold integers, got dtype float32"),
    (dict(cost=COST.reshape(2, 4)), r"cost must be 1-D, got an array of shape \(2, 4\)"),
    (dict(source=np.int64(0)), r"source_rank must be a 1-D integer array-like, got int64"),
    (dict(cost=COST > 2), r"cost must hold integers, got dtype bool"),
    (dict(cost=[1.5] * 8), r"cost must hold integers, got dtype float64"),
    (dict(cost=["a"] * 8), r"cost must hold integers, got dtype <U1"),
    (dict(cost=[2**70] * 8), r"cost must hold integers, got dtype object"),
    (dict(cost=np.full(8, 2**63, dtype=np.uint64)), r"cost\[0\] is 9223372036854775808, beyond"),
    (dict(dp=0), r"dp is 0, must be at least 1"),
    (dict(ga=0), r"ga is 0, must be at least 1"),
    (dict(ga=-4), r"ga is -4, must be at least 1"),
    (dict(mbs=0), r"mbs is 0, must be at least 1"),
    (dict(dp=2**40), r"dp is 1099511627776, beyond the int32 range"),
    (dict(source=np.where(np.arange(8) == 6, 2, SOURCE)), r"pack 6 has source rank 2, dp is 2"),
    (dict(source=np.where(np.arange(8) == 6, -1, SOURCE)), r"pack 6 has source rank -1, dp is 2"),
    (dict(source=np.where(np.arange(8) == 6, 2**32, SOURCE)),
     r"pack 6 has source rank 4294967296, dp is 2"),
    (dict(source=np.array([0, 0, 0, 0, 0, 1, 1, 1])),
     r"source rank 0 owns 5 packs, each rank must own ga \* mbs = 4"),
    (dict(mode="fast"), r"mode is 'fast', expected 'per_micro_step' or 'per_step'"),
    (dict(plan_rank=2), r"plan_rank is 2, must be -1 \(all ranks\) or in \[0, 2\)"),
    (dict(ranks_per_node=-1), r"ranks per node is -1, must be at least 1"),
    (dict(ranks_per_node=1, inter_node_weight=0), r"inter-node weight is 0, must be in"),
    (dict(node_map=[0, -3]), r"rank 1 is mapped to node -3, must be >= 0"),
    (dict(cost=np.full(8, 2**62, dtype=np.int64)), r"the cost sum overflows int64 at pack 1"),
])
def test_bad_input_raises_value_error_with_the_cpp_message(args, message):
    with pytest.raises(ValueError, match=message):
        solve(**args)
    with pytest.raises(ValueError, match=message):
        packswap.Solver().solve(**{"cost": COST, "bytes": BYTES, "source_rank": SOURCE,
                                   "dp": 2, "ga": 4,
                                   **{("bytes" if k == "nbytes" else
                                       "source_rank" if k == "source" else k): v
                                      for k, v in args.items()}})


def test_a_cuda_tensor_or_an_unconvertible_object_is_a_value_error():
    with pytest.raises(ValueError, match="cost must be a 1-D integer array-like"):
        solve(cost=object())
    with pytest.raises(ValueError, match="cost must"):
        solve(cost=None)


def test_random_garbage_never_crashes():
    rng = np.random.default_rng(0)
    makers = [
        lambda n: rng.integers(-5, 50, n),
        lambda n: rng.integers(0, 50, n).astype(np.int32),
        lambda n: rng.random(n),
        lambda n: rng.integers(0, 3, (n, 2)),
        lambda n: np.zeros(0),
        lambda n: list(rng.integers(0, 4, n)),
        lambda n: rng.integers(0, 2**63 - 1, n, dtype=np.int64),
        lambda n: rng.integers(-2**40, 2**40, n),
        lambda n: "packs",
    ]
    for trial in range(400):
        dp = int(rng.integers(-1, 5))
        ga = int(rng.integers(-1, 5))
        mbs = int(rng.integers(0, 3))
        n = int(rng.integers(0, 20))
        cost, nbytes, source = (makers[rng.integers(len(makers))](n) for _ in range(3))
        try:
            packswap.solve(cost, nbytes, source, dp=dp, ga=ga, mbs=mbs,
                           eps=float(rng.choice([0.0, 0.01, -1.0, 2.0])))
        except ValueError:
            pass
