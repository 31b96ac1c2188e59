#!/usr/bin/env bash
# Runs on a lent GPU machine: the platform benchmark with 10 repeats, once with the pool in
# /dev/shm (4 KiB pages) and once in a private tmpfs mounted huge=always (2 MiB pages; needs
# root, changes no system-wide setting). Records go to $OUT/default-pages and $OUT/huge-pages;
# commit them under bench/results/<gpu>/ and bench/results/<gpu>-hugepages/ and run
# `gpmbench report` on each.
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
log=/tmp/gpmkit-build.log
if ! cmake --preset cuda > "$log" 2>&1 || ! cmake --build --preset cuda -j "$(nproc)" >> "$log" 2>&1; then
  grep -E "error|FAILED" "$log" | head -40
  exit 1
fi
build/cuda/bench/gpmbench run platform --repeats 10 --disk-dir /var/tmp --out "$out/default-pages"
mnt=/mnt/gpmkit-huge
mkdir -p "$mnt"
mount -t tmpfs -o size=16G,huge=always gpmkit-huge "$mnt" || exit 1
build/cuda/tools/gpmkit/gpmkit info --pm-dir "$mnt" | sed -n '/^pm dir/,/gpu mappable/p'
build/cuda/bench/gpmbench run platform --repeats 10 --disk-dir /var/tmp --pm-dir "$mnt" \
  --out "$out/huge-pages"
status=$?
umount "$mnt"
exit $status
