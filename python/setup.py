"""Builds and installs the packswap Python package (the pybind11 module and packswap.torch).

    pip install --no-build-isolation ./python

with Debian's python3-pip, python3-setuptools, python3-pybind11 and python3-numpy (python3-torch
for packswap.torch); nothing comes from PyPI. The C++ headers are taken from ../include, or from
$PACKSWAP_INCLUDE_DIR.
"""

import os
import re
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import find_packages, setup

here = Path(__file__).resolve().parent
include = Path(os.environ.get("PACKSWAP_INCLUDE_DIR", here.parent / "include"))
if not (include / "packswap" / "solve.hpp").is_file():
    raise SystemExit(f"packswap's C++ headers are not at {include}: build from a checkout of the "
                     f"repository, or set PACKSWAP_INCLUDE_DIR")
version_hpp = (include / "packswap" / "version.hpp").read_text()
version = ".".join(re.search(rf"#define PACKSWAP_VERSION_{part} (\d+)", version_hpp).group(1)
                   for part in ("MAJOR", "MINOR", "PATCH"))

# The module's sources compile in parallel (one job per core unless PACKSWAP_BUILD_JOBS says).
ParallelCompile("PACKSWAP_BUILD_JOBS", default=0).install()

core = Pybind11Extension(
    "packswap._core",
    sorted(str(p.relative_to(here)) for p in (here / "src").glob("*.cpp")),
    include_dirs=[str(include), str(here / "src")],
    cxx_std=17,
    # After the interpreter's own flags: optimised, no debug info (a smaller, faster build).
    extra_compile_args=["-O2", "-g0"],
)

setup(
    name="packswap",
    version=version,
    description="Straggler-free multimodal data-parallel training by swapping whole packs",
    packages=find_packages(include=["packswap", "packswap.*"]),
    ext_modules=[core],
    cmdclass={"build_ext": build_ext},
    python_requires=">=3.8",
    install_requires=["numpy"],
    extras_require={"torch": ["torch>=1.13"]},
    zip_safe=False,
)
