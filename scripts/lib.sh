# Shared by the scripts in this folder; sourced, not run.

step() { printf '\n==> [%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

jobs() { nproc 2>/dev/null || echo 2; }

# Debian packages the build, tests, examples, benchmarks and the API reference (doxygen) need.
# python3-scipy for scripts/fewest_within_limit.py and its tests (pytest, ctest).
packswap_packages=(cmake make g++ clang libclang-rt-14-dev libc++-14-dev libc++abi-14-dev doctest-dev libbenchmark-dev
                   libopenmpi-dev openmpi-bin doxygen
                   python3 python3-dev python3-numpy python3-torch python3-pytest python3-pybind11
                   pybind11-dev python3-setuptools python3-wheel python3-pip python3-venv python3-scipy)

# Debian's interpreter, the one that sees the python3-* packages above (a python3 found earlier on
# PATH may be another one without them).
packswap_python=/usr/bin/python3

# Installs whatever is missing when running as root on Debian; otherwise only reports it.
ensure_packages() {
  local missing=()
  for pkg in "${packswap_packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "missing packages: ${missing[*]} (run as root to install them, or install them yourself)" >&2
  fi
}

# Open MPI refuses to run as root unless told it may; tests launch it through mpirun.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
