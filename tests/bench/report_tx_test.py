#!/usr/bin/env python3
"""Unit test of the tx section of the report (bench/report/tx.py), on records made up here with
known numbers: every ratio it prints must be the one these numbers give, computed only between
records of the newest run, with absent modes shown as "–" and the ATM A1 goal marked.

usage: report_tx_test.py <bench/report directory> <scratch directory>
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


def record(workload, mode, mtxps, stamp=STAMP, sizes=None, metrics=None, unit="Mop/s",
           bytes_persisted=0, ratio=None):
    return report_records.record(
        workload, mode, 1.0 / mtxps, mtxps, unit, stamp,
        sizes={"blocks": 512, "threads_per_block": 256, **(sizes or {})}, metrics=metrics,
        bytes_persisted=bytes_persisted,
        ceilings={"persist_stream_GBps": 50.0} if ratio is not None else None,
        ratio_to_ceiling={"persist_stream_GBps": ratio} if ratio is not None else None)


def main():
    report_dir, scratch = Path(sys.argv[1]), Path(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    fill = {"blocks": 1056}
    detail = {"aborts_per_commit": 0.25, "persist_GBps": 5.0, "durable_s": 0.002,
              "durable_host_s": 0.02, "recovery_s": 0.003, "recovery_replayed": 1234,
              "recovery_host_s": 0.03, "ring_occupancy_p50": 0.5, "ring_occupancy_p90": 0.75,
              "ring_occupancy_p99": 1.0, "ring_occupancy_max": 1.0}
    records = [
        # an older run whose numbers must not be used
        record("tx_atm_a1", "volatile", 1000.0, stamp=OLDER),
        record("tx_atm_a1", "helpers", 1.0, stamp=OLDER),
        record("tx_atm_a1", "persist_stream", 50.0, unit="GB/s"),
        record("tx_atm_a1", "volatile", 100.0, metrics={"aborts_per_commit": 0.6}),
        record("tx_atm_a1", "redo-direct", 20.0),
        record("tx_atm_a1", "helpers", 80.0, sizes={"ring_entries": 1300}, metrics=detail,
               bytes_persisted=4800, ratio=0.1),
        record("tx_atm_a1", "adaptive", 84.0, metrics={"aborts_per_commit": 1.0}),
        record("tx_atm_a1", "volatile@fill", 200.0, sizes=fill),
        record("tx_atm_a1", "redo-direct@fill", 50.0, sizes=fill),
        record("tx_atm_a1", "helpers@fill", 100.0, sizes=fill),
        record("tx_hash_h2", "volatile", 10.0),
        record("tx_hash_h2", "helpers", 2.0),
        record("tx_micro_pressure", "w4:volatile", 30.0),
        record("tx_micro_pressure", "w4:redo-direct", 5.0, metrics={"persist_GBps": 1.5}),
        record("tx_micro_pressure", "w4:helpers", 15.0, metrics={"persist_GBps": 4.5}),
        record("tx_ring_sweep", "redo-direct", 20.0),
        record("tx_ring_sweep", "helpers-ring500", 30.0, sizes={"ring_entries": 500}),
        record("tx_ring_sweep", "helpers-ring9000", 50.0, sizes={"ring_entries": 9000}),
        record("tx_residency_sweep", "helpers", 50.0,
               metrics={"aborts_per_commit": 5.5, "resident_blocks_per_sm": 3}),
        record("tx_residency_sweep", "helpers-sm2", 60.0,
               metrics={"aborts_per_commit": 1.5, "resident_blocks_per_sm": 2}),
        record("tx_residency_sweep", "adaptive", 40.0,
               metrics={"aborts_per_commit": 5.0, "resident_blocks_per_sm": 3}),
        record("tx_residency_sweep", "adaptive-learned", 70.0,
               metrics={"aborts_per_commit": 1.0, "resident_blocks_per_sm": 1}),
        record("tx_hash_lookup", "helpers", 40.0, metrics={"aborts_per_commit": 0.5}),
        record("tx_hash_lookup", "helpers-versioned", 100.0, metrics={"aborts_per_commit": 0.05}),
        record("tx_hash_lookup", "redo-direct-versioned", 30.0),
    ]
    (scratch / "tx.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    subprocess.run([sys.executable, str(report_dir / "report.py"), str(scratch)], check=True)
    text = (scratch / "report.md").read_text()
    expected = [
        "## Persistent GPU transactions (tx)",
        # paper launch: helpers/direct 80/20, adaptive over the better of them 84/80, the best
        # persistent mode (adaptive) 100/84 slower than volatile, within the 1.5x goal
        "| tx_atm_a1 | paper: 512×256 | 100 | 20 | 80 | 84 | 4.00× | 1.05× | 1.19× (adaptive) ✓ |",
        # fill launch: no adaptive record, helpers 200/100 slower, the goal missed
        "| tx_atm_a1 | fill: 1056×256 | 200 | 50 | 100 | – | 2.00× | – | 2.00× (helpers) ✗ |",
        # no redo-direct in H2's run: no helpers/direct ratio; no goal mark off ATM A1
        "| tx_hash_h2 | paper: 512×256 | 10 | – | 2 | – | – | – | 5.00× (helpers) |",
        # the slowdown 100/84 split: attempts per commit 2 against 1.6 (1.25x), the rest per
        # attempt (1.19 / 1.25)
        "| tx_atm_a1 | paper | adaptive | 1.19× | 1.6 | 2 | 1.25× | 0.95× |",
        "| 4 | 30 | 5 | 15 | 3.00× | 1.5 | 4.5 |",
        "| 500 | 30 | 1.50× |",
        # residency: helpers capped at 2 blocks an SM 60/50 of uncapped
        "| helpers | as many as fit | 50 | 5.5 | 3 | 1.00× |",
        "| helpers | 2 | 60 | 1.5 | 2 | 1.20× |",
        # adaptive learning its blocks an SM: 70/40 of adaptive as many as fit
        "| adaptive | learnt per kernel | 70 | 1 | 1 | 1.75× |",
        "| 9000 | 50 | 2.50× |",
        "| tx_atm_a1 | helpers | 80 | 0.25 | 4,800 | 5 (0.100) | 2 | 20 | 3 (1,234) | 30 | 1300 "
        "| – |",
        # occupancy fractions of the 1300-entry ring, in entries too
        "| tx_atm_a1 | helpers | 1300 | 50% (650) | 75% (975) | 100% (1300) | 100% (1300) |",
        # versioned reads 100/40 Mtx/s; no locked redo-direct in the run: no ratio
        "| tx_hash_lookup | helpers | 40 | 100 | 2.50× | 0.5 | 0.05 |",
        "| tx_hash_lookup | redo-direct | – | 30 | – | – | – |",
    ]
    for line in expected:
        if line not in text:
            fail(f"report.md lacks {line!r}")
    # no aborts recorded for volatile at the fill launch, nor for H2: no split
    for absent in ("| tx_atm_a1 | fill | helpers |", "| tx_hash_h2 | paper |"):
        if absent in text:
            fail(f"report.md has {absent!r} without the aborts to split it")
    if "1000" in text.split("## Persistent GPU transactions (tx)")[1].split("\n## ")[0]:
        fail("the tx section used a record of an older run")
    print("ok: tx section")


if __name__ == "__main__":
    main()
