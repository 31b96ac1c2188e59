#!/usr/bin/env bash
# Installs what gpmkit's build needs on Debian/Ubuntu, and nothing that is already there:
# a C++20 compiler, CMake >= 3.25, Ninja, GoogleTest, Google Benchmark, Python's plotting
# package for benchmark reports, what the Python package needs (Python's headers, nanobind,
# NumPy, pytest) and PyTorch for its gpmkit.torch and gpmkit.dcp tests. Safe to run repeatedly. The CUDA toolkit is not installed here:
# the host backend needs none.
set -euo pipefail

missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v python3 >/dev/null || missing+=(python3)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
[ -f /usr/include/benchmark/benchmark.h ] || missing+=(libbenchmark-dev)
# Python.h for the Python package: the system Python's comes with python3-dev.
has_python_h='import os, sysconfig
exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
if command -v python3 >/dev/null && ! python3 -c "$has_python_h"; then
  missing+=(python3-dev)
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

if ! python3 -c 'import matplotlib' 2>/dev/null; then
  echo "install-deps: installing matplotlib (benchmark plots)"
  python3 -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/../bench/requirements.txt" \
    || echo "install-deps: matplotlib unavailable; benchmark reports will be written without plots"
fi

if ! python3 -c 'import nanobind, numpy, pytest, mypy' 2>/dev/null; then
  echo "install-deps: installing nanobind, numpy, pytest and mypy (the Python package and its tests)"
  python3 -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/../python/requirements.txt" \
    || echo "install-deps: the Python package's requirements are unavailable; it will not be built"
fi

if ! python3 -c 'import torch' 2>/dev/null; then
  # PyPI's wheel, the only one reachable here: it brings CUDA's libraries (about 5 GB installed,
  # about 4 minutes on the CI machine) and runs on the CPU where there is no GPU.
  echo "install-deps: installing PyTorch (the gpmkit.torch and gpmkit.dcp tests)"
  python3 -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/../python/requirements-torch.txt" \
    || echo "install-deps: PyTorch unavailable; the gpmkit.torch and gpmkit.dcp tests will be skipped"
fi
