#!/usr/bin/env python3
"""`gpmbench suite --budget S --resume` (docs/bench.md, "A suite in several runs"): a run whose
budget is spent starts no mode and exits 3; a resumed run measures only the modes the results
directory's suite-progress.txt does not list (and the ceilings those are compared against), so
several runs of one command make one complete results directory; a run with everything done
measures nothing; a resume into a directory holding records of another GPU is refused. Exits 77 (skipped) when gpmbench says a CUDA build has no GPU.

usage: suite_resume.py <gpmbench executable> <scratch directory>
"""
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

WORKLOADS = "platform,kvs_set"


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def suite(gpmbench, results, scratch, *extra):
    r = subprocess.run([gpmbench, "suite", "--quick", "--only", WORKLOADS, "--no-report",
                        "--out", str(results), "--disk-dir", str(scratch), *extra],
                       capture_output=True, text=True)
    if r.returncode == 77:
        print(r.stdout + r.stderr)
        sys.exit(77)
    return r


def records(results):
    """(workload, mode) of every record, in file order, and the modes that are ceilings."""
    out, ceilings = [], set()
    for f in sorted(results.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            out.append((r["workload"], r["mode"]))
            ceilings |= {(r["workload"], k.rsplit("_", 1)[0]) for k in r["ceilings"]}
    return out, ceilings


def main():
    gpmbench, scratch = sys.argv[1], Path(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    results = scratch / "results"
    progress = results / "suite-progress.txt"

    r = suite(gpmbench, results, scratch, "--budget", "0")
    if r.returncode != 3 or "budget" not in r.stdout:
        fail(f"a spent budget: exit {r.returncode}, not 3\n{r.stdout}{r.stderr}")
    if records(results)[0] or progress.read_text():
        fail("a run with a spent budget measured something")

    r = suite(gpmbench, results, scratch)
    if r.returncode != 0:
        fail(f"the whole suite: exit {r.returncode}\n{r.stdout}{r.stderr}")
    full, ceilings = records(results)
    lines = progress.read_text().splitlines()
    if sorted((l.split("\t")[0], l.split("\t")[2]) for l in lines) != sorted(full):
        fail(f"suite-progress.txt does not list the modes recorded:\n{lines}\n{full}")

    # As if the first run had stopped after a third of its modes: a resumed run measures the
    # other two thirds, and of the first third only ceilings of those.
    kept = lines[: len(lines) // 3]
    progress.write_text("".join(l + "\n" for l in kept))
    r = suite(gpmbench, results, scratch, "--resume")
    if r.returncode != 0:
        fail(f"the resumed suite: exit {r.returncode}\n{r.stdout}{r.stderr}")
    added = Counter(records(results)[0]) - Counter(full)
    done = {(l.split("\t")[0], l.split("\t")[2]) for l in kept}
    for wm in full:
        if wm in done and wm not in ceilings and added[wm]:
            fail(f"{wm} was done but measured again")
        if wm not in done and added[wm] != 1:
            fail(f"{wm} was not done but measured {added[wm]} times")
    if sorted(progress.read_text().splitlines()) != sorted(lines):
        fail("after the resumed run suite-progress.txt does not list every mode once")

    before = len(records(results)[0])
    r = suite(gpmbench, results, scratch, "--resume")
    if r.returncode != 0 or len(records(results)[0]) != before:
        fail(f"a resumed run with everything done measured something (exit {r.returncode})")

    # A directory with a record of another GPU: a run resumed here would mix two machines.
    foreign = results / "platform.jsonl"
    saved = foreign.read_text()
    other = json.loads(saved.splitlines()[0])
    other["machine"]["gpu"] = "Another GPU 9000"
    foreign.write_text(saved + json.dumps(other) + "\n")
    saved_progress = progress.read_text()
    progress.write_text("")
    r = suite(gpmbench, results, scratch, "--resume")
    if r.returncode == 0 or "Another GPU 9000" not in r.stderr:
        fail(f"a resume into records of another GPU was not refused (exit {r.returncode})\n"
             f"{r.stdout}{r.stderr}")
    if len(records(results)[0]) != before + 1 or progress.read_text():
        fail("a refused resume measured or wrote something")
    foreign.write_text(saved)
    progress.write_text(saved_progress)
    print(f"suite_resume: {len(full)} modes; resumed with {len(kept)} done: "
          f"{sum(added.values())} measured; everything done: none measured")


if __name__ == "__main__":
    main()
