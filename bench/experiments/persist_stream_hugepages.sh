#!/usr/bin/env bash
# Experiment: do 2 MiB pages under the pool change the bandwidth of GPU stores into it? Runs the
# streaming modes with the pool in /dev/shm (4 KiB pages) and in a private tmpfs mounted with
# huge=always (transparent huge pages), three times each, alternating. Needs root for the mount
# (the lent GPU machines run commands as root); changes no system-wide setting. Appends records to
# $OUT/hugepages/<page size>.jsonl. Findings: bench/experiments/NOTES.md.
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out/hugepages"
echo "shmem_enabled: $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)"
mnt=/mnt/gpmkit-huge
mkdir -p "$mnt"
mount -t tmpfs -o size=8G,huge=always gpmkit-huge "$mnt" || { echo "cannot mount a huge=always tmpfs"; exit 1; }
fallocate -l 64M "$mnt/probe" && grep ShmemHugePages /proc/meminfo && rm "$mnt/probe"
for round in 1 2 3; do
  for dir in /dev/shm "$mnt"; do
    tag=$([ "$dir" = /dev/shm ] && echo 4k || echo 2m)
    build/cuda/bench/gpmbench run platform --modes persist_stream,persist_stream_fence_each,persist_random8 \
      --pm-dir "$dir" --out "$out/hugepages/$tag" 2>&1 | grep -E "persist|memcpy" | sed "s/^/$tag round $round: /"
  done
done
umount "$mnt"
