#!/usr/bin/env bash
# Runs one crash test binary many times at once with different trial seeds, until a time budget
# is spent: thousands of crash trials on a GPU machine within one device call (the `crash-long`
# label runs them one after another and would take hours). Each shard is the binary with
# GPMKIT_CRASH_SEED (its own seed range) and GPMKIT_CRASH_TRIALS; rounds of shards start while
# the budget lasts, and a shard still running at the end is waited for. Every shard's output and
# a summary (trials counted from the tests' tally lines, failures) go to $OUT (default ./gpu-out).
#   scripts/device/crash-shards.sh BINARY [--filter GTEST_FILTER] [--budget S] [--shards N]
#                                  [--trials N] [--seed BASE]
# e.g. build/cuda/tests/tx/tx_crash_test --budget 300 --shards 12 --trials 20
set -uo pipefail
usage() {
  echo "usage: $0 BINARY [--filter F] [--budget S] [--shards N] [--trials N] [--seed BASE]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
binary=$1
shift
filter='*'
budget=300
shards=8
trials=20
seed=$((0x5eed0000))
while [ $# -gt 0 ]; do
  case "$1" in
    --filter) filter=$2; shift ;;
    --budget) budget=$2; shift ;;
    --shards) shards=$2; shift ;;
    --trials) trials=$2; shift ;;
    --seed) seed=$2; shift ;;
    *) usage ;;
  esac
  shift
done
[ -x "$binary" ] || { echo "$0: $binary is not an executable" >&2; exit 2; }
name=$(basename "$binary")
out=${OUT:-$PWD/gpu-out}/$name-shards
mkdir -p "$out"
start=$SECONDS
round=0
while [ $((SECONDS - start)) -lt "$budget" ]; do
  pids=()
  for ((i = 0; i < shards; ++i)); do
    shard=$((round * shards + i))
    # Seed ranges of 2^20 trials never overlap between shards.
    GPMKIT_CRASH_SEED=$((seed + shard * 1048576)) GPMKIT_CRASH_TRIALS=$trials \
      "$binary" --gtest_filter="$filter" > "$out/shard-$shard.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  round=$((round + 1))
done
failed=$(grep -L '^\[  PASSED  \]' "$out"/shard-*.log)
{
  echo "== $name: $round rounds of $shards shards, $trials trials per test per shard," \
    "filter '$filter', $((SECONDS - start)) s"
  # Tally lines: "[ tally    ] <what>: N trials, ..." from each test of each shard.
  cat "$out"/shard-*.log | grep -E "^\[ tally" | sed -E 's/^\[ tally +\] ([^:]+): ([0-9]+) trials.*/\1 \2/' \
    | awk '{n = $NF; $NF = ""; sub(/ +$/, ""); sum[$0] += n; total += n} END {
             for (k in sum) printf "  %s: %d trials\n", k, sum[k]; printf "  all: %d trials\n", total }'
  echo "shards passed: $(grep -l '^\[  PASSED  \]' "$out"/shard-*.log | wc -l) of $((round * shards))"
  if [ -n "$failed" ]; then
    echo "FAILED shards:"
    for f in $failed; do echo "--- $f"; grep -E "Failure|FAILED|error|Expected|Which is|trial" "$f" | head -20; done
  fi
} | tee "$out/summary.txt"
tar -czf "$out.tar.gz" -C "$out" . && rm -rf "$out"
[ -z "$failed" ]
