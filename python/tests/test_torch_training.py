"""Training with the Rebalancer computes what training without it computes: a float64 model,
4 ranks x ga 4, 20 steps, gradients summed across ranks."""

import distributed
import ranks


def test_parameters_and_losses_agree_to_1e_12_with_and_without_rebalancing():
    results = distributed.run(ranks.training, 4, 20, 4)
    for r in results:
        assert r["steps"] == 20
        assert r["loss_err"] <= 1e-12, r
        assert r["param_err"] <= 1e-12, r
    assert sum(r["moved"] for r in results) > 0  # packs did move
