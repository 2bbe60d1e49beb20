"""CostModel, PayloadModel, calibrate and make_pack_meta from Python."""

import numpy as np
import pytest

import packswap


def features_matrix(n, seed):
    """Features of n single-sample packs: varied (text only, one image, many images)."""
    samples = packswap.generate("vlm-pretrain", n, seed)
    return np.array([packswap.features_of(samples, [i]).as_tuple() for i in range(n)],
                    dtype=np.int64)


def test_the_default_cost_model_is_the_measured_vit():
    model = packswap.CostModel()
    assert model(packswap.PackFeatures(images=1, image_tokens=3000)) == 180_000 + 840 * 3000
    assert model(packswap.PackFeatures(tokens=8000)) == 0
    f = features_matrix(200, 1)
    costs = model.costs(f)
    assert costs.dtype == np.int64
    assert costs.tolist() == [model(packswap.PackFeatures(**dict(zip(packswap.FEATURES, row))))
                              for row in f.tolist()]


def test_calibrate_recovers_known_coefficients_and_reports_the_fit():
    f = features_matrix(400, 2)
    truth = packswap.CostModel(pack_fs=5_000_000_000_000, vit_fixed_fs=60_000_000_000_000,
                               vit_per_image_token_fs=280_000_000_000,
                               llm_per_token_fs=20_000_000_000)
    times = truth.costs(f).astype(np.float64)
    fit = packswap.calibrate(f, times, terms=["pack", "vit_fixed", "vit_per_image_token",
                                              "llm_per_token"])
    for name in ("pack_fs", "vit_fixed_fs", "vit_per_image_token_fs", "llm_per_token_fs"):
        assert getattr(fit.model, name) == pytest.approx(getattr(truth, name), rel=2e-3)
    assert fit.r_squared > 0.999999 and fit.max_error_us <= 1.0 and fit.zeroed == []
    # Noise lowers R^2 and shows in the errors, as the C++ calibrate reports them.
    rng = np.random.default_rng(0)
    noisy_times = np.maximum(times + rng.normal(0, 2_000, len(times)), 0.0)
    noisy = packswap.calibrate(f, noisy_times, terms=["pack", "vit_fixed", "vit_per_image_token"])
    assert 0.5 < noisy.r_squared < 0.9999 and noisy.rms_error_us > 1000
    assert noisy.max_error_us >= noisy.rms_error_us
    assert noisy.model.vit_per_image_token_fs == pytest.approx(280_000_000_000, rel=0.1)


def test_calibrate_zeroes_terms_the_fit_makes_negative():
    f = features_matrix(300, 3)
    times = packswap.CostModel(pack_fs=10_000_000_000_000, vit_fixed_fs=100_000_000_000_000,
                               vit_per_image_token_fs=500_000_000_000).costs(f).astype(float)
    # Times that fall with tokens make llm_per_token negative: it is fixed at 0.
    times -= 0.001 * f[:, packswap.FEATURES.index("tokens")]
    assert times.min() > 0
    fit = packswap.calibrate(f, times, terms=["pack", "vit_fixed", "vit_per_image_token",
                                              "llm_per_token"])
    assert fit.zeroed == ["llm_per_token"] and fit.model.llm_per_token_fs == 0
    assert fit.model.vit_per_image_token_fs > 0


