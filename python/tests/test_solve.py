"""packswap.solve / Solver / Solution: results, plans, inputs read without a copy."""

import threading

import numpy as np
import pytest

import packswap


def random_batch(rng, dp, ga, mbs=1, zero_bytes=False):
    n = dp * ga * mbs
    image_tokens = rng.integers(0, 6000, n) * (rng.random(n) > 0.25)
    cost = np.where(image_tokens > 0, 180_000 + 840 * image_tokens, 0).astype(np.int64)
    nbytes = (32_768 + 4_704 * image_tokens).astype(np.int64)
    if zero_bytes:
        nbytes[rng.random(n) < 0.3] = 0
    source = np.repeat(np.arange(dp, dtype=np.int64), ga * mbs)
    return cost, nbytes, source


def check_solution(sol, cost, nbytes, source, dp, ga, mbs):
    n = dp * ga * mbs
    assert sol.rank.dtype == np.int32 and sol.micro_step.dtype == np.int32
    assert sol.rank.shape == (n,) and sol.micro_step.shape == (n,)
    # Every cell holds exactly mbs packs.
    cells = np.bincount(sol.rank * ga + sol.micro_step, minlength=dp * ga)
    assert (cells == mbs).all()
    # The metrics are those of the cells.
    loads = np.zeros((dp, ga), dtype=np.int64)
    np.add.at(loads, (sol.rank, sol.micro_step), cost)
    m = sol.metrics
    assert m["A"] == loads.max(axis=0).sum()
    assert m["B"] == loads.sum(axis=1).max()
    moved = sol.rank != source
    assert m["moved"] == moved.sum()
    assert m["moved_bytes"] == nbytes[moved].sum()
    assert m["A"] >= m["LB_A"] and m["B"] >= m["LB_B"]
    # The plan lists every moved pack once on each side, and every kept pack once.
    for r in range(dp):
        for s in range(ga):
            sends, recvs = sol.sends(r, s), sol.receives(r, s)
            compute, keep = sol.compute(r, s), sol.keep(r, s)
            assert sends.dtype == np.int32 and sends.shape[1:] == (2,)
            assert sorted(compute.tolist()) == compute.tolist()
            assert set(compute.tolist()) == set(np.flatnonzero((sol.rank == r) &
                                                               (sol.micro_step == s)).tolist())
            assert set(keep.tolist()) == {p for p in compute.tolist() if source[p] == r}
            assert {p for p, _ in recvs.tolist()} == set(compute.tolist()) - set(keep.tolist())
            for p, peer in sends.tolist():
                assert source[p] == r and sol.rank[p] == peer and sol.micro_step[p] == s
            for p, peer in recvs.tolist():
                assert source[p] == peer and sol.rank[p] == r
            assert sol.send_bytes(r, s) == nbytes[sends[:, 0]].sum()
            assert sol.receive_bytes(r, s) == nbytes[recvs[:, 0]].sum()


@pytest.mark.parametrize("seed", range(12))
def test_solve_puts_every_pack_in_one_cell_with_consistent_metrics_and_plan(seed):
    rng = np.random.default_rng(seed)
    dp, ga, mbs = int(rng.integers(1, 9)), int(rng.integers(1, 6)), int(rng.integers(1, 3))
    cost, nbytes, source = random_batch(rng, dp, ga, mbs, zero_bytes=seed % 3 == 0)
    mode = "per_step" if seed % 2 else "per_micro_step"
    sol = packswap.solve(cost, nbytes, source, dp=dp, ga=ga, mbs=mbs, mode=mode,
                         eps=0.01 * (seed % 2))
    check_solution(sol, cost, nbytes, source, dp, ga, mbs)
    assert sol.shape == (dp, ga, mbs) and sol.plan_rank == -1
    if mode == "per_micro_step" and mbs == 1:
        assert sol.metrics["A"] == sol.metrics["LB_A"]


def test_work_scale_trades_moved_bytes_for_work_and_keeps_the_balance():
    # A batch whose search needs its work (high-res-like costs, eps = 0, a Python-side twin of the
    # stress set's hard cells): a tiny work scale ends the search early, and the fallback's answer
    # keeps A and B as the search's does.
    rng = np.random.default_rng(11)
    dp, ga = 64, 64
    cost, nbytes, source = random_batch(rng, dp, ga)
    full = packswap.solve(cost, nbytes, source, dp=dp, ga=ga)
    tiny = packswap.solve(cost, nbytes, source, dp=dp, ga=ga, work_scale=0.001)
    kept = packswap.Solver().solve(cost, nbytes, source, dp=dp, ga=ga, work_scale=0.001)
    check_solution(tiny, cost, nbytes, source, dp, ga, 1)
    assert tiny.digest() == kept.digest()
    for sol in (full, tiny):
        assert sol.metrics["A"] == sol.metrics["LB_A"]
        assert sol.metrics["B"] <= sol.stage1_b
    # A thousandth of 32 n + 2^19 units (the fallback's share included) plus what the step under
    # way at a check may add (16 ga + 2^14): tighter than detail::stage2_work_bound, which also
    # allows 5 (n + dp) for indexes charged past a check; this batch stays within it.
    bound = (32 * dp * ga + 2**19) // 1000 + 16 * ga + 2**14
    assert tiny.stage2_bounded and tiny.stage2_work <= bound
    assert not full.stage2_bounded and full.stage2_work > bound


