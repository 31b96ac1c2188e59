#!/usr/bin/env bash
# Runs on a lent machine with two GPUs (nvidia-h200-x2 or nvidia-h100-x2; docs/workloads/torch.md,
# "Two GPUs"): installs the Python package from this tree with the cuda backend (pip install .,
# offline: nanobind, scikit-build-core and pytest come from .deps/wheels, which
# scripts/device/prepare.sh fills here; should that fail, the CMake build's package is used through
# PYTHONPATH), runs the Python tests that need two GPUs (a DDP job of two ranks over NCCL, one rank
# killed by SIGKILL, resumed through gpmkit.dcp; a process on the second GPU), then
# bench/torch/torch_ckpt.py --ranks 2: the 124M model in every mode (workload torch_ckpt_2gpu) and,
# with time left, the 1.5B model's gpmkit modes (torch_ckpt_2gpu_1p5b). All within a time budget
# (default 420 s): no benchmark starts without the time it needs, and none of its modes starts when
# it could not end within the budget. Records go to $OUT/torch (or --results DIR): copy them to
# bench/results/<gpu>x2/torch and run `gpmbench report` there. A summary goes to
# $OUT/summary.txt, the logs to $OUT/logs.tar.gz.
#   scripts/device/torch-2gpu.sh [--budget S] [--results DIR] [--models LIST] [--all-tests]
#                                [--skip-tests]
# --models: the benchmarks, in order (default 124m,1p5b; tiny checks this script, measuring
# nothing); --all-tests: the whole Python suite instead of the two-GPU tests. A later call with
# --skip-tests --models 1p5b on the same warm machine reuses the package's build. Here first:
# scripts/device/prepare.sh; the device call carries [".deps"]. GPMKIT_BACKEND=host runs it all on
# the CPU (a check of this script).
set -uo pipefail
usage() {
  echo "usage: $0 [--budget S] [--results DIR] [--models LIST] [--all-tests] [--skip-tests]" >&2
  exit 2
}
budget=420
results=
models=124m,1p5b
tests=two-gpu
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget=$2; shift ;;
    --results) results=$2; shift ;;
    --models) models=$2; shift ;;
    --all-tests) tests=all ;;
    --skip-tests) tests=none ;;
    *) usage ;;
  esac
  shift
done
backend=${GPMKIT_BACKEND:-cuda}
out=${OUT:-$PWD/gpu-out}
results=${results:-$out/torch}
logs=$(mktemp -d /tmp/gpmkit-torch-2gpu-XXXXXX)
mkdir -p "$out" "$results"
summary=$out/summary.txt
: > "$summary"
# The records name the commit they were measured with (prepare.sh wrote it; no .git here).
[ -f .deps/commit ] && export GPMKIT_COMMIT=${GPMKIT_COMMIT:-$(cat .deps/commit)}
left() { echo $((budget - SECONDS)); }
say() { echo "$*" | tee -a "$summary"; }
finish() {
  rm -rf /dev/shm/gpmkit-torch-* /var/tmp/gpmkit-torch-*  # what a killed benchmark left
  tar -czf "$out/logs.tar.gz" -C "$logs" . && rm -rf "$logs"
  say "== done after ${SECONDS} s (budget ${budget} s), exit $1"
  exit "$1"
}
{ nvidia-smi; nvidia-smi topo -m; nvcc --version; cmake --version; uname -a
  python3 -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'cuda',
torch.version.cuda, 'gpus', torch.cuda.device_count(), 'nccl', torch.distributed.is_nccl_available())"
  df -h /dev/shm /var/tmp; free -g; } > "$logs/machine.txt" 2>&1
grep -E "NVIDIA H|Driver Version|^torch " "$logs/machine.txt" | head -4 | tee -a "$summary"

# 1. The package, from this tree.
pip_install() {
  python3 -m pip install -q --disable-pip-version-check --no-index --find-links .deps/wheels "$@" ||
    python3 -m pip install -q --disable-pip-version-check --break-system-packages --no-index \
      --find-links .deps/wheels "$@"
}
installed() { (cd /tmp && python3 -c "import gpmkit; print(gpmkit.backend())" 2>/dev/null); }
pip_install nanobind pytest scikit-build-core > "$logs/install.log" 2>&1
if GPMKIT_BACKEND=$backend pip_install --no-build-isolation --no-deps . >> "$logs/install.log" 2>&1 &&
    [ "$(installed)" = "$backend" ]; then
  say "install: pip install . (backend $backend) after ${SECONDS} s"
