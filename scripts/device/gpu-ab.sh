#!/usr/bin/env bash
# Runs on a lent GPU machine: an A/B of one change, measured side by side in one call.
#   scripts/device/gpu-ab.sh PATCH 'W [gpmbench run options]' ...
# B is the tree as it came; A is a copy of it (without build/) with PATCH reversed, the change
# undone: make PATCH here with `git diff <before> <after> -- <files> > ab.patch`, or
# `git show <commit> -- <files>`, and leave it untracked so that it travels with the tree. Both
# trees are built once, side by side, before any run (a patch that touches a header every
# workload includes no longer rebuilds gpmbench at each switch; scripts/device/prebuild.sh PATCH,
# run on the developer's machine, builds both there instead); then AB_ROUNDS (1) rounds of both
# sides, B first in odd rounds and A first in even ones, each side a scripts/device/gpu-bench.sh
# runs call with the same arguments (RUNS_BUDGET_S each, for runs only). A's records name the commit with "-without-<PATCH's name>" appended.
# Everything comes back as two files (the device returns at most 8): $OUT/ab.txt, the runs'
# summary lines, and $OUT/ab.tar.gz, each side's and round's runs.txt and results.tar.gz.
set -uo pipefail
if [ $# -lt 2 ] || [ ! -f "$1" ]; then
  echo "usage: $0 PATCH 'W [gpmbench run options]' ..." >&2
  exit 2
fi
patch_file=$(realpath "$1")
shift
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
commit=${GPMKIT_COMMIT:-$(cat .deps/commit 2>/dev/null || echo unknown)}
undone="$commit-without-$(basename "$patch_file" .patch)"
tree_b=$PWD
tree_a=/tmp/gpmkit-ab-a
work=/tmp/gpmkit-ab-out
rm -rf "$tree_a" "$work"
mkdir -p "$tree_a" "$work"
tar -C "$tree_b" --exclude=./build -cf - . | tar -C "$tree_a" -xf -
(cd "$tree_a" && patch -R -p1 -s < "$patch_file") || {
  echo "gpu-ab: $patch_file does not reverse cleanly on this tree" >&2
  exit 2
}
scripts/device/gpu-bench.sh build > "$work/build-b.txt" 2>&1 &
b_build=$!
(cd "$tree_a" && GPMKIT_PREBUILT_SIDE=a scripts/device/gpu-bench.sh build) > "$work/build-a.txt" 2>&1
a_status=$?
wait "$b_build"
b_status=$?
if [ $a_status -ne 0 ] || [ $b_status -ne 0 ]; then
  cat "$work/build-b.txt" "$work/build-a.txt"
  exit 1
fi
echo "== built both sides, ${SECONDS} s" | tee "$out/ab.txt"
status=0
# run_b ROUND ARGS..., run_a ROUND ARGS...: one side's runs (b: the tree as it came; a: the
# change undone).
run_b() { OUT=$work/b$1 GPMKIT_COMMIT=$commit scripts/device/gpu-bench.sh runs "${@:2}"; }
run_a() {
  (cd "$tree_a" && OUT=$work/a$1 GPMKIT_COMMIT=$undone GPMKIT_PREBUILT_SIDE=a \
    scripts/device/gpu-bench.sh runs "${@:2}")
}
for round in $(seq 1 "${AB_ROUNDS:-1}"); do
  # Odd rounds run B first, even rounds A first, so that neither side always runs second (a
  # machine that warms up or fills its page cache over a call favours the later runs).
  if [ $((round % 2)) -eq 1 ]; then
    run_b "$round" "$@" || status=1
    run_a "$round" "$@" || status=1
  else
    run_a "$round" "$@" || status=1
    run_b "$round" "$@" || status=1
  fi
  for side in b a; do sed "s/^==/== $side$round:/" "$work/$side$round/runs.txt"; done |
    grep "^==" | tee -a "$out/ab.txt"
done
tar -czf "$out/ab.tar.gz" -C "$work" .
exit $status
