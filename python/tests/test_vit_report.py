"""bench/vit's CPU side: the baselines, the timing file, and the calibration and balance tables
built from a timing file (the checked-in synthetic one: made from a known cost function plus
noise by bench/vit/vit_fixture.py, not GPU data)."""

import copy
import io
import itertools
import math
import pathlib
import sys
from contextlib import redirect_stdout

import numpy as np
import pytest

import packswap

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "vit"))
import vit_baselines as vb  # noqa: E402
import vit_fixture  # noqa: E402
import vit_report  # noqa: E402
import vit_timings as vt  # noqa: E402

FIXTURE = REPO / "bench" / "vit" / "testdata" / "synthetic-timings.json"
FIXTURE_COMMAND = ("PYTHONPATH=build/dev/python python3 bench/vit/vit_fixture.py "
                   "bench/vit/testdata/synthetic-timings.json")
DPS, GA = (4, 16), 16


@pytest.fixture(scope="module")
def doc():
    return vt.load(str(FIXTURE))


@pytest.fixture(scope="module")
def tables(doc):
    return vit_report.report(doc, DPS, GA)


def text_only(doc, ids):
    """doc with packs `ids` stripped of their images (and timings): text-only packs."""
    d = copy.deepcopy(doc)
    for i in ids:
        p = d["packs"][i]
        p["images"] = []
        for name in ("image_tokens", "images", "image_tokens_sq"):
            p["features"][vt.FEATURES.index(name)] = 0
        for table in d["timings"].values():
            table.pop(str(i), None)
        for table in d["repeat"].values():
            table.pop(str(i), None)
    return d


# ---- baselines --------------------------------------------------------------------------------


def test_every_method_puts_one_pack_in_each_cell():
    rng = np.random.default_rng(1)
    for dp, ga in [(1, 1), (1, 5), (3, 1), (4, 4), (7, 3), (16, 8)]:
        for _ in range(10):
            costs = rng.integers(0, rng.choice([3, 1000, 10**9]), dp * ga)
            for name, (_, method) in vb.BASELINES.items():
                rank, step = method(costs, dp, ga)
                cells = sorted(zip(rank.tolist(), step.tolist()))
                assert cells == [(r, m) for r in range(dp) for m in range(ga)], (name, dp, ga)


