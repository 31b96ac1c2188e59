#!/usr/bin/env bash
# Run here, on the developer's machine (it needs the network), before a device call that runs
# scripts/peers/gphash-artifact/run.sh: exports the GPHash authors' artifact (FAST'25,
# github.com/LighT-chenml/GPHash) at the pinned commit into .deps/peers/gphash-artifact/src, which
# is git-ignored and travels to the device when the call names .deps in `carry`. Nothing of it is
# ever copied into the project tree. Its one library dependency, PMDK's libpmem (pmem_map_file
# alone), and the libpci header it includes are replaced by the headers in shim/, so no other
# source is needed.
#   GPHASH_ARTIFACT_GIT=DIR   a local git directory holding the commit (no network needed)
#   GPHASH_ARTIFACT_URL=URL   another remote (default: the authors' GitHub repository)
set -euo pipefail
cd "$(dirname "$0")/../../.."
# The artifact's last commit ("update README", 2024-12-20).
commit=0ee2abab3be30969c3cf874ad57ff63acce93bcc
url=${GPHASH_ARTIFACT_URL:-https://github.com/LighT-chenml/GPHash.git}
dest=.deps/peers/gphash-artifact
git check-ignore -q "$dest/commit" || {
  echo "fetch.sh: $dest is not git-ignored here; refusing to put the artifact in the tree" >&2
  exit 1
}
if [ -f "$dest/commit" ] && [ "$(cat "$dest/commit")" = "$commit" ] &&
  [ -f "$dest/src/test/ycsb_bench.cu" ]; then
  echo "$dest: already at $commit"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${GPHASH_ARTIFACT_GIT:-}" ]; then
  gitdir=$GPHASH_ARTIFACT_GIT
else
  gitdir=$tmp/git
  git init -q --bare "$gitdir"
  # GitHub serves a commit by its id; a server that does not gets the whole history fetched.
  git --git-dir="$gitdir" fetch -q --depth 1 "$url" "$commit" ||
    git --git-dir="$gitdir" fetch -q "$url" '+refs/heads/*:refs/heads/*'
fi
# A full commit id names its content: what is exported is what was pinned.
if [ "$(git --git-dir="$gitdir" rev-parse --verify -q "$commit^{commit}")" != "$commit" ]; then
  echo "fetch.sh: commit $commit not found in $gitdir" >&2
  exit 1
fi
rm -rf "$dest/src"
mkdir -p "$dest/src"
git --git-dir="$gitdir" archive "$commit" | tar -x -C "$dest/src"
echo "$commit" > "$dest/commit"
echo "$dest: the artifact at $commit ($(du -sh "$dest/src" | cut -f1)); name .deps in carry"
