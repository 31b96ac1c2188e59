"""The `tx` family's section of the report: persistent GPU transactions (docs/workloads/tx.md).

report.py calls tx_sections() with every record of a results directory. For each tx workload it
takes the newest run (one `gpmbench` invocation, one timestamp) and compares modes only within
it: committed transactions per second of every persistence mode at each launch, helpers over
redo-direct, adaptive over the better of helpers and redo-direct, and the slowdown of each
persistent mode against the same STM without persistence (volatile); then the per-mode details
(aborts per commit, bytes persisted, persist bandwidth against the persist_stream ceiling, time
to durable, recovery), the write-pressure table, the ring-size sweep and versioned reads against
the paper's locked reads (modes `<mode>-versioned` beside `<mode>`). Modes that a run did not
record are shown as "–", never filled in from another run.
"""
from collections import defaultdict

# Persistence modes in the order tables show them (docs/workloads/tx.md, "Modes").
MODES = ["volatile", "undo-hcl", "redo-direct", "redo-hcl", "helpers", "adaptive"]
PAPER_WORKLOADS = ["tx_atm_a1", "tx_atm_a2", "tx_hash_h1", "tx_hash_h2", "tx_bvh_1", "tx_bvh_2"]
FILL = "@fill"
# Our goal (issue 17): persistent transactions at most this much slower than volatile on ATM A1.
GOAL_WORKLOAD, GOAL_SLOWDOWN = "tx_atm_a1", 1.5


def newest_run(records):
    """The records of the newest run among `records`, by mode."""
    if not records:
        return {}
    stamp = max(r["timestamp"] for r in records)
    return {r["mode"]: r for r in records if r["timestamp"] == stamp}


def rate(modes, name):
    r = modes.get(name)
    return None if r is None else r["throughput"]["value"]


def aborts_of(modes, name):
    """The aborts per commit of mode `name` in `modes`, None where it or the metric is absent."""
    r = modes.get(name)
    return None if r is None else r.get("metrics", {}).get("aborts_per_commit")


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def fmt(x, digits=4):
    return "–" if x is None else f"{x:.{digits}g}"


def milliseconds(seconds):
    return "–" if seconds is None else f"{seconds * 1e3:.3g}"


def fmt_factor(x):
    return "–" if x is None else f"{x:.2f}×"


def comparisons(modes, suffix):
    """The ratios of one launch's modes (rates of `<mode><suffix>`), None where a mode is absent."""
    r = {m: rate(modes, m + suffix) for m in MODES}
    best = [x for x in (r["helpers"], r["redo-direct"]) if x is not None]
    slowdowns = {m: ratio(r["volatile"], r[m]) for m in MODES if m != "volatile"}
    present = {m: s for m, s in slowdowns.items() if s is not None}
    return {
        "rates": r,
        "helpers_over_direct": ratio(r["helpers"], r["redo-direct"]),
        "adaptive_over_best": ratio(r["adaptive"], max(best)) if len(best) == 2 else None,
        "slowdowns": slowdowns,
        "best_persistent": min(present.items(), key=lambda kv: kv[1]) if present else None,
    }


