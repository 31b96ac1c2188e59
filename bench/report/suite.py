"""The GPMbench suite's figures: analogues of the GPM paper's Figures 1, 3, 9-12 and Tables 4-5.

report.py calls suite_sections() with every record of a results directory. Each figure is built
only from the records that exist (a results directory of one workload gets only what applies), is
a ratio between modes measured in the same run wherever it compares modes, and states the machine,
the ceilings it is compared against and the date of the run. Mode names are the ones every
workload uses (docs/bench.md, "Modes"): gpm, gpm-conv, gpm-ndp, cap-mm, cap-fs, cap-fs-disk,
snapshot, cpu.
"""
import textwrap
from collections import defaultdict

BASELINE = "cap-fs"


def change_undone(record):
    """Whether a record is an A/B's A side (scripts/device/gpu-ab.sh names its commit
    `<commit>-without-<patch>`): the source with the measured change undone."""
    return "-without-" in record.get("commit", "")


def recency(record):
    """The order in which records stand for the tree: newest first, but an A/B's A side behind
    every other run (a change is measured once it is in the tree, its B side; one that loses is
    reverted and its B side's records left out), so that a kept change's figures are not those
    of its A side when that ran last."""
    return (not change_undone(record), record["timestamp"])


def _newest(records):
    """{workload: {mode: newest record}} (by recency)."""
    table = defaultdict(dict)
    for r in records:
        old = table[r["workload"]].get(r["mode"])
        if old is None or recency(r) >= recency(old):
            table[r["workload"]][r["mode"]] = r
    return table


def _rate(r):
    """Higher is better: the throughput for rates, the inverse of per-operation times."""
    value = r["throughput"]["value"]
    return value if r["throughput"]["unit"].endswith("/s") else 1.0 / value


def _runs(records):
    """{workload: {timestamp: {mode: record}}}: the records of each run (a gpmbench run stamps
    every record it writes with its start time)."""
    runs = defaultdict(lambda: defaultdict(dict))
    for r in records:
        runs[r["workload"]][r["timestamp"]][r["mode"]] = r
    return runs


def _pair(runs, workload, mode, over):
    """The records of `mode` and `over` from the newest run of `workload` that measured both,
    with None (a ratio needs both sides from one run, and a later run of one mode alone must not
    take the figure's cell away); else, from two runs of a resumed suite, with the link between
    them (_linked_pair); None if neither exists."""
    for stamp in sorted(runs[workload], reverse=True,
                        key=lambda t: recency(next(iter(runs[workload][t].values())))):
        run = runs[workload][stamp]
        if mode in run and over in run:
            return run[mode], run[over], None
    return _linked_pair(runs[workload], mode, over)


def _same_setup(a, b):
    """Two records of one workload measured on machines of one description (GPU, driver, CPU,
    host name: two lent machines of a kind look alike, and the link's ratio absorbs what differs
    between them), at the same commit and sizes."""
    return (a["machine"] == b["machine"] and a.get("commit") == b.get("commit") and
            a["sizes"] == b["sizes"])


def _linked_pair(workload_runs, mode, over):
    """A resumed suite (gpmbench suite --resume) runs a workload's remaining modes in a new run
    when a device call's budget ends between them, so `mode` and `over` may lie in two runs. Two
    such runs are linked by a mode both measured (the workload's reference, run again by every
    resumed run): the ratio is then the product of two same-run ratios, mode / link in the one
    run and link / over in the other, never one time against another run's. Only runs of one
    machine description, commit and sizes link; the newest such pair, with its link
    (records of the link in mode's run and in over's run), or None."""
    stamps = sorted(workload_runs, reverse=True)
    for sa in (s for s in stamps if mode in workload_runs[s]):
        a = workload_runs[sa]
        for sb in (s for s in stamps if over in workload_runs[s] and s != sa):
            b = workload_runs[sb]
            if not _same_setup(a[mode], b[over]):
                continue
            for link in sorted(set(a) & set(b) - {mode, over}):
                if _same_setup(a[link], b[link]):
                    return a[mode], b[over], (a[link], b[link])
    return None


