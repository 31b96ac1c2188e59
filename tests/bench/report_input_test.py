#!/usr/bin/env python3
"""The report refuses what is not a gpmbench record with one line naming the file, the line and
what is wrong (exit status 1, no traceback, no report written): truncated JSON, another schema,
a JSON value that is not an object, a record without a field the report reads or with one of the
wrong type, an empty directory. A good record next to the bad one changes nothing.

usage: report_input_test.py <bench/report directory> <scratch directory>
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import report_records
from report_records import fail

GOOD = report_records.record("w", "gpm", 1.0, 2.0, "GB/s", "2026-01-01T00:00:00.000Z")


def without(key):
    r = dict(GOOD)
    del r[key]
    return json.dumps(r)


def with_field(key, value):
    return json.dumps(dict(GOOD, **{key: value}))


CASES = [
    ("truncated JSON", json.dumps(GOOD)[:40], "not JSON"),
    ("another schema", with_field("schema", "gpmkit.bench/0"), "schema 'gpmkit.bench/0'"),
    ("a JSON array", "[1, 2]", "schema None"),
    ("no mode", without("mode"), "no 'mode'"),
    ("no median", without("median_s"), "no 'median_s'"),
    ("median as text", with_field("median_s", "1.0"), "'median_s' is str"),
    ("throughput without a value", with_field("throughput", {"unit": "GB/s"}),
     "'throughput' lacks"),
    ("metrics as a list", with_field("metrics", [1]), "'metrics' is not an object"),
]


def report(report_dir, directory):
    return subprocess.run([sys.executable, str(report_dir / "report.py"), str(directory)],
                          capture_output=True, text=True)


def main():
    report_dir, scratch = Path(sys.argv[1]), Path(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    for name, line, expected in CASES:
        d = scratch / name.replace(" ", "_")
        d.mkdir(parents=True)
        (d / "a.jsonl").write_text(json.dumps(GOOD) + "\n")
        (d / "b.jsonl").write_text(json.dumps(GOOD) + "\n" + line + "\n")
        run = report(report_dir, d)
        if run.returncode != 1:
            fail(f"{name}: exit status {run.returncode}, expected 1")
        if "Traceback" in run.stderr or f"{d / 'b.jsonl'}:2: " not in run.stderr or \
                expected not in run.stderr:
            fail(f"{name}: the message does not name b.jsonl:2 and say {expected!r}:\n"
                 f"{run.stderr}")
        if (d / "report.md").exists():
            fail(f"{name}: a report was written")
    empty = scratch / "empty"
    empty.mkdir(parents=True)
    run = report(report_dir, empty)
    if run.returncode != 1 or "no *.jsonl files" not in run.stderr:
        fail(f"an empty directory: exit {run.returncode}, {run.stderr!r}")
    # The good records alone make a report.
    good = scratch / "good"
    good.mkdir()
    (good / "a.jsonl").write_text(json.dumps(GOOD) + "\n")
    if report(report_dir, good).returncode != 0 or not (good / "report.md").exists():
        fail("the good record alone made no report")
    print(f"ok: {len(CASES)} kinds of bad record refused with their file and line")


if __name__ == "__main__":
    main()