def test_calibrate_takes_pack_features_and_rejects_what_cannot_be_fitted():
    rows = [packswap.PackFeatures(images=1, image_tokens=t) for t in (100, 200, 400)]
    fit = packswap.calibrate(rows, [1100.0, 1200.0, 1400.0],
                             terms=["vit_fixed", "vit_per_image_token"])
    assert fit.model.vit_fixed_fs == 1_000_000_000_000
    assert fit.model.vit_per_image_token_fs == 1_000_000_000
    with pytest.raises(ValueError, match="measurement 1 took -5 us"):
        packswap.calibrate(rows, [1.0, -5.0, 2.0], terms=["vit_fixed"])
    with pytest.raises(ValueError, match="took nan us"):
        packswap.calibrate(rows, [1.0, float("nan"), 2.0], terms=["vit_fixed"])
    with pytest.raises(ValueError, match="2 measurements cannot fit 3 terms"):
        packswap.calibrate(rows[:2], [1.0, 2.0], terms=["pack", "vit_fixed", "llm_per_token"])
    with pytest.raises(ValueError, match="unknown cost term 'vit'"):
        packswap.calibrate(rows, [1.0, 2.0, 3.0], terms=["vit"])
    with pytest.raises(ValueError, match="listed twice"):
        packswap.calibrate(rows, [1.0, 2.0, 3.0], terms=["pack", "pack"])
    with pytest.raises(ValueError, match="'vit_fixed' is \\(nearly\\) a combination"):
        packswap.calibrate(rows, [1.0, 2.0, 3.0], terms=["pack", "vit_fixed"])
    with pytest.raises(ValueError, match="got features of 3 packs and 2 times"):
        packswap.calibrate(rows, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"\(n, 7\) integer array"):
        packswap.calibrate(np.zeros((3, 6), dtype=np.int64), [1.0, 2.0, 3.0])


def test_make_pack_meta_prices_a_batch_as_the_simulator_does():
    f = features_matrix(8 * 4, 4)
    cost, nbytes, source = packswap.make_pack_meta(f, dp=8, ga=4)
    assert cost.tolist() == packswap.CostModel().costs(f).tolist()
    assert nbytes.tolist() == packswap.PayloadModel().bytes(f).tolist()
    assert source.tolist() == np.repeat(np.arange(8), 4).tolist()
    sol = packswap.solve(cost, nbytes, source, dp=8, ga=4)
    assert sol.metrics["A"] == sol.metrics["LB_A"]
    with pytest.raises(ValueError, match="got 32 packs, shape dp=4 ga=4 mbs=1 needs 16"):
        packswap.make_pack_meta(f, dp=4, ga=4)
    with pytest.raises(ValueError, match="cost_model::pack_fs is -1"):
        packswap.make_pack_meta(f, dp=8, ga=4, cost=packswap.CostModel(pack_fs=-1))


def test_the_h200_presets_are_the_fits_the_gpu_run_logged():
    """The presets in packswap/cost/presets.hpp are the blocks docs/vit-calibration.log printed."""
    import pathlib
    import re

    log = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "vit-calibration.log").read_text()
    presets = {"vit_l14_h200_bf16": packswap.CostModel.vit_l14_h200_bf16(),
               "so400m_h200_bf16": packswap.CostModel.so400m_h200_bf16()}
    for name, model in presets.items():
        block = re.search(r"inline cost_model " + name + r"\(\) noexcept \{(.*?)\n\}", log, re.S)
        assert block, f"{name} is not in docs/vit-calibration.log"
        # either spelling the report has printed: `m.name = value;` or `/*name=*/value`
        pairs = re.findall(r"(?:m\.(\w+) = |/\*(\w+)=\*/)([0-9']+)", block.group(1))
        logged = {a or b: int(v.replace("'", "")) for a, b, v in pairs}
        assert logged and all(getattr(model, k) == v for k, v in logged.items()), (name, logged)
        # every other term is 0: the encoder alone
        for k in ("pack_fs", "vit_fixed_fs", "vit_per_image_token_fs", "vit_attention_fs",
                  "llm_per_token_fs", "llm_attention_fs"):
            assert getattr(model, k) == logged.get(k, 0)
        # the same model spelled for Python on the log's next line
        kwargs = re.search(r"From Python: `packswap\.CostModel\((.*?)\)`", log[block.end():])
        assert packswap.CostModel(**{k: int(v) for k, v in
                                     re.findall(r"(\w+)=(\d+)", kwargs.group(1))}) == model
    # the calibration's largest pack, one image of 8,119 tokens
    one = packswap.PackFeatures(images=1, image_tokens=8119, image_tokens_sq=8119 ** 2)
    assert presets["vit_l14_h200_bf16"](one) == 127_204
    assert presets["so400m_h200_bf16"](one) == 204_086