def test_a_solver_kept_across_calls_returns_the_free_functions_answers():
    rng = np.random.default_rng(5)
    solver = packswap.Solver()
    for trial in range(30):
        dp, ga = int(rng.integers(1, 17)), int(rng.integers(1, 9))
        batch = random_batch(rng, dp, ga)
        a = packswap.solve(*batch, dp=dp, ga=ga)
        b = solver.solve(*batch, dp=dp, ga=ga)
        assert a.digest() == b.digest() and a.plan_digest() == b.plan_digest()
        assert np.array_equal(a.rank, b.rank) and np.array_equal(a.micro_step, b.micro_step)
        if trial == 15:
            solver.release()


def test_plan_rank_builds_only_that_ranks_lists():
    rng = np.random.default_rng(2)
    batch = random_batch(rng, 4, 3)
    full = packswap.solve(*batch, dp=4, ga=3)
    own = packswap.solve(*batch, dp=4, ga=3, plan_rank=2)
    assert own.digest() == full.digest() and own.plan_rank == 2
    for s in range(3):
        assert np.array_equal(own.sends(2, s), full.sends(2, s))
        assert np.array_equal(own.receives(2, s), full.receives(2, s))
    with pytest.raises(ValueError, match=r"\(rank 1, micro-step 0\) is outside this plan"):
        own.sends(1, 0)


def test_int64_inputs_are_read_where_they_lie_and_other_integers_are_converted():
    a = np.arange(10, dtype=np.int64)
    assert np.shares_memory(packswap._core._as_int64(a), a)
    assert not np.shares_memory(packswap._core._as_int64(a[::2]), a)
    for dtype in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.uint64):
        out = packswap._core._as_int64(a.astype(dtype))
        assert out.dtype == np.int64 and np.array_equal(out, a)
    assert np.array_equal(packswap._core._as_int64([3, 1, 2]), [3, 1, 2])


def test_lists_and_cpu_torch_tensors_solve_like_numpy_arrays():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    cost, nbytes, source = random_batch(rng, 3, 4)
    want = packswap.solve(cost, nbytes, source, dp=3, ga=4).digest()
    assert packswap.solve(cost.tolist(), nbytes.tolist(), source.tolist(), dp=3,
                          ga=4).digest() == want
    assert packswap.solve(torch.from_numpy(cost), torch.from_numpy(nbytes),
                          torch.from_numpy(source).to(torch.int32), dp=3, ga=4).digest() == want


def test_solution_arrays_are_read_only_and_outlive_the_solution():
    sol = packswap.solve([5, 1, 4, 2], [1, 1, 1, 1], [0, 0, 1, 1], dp=2, ga=2)
    rank = sol.rank
    with pytest.raises(ValueError):
        rank[0] = 1
    sends = sol.sends(0, 0)
    del sol
    assert rank.shape == (4,) and sends.shape[1] == 2  # capsules keep the memory alive


def test_a_node_map_and_ranks_per_node_weigh_crossing_bytes():
    rng = np.random.default_rng(3)
    batch = random_batch(rng, 8, 4)
    uniform = packswap.solve(*batch, dp=8, ga=4, ranks_per_node=4, inter_node_weight=8)
    mapped = packswap.solve(*batch, dp=8, ga=4, node_map=[0, 0, 0, 0, 1, 1, 1, 1],
                            inter_node_weight=8)
    assert uniform.digest() == mapped.digest()
    m = uniform.metrics
    assert m["weighted_bytes"] == (m["moved_bytes"] - m["inter_node_bytes"]) + 8 * m[
        "inter_node_bytes"]
    with pytest.raises(ValueError, match="ranks_per_node or node_map"):
        packswap.solve(*batch, dp=8, ga=4, ranks_per_node=4, node_map=[0] * 8)
    with pytest.raises(ValueError, match="the topology maps 4 ranks, dp is 8"):
        packswap.solve(*batch, dp=8, ga=4, node_map=[0, 0, 1, 1])


def test_solvers_shared_between_threads_give_the_same_answers():
    rng = np.random.default_rng(4)
    batches = [random_batch(rng, 16, 8) for _ in range(8)]
    want = [packswap.solve(*b, dp=16, ga=8).digest() for b in batches]
    solver = packswap.Solver()
    got = [None] * 32

    def work(i):
        got[i] = solver.solve(*batches[i % 8], dp=16, ga=8).digest()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want[i % 8] for i in range(32)]


def test_digest_is_the_fnv_digest_of_int64_words():
    # FNV-1a of the length (8 little-endian bytes) then each value.
    def fnv(values):
        h = 0xCBF29CE484222325
        for v in [len(values)] + list(values):
            for byte in int(v & (2**64 - 1)).to_bytes(8, "little"):
                h = ((h ^ byte) * 0x100000001B3) & (2**64 - 1)
        return h

    for values in ([], [1], [-1, 2**62, 7]):
        assert packswap.digest(np.array(values, dtype=np.int64)) == fnv(values)


def test_choose_ctas_follows_the_cpp_rule():
    ms = 1_000_000
    assert packswap.choose_ctas(0, 0) == 4  # nothing measured: the starting count
    assert packswap.choose_ctas(256 << 20, 10 * ms) == 4
    assert packswap.choose_ctas(1 << 30, 10 * ms) == 4
    assert packswap.choose_ctas(4 << 30, 10 * ms) == 13
    assert packswap.choose_ctas(1 << 40, 10 * ms) == 32
