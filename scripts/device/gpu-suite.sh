#!/usr/bin/env bash
# Runs on a lent GPU machine (docs/gpu.md): builds the cuda backend, runs every test labelled
# `gpu`, and writes logs plus a pass/fail summary to $OUT (default ./gpu-out).
# GoogleTest sources are taken from .deps/googletest when the machine has no GoogleTest
# (scripts/device/prepare.sh puts them there).
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
{ nvidia-smi; nvcc --version; cmake --version; uname -a; } > "$out/machine.txt" 2>&1
head -20 "$out/machine.txt"

if ! cmake --preset cuda > "$out/configure.log" 2>&1; then
  tail -40 "$out/configure.log"; exit 1
fi
if ! cmake --build --preset cuda -j "$(nproc)" > "$out/build.log" 2>&1; then
  grep -E "error|FAILED" "$out/build.log" | head -40; exit 1
fi
ctest --preset cuda -V > "$out/ctest.log" 2>&1
status=$?
{
  echo "== gtest results per binary"
  grep -E "^[0-9]+: \[==========\] .* ran|^[0-9]+: \[  PASSED  \]|^[0-9]+: \[  FAILED  \]|^[0-9]+: running on" "$out/ctest.log"
  echo "== ctest"
  grep -E "tests passed|Test +#|\*\*\*" "$out/ctest.log"
} > "$out/summary.txt"
cat "$out/summary.txt"
exit $status
