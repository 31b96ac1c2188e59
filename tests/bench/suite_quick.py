#!/usr/bin/env python3
"""`gpmbench suite --quick` as CI runs it: every workload `gpmbench list` names must have written a
record for each of its modes, each mode's data checks must have passed (gpmbench exits non-zero
otherwise), and the report must hold the suite's figures. Exits 77 (skipped) when gpmbench says a
CUDA build has no GPU.

usage: suite_quick.py <gpmbench executable> <scratch directory>
"""
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def explain_failure(log):
    """Prints why the suite failed before anything else, then the end of its output: a log excerpt
    that shows only part of a long output still shows the reason."""
    lines = log.read_text(errors="replace").splitlines()
    reasons = [l for l in lines if l.startswith("gpmbench") and ("failed" in l or "error" in l)]
    print("gpmbench suite --quick failed:")
    for l in reasons or ["(no failure line; the end of the output follows)"]:
        print("  " + l)
    print(f"--- last 40 of {len(lines)} lines of output ---")
    for l in lines[-40:]:
        print(l)
    print("--- end; the reasons again: ---")
    for l in reasons:
        print("  " + l)


def listed_modes(gpmbench):
    """{workload: [modes]} from `gpmbench list` (workload lines start in column 0)."""
    out = subprocess.run([gpmbench, "list"], capture_output=True, text=True, check=True).stdout
    modes, current = defaultdict(list), None
    for line in out.splitlines():
        if line and not line.startswith(" "):
            current = line.split(":")[0]
        elif line.strip() and current:
            modes[current].append(line.split()[0])
    return modes


def main():
    gpmbench, scratch = sys.argv[1], Path(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    results = scratch / "results"
    log = scratch.parent / (scratch.name + ".log")
    with open(log, "w") as out:
        run = subprocess.run([gpmbench, "suite", "--quick", "--out", str(results), "--disk-dir",
                              str(scratch)], stdout=out, stderr=subprocess.STDOUT)
    if run.returncode == 77:
        sys.exit(77)
    if run.returncode != 0:
        explain_failure(log)
        fail(f"gpmbench suite --quick exited {run.returncode} (whole output: {log})")
    recorded = defaultdict(set)
    for path in results.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            recorded[r["workload"]].add(r["mode"])
    expected = listed_modes(gpmbench)
    if not expected:
        fail("gpmbench list named no workloads")
    for workload, modes in expected.items():
        missing = sorted(set(modes) - recorded[workload])
        if missing:
            fail(f"{workload}: no record for modes {missing}")
    text = (results / "report.md").read_text()
    for heading in ("## The GPMbench suite", "Figure 3", "Figures 9 and 10", "Figure 11",
                    "Figure 12", "Table 4", "Table 5", "Figure 1:", "## Out of core (DRAGON)"):
        if heading not in text:
            fail(f"report.md lacks {heading!r}")
    leftovers = [p.name for p in scratch.iterdir() if p.name != "results"]
    if leftovers:
        fail(f"the suite left files in its disk directory: {leftovers}")
    print(f"ok: {len(expected)} workloads, {sum(map(len, expected.values()))} modes, report at "
          f"{results / 'report.md'}")


if __name__ == "__main__":
    main()
