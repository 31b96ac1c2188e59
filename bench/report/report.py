#!/usr/bin/env python3
"""gpmbench's report step: turns a results directory into report.md and PNG plots.

Reads every *.jsonl in DIR (records of schema "gpmkit.bench/1", written by `gpmbench run`) and
writes Markdown tables and, when matplotlib is available, plots next to the report. Every number
in the output is taken or derived from the records (throughput spread is the recorded throughput
rescaled by the recorded quartile times); nothing is measured or assumed here.

usage: report.py DIR [--out FILE]      (normally run as `gpmbench report DIR`)
"""
import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from ooc import ooc_sections
from suite import suite_sections, wrap_title
from torch_ckpt import torch_sections
from tx import tx_sections

SCHEMA = "gpmkit.bench/1"
NUMBER = (int, float)
# What every record has (docs/bench.md, "Records"), with its JSON type; the report reads these
# without looking first.
REQUIRED = {"workload": str, "mode": str, "backend": str, "timestamp": str, "machine": dict,
            "sizes": dict, "repeats": int, "median_s": NUMBER, "spread": dict,
            "throughput": dict, "bytes_persisted": NUMBER, "ceilings": dict,
            "ratio_to_ceiling": dict}


def record_problem(record):
    """What makes `record` unusable (a missing or mistyped field), or None."""
    if not isinstance(record, dict):
        return "not a JSON object"
    for key, kind in REQUIRED.items():
        if key not in record:
            return f"no {key!r}"
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            wanted = getattr(kind, "__name__", "a number")
            return f"{key!r} is {type(record[key]).__name__}, not {wanted}"
    if not isinstance(record.setdefault("metrics", {}), dict):  # none in the oldest records
        return "'metrics' is not an object"
    t = record["throughput"]
    if not isinstance(t.get("value"), NUMBER) or not isinstance(t.get("unit"), str):
        return "'throughput' lacks a numeric 'value' or a 'unit'"
    return None


def load_records(directory):
    """All records in DIR/*.jsonl, in file and line order; exits naming any line it cannot use."""
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        sys.exit(f"report.py: no *.jsonl files in {directory}")
    records = []
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"report.py: {path}:{number}: not JSON ({e})")
            if not isinstance(record, dict) or record.get("schema") != SCHEMA:
                schema = record.get("schema") if isinstance(record, dict) else None
                sys.exit(f"report.py: {path}:{number}: schema {schema!r}, "
                         f"this script reads {SCHEMA!r}")
            problem = record_problem(record)
            if problem is not None:
                sys.exit(f"report.py: {path}:{number}: not a gpmbench record: {problem}")
            records.append(record)
    return files, records


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:g} {unit}" if unit == "B" else f"{n:.4g} {unit}"
        n /= 1024
    return str(n)


def human_seconds(s):
    if s >= 1:
        return f"{s:.4g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.4g} ms"
    return f"{s * 1e6:.4g} µs"


def format_sizes(sizes):
    parts = []
    for name, value in sizes.items():
        shown = human_bytes(value) if "bytes" in name else f"{value:,}"
        parts.append(f"{name} {shown}")
    return ", ".join(parts)


def is_rate(unit):
    return unit.endswith("/s")


def throughput_at(record, seconds):
    """The record's throughput had a repeat taken `seconds` (rates fall as time grows)."""
    value, median = record["throughput"]["value"], record["median_s"]
    return value * median / seconds if is_rate(record["throughput"]["unit"]) else \
        value * seconds / median


def quartile_throughputs(record):
    """(low, high): the throughput at the p25 and p75 repeat times, in ascending order, and
    bracketing the record's own throughput: recomputed from times, a quartile equal to the median
    (one repeat) may round a hair past the value (the plot's whisker then came out negative, and
    matplotlib refused it)."""
    spread, value = record["spread"], record["throughput"]["value"]
    low, high = sorted((throughput_at(record, spread["p25_s"]),
                        throughput_at(record, spread["p75_s"])))
    return min(low, value), max(high, value)


def format_ratios(record):
    parts = []
    for name, ratio in record["ratio_to_ceiling"].items():
        ceiling = record["ceilings"].get(name)
        suffix = f" (ceiling {ceiling:.4g})" if ceiling is not None else ""
        parts.append(f"{ratio:.3f} × {name}{suffix}")
    return "; ".join(parts)


