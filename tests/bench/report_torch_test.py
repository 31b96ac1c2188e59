#!/usr/bin/env python3
"""Unit test of the torch_ckpt section of the report (bench/report/torch_ckpt.py), on records made
up here with known numbers: the table shows each mode's stall, save, durable and restore times
and rates of the newest run only, and the targets are the ratios these numbers give; a run of two
ranks (torch_ckpt_2gpu) says who wrote what and shows the bytes written and the checkpoints timed
alone.

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


def two_ranks(mode, save_s, stall_s, written, alone_s=None):
    """A record of torch_ckpt_2gpu: 2 ranks, each with the state of SIZES; `written` bytes per
    checkpoint of all ranks, against ceilings of both GPUs at once (100 GB/s, the slower 45)."""
    sizes = {**SIZES, "ranks": 2}
    rate = written / save_s / 1e9
    metrics = {"stall_s": stall_s, "stall_min_s": stall_s, "stall_max_s": stall_s,
               "durable_s": 0.1, "restore_s": 1.0, "step_s": 0.05, "d2h_per_gpu_GBps": 45.0}
    if alone_s is not None:
        metrics.update(checkpoint_s=alone_s, checkpoint_GBps=written / alone_s / 1e9,
                       engine_s=alone_s / 2)
    r = report_records.record(
        "torch_ckpt_2gpu", mode, save_s, rate, "GB/s", STAMP, sizes=sizes, metrics=metrics,
        bytes_persisted=written, ceilings={"d2h_GBps": 100.0, "disk_GBps": 2.0},
        ratio_to_ceiling={"d2h_GBps": rate / 100.0, "disk_GBps": rate / 2.0})
    r["machine"] = {**r["machine"], "torch": "2.x", "gpus": 2, "ranks": 2, "dist_backend": "nccl"}
    return r


def check_two_ranks(text):
    section = text.split("## torch_ckpt_2gpu: checkpointing")[1].split("\n## ")[0]
    expected = [
        "2 ranks, one GPU each, training by DDP over nccl",
        "D2H of the slowest GPU: 45 GB/s",
        "D2H 100 GB/s, disk 2 GB/s",
        "| mode | written per checkpoint | stall per checkpoint (min–max) |",
        "| alone: until durable | alone GB/s | alone × D2H |",
        # 3 GB written by both ranks in 0.05 s: 60 GB/s, 0.6 of 100; alone 0.04 s: 75 GB/s
        "| gpmkit | 3 GB | 60 ms (60 ms–60 ms) | 50 ms | 100 ms | 1 s | 60 | 0.6 | 30 | 40 ms "
        "| 75 | 0.75 |",
        "| torch-save-disk | 1.5 GB | 3 s (3 s–3 s) | 3 s | 100 ms | 1 s | 0.5 | 0.005 | 0.25 "
        "| – | – | – |",
        "| checkpoint alone ≥ 0.8 × D2H ceiling (gpmkit, idle GPU to durable) | 0.75 |",
    ]
    for line in expected:
        if line not in section:
            fail(f"the torch_ckpt_2gpu section lacks {line!r}")


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
    two = [two_ranks("torch-save-disk", 3.0, 3.0, SIZES["state_bytes"]),
           two_ranks("gpmkit", 0.05, 0.06, 2 * SIZES["state_bytes"], alone_s=0.04)]
    (scratch / "torch_2gpu.jsonl").write_text("\n".join(json.dumps(r) for r in two) + "\n")
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
    if "written per checkpoint" in section or "alone" in section:
        fail("a run of one rank without checkpoints timed alone shows their columns")
    check_two_ranks(text)
    print("ok: torch section")


if __name__ == "__main__":
    main()
