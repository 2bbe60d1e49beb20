"""The packers, sample sets and workload presets from Python: the C++ ones, as packswap-pack
reports them."""

import json
import subprocess

import numpy as np
import pytest

import packswap


@pytest.fixture(scope="module")
def pack_tool(build_dir):
    tool = build_dir / "examples" / "pack" / "packswap-pack"
    if not tool.is_file():
        pytest.fail(f"{tool} is missing: build the dev preset first")
    return tool


@pytest.mark.parametrize("preset", packswap.workload_preset_names())
def test_python_packs_a_preset_as_packswap_pack_does(pack_tool, preset):
    samples = packswap.generate(preset, 5000, 3)
    one_d = packswap.GreedyPacker(on_oversize="skip")(samples)
    budget = packswap.mean_image_tokens_per_pack(one_d)
    two_d = packswap.BudgetedPacker(image_budget=max(budget, 1), on_oversize="skip")(samples)
    cli = json.loads(subprocess.run(
        [str(pack_tool), "--preset", preset, "--samples", "5000", "--seed", "3", "--json"],
        capture_output=True, text=True, check=True).stdout)
    for packs, want in ((one_d, cli[0]), (two_d, cli[1])):
        m = packswap.measure_packing(packs)
        assert m.packs == want["packs"] and m.samples == want["samples"]
        assert m.efficiency == pytest.approx(want["efficiency"], abs=1e-6)
        assert m.image_tokens_per_pack == want["image_tokens_per_pack"]


def test_every_sample_lands_in_exactly_one_pack_within_capacity_and_budget():
    samples = packswap.generate("vlm-pretrain", 3000, 7)
    tokens = samples.tokens()
    images = samples.image_tokens()
    for packer in (packswap.GreedyPacker(capacity=8192, buffer=100),
                   packswap.BudgetedPacker(capacity=8192, image_budget=5000, buffer=100,
                                           on_oversize="skip")):
        packs = packer(samples)
        seen = np.concatenate([packs.samples(p) for p in range(len(packs))] + [packs.skipped()])
        assert sorted(seen.tolist()) == list(range(len(samples)))
        for p in range(len(packs)):
            ids = packs.samples(p)
            assert tokens[ids].sum() == packs.tokens(p) <= packer.capacity
            assert images[ids].sum() == packs.image_tokens(p)
        assert np.array_equal(packs.tokens(), [packs.tokens(p) for p in range(len(packs))])
        if isinstance(packer, packswap.BudgetedPacker):
            assert packs.image_tokens().max() <= 5000


def test_a_sample_set_built_by_hand_round_trips_through_csv():
    s = packswap.SampleSet()
    s.push_back(1800)
    s.push_back(2100, images=[1024, 256])
    s.push_back(1600, documents=[700, 900])
    assert len(s) == 3 and s.image_tokens(1) == 1280 and s.images(1).tolist() == [1024, 256]
    assert s.documents(2).tolist() == [700, 900] and s.documents(0).tolist() == [1800]
    back = packswap.SampleSet.from_csv(s.to_csv())
    assert back.to_csv() == s.to_csv()
    f = packswap.features_of(s, [1, 2])
    assert f == packswap.PackFeatures(samples=2, tokens=3700, image_tokens=1280, images=2,
                                      image_tokens_sq=1024**2 + 256**2, documents=3,
                                      document_tokens_sq=2100**2 + 700**2 + 900**2)


def test_bad_samples_and_packer_settings_are_value_errors_naming_them():
    s = packswap.SampleSet()
    with pytest.raises(ValueError, match=r"sample 0 has 0 tokens, must be in \[1, 2147483647\]"):
        s.push_back(0)
    with pytest.raises(ValueError, match="sample 0 has more image tokens"):
        s.push_back(10, images=[8, 8])
    s.push_back(9001)
    with pytest.raises(ValueError, match="sample 0 has 9001 tokens, capacity is 8192"):
        packswap.GreedyPacker()(s)
    assert packswap.GreedyPacker(on_oversize="skip")(s).skipped().tolist() == [0]
    with pytest.raises(ValueError, match="on_oversize is 'drop'"):
        packswap.GreedyPacker(on_oversize="drop")
    with pytest.raises(ValueError, match="capacity"):
        packswap.GreedyPacker(capacity=0)(s)
    with pytest.raises(IndexError):
        s.tokens(5)
    with pytest.raises(ValueError, match="unknown workload preset 'nope'"):
        packswap.workload_preset("nope")
    with pytest.raises(ValueError, match="line 2"):
        packswap.SampleSet.from_csv("tokens\nx\n")


def test_generate_is_deterministic_and_custom_workloads_work():
    a = packswap.generate("captioning", 500, 9)
    b = packswap.generate(packswap.workload_preset("captioning"), 500, 9)
    assert a.to_csv() == b.to_csv()
    assert packswap.generate("captioning", 200, 9).to_csv() == "\n".join(
        a.to_csv().split("\n")[:201]) + "\n"  # a prefix does not depend on the count
    kind = packswap.SampleKind("photo", weight=3, min_images=1, max_images=2,
                               image_sides=[(1, 8, 16)], text_tokens=[(1, 32, 64)])
    text = packswap.SampleKind("text", text_tokens=[(1, 100, 200)], max_documents=2)
    w = packswap.Workload("mine", [kind, text], max_sample_tokens=4096)
    s = packswap.generate(w, 1000, 1)
    assert len(s) == 1000 and s.tokens().max() <= 4096
    assert w.kinds[0].image_sides == [(1, 8, 16)]
    with pytest.raises(ValueError, match="has no band"):
        packswap.Workload("bad", [packswap.SampleKind("x")])
