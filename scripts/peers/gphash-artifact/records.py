#!/usr/bin/env python3
"""One gpmbench record ("gpmkit.bench/1", bench/gpmbench/record.cpp) from the logs of the GPHash
authors' artifact (test/ycsb_bench.cu), one log per repeat of one (YCSB workload, batch size).

The artifact prints a "<M ops/s>\tMops/sec" line and a "<ms>\tmsec" line (mean kernel time per
batch) after each of its phases: "Start Loading" (the load phase), "begin warm up" (a read pass
over the run's keys, untimed in gpmkit's sense) and "Start Running" (the run phase), then
"unfound: N" (reads that found nothing), and "hit rate: x" when built with -DCOUNT_HIT. Each
"begin resize level" line is a resize. Its throughput is operations over the sum of per-batch
CUDA-event times, so a repeat's time is operations / (M ops/s * 1e6).

Used by run.sh on the device; prints the record (one line) on stdout and a summary on stderr;
exits 1 naming the log that lacks a figure. Never part of gpmkit or gpmbench.
"""
import argparse
import json
import re
import sys

PHASES = {"Start Loading": "load", "begin warm up": "warmup", "Start Running": "run"}
NUMBER_LINE = re.compile(r"^\s*([0-9.]+|inf|nan|-nan)\s+(Mops/sec|msec)\s*$")


def is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def parse_log(path):
    """The figures of one artifact run: {phase: {"mops": x, "msec": y}}, resizes, unfound, hits."""
    phase = None
    figures = {}
    resizes = 0
    unfound = None
    hit_rate = None
    with open(path, errors="replace") as f:
        for line in f:
            text = line.strip()
            if text in PHASES:
                phase = PHASES[text]
                continue
            if text.startswith("begin resize level"):
                resizes += 1
            elif text.startswith("unfound:"):
                unfound = int(text.split(":", 1)[1])
            elif text.startswith("hit rate:"):
                # The artifact's cache thread prints without a lock: another message may land
                # between "hit rate: " and the figure, which then starts the next line.
                value = text.split(":", 1)[1].split()
                hit_rate = "next" if not value or not is_number(value[0]) else float(value[0])
            elif hit_rate == "next" and is_number(text):
                hit_rate = float(text)
            m = NUMBER_LINE.match(text)
            if m and phase is not None:
                unit = "mops" if m.group(2) == "Mops/sec" else "msec"
                figures.setdefault(phase, {}).setdefault(unit, float(m.group(1)))
    if hit_rate == "next":
        raise ValueError(f"{path}: no figure after \"hit rate:\"")
    for phase in ("load", "run"):
        mops = figures.get(phase, {}).get("mops")
        if mops is None:
            raise ValueError(f"{path}: no M ops/s for the {phase} phase (did the run finish?)")
        if not 0 < mops < float("inf"):
            raise ValueError(f"{path}: the {phase} phase printed {mops} M ops/s")
    return figures, resizes, unfound, hit_rate


def quantile(values, q):
    """As gpmbench's quantile (bench/gpmbench/stats.cpp): linear between order statistics."""
    v = sorted(values)
    rank = q * (len(v) - 1)
    below = int(rank)
    above = min(below + 1, len(v) - 1)
    return v[below] + (v[above] - v[below]) * (rank - below)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", help="one artifact log per repeat")
    p.add_argument("--workload", default="hash_batch_sweep_kv32")
    p.add_argument("--kind", required=True, help="YCSB workload: A, B, C or LOAD")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--loaded", type=int, required=True)
    p.add_argument("--ops", type=int, required=True)
    p.add_argument("--level", type=int, required=True, help="the artifact's init_level")
    p.add_argument("--cache", type=float, default=0.2)
    p.add_argument("--machine", required=True, help="file holding the machine JSON object")
    p.add_argument("--timestamp", required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--count-hit", type=int, default=0)
    a = p.parse_args()

    runs = []
    for log in a.logs:
        try:
            runs.append(parse_log(log))
        except (OSError, ValueError) as e:
            print(f"records.py: {e}", file=sys.stderr)
            return 1
    times = [a.ops / (r[0]["run"]["mops"] * 1e6) for r in runs]
    loads = [r[0]["load"]["mops"] for r in runs]
    median = quantile(times, 0.5)
    batches = (a.ops + a.batch - 1) // a.batch
    # The artifact's table: levels init_level .. init_level+3 of 2^l buckets, 4 slots a bucket.
    capacity = sum(4 << level for level in range(a.level, a.level + 4))
    max_keys = a.loaded + (a.ops if a.kind == "LOAD" else 0)
    metrics = {
        "batch_latency_us": sum(times) / len(times) / batches * 1e6,
        "load_mops": quantile(loads, 0.5),
        "zipf_theta": 0.99,
        "load_factor": max_keys / capacity,
        "resizes": max(r[1] for r in runs),
        "unfound": max((r[2] or 0) for r in runs),
        "cache_fraction": a.cache,
    }
    # Figures not every log has (no warm-up without its cache, no hit rate without -DCOUNT_HIT):
    # recorded when every repeat has them, never as NaN.
    optional = {
        "warmup_mops": [r[0].get("warmup", {}).get("mops") for r in runs],
        # The artifact's own mean time per run-phase batch: the kernel and its stream alone.
        "artifact_batch_ms": [r[0]["run"].get("msec") for r in runs],
        "cache_hit_rate": [r[3] for r in runs] if a.count_hit else [None],
    }
    for name, values in optional.items():
        if all(v is not None for v in values):
            metrics[name] = quantile(values, 0.5)
    with open(a.machine) as f:
        machine = json.load(f)
    record = {
        "schema": "gpmkit.bench/1",
        "workload": a.workload,
        "mode": f"{a.kind}-batch{a.batch}:gphash-artifact",
        "backend": "cuda",
        "machine": machine,
        "sizes": {"keys_loaded": a.loaded, "operations": a.ops, "batch_size": a.batch,
                  "batches": batches, "key_bytes": 32, "value_bytes": 32,
                  "slot_capacity": capacity},
        "repeats": len(times),
        "warmup": 0,
        "times_s": times,
        "median_s": median,
        "spread": {"min_s": quantile(times, 0), "p25_s": quantile(times, 0.25),
                   "p75_s": quantile(times, 0.75), "max_s": quantile(times, 1)},
        "throughput": {"value": a.ops / median / 1e6, "unit": "Mop/s"},
        "bytes_persisted": 0,
        "ceilings": {},
        "ratio_to_ceiling": {},
        "metrics": metrics,
        "timestamp": a.timestamp,
        "commit": a.commit,
    }
    print(json.dumps(record, separators=(",", ":")))
    warn = ""
    if metrics["resizes"]:
        warn += f"  RESIZED {metrics['resizes']}x"
    if metrics["unfound"]:
        warn += f"  UNFOUND {metrics['unfound']}"
    print(f"{record['mode']}: run {record['throughput']['value']:.2f} M ops/s, load phase "
          f"{metrics['load_mops']:.2f} M ops/s, {len(times)} repeat(s){warn}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
