"""The `ooc` family's section of the report: out-of-core GPU computing (docs/workloads/ooc.md).

report.py calls ooc_sections() with every record of a results directory. For each ooc workload and
each regime (sizes.regime) it takes the newest run (one `gpmbench` invocation, one timestamp) that
measured the regime (`gpmbench run --cases` measures some regimes only; an A/B's A side only where
nothing else measured it) and shows each mode's time, gpmkit's speedup over chunked-pipeline and over fread-memcpy (time of the
baseline over time of gpmkit, both from that run), and the disk_fraction of gpmkit and of
chunked-pipeline against the disk's sequential bandwidth measured in the same run. The ablation
workloads (ooc_ablation_*) get one row per case with the settings their sizes carry; a workload
with no gpmkit or baseline mode (ooc_ablation_fill) is left to the per-workload tables. Modes a
run did not record are shown as "–", never filled in from another run.
"""
from collections import defaultdict

from suite import change_undone

REGIMES = {0: "in-gpu", 1: "in-host", 2: "out-of-core"}
MODES = ["gpmkit", "chunked-pipeline", "fread-memcpy", "managed"]
ABLATION_PREFIX = "ooc_ablation_"


def newest_run(records):
    if not records:
        return []
    stamp = max(r["timestamp"] for r in records)
    return [r for r in records if r["timestamp"] == stamp]


def newest_run_per_regime(records):
    """[(regime, records of the newest run that measured it)], by regime. Runs of an A/B's A side
    are chosen only where no other run measured the regime: an ooc change is measured side by side
    once it is in the tree (the B side), and one that loses is reverted with its records left out."""
    runs = defaultdict(list)
    for r in records:
        runs[r["timestamp"]].append(r)
    chosen = {}
    for undone in (False, True):
        for stamp in sorted(runs, reverse=True):
            for r in runs[stamp]:
                if r["mode"] in MODES and change_undone(r) == undone:
                    chosen.setdefault(r["sizes"].get("regime"), stamp)
    return [(regime, runs[chosen[regime]]) for regime in sorted(chosen)]


def regime_runs(records):
    """The runs the family table shows: of each regime, its newest run's records of that regime
    (and the run's disk record)."""
    return [[r for r in run if r["mode"] == "disk-sequential" or r["sizes"].get("regime") == regime]
            for regime, run in newest_run_per_regime(records)]


def seconds(r):
    return None if r is None else r["median_s"]


def speedup(baseline, ours):
    return None if baseline is None or ours is None or ours == 0 else baseline / ours


def fmt(x, digits=3):
    return "–" if x is None else f"{x:.{digits}g}"


def fmt_time(s):
    if s is None:
        return "–"
    return f"{s:.3g} s" if s >= 1 else f"{s * 1e3:.3g} ms"


def fmt_factor(x):
    return "–" if x is None else f"{x:.2f}×"


def fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} B"


def metric(r, name):
    return None if r is None else r.get("metrics", {}).get(name)


def disk_line(run):
    disk = [r for r in run if r["mode"] == "disk-sequential"]
    if not disk:
        return None
    m = disk[0]["metrics"]
    direct = "O_DIRECT" if m.get("direct_io") else "buffered"
    line = f"disk {m.get('read_GBps', 0):.3g} GB/s read, {m.get('write_GBps', 0):.3g} GB/s write"
    if "read_whole_GBps" in m:  # measured since one-request transfers were
        line += (f" in 8 MiB requests, {m['read_whole_GBps']:.3g} and "
                 f"{m.get('write_whole_GBps', 0):.3g} GB/s in one request")
    return f"{line} ({direct})"


def family_rows(workload, run):
    by_regime = defaultdict(dict)
    for r in run:
        if r["mode"] in MODES:
            by_regime[r["sizes"].get("regime")][r["mode"]] = r
    rows = []
    for regime in sorted(by_regime):
        modes = by_regime[regime]
        any_record = next(iter(modes.values()))
        t = {m: seconds(modes.get(m)) for m in MODES}
        rows.append(
            f"| {workload} | {REGIMES.get(regime, regime)} | "
            f"{fmt_bytes(any_record['sizes'].get('footprint_bytes', 0))} | "
            + " | ".join(fmt_time(t[m]) for m in MODES)
            + f" | {fmt_factor(speedup(t['chunked-pipeline'], t['gpmkit']))}"
            f" | {fmt_factor(speedup(t['fread-memcpy'], t['gpmkit']))}"
            f" | {fmt(metric(modes.get('gpmkit'), 'disk_fraction'))}"
            f" | {fmt(metric(modes.get('chunked-pipeline'), 'disk_fraction'))} |")
    return rows


