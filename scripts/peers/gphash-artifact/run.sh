#!/usr/bin/env bash
# Runs on a lent GPU machine, from the repository root: the GPHash authors' artifact (FAST'25,
# github.com/LighT-chenml/GPHash, test/ycsb_bench.cu) on gpmkit's YCSB key sequence, so that it
# and gpmkit's GPHash are measured on one machine in one call. First, here (with the network):
#   scripts/peers/gphash-artifact/fetch.sh        # the artifact's source into .deps (git-ignored)
# then a device call that carries .deps, e.g. (gpmbench describes the machine for the records)
#   scripts/device/gpu-bench.sh build && scripts/peers/gphash-artifact/run.sh
#   scripts/device/gpu-bench.sh build && PEER_GPMBENCH=build/cuda/bench/gpmbench \
#     scripts/peers/gphash-artifact/run.sh       # gpmkit's same modes first, same call
#
# What it does, all under /tmp (nothing is written into the tree):
# 1. builds the artifact for sm_90 as its CMake Release build does (-std=c++11 -O3 -DNDEBUG; one
#    nvcc command, for its one source file) with its warp-cooperative (-DWARP_COOPERATE),
#    in-place-key (-DINPLACE_KEY), bucket-cache (-DENABLE_CACHE -DLFU_CACHE) and
#    asynchronous-reload (-DASYNC_LOADING) options, against shim/ (libpmem's pmem_map_file as a
#    plain shared mmap, libpci stubs) instead of PMDK and pciutils, with one CUDA 13 fix given on
#    the command line (cudaDeviceProp::deviceOverlap is gone: -DdeviceOverlap=asyncEngineCount);
#    its source is never edited;
# 2. builds ycsb_trace.cu (gpmkit's own YCSB generator, bench/workloads/ycsb/ycsb_ops.cuh) and
#    writes the artifact's text traces with it: the load phase (inserts of key ids 0..16M-1) and
#    the run phase of each workload (16M operations, Zipf 0.99, gpmkit's seed);
# 3. runs the artifact once per (workload, batch size) and repeat, its PM file in /dev/shm, with
#    a table that holds the run's keys at load factor 0.53 without resizing (init_level 19 for
#    16M keys, 20 for LOAD's 32M) and BktCache LFU on 20% of the buckets;
# 4. writes one gpmbench record ("gpmkit.bench/1", records.py) per (workload, batch size):
#    workload hash_batch_sweep_kv32, mode "<W>-batch<N>:gphash-artifact", so gpmbench report
#    shows it beside gpmkit's "<W>-batch<N>:gphash" (with PEER_GPMBENCH the records share the
#    gpmkit run's timestamp, which the report's side-by-side table groups by).
# Results in $OUT: gphash-artifact.jsonl (the records), summary.txt, logs.tar.gz (every log), and
# with PEER_GPMBENCH hash_batch_sweep_kv32.jsonl (gpmkit's records of the same call).
#
# Settings (environment):
#   PEER_WORKLOADS ("C A LOAD"), PEER_BATCH_LOGS ("12 16 20"), PEER_REPEATS (1: artifact runs
#   per point; each is a whole process, about 10-15 s), PEER_KEYS (16777216: keys loaded and
#   operations run, gpmkit's GPU sizes; another value is for trying the artifact alone, since
#   gpmkit's modes keep their own sizes), PEER_LEVEL (the artifact's init_level; default: the
#   smallest whose table is at most 60% full after the run), PEER_PM_DIR (/dev/shm),
#   PEER_COUNT_HIT (0; 1 adds -DCOUNT_HIT: the artifact counts cache hits, one more atomic per
#   lane and operation, and the records get cache_hit_rate), PEER_BUDGET_S (360: no artifact run
#   starts after it), PEER_GPMBENCH (a gpmbench binary: gpmkit's modes first; without
#   it build/cuda/bench/gpmbench, which only describes the machine),
#   PEER_GPMKIT_REPEATS (3) and PEER_GPMKIT_WARMUP (1) for them, PEER_TIMESTAMP (the records'
#   timestamp: that of a gpmbench run made apart, to be shown beside it), NVCC, OUT,
#   GPHASH_TRACE_KEYS (ycsb_trace.cu).
# Expected device time with the defaults: ~20 s of builds and traces, then 9 artifact runs of
# 10-15 s (most of each is the artifact parsing its 32M-line text traces and mapping its PM file):
# about 2.5 minutes. gpmkit's 9 modes with PEER_GPMBENCH add about 2 minutes at 3 repeats and a
# warm-up (about 40 s at PEER_GPMKIT_REPEATS=1 PEER_GPMKIT_WARMUP=0).
set -uo pipefail
here=scripts/peers/gphash-artifact
src=.deps/peers/gphash-artifact/src
if [ ! -f "$src/test/ycsb_bench.cu" ]; then
  echo "run.sh: no artifact source in $src: run $here/fetch.sh on the developer's machine and" \
    "name .deps in the device call's carry" >&2
  exit 2