def test_none_and_local_keep_the_loaders_packs_and_local_runs_them_heaviest_first():
    rng = np.random.default_rng(2)
    dp, ga = 6, 5
    costs = rng.integers(0, 50, dp * ga)  # ties on purpose
    rank, step = vb.no_rebalancing(costs, dp, ga)
    assert rank.tolist() == [p // ga for p in range(dp * ga)]
    assert step.tolist() == [p % ga for p in range(dp * ga)]
    rank, step = vb.local_reordering(costs, dp, ga)
    assert rank.tolist() == [p // ga for p in range(dp * ga)]
    for r in range(dp):
        mine = sorted(range(r * ga, (r + 1) * ga), key=lambda p: step[p])
        assert mine == sorted(mine, key=lambda p: (-costs[p], p))


def test_lpt_per_micro_step_permutes_each_micro_steps_packs_heaviest_to_rank_0():
    costs = np.array([5, 1, 9, 2, 7, 3])  # dp 3, ga 2: step 0 holds packs 0, 2, 4
    rank, step = vb.lpt_per_micro_step(costs, 3, 2)
    assert step.tolist() == [0, 1, 0, 1, 0, 1]
    assert rank.tolist() == [2, 2, 0, 1, 1, 0]
    times = costs.astype(float)
    none = vb.loads(times, vb.no_rebalancing(costs, 3, 2), 3, 2)
    assert vb.a_of(vb.loads(times, (rank, step), 3, 2)) == vb.a_of(none)


def test_karmarkar_karp_pairs_the_heaviest_with_the_lightest():
    rank, step = vb.karmarkar_karp([8, 7, 6, 5], 2, 2)
    assert rank.tolist() == [0, 1, 1, 0] and step.tolist() == [0, 0, 1, 1]
    rank, _ = vb.karmarkar_karp([10, 1, 1, 1, 9, 2], 2, 3)
    sums = [sum(c for c, r in zip([10, 1, 1, 1, 9, 2], rank) if r == k) for k in (0, 1)]
    assert sorted(sums) == [12, 12]


def test_lb_a_is_the_best_a_over_every_placement():
    rng = np.random.default_rng(3)
    for dp, ga in [(2, 2), (2, 3), (3, 2)]:
        for _ in range(20):
            times = rng.integers(0, 20, dp * ga).astype(float)
            best = math.inf
            for perm in itertools.permutations(range(dp * ga)):
                cells = (np.array(perm) // ga, np.array(perm) % ga)
                best = min(best, vb.a_of(vb.loads(times, cells, dp, ga)))
            assert vb.lb_a(times, dp, ga) == best
            assert vb.lb_b(times, dp) == max(times.sum() / dp, times.max())


def test_baselines_reject_a_batch_of_the_wrong_size_or_a_negative_cost():
    with pytest.raises(ValueError, match="got 5 costs, dp 2 x ga 2 needs 4"):
        vb.karmarkar_karp([1, 2, 3, 4, 5], 2, 2)
    with pytest.raises(ValueError, match="pack 2 has cost -1"):
        vb.local_reordering([1, 2, -1, 4], 2, 2)
    assert vb.waste(100.0, 4, 25.0) == 0.0 and vb.waste(100.0, 4, 50.0) == 0.5


# ---- the timing file ---------------------------------------------------------------------------


def test_the_fixture_is_what_its_documented_command_writes(tmp_path):
    out = tmp_path / "t.json"
    vit_fixture.main([str(out)])
    assert out.read_bytes() == FIXTURE.read_bytes(), (
        f"{FIXTURE} is stale (packs or format changed): regenerate it with {FIXTURE_COMMAND}")


def test_timing_files_round_trip_plain_and_compressed_to_the_same_bytes(doc, tmp_path):
    for name in ("a.json", "a.json.gz"):
        vt.save(doc, str(tmp_path / name))
        assert vt.load(str(tmp_path / name)) == doc
        first = (tmp_path / name).read_bytes()
        vt.save(doc, str(tmp_path / name))
        assert (tmp_path / name).read_bytes() == first


def test_a_timing_file_that_contradicts_itself_is_rejected_naming_the_pack(doc):
    def broken(edit):
        d = copy.deepcopy(doc)
        edit(d)
        return d

    cases = [
        (lambda d: d["packs"][3]["features"].__setitem__(2, 1), "pack 3: features"),
        (lambda d: d["packs"][5].__setitem__("id", 7), "pack 5 has id 7"),
        (lambda d: d["calibration"].append(10**6), "calibration lists pack 1000000"),
        (lambda d: d["timings"]["vit-l14"]["12"].__setitem__("ms", []), "vit-l14' pack 12: ms"),
        (lambda d: d["timings"]["vit-l14"].__setitem__("99999", {"ms": [1.0]}),
         "times pack '99999'"),
        (lambda d: d.__setitem__("format", "other/1"), "format is 'other/1'"),
    ]
    for edit, message in cases:
        with pytest.raises(ValueError, match=message):
            vt.validate(broken(edit))
    d = text_only(doc, [40])
    d["timings"]["so400m"]["40"] = {"ms": [1.0]}
    with pytest.raises(ValueError, match="times pack 40, which has no images"):
        vt.validate(d)


def test_packs_without_images_cost_nothing_and_prefixes_stop_at_the_first_untimed(doc):
    stream = doc["streams"]["vlm-pretrain"]["packs"]
    d = text_only(doc, [stream[7]])
    vt.validate(d)
    assert vt.median_ms(d, "vit-l14", stream[7]) == 0.0
    assert vt.measured_prefix(d, "vit-l14", "vlm-pretrain") == 256
    _, bals = vit_report.report(d, (16,), GA)
    assert {b["with_images"] for b in bals if b["stream"] == "vlm-pretrain"} == {255}
    # a batch of text-only packs: nothing to balance, every method at the bound
    d = text_only(doc, doc["streams"]["high-res"]["packs"])
    _, bals = vit_report.report(d, (4,), GA)
    for bal in (b for b in bals if b["stream"] == "high-res"):
        assert bal["with_images"] == 0 and vit_report.targets_met([], [bal])
        assert all(r["measured"]["A_ms"] == 0.0 for r in bal["rows"])
    d = copy.deepcopy(doc)
    victim = next(i for i in d["streams"]["vlm-pretrain"]["packs"][100:]
                  if d["packs"][i]["images"])
    del d["timings"]["vit-l14"][str(victim)]
    d["repeat"]["vit-l14"].pop(str(victim), None)
    with pytest.raises(ValueError, match="repeats pack"):
        vt.validate(dict(d, repeat={"vit-l14": {str(victim): 1.0}}))
    assert vt.measured_prefix(d, "vit-l14", "vlm-pretrain") == \
        d["streams"]["vlm-pretrain"]["packs"].index(victim)
    cals, bals = vit_report.report(d, DPS, GA)
    assert ("vit-l14", "vlm-pretrain", 16) not in [(b["encoder"], b["stream"], b["dp"])
                                                    for b in bals]
    assert ("so400m", "vlm-pretrain", 16) in [(b["encoder"], b["stream"], b["dp"]) for b in bals]


# ---- calibration ---------------------------------------------------------------------------------


def test_calibration_finds_the_fixtures_known_coefficients(tables):
    cals, _ = tables
    assert [c["encoder"] for c in cals] == list(vit_fixture.TRUTH)
    for cal in cals:
        fixed, per_token, per_sq = vit_fixture.TRUTH[cal["encoder"]]
        m = cal["model"]
        assert m["vit_fixed_fs"] / 1e9 == pytest.approx(fixed, rel=0.02)
        assert m["vit_per_image_token_fs"] / 1e9 == pytest.approx(per_token, rel=0.02)
        assert m["vit_attention_fs"] / 1e9 == pytest.approx(per_sq, rel=0.05)
        assert m["pack_fs"] == m["llm_per_token_fs"] == m["llm_attention_fs"] == 0
        # 1% noise: median error under 1%, p95 about 2%, every group unbiased
        assert cal["r_squared"] > 0.999 and cal["target_met"]
        assert cal["fit"]["median"] < 0.01 and cal["held_out"]["p95"] < 0.03
        assert cal["packs_fit"] == sum(1 for i in vt.load(str(FIXTURE))["calibration"]
                                       if vt.load(str(FIXTURE))["packs"][i]["images"])
        for row in cal["by_images"] + cal["by_largest"]:
            assert abs(row["signed_median"]) < 0.01, row
        assert cal["forward_share"] == pytest.approx(1 / 3, abs=1e-3)
        assert cal["repeat"]["n"] == 16


def test_a_cost_the_model_cannot_express_shows_in_the_groups_and_misses_the_target(doc):
    # 3 ms per image on top of a per-token cost: the model has no per-image term, so it
    # under-prices packs of many small images and over-prices packs of one large one.
    d = copy.deepcopy(doc)
    for key, t in d["timings"]["vit-l14"].items():
        images = d["packs"][int(key)]["images"]
        t["ms"] = [3.0 * len(images) + 2e-3 * sum(images)] * len(t["ms"])
    cal = vit_report.calibration_of(d, "vit-l14")
    groups = {row["group"]: row for row in cal["by_images"]}
    assert groups["8 or more images"]["signed_median"] < -0.05
    assert groups["1 image"]["signed_median"] > 0.05
    assert not cal["target_met"] and cal["fit"]["p95"] > 0.05
    # the diagnostic fit with a per-image term finds it
    assert cal["extended"]["per_image_us"] == pytest.approx(3000.0, rel=1e-3)
    assert cal["extended"]["fit"]["p95"] < 1e-3


# ---- balance ---------------------------------------------------------------------------------------


def test_balance_tables_come_from_each_cells_measured_time(doc, tables):
    cals, bals = tables
    assert [(b["encoder"], b["stream"], b["dp"]) for b in bals] == [
        ("vit-l14", "vlm-pretrain", 4), ("vit-l14", "vlm-pretrain", 16),
        ("vit-l14", "high-res", 4), ("so400m", "vlm-pretrain", 4),
        ("so400m", "vlm-pretrain", 16), ("so400m", "high-res", 4)]
    bal = bals[1]
    model = vit_report.cost_model_of(cals[0])
    ids = doc["streams"]["vlm-pretrain"]["packs"][:256]
    features = vit_report.features_matrix(doc, ids)
    costs = model.costs(features)
    measured = np.array([vt.median_ms(doc, "vit-l14", i) for i in ids])
    sol = packswap.solve(costs, packswap.PayloadModel().bytes(features), np.arange(256) // GA,
                         dp=16, ga=GA, eps=0.0)
    rows = {r["method"]: r for r in bal["rows"]}
    assert list(rows) == ["none", "local", "lpt", "kk", "packswap eps 0", "packswap eps 0.01",
                          "packswap eps 0 default model"]
    # the uncalibrated row: the same solve on the default model's costs, timed the same way
    plain = packswap.solve(packswap.CostModel().costs(features),
                           packswap.PayloadModel().bytes(features), np.arange(256) // GA,
                           dp=16, ga=GA, eps=0.0)
    load = np.zeros((16, GA))
    np.add.at(load, (plain.rank, plain.micro_step), measured)
    assert rows["packswap eps 0 default model"]["measured"]["A_ms"] == pytest.approx(
        load.max(axis=0).sum(), rel=1e-12)
    assert rows["packswap eps 0 default model"]["moved"] == plain.metrics["moved"]
    ps = rows["packswap eps 0"]
    load = np.zeros((16, GA))
    np.add.at(load, (sol.rank, sol.micro_step), measured)
    assert ps["measured"]["A_ms"] == pytest.approx(load.max(axis=0).sum(), rel=1e-12)
    assert ps["measured"]["B_ms"] == pytest.approx(load.sum(axis=1).max(), rel=1e-12)
    assert ps["model"]["A_ms"] == pytest.approx(sol.metrics["A"] / 1e3, rel=1e-12)
    assert ps["model"]["A_ms"] == pytest.approx(bal["lb_a_ms"]["model"], rel=1e-12)
    assert ps["moved"] == sol.metrics["moved"]
    ideal = measured.sum() / 16
    assert ps["measured"]["waste_A"] == pytest.approx(1 - ideal / ps["measured"]["A_ms"])
    assert bal["lb_a_ms"]["measured"] == vb.lb_a(measured, 16, GA)
    # no method beats LB_A or LB_B, measured or predicted
    for row in bal["rows"]:
        for key in ("measured", "model"):
            assert row[key]["A_ms"] >= bal["lb_a_ms"][key] * (1 - 1e-12)
            assert row[key]["B_ms"] >= bal["lb_b_ms"][key] * (1 - 1e-12)


def test_the_report_prints_every_table_and_exits_0_when_every_target_is_met(tmp_path):
    out = io.StringIO()
    with redirect_stdout(out):
        rc = vit_report.main([str(FIXTURE), "--dp", "4,16", "--ga", "16",
                              "--json", str(tmp_path / "r.json")])
    text = out.getvalue()
    assert rc == 0 and "all targets met" in text and "MISSED" not in text
    assert "Synthetic data, not a measurement" in text and "No preset from synthetic data" in text
    for what in ("no rebalancing", "local reordering", "LPT per micro-step", "Karmarkar-Karp",
                 "packswap, eps 0 ", "packswap, eps 0.01", "packswap, eps 0, on the default"):
        assert text.count(f"| {what}") == 6, what
    assert text.count("## Calibration: ") == 2 and text.count("## Balance in milliseconds") == 6
    assert (tmp_path / "r.json").stat().st_size > 0


def test_the_noise_floor_is_what_one_runs_noise_alone_does_to_an_exact_model(doc, tables):
    cals, bals = tables
    # the fixture's noise is 1% per run; 16 repeats estimate it
    assert cals[0]["run_noise"] == pytest.approx(0.01, rel=0.3)
    floors = {}
    for bal in bals:
        floor = bal["noise_floor"]
        assert floor["noise"] == next(c["run_noise"] for c in cals
                                      if c["encoder"] == bal["encoder"])
        assert 1.0 < floor["median"] <= floor["p95"] < 1.02
        floors[bal["encoder"], bal["stream"], bal["dp"]] = floor["median"]
    # more ranks, more noisy packs under each micro-step's maximum
    for encoder in vit_fixture.TRUTH:
        assert floors[encoder, "vlm-pretrain", 16] > floors[encoder, "vlm-pretrain", 4]
    # no noise: packswap's assignment of an exact model reaches LB_A
    d = text_only(doc, [])
    for table in d["repeat"].values():
        table.clear()
    cal = vit_report.calibration_of(d, "vit-l14")
    assert cal["run_noise"] is None
    bal = vit_report.balance_of(d, "vit-l14", "vlm-pretrain", 16, GA,
                                vit_report.cost_model_of(cal))
    assert bal["noise_floor"] is None
    ids = d["streams"]["vlm-pretrain"]["packs"][:256]
    costs = vit_report.cost_model_of(cal).costs(vit_report.features_matrix(d, ids))
    sol = packswap.solve(costs, np.zeros(256, dtype=np.int64), np.arange(256) // GA, dp=16,
                         ga=GA)
    exact = vit_report.noise_floor((sol.rank, sol.micro_step), costs / 1e3, 16, GA, 0.0)
    assert exact["median"] == exact["p95"] == 1.0


def test_measured_times_that_disagree_with_the_model_miss_the_balance_targets(doc):
    # The measured times of the batch's packs shuffled: the model's balance is not the GPU's.
    d = copy.deepcopy(doc)
    ids = [str(i) for i in d["streams"]["vlm-pretrain"]["packs"] if d["packs"][i]["images"]]
    rng = np.random.default_rng(4)
    shuffled = rng.permutation(len(ids))
    saved = [d["timings"]["vit-l14"][k]["ms"] for k in ids]
    for k, j in zip(ids, shuffled):
        d["timings"]["vit-l14"][k]["ms"] = saved[j]
    _, bals = vit_report.report(d, (16,), GA)
    bal = next(b for b in bals if b["encoder"] == "vit-l14" and b["stream"] == "vlm-pretrain")
    assert not bal["targets"][0]["met"] and bal["targets"][0]["value"] > 1.05
    assert not vit_report.targets_met(*vit_report.report(d, (16,), GA))


def test_the_preset_is_cpp_named_after_encoder_gpu_and_dtype(doc, tables):
    cals, _ = tables
    real = copy.deepcopy(doc)
    real["synthetic"] = None
    real["machine"].update({"gpu": "NVIDIA H200", "driver": "580.1", "cuda": "13.0",
                            "torch": "2.11.0", "date": "2026-12-01 12:00 UTC"})
    real["encoders"]["vit-l14"]["attention"] = "varlen"
    text = vit_report.preset_text(real, cals[0])
    assert "[[nodiscard]] inline cost_model vit_l14_h200_bf16() noexcept {" in text
    # every member named, in declaration order, the fitted ones with digit separators
    body = " ".join(text[text.index("{\n") + 2:].split())
    assert body.startswith("return {/*pack_fs=*/0, /*vit_fixed_fs=*/"
                           + f"{cals[0]['model']['vit_fixed_fs']:,}".replace(",", "'") + ",")
    assert body.endswith("/*llm_per_token_fs=*/0, /*llm_attention_fs=*/0}; }")
    comment = " ".join(line[4:] for line in text.splitlines() if line.startswith("/// "))
    assert "NVIDIA H200 (driver 580.1, CUDA 13.0), torch 2.11.0, bfloat16" in comment
    assert all(len(line) <= 100 for line in text.splitlines())
    rendered = vit_report.render(real, cals, [])
    assert "```cpp" in rendered and "packswap.CostModel(vit_fixed_fs=" in rendered


# ---- the shipped measurements ------------------------------------------------------------------


def test_the_shipped_presets_are_refitted_from_the_committed_timings():
    """docs/vit-timings.json.gz, fitted again here, gives the presets bit for bit, and the
    report prints them in the form presets.hpp holds."""
    doc = vt.load(str(REPO / "docs" / "vit-timings.json.gz"))
    shipped = {"vit-l14": packswap.CostModel.vit_l14_h200_bf16(),
               "so400m": packswap.CostModel.so400m_h200_bf16()}
    header = (REPO / "include" / "packswap" / "cost" / "presets.hpp").read_text()
    for encoder, model in shipped.items():
        cal = vit_report.calibration_of(doc, encoder)
        assert cal["model"] == {k: getattr(model, k) for k in vit_report.MODEL_FIELDS}
        assert cal["target_met"]
        block = vit_report.preset_text(doc, cal)
        assert block[block.index("[[nodiscard]]"):] in header, block
    # the balance run's timings meet the targets the report checks
    doc = vt.load(str(REPO / "docs" / "vit-balance-timings.json.gz"))
    cal = vit_report.calibration_of(doc, "vit-l14")
    bal = vit_report.balance_of(doc, "vit-l14", "vlm-pretrain", 16, 16,
                                vit_report.cost_model_of(cal))
    assert bal is not None and all(t["met"] for t in bal["targets"]), bal["targets"]