else
  say "install: pip install . failed (install.log); the CMake build's package instead"
  python3 -m pip uninstall -y -q gpmkit >> "$logs/install.log" 2>&1
  if ! cmake --preset "$backend" >> "$logs/install.log" 2>&1 ||
      ! cmake --build --preset "$backend" -j "$(nproc)" --target gpmkit_python gpmkit_python_stub \
        >> "$logs/install.log" 2>&1; then
    grep -E "error|FAILED" "$logs/install.log" | head -30 | tee -a "$summary"
    finish 1
  fi
  export PYTHONPATH=$PWD/build/$backend/python${PYTHONPATH:+:$PYTHONPATH}
  [ "$(installed)" = "$backend" ] || { say "install: the built package does not import"; finish 1; }
  say "install: build/$backend/python after ${SECONDS} s"
fi
status=0

# 2. The tests that need two GPUs, or the whole suite.
if [ "$tests" != none ]; then
  which=("python/tests/test_dcp.py::test_sigkill_of_one_rank_of_two_during_training[cuda-nccl]"
         python/tests/test_torch.py::test_a_process_on_the_second_gpu)
  [ "$tests" = all ] && which=(python/tests)
  timeout -k 10 "$(($(left) / 2))" python3 -m pytest -q -p no:cacheprovider -rs "${which[@]}" \
    > "$logs/pytest.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  say "== pytest ${which[*]}: exit $rc after ${SECONDS} s"
  grep -E "passed|failed|SKIPPED|^FAILED|^ERROR" "$logs/pytest.log" | tail -12 | tee -a "$summary"
fi

# 3. The benchmarks, one model after the other while time is left. torch_ckpt.py starts no mode
# after its --budget (counted from the end of its set-up, about 30 s with the 124M model); a mode
# of the 124M model takes up to about a minute (torch.save to disk), a gpmkit mode of the 1.5B
# model about 20 s; timeout ends a run that would overrun regardless.
bench() {  # name budget limit args...
  local name=$1 b=$2 limit=$3
  shift 3
  say "== $name: no mode starts after ${b} s of it, stopped at ${limit} s"
  timeout -k 10 "$limit" python3 bench/torch/torch_ckpt.py --ranks 2 --budget "$b" \
    --disk /var/tmp --out "$results" "$@" > "$logs/bench-$name.log" 2>&1
  local rc=$?
  grep -E "^[a-z0-9-]+: (stall|not run)|rank\(s\)|Error|error" "$logs/bench-$name.log" | head -20 |
    tee -a "$summary"
  say "$name: exit $rc after ${SECONDS} s"
  rm -rf /dev/shm/gpmkit-torch-* /var/tmp/gpmkit-torch-*
  return $rc
}
for m in ${models//,/ }; do
  l=$(left)
  case "$m" in
    124m) need=120 margin=90
      args=(--steps 32 --every 8 --alone 2
            --modes "gpmkit,gpmkit-async,dcp-async,torch-save-disk,dcp,torch-save-shm,gpmkit-dcp") ;;
    1p5b) need=90 margin=60
      args=(--steps 2 --every 2 --batch 4 --alone 1 --modes "gpmkit,gpmkit-async") ;;
    tiny) need=60 margin=30
      args=(--steps 4 --every 2 --batch 2 --seq 32 --alone 1) ;;
    *) say "== $m: unknown model (124m, 1p5b, tiny)"; status=1; continue ;;
  esac
  if [ "$l" -lt "$need" ]; then
    say "== $m: not run (${l} s left, it needs ${need})"
    continue
  fi
  shm=$(df --output=avail -B1G /dev/shm | tail -1 | tr -d ' ')
  if [ "$m" = 1p5b ] && [ "$shm" -lt 90 ]; then
    say "== 1p5b: not run (/dev/shm has ${shm} GiB free; two ranks' pools need about 80)"
    continue
  fi
  bench "$m" $((l - margin)) $((l - 5)) --model "$m" "${args[@]}" || status=1
done
ls -l "$results" >> "$summary"
finish $status
