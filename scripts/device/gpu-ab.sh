#!/usr/bin/env bash
# Runs on a lent GPU machine: an A/B of one change, measured side by side in one call.
#   scripts/device/gpu-ab.sh PATCH 'W [gpmbench run options]' ...
# B is the tree as it came; A is the tree with PATCH reversed (the change undone: make PATCH here
# with `git diff <before> <after> -- <files> > ab.patch`, or `git show <commit> -- <files>`, and
# leave it untracked so that it travels with the tree). AB_ROUNDS (1) rounds of B then A, each a
# scripts/device/gpu-bench.sh runs call with the same arguments (RUNS_BUDGET_S each, its records
# in $OUT/<side><round>/results.tar.gz); A's records name the commit with "-without-<PATCH's
# name>" appended. The tree is left as it came, also when a step fails.
set -uo pipefail
if [ $# -lt 2 ] || [ ! -f "$1" ]; then
  echo "usage: $0 PATCH 'W [gpmbench run options]' ..." >&2
  exit 2
fi
patch_file=$(realpath "$1")
shift
out=${OUT:-$PWD/gpu-out}
commit=${GPMKIT_COMMIT:-$(cat .deps/commit 2>/dev/null || echo unknown)}
undone="$commit-without-$(basename "$patch_file" .patch)"
patch -R -p1 --dry-run -s < "$patch_file" > /dev/null || {
  echo "gpu-ab: $patch_file does not reverse cleanly on this tree" >&2
  exit 2
}
status=0
for round in $(seq 1 "${AB_ROUNDS:-1}"); do
  OUT=$out/b$round GPMKIT_COMMIT=$commit scripts/device/gpu-bench.sh runs "$@" || status=1
  patch -R -p1 -s < "$patch_file" || exit 1
  OUT=$out/a$round GPMKIT_COMMIT=$undone scripts/device/gpu-bench.sh runs "$@" || status=1
  patch -p1 -s < "$patch_file" || exit 1
done
exit $status
