#!/usr/bin/env bash
# Run here, after prepare.sh, not on the lent machine: builds gpmbench and the gpmkit CLI for the
# GPU (the cuda preset: sm_90 code, which runs on the lent H100s and H200s; nvcc needs no GPU) and
# packs them, stripped, with the CUDA runtime library they load, into .deps/prebuilt/b.tar.gz.
# gpu-bench.sh then runs them instead of building (about 90 s of device time on a fresh machine,
# twice for gpu-ab.sh). With PATCH (made as for gpu-ab.sh), also the A side: the tree with PATCH
# reversed, built the same way, into .deps/prebuilt/a.tar.gz; the working tree is put back as it
# was (build/cuda then holds A's objects: the next build here redoes what PATCH touches).
#   scripts/device/prebuild.sh [PATCH]
# With PREBUILD_LINEINFO=1, also gpmbench built with -lineinfo into .deps/prebuilt/profile.tar.gz,
# which scripts/device/gpu-profile.sh runs instead of building it on the lent machine. With
# PREBUILD_TESTS='TEST ...' (test targets, e.g. 'ooc_mapping_test tx_test'), also those tests'
# binaries into .deps/prebuilt/tests.tar.gz, which scripts/device/gpu-tests.sh runs.
# Each pack names the commit prepare.sh recorded (.deps/commit); gpu-bench.sh uses a pack only
# at that commit and builds otherwise, so a stale pack costs time, never a wrong measurement.
# The packs travel in .deps (the device call's `carry`): about 8 MB each.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -f .deps/commit ]; then
  echo "prebuild: run scripts/device/prepare.sh first (it records the commit)" >&2
  exit 2
fi
command -v nvcc > /dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
commit=$(cat .deps/commit)
out=.deps/prebuilt
rm -rf "$out"
mkdir -p "$out"
log=/tmp/gpmkit-prebuild.$$.log

# build BUILD_DIR TARGETS [CMAKE_ARGS...]: builds TARGETS (one word, space-separated) of the tree
# as it is now in BUILD_DIR, configured with the cuda preset and CMAKE_ARGS.
build() {
  local dir=$1 targets=$2
  shift 2
  # shellcheck disable=SC2086  # the targets are split on purpose
  if ! cmake --preset cuda -B "$dir" "$@" > "$log" 2>&1 ||
      ! cmake --build "$dir" -j "$(nproc)" --target $targets >> "$log" 2>&1; then
    grep -E "error|FAILED" "$log" | head -40
    return 1
  fi
}

# seal NAME DIR BINARY: packs DIR (stripped binaries; strip drops the host's symbols and debug
# sections, while the kernels' line table, -lineinfo, lives in the embedded device code and stays)
# with the CUDA runtime BINARY loads and the commit as .deps/prebuilt/NAME.tar.gz.
seal() {
  local name=$1 dir=$2 binary=$3 cudart
  cudart=$(ldd "$binary" | awk '/libcudart/ {print $3}')
  [ -n "$cudart" ] && cp -L "$cudart" "$dir/"
  echo "$commit" > "$dir/commit"
  tar -czf "$out/$name.tar.gz" -C "$dir" .
  rm -rf "$dir"
}

# pack SIDE [BUILD_DIR [CMAKE_ARGS...]]: builds the tree as it is now (in build/cuda, or
# BUILD_DIR configured with CMAKE_ARGS) and packs the binaries as .deps/prebuilt/SIDE.tar.gz.
pack() {
  local side=$1 build=${2:-build/cuda}
  shift $(($# < 2 ? $# : 2))
  build "$build" "gpmbench gpmkit_cli" "$@" || return 1
  local dir
  dir=$(mktemp -d)
  strip -o "$dir/gpmbench" "$build/bench/gpmbench"
  strip -o "$dir/gpmkit" "$build/tools/gpmkit/gpmkit"
  seal "$side" "$dir" "$build/bench/gpmbench"
}

# pack_tests TEST...: builds these test targets in build/cuda and packs their binaries as
# .deps/prebuilt/tests.tar.gz.
pack_tests() {
  build build/cuda "$*" || return 1
  local dir t binary
  dir=$(mktemp -d)
  for t in "$@"; do
    binary=$(find build/cuda/tests -type f -name "$t" -perm -u+x | head -n 1)
    if [ -z "$binary" ]; then
      echo "prebuild: no test binary $t under build/cuda/tests" >&2
      return 1
    fi
    strip -o "$dir/$t" "$binary"
  done
  seal tests "$dir" "$binary"
}

pack b
# shellcheck disable=SC2086  # the test names are split on purpose
[ -n "${PREBUILD_TESTS:-}" ] && pack_tests $PREBUILD_TESTS
# For gpu-profile.sh: gpmbench with the kernels' line table, as it builds it in build/cuda-lineinfo.
[ -n "${PREBUILD_LINEINFO:-}" ] && pack profile build/cuda-lineinfo -DCMAKE_CUDA_FLAGS=-lineinfo
if [ $# -ge 1 ]; then
  patch_file=$(realpath "$1")
  patch -R -p1 -s < "$patch_file"
  trap 'patch -p1 -s < "$patch_file"' EXIT  # the tree as it was, whatever happens
  pack a
fi
du -sh "$out"/*
