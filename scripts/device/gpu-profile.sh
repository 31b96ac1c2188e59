#!/usr/bin/env bash
# Runs on a lent GPU machine: Nsight Compute on one kernel launch of a gpmbench run, with the
# warp-stall samples of every CUDA source line. Builds gpmbench with -lineinfo in
# build/cuda-lineinfo (the cuda preset's build is left as it is), then profiles, after skipping
# SKIP launches, the first launch of a kernel whose name matches KERNEL (an ncu regex).
#   scripts/device/gpu-profile.sh KERNEL 'W [gpmbench run options]' [SKIP]
# e.g. scripts/device/gpu-profile.sh launch_kernel 'tx_atm_a1 --modes helpers --repeats 1' 1
# A pack from `PREBUILD_LINEINFO=1 scripts/device/prebuild.sh` made at this commit replaces the
# build (carry .deps).
# $OUT gets profile.ncu-rep, details.txt (every section) and sass.csv (the metrics of each SASS
# instruction, among them its warp-stall samples; the CUDA source view lists only the kernel's own
# file, not the functions inlined into it). The profiled process is stopped after
# PROFILE_TIMEOUT_S (240) seconds: once the report is written, a process whose kernel ncu replayed
# can wait forever (a tx_heap launch's helpers did, its log state changed by the replays).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 KERNEL 'W [gpmbench run options]' [SKIP]" >&2; exit 2; }
kernel=$1
run_args=$2
skip=${3:-0}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
log=/tmp/gpmkit-build-lineinfo.log
# shellcheck source=scripts/device/prebuilt.sh
. "$(dirname "$0")/prebuilt.sh"
# PREBUILD_LINEINFO=1 scripts/device/prebuild.sh makes the pack, at this commit.
if use_prebuilt .deps/prebuilt/profile.tar.gz build/cuda-lineinfo; then
  :
elif ! cmake --preset cuda -B build/cuda-lineinfo -DCMAKE_CUDA_FLAGS=-lineinfo > "$log" 2>&1 ||
    ! cmake --build build/cuda-lineinfo -j "$(nproc)" --target gpmbench >> "$log" 2>&1; then
  grep -E "error|FAILED" "$log" | head -40
  exit 1
fi
# shellcheck disable=SC2086  # the gpmbench command line is split on purpose
timeout "${PROFILE_TIMEOUT_S:-240}" "$ncu" -k "regex:$kernel" --launch-skip "$skip" -c 1 --set full --import-source yes \
  -o "$out/profile" -f build/cuda-lineinfo/bench/gpmbench run $run_args --warmup 0 \
  --out /tmp/gpmkit-profile-records > "$out/ncu.log" 2>&1
status=$?
"$ncu" --import "$out/profile.ncu-rep" --page details > "$out/details.txt" 2>&1
"$ncu" --import "$out/profile.ncu-rep" --page source --print-source sass --csv \
  > "$out/sass.csv" 2>&1
exit $status
