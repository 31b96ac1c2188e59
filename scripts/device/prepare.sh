#!/usr/bin/env bash
# Run here, before sending work to a lent GPU machine: copies what that machine lacks (GoogleTest
# sources; nanobind and pytest wheels for the Python package, installed there by gpu-suite.sh, and
# scikit-build-core's, with which torch-2gpu.sh runs `pip install .` offline; the commit, which
# records name) into .deps/, which is git-ignored and must be named in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps
[ -d .deps/googletest ] || cp -r /usr/src/googletest .deps/googletest
ls .deps/wheels/scikit_build_core-*.whl > /dev/null 2>&1 ||
  python3 -m pip download -q --only-binary=:all: -d .deps/wheels nanobind pytest scikit-build-core
# The commit the work is at (the machine gets the tree without .git): gpmbench records it from
# GPMKIT_COMMIT, which gpu-bench.sh sets from this file.
commit=$(git rev-parse --short=12 HEAD)
git diff --quiet HEAD -- || commit="$commit-dirty"
echo "$commit" > .deps/commit
du -sh .deps
