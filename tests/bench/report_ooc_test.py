#!/usr/bin/env python3
"""Unit test of the ooc section of the report (bench/report/ooc.py), on records made up here with
known times: per regime every mode's time, gpmkit's speedups over chunked-pipeline and
fread-memcpy computed only from the newest run that measured the regime (an A/B's A side only
where no other run did), disk_fraction as recorded, "–" for modes a run
did not record, one row per ablation case, and nothing of a workload that maps no file.

usage: report_ooc_test.py <bench/report directory> <scratch directory>
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
NEWER = "2026-01-03T00:00:00.000Z"
UNDONE = "0123456789ab-without-change"
OLD_DISK = {"read_GBps": 3.0, "write_GBps": 2.5, "direct_io": 1.0}


def record(workload, mode, seconds, regime=2, stamp=STAMP, metrics=None, sizes=None):
    return report_records.record(
        workload, mode, seconds, 1.0 / seconds, "GB/s", stamp, metrics=metrics,
        sizes={"regime": regime, "footprint_bytes": 1 << 30, "line_bytes": 1 << 20,
               "gpu_cache_bytes": 1 << 29, "host_cache_bytes": 1 << 31, "read_ahead": 1,
               **(sizes or {})})


def main():
    report_dir, scratch = Path(sys.argv[1]), Path(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    disk = {"read_GBps": 2.0, "write_GBps": 1.5, "read_whole_GBps": 2.5, "write_whole_GBps": 1.8,
            "direct_io": 1.0}
    records = [
        record("ooc_vectoradd", "gpmkit", 100.0, stamp=OLDER),  # never used: an older run
        # An older run's in-host regime, which the newest run did not measure: shown.
        record("ooc_vectoradd", "disk-sequential", 0.5, stamp=OLDER, metrics=OLD_DISK),
        record("ooc_vectoradd", "gpmkit", 6.0, regime=1, stamp=OLDER),
        record("ooc_vectoradd", "chunked-pipeline", 7.5, regime=1, stamp=OLDER),
        record("ooc_vectoradd", "disk-sequential", 0.5, metrics=disk),
        record("ooc_vectoradd", "gpmkit", 2.0, regime=0, metrics={"disk_fraction": 0.5}),
        record("ooc_vectoradd", "fread-memcpy", 3.0, regime=0),
        record("ooc_vectoradd", "chunked-pipeline", 2.5, regime=0, metrics={"disk_fraction": 0.4}),
        record("ooc_vectoradd", "managed", 8.0, regime=0),
        record("ooc_vectoradd", "gpmkit", 10.0, regime=2, metrics={"disk_fraction": 0.81}),
        record("ooc_vectoradd", "chunked-pipeline", 9.0, regime=2),
        # A newer A/B's A side (the change undone): not the out-of-core row while the B side is.
        {**record("ooc_vectoradd", "gpmkit", 50.0, regime=2, stamp=NEWER), "commit": UNDONE},
        {**record("ooc_vectoradd", "chunked-pipeline", 40.0, regime=2, stamp=NEWER),
         "commit": UNDONE},
        record("ooc_ablation_line", "disk-sequential", 0.5, metrics=disk),
        record("ooc_ablation_line", "gpmkit", 4.0, sizes={"line_bytes": 1 << 16, "io_threads": 4},
               metrics={"disk_fraction": 0.25}),
        # The ceiling measured in the first case, recorded again in the second: shown once.
        record("ooc_ablation_line", "disk-sequential", 0.5, metrics=disk),
        record("ooc_ablation_line", "gpmkit", 5.0, sizes={"line_bytes": 1 << 18, "io_threads": 4},
               metrics={"disk_fraction": 0.2}),
        record("ooc_ablation_readahead_run", "gpmkit", 3.0,
               sizes={"io_threads": 2, "read_ahead_run_bytes": 64 << 20},
               metrics={"disk_fraction": 0.5}),
        record("ooc_ablation_io_poll", "gpmkit", 0.25, sizes={"io_threads": 2, "idle_poll_us": 2000},
               metrics={"disk_fraction": 0.75}),
        record("ooc_ablation_write_behind", "gpmkit", 0.5,
               sizes={"regime": 1, "io_threads": 2, "write_behind": 1}),
        record("ooc_ablation_write_behind", "gpmkit", 0.75,
               sizes={"regime": 2, "io_threads": 2, "write_behind": 0,
                      "crash_consistent_outputs": 1}),
        # A workload that maps no file: in its own table only, not in the family section.
        record("ooc_ablation_fill", "copy-engine", 0.125, sizes={"lines": 128}),
    ]
    results = scratch / "results"
    results.mkdir()
    with open(results / "ooc.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    out = scratch / "report.md"
    subprocess.run([sys.executable, str(report_dir / "report.py"), str(results), "--out",
                    str(out)], check=True)
    text = out.read_text()
    section = text[text.find("## ooc_ablation_line"):]
    section = section[:section.find("\n## ", 1)]
    if section.count("| disk-sequential |") != 1:
        fail(f"the ceiling recorded again in a later case is not shown once:\n{section}")
    start = text.find("## Out of core")
    text = text[start:text.find("Machine:", start)] if start >= 0 else text
    expected = [
        "## Out of core (DRAGON): the ooc family",
        "| ooc_vectoradd | in-gpu | 1 GiB | 2 s | 2.5 s | 3 s | 8 s | 1.25× | 1.50× | 0.5 | 0.4 |",
        "| ooc_vectoradd | in-host | 1 GiB | 6 s | 7.5 s | – | – | 1.25× | – | – | – |",
        "| ooc_vectoradd | out-of-core | 1 GiB | 10 s | 9 s | – | – | 0.90× | – | 0.81 | – |",
        f"ooc_vectoradd ({OLDER}): disk 3 GB/s read, 2.5 GB/s write (O_DIRECT)",
        "| ooc_ablation_line | out-of-core | 64 KiB | 512 MiB | 2 GiB | on | 4 | read_write | 4 s "
        "| 0.25 | – | – |",
        "| ooc_ablation_readahead_run | out-of-core | 1 MiB | 512 MiB | 2 GiB | on, 64 MiB reads | 2 "
        "| read_write | 3 s | 0.5 | – | – |",
        "| ooc_ablation_io_poll | out-of-core | 1 MiB | 512 MiB | 2 GiB | on | 2, poll 2 ms "
        "| read_write | 250 ms | 0.75 | – | – |",
        "| ooc_ablation_write_behind | in-host | 1 MiB | 512 MiB | 2 GiB | on | 2 "
        "| read_write, write-behind | 500 ms |",
        "| ooc_ablation_write_behind | out-of-core | 1 MiB | 512 MiB | 2 GiB | on | 2 "
        "| read_write, crash-consistent | 750 ms |",
        "disk 2 GB/s read, 1.5 GB/s write in 8 MiB requests, 2.5 and 1.8 GB/s in one request "
        "(O_DIRECT)",
    ]
    for line in expected:
        if line not in text:
            fail(f"report lacks {line!r}:\n{text}")
    if "100 s" in text:
        fail("the ooc section used a record of an older run")
    if "50 s" in text:
        fail("the ooc section used an A/B's A side where another run measured the regime")
    if "ooc_ablation_fill" in text:
        fail(f"the ooc section shows a workload that maps no file:\n{text}")
    print("ok")


if __name__ == "__main__":
    main()
