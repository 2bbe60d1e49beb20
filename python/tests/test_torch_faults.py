"""A rank that fails mid-batch, ranks built differently, a rank that plans differently, a
malformed batch: every rank ends in a clear error within the timeout; workers are joined and
nothing is left running."""

import distributed
import ranks

TIMEOUT = 2.0
SLACK = 3.0  # scheduling on a shared two-core machine


def test_every_fault_ends_in_a_clear_error_on_every_rank_within_the_timeout():
    world = 3
    results = distributed.run(ranks.faults, world, TIMEOUT)

    # After all the bad input, a normal batch went through on every rank: the failed calls
    # communicated nothing, or the ranks' collectives would no longer match.
    delivered = sorted(tuple(i) for seen in results for i in seen["bad input"]["ids"])
    assert delivered == [(0, r, i) for r in range(world) for i in range(2)]

    for rank, seen in enumerate(results):
        bad = seen["bad input"]
        m = bad["messages"]
        assert "submit() got 1 packs, each rank submits ga * mbs = 2" in m["count"]
        assert f"rank {rank}: pack 1 is a list, expected a dict" in m["not a dict"]
        assert f"rank {rank}: pack 1 value 'x' is a list, expected a torch.Tensor" in m["not a tensor"]
        assert f"rank {rank}: pack 1 has the key 3 (int); keys must be str" in m["key"]
        assert f"rank {rank}: pack 1 tensor 'x' is on meta, this Rebalancer exchanges on cpu" in m["device"]
        assert "only dense (strided) tensors" in m["sparse"]
        assert "dtype torch.quint8, which packswap cannot exchange" in m["dtype"]
        assert f"rank {rank}: the cost of pack 0 is -1, must be in [0, 2^62)" in m["negative cost"]
        assert f"rank {rank}: the cost of pack 0 is 0.5 (float), expected a non-negative int" in m["float cost"]
        assert "acquire(0) of batch 0, which was not submitted" in m["acquire early"]
        assert "release(0) but nothing is acquired" in m["release early"]

        code, message = seen["different ga"]
        assert code == "mismatch"
        assert "rank 1 has ga=2" in message
        code, message = seen["different work_scale"]
        assert code == "mismatch"
        assert "rank 1 has work_scale_permille=500" in message

        status, code, message, _ = seen["plans differ"]
        assert status == "error" and code == "mismatch", seen["plans differ"]
        assert "solved another plan" in message

        for name in ("raise mid-step", "malformed pack", "wrong pack count"):
            s = seen[name]
            assert s["worker_closed"], (rank, name)
            assert s["threads_after"] == s["baseline"], (rank, name, s)
            result = s["result"]
            if rank == 1:
                kind = {"raise mid-step": "RuntimeError"}.get(name, "ValueError")
                assert result[0] == "raised" and result[1] == kind, result
            else:
                status, code, message, took = result
                # Rank 1 kept its Rebalancer open after "raise mid-step": the others time out.
                # It closed it (left the `with`) after the others: they see its groups go.
                want = "timeout" if name == "raise mid-step" else "transport"
                assert status == "error" and code == want, result
                assert f"rank {rank}" in message and "batch" in message
                assert took <= TIMEOUT + SLACK, result


def test_a_rank_whose_process_ends_mid_batch_fails_the_others_fast():
    results = distributed.run(ranks.dies, 3, 30.0, dies={1})
    for rank in (0, 2):
        status, code, message, took = results[rank]
        assert status == "error" and code in ("transport", "timeout"), results[rank]
        assert took < 30.0
