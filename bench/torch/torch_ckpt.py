"""Checkpointing a PyTorch training loop: gpmkit against torch.save and DCP (issue 22,
docs/workloads/torch.md). A GPT-2-style transformer built from torch.nn with random weights (no
download) trains with AdamW on random tokens and checkpoints its model and optimizer state every
`--every` steps, in each mode side by side in one process, on the same model and data:

  torch-save-shm   torch.save of the state dict to /dev/shm
  torch-save-disk  torch.save to disk, then fsync (durable, like the others)
  dcp              torch.distributed.checkpoint.save, FileSystemWriter on disk
  dcp-async        dcp.async_save (staged to host memory, written by a thread)
  gpmkit           gpmkit.torch.save into a pool in /dev/shm (returns once durable)
  gpmkit-async     gpmkit.torch.save(wait=False): returns once the tensors are captured
  gpmkit-dcp       dcp.save with gpmkit.dcp.PoolWriter (a pool per checkpoint)

Per mode: the training time lost per checkpoint (`stall_s`: the loop's time with checkpoints
less the same number of steps without, over the checkpoints), the time of the save call, the
time until the checkpoint is durable, the time to load it back into the model (`restore_s`), a
few checkpoints timed alone from an idle GPU until durable (`checkpoint_s`, the checkpoint's own
bandwidth), the bytes written, and the rates against the D2H copy ceiling and the disk's write
bandwidth, both measured in the same run. One gpmbench-schema record per mode, appended to
DIR/<workload>.jsonl; `gpmbench report DIR` reads it.

With --ranks N (N > 1) the same loop runs on N processes, one GPU each (the CPU on the emulator),
as DDP over NCCL (gloo on the CPU); DCP's plans, barriers and the timings go over a gloo group.
Who writes what: `torch-save-*`, rank 0 (the DDP idiom; the others wait at a barrier); `dcp`,
`dcp-async`, `gpmkit-dcp`, one checkpoint of all ranks (DCP spreads the replicated tensors over
them); `gpmkit`, `gpmkit-async`, every rank its replica into a pool of its own. Times are the
slowest rank's; rates are all ranks' bytes over that time, against ceilings measured with every
rank at once. Workload `torch_ckpt_<model>` with one rank, `torch_ckpt_<N>gpu` for the 124m model
on N ranks and `torch_ckpt_<N>gpu_<model>` for another model.

    python bench/torch/torch_ckpt.py --model 124m --out bench/results/h100/torch
    python bench/torch/torch_ckpt.py --model 124m --ranks 2 --out bench/results/h200x2/torch
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing

import gpmkit
import gpmkit.torch as gtorch
from gpmkit.dcp import PoolReader, PoolWriter

MODELS = {  # GPT-2 sizes: layers, width, heads
    "124m": (12, 768, 12),
    "1p5b": (48, 1600, 25),
    "tiny": (2, 64, 2),  # for a check on the CPU
}
VOCAB = 50257
MODES = ["torch-save-shm", "torch-save-disk", "dcp", "dcp-async", "gpmkit", "gpmkit-async",
         "gpmkit-dcp"]
RANK0_WRITES = ("torch-save-shm", "torch-save-disk")  # the others wait at a barrier
PER_RANK = ("gpmkit", "gpmkit-async")  # a pool per rank, each with the rank's replica
# The rest are DCP's: one checkpoint of all ranks, each replicated tensor written once.


def workload_name(model, ranks):
    if ranks == 1:
        return f"torch_ckpt_{model}"
    return f"torch_ckpt_{ranks}gpu" + ("" if model == "124m" else f"_{model}")


class World:
    """The ranks of the job: one process without a process group, or several over one. The
    checkpoints' coordination (DCP's plans, barriers, gathering the timings) goes over a gloo
    group `pg`, as DCP recommends for async_save, so none of it queues behind the training's
    NCCL collectives."""

    def __init__(self, rank=0, size=1):
        self.rank, self.size = rank, size
        self.pg = dist.new_group(backend="gloo") if size > 1 else None

    def barrier(self):
        if self.size > 1:
            dist.barrier(group=self.pg)

    def gather(self, value):
        """Every rank's `value`, by rank (on every rank)."""
        if self.size == 1:
            return [value]
        out = [None] * self.size
        dist.all_gather_object(out, value, group=self.pg)
        return out

    def slowest(self, value):
        return max(self.gather(value))


