"""The `torch_ckpt_*` section of the report: checkpointing a PyTorch training loop with gpmkit
against torch.save and DCP (bench/torch/torch_ckpt.py, docs/workloads/torch.md).

report.py calls torch_sections() with every record of a results directory. For each torch_ckpt
workload it takes the newest run (one benchmark process: its records share the model and the
ceilings) and shows, per mode, the training time lost per checkpoint, the save call's time, the
time until durable, the restore time and the save's rate against the D2H ceiling and the disk
measured in that run, and where the run timed checkpoints alone (from an idle GPU until durable)
their time and rate; then the issue's targets as ratios between modes of the run: gpmkit's
stall against DCP async_save's (target ≤ 1/5) and torch.save to disk's (≤ 1/10), and its rate
against the D2H ceiling (≥ 0.8). A run of several ranks (torch_ckpt_2gpu) says who wrote what
and shows the bytes a checkpoint of all ranks wrote. A mode the run did not record shows "–".
"""

MODES = ["torch-save-shm", "torch-save-disk", "dcp", "dcp-async", "gpmkit", "gpmkit-async",
         "gpmkit-dcp"]


def newest_run(records):
    """The records of the run that wrote the newest record, by mode (a run is one process: its
    records share the D2H ceiling it measured)."""
    newest = max(records, key=lambda r: r["timestamp"])
    key = (newest["ceilings"].get("d2h_GBps"), newest["ceilings"].get("disk_GBps"))
    run = [r for r in records
           if (r["ceilings"].get("d2h_GBps"), r["ceilings"].get("disk_GBps")) == key]
    return {r["mode"]: r for r in sorted(run, key=lambda r: r["timestamp"])}


def fmt_s(x):
    if x is None:
        return "–"
    return f"{x * 1e3:.3g} ms" if abs(x) < 1 else f"{x:.3g} s"


def fmt(x, digits=3):
    return "–" if x is None else f"{x:.{digits}g}"


def metric(modes, mode, name):
    r = modes.get(mode)
    return None if r is None else r["metrics"].get(name)


def ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def ranks_text(sizes, machine, ceil):
    """What a run of several ranks did, or "" for one rank."""
    ranks = sizes.get("ranks", 1)
    if ranks == 1:
        return ""
    isolated = " (each rank seeing only its GPU)" if machine.get("isolated_gpus") else ""
    where = "one GPU each" if machine.get("gpus") else "on the CPU"
    return (f" {ranks} ranks, {where}{isolated}, training by DDP over "
            f"{machine.get('dist_backend', '?')}; the state above is each rank's. torch.save: "
            "rank 0 writes, the others wait; DCP's modes: one checkpoint of all ranks (each "
            "replicated tensor written once); gpmkit's: every rank its replica into a pool of "
            "its own. Times are the slowest rank's; rates are all ranks' bytes over them, "
            "against ceilings measured with every rank at once (D2H of the slowest GPU: "
            f"{fmt(ceil.get('d2h_per_gpu_GBps'))} GB/s).")


def torch_sections(records, describe_machine):
    workloads = sorted({r["workload"] for r in records if r["workload"].startswith("torch_ckpt")})
    lines = []
    for w in workloads:
        modes = newest_run([r for r in records if r["workload"] == w])
        any_r = next(iter(modes.values()))
        sizes, ceil = any_r["sizes"], any_r["ceilings"]
        multi = sizes.get("ranks", 1) > 1
        alone = any("checkpoint_s" in r["metrics"] for r in modes.values())
        per_gpu = {"d2h_per_gpu_GBps": any_r["metrics"].get("d2h_per_gpu_GBps")}
        head = ["mode"] + (["written per checkpoint"] if multi else []) + [
            "stall per checkpoint (min–max)", "save call", "durable after the loop", "restore",
            "save GB/s", "× D2H", "× disk"] + (
            ["alone: until durable", "alone GB/s", "alone × D2H"] if alone else [])
        lines += [f"## {w}: checkpointing a training loop", "",
                  f"Newest run ({min(r['timestamp'] for r in modes.values())}); machine: "
                  f"{describe_machine(any_r)}; PyTorch {any_r['machine'].get('torch', '?')}. "
                  f"{sizes['parameters'] / 1e6:.1f}M parameters, state {sizes['state_bytes'] / 1e9:.2f}"
                  f" GB (model and AdamW), batch {sizes['batch']} × {sizes['sequence']} tokens, "
                  f"a checkpoint every {sizes['every']} of {sizes['steps']} steps (three loops)."
                  f"{ranks_text(sizes, any_r['machine'], per_gpu)} "
                  f"Ceilings measured in the run: D2H {fmt(ceil.get('d2h_GBps'))} GB/s, disk "
                  f"{fmt(ceil.get('disk_GBps'))} GB/s."
                  + (" \"Alone\": checkpoints timed one by one after the loops, from an idle GPU "
                     "until durable (the save call in the loop also waits for the step's GPU "
                     "work)." if alone else ""), "",
                  "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for m in MODES:
            r = modes.get(m)
            if r is None:
                continue
            x = r["metrics"]
            rate = r["throughput"]["value"]
            d2h = r["ceilings"].get("d2h_GBps")
            cells = [m] + ([f"{r['bytes_persisted'] / 1e9:.3g} GB"] if multi else []) + [
                f"{fmt_s(x['stall_s'])} ({fmt_s(x['stall_min_s'])}–{fmt_s(x['stall_max_s'])})",
                fmt_s(r["median_s"]), fmt_s(x["durable_s"]), fmt_s(x["restore_s"]), fmt(rate),
                fmt(r["ratio_to_ceiling"].get("d2h_GBps"), 2),
                fmt(r["ratio_to_ceiling"].get("disk_GBps"), 2)]
            if alone:
                cells += [fmt_s(x.get("checkpoint_s")), fmt(x.get("checkpoint_GBps")),
                          fmt(ratio(x.get("checkpoint_GBps"), d2h), 2)]
            lines.append("| " + " | ".join(cells) + " |")
        best = min((m for m in ("gpmkit", "gpmkit-async") if m in modes),
                   key=lambda m: modes[m]["metrics"]["stall_s"], default=None)
        if best is not None:
            stall = metric(modes, best, "stall_s")
            lines += ["", f"Targets (issue 22), with gpmkit's smaller stall ({best}):", "",
                      "| target | measured |", "| --- | --- |",
                      f"| stall ≤ 1/5 of dcp-async's | "
                      f"{fmt(ratio(stall, metric(modes, 'dcp-async', 'stall_s')))} of it |",
                      f"| stall ≤ 1/10 of torch-save-disk's | "
                      f"{fmt(ratio(stall, metric(modes, 'torch-save-disk', 'stall_s')))} of it |",
                      f"| save ≥ 0.8 × D2H ceiling (gpmkit) | "
                      f"{fmt(modes['gpmkit']['ratio_to_ceiling'].get('d2h_GBps') if 'gpmkit' in modes else None, 2)} |"]
            g = modes.get("gpmkit")
            if g is not None and "checkpoint_GBps" in g["metrics"]:
                lines.append(f"| checkpoint alone ≥ 0.8 × D2H ceiling (gpmkit, idle GPU to "
                             f"durable) | {fmt(ratio(g['metrics']['checkpoint_GBps'], g['ceilings'].get('d2h_GBps')), 2)} |")
        lines += ["", "A stall is the loop's time with checkpoints less the same steps without, "
                  "over its checkpoints: noise of a few steps' time can make a small one "
                  "negative.", ""]
    return lines
