"""Tests of gpmkit.dcp (python/gpmkit/dcp.py), the torch.distributed.checkpoint storage backend:
dcp.save / dcp.async_save / dcp.load of a model's and an optimizer's state through pools, two
ranks over gloo writing their shards into pools of their own (a DTensor's rows too, loaded back
resharded by columns), a save that fails before its commit
leaving the previous checkpoint the latest, bad checkpoints refused with errors naming them,
SIGKILLs during a loop of saves after which the latest checkpoint loads whole, and SIGKILLs of one
rank of a DDP job of two (gloo on the CPU; NCCL on two GPUs where there are two) after which every
rank restores the same completed checkpoint and resumes to the uninterrupted run's state."""
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import gpmkit

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if gpmkit.backend() == "cuda" and not torch.cuda.is_available():
    pytest.skip("the cuda build needs a GPU that PyTorch sees", allow_module_level=True)
import torch.distributed.checkpoint as dcp  # noqa: E402

from gpmkit.dcp import METADATA, PoolReader, PoolWriter, latest  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from crash_child import kill_after_acks  # noqa: E402

DEVICE = "cuda" if gpmkit.backend() == "cuda" else "cpu"


def make(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(32, 8, device=DEVICE)
    model(x).square().mean().backward()
    opt.step()
    return model, opt


def state_of(model, opt, step):
    return {"model": model.state_dict(), "optim": opt.state_dict(), "step": step,
            "note": f"after step {step}"}


def assert_same(a, b):
    for (ka, va), (kb, vb) in zip(a.items(), b.items()):
        assert ka == kb
        assert torch.equal(va, vb), ka


def error_of(call):
    """The text of what call() raises. DCP wraps a storage backend's exceptions in its own
    (CheckpointException, a BaseException whose text carries each rank's exception and
    traceback; how it holds them differs between PyTorch versions), so only the text is
    compared through DCP; error codes are checked on the backend's own calls."""
    with pytest.raises(BaseException) as e:
        call()
    return str(e.value)


def gpmkit_error(call, code, text):
    with pytest.raises(gpmkit.Error) as e:
        call()
    assert e.value.code == code and text in str(e.value), f"{e.value.code}: {e.value}"


def metadata_error(path, code, text):
    """Reading the checkpoint at `path` fails with gpmkit.Error `code` saying `text`, and so
    does dcp.load (PyTorch 2.15 passes the message on; 2.11 says only "metadata is None")."""
    gpmkit_error(lambda: PoolReader(path).read_metadata(), code, text)
    error_of(lambda: dcp.load({"x": torch.zeros(1)}, storage_reader=PoolReader(path)))


@pytest.fixture
def root(dirs):
    return os.path.join(dirs["pm_dir"], "ckpt")


def test_save_and_load_a_model_and_its_optimizer(root, dirs):
    model, opt = make(1)
    dcp.save(state_of(model, opt, 7),
             storage_writer=PoolWriter(f"{root}/step-7", snapshot_dir=dirs["snapshot_dir"]))
    other, other_opt = make(2)
    target = state_of(other, other_opt, 0)
    dcp.load(target, storage_reader=PoolReader(f"{root}/step-7",
                                               snapshot_dir=dirs["snapshot_dir"]))
    assert_same(other.state_dict(), model.state_dict())
    assert target["step"] == 7 and target["note"] == "after step 7"
    saved = opt.state_dict()["state"]
    for k, v in target["optim"]["state"].items():
        assert torch.equal(v["exp_avg"], saved[k]["exp_avg"])
    assert sorted(os.listdir(f"{root}/step-7")) == [METADATA, "rank-0.pool"]


def test_async_save_then_load(root, dirs):
    dist.init_process_group("gloo", init_method=f"file://{dirs['snapshot_dir']}/pg",
                            rank=0, world_size=1)
    try:
        model, opt = make(3)
        f = dcp.async_save(state_of(model, opt, 1),
                           storage_writer=PoolWriter(f"{root}/a", snapshot_dir=dirs["snapshot_dir"]))
        f.result()
        other, other_opt = make(4)
        dcp.load(state_of(other, other_opt, 0), storage_reader=PoolReader(f"{root}/a"))
        assert_same(other.state_dict(), model.state_dict())
    finally:
        dist.destroy_process_group()


class _DiesBeforeCommit(PoolWriter):
    def finish(self, metadata, results):
        raise RuntimeError("killed before the commit")


def test_a_save_that_dies_before_its_commit_is_not_a_checkpoint(root, dirs):
    model, opt = make(5)
    dcp.save(state_of(model, opt, 1), storage_writer=PoolWriter(f"{root}/step-1"))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1)
    assert "before the commit" in error_of(
        lambda: dcp.save(state_of(model, opt, 2),
                         storage_writer=_DiesBeforeCommit(f"{root}/step-2")))
    assert os.path.exists(f"{root}/step-2/rank-0.pool")  # written, never committed
    assert latest(root) == f"{root}/step-1"
    metadata_error(f"{root}/step-2", "not_found", "no committed gpmkit.dcp checkpoint")