def _speedup(pair):
    """Time of `over` over time of `mode` for a `pair` from _pair: every mode of a workload does
    the same work, while its throughput may count different things (the native workloads' GB/s
    count the bytes each mode persists, and GPM persists fewer). With the pair's link (two runs),
    that ratio times the link's time in mode's run over its time in over's run. Returns
    (speedup, linked), or None for no pair."""
    if pair is None:
        return None
    ratio = pair[1]["median_s"] / pair[0]["median_s"]
    link = pair[2]
    if link is not None:
        ratio *= link[0]["median_s"] / link[1]["median_s"]
    return ratio, link is not None


LINKED_NOTE = ("‡ The two modes were measured in two runs of a resumed suite (same machine "
               "description, commit and sizes): the ratio is the product of two same-run ratios "
               "through a mode both runs measured (`{links}`).")


def _context(records, describe_machine):
    """Machine, date and ceilings lines for a figure built from `records`."""
    machines = sorted({describe_machine(r) for r in records})
    dates = sorted({r["timestamp"] for r in records})
    ceilings = defaultdict(set)
    for r in records:
        for k, v in r.get("ceilings", {}).items():
            ceilings[k].add(v)

    def span(values):
        lo, hi = min(values), max(values)
        return f"{lo:.4g}" if lo == hi else f"{lo:.4g}–{hi:.4g}"

    lines = [f"Machine: {'; '.join(machines)}.",
             f"Runs: {dates[0]}" + (f" to {dates[-1]}" if len(dates) > 1 else "") + "."]
    if ceilings:
        lines.append("Ceilings measured in the same runs: " +
                     ", ".join(f"`{k}` {span(v)}" for k, v in sorted(ceilings.items())) + ".")
    return [" ".join(lines), ""]


def _fmt(x):
    """A ratio, or a (ratio, linked) pair from _speedup (linked ones marked ‡)."""
    if isinstance(x, tuple):
        return _fmt(x[0]) + ("‡" if x[1] else "")
    return "–" if x is None else f"{x:.2f}×"


def _pair_records(pair):
    """Every record a ratio from `pair` rests on."""
    return list(pair[:2]) + list(pair[2] or ())


def wrap_title(title, inches):
    """`title` broken into lines that fit a figure `inches` wide (a chart title longer than its
    figure was clipped at both ends)."""
    return "\n".join(textwrap.wrap(title, max(24, int(inches * 9))))


def _bar_plot(plt, out_dir, name, title, groups, series, ylabel, log=False):
    """Grouped bars: groups on x, one bar per series; values None are left out. At most 14
    inches wide: a figure sized per bar (Figure 9 was 36 inches, 3960 pixels) could not be read
    once a page scaled it down."""
    import numpy as np
    width_in = min(14.0, max(6.0, 0.3 * len(groups) * max(1, len(series)) + 2))
    fig, ax = plt.subplots(figsize=(width_in, 4.5))
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for k, (label, values) in enumerate(series.items()):
        ax.bar(x + k * width, [v if v is not None else 0 for v in values], width, label=label)
    ax.set_xticks(x + width * (len(series) - 1) / 2)
    ax.set_xticklabels(groups, rotation=30, ha="right")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize="small")
    ax.set_title(wrap_title(title, width_in))
    fig.tight_layout()
    fig.savefig(out_dir / name, dpi=110)
    plt.close(fig)
    return [f"![{title}]({name})", ""]


