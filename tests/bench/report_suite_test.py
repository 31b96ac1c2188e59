#!/usr/bin/env python3
"""Unit test of the suite figures in bench/report/suite.py and of the side-by-side tables of the
hash workloads in report.py, on records made up here with known numbers: every ratio the report
prints must be the one these numbers give, figures must compare only records of the same run, and
figures without their records must be left out.

usage: report_suite_test.py <bench/report directory> <scratch directory>
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import report_records
from report_records import fail

STAMP = "2026-01-01T00:00:00.000Z"
OTHER_RUN = "2026-01-02T00:00:00.000Z"


def record(workload, mode, gbps, bytes_persisted=0, metrics=None, stamp=STAMP, ceilings=None,
           size=4096):
    # The same work in every mode: speedups are ratios of times.
    return report_records.record(workload, mode, 1.0 / gbps, gbps, "GB/s", stamp,
                                 sizes={"bytes": size}, metrics=metrics,
                                 bytes_persisted=bytes_persisted, ceilings=ceilings)


def main():
    report_dir, scratch = Path(sys.argv[1]), Path(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    records = [
        record("kv", "d2h_memcpy", 50.0),
        record("kv", "cap-fs", 1.0, bytes_persisted=4000),
        record("kv", "cap-mm", 2.0, bytes_persisted=4000),
        record("kv", "gpm-ndp", 3.0, bytes_persisted=100),
        record("kv", "gpm", 8.0, bytes_persisted=100,
               metrics={"restore_s": 0.025, "restore_kernel_s": 0.005}),
        record("kv", "gpm-conv", 2.5, bytes_persisted=100),
        record("kv", "cpu", 0.5, bytes_persisted=100),
        # A later run of gpm alone, without a recovery: Figure 11 and Table 5 keep the cells of
        # the newest run that measured them.
        record("later", "gpm", 4.0, metrics={"restore_s": 0.025, "restore_copy_s": 0.002,
                                             "restore_roll_back_s": 0.008}),
        record("later", "gpm-conv", 2.0),
        record("later", "gpm", 5.0, stamp=OTHER_RUN),
        # a cap-fs of another run: no speedup may be computed against it
        record("solo", "cap-fs", 1.0, stamp=OTHER_RUN),
        record("solo", "gpm", 9.0, bytes_persisted=10),
        # A suite resumed in a second run, whose machine ran slower: gpm and cap-fs
        # of two runs pair only through d2h_memcpy, measured by both (cap-fs: 1 s at 5/8 of the
        # speed, 0.625 s at the first run's; gpm 0.125 s: 5x, marked as linked).
        record("resumed", "d2h_memcpy", 40.0),
        record("resumed", "gpm", 8.0, bytes_persisted=100),
        record("resumed", "cap-mm", 2.0, bytes_persisted=400),
        record("resumed", "d2h_memcpy", 25.0, stamp=OTHER_RUN),
        record("resumed", "cap-fs", 1.0, bytes_persisted=400, stamp=OTHER_RUN),
        # The same, but the second run had other sizes: nothing links them.
        record("resized", "d2h_memcpy", 50.0),
        record("resized", "gpm", 8.0),
        record("resized", "d2h_memcpy", 25.0, stamp=OTHER_RUN),
        record("resized", "cap-fs", 1.0, stamp=OTHER_RUN, size=8192),
        # An A/B of a kept change (scripts/device/gpu-ab.sh): its B side (the tree) ran first,
        # its A side (the change undone) after; Table 5 and Figure 11 show the B side.
        dict(record("ab", "gpm", 8.0, metrics={"restore_s": 0.025}), commit="0123456789ab"),
        dict(record("ab", "gpm-conv", 2.0), commit="0123456789ab"),
        dict(record("ab", "gpm", 4.0, metrics={"restore_s": 0.05}, stamp=OTHER_RUN),
             commit="0123456789ab-without-change"),
        dict(record("ab", "gpm-conv", 2.0, stamp=OTHER_RUN), commit="0123456789ab-without-change"),
        # One repeat whose throughput at its p25 time rounds below the throughput itself (7.565...
        # * 0.30398 / 0.30398 < 7.565...): the plot's whisker must not come out negative (a
        # negative one made matplotlib refuse the plot, and the quick suite failed now and then).
        report_records.record("rounding", "gpm", 0.30397585599757637, 7.565107341882359, "GB/s",
                              STAMP),
    ]
    (scratch / "kv.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    hashes = [
        record("ycsb", "C:gphash", 40.0),
        record("ycsb", "C:clevel-gpm", 10.0),
        record("ycsb", "C:cpu-assisted", 80.0),
        record("ycsb", "A:cpu-assisted", 1.0, stamp=OTHER_RUN),  # no gphash in its run
        record("hash_factors", "C:baseline", 5.0),
        record("hash_factors", "C:+warp", 20.0),
        # A workload whose point is a metric: the report lists it per mode.
        record("hash_load_factor", "gphash", 20.0, metrics={"load_factor": 0.98244}),
        record("hash_load_factor", "gphash-no-moves", 21.0, metrics={"load_factor": 0.89974}),
    ]
    (scratch / "hash.jsonl").write_text("\n".join(json.dumps(r) for r in hashes) + "\n")
    run = subprocess.run([sys.executable, str(report_dir / "report.py"), str(scratch)])
    if run.returncode != 0:
        fail(f"report.py exited {run.returncode}")
    text = (scratch / "report.md").read_text()
    expected = [
        "| kv | 16.00× |",                                   # Figure 1: gpm / cpu
        "| kv | 2.00× | 3.00× | 8.00× | – | – |",             # Figures 9, 10 over cap-fs
        "| kv | 3.20× |",                                   # Figure 11: gpm / gpm-conv
        "| kv | 40.00× | 40.00× |",                         # Table 4: 4000 / 100
        "| kv | 25 ms | 20.00% | 5 ms | 4.00% |",            # Table 5: 25 ms of 125 ms, 5 in kernels
        "| kv | 8e-07 | 50 | 0.000 |",                      # Figure 12: 800 B/s vs 50 GB/s
        "| later | 2.00× |",                                # Figure 11, from the first run
        "| resumed | 1.25×‡ | – | 5.00×‡ | – | – |",        # Figure 9 through the link
        "| resumed | 4.00× | 4.00×‡ |",                     # Table 4: bytes, no correction
        "| resumed | 8e-07 | 40 | 0.000 |",                 # Figure 12: gpm's own run's D2H
        "| later | 25 ms | 10.00% | 10 ms | 4.00% |",       # Table 5: 25 ms of 250 ms, 10 in kernels
        "| ab | 4.00× |",                                   # Figure 11: the B side's run
        "| ab | 25 ms | 20.00% |",                           # Table 5: the B side's recovery
    ]
    expected += [
        f"| {STAMP} | C | 40 | clevel-gpm 4×, cpu-assisted 0.5× |",  # gphash over each
        f"| {STAMP} | C | 5 | +warp 4× |",                           # each over the baseline
        f"| {STAMP} | gphash | 0.9824 |",                             # hash_load_factor's metric
        f"| {STAMP} | gphash-no-moves | 0.8997 |",
    ]
    for row in expected:
        if row not in text:
            fail(f"report.md lacks the row {row!r}")
    if "| resized |" in text.split("### Figure 12")[0]:
        fail("records of two runs with other sizes were linked")
    if "‡ The two modes were measured in two runs" not in text:
        fail("linked ratios are not explained under their table")
    if "| solo | 9.00×" in text:
        fail("a speedup was computed against a record of another run")
    if f"| {OTHER_RUN} | A |" in text:
        fail("a side-by-side row was printed for a run without the reference mode")
    if text.count("| run | mode | load_factor |") != 1:
        fail("the load factor table is missing, or printed for a workload without the metric")
    if "Figure 3" in text:
        fail("Figure 3 appeared without persist_scaling records")
    if "**Not GPU performance.**" not in text.split("## ")[0]:
        fail("the report of emulator records does not say at its top that they are not GPU "
             "figures")
    print("ok: the suite figures print the ratios of the records")


if __name__ == "__main__":
    main()