def test_bad_checkpoints_are_refused_with_their_names(root, dirs):
    model, opt = make(6)
    state = state_of(model, opt, 1)
    dcp.save(state, storage_writer=PoolWriter(f"{root}/good"))
    gpmkit_error(lambda: PoolWriter(f"{root}/good").set_up_storage_writer(True),
                 "already_exists", "already holds a committed checkpoint")
    assert "already holds a committed checkpoint" in error_of(
        lambda: dcp.save(state, storage_writer=PoolWriter(f"{root}/good")))
    dcp.save(state, storage_writer=PoolWriter(f"{root}/good", overwrite=True))

    # A damaged metadata file.
    os.makedirs(f"{root}/bad")
    with open(f"{root}/good/{METADATA}", "rb") as f:
        blob = bytearray(f.read())
    blob[len(blob) // 2] ^= 0x40
    with open(f"{root}/bad/{METADATA}", "wb") as f:
        f.write(blob)
    metadata_error(f"{root}/bad", "corrupt", "damaged")
    with open(f"{root}/bad/{METADATA}", "wb") as f:
        f.write(b"not ours at all, just some text")
    metadata_error(f"{root}/bad", "corrupt", "not a gpmkit.dcp metadata file")

    # A metadata file with a valid header and checksum whose pickle names a function: refused,
    # and the function never runs (a plain pickle.loads would have made the directory).
    import pickle
    import zlib
    from gpmkit.dcp import _HEADER, _MAGIC
    trace = f"{root}/ran"

    class Crafted:
        def __reduce__(self):
            return (os.mkdir, (trace,))

    body = pickle.dumps(Crafted())
    with open(f"{root}/bad/{METADATA}", "wb") as f:
        f.write(_HEADER.pack(_MAGIC, len(body), zlib.crc32(body)) + body)
    metadata_error(f"{root}/bad", "corrupt", "mkdir, which no gpmkit.dcp metadata holds")
    assert not os.path.exists(trace)

    # Special files and a file where a directory belongs: errors naming them, never a hang on a
    # FIFO's open.
    os.remove(f"{root}/bad/{METADATA}")
    os.mkfifo(f"{root}/bad/{METADATA}")
    metadata_error(f"{root}/bad", "corrupt", "not a regular file")
    gpmkit_error(lambda: PoolWriter(f"{root}/bad", overwrite=True).set_up_storage_writer(True),
                 "corrupt", "move it away")
    os.remove(f"{root}/bad/{METADATA}")
    os.mkdir(f"{root}/bad/{METADATA}")
    metadata_error(f"{root}/bad", "corrupt", "not a regular file")
    with open(f"{root}/plain-file", "wb") as f:
        f.write(b"x")
    metadata_error(f"{root}/plain-file", "not_found", "is not a directory")
    gpmkit_error(lambda: PoolWriter(f"{root}/plain-file").set_up_storage_writer(True),
                 "invalid_argument", "is not a directory")
    gpmkit_error(lambda: latest(f"{root}/plain-file"), "invalid_argument", "is not a directory")
    assert latest(root) == f"{root}/good"

    # The metadata of one checkpoint with the pool of a smaller one.
    small = {"model": torch.nn.Linear(2, 2).to(DEVICE).state_dict()}
    dcp.save(small, storage_writer=PoolWriter(f"{root}/small"))
    os.remove(f"{root}/good/rank-0.pool")
    os.rename(f"{root}/small/rank-0.pool", f"{root}/good/rank-0.pool")
    assert f"{root}/good: item " in error_of(
        lambda: dcp.load(state, storage_reader=PoolReader(f"{root}/good")))

    # A state dict whose tensor has another shape than the saved one: DCP's planner refuses it
    # before anything is read.
    dcp.save({"w": torch.zeros(4, device=DEVICE)}, storage_writer=PoolWriter(f"{root}/w"))
    assert "w" in error_of(lambda: dcp.load({"w": torch.zeros(5, device=DEVICE)},
                                            storage_reader=PoolReader(f"{root}/w")))


RANK = textwrap.dedent("""
    import os, sys, torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
    from gpmkit.dcp import PoolReader, PoolWriter
    rank, store, root, device = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    mine = torch.arange(1000, dtype=torch.float32, device=device) + 1000 * rank
    shared = torch.linspace(0, 1, 257, device=device)
    dcp.save({f"rank{rank}": mine, "shared": shared}, storage_writer=PoolWriter(root))
    dist.barrier()
    back = {f"rank{rank}": torch.zeros_like(mine), "shared": torch.zeros_like(shared)}
    dcp.load(back, storage_reader=PoolReader(root))
    assert torch.equal(back[f"rank{rank}"], mine) and torch.equal(back["shared"], shared)
    if device == "cpu":
        # Sharded state: a DTensor split by rows over the two ranks, each rank writing its rows,
        # loaded back into the same layout and into one split by columns (DCP reshards on load).
        try:
            from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh
        except ImportError:  # PyTorch before 2.5
            from torch.distributed._tensor import Shard, distribute_tensor, init_device_mesh
        mesh = init_device_mesh("cpu", (2,))
        full = torch.arange(64 * 8, dtype=torch.float32).reshape(64, 8)
        rows = distribute_tensor(full, mesh, [Shard(0)])
        assert rows.to_local().shape == (32, 8)
        dcp.save({"w": rows}, storage_writer=PoolWriter(root + "-sharded"))
        for dim in (0, 1):
            back = {"w": distribute_tensor(torch.zeros_like(full), mesh, [Shard(dim)])}
            dcp.load(back, storage_reader=PoolReader(root + "-sharded"))
            assert torch.equal(back["w"].full_tensor(), full), dim
    dist.destroy_process_group()
    print("ok", rank, flush=True)
    # Past this point only interpreter teardown is left, where PyTorch's distributed threads
    # have aborted a rank now and then ("terminate called without an active exception", exit
    # status -6, after "ok" was printed): the test is about what was written, so the rank ends
    # here.
    os._exit(0)
""")


def test_two_ranks_write_their_shards_into_pools_of_their_own(root, dirs):
    store = os.path.join(dirs["snapshot_dir"], "store")
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(r), store, f"{root}/two", DEVICE],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and f"ok {r}" in out, out
    names = sorted(os.listdir(f"{root}/two"))
    assert names == sorted([METADATA, "rank-0.pool", "rank-1.pool"]), names
    if DEVICE == "cpu":
        names = sorted(os.listdir(f"{root}/two-sharded"))
        assert names == sorted([METADATA, "rank-0.pool", "rank-1.pool"]), names


