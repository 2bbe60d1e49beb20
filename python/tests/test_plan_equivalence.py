"""Python's solve is the C++ solver's, bit for bit: the same batches through packswap-plan
(examples/plan) and through packswap.solve agree on every cell and every metric."""

import itertools
import json
import subprocess

import numpy as np
import pytest

import packswap

from conftest import REPO


def batch_csv(cost, nbytes, source):
    rows = ["pack,source_rank,cost,bytes"]
    rows += [f"{p},{s},{c},{b}" for p, (c, b, s) in enumerate(zip(cost, nbytes, source))]
    return "\n".join(rows) + "\n"


def read_csv(path):
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    return data[:, 2], data[:, 3], data[:, 1]


def plan_cli(tool, batch, dp, ga, mbs, mode, eps, ranks_per_node):
    args = [str(tool), "--dp", str(dp), "--ga", str(ga), "--mbs", str(mbs), "--mode",
            mode.replace("_", "-"), "--eps", repr(eps)]
    if ranks_per_node:
        args += ["--ranks-per-node", str(ranks_per_node), "--inter-node-weight", "3"]
    out = subprocess.run(args, input=batch_csv(*batch), capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def compare(tool, batch, dp, ga, mbs, mode, eps, ranks_per_node=0):
    want = plan_cli(tool, batch, dp, ga, mbs, mode, eps, ranks_per_node)
    got = packswap.solve(*batch, dp=dp, ga=ga, mbs=mbs, mode=mode, eps=eps,
                         ranks_per_node=ranks_per_node,
                         **({"inter_node_weight": 3} if ranks_per_node else {}))
    cells = np.array(want["assignment"], dtype=np.int64)
    assert np.array_equal(got.rank, cells[:, 0])
    assert np.array_equal(got.micro_step, cells[:, 1])
    metrics = got.metrics
    for key, value in want["metrics"].items():
        if key != "solve_us":
            assert metrics[key] == value, key
    assert set(metrics) == set(want["metrics"])


def preset_batch(preset, dp, ga, mbs, seed):
    """The first global batch of a preset's stream packed into 8K packs, as the C++ benchmarks
    and the simulator cut it."""
    need = dp * ga * mbs
    count = need * 4 + 1000
    while True:
        samples = packswap.generate(preset, count, seed)
        packs = packswap.GreedyPacker()(samples)
        if len(packs) >= need:
            features = packswap.features_of(samples, packs)[:need]
            return packswap.make_pack_meta(features, dp, ga, mbs)
        count *= 2


def test_the_example_csv_solves_identically(plan_tool):
    batch = read_csv(REPO / "examples" / "plan" / "packs_example.csv")
    for mode, eps, rpn in itertools.product(["per_micro_step", "per_step"], [0.0, 0.01], [0, 2]):
        compare(plan_tool, batch, 4, 4, 1, mode, eps, rpn)


@pytest.mark.parametrize("preset", packswap.workload_preset_names())
def test_generated_batches_of_every_preset_solve_identically(plan_tool, preset):
    for mbs, mode, eps in itertools.product([1, 2], ["per_micro_step", "per_step"], [0.0, 0.01]):
        batch = preset_batch(preset, 8, 4, mbs, seed=11 + mbs)
        compare(plan_tool, batch, 8, 4, mbs, mode, eps)
    # A node map, and a larger batch.
    compare(plan_tool, preset_batch(preset, 16, 8, 1, seed=3), 16, 8, 1, "per_micro_step", 0.0,
            ranks_per_node=4)
    compare(plan_tool, preset_batch(preset, 64, 16, 1, seed=5), 64, 16, 1, "per_step", 0.01,
            ranks_per_node=8)


def test_the_cli_and_python_report_the_same_bad_input(plan_tool):
    batch = read_csv(REPO / "examples" / "plan" / "packs_example.csv")
    out = subprocess.run([str(plan_tool), "--dp", "3", "--ga", "4"], input=batch_csv(*batch),
                         capture_output=True, text=True)
    assert out.returncode == 1
    with pytest.raises(ValueError) as e:
        packswap.solve(*batch, dp=3, ga=4)
    assert str(e.value) in out.stderr