fi
out=${OUT:-$PWD/gpu-out}
work=/tmp/gphash-artifact
workloads=${PEER_WORKLOADS:-C A LOAD}
batch_logs=${PEER_BATCH_LOGS:-12 16 20}
repeats=${PEER_REPEATS:-1}
keys=${PEER_KEYS:-16777216}
pm_dir=${PEER_PM_DIR:-/dev/shm}
budget=${PEER_BUDGET_S:-360}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
artifact_commit=$(cat .deps/peers/gphash-artifact/commit 2> /dev/null || echo unknown)
# As gpmbench runs (main.cpp): modules loaded at start, not at a timed first launch.
export CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}
rm -rf "$work"
mkdir -p "$out" "$work/build" "$work/gen/gpm" "$work/traces" "$work/logs" "$work/results"
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

# ---- 1, 2: build the artifact and the trace writer, side by side ----------------------------
defines=(-DWARP_COOPERATE -DINPLACE_KEY -DENABLE_CACHE -DLFU_CACHE -DASYNC_LOADING)
[ "${PEER_COUNT_HIT:-0}" = 1 ] && defines+=(-DCOUNT_HIT)
includes=(-I "$here/shim")
# The artifact includes <cublas_v2.h> and calls nothing of it: a toolkit without it gets an
# empty one.
if ! echo '#include <cublas_v2.h>' | "$nvcc" -x cu -E - -o /dev/null 2> /dev/null; then
  includes+=(-I "$here/shim-fallback")
fi
sm90="-gencode=arch=compute_90,code=sm_90"
artifact_build=("$nvcc" -std=c++11 -O3 -DNDEBUG "$sm90" -Xcompiler -pthread "${defines[@]}"
  -DdeviceOverlap=asyncEngineCount "${includes[@]}" -I "$src/src" "$src/test/ycsb_bench.cu"
  -o "$work/build/ycsb_bench")
# gpmkit's configured header (CMake writes it into a build tree; this needs no build tree).
version=$(sed -n 's/^project(gpmkit VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
IFS=. read -r v_major v_minor v_patch <<< "${version:-0.0.0}"
sed -e "s/@PROJECT_VERSION_MAJOR@/$v_major/; s/@PROJECT_VERSION_MINOR@/$v_minor/" \
  -e "s/@PROJECT_VERSION_PATCH@/$v_patch/; s/@PROJECT_VERSION@/$version/" \
  -e 's/@GPM_BACKEND_IS_CUDA@/1/; s/@GPM_BACKEND_IS_HOST@/0/; s/@GPM_BACKEND@/cuda/' \
  cmake/config.hpp.in > "$work/gen/gpm/config.hpp"
trace_build=("$nvcc" -std=c++20 -O2 "$sm90" -I "$work/gen" -I include -I bench
  "$here/ycsb_trace.cu" -o "$work/build/ycsb_trace")
"${artifact_build[@]}" > "$work/logs/build-artifact.txt" 2>&1 &
artifact_pid=$!
"${trace_build[@]}" > "$work/logs/build-trace.txt" 2>&1
trace_status=$?
wait "$artifact_pid"
artifact_status=$?
say "artifact $artifact_commit: ${artifact_build[*]}"
if [ $artifact_status -ne 0 ] || [ $trace_status -ne 0 ]; then
  cat "$work/logs/build-artifact.txt" "$work/logs/build-trace.txt" >&2
  say "run.sh: build failed (artifact $artifact_status, ycsb_trace $trace_status)"
  tar -czf "$out/logs.tar.gz" -C "$work" logs
  exit 1
fi
say "== built, ${SECONDS} s"
# The records' machine object, as gpmbench writes it in its own records (a gpmbench of
# scripts/device/prebuild.sh's pack loads the CUDA runtime packed beside it).
gpmbench=${PEER_GPMBENCH:-build/cuda/bench/gpmbench}
LD_LIBRARY_PATH=$(dirname "$gpmbench")/../prebuilt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
"$gpmbench" machine > "$work/machine.json" || {
  say "run.sh: $gpmbench machine failed (no gpmbench: run scripts/device/gpu-bench.sh build" \
    "first; or no CUDA device)"
  tar -czf "$out/logs.tar.gz" -C "$work" logs
  exit 1
}
"$work/build/ycsb_trace" load "$keys" "$work/traces/load.txt" || exit 1
for w in $workloads; do
  "$work/build/ycsb_trace" run "$w" "$keys" "$keys" "$work/traces/$w.run" || exit 1
  ln -s load.txt "$work/traces/$w.load"  # the artifact reads <prefix>.load and <prefix>.run
done
say "== traces written, ${SECONDS} s ($(du -sh "$work/traces" | cut -f1))"

# ---- gpmkit's side (optional), in the same call ----------------------------------------------
# One timestamp for all records of this call, as gpmbench gives one to all records of a run.
timestamp=${PEER_TIMESTAMP:-$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)}
if [ -n "${PEER_GPMBENCH:-}" ]; then
  modes=
  for w in $workloads; do
    for lb in $batch_logs; do modes+=${modes:+,}$w-batch$((1 << lb)):gphash; done
  done
  GPMKIT_COMMIT=${GPMKIT_COMMIT:-$(cat .deps/commit 2> /dev/null || echo unknown)} \
    "$gpmbench" run hash_batch_sweep_kv32 --modes "$modes" \
    --repeats "${PEER_GPMKIT_REPEATS:-3}" --warmup "${PEER_GPMKIT_WARMUP:-1}" \
    --disk-dir /var/tmp --pm-dir "$pm_dir" --out "$work/results" \
    > "$work/logs/gpmbench.txt" 2>&1
  say "== gpmbench hash_batch_sweep_kv32 ($modes): exit $?, ${SECONDS} s"
  # The artifact's records take the gpmkit run's timestamp: the report's side-by-side table
  # compares the modes of one run (one timestamp).
  gpmkit_records=$work/results/hash_batch_sweep_kv32.jsonl
  if [ -s "$gpmkit_records" ] && [ -z "${PEER_TIMESTAMP:-}" ]; then
    timestamp=$(head -1 "$gpmkit_records" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["timestamp"])')
  fi
  if [ -s "$gpmkit_records" ]; then
    cp "$gpmkit_records" "$out/"
  fi
