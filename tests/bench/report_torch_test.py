#!/usr/bin/env python3
"""Unit test of the torch_ckpt section of the report (bench/report/torch_ckpt.py), on records made
up here with known numbers: the table shows each mode's stall, save, durable and restore times
and rates of the newest run only, and the targets are the ratios these numbers give.

usage: report_torch_test.py <bench/report directory> <scratch directory>
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import report_records
from report_records import fail

STAMP = "2026-01-02T00:00:00.000Z"
OLDER = "2026-01-01T00:00:00.000Z"
SIZES = {"parameters": 124_000_000, "state_bytes": 1_500_000_000, "batch": 8, "sequence": 512,
         "steps": 40, "every": 8}


def record(mode, save_s, stall_s, stamp=STAMP, d2h=50.0):
    rate = SIZES["state_bytes"] / save_s / 1e9
    r = report_records.record(
        "torch_ckpt_124m", mode, save_s, rate, "GB/s", stamp, sizes=SIZES,
        metrics={"stall_s": stall_s, "stall_min_s": stall_s / 2, "stall_max_s": stall_s * 2,
                 "durable_s": 0.5, "restore_s": 2.0, "step_s": 0.05},
        bytes_persisted=SIZES["state_bytes"], ceilings={"d2h_GBps": d2h, "disk_GBps": 2.0},
        ratio_to_ceiling={"d2h_GBps": rate / d2h, "disk_GBps": rate / 2.0})
    r["machine"] = {**r["machine"], "torch": "2.x"}
    return r


def main():
    report_dir, scratch = Path(sys.argv[1]), Path(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    records = [
        record("gpmkit", 9.0, 9.0, stamp=OLDER, d2h=40.0),  # an older run: never used
        record("torch-save-disk", 3.0, 3.0),
        record("dcp-async", 0.5, 0.4),
        record("gpmkit", 0.05, 0.06),
        record("gpmkit-async", 0.02, 0.02),
    ]
    (scratch / "torch.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    subprocess.run([sys.executable, str(report_dir / "report.py"), str(scratch)], check=True)
    text = (scratch / "report.md").read_text()
    expected = [
        "## torch_ckpt_124m: checkpointing a training loop",
        "124.0M parameters, state 1.50 GB",
        "D2H 50 GB/s, disk 2 GB/s",
        # stall (min-max), save, durable, restore, GB/s (1.5 GB / 0.05 s), x D2H, x disk
        "| gpmkit | 60 ms (30 ms–120 ms) | 50 ms | 500 ms | 2 s | 30 | 0.6 | 15 |",
        "| torch-save-disk | 3 s (1.5 s–6 s) | 3 s | 500 ms | 2 s | 0.5 | 0.01 | 0.25 |",
        "with gpmkit's smaller stall (gpmkit-async)",
        "| stall ≤ 1/5 of dcp-async's | 0.05 of it |",
        "| stall ≤ 1/10 of torch-save-disk's | 0.00667 of it |",
        "| save ≥ 0.8 × D2H ceiling (gpmkit) | 0.6 |",
        "| dcp | ",  # absent from the run: no row
    ]
    section = text.split("## torch_ckpt_124m: checkpointing")[1].split("\n## ")[0]
    for line in expected[:-1]:
        if line not in text:
            fail(f"report.md lacks {line!r}")
    if expected[-1] in section:
        fail("a mode the run did not record has a row")
    if "9 s" in section or "| 0.17 |" in section:
        fail("the torch section used a record of an older run")
    print("ok: torch section")


if __name__ == "__main__":
    main()
