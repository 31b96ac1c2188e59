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
time until the checkpoint is durable, the time to load it back into the model (`restore_s`), the
bytes of the state, and its rate against the D2H copy ceiling and the disk's write bandwidth,
both measured in the same run. One gpmbench-schema record per mode (workload
`torch_ckpt_<model>`), appended to DIR/torch_ckpt_<model>.jsonl; `gpmbench report DIR` reads it.

    python bench/torch/torch_ckpt.py --model 124m --out bench/results/h100/torch
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import tempfile
import time

import torch
import torch.distributed.checkpoint as dcp

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


def d2h_ceiling(device, nbytes):
    """GB/s of one device-to-pinned-host copy of `nbytes` (median of 3)."""
    if device.type != "cuda":
        return None
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    times = []
    for _ in range(3):
        sync(device)
        t = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        sync(device)
        times.append(time.perf_counter() - t)
    return nbytes / statistics.median(times) / 1e9


def disk_bandwidth(directory, nbytes):
    """GB/s of writing `nbytes` to a file in `directory` and fsyncing it."""
    buf = os.urandom(1 << 20)
    path = os.path.join(directory, "gpmkit-torch-bench-disk-probe")
    t = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(nbytes >> 20):
            f.write(buf)
        f.flush()
        os.fsync(f.fileno())
    seconds = time.perf_counter() - t
    os.remove(path)
    return nbytes / seconds / 1e9


