"""The documented install command works on a fresh virtual environment (Debian's packages seen
through --system-site-packages; nothing from PyPI)."""

import os
import shutil
import subprocess
import sys
import textwrap

from conftest import REPO

SMOKE = textwrap.dedent("""
    import os, sys, tempfile
    import numpy as np
    import packswap
    assert packswap.__file__.startswith(sys.prefix), packswap.__file__
    sol = packswap.solve([5, 1, 4, 2], [10, 10, 10, 10], [0, 0, 1, 1], dp=2, ga=2)
    assert sol.metrics["A"] == sol.metrics["LB_A"]
    try:
        import torch
    except ImportError:
        print("installed without torch")
        raise SystemExit(0)
    import torch.distributed as dist
    from packswap.torch import Rebalancer
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0,
                            world_size=1)
    with Rebalancer(ga=2, cost=lambda p: int(p["x"].sum())) as rb:
        packs = [{"x": torch.tensor([3])}, {"x": torch.tensor([1])}]
        got = list(rb.step(packs))
        assert sorted(map(id, got)) == sorted(map(id, packs))  # one rank: every pack kept
    dist.destroy_process_group()
    print("installed", packswap.__version__)
""")


def test_pip_installs_the_package_into_a_fresh_virtual_environment(tmp_path):
    # A copy of what the command needs, so that the build leaves nothing in the checkout.
    src = tmp_path / "src"
    shutil.copytree(REPO / "python", src / "python",
                    ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    shutil.copytree(REPO / "include", src / "include")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PACKSWAP_BUILD_DIR")}
    subprocess.run([str(python), "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                    "--no-index", "--quiet", str(src / "python")],
                   check=True, env=env, cwd=tmp_path)
    out = subprocess.run([str(python), "-c", SMOKE], check=True, env=env, cwd=tmp_path,
                         capture_output=True, text=True)
    assert "installed" in out.stdout