def describe_machine(record):
    m = record["machine"]
    gpu = f"{m['gpu']} (compute {m['compute_capability']}"
    if m.get("multiprocessors"):
        gpu += f", {m['multiprocessors']} SMs"
    gpu += ")"
    if m.get("pcie_generation"):
        gpu += f", PCIe Gen{m['pcie_generation']} x{m.get('pcie_width') or '?'}"
    versions = []
    if m.get("driver"):
        versions.append(f"driver {m['driver']}")
    if m.get("cuda_runtime"):
        versions.append(f"CUDA runtime {m['cuda_runtime']}")
    text = f"{gpu}; CPU {m['cpu']} ({m['cores']} hardware threads); host `{m['hostname']}`"
    if versions:
        text += "; " + ", ".join(versions)
    if m.get("pool_huge_pages"):
        text += "; pools on 2 MiB pages"
    if m.get("module_loading") == "LAZY":
        text += "; kernels loaded lazily"
    return text


def newest_per_mode(records):
    """Each mode's records from its newest run (modes in the order they first appear; a workload
    with cases has one record of a mode per case in a run), and all older ones. A record that
    repeats one of its run's (a ceiling measured once and recorded again in each later case) is
    shown once."""
    newest = {}
    for r in records:
        if r["mode"] not in newest or r["timestamp"] > newest[r["mode"]]:
            newest[r["mode"]] = r["timestamp"]
    shown, seen = [], set()
    for mode in newest:
        for r in records:
            if r["mode"] != mode or r["timestamp"] != newest[mode]:
                continue
            same = (mode, json.dumps(r["sizes"], sort_keys=True), tuple(r["times_s"]))
            if same not in seen:
                seen.add(same)
                shown.append(r)
    older = [r for r in records if r["timestamp"] != newest[r["mode"]]]
    return shown, older


def mode_labels(records):
    """Each record's mode, followed, where several records share it, by the first size in which
    they differ (a workload's cases), so that plots tell them apart."""
    by_mode = defaultdict(list)
    for r in records:
        by_mode[r["mode"]].append(r)
    labels = []
    for r in records:
        same = by_mode[r["mode"]]
        keys = [k for k in r["sizes"] if len({str(o["sizes"].get(k)) for o in same}) > 1]
        labels.append(f"{r['mode']} ({format_sizes({keys[0]: r['sizes'][keys[0]]})})"
                      if len(same) > 1 and keys else r["mode"])
    return labels


def run_label(r):
    """A record's run: its timestamp, and the commit it was measured at where it names one (an
    A/B's sides and a directory of builds compared in turn differ only there)."""
    return f"{r['timestamp']} at `{r['commit']}`" if r.get("commit") else r["timestamp"]