class Trainer:
    def __init__(self, args, device):
        layers, width, heads = MODELS[args.model]
        torch.manual_seed(0)
        self.device = device
        self.model = GPT(layers, width, heads, args.seq).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.gen = torch.Generator(device=device).manual_seed(1)
        self.batch, self.seq = args.batch, args.seq
        self.params = sum(p.numel() for p in self.model.parameters())

    def step(self):
        x = torch.randint(0, VOCAB, (self.batch, self.seq), device=self.device,
                          generator=self.gen)
        with torch.autocast(self.device.type, dtype=torch.bfloat16,
                            enabled=self.device.type == "cuda"):
            logits = self.model(x[:, :-1])
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
    finish() waits until the last checkpoint is durable; restore() loads it into the model."""

    def __init__(self, name, trainer, dirs):
        self.name, self.t, self.dirs = name, trainer, dirs
        self.saves, self.pending, self.n = [], None, 0
        self.pool = self.ck = None
        if name.startswith("gpmkit") and name != "gpmkit-dcp":
            size = (2 * state_bytes(trainer.state()) + (256 << 20)) // 4096 * 4096
            # the checkpointer keeps two copies of each chunk, a named object each
            self.pool = gpmkit.Pool.create("ckpt.pool", size, "gpmkit.torch-bench",
                                           pm_dir=dirs["shm"], snapshot_dir=dirs["disk"],
                                           directory_capacity=2 * 4096 + 8)
            self.ck = gpmkit.Checkpointer.create(self.pool, "train", max_chunks=4096)

    def path(self, n):
        where = self.dirs["shm"] if self.name in ("torch-save-shm", "gpmkit-dcp") else \
            self.dirs["disk"]
        return os.path.join(where, f"{self.name}-{n}")

    def save(self):
        self.n += 1
        state = self.t.state()
        t = time.perf_counter()
        self._wait()  # one checkpoint in flight at a time
        if self.name.startswith("torch-save"):
            with open(self.path(self.n), "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
        elif self.name == "dcp":
            dcp.save(state, storage_writer=dcp.FileSystemWriter(self.path(self.n)))
        elif self.name == "dcp-async":
            self.pending = dcp.async_save(state,
                                          storage_writer=dcp.FileSystemWriter(self.path(self.n)))
        elif self.name == "gpmkit":
            gtorch.save(self.ck, state)
        elif self.name == "gpmkit-async":
            self.pending = gtorch.save(self.ck, state, wait=False)
        elif self.name == "gpmkit-dcp":
            dcp.save(state, storage_writer=PoolWriter(self.path(self.n),
                                                      snapshot_dir=self.dirs["disk"]))
        self.saves.append(time.perf_counter() - t)
        self._remove(self.n - 2)  # the last two stay: the newest may still be in flight

    def _wait(self):
        if self.pending is not None:
            if hasattr(self.pending, "wait"):
                self.pending.wait()  # gpmkit.PendingCheckpoint
            else:
                self.pending.result()  # DCP's future
            self.pending = None

    def _remove(self, n):
        """Deletes checkpoint n's files (the checkpointer's pool keeps only its last two)."""
        if n < 1 or self.ck is not None:
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
        t = time.perf_counter()
        if self.name.startswith("torch-save"):
            loaded = torch.load(self.path(self.n), map_location=self.t.device, weights_only=True)
            self.t.model.load_state_dict(loaded["model"])
            self.t.opt.load_state_dict(loaded["optim"])
        elif self.name in ("dcp", "dcp-async"):
            dcp.load(state, storage_reader=dcp.FileSystemReader(self.path(self.n)))
        elif self.name == "gpmkit-dcp":
            dcp.load(state, storage_reader=PoolReader(self.path(self.n)))
        else:
            gtorch.load(self.ck, state)
        sync(self.t.device)
        return time.perf_counter() - t

    def close(self):
        if self.ck is not None:
            self.ck.close()
            self.pool.close()
            gpmkit.Pool.remove("ckpt.pool", pm_dir=self.dirs["shm"],
                               snapshot_dir=self.dirs["disk"], with_snapshot=True)
        for n in (self.n - 1, self.n):
            self._remove(n)


def machine(device):
    m = {"hostname": platform.node(), "cpu": platform.processor() or platform.machine(),
         "cores": os.cpu_count(), "gpu": "none (host emulator)", "compute_capability": "-",
         "torch": torch.__version__}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        m.update(gpu=p.name, compute_capability=f"{p.major}.{p.minor}",
                 multiprocessors=p.multi_processor_count, cuda_runtime=torch.version.cuda)
    return m


def record(args, trainer, mode, step_s, stall, saves, durable, restore, nbytes, ceilings, dev):
    """A gpmbench-schema record: its times are the save calls' (the time a checkpoint blocks the
    caller), its throughput the state's bytes over the median save; the training time lost per
    checkpoint and the rest are metrics."""
    times = sorted(saves)
    median = statistics.median(times)
    q = statistics.quantiles(times, n=4) if len(times) > 1 else [median] * 3
    rate = nbytes / median / 1e9 if median > 0 else None
    return {
        "schema": "gpmkit.bench/1", "workload": f"torch_ckpt_{args.model}", "mode": mode,
        "backend": gpmkit.backend(), "machine": machine(dev),
        "sizes": {"parameters": trainer.params, "state_bytes": nbytes, "batch": args.batch,
                  "sequence": args.seq, "steps": args.steps, "every": args.every},
        "repeats": len(saves), "warmup": 0, "times_s": saves, "median_s": median,
        "spread": {"min_s": times[0], "p25_s": q[0], "p75_s": q[2], "max_s": times[-1]},
        "throughput": {"value": rate, "unit": "GB/s"},
        "bytes_persisted": nbytes,
        "ceilings": {k: v for k, v in ceilings.items() if v is not None},
        "ratio_to_ceiling": {k: rate / v for k, v in ceilings.items() if v and rate},
        "metrics": {"stall_s": statistics.median(stall), "stall_min_s": min(stall),
                    "stall_max_s": max(stall), "durable_s": durable, "restore_s": restore,
                    "step_s": step_s},
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="124m")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--steps", type=int, default=40, help="training steps per mode")
    ap.add_argument("--every", type=int, default=8, help="steps between checkpoints")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before the baseline")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--shm", default="/dev/shm", help="where pools and /dev/shm files go")
    ap.add_argument("--disk", default="/var/tmp", help="a directory on disk")
    ap.add_argument("--out", required=True, help="results directory (appends a .jsonl)")
    args = ap.parse_args()
    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown modes {unknown}; known: {MODES}")
    dev = torch.device("cuda" if gpmkit.backend() == "cuda" else "cpu")
    os.makedirs(args.out, exist_ok=True)
    dirs = {"shm": tempfile.mkdtemp(prefix="gpmkit-torch-", dir=args.shm),
            "disk": tempfile.mkdtemp(prefix="gpmkit-torch-", dir=args.disk)}
    trainer = Trainer(args, dev)
    trainer.run(args.warmup)  # the optimizer's state exists from here
    nbytes = state_bytes(trainer.state())
    ceilings = {"d2h_GBps": d2h_ceiling(dev, min(nbytes, 1 << 30)),
                "disk_GBps": disk_bandwidth(dirs["disk"], min(nbytes, 1 << 30))}
    print(f"{args.model}: {trainer.params / 1e6:.1f}M parameters, state {nbytes / 1e9:.2f} GB, "
          f"ceilings {ceilings}", flush=True)
    out = os.path.join(args.out, f"torch_ckpt_{args.model}.jsonl")
    try:
        for name in modes:
            # Each mode's baseline is measured next to it, so that drift (clocks, page cache)
            # falls on both sides of the difference.
            base = trainer.run(args.steps)
            m = Mode(name, trainer, dirs)
            try:
                # The loop's time lost over its checkpoints (a checkpoint still in flight at
                # its end is waited for by finish(), outside the loop, as training would go
                # on), three times for a spread.
                count = args.steps // args.every
                stall = []
                for i in range(3):
                    b = base if i == 0 else trainer.run(args.steps)
                    w = trainer.run(args.steps, args.every, m.save)
                    durable = m.finish()
                    stall.append((w - b) / count)
                restore = m.restore()
            finally:
                m.close()
            r = record(args, trainer, name, base / args.steps, stall, m.saves, durable, restore,
                       nbytes, ceilings, dev)
            with open(out, "a") as f:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
            print(f"{name}: stall {r['metrics']['stall_s']:.3f} s per checkpoint, save "
                  f"{r['median_s']:.3f} s, restore {restore:.3f} s", flush=True)
    finally:
        shutil.rmtree(dirs["shm"], ignore_errors=True)
        shutil.rmtree(dirs["disk"], ignore_errors=True)


if __name__ == "__main__":
    main()
