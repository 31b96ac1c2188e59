#!/usr/bin/env bash
# Runs on a lent GPU machine (see docs/bench.md, "On a GPU machine"): builds the cuda backend,
# runs every test labelled `gpu`, then (with --full) the crash tests with more trials, the demo
# and `gpmkit info`. A pass/fail summary and logs.tar.gz go to $OUT (default ./gpu-out); the
# benchmarks are scripts/device/gpu-bench.sh. GoogleTest sources come from .deps/googletest when the machine has
# no GoogleTest (scripts/device/prepare.sh puts them there).
#   scripts/device/gpu-suite.sh [--full] [--crash-trials N]
set -uo pipefail
full=0
crash_trials=60
while [ $# -gt 0 ]; do
  case "$1" in
    --full) full=1 ;;
    --crash-trials) crash_trials=$2; shift ;;
    *) echo "usage: $0 [--full] [--crash-trials N]" >&2; exit 2 ;;
  esac
  shift
done
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
{ nvidia-smi; nvcc --version; cmake --version; uname -a; df -h /dev/shm /var/tmp; } > "$out/machine.txt" 2>&1
grep -E "NVIDIA H|Driver Version" "$out/machine.txt" | head -3

log=/tmp/gpmkit-build.log
if ! cmake --preset cuda > "$log" 2>&1 || ! cmake --build --preset cuda -j "$(nproc)" >> "$log" 2>&1; then
  grep -E "error|FAILED" "$log" | head -40
  exit 1
fi
echo "build: ok"

ctest --preset cuda -V > "$out/ctest.log" 2>&1
status=$?
{
  echo "== gtest results per binary"
  grep -E "^[0-9]+: \[==========\] .* ran|^[0-9]+: \[  PASSED  \]|^[0-9]+: \[  FAILED  \]|^[0-9]+: running on" "$out/ctest.log"
  echo "== ctest"
  grep -E "tests passed|Test +#|\*\*\*" "$out/ctest.log"
} > "$out/summary.txt"

if [ "$full" = 1 ]; then
  {
    echo "== crash tests on the GPU, GPMKIT_CRASH_TRIALS=$crash_trials"
    GPMKIT_CRASH_TRIALS=$crash_trials timeout 420 ctest --preset cuda -L crash --output-on-failure 2>&1 \
      | grep -E "trials|violations|Test +#|tests passed|FAILED|\*\*\*"
    echo "exit: ${PIPESTATUS[0]}"
  } >> "$out/summary.txt"
  build/cuda/tools/gpmkit/gpmkit info > "$out/info.txt" 2>&1
  echo "exit: $?" >> "$out/info.txt"
  build/cuda/examples/pool_demo > "$out/demo.txt" 2>&1
  echo "exit: $?" >> "$out/demo.txt"
fi
# $OUT returns at most 8 files: the logs travel as one archive.
tar -czf "$out/logs.tar.gz" -C "$out" ctest.log $( [ "$full" = 1 ] && echo info.txt demo.txt ) 2>/dev/null
rm -f "$out/ctest.log" "$out/info.txt" "$out/demo.txt"
cat "$out/summary.txt"
exit $status