def newest_table(records, with_run):
    """The main table; with_run adds the run (timestamp) column when rows come from several runs."""
    run_head, run_rule = ("run | ", "--- | ") if with_run else ("", "")
    rows = [f"| {run_head}mode | sizes | repeats | median | spread: min / p25 / p75 / max | "
            "throughput (p25–p75) | ratio to ceiling | bytes persisted |",
            f"| {run_rule}--- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in records:
        s = r["spread"]
        unit = r["throughput"]["unit"]
        low, high = quartile_throughputs(r)
        run = f"{run_label(r)} | " if with_run else ""
        rows.append(
            f"| {run}{r['mode']} | {format_sizes(r['sizes'])} | {r['repeats']} "
            f"(+{r['warmup']} warm-up) | {human_seconds(r['median_s'])} | "
            f"{human_seconds(s['min_s'])} / {human_seconds(s['p25_s'])} / "
            f"{human_seconds(s['p75_s'])} / {human_seconds(s['max_s'])} | "
            f"**{r['throughput']['value']:.4g} {unit}** ({low:.4g}–{high:.4g}) | "
            f"{format_ratios(r)} | {human_bytes(r['bytes_persisted'])} |")
    return rows


def history_table(records):
    rows = ["| run | backend | mode | median | throughput | ratio to ceiling |",
            "| --- | --- | --- | --- | --- | --- |"]
    for r in sorted(records, key=lambda r: r["timestamp"], reverse=True):
        rows.append(f"| {run_label(r)} | {r['backend']} | {r['mode']} | "
                    f"{human_seconds(r['median_s'])} | {r['throughput']['value']:.4g} "
                    f"{r['throughput']['unit']} | {format_ratios(r)} |")
    return rows


# Workloads whose modes are `<group>:<variant>`, compared variant by variant within a group and a
# run: (reference variant, whether the table shows reference over variant or variant over it).
SIDE_BY_SIDE = {
    "ycsb": ("gphash", "over"), "ycsb_key32": ("gphash", "over"), "ycsb_kv32": ("gphash", "over"),
    "ycsb_uniform": ("gphash", "over"), "hash_micro": ("gphash", "over"),
    "hash_batch_sweep": ("gphash", "over"), "hash_batch_sweep_key32": ("gphash", "over"),
    "hash_batch_sweep_kv32": ("gphash", "over"),
    "hash_factors": ("baseline", "under"), "hash_cache": ("no-cache", "under"),
}


def side_by_side_table(workload, records):
    """Per run and group, each variant's throughput against the reference variant's."""
    if workload not in SIDE_BY_SIDE:
        return []
    reference, direction = SIDE_BY_SIDE[workload]
    groups = defaultdict(dict)  # (run, group) -> variant -> record
    for r in records:
        if ":" in r["mode"]:
            group, variant = r["mode"].split(":", 1)
            groups[(r["timestamp"], group)][variant] = r
    rows = []
    # Runs in time order; groups in the order their modes were run (the workload's order).
    for (run, group), variants in sorted(groups.items(), key=lambda item: item[0][0]):
        ref = variants.get(reference)
        if ref is None or len(variants) < 2:
            continue
        cells = []
        for variant, r in variants.items():
            if variant == reference:
                continue
            a, b = ref["throughput"]["value"], r["throughput"]["value"]
            factor = a / b if direction == "over" else b / a
            cells.append(f"{variant} {factor:.3g}×")
        rows.append(f"| {run} | {group} | {ref['throughput']['value']:.4g} | {', '.join(cells)} |")
    if not rows:
        return []
    what = (f"`{reference}`'s throughput over each other mode's" if direction == "over"
            else f"each mode's throughput over `{reference}`'s")
    return [f"### {workload}: side by side", "",
            f"Within each run and each group of modes: {what} (median repeats).", "",
            f"| run | group | {reference} | factors |", "| --- | --- | --- | --- |"] + rows + [""]


# Workloads whose point is a metric, not the throughput: (metric, what it is), shown per mode.
KEY_METRICS = {
    "hash_load_factor": ("load_factor", "the fraction of the slots holding keys when an insert "
                         "first finds no room"),
}


def key_metric_table(workload, records):
    if workload not in KEY_METRICS:
        return []
    metric, what = KEY_METRICS[workload]
    rows = [r for r in records if metric in r.get("metrics", {})]
    if not rows:
        return []
    return ([f"`{metric}`: {what}.", "", f"| run | mode | {metric} |", "| --- | --- | --- |"] +
            [f"| {r['timestamp']} | {r['mode']} | {r['metrics'][metric]:.4f} |" for r in rows] +
            [""])


def workload_section(plt, workload, records, out_dir):
    shown, older = newest_per_mode(records)
    runs = sorted({r["timestamp"] for r in shown})
    lines = [f"## {workload}", ""]
    if len(runs) == 1:
        lines += [f"Run {run_label(shown[0])}, {shown[0]['backend']} backend.", ""]
    else:
        lines += [f"The newest record of each mode, from {len(runs)} runs; ratios are always "
                  "to ceilings of the record's own run.", ""]
    machines = {}
    for r in shown:
        machines.setdefault(describe_machine(r), []).append(r["timestamp"])
    for machine, stamps in machines.items():
        where = "" if len(machines) == 1 else f" (runs {', '.join(sorted(set(stamps)))})"
        lines += [f"Machine{where}: {machine}.", ""]
    lines += newest_table(shown, with_run=len(runs) > 1)
    lines.append("")
    lines += key_metric_table(workload, shown)
    lines += side_by_side_table(workload, records)
    if plt is not None:
        for name in plot_workload(plt, workload, shown, out_dir):
            lines += [f"![{name}]({name})", ""]
    if older:
        lines += [f"### Older records of {workload}", ""]
        lines += history_table(older)
        lines.append("")
    return lines


def plot_workload(plt, workload, records, out_dir):
    """Throughput per unit (bars with p25–p75 whiskers) and ratios to ceilings; returns files."""
    files = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        files.append(name)

    by_unit = defaultdict(list)
    for r in records:
        by_unit[r["throughput"]["unit"]].append(r)
    fig, axes = plt.subplots(1, len(by_unit), figsize=(5 * len(by_unit), 4.5), squeeze=False)
    for ax, (unit, group) in zip(axes[0], by_unit.items()):
        values = [r["throughput"]["value"] for r in group]
        quartiles = [quartile_throughputs(r) for r in group]
        errors = [[v - q[0] for v, q in zip(values, quartiles)],
                  [q[1] - v for v, q in zip(values, quartiles)]]
        ax.bar(mode_labels(group), values, yerr=errors, capsize=4, color="#4c72b0")
        ax.set_ylabel(unit + (" (lower is better)" if not is_rate(unit) else ""))
        if max(values) > 100 * min(values):
            ax.set_yscale("log")  # ceilings and small increments differ by orders of magnitude
        ax.tick_params(axis="x", labelrotation=35)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    fig.suptitle(wrap_title(f"{workload}: median throughput on {records[0]['machine']['gpu']}",
                            5 * len(by_unit)))
    save(fig, f"{workload}_throughput.png")

    ratios = [(f"{label} / {name}", ratio) for r, label in zip(records, mode_labels(records))
              for name, ratio in r["ratio_to_ceiling"].items()]
    if ratios:
        fig, ax = plt.subplots(figsize=(8, 0.5 * len(ratios) + 1.5))
        ax.barh([label for label, _ in ratios], [ratio for _, ratio in ratios], color="#55a868")
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_xlabel("ratio to the ceiling measured in the same run")
        ax.invert_yaxis()
        fig.suptitle(wrap_title(f"{workload}: fraction of the platform ceiling", 8))
        save(fig, f"{workload}_ratios.png")
    return files


def main():
    parser = argparse.ArgumentParser(description="Markdown tables and plots from gpmbench results")
    parser.add_argument("directory", type=Path, help="a results directory of *.jsonl files")
    parser.add_argument("--out", type=Path, help="the report to write (default DIR/report.md)")
    args = parser.parse_args()
    out = args.out or args.directory / "report.md"
    out.parent.mkdir(parents=True, exist_ok=True)

    files, records = load_records(args.directory)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None

    by_workload = defaultdict(list)
    for r in records:
        by_workload[r["workload"]].append(r)

    lines = ["# gpmkit benchmark report", "",
             f"From {len(records)} records in `{args.directory}` "
             f"({', '.join(f.name for f in files)}), written by `gpmbench run`. Every number here "
             "comes from those records; ratios compare figures measured in the same run. "
             "Throughput is taken from the median repeat; its p25–p75 range from the quartile "
             "times.", ""]
    emulated = sorted({r["workload"] for r in records if r.get("backend") == "host"})
    if emulated:
        lines += [f"> **Not GPU performance.** {len(emulated)} workloads here ran on gpmkit's host "
                  "SIMT emulator (records with `backend: host`), which runs kernels on CPU "
                  "threads to test correctness: their times and ratios say nothing about a GPU. "
                  "GPU figures come from the CUDA backend on a GPU (`make bench` there, or "
                  "`scripts/device/gpu-bench.sh`).", ""]
    if plt is None:
        lines += ["> Note: plots were skipped because matplotlib is not installed "
                  "(`pip install -r bench/requirements.txt`).", ""]
    lines += suite_sections(plt, records, out.parent, describe_machine)
    lines += tx_sections(records, describe_machine)
    lines += ooc_sections(records, describe_machine)
    lines += torch_sections(records, describe_machine)
    for workload in sorted(by_workload):
        lines += workload_section(plt, workload, by_workload[workload], out.parent)
    out.write_text("\n".join(lines))
    print(f"report written to {out}")


if __name__ == "__main__":
    main()