class GPT(torch.nn.Module):
    """Token and position embeddings, pre-norm transformer blocks with causal attention, and a
    language-model head tied to the token embedding: GPT-2's shape."""

    def __init__(self, layers, width, heads, context):
        super().__init__()
        self.tokens = torch.nn.Embedding(VOCAB, width)
        self.positions = torch.nn.Embedding(context, width)
        block = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0,
                                                 activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, VOCAB, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, x):
        t = x.shape[1]
        h = self.tokens(x) + self.positions(torch.arange(t, device=x.device))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(t, device=x.device)
        return self.head(self.norm(self.blocks(h, mask=mask, is_causal=True)))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def state_bytes(state):
    total = 0
    for v in state.values():
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, dict):
            total += state_bytes(v)
    return total


def d2h_ceiling(device, nbytes, world):
    """GB/s of a device-to-pinned-host copy of `nbytes` on every rank at once (median of 3):
    all ranks' sum, and the slowest rank's."""
    if device.type != "cuda":
        return None, None
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    times = []
    for _ in range(3):
        sync(device)
        world.barrier()
        t = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        sync(device)
        times.append(time.perf_counter() - t)
    rates = world.gather(nbytes / statistics.median(times) / 1e9)
    return sum(rates), min(rates)


def disk_bandwidth(directory, nbytes, world):
    """GB/s of writing `nbytes` to a file in `directory` and fsyncing it, every rank a file of
    its own at once: all ranks' bytes over the slowest rank's time."""
    buf = os.urandom(1 << 20)
    path = os.path.join(directory, f"gpmkit-torch-bench-disk-probe-{world.rank}")
    world.barrier()
    t = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(nbytes >> 20):
            f.write(buf)
        f.flush()
        os.fsync(f.fileno())
    seconds = world.slowest(time.perf_counter() - t)
    os.remove(path)
    return world.size * nbytes / seconds / 1e9