def throughput_table(by_workload):
    rows, used = [], []
    shown = [m for m in MODES if any(m + s in newest_run(by_workload[w])
                                     for w in by_workload for s in ("", FILL))]
    header = ("| workload | launch | " + " | ".join(f"{m} Mtx/s" for m in shown) +
              " | helpers / redo-direct | adaptive / best of helpers, redo-direct | "
              "volatile / best persistent |")
    for w in PAPER_WORKLOADS:
        modes = newest_run(by_workload.get(w, []))
        if not modes:
            continue
        used += modes.values()
        for launch, suffix in (("paper", ""), ("fill", FILL)):
            c = comparisons(modes, suffix)
            if all(v is None for v in c["rates"].values()):
                continue
            sample = next(modes[m + suffix] for m in MODES if m + suffix in modes)
            shape = f"{launch}: {sample['sizes'].get('blocks', '?')}×" \
                    f"{sample['sizes'].get('threads_per_block', '?')}"
            best = c["best_persistent"]
            best_text = "–" if best is None else f"{fmt_factor(best[1])} ({best[0]})"
            if w == GOAL_WORKLOAD and best is not None:
                best_text += " ✓" if best[1] <= GOAL_SLOWDOWN else " ✗"
            rows.append(f"| {w} | {shape} | " +
                        " | ".join(fmt(c["rates"][m]) for m in shown) +
                        f" | {fmt_factor(c['helpers_over_direct'])} | "
                        f"{fmt_factor(c['adaptive_over_best'])} | {best_text} |")
    if not rows:
        return [], used
    lines = ["### Transactions per second, mode by mode", "",
             "Committed transactions per second (median repeat) of each persistence mode at the "
             "paper's launch (512 blocks × 256 threads) and at a launch that fills the GPU. "
             "`helpers / redo-direct` and `adaptive / best of …` are ratios of throughputs (above "
             "1: faster); `volatile / best persistent` is how many times slower the fastest "
             "persistent mode is than the same STM without persistence (our goal on "
             f"{GOAL_WORKLOAD}: at most {GOAL_SLOWDOWN}×, ✓ met, ✗ missed). Every ratio is "
             "between records of one run.", ""]
    lines += [header, "| --- | --- |" + " --- |" * (len(shown) + 3)] + rows + [""]
    return lines, used


def attempts_table(by_workload):
    """The slowdown of the fastest persistent mode against volatile, split into the attempts each
    commit took (1 + aborts per commit) and the time of one attempt."""
    rows = []
    for w in PAPER_WORKLOADS:
        modes = newest_run(by_workload.get(w, []))
        for launch, suffix in (("paper", ""), ("fill", FILL)):
            best = comparisons(modes, suffix)["best_persistent"]
            if best is None:
                continue
            aborts = [aborts_of(modes, m + suffix) for m in ("volatile", best[0])]
            if None in aborts:
                continue
            attempts = [1 + a for a in aborts]
            from_attempts = attempts[1] / attempts[0]
            rows.append(f"| {w} | {launch} | {best[0]} | {fmt_factor(best[1])} | "
                        f"{fmt(attempts[0], 3)} | {fmt(attempts[1], 3)} | "
                        f"{fmt_factor(from_attempts)} | {fmt_factor(best[1] / from_attempts)} |")
    if not rows:
        return []
    return ["### Where the slowdown against volatile comes from", "",
            "The fastest persistent mode's slowdown against the same STM without persistence "
            "(the throughput table's last column), split into two factors that multiply to it: "
            "how many more attempts each commit took (attempts per commit: 1 + aborts per "
            "commit) and how much longer one attempt took.", "",
            "| workload | launch | mode | slowdown | attempts per commit, volatile | "
            "attempts per commit, mode | from attempts | per attempt |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"] + rows + [""]


def details_table(by_workload):
    rows = []
    for w in sorted(by_workload):
        for mode, r in newest_run(by_workload[w]).items():
            if r["throughput"]["unit"] != "Mop/s":
                continue  # the persist_stream ceiling
            m, ceil = r.get("metrics", {}), r.get("ratio_to_ceiling", {})
            gbps = m.get("persist_GBps")
            frac = ceil.get("persist_stream_GBps")
            bw = "–" if not r["bytes_persisted"] else \
                f"{fmt(gbps)}" + ("" if frac is None else f" ({frac:.3f})")
            phases = ", ".join(f"{k[:-2]} {v * 1e3:.3g} ms" for k, v in m.items()
                               if k in ("build_s", "reduce_s"))
            rows.append(
                f"| {w} | {mode} | {fmt(r['throughput']['value'])} | "
                f"{fmt(m.get('aborts_per_commit'), 3)} | {r['bytes_persisted']:,} | {bw} | "
                f"{milliseconds(m.get('durable_s'))} | {milliseconds(m.get('durable_host_s'))} | "
                f"{milliseconds(m.get('recovery_s'))} ({int(m.get('recovery_replayed', 0)):,}) | "
                f"{milliseconds(m.get('recovery_host_s'))} | "
                f"{r['sizes'].get('ring_entries', '–')} | {phases or '–'} |")
    if not rows:
        return []
    return ["### Per mode: aborts, bytes, bandwidth, durability, recovery", "",
            "Newest run of each workload. Persist GB/s is bytes persisted per second of the "
            "median repeat, in brackets its fraction of `persist_stream` (coalesced stores into "
            "a pool, one persist per thread) measured in the same run. Time to durable: "
            "`sync()` after the kernels (the last records applied to the home image: by the "
            "replay kernels, and in the next column by the host's reproducer, "
            "`tx_options::gpu_replay` false). Recovery: reopening the heap after a repeat "
            "stopped without `sync()`, with the records it replayed, then the same with the "
            "host's reproducer.", "",
            "| workload | mode | Mtx/s | aborts / commit | bytes persisted | persist GB/s "
            "(of ceiling) | time to durable ms | host replay ms | recovery ms (records) | "
            "host replay ms | ring entries | phases |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"] + rows + [""]


