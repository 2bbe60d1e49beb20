"""Shared by the Python tests: where the build tree is, and packswap imported from it.

./scripts/test runs them with PYTHONPATH=<build>/python and PACKSWAP_BUILD_DIR=<build>; run by
hand they default to build/dev.
"""

import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("PACKSWAP_BUILD_DIR", REPO / "build" / "dev")).resolve()

try:
    import packswap  # noqa: F401
except ImportError:
    sys.path.insert(0, str(BUILD / "python"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(BUILD / "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    import packswap  # noqa: F401


@pytest.fixture(scope="session")
def build_dir():
    return BUILD


@pytest.fixture(scope="session")
def plan_tool():
    tool = BUILD / "examples" / "plan" / "packswap-plan"
    if not tool.is_file():
        pytest.fail(f"{tool} is missing: build the dev preset first (./scripts/test quick)")
    return tool
