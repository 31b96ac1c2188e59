#!/usr/bin/env bash
# Run here, before sending work to a lent GPU machine: copies what that machine lacks (GoogleTest
# sources; nanobind and pytest wheels for the Python package, installed there by gpu-suite.sh)
# into .deps/, which is git-ignored and must be named in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps
[ -d .deps/googletest ] || cp -r /usr/src/googletest .deps/googletest
[ -d .deps/wheels ] || python3 -m pip download -q --only-binary=:all: -d .deps/wheels \
  nanobind pytest
du -sh .deps
