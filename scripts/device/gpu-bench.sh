#!/usr/bin/env bash
# Runs on a lent GPU machine (docs/benchmarks.md): builds the cuda backend, then
#   scripts/device/gpu-bench.sh suite [gpmbench suite options]   the GPMbench suite, --full sizes,
#       one workload at a time under SUITE_PER_WORKLOAD_S (150) within SUITE_BUDGET_S (540);
#       SUITE_RESUME=DIR (an earlier call's unpacked suite-full) goes on where it stopped: the
#       modes DIR/suite-progress.txt lists are not run again (gpmbench suite --resume), so calls
#       add up to one complete results directory
#   scripts/device/gpu-bench.sh platform                        the platform workload, 10 repeats,
#       once with pools in /dev/shm (4 KiB pages), once in a private tmpfs mounted huge=always
#       (2 MiB pages; needs root, changes no system-wide setting)
#   scripts/device/gpu-bench.sh build                           the build alone (gpu-ab.sh); with
#       a pack from scripts/device/prebuild.sh made at this commit, its binaries instead
#   scripts/device/gpu-bench.sh runs 'W [gpmbench run options]' ...   chosen workloads and modes,
#       one `gpmbench run` per argument (e.g. 'kvs_set --modes gpm,gpm-conv --repeats 3'), in
#       order, each under what is left of RUNS_BUDGET_S (540), starting no mode after 4/5 of it
#       (gpmbench run --budget; exit 3: cut short); the records of all of them go to
#       one directory, runs/ in the archive (a jsonl per workload), the log to $OUT/runs.txt;
#       RUNS_HUGE=1 puts their pools on 2 MiB pages (the private tmpfs below)
# Results go to $OUT as one archive per results directory (the device returns at most 8 files):
# unpack under bench/results/<gpu>/ and run `gpmbench report` on each.
set -uo pipefail
# The records name the commit they were measured with (prepare.sh wrote it; no .git here).
[ -f .deps/commit ] && export GPMKIT_COMMIT=${GPMKIT_COMMIT:-$(cat .deps/commit)}
what=${1:-suite}
shift || true
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
log=/tmp/gpmkit-build.$$.log  # one per call: gpu-ab.sh builds two trees at once
targets="gpmbench gpmkit_cli"  # gpmkit_cli: `gpmkit info` on the huge-page tmpfs
# Binaries that scripts/device/prebuild.sh built on the developer's machine at this commit
# replace the build (GPMKIT_PREBUILT_SIDE: gpu-ab.sh's A tree takes a.tar.gz).
# shellcheck source=scripts/device/prebuilt.sh
. "$(dirname "$0")/prebuilt.sh"
pack=.deps/prebuilt/${GPMKIT_PREBUILT_SIDE:-b}.tar.gz
if use_prebuilt "$pack" build/cuda; then
  :
elif ! cmake --preset cuda > "$log" 2>&1 ||
    ! cmake --build --preset cuda -j "$(nproc)" --target $targets >> "$log" 2>&1; then
  grep -E "error|FAILED" "$log" | head -40
  exit 1
fi
[ "$what" = build ] && exit 0
results=/tmp/gpmkit-results
rm -rf "$results"
# A private tmpfs at $huge mounted huge=always (2 MiB pages; needs root, changes no system-wide
# setting), for pools; mount_huge says what gpmkit finds there.
huge=/mnt/gpmkit-huge
mount_huge() {
  mkdir -p "$huge"
  mount -t tmpfs -o size=16G,huge=always gpmkit-huge "$huge" || return 1
  build/cuda/tools/gpmkit/gpmkit info --pm-dir "$huge" | sed -n '/^pm dir/,/gpu mappable/p'
}
case "$what" in
  suite)
    # One workload at a time, each under a time limit, within a total budget (a device command
    # runs at most 10 minutes): gpmbench starts no mode after the budget and records each mode as
    # it is done in suite-progress.txt, so a workload cut short (timeout, budget) goes on at its
    # next mode in the next call. SUITE_WORKLOADS orders or narrows the list.
    budget=${SUITE_BUDGET_S:-540}
    per=${SUITE_PER_WORKLOAD_S:-150}
    workloads=${SUITE_WORKLOADS:-$(build/cuda/bench/gpmbench list | grep -E '^[a-z]' | cut -d: -f1)}
    status=0
    mkdir -p "$results/suite-full"
    [ -n "${SUITE_RESUME:-}" ] && cp -r "$SUITE_RESUME/." "$results/suite-full/"
    for w in $workloads; do
      left=$((budget - SECONDS))
      if [ "$left" -lt 20 ]; then
        echo "== $w: not run (time budget spent)" | tee -a "$out/suite.txt"
        continue
      fi
      limit=$(( per < left ? per : left ))
      timeout "$limit" build/cuda/bench/gpmbench suite --full --only "$w" --no-report --resume \
        --budget "$((limit - 10))" --disk-dir /var/tmp --out "$results/suite-full" "$@" \
        >> "$out/suite.txt" 2>&1
      rc=$?
      case $rc in
        0) note=done ;;
        3) note="budget spent, modes left" ;;
        124) note="cut at ${limit} s" ;;
        *) note=failed; status=1 ;;
      esac
      echo "== $w: exit $rc ($note), ${SECONDS} s" | tee -a "$out/suite.txt"
    done
    ;;
  runs)
    budget=${RUNS_BUDGET_S:-540}
    status=0
    mkdir -p "$results/runs"
    pm=()
    if [ "${RUNS_HUGE:-0}" = 1 ]; then
      mount_huge || exit 1
      pm=(--pm-dir "$huge")
    fi
    for args in "$@"; do
      left=$((budget - SECONDS))
      if [ "$left" -lt 20 ]; then
        echo "== $args: not run (time budget spent)" | tee -a "$out/runs.txt"
        continue
      fi
      # gpmbench starts no mode after four fifths of what is left, and an interleaved run then
      # records the rounds it finished; the rest is for the mode in flight, before the timeout.
      # shellcheck disable=SC2086  # each argument is a gpmbench command line, split on purpose
      timeout "$left" build/cuda/bench/gpmbench run $args --budget $((left * 4 / 5)) \
        --disk-dir /var/tmp "${pm[@]}" --out "$results/runs" >> "$out/runs.txt" 2>&1
      rc=$?
      [ $rc -ne 0 ] && status=1
      echo "== $args: exit $rc, ${SECONDS} s" | tee -a "$out/runs.txt"
    done
    [ ${#pm[@]} -gt 0 ] && umount "$huge"
    ;;
  platform)
    build/cuda/bench/gpmbench run platform --repeats 10 --disk-dir /var/tmp \
      --out "$results/default-pages"
    mount_huge || exit 1
    build/cuda/bench/gpmbench run platform --repeats 10 --disk-dir /var/tmp --pm-dir "$huge" \
      --out "$results/huge-pages"
    status=$?
    umount "$huge"
    ;;
  *)
    echo "usage: $0 suite|platform|build|runs [options]" >&2
    exit 2
    ;;
esac
tar -czf "$out/results.tar.gz" -C "$results" .
exit $status
