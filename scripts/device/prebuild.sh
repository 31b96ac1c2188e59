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
# which scripts/device/gpu-profile.sh runs instead of building it on the lent machine.
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

# pack SIDE [BUILD_DIR [CMAKE_ARGS...]]: builds the tree as it is now (in build/cuda, or
# BUILD_DIR configured with CMAKE_ARGS) and packs the binaries as .deps/prebuilt/SIDE.tar.gz.
pack() {
  local side=$1 build=${2:-build/cuda}
  shift $(($# < 2 ? $# : 2))
  if ! cmake --preset cuda -B "$build" "$@" > "$log" 2>&1 ||
      ! cmake --build "$build" -j "$(nproc)" --target gpmbench gpmkit_cli >> "$log" 2>&1; then
    grep -E "error|FAILED" "$log" | head -40
    return 1
  fi
  local dir
  dir=$(mktemp -d)
  # strip drops the host's symbols and debug sections; the kernels' line table (-lineinfo) lives
  # in the embedded device code and stays.
  strip -o "$dir/gpmbench" "$build/bench/gpmbench"
  strip -o "$dir/gpmkit" "$build/tools/gpmkit/gpmkit"
  local cudart
  cudart=$(ldd "$build/bench/gpmbench" | awk '/libcudart/ {print $3}')
  [ -n "$cudart" ] && cp -L "$cudart" "$dir/"
  echo "$commit" > "$dir/commit"
  tar -czf "$out/$side.tar.gz" -C "$dir" .
  rm -rf "$dir"
}

pack b
# For gpu-profile.sh: gpmbench with the kernels' line table, as it builds it in build/cuda-lineinfo.
[ -n "${PREBUILD_LINEINFO:-}" ] && pack profile build/cuda-lineinfo -DCMAKE_CUDA_FLAGS=-lineinfo
if [ $# -ge 1 ]; then
  patch_file=$(realpath "$1")
  patch -R -p1 -s < "$patch_file"
  trap 'patch -p1 -s < "$patch_file"' EXIT  # the tree as it was, whatever happens
  pack a
fi
du -sh "$out"/*
