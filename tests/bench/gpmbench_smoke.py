#!/usr/bin/env python3
"""Smoke test of gpmbench: `run platform --quick` into a fresh directory, then `report` on it.

Also checks that `run --cases` refuses a case the workload lacks, that `run --interleave`
rotates the modes' order from round to round and records every round's repeat, and that
`run --interleave --budget` stops with exit status 3 and records the rounds it finished. Checks that platform.jsonl holds one record of every mode with the schema's fields and positive
numbers, that the ratios to ceilings are present where a mode has a ceiling, and that the report
names every mode. Exits 77 (skipped) when gpmbench says a CUDA build has no GPU.

usage: gpmbench_smoke.py <gpmbench executable> <scratch directory>
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

# Every mode of the platform workload, and the ceiling each is compared against.
EXPECTED_MODES = {
    "d2h_memcpy": None,
    "persist_stream": "d2h_memcpy_GBps",
    "persist_stream_fence_each": "d2h_memcpy_GBps",
    "persist_stream_bulk": "d2h_memcpy_GBps",
    "persist_warp_regions": "d2h_memcpy_GBps",
    "read_sweep": "d2h_memcpy_GBps",
    "read_sweep_fresh_pool": "d2h_memcpy_GBps",
    "read_sweep_gpu_written": "d2h_memcpy_GBps",
    "read_sweep_fresh_destination": "d2h_memcpy_GBps",
    "persist_random8": None,
    "persist_latency": None,
    "cas_rate": None,
    "disk_fsync": None,
    "snapshot_full": "disk_fsync_GBps",
    "snapshot_1pct": "disk_fsync_GBps",
    "snapshot_10pct": "disk_fsync_GBps",
    "snapshot_100pct": "disk_fsync_GBps",
}
# The modes that persist nothing: the copy ceiling and the reads.
NOT_PERSISTING = {"d2h_memcpy", "read_sweep", "read_sweep_fresh_pool", "read_sweep_gpu_written",
                  "read_sweep_fresh_destination"}
FIELDS = ["schema", "workload", "mode", "backend", "machine", "sizes", "repeats", "warmup",
          "times_s", "median_s", "spread", "throughput", "bytes_persisted", "ceilings",
          "ratio_to_ceiling", "metrics", "timestamp"]
MACHINE_FIELDS = ["hostname", "cpu", "cores", "gpu", "compute_capability", "pcie_generation",
                  "pcie_width", "driver", "cuda_runtime", "pool_huge_pages"]


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def check_record(r):
    mode = r.get("mode")
    for f in FIELDS:
        check(f in r, f"{mode}: field {f} is missing")
    for f in MACHINE_FIELDS:
        check(f in r["machine"], f"{mode}: machine.{f} is missing")
    check(r["schema"] == "gpmkit.bench/1", f"{mode}: schema is {r['schema']}")
    check(r["workload"] == "platform", f"{mode}: workload is {r['workload']}")
    check(r["backend"] in ("cuda", "host"), f"{mode}: backend is {r['backend']}")
    check(len(r["times_s"]) == r["repeats"] >= 1, f"{mode}: times_s does not hold every repeat")
    check(all(t > 0 for t in r["times_s"]), f"{mode}: a time is not positive")
    spread = r["spread"]
    check(0 < spread["min_s"] <= spread["p25_s"] <= r["median_s"] <= spread["p75_s"]
          <= spread["max_s"], f"{mode}: median and spread are out of order: {spread}")
    check(r["throughput"]["value"] > 0, f"{mode}: throughput is not positive")
    check(r["throughput"]["unit"] in ("GB/s", "Mop/s", "ns"), f"{mode}: odd unit")
    check(r["sizes"] and all(v > 0 for v in r["sizes"].values()),
          f"{mode}: sizes are missing or not positive: {r['sizes']}")
    ceiling = EXPECTED_MODES[mode]
    if ceiling is None:
        check(r["ratio_to_ceiling"] == {}, f"{mode}: has a ratio but no ceiling")
    else:
        check(r["ceilings"].get(ceiling, 0) > 0, f"{mode}: ceiling {ceiling} is missing")
        check(r["ratio_to_ceiling"].get(ceiling, 0) > 0, f"{mode}: ratio to {ceiling} missing")
    if mode in NOT_PERSISTING:
        check(r["bytes_persisted"] == 0, f"{mode}: persists nothing, yet bytes_persisted > 0")
    else:
        check(r["bytes_persisted"] > 0, f"{mode}: bytes_persisted is not positive")


def main():
    gpmbench, scratch = sys.argv[1], Path(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    results = scratch / "results"

    run = subprocess.run([gpmbench, "run", "platform", "--quick", "--out", str(results),
                          "--disk-dir", str(scratch)])
    if run.returncode == 77:
        sys.exit(77)  # gpmbench printed why (a CUDA build without a GPU)
    check(run.returncode == 0, f"gpmbench run exited {run.returncode}")

    lines = (results / "platform.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    modes = [r["mode"] for r in records]
    check(sorted(modes) == sorted(EXPECTED_MODES), f"modes recorded: {modes}")
    check(len({r["timestamp"] for r in records}) == 1, "records of one run differ in timestamp")
    for r in records:
        check_record(r)
    leftovers = [p.name for p in scratch.iterdir() if p.name != "results"]
    check(not leftovers, f"gpmbench left files in its disk directory: {leftovers}")

    # --cases: a case the workload lacks is refused before anything runs.
    for workload, case, says in [("platform", "in-gpu", "it has no cases"),
                                 ("ooc_vectoradd", "gpu", "its cases are: in-gpu, in-host")]:
        bad = subprocess.run([gpmbench, "run", workload, "--quick", "--cases", case, "--out",
                              str(scratch / "refused"), "--disk-dir", str(scratch)],
                             capture_output=True, text=True)
        check(bad.returncode == 2 and says in bad.stderr,
              f"--cases {case} of {workload}: exit {bad.returncode}, {bad.stderr!r}")
        check(not (scratch / "refused").exists(), f"--cases {case} of {workload} wrote records")

    # --interleave: rounds of one repeat of each mode, then one record per mode holding every
    # round's time.
    interleaved = scratch / "interleaved"
    rounds = subprocess.run([gpmbench, "run", "platform", "--quick", "--interleave", "--repeats",
                             "3", "--modes", "persist_stream", "--out", str(interleaved),
                             "--disk-dir", str(scratch)], capture_output=True, text=True)
    check(rounds.returncode == 0, f"--interleave exited {rounds.returncode}: {rounds.stderr}")
    check(all(f"round {k} of 3" in rounds.stdout for k in (1, 2, 3)),
          f"--interleave did not run 3 rounds: {rounds.stdout!r}")
    # Each round rotates the order: the ceiling first, then persist_stream first.
    check("round 1 of 3: d2h_memcpy, persist_stream" in rounds.stdout and
          "round 2 of 3: persist_stream, d2h_memcpy" in rounds.stdout,
          f"--interleave did not rotate the modes' order: {rounds.stdout!r}")
    got = [json.loads(line) for line in (interleaved / "platform.jsonl").read_text().splitlines()]
    check(sorted(r["mode"] for r in got) == ["d2h_memcpy", "persist_stream"],
          f"--interleave recorded {[r['mode'] for r in got]}")
    for r in got:
        check_record(r)
        check(r["repeats"] == 3, f"--interleave: {r['mode']} has {r['repeats']} repeats, not 3")

    # --budget with --interleave: more rounds than the budget allows; exit status 3, and the
    # rounds that ran are recorded, one record per mode, each with the rounds it finished.
    cut = scratch / "cut"
    short = subprocess.run([gpmbench, "run", "platform", "--quick", "--interleave", "--repeats",
                            "100000", "--modes", "persist_stream", "--budget", "3", "--out",
                            str(cut), "--disk-dir", str(scratch)], capture_output=True, text=True)
    check(short.returncode == 3, f"--budget: exit {short.returncode}, not 3: {short.stderr}")
    check("the budget is spent" in short.stdout, f"--budget said nothing: {short.stdout[-300:]!r}")
    got = [json.loads(line) for line in (cut / "platform.jsonl").read_text().splitlines()]
    check(sorted(r["mode"] for r in got) == ["d2h_memcpy", "persist_stream"],
          f"--budget recorded {[r['mode'] for r in got]}")
    repeats = [r["repeats"] for r in got]
    check(all(1 <= n < 100000 for n in repeats) and max(repeats) - min(repeats) <= 1,
          f"--budget: the records' repeats {repeats} are not the rounds done")
    for r in got:
        check_record(r)

    report = subprocess.run([gpmbench, "report", str(results)])
    check(report.returncode == 0, f"gpmbench report exited {report.returncode}")
    text = (results / "report.md").read_text()
    for mode in EXPECTED_MODES:
        check(f"| {mode} |" in text, f"report.md has no row for {mode}")
    check(any(results.glob("*.png")) or "plots were skipped" in text,
          "report.md has neither plots nor a note that they were skipped")
    print(f"ok: {len(records)} records, report at {results / 'report.md'}")


if __name__ == "__main__":
    main()
