# shellcheck shell=bash
# Sourced by gpu-bench.sh, gpu-profile.sh and gpu-tests.sh on a lent GPU machine, never run.
#   pack_current PACK
# Whether PACK is a pack that scripts/device/prebuild.sh made at the commit prepare.sh recorded
# (.deps/commit): a stale pack is never used, so it costs a build, never a wrong result.
pack_current() {
  [ -f "$1" ] && [ -f .deps/commit ] &&
    [ "$(tar -xzOf "$1" ./commit 2> /dev/null)" = "$(cat .deps/commit)" ]
}

#   use_prebuilt PACK DIR
# With a pack that scripts/device/prebuild.sh made at the commit prepare.sh recorded (.deps/commit),
# puts its binaries where a build into DIR would (DIR/bench/gpmbench, DIR/tools/gpmkit/gpmkit) and
# its CUDA runtime on LD_LIBRARY_PATH, and says so; otherwise (no pack, or one of another commit)
# returns 1 and changes nothing, and the caller builds.
use_prebuilt() {
  local pack=$1 dir=$2
  pack_current "$pack" || return 1
  mkdir -p "$dir/prebuilt" "$dir/bench" "$dir/tools/gpmkit"
  tar -xzf "$pack" -C "$dir/prebuilt"
  cp "$dir/prebuilt/gpmbench" "$dir/bench/gpmbench"
  cp "$dir/prebuilt/gpmkit" "$dir/tools/gpmkit/gpmkit"
  export LD_LIBRARY_PATH=$PWD/$dir/prebuilt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "$pack (prebuilt at $(cat .deps/commit)): its binaries in $dir, not built"
}