fi

# ---- 3, 4: the artifact's runs -----------------------------------------------------------------
# Its PM file (pmem_map_file in shim/libpmem.h): a 256-byte header, levels L..L+3 of 2^l buckets
# of 4 slots x 48 bytes, 2^24 + 2^26 value cells of 32 bytes, and room for one resize (level L+4)
# in case one happens after all. The artifact asks for 16 GiB whatever it needs; mapping what it
# uses spares pinning the rest in every run.
pm_bytes() {
  local level=$1
  local buckets=$(((1 << level) * 15 + (1 << (level + 4))))
  local bytes=$((256 + 192 * buckets + ((1 << 24) + (1 << 26)) * 32))
  echo $(((bytes + (2 << 20) - 1) / (2 << 20) * (2 << 20)))
}
# The smallest init_level whose 60 * 2^L slots hold max_keys at a load factor of at most 0.6.
level_for() {
  local level=10
  while [ $((60 * (1 << level) * 6)) -lt $(($1 * 10)) ]; do level=$((level + 1)); done
  echo "$level"
}
pm=$pm_dir/gphash-artifact.$$
status=0
: > "$out/gphash-artifact.jsonl"
for w in $workloads; do
  max_keys=$keys
  [ "$w" = LOAD ] && max_keys=$((2 * keys))
  level=${PEER_LEVEL:-$(level_for "$max_keys")}
  cap=$(pm_bytes "$level")
  free=$(df -B1 --output=avail "$pm_dir" 2> /dev/null | tail -1 | tr -d ' ')
  if [[ $free =~ ^[0-9]+$ ]] && [ "$free" -lt "$cap" ]; then
    # Said, not enforced (a sandbox's df can be wrong): the shim fails the mapping if no room.
    say "run.sh: warning: df says $pm_dir has $free bytes free; the PM file takes $cap"
  fi
  for lb in $batch_logs; do
    logs=()
    for r in $(seq 1 "$repeats"); do
      if [ "$SECONDS" -ge "$budget" ]; then
        say "== $w-batch$((1 << lb)) repeat $r: not run (PEER_BUDGET_S=$budget spent)"
        status=1
        continue
      fi
      log=$work/logs/$w-batch$((1 << lb))-r$r.txt
      rm -f "$pm"
      start=$SECONDS
      GPHASH_PM_MAP_BYTES=$cap timeout 150 "$work/build/ycsb_bench" "$pm" "$work/traces/$w" \
        "$keys" "$keys" "$lb" "$level" 0.2 > "$log" 2>&1
      rc=$?
      rm -f "$pm"
      say "== $w-batch$((1 << lb)) repeat $r: exit $rc, $((SECONDS - start)) s" \
        "(init_level $level, PM file $cap bytes)"
      # A detached cache-loading thread can still be in CUDA calls when main() returns, so a
      # nonzero exit after the run phase printed its figures is reported, not fatal.
      logs+=("$log")
    done
    [ ${#logs[@]} -eq 0 ] && continue
    python3 "$here/records.py" "${logs[@]}" --kind "$w" --batch $((1 << lb)) --loaded "$keys" \
      --ops "$keys" --level "$level" --machine "$work/machine.json" --timestamp "$timestamp" \
      --commit "LighT-chenml/GPHash@${artifact_commit:0:12}" \
      --count-hit "${PEER_COUNT_HIT:-0}" >> "$out/gphash-artifact.jsonl" 2>> "$summary" ||
      status=1
    tail -1 "$summary"
  done
done
cp "$work/machine.json" "$work/logs/"
tar -czf "$out/logs.tar.gz" -C "$work" logs
say "== done, ${SECONDS} s: $(wc -l < "$out/gphash-artifact.jsonl") records in" \
  "$out/gphash-artifact.jsonl"
exit $status
