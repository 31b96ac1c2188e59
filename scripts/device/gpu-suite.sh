#!/usr/bin/env bash
# Runs on a lent GPU machine (docs/bench.md, "On a GPU machine"): builds the cuda backend, runs
# every test labelled `gpu` (unit, crash with their default trials, the quick suite, the
# crash-and-resume demo), then with --crash-trials N the crash tests again with N trials each,
# and `gpmkit info`. A pass/fail summary and logs.tar.gz go to $OUT (default ./gpu-out); the
# benchmarks are scripts/device/gpu-bench.sh. GoogleTest sources come from .deps/googletest when
# the machine has none (scripts/device/prepare.sh puts them there).
#   scripts/device/gpu-suite.sh [--crash-trials N] [--jobs J]
set -uo pipefail
crash_trials=0
jobs=4
while [ $# -gt 0 ]; do
  case "$1" in
    --crash-trials) crash_trials=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    *) echo "usage: $0 [--crash-trials N] [--jobs J]" >&2; exit 2 ;;
  esac
  shift
done
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
start=$SECONDS
{ nvidia-smi; nvcc --version; cmake --version; uname -a; df -h /dev/shm /var/tmp
  for p in nsys ncu compute-sanitizer; do  # the profilers a later call could use
    echo "$p: $(command -v "$p" || ls /usr/local/cuda/bin/"$p" 2>/dev/null || echo absent)"
  done; } > "$out/machine.txt" 2>&1
grep -E "NVIDIA H|Driver Version|^(nsys|ncu|compute-sanitizer):" "$out/machine.txt" | head -6

log=$out/build.log
# The Python package builds when nanobind is importable; the machine cannot reach PyPI, so the
# wheels come from .deps/wheels (prepare.sh).
if [ -d .deps/wheels ]; then
  python3 -m pip install -q --no-index --find-links .deps/wheels nanobind pytest > "$log" 2>&1 ||
    python3 -m pip install -q --break-system-packages --no-index --find-links .deps/wheels \
      nanobind pytest >> "$log" 2>&1 || echo "python: wheels not installed (see build.log)"
fi
if ! cmake --preset cuda >> "$log" 2>&1 || ! cmake --build --preset cuda -j "$(nproc)" >> "$log" 2>&1; then
  grep -E "error|FAILED" "$log" | head -40
  exit 1
fi
echo "build: ok after $((SECONDS - start)) s"

ctest --preset cuda -j "$jobs" -V > "$out/ctest.log" 2>&1
status=$?
{
  echo "== gtest results per binary"
  grep -E "^[0-9]+: \[==========\] .* ran|^[0-9]+: \[  PASSED  \]|^[0-9]+: \[  FAILED  \]|^[0-9]+: running on" "$out/ctest.log"
  echo "== crash trial lines"
  grep -iE "^[0-9]+: .*(trials|violations)" "$out/ctest.log" | head -60
  echo "== ctest ($((SECONDS - start)) s since start)"
  grep -E "tests passed|Test +#|\*\*\*|Total Test time" "$out/ctest.log"
} > "$out/summary.txt"

if [ "$crash_trials" -gt 0 ]; then
  {
    echo "== crash tests again, GPMKIT_CRASH_TRIALS=$crash_trials"
    GPMKIT_CRASH_TRIALS=$crash_trials timeout 400 ctest --preset cuda -L crash -j "$jobs" -V 2>&1 \
      | grep -iE "trials|violations|Test +#|tests passed|FAILED|\*\*\*"
    echo "exit: ${PIPESTATUS[0]} ($((SECONDS - start)) s since start)"
  } >> "$out/summary.txt"
fi
build/cuda/tools/gpmkit/gpmkit info > "$out/info.txt" 2>&1
echo "exit: $?" >> "$out/info.txt"
# $OUT returns at most 8 files: the logs travel as one archive.
tar -czf "$out/logs.tar.gz" -C "$out" ctest.log info.txt build.log 2>/dev/null
rm -f "$out/ctest.log" "$out/info.txt" "$out/build.log"
cat "$out/summary.txt"
exit $status