def _ratio_figure(plt, out_dir, runs, describe_machine, heading, intro, file_name, columns, over):
    """A table (and plot) of rate(mode) / rate(over) for each workload having `over`."""
    cells = {(w, c): _pair(runs, w, c, over) for w in runs for c in columns}
    workloads = [w for w in sorted(runs) if any(cells[w, c] is not None for c in columns)]
    if not workloads:
        return []
    pairs = [p for p in cells.values() if p is not None]
    used = [r for p in pairs for r in _pair_records(p)]
    links = sorted({p[2][0]["mode"] for p in pairs if p[2] is not None})
    lines = [f"### {heading}", "", intro, ""] + _context(used, describe_machine)
    lines += ["| workload | " + " | ".join(f"{c} / {over}" for c in columns) + " |",
              "| --- |" + " --- |" * len(columns)]
    series = {c: [] for c in columns}
    for w in workloads:
        row = [_speedup(cells[w, c]) for c in columns]
        for c, v in zip(columns, row):
            series[c].append(None if v is None else v[0])
        lines.append(f"| {w} | " + " | ".join(_fmt(v) for v in row) + " |")
    lines.append("")
    if links:
        lines += [LINKED_NOTE.format(links="`, `".join(links)), ""]
    if plt is not None:
        lines += _bar_plot(plt, out_dir, file_name, heading, workloads, series,
                           f"throughput relative to {over}", log=True)
    return lines


def _scaling_figure(plt, out_dir, table, describe_machine):
    modes = table.get("persist_scaling", {})
    gpu = sorted(((int(m.split("-")[-1]), r) for m, r in modes.items() if m.startswith("gpu-")))
    cpu = sorted(((int(m.split("-")[-1]), r) for m, r in modes.items() if m.startswith("cap-mm-")))
    if not gpu or not cpu:
        return []
    base = _rate(cpu[0][1])
    lines = ["### Figure 3: persisting with more threads", "",
             "The same bytes made durable by T GPU threads (8-byte stores, each persisted: GPM) "
             "or by CAP-mm with T CPU threads, relative to CAP-mm with one CPU thread "
             "(the paper's normalisation).", ""]
    lines += _context([r for _, r in gpu + cpu], describe_machine)
    lines += ["| threads | GPM GB/s | GPM / CAP-mm-1 | CAP-mm GB/s | CAP-mm / CAP-mm-1 |",
              "| --- | --- | --- | --- | --- |"]
    g, c = dict(gpu), dict(cpu)
    for t in sorted(set(g) | set(c)):
        gr, cr = g.get(t), c.get(t)
        lines.append(f"| {t} | {gr['throughput']['value']:.4g} | {_rate(gr) / base:.2f}× | "
                     if gr else f"| {t} | – | – | ")
        lines[-1] += (f"{cr['throughput']['value']:.4g} | {_rate(cr) / base:.2f}× |"
                      if cr else "– | – |")
    lines.append("")
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        axes[0].plot([t for t, _ in cpu], [_rate(r) / base for _, r in cpu], "o-")
        axes[0].set_xscale("log", base=2)
        axes[0].set_xlabel("CPU threads (CAP-mm)")
        axes[1].plot([t for t, _ in gpu], [_rate(r) / base for _, r in gpu], "o-", color="C1")
        axes[1].set_xscale("log", base=2)
        axes[1].set_xlabel("GPU threads (GPM)")
        for ax in axes:
            ax.set_ylabel("speedup over CAP-mm, 1 thread")
        fig.suptitle(wrap_title("Figure 3: scaling of persistence", 10))
        fig.tight_layout()
        fig.savefig(out_dir / "suite_fig3_scaling.png", dpi=110)
        plt.close(fig)
        lines += ["![Figure 3](suite_fig3_scaling.png)", ""]
    return lines