class Trainer:
    """The model (the same on every rank), its optimizer and the rank's data; with several ranks
    the steps go through DDP, whose gradient all-reduce keeps the replicas equal."""

    def __init__(self, args, device, world):
        layers, width, heads = MODELS[args.model]
        torch.manual_seed(0)
        self.device = device
        self.model = GPT(layers, width, heads, args.seq).to(device)
        self.forward = self.model
        if world.size > 1:
            self.forward = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.gen = torch.Generator(device=device).manual_seed(1 + world.rank)
        self.batch, self.seq = args.batch, args.seq
        self.params = sum(p.numel() for p in self.model.parameters())

    def step(self):
        x = torch.randint(0, VOCAB, (self.batch, self.seq), device=self.device,
                          generator=self.gen)
        with torch.autocast(self.device.type, dtype=torch.bfloat16,
                            enabled=self.device.type == "cuda"):
            logits = self.forward(x[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB).float(),
                                                     x[:, 1:].reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def state(self):
        return {"model": self.model.state_dict(), "optim": self.opt.state_dict()}

    def run(self, steps, every=0, checkpoint=None):
        """Seconds for `steps` steps, calling checkpoint() after every `every`-th."""
        sync(self.device)
        t = time.perf_counter()
        for i in range(1, steps + 1):
            self.step()
            if every and i % every == 0:
                checkpoint()
        sync(self.device)
        return time.perf_counter() - t


class Mode:
    """One way of checkpointing: save() blocks the loop for as long as the mode needs, and
    finish() waits until the last checkpoint is durable; restore() loads it into the model;
    alone() times one checkpoint from an idle GPU until durable."""

    def __init__(self, name, trainer, dirs, world):
        self.name, self.t, self.dirs, self.world = name, trainer, dirs, world
        self.saves, self.pending, self.n = [], None, 0
        self.pool = self.ck = None
        self.pool_name = f"ckpt-{world.rank}.pool"
        if name in PER_RANK:
            size = (2 * state_bytes(trainer.state()) + (256 << 20)) // 4096 * 4096
            # the checkpointer keeps two copies of each chunk, a named object each
            self.pool = gpmkit.Pool.create(self.pool_name, size, "gpmkit.torch-bench",
                                           pm_dir=dirs["shm"], snapshot_dir=dirs["disk"],
                                           directory_capacity=2 * 4096 + 8)
            self.ck = gpmkit.Checkpointer.create(self.pool, "train", max_chunks=4096)

    def path(self, n):
        where = self.dirs["shm"] if self.name in ("torch-save-shm", "gpmkit-dcp") else \
            self.dirs["disk"]
        return os.path.join(where, f"{self.name}-{n}")

    def bytes_written(self, nbytes):
        """The bytes one checkpoint of every rank writes (a state of `nbytes` per rank)."""
        return nbytes * self.world.size if self.name in PER_RANK else nbytes

    def save(self):
        state = self.t.state()
        t = time.perf_counter()
        self._wait()  # one checkpoint in flight at a time
        self._checkpoint(state)
        self.saves.append(time.perf_counter() - t)
        self._remove(self.n - 2)  # the last two stay: the newest may still be in flight

    def alone(self):
        """Seconds of one checkpoint from an idle GPU (every rank's) until durable, and for
        gpmkit's modes the checkpointer's own part of it (from its checkpoint call on)."""
        state = self.t.state()
        self._wait()
        sync(self.t.device)
        self.world.barrier()
        t = time.perf_counter()
        result = self._checkpoint(state)
        waited = self._wait()
        seconds = time.perf_counter() - t
        self._remove(self.n - 2)
        result = waited if waited is not None else result
        return seconds, (result["seconds"] if isinstance(result, dict) else None)

    def _checkpoint(self, state):
        """Starts checkpoint n + 1 of `state`: what gpmkit.torch.save returns, else None."""
        self.n += 1
        result = None
        if self.name.startswith("torch-save"):
            if self.world.rank == 0:
                with open(self.path(self.n), "wb") as f:
                    torch.save(state, f)
                    f.flush()
                    os.fsync(f.fileno())
            self.world.barrier()
        elif self.name == "dcp":
            dcp.save(state, storage_writer=dcp.FileSystemWriter(self.path(self.n)),
                     process_group=self.world.pg)
        elif self.name == "dcp-async":
            self.pending = dcp.async_save(state,
                                          storage_writer=dcp.FileSystemWriter(self.path(self.n)),
                                          process_group=self.world.pg)
        elif self.name == "gpmkit":
            result = gtorch.save(self.ck, state)
        elif self.name == "gpmkit-async":
            self.pending = result = gtorch.save(self.ck, state, wait=False)
        elif self.name == "gpmkit-dcp":
            dcp.save(state, storage_writer=PoolWriter(self.path(self.n),
                                                      snapshot_dir=self.dirs["disk"]),
                     process_group=self.world.pg)
        return result

    def _wait(self):
        """Waits for the checkpoint in flight: what gpmkit's wait() returns, else None."""
        pending, self.pending = self.pending, None
        if pending is None:
            return None
        if hasattr(pending, "wait"):
            return pending.wait()  # gpmkit.PendingCheckpoint
        pending.result()  # DCP's future
        return None

    def _remove(self, n):
        """Deletes checkpoint n's files (the checkpointer's pool keeps only its last two): rank 0
        does, once every rank's part of checkpoint n is complete (n is two behind)."""
        if n < 1 or self.ck is not None or self.world.rank != 0:
            return
        p = self.path(n)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)

    def finish(self):
        """Seconds until the last checkpoint is durable."""
        t = time.perf_counter()
        self._wait()
        return time.perf_counter() - t

    def restore(self):
        state = self.t.state()
        sync(self.t.device)
        self.world.barrier()
        t = time.perf_counter()
        if self.name.startswith("torch-save"):  # every rank reads rank 0's file
            loaded = torch.load(self.path(self.n), map_location=self.t.device, weights_only=True)
            self.t.model.load_state_dict(loaded["model"])
            self.t.opt.load_state_dict(loaded["optim"])
        elif self.name in ("dcp", "dcp-async"):
            dcp.load(state, storage_reader=dcp.FileSystemReader(self.path(self.n)),
                     process_group=self.world.pg)
        elif self.name == "gpmkit-dcp":
            dcp.load(state, storage_reader=PoolReader(self.path(self.n)),
                     process_group=self.world.pg)
        else:
            gtorch.load(self.ck, state)
        sync(self.t.device)
        return time.perf_counter() - t

    def close(self):
        if self.ck is not None:
            self.ck.close()
            self.pool.close()
            gpmkit.Pool.remove(self.pool_name, pm_dir=self.dirs["shm"],
                               snapshot_dir=self.dirs["disk"], with_snapshot=True)
        self.world.barrier()  # every rank is done with the files
        for n in (self.n - 1, self.n):
            self._remove(n)


def machine(device, world, dist_backend):
    m = {"hostname": platform.node(), "cpu": platform.processor() or platform.machine(),
         "cores": os.cpu_count(), "gpu": "none (host emulator)", "compute_capability": "-",
         "torch": torch.__version__}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        m.update(gpu=p.name, compute_capability=f"{p.major}.{p.minor}",
                 multiprocessors=p.multi_processor_count, cuda_runtime=torch.version.cuda,
                 gpus=torch.cuda.device_count())
    if world.size > 1:
        m.update(ranks=world.size, dist_backend=dist_backend)
    return m