def pressure_table(records):
    modes = newest_run(records)
    by_k = defaultdict(dict)
    for name, r in modes.items():
        if ":" in name and name.startswith("w"):
            k, mode = name.split(":", 1)
            by_k[int(k[1:])][mode] = r
    if not by_k:
        return []
    lines = ["### Write pressure (tx_micro_pressure)", "",
             "Conflict-free transactions writing k words each: Mtx/s per mode, helpers over "
             "redo-direct, and the persist bandwidth each reaches (GB/s).", "",
             "| words k | volatile | redo-direct | helpers | helpers / redo-direct | "
             "redo-direct GB/s | helpers GB/s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for k in sorted(by_k):
        m = by_k[k]
        r = {mode: (m[mode]["throughput"]["value"] if mode in m else None)
             for mode in ("volatile", "redo-direct", "helpers")}
        bw = {mode: (m[mode]["metrics"].get("persist_GBps") if mode in m else None)
              for mode in ("redo-direct", "helpers")}
        lines.append(f"| {k} | {fmt(r['volatile'])} | {fmt(r['redo-direct'])} | "
                     f"{fmt(r['helpers'])} | {fmt_factor(ratio(r['helpers'], r['redo-direct']))} | "
                     f"{fmt(bw['redo-direct'])} | {fmt(bw['helpers'])} |")
    return lines + [""]


def ring_table(records):
    modes = newest_run(records)
    base = rate(modes, "redo-direct")
    rings = sorted((r["sizes"].get("ring_entries", 0), r) for name, r in modes.items()
                   if name.startswith("helpers-ring"))
    if not rings:
        return []
    lines = ["### Ring size (tx_ring_sweep)", "",
             "ATM A1 with helper warps over ring sizes (address-value entries per block), "
             "against redo-direct in the same run.", "",
             f"redo-direct: {fmt(base)} Mtx/s.", "",
             "| ring entries | Mtx/s | over redo-direct |", "| --- | --- | --- |"]
    for entries, r in rings:
        v = r["throughput"]["value"]
        lines.append(f"| {entries} | {fmt(v)} | {fmt_factor(ratio(v, base))} |")
    return lines + [""]


OCCUPANCY = ("p50", "p90", "p99", "max")


def occupancy_table(by_workload):
    rows = []
    for w in sorted(by_workload):
        for mode, r in newest_run(by_workload[w]).items():
            m = r.get("metrics", {})
            if f"ring_occupancy_{OCCUPANCY[0]}" not in m:
                continue
            entries = r["sizes"].get("ring_entries")
            cells = []
            for p in OCCUPANCY:
                f = m.get(f"ring_occupancy_{p}")
                cells.append("–" if f is None else
                             f"{f * 100:.0f}%" + ("" if not entries else f" ({f * entries:.0f})"))
            rows.append(f"| {w} | {mode} | {entries or '–'} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["### Ring occupancy over time (the paper's Fig. 15)", "",
            "How full each block's ring stood while its helper warps ran, over the timed "
            "repeats' kernels: the occupancy at or below which the rings stood for 50, 90 and "
            "99% of the time, and the most seen, as a fraction of the ring (in 1/64 steps) and "
            "in ring entries (8-byte slots: a record's address-value pairs and its header). The "
            "last step also counts a full ring that committers wait for.", "",
            "| workload | mode | ring entries | p50 | p90 | p99 | max |",
            "| --- | --- | --- | --- | --- | --- | --- |"] + rows + [""]


RESIDENCY_CAPS = (("", "as many as fit"), ("-sm2", "2"), ("-sm1", "1"))
# Each mode of the sweep and its variants: a fixed cap, or (adaptive) the number learnt per kernel.
RESIDENCY_MODES = (("volatile", RESIDENCY_CAPS), ("redo-direct", RESIDENCY_CAPS),
                   ("helpers", RESIDENCY_CAPS),
                   ("adaptive", (("", "as many as fit"), ("-learned", "learnt per kernel"))))


def residency_table(records):
    modes = newest_run(records)
    rows = []
    for name, variants in RESIDENCY_MODES:
        uncapped = rate(modes, name)
        for suffix, cap in variants:
            r = modes.get(name + suffix)
            if r is None:
                continue
            resident = r.get("metrics", {}).get("resident_blocks_per_sm")
            capped = r["throughput"]["value"]
            rows.append(f"| {name} | {cap} | {fmt(capped)} | "
                        f"{fmt(aborts_of(modes, name + suffix), 3)} | {fmt(resident, 3)} | "
                        f"{fmt_factor(ratio(capped, uncapped))} |")
    if not rows:
        return []
    return ["### Resident blocks (tx_residency_sweep)", "",
            "ATM A1 at the paper's launch with at most 2 or 1 blocks an SM "
            "(`tx_options::max_blocks_per_sm`), or in adaptive mode as many as learnt per kernel "
            "(`tx_options::learn_residency`), against as many as fit: Mtx/s, aborts per commit, "
            "the blocks an SM held (`resident_blocks_per_sm`: in the last launch, the stopped "
            "repeat's), and the rate against the same mode uncapped, all in one run.", "",
            "| mode | blocks an SM at most | Mtx/s | aborts / commit | resident blocks / SM | "
            "against uncapped |", "| --- | --- | --- | --- | --- | --- |"] + rows + [""]


VERSIONED = "-versioned"


def versioned_table(by_workload):
    rows = []
    for w in sorted(by_workload):
        modes = newest_run(by_workload[w])
        for name in [m for m in MODES if m + VERSIONED in modes]:
            locked, versioned = rate(modes, name), rate(modes, name + VERSIONED)
            aborts = [aborts_of(modes, m) for m in (name, name + VERSIONED)]
            rows.append(f"| {w} | {name} | {fmt(locked)} | {fmt(versioned)} | "
                        f"{fmt_factor(ratio(versioned, locked))} | {fmt(aborts[0], 3)} | "
                        f"{fmt(aborts[1], 3)} |")
    if not rows:
        return []
    return ["### Versioned reads against locked reads", "",
            "Mtx/s of each persistence mode with the paper's locked reads and with versioned "
            "reads (`tx_reads::versioned`), in the same run, and aborts per commit of each.", "",
            "| workload | mode | locked | versioned | versioned / locked | aborts locked | "
            "aborts versioned |", "| --- | --- | --- | --- | --- | --- | --- |"] + rows + [""]


def tx_sections(records, describe_machine):
    """The tx section as Markdown lines (empty when there are no tx records)."""
    by_workload = defaultdict(list)
    for r in records:
        if r["workload"].startswith("tx_"):
            by_workload[r["workload"]].append(r)
    if not by_workload:
        return []
    throughput, used = throughput_table(by_workload)
    used += [r for w in by_workload for r in newest_run(by_workload[w]).values()]
    machines = sorted({describe_machine(r) for r in used})
    runs = sorted({r["timestamp"] for r in used})
    lines = ["## Persistent GPU transactions (tx)", "",
             "The Helper Warps paper's benchmarks (TPDS'20 §6.3) on `gpm::tx_heap`; "
             "docs/workloads/tx.md explains the modes and the figures.", "",
             f"Machine: {'; '.join(machines)}. Runs: {', '.join(runs)}.", ""]
    lines += throughput
    lines += attempts_table(by_workload)
    lines += pressure_table(by_workload.get("tx_micro_pressure", []))
    lines += ring_table(by_workload.get("tx_ring_sweep", []))
    lines += residency_table(by_workload.get("tx_residency_sweep", []))
    lines += versioned_table(by_workload)
    lines += occupancy_table(by_workload)
    lines += details_table(by_workload)
    return lines