def _bandwidth_figure(plt, out_dir, table, runs, describe_machine):
    """Figure 12: bytes the gpm mode persisted per second against the D2H ceiling (of the gpm
    record's own run, which need not be the newest run to measure the ceiling)."""
    d2h_by_run = {(w, stamp): run["d2h_memcpy"]["throughput"]["value"]
                  for w, workload_runs in runs.items() for stamp, run in workload_runs.items()
                  if "d2h_memcpy" in run}
    platform = table.get("platform", {}).get("d2h_memcpy")
    rows, used = [], []
    for w in sorted(table):
        r = table[w].get("gpm")
        if r is None or not r["bytes_persisted"]:
            continue
        gbps = r["bytes_persisted"] / r["median_s"] / 1e9
        ceiling = d2h_by_run.get((w, r["timestamp"]))
        if ceiling is None and platform is not None:
            ceiling = (platform["throughput"]["value"], "platform")  # same suite, not same run
        rows.append((w, gbps, ceiling))
        used.append(r)
    if not rows:
        return []
    lines = ["### Figure 12: PCIe write bandwidth of the GPM mode", "",
             "Bytes the `gpm` mode made durable in the pool per second (from `bytes_persisted` "
             "and the median time), against `cudaMemcpy` device-to-host measured in the same "
             "run where the workload measures it, else (marked *) by the `platform` workload "
             "of the same results directory.", ""]
    lines += _context(used, describe_machine)
    lines += ["| workload | GB/s persisted | D2H ceiling GB/s | fraction of ceiling |",
              "| --- | --- | --- | --- |"]
    plotted = []
    for w, gbps, ceiling in rows:
        if ceiling is None:
            lines.append(f"| {w} | {gbps:.4g} | – | – |")
            continue
        mark = ""
        if isinstance(ceiling, tuple):
            ceiling, mark = ceiling[0], "*"
        plotted.append(ceiling)
        lines.append(f"| {w} | {gbps:.4g} | {ceiling:.4g}{mark} | {gbps / ceiling:.3f} |")
    lines.append("")
    if plt is not None:
        width_in = min(14, max(6, len(rows)))
        fig, ax = plt.subplots(figsize=(width_in, 4))
        ax.bar([w for w, _, _ in rows], [g for _, g, _ in rows])
        if plotted:
            ax.axhline(max(plotted), color="red", linestyle="--", label="D2H memcpy")
            ax.legend()
        ax.set_ylabel("GB/s written and persisted")
        ax.tick_params(axis="x", labelrotation=30)
        fig.suptitle(wrap_title("Figure 12: PCIe write bandwidth with GPM", width_in))
        fig.tight_layout()
        fig.savefig(out_dir / "suite_fig12_bandwidth.png", dpi=110)
        plt.close(fig)
        lines += ["![Figure 12](suite_fig12_bandwidth.png)", ""]
    return lines


def _write_amplification(runs, describe_machine):
    rows, used = [], []
    for w in sorted(runs):
        wa = {}
        for cap in ("cap-mm", "cap-fs"):
            # Bytes per repeat depend on the work alone, not on the run: a pair of two runs
            # needs no link's correction (but is marked as one).
            pair = _pair(runs, w, cap, "gpm")
            if pair is not None and pair[1]["bytes_persisted"]:
                wa[cap] = (pair[0]["bytes_persisted"] / pair[1]["bytes_persisted"],
                           pair[2] is not None)
                used += pair[:2]
        if wa:
            rows.append((w, wa))
    if not rows:
        return []
    lines = ["### Table 4: write amplification of CAP over GPM", "",
             "Bytes a CAP mode made durable per repeat over the bytes the `gpm` mode made "
             "durable (log included) for the same work.", ""]
    lines += _context(used, describe_machine)
    lines += ["| workload | CAP-mm / GPM | CAP-fs / GPM |", "| --- | --- | --- |"]
    for w, wa in rows:
        lines.append(f"| {w} | {_fmt(wa.get('cap-mm'))} | {_fmt(wa.get('cap-fs'))} |")
    lines.append("")
    if any(linked for _, wa in rows for _, linked in wa.values()):
        lines += ["‡ From two runs of a resumed suite (same machine description, commit and "
                  "sizes).", ""]
    return lines