CHILD = textwrap.dedent("""
    import sys, torch, torch.distributed.checkpoint as dcp
    from gpmkit.dcp import PoolWriter
    root, device = sys.argv[1], sys.argv[2]
    w = torch.zeros(64, 64, device=device)
    for step in range(1, 1000):
        w.fill_(step)
        dcp.save({"w": w, "step": step}, storage_writer=PoolWriter(f"{root}/step-{step}"))
        print(step, flush=True)
""")


def test_sigkill_during_saves_leaves_the_latest_checkpoint_whole(root):
    rng = random.Random(11)
    for trial in range(3):
        trial_root = f"{root}/trial-{trial}"
        acked = kill_after_acks(CHILD, [trial_root, DEVICE], rng.randint(1, 6))
        path = latest(trial_root)
        assert path is not None, f"trial {trial}: nothing committed after {acked} acks"
        state = {"w": torch.zeros(64, 64, device=DEVICE), "step": 0}
        dcp.load(state, storage_reader=PoolReader(path))
        step = state["step"]
        assert path.endswith(f"step-{step}"), f"trial {trial}: {path} holds step {step}"
        assert torch.all(state["w"] == step), f"trial {trial}: torn"
        assert acked <= step <= acked + 1, f"trial {trial}: step {step}, acked {acked}"


TRAINING_RANK = os.path.join(os.path.dirname(__file__), "dcp_training_rank.py")


def _two_gpus():
    """Why a job of two ranks on two GPUs cannot run here, or None when it can."""
    if gpmkit.backend() != "cuda":
        return "the host build: its device is the CPU"
    if torch.cuda.device_count() < 2:
        return f"{torch.cuda.device_count()} GPU(s) that PyTorch sees, not 2"
    if not dist.is_nccl_available():
        return "PyTorch has no NCCL"
    return None


