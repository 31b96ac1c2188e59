#!/usr/bin/env bash
# Experiment: how the kernel geometry of the platform workload's streaming persists affects their
# bandwidth relative to cudaMemcpy device-to-host (both measured in each run). Runs on a GPU
# machine after a cuda build; appends every run's records to $OUT/geometry.jsonl and prints one
# line per geometry. Findings are kept in bench/experiments/NOTES.md.
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out/sweep"
for threads in 128 256 512 1024; do
  for per_sm in 1 2 4 8 16; do
    [ $((threads * per_sm)) -gt 2048 ] && continue
    build/cuda/bench/gpmbench run platform --modes persist_stream,persist_stream_fence_each \
      --threads-per-block "$threads" --blocks-per-sm "$per_sm" --repeats 5 \
      --out "$out/sweep" 2>&1 | grep -E "persist_stream" | sed "s/^/t=$threads b\/sm=$per_sm /"
  done
done
mv "$out/sweep/platform.jsonl" "$out/geometry.jsonl" && rmdir "$out/sweep"