def _restoration(records, describe_machine):
    """From each workload's newest `gpm` record (by recency) that timed a recovery (a later run
    that did not must not take the row away)."""
    newest = {}
    for r in records:
        if r["mode"] == "gpm" and "restore_s" in r.get("metrics", {}):
            old = newest.get(r["workload"])
            if old is None or recency(r) >= recency(old):
                newest[r["workload"]] = r
    rows, used = [], []
    for w in sorted(newest):
        r = newest[w]
        m = r["metrics"]
        pct = m.get("restore_pct_of_op", 100.0 * m["restore_s"] / r["median_s"])
        # Of which the recovery's kernels (undo logs: the log's copy and the roll-back, one kernel
        # since restore_kernel_s, two before).
        kernels = m.get("restore_kernel_s")
        if kernels is None and "restore_copy_s" in m and "restore_roll_back_s" in m:
            kernels = m["restore_copy_s"] + m["restore_roll_back_s"]
        rows.append((w, m["restore_s"], pct, kernels, kernels and pct * kernels / m["restore_s"]))
        used.append(r)
    if not rows:
        return []
    lines = ["### Table 5: restoration latency", "",
             "Time to recover after a crash just before commit (or, for checkpoints, to restore "
             "the last checkpoint), as a percentage of the operation's time (metrics "
             "`restore_s` and `restore_pct_of_op` of the `gpm` mode); for undo logs also the part "
             "spent in recovery's kernels (`restore_kernel_s`; in older records `restore_copy_s` "
             "+ `restore_roll_back_s`), the rest being the CUDA driver's (loading the recovery "
             "kernel on first use, allocating the log's copy in GPU memory: "
             "`restore_allocate_s`).", ""]
    lines += _context(used, describe_machine)
    lines += ["| workload | restore | % of operation time | in kernels | % of operation time |",
              "| --- | --- | --- | --- | --- |"]
    for w, s, pct, kernels, kernels_pct in rows:
        k = "– | –" if kernels is None else f"{kernels * 1e3:.4g} ms | {kernels_pct:.2f}%"
        lines.append(f"| {w} | {s * 1e3:.4g} ms | {pct:.2f}% | {k} |")
    return lines + [""]


def suite_sections(plt, records, out_dir, describe_machine):
    """The suite's figures as Markdown lines (empty when no record applies)."""
    table = _newest(records)
    runs = _runs(records)
    out = []
    out += _ratio_figure(
        plt, out_dir, runs, describe_machine, "Figure 1: GPM over CPU-only persistence",
        "Speedup of `gpm` over `cpu` (time of `cpu` over time of `gpm` for the same work), `cpu` "
        "being a multi-threaded CPU implementation with the same recoverability, in the same run.", "suite_fig1_cpu.png", ["gpm"], "cpu")
    out += _scaling_figure(plt, out_dir, table, describe_machine)
    out += _ratio_figure(
        plt, out_dir, runs, describe_machine,
        "Figures 9 and 10: speedups normalised to CAP-fs",
        "Speedup of each mode over `cap-fs` (copy to the host, write + fsync into tmpfs), as time "
        "of `cap-fs` over time of the mode for the same work, in the same run: Figure 9 has CAP-mm and GPM, Figure 10 adds GPM-NDP (GPU stores, CPU "
        "persists). `cap-fs-disk` and `snapshot` are the power-loss-durable paths of the "
        "workloads that have them (gpKVS, gpDB).",
        "suite_fig9_speedups.png",
        ["cap-mm", "gpm-ndp", "gpm", "cap-fs-disk", "snapshot"], BASELINE)
    out += _ratio_figure(
        plt, out_dir, runs, describe_machine, "Figure 11: HCL over conventional logging",
        "Speedup of `gpm` (HCL) over `gpm-conv` (conventional partitioned logs): time of "
        "`gpm-conv` over time of `gpm`, in the same run.", "suite_fig11_hcl.png", ["gpm"], "gpm-conv")
    out += _bandwidth_figure(plt, out_dir, table, runs, describe_machine)
    out += _write_amplification(runs, describe_machine)
    out += _restoration(records, describe_machine)
    if out:
        out = ["## The GPMbench suite", "",
               "Analogues of the GPM paper's figures and tables (ASPLOS'22 §6), from the newest "
               "record of each workload and mode; docs/benchmarks.md explains each one.", ""] + out
    return out