class _Job:
    """The ranks of one run of dcp_training_rank.py, their output read line by line."""

    def __init__(self, tmp, name, root, device, backend, steps, world=2):
        store = os.path.join(tmp, f"{name}.store")
        self.logs = [os.path.join(tmp, f"{name}-rank{r}.err") for r in range(world)]
        self.procs = []
        for r in range(world):
            with open(self.logs[r], "w") as err:
                self.procs.append(subprocess.Popen(
                    [sys.executable, TRAINING_RANK, str(r), str(world), store, root, device,
                     backend, str(steps)], stdout=subprocess.PIPE, stderr=err, text=True))

    def errors(self):
        return "\n".join(f"--- {log}\n{open(log).read()[-3000:]}" for log in self.logs)

    def finish(self, timeout=240):
        """Every rank's output lines, once all have exited with status 0."""
        outs = [p.communicate(timeout=timeout)[0].splitlines() for p in self.procs]
        assert all(p.returncode == 0 for p in self.procs), self.errors()
        return outs

    def kill_after_acks(self, acks, victim, delay):
        """Reads `acks` committed steps from rank 0, sleeps `delay` s, SIGKILLs rank `victim`
        and, as a job manager would, the other ranks (which may wait on the dead one forever);
        returns the last step rank 0 acknowledged."""
        acked = 0
        while acked < acks:
            line = self.procs[0].stdout.readline()
            assert line, f"rank 0 ended before {acks} acks\n{self.errors()}"
            if line.startswith("step "):
                acked = int(line.split()[1])
        time.sleep(delay)
        os.kill(self.procs[victim].pid, signal.SIGKILL)
        self.procs[victim].wait()
        time.sleep(0.5)  # the others may notice and fail on their own; then they are killed
        for p in self.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
        rest = [line for line in self.procs[0].stdout.read().splitlines()
                if line.startswith("step ")]
        for p in self.procs:
            p.wait()
        return int(rest[-1].split()[1]) if rest else acked


def _lines(out, what):
    return {int(w[1]): w[2] for w in (line.split() for line in out) if w[0] == what}


@pytest.mark.parametrize("device,backend", [
    pytest.param("cpu", "gloo", id="cpu-gloo"),
    pytest.param("cuda", "nccl", id="cuda-nccl", marks=pytest.mark.skipif(
        _two_gpus() is not None, reason=f"two ranks on two GPUs: {_two_gpus()}")),
])
def test_sigkill_of_one_rank_of_two_during_training(root, tmp_path, device, backend):
    """A job of two ranks trains by DDP and saves through gpmkit.dcp after every step; one rank
    is killed by SIGKILL at a random moment (the other then too). Every rank of the resumed job
    restores the same committed checkpoint, bit for bit the state the uninterrupted job had
    after that step, and resumes to the same final state."""
    steps = 16
    ref = _Job(str(tmp_path), "reference", "-", device, backend, steps).finish()
    states = _lines(ref[0], "state")
    final = [line for line in ref[0] if line.startswith("final ")]
    assert len(states) == steps and final, ref[0]
    assert ref[1][-1] == final[0], "the ranks' replicas differ"
    rng = random.Random(22)
    for trial, victim in enumerate((1, 0)):
        trial_root = f"{root}/job-{trial}"
        job = _Job(str(tmp_path), f"trial{trial}", trial_root, device, backend, steps)
        acked = job.kill_after_acks(rng.randint(2, 8), victim, rng.uniform(0, 0.05))
        path = latest(trial_root)
        assert path is not None, f"trial {trial}: nothing committed after {acked} acks"
        resumed = _Job(str(tmp_path), f"resume{trial}", trial_root, device, backend,
                       steps).finish()
        restored = [_lines(out, "restored") for out in resumed]
        assert len(restored[0]) == 1 and restored[0] == restored[1], \
            f"trial {trial}: the ranks restored {restored}"
        (step, got), = restored[0].items()
        assert path.endswith(f"step-{step}"), f"trial {trial}: {path} holds step {step}"
        assert acked <= step <= acked + 1, f"trial {trial}: step {step}, acked {acked}"
        assert got == states[step], f"trial {trial}: step {step} restored differs from the run"
        for r, out in enumerate(resumed):
            assert out[-1] == final[0], f"trial {trial}: rank {r} resumed to another state"
