#!/usr/bin/env bash
# Runs here (no GPU needed): how many bytes of sm_90 instructions each kernel and out-of-line
# function of one CUDA source holds, from the cubin nvcc makes of it with the cuda build's own
# flags, disassembled by nvdisasm (fetched from PyPI into build/nvdisasm on first use: the
# toolkit here has no disassembler). Code size matters where warps stall on instruction fetch
# (gpm::tx's kernels: docs/workloads/tx.md); compare before and after a change.
#   scripts/analysis/kernel-code-size.sh bench/workloads/tx/tx_atm.cu
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 SOURCE.cu (a CUDA source of the cuda build)" >&2
  exit 2
fi
source=$(realpath "$1")
export PATH=/usr/local/cuda/bin:$PATH
[ -f build/cuda/build.ninja ] || cmake --preset cuda > /dev/null
object=$(ninja -C build/cuda -t targets all | grep -F "/$(basename "$source").o:" |
  cut -d: -f1 | while read -r o; do
    ninja -C build/cuda -t commands "$o" | tail -1 | grep -qF " $source " && echo "$o"
  done | head -1)
if [ -z "$object" ]; then
  echo "kernel-code-size: build/cuda compiles no object from $source" >&2
  exit 1
fi
nvdisasm=$(find build/nvdisasm -name nvdisasm -type f 2>/dev/null | head -1 || true)
if [ -z "$nvdisasm" ]; then
  python3 -m pip download -q --no-deps -d build/nvdisasm "nvidia-cuda-nvdisasm==13.*"
  python3 -m zipfile -e build/nvdisasm/*.whl build/nvdisasm/x
  nvdisasm=$(find build/nvdisasm -name nvdisasm -type f | head -1)
  chmod +x "$nvdisasm"
fi
cubin=$(mktemp --suffix=.cubin)
trap 'rm -f "$cubin"' EXIT
# The object's compile command, made to write an sm_90 cubin.
command=$(ninja -C build/cuda -t commands "$object" | tail -1 |
  sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+$//; s/--generate-code=[^ ]+/-arch=sm_90 -cubin/; s/ -c / /')
(cd build/cuda && eval "$command -o $cubin")
"$nvdisasm" "$cubin" | python3 -c '
import re, sys
funcs = []
for line in sys.stdin:
    m = re.search(r"\.type\s+(\S+),@function", line)
    if m:
        funcs.append([m.group(1), None, None])
        continue
    m = re.search(r"/\*([0-9a-f]+)\*/", line)
    if m and funcs:
        a = int(m.group(1), 16)
        if funcs[-1][1] is None:
            funcs[-1][1] = a
        funcs[-1][2] = a
import subprocess
# An out-of-line function is named $<kernel>$<function>: show the function, demangled.
names = [n.rstrip("$").split("$")[-1] for n, _, _ in funcs]
shown = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                       text=True).stdout.splitlines()
print("bytes     function (indented: called out of line from the kernel above)")
for (name, first, last), text in zip(funcs, shown):
    if first is not None:
        indent = "  " if name.startswith("$") else ""
        print("%-9d %s%s" % (last - first + 16, indent, text[:200]))
'
