"""Made-up gpmbench records (schema gpmkit.bench/1) for the report tests: one record of one
timed repeat, so every time, spread and throughput in it follows from `seconds`. Each report test
wraps record() with the sizes and metrics its section reads."""

import sys

MACHINE = {"hostname": "h", "cpu": "c", "cores": 2, "gpu": "g", "compute_capability": "9.0",
           "multiprocessors": 2, "pcie_generation": None, "pcie_width": None, "driver": None,
           "cuda_runtime": None}


def record(workload, mode, seconds, throughput, unit, stamp, sizes=None, metrics=None,
           bytes_persisted=0, ceilings=None, ratio_to_ceiling=None):
    return {"schema": "gpmkit.bench/1", "workload": workload, "mode": mode, "backend": "host",
            "machine": MACHINE, "sizes": sizes or {}, "repeats": 1, "warmup": 0,
            "times_s": [seconds], "median_s": seconds,
            "spread": {"min_s": seconds, "p25_s": seconds, "p75_s": seconds, "max_s": seconds},
            "throughput": {"value": throughput, "unit": unit}, "bytes_persisted": bytes_persisted,
            "ceilings": ceilings or {}, "ratio_to_ceiling": ratio_to_ceiling or {},
            "metrics": metrics or {}, "timestamp": stamp}


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)