def io_threads(sizes):
    """The I/O threads per mapping, and how long idle ones poll when not the library's default."""
    threads = f"{sizes.get('io_threads', '–')}"
    poll_us = sizes.get("idle_poll_us")
    return threads + (f", poll {fmt_time(poll_us / 1e6)}" if poll_us else "")


def outputs(sizes):
    """How gpmkit mapped the outputs: their mode, and crash-consistent sync and write-behind where
    on (records from before write-behind existed do not name it)."""
    parts = ["write" if sizes.get("write_mode_outputs") else "read_write"]
    if sizes.get("crash_consistent_outputs"):
        parts.append("crash-consistent")
    if sizes.get("write_behind"):
        parts.append("write-behind")
    return ", ".join(parts)


def ablation_rows(workload, run):
    rows = []
    for r in run:
        if r["mode"] != "gpmkit":
            continue
        s = r["sizes"]
        ahead = "off" if not s.get("read_ahead") else "on"
        if s.get("read_ahead") and s.get("read_ahead_run_bytes"):  # the default's 0 says nothing
            ahead += f", {fmt_bytes(s['read_ahead_run_bytes'])} reads"
        rows.append(
            f"| {workload} | {REGIMES.get(s.get('regime'), '–')} | "
            f"{fmt_bytes(s.get('line_bytes', 0))} | "
            f"{fmt_bytes(s.get('gpu_cache_bytes', 0))} | {fmt_bytes(s.get('host_cache_bytes', 0))} | "
            f"{ahead} | {io_threads(s)} | {outputs(s)} | "
            f"{fmt_time(seconds(r))} | "
            f"{fmt(metric(r, 'disk_fraction'))} | {fmt(metric(r, 'read_ahead_hits'), 6)} | "
            f"{fmt(metric(r, 'gpu_wait_s'))} |")
    return rows


def ooc_sections(records, describe_machine):
    by_workload = defaultdict(list)
    for r in records:
        if r["workload"].startswith("ooc_"):
            by_workload[r["workload"]].append(r)
    # A workload that maps no file (ooc_ablation_fill measures a line's copy alone) has none of
    # these modes: the per-workload tables show it, this section has nothing to say of it.
    by_workload = {w: rs for w, rs in by_workload.items() if any(r["mode"] in MODES for r in rs)}
    if not by_workload:
        return []
    lines = ["## Out of core (DRAGON): the ooc family", "",
             "Newest run of each workload and regime. Times are medians of the repeats and include mapping, "
             "transfers, kernels, write-back, fdatasync and unmapping. Speedups are the "
             "baseline's time over gpmkit's in the same run; disk_fraction is the time the disk "
             "needs at its sequential bandwidth (measured in that run) for the mode's disk "
             "traffic, over the mode's time. fread-memcpy and managed run in-gpu only.", ""]
    family = [w for w in sorted(by_workload) if not w.startswith(ABLATION_PREFIX)]
    ablations = [w for w in sorted(by_workload) if w.startswith(ABLATION_PREFIX)]
    disks, machines = [], set()

    def table(workloads, header, rows_of, runs_of):
        """The table of `workloads` (the runs runs_of picks from each one's records) under
        `header`, noting their disks and machines."""
        if not workloads:
            return []
        out = list(header)
        for w in workloads:
            for run in runs_of(by_workload[w]):
                out += rows_of(w, run)
                disk = f"{w} ({run[0]['timestamp']}): {disk_line(run) or 'no disk record'}"
                if disk not in disks:
                    disks.append(disk)
                machines.add(describe_machine(run[0]))
        return out + [""]

    lines += table(family,
                   ["| workload | regime | footprint | " + " | ".join(MODES) +
                    " | gpmkit vs chunked | gpmkit vs fread | disk_fraction gpmkit | "
                    "disk_fraction chunked |",
                    "|" + " --- |" * (len(MODES) + 7)],
                   family_rows, regime_runs)
    lines += table(ablations,
                   ["### Ablations (gpmkit)", "",
                    "| workload | regime | line | GPU cache | host cache | read-ahead | I/O threads "
                    "| outputs | time | disk_fraction | read-ahead hits | GPU wait (s) |",
                    "|" + " --- |" * 12],
                   ablation_rows, lambda records: [newest_run(records)])
    lines += ["Disk measured in each run: " + "; ".join(disks) + ".", "",
              "Machine: " + "; ".join(sorted(machines)) + ".", ""]
    return lines