def source_commit():
    """The commit measured, as gpmbench's records name it (docs/bench.md, `commit`):
    $GPMKIT_COMMIT (prepare.sh records it for the lent GPU machines, which get the tree without
    .git), else the checkout's (-dirty with uncommitted changes to tracked files), else unknown."""
    if os.environ.get("GPMKIT_COMMIT"):
        return os.environ["GPMKIT_COMMIT"]
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=here).returncode
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def record(args, trainer, mode, m, step_s, stall, durable, restore, alone, nbytes, ceilings,
           extra):
    """A gpmbench-schema record: its times are the save calls' (the time a checkpoint blocks the
    caller; per checkpoint, the slowest rank's), its throughput the bytes one checkpoint writes
    (all ranks') over the median save; the training time lost per checkpoint, the checkpoints
    timed alone and the rest are metrics."""
    saves = m.saves
    times = sorted(saves)
    median = statistics.median(times)
    q = statistics.quantiles(times, n=4) if len(times) > 1 else [median] * 3
    written = m.bytes_written(nbytes)
    rate = written / median / 1e9 if median > 0 else None
    metrics = {"stall_s": statistics.median(stall), "stall_min_s": min(stall),
               "stall_max_s": max(stall), "durable_s": durable, "restore_s": restore,
               "step_s": step_s, **extra}
    if alone:
        seconds = statistics.median(t for t, _ in alone)
        metrics.update(checkpoint_s=seconds, checkpoint_GBps=written / seconds / 1e9)
        engine = [e for _, e in alone if e is not None]
        if engine:
            metrics["engine_s"] = statistics.median(engine)
    where = machine(trainer.device, m.world, args.backend)
    if args.ranks > 1 and args.isolate_gpus:
        where["isolated_gpus"] = "each rank sees only its GPU"
    return {
        "schema": "gpmkit.bench/1", "workload": workload_name(args.model, args.ranks),
        "mode": mode, "backend": gpmkit.backend(), "commit": source_commit(), "machine": where,
        "sizes": {"parameters": trainer.params, "state_bytes": nbytes, "batch": args.batch,
                  "sequence": args.seq, "steps": args.steps, "every": args.every,
                  "ranks": args.ranks},
        "repeats": len(saves), "warmup": 0, "times_s": saves, "median_s": median,
        "spread": {"min_s": times[0], "p25_s": q[0], "p75_s": q[2], "max_s": times[-1]},
        "throughput": {"value": rate, "unit": "GB/s"},
        "bytes_persisted": written,
        "ceilings": {k: v for k, v in ceilings.items() if v is not None},
        "ratio_to_ceiling": {k: rate / v for k, v in ceilings.items() if v and rate},
        "metrics": metrics,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z"),
    }


def run_mode(args, name, trainer, dirs, world):
    """Measures one mode; the record (on rank 0, else None)."""
    # The mode's baseline is measured next to it, so that drift (clocks, page cache) falls on
    # both sides of the difference.
    base = trainer.run(args.steps)
    m = Mode(name, trainer, dirs, world)
    try:
        # The loop's time lost over its checkpoints (a checkpoint still in flight at its end is
        # waited for by finish(), outside the loop, as training would go on), three times for a
        # spread.
        count = args.steps // args.every
        stall = []
        for i in range(3):
            b = base if i == 0 else trainer.run(args.steps)
            w = trainer.run(args.steps, args.every, m.save)
            durable = m.finish()
            stall.append((world.slowest(w) - world.slowest(b)) / count)
        alone = [m.alone() for _ in range(args.alone)]
        restore = world.slowest(m.restore())
    finally:
        m.close()
    # Per checkpoint and per alone checkpoint, the slowest rank's time.
    m.saves = [max(ts) for ts in zip(*world.gather(m.saves))]
    alone = [(max(t for t, _ in a), None if a[0][1] is None else max(e for _, e in a))
             for a in zip(*world.gather(alone))]
    durable = world.slowest(durable)
    return m, world.slowest(base) / args.steps, stall, durable, restore, alone


