"""examples/python/train.py runs (two spawned ranks, a few steps) and rebalancing never makes
the slowest rank's encoder cost worse."""

import os
import re
import subprocess
import sys

from conftest import REPO


def test_the_training_example_runs_and_reports_both_costs():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, str(REPO / "examples" / "python" / "train.py"),
                          "--nproc", "2", "--steps", "3", "--ga", "4", "--device", "cpu",
                          "--timeout", "60"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = re.findall(r"step (\d+): .* ([\d.]+) ms without rebalancing, +([\d.]+) ms with "
                      r"\(lower bound ([\d.]+)\)", out.stdout)
    assert [int(r[0]) for r in rows] == [0, 1, 2], out.stdout
    for _, without, with_, bound in rows:
        assert float(bound) <= float(with_) <= float(without)
