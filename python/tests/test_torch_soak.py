"""10,000 micro-steps through Rebalancer.wrap: the thread count stays constant and resident
memory grows by less than 5 MiB after warm-up."""

import distributed
import ranks

MICRO_STEPS = 10_000


def test_ten_thousand_micro_steps_keep_threads_and_memory_flat():
    results = distributed.run(ranks.soak, 2, MICRO_STEPS, 10, timeout=600)
    for r in results:
        samples = r["samples"]
        assert samples[-1][0] == MICRO_STEPS
        warm_threads, warm_rss = samples[0][1], samples[0][2]
        assert all(t == warm_threads for _, t, _ in samples), samples
        growth = max(rss for _, _, rss in samples) - warm_rss
        assert growth < 5 * 2**20, (growth, samples)
        assert r["stats"]["micro_steps"] == MICRO_STEPS - 1  # the last one is still acquired
        assert r["stats"]["packs_received"] > 0