def run(rank, args, dirs, store):
    """One rank of the benchmark (the only one without --ranks)."""
    dev = torch.device("cuda" if gpmkit.backend() == "cuda" else "cpu")
    if args.ranks > 1:
        if dev.type == "cuda" and args.isolate_gpus:
            # Before anything touches CUDA in this new process: its GPU is its only one.
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            visible = visible.split(",") if visible else [str(i) for i in range(args.ranks)]
            os.environ["CUDA_VISIBLE_DEVICES"] = visible[rank]
            dev = torch.device("cuda", 0)
        elif dev.type == "cuda":
            dev = torch.device("cuda", rank)
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group(args.backend, init_method=f"file://{store}", rank=rank,
                                world_size=args.ranks)
    world = World(rank, args.ranks)
    try:
        trainer = Trainer(args, dev, world)
        trainer.run(args.warmup)  # the optimizer's state exists from here
        nbytes = state_bytes(trainer.state())
        probe = min(nbytes, 1 << 30)
        d2h, d2h_per_gpu = d2h_ceiling(dev, probe, world)
        ceilings = {"d2h_GBps": d2h, "disk_GBps": disk_bandwidth(dirs["disk"], probe, world)}
        extra = {"d2h_per_gpu_GBps": d2h_per_gpu} if args.ranks > 1 and d2h_per_gpu else {}
        out = os.path.join(args.out, f"{workload_name(args.model, args.ranks)}.jsonl")
        if rank == 0:
            print(f"{args.model} on {args.ranks} rank(s): {trainer.params / 1e6:.1f}M parameters, "
                  f"state {nbytes / 1e9:.2f} GB per rank, ceilings {ceilings}", flush=True)
        start = time.perf_counter()
        for name in args.modes.split(","):
            # Rank 0's clock decides for every rank, so that all start the same modes.
            spent = world.gather(time.perf_counter() - start)[0]
            if args.budget and spent > args.budget:
                if rank == 0:
                    print(f"{name}: not run (budget of {args.budget} s spent)", flush=True)
                continue
            m, step_s, stall, durable, restore, alone = run_mode(args, name, trainer, dirs,
                                                                 world)
            if rank != 0:
                continue
            r = record(args, trainer, name, m, step_s, stall, durable, restore, alone, nbytes,
                       ceilings, extra)
            with open(out, "a") as f:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
            x = r["metrics"]
            alone_text = (f", alone {x['checkpoint_s']:.3f} s ({x['checkpoint_GBps']:.3g} GB/s)"
                          if "checkpoint_s" in x else "")
            print(f"{name}: stall {x['stall_s']:.3f} s per checkpoint, save "
                  f"{r['median_s']:.3f} s{alone_text}, restore {restore:.3f} s", flush=True)
    finally:
        if args.ranks > 1:
            dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="124m")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--steps", type=int, default=40, help="training steps per mode")
    ap.add_argument("--every", type=int, default=8, help="steps between checkpoints")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before the baseline")
    ap.add_argument("--alone", type=int, default=3,
                    help="checkpoints per mode timed alone, from an idle GPU until durable")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--ranks", type=int, default=1,
                    help="processes, one GPU each (DDP); 1: no process group")
    ap.add_argument("--backend", default="auto",
                    help="torch.distributed backend of the training: nccl on GPUs, gloo on the "
                    "CPU (auto)")
    ap.add_argument("--isolate-gpus", action="store_true",
                    help="each rank sees only its own GPU (CUDA_VISIBLE_DEVICES): gpmkit then "
                    "runs on device 0 of every process (NCCL may go through host memory)")
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds after which no further mode starts (0: no limit)")
    ap.add_argument("--shm", default="/dev/shm", help="where pools and /dev/shm files go")
    ap.add_argument("--disk", default="/var/tmp", help="a directory on disk")
    ap.add_argument("--out", required=True, help="results directory (appends a .jsonl)")
    args = ap.parse_args()
    unknown = [m for m in args.modes.split(",") if m not in MODES]
    if unknown:
        ap.error(f"unknown modes {unknown}; known: {MODES}")
    if args.ranks < 1:
        ap.error("--ranks must be at least 1")
    gpu = gpmkit.backend() == "cuda"
    if args.backend == "auto":
        args.backend = "nccl" if gpu else "gloo"
    if gpu and args.ranks > torch.cuda.device_count():
        ap.error(f"--ranks {args.ranks}: this machine has {torch.cuda.device_count()} GPU(s)")
    os.makedirs(args.out, exist_ok=True)
    dirs = {"shm": tempfile.mkdtemp(prefix="gpmkit-torch-", dir=args.shm),
            "disk": tempfile.mkdtemp(prefix="gpmkit-torch-", dir=args.disk)}
    try:
        if args.ranks == 1:
            run(0, args, dirs, None)
        else:
            store = os.path.join(dirs["disk"], "process-group")
            torch.multiprocessing.spawn(run, args=(args, dirs, store), nprocs=args.ranks)
    finally:
        shutil.rmtree(dirs["shm"], ignore_errors=True)
        shutil.rmtree(dirs["disk"], ignore_errors=True)


if __name__ == "__main__":
    main()
