#!/usr/bin/env bash
# Runs on a lent GPU machine: chosen test binaries of the cuda backend, a few at a time, each
# under a time limit, with a pass/fail line per test (what gpu-suite.sh does for every test, for
# the tests a change touched, in a share of one call). With a pack that
# `PREBUILD_TESTS='TEST ...' scripts/device/prebuild.sh` made at this commit, its binaries
# (no device time spent building); otherwise it builds the targets (about 110 s for ten tests).
#   scripts/device/gpu-tests.sh TEST...
# GPU_TESTS_JOBS (3) tests at once, each stopped after GPU_TESTS_TIMEOUT_S (150) seconds; crash
# tests take their trials from GPMKIT_CRASH_TRIALS as under ctest. $OUT gets tests.txt (the
# summary) and tests.tar.gz (every test's output); the exit status is 1 if any test failed, did
# not finish or is missing.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 TEST..." >&2; exit 2; }
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
logs=$(mktemp -d)
bin=$PWD/build/cuda/prebuilt-tests
# shellcheck source=scripts/device/prebuilt.sh
. "$(dirname "$0")/prebuilt.sh"
if pack_current .deps/prebuilt/tests.tar.gz; then
  rm -rf "$bin"
  mkdir -p "$bin"
  tar -xzf .deps/prebuilt/tests.tar.gz -C "$bin"
  export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "== .deps/prebuilt/tests.tar.gz (prebuilt at $(cat .deps/commit)): not built" | tee "$out/tests.txt"
  # tools_gpmkit_cli_test runs the CLI where a build puts it: the b pack's (prebuild.sh packs it)
  use_prebuilt .deps/prebuilt/b.tar.gz build/cuda > /dev/null ||
    echo "== no current .deps/prebuilt/b.tar.gz: the CLI test will find no gpmkit" | tee -a "$out/tests.txt"
else
  log=/tmp/gpmkit-tests-build.$$.log
  if ! cmake --preset cuda > "$log" 2>&1 ||
      ! cmake --build --preset cuda -j "$(nproc)" --target "$@" >> "$log" 2>&1; then
    grep -E "error|FAILED" "$log" | head -40
    exit 1
  fi
  mkdir -p "$bin"
  for t in "$@"; do
    found=$(find build/cuda/tests -type f -name "$t" -perm -u+x | head -n 1)
    [ -n "$found" ] && ln -sf "$PWD/$found" "$bin/$t"
  done
  echo "== built $* in ${SECONDS} s" | tee "$out/tests.txt"
fi

# one TEST: runs it from a scratch directory and prints its line of the summary.
one() {
  local t=$1 start=$SECONDS status verdict
  if [ ! -x "$bin/$t" ]; then
    echo "$t: MISSING (no such test binary)"
    return
  fi
  (cd "$(mktemp -d)" && timeout "${GPU_TESTS_TIMEOUT_S:-150}" "$bin/$t") > "$logs/$t.txt" 2>&1
  status=$?
  case $status in
    0) verdict=passed ;;
    77) verdict=skipped ;;
    124) verdict="NOT FINISHED (time limit)" ;;
    *) verdict="FAILED (exit $status)" ;;
  esac
  echo "$t: $verdict in $((SECONDS - start)) s; $(grep -E '^\[==========\] .* ran' "$logs/$t.txt" | tail -n 1)"
}

jobs=${GPU_TESTS_JOBS:-3}
running=0
for t in "$@"; do
  one "$t" >> "$logs/summary" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
sort "$logs/summary" | tee -a "$out/tests.txt"
tar -czf "$out/tests.tar.gz" -C "$logs" .
! grep -qE ": (MISSING|NOT FINISHED|FAILED)" "$logs/summary"
