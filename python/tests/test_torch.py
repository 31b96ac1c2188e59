"""Tests of gpmkit.torch (python/gpmkit/torch.py): a model's and an optimizer's state dicts saved
into a pool and loaded back in place, in this process and after a restart, unchanged tensors
skipped, chunks registered again only when their memory changed, bad templates refused without
touching a tensor, and SIGKILLs during a training loop that saves every step, after which the
loaded model equals one completed save; on a GPU, saves and loads ordered after the current
stream's work; on a machine with two GPUs, a process on the second. Run where PyTorch is
installed: on a GPU with CUDA tensors, on the emulator with CPU tensors."""
import os
import random
import subprocess
import sys
import textwrap

import pytest

import gpmkit

torch = pytest.importorskip("torch")
if gpmkit.backend() == "cuda" and not torch.cuda.is_available():
    pytest.skip("the cuda build needs a GPU that PyTorch sees", allow_module_level=True)
import gpmkit.torch as gtorch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from crash_child import kill_after_acks  # noqa: E402

LAYOUT = "gpmkit.python-test"
SIZE = 32 << 20
DEVICE = "cuda" if gpmkit.backend() == "cuda" else "cpu"



def make(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95))
    return model, opt


def train(model, opt, steps, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(32, 8, generator=g).to(DEVICE)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def params(model):
    return [p.detach().clone() for p in model.parameters()]


def test_model_and_optimizer_round_trip(dirs):
    model, opt = make(1)
    train(model, opt, 3)
    saved = params(model)
    saved_avg = [s["exp_avg"].clone() for s in opt.state_dict()["state"].values()]
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "train") as ck:
            r = gtorch.save(ck, {"model": model.state_dict(), "optim": opt.state_dict(),
                                 "step": 3, "note": "after warm-up"})
            assert r["seq"] == 1 and r["chunks"] >= 1 + 4 + 3 * 4
            train(model, opt, 2)  # moves everything away from the save
            assert any(not torch.equal(a, b) for a, b in zip(params(model), saved))
            state = gtorch.load(ck, {"model": model.state_dict(), "optim": opt.state_dict()})
            assert all(torch.equal(a, b) for a, b in zip(params(model), saved))
            assert state["step"] == 3 and state["note"] == "after warm-up"
            assert state["optim"]["param_groups"][0]["betas"] == (0.9, 0.95)
            opt.load_state_dict(state["optim"])
            got = [s["exp_avg"] for s in opt.state_dict()["state"].values()]
            assert all(torch.equal(a, b) for a, b in zip(got, saved_avg))
    # After a restart: a model built with another seed, loaded from the reopened pool.
    with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.open(pool, "train") as ck:
            fresh, fresh_opt = make(2)
            train(fresh, fresh_opt, 1)  # the optimizer has its state tensors once it stepped
            gtorch.load(ck, {"model": fresh.state_dict(), "optim": fresh_opt.state_dict()})
            assert all(torch.equal(a, b) for a, b in zip(params(fresh), saved))


def test_unchanged_tensors_are_skipped(dirs):
    model, _ = make(3)
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "m") as ck:
            first = gtorch.save(ck, model.state_dict())
            assert first["copied"] == first["chunks"]
            redundant = sum(gtorch.save(ck, model.state_dict())["redundant"] for _ in range(4))
            assert redundant > 0
            pending = gtorch.save(ck, model.state_dict(), wait=False)
            assert pending.wait()["seq"] == 6


def test_bad_templates_name_the_key_and_change_nothing(dirs):
    model, _ = make(4)
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "m") as ck:
            with pytest.raises(gpmkit.Error) as e:
                gtorch.load(ck, model.state_dict())
            assert e.value.code == "not_found"  # nothing saved yet
            gtorch.save(ck, model.state_dict())
            other = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                        torch.nn.Linear(16, 5)).to(DEVICE)
            before = params(other)
            with pytest.raises(gpmkit.Error) as e:
                gtorch.load(ck, other.state_dict())
            assert e.value.code == "invalid_argument" and "2.weight" in str(e.value)
            assert all(torch.equal(a, b) for a, b in zip(params(other), before))
            renamed = {("w." + k): v for k, v in model.state_dict().items()}
            with pytest.raises(gpmkit.Error) as e:
                gtorch.load(ck, renamed)
            assert e.value.code == "invalid_argument" and "w.0.weight" in str(e.value)
            with pytest.raises(gpmkit.Error) as e:
                gtorch.save(ck, {"model": model.state_dict(), "bad": object()})
            assert e.value.code == "invalid_argument" and "/bad" in str(e.value)


class _CountingAdds:
    """A checkpointer's core that counts the registrations it is asked for."""

    def __init__(self, core):
        self.core, self.adds = core, 0

    def add(self, *args):
        self.adds += 1
        return self.core.add(*args)

    def __getattr__(self, name):
        return getattr(self.core, name)


def steps_of(opt):
    return [float(s["step"]) for s in opt.state_dict()["state"].values()]


def test_a_save_registers_only_tensors_whose_memory_changed(dirs):
    """Parameters and moments updated in place keep their chunks' registration from save to save;
    CPU tensors on a GPU (AdamW's step counters), strided views and views not 8-byte aligned are
    captured through buffers kept between saves, holding each save's values; a tensor replaced by another is registered
    again, and so is every chunk after a load (which registers buffers of its own)."""
    model, opt = make(5)
    train(model, opt, 1)
    t = torch.arange(12.0, device=DEVICE).reshape(3, 4)

    def state():
        return {"model": model.state_dict(), "optim": opt.state_dict(), "t": t.t(),
                "u": t.reshape(-1)[1:4]}

    def load(ck):
        return gtorch.load(ck, {"model": model.state_dict(), "optim": opt.state_dict(),
                                "t": torch.zeros(4, 3, device=DEVICE),
                                "u": torch.zeros(3, device=DEVICE)})

    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "m") as ck:
            ck._core = counting = _CountingAdds(ck._core)
            gtorch.save(ck, state())
            first = counting.adds
            assert first == 1 + 4 + 3 * 4 + 2  # description, model, AdamW state, the views
            train(model, opt, 1)
            t.add_(100)
            gtorch.save(ck, state())
            assert counting.adds == first, "tensors that stayed in place registered again"
            with torch.no_grad():
                model[0].weight = torch.nn.Parameter(model[0].weight + 1)  # new memory
            gtorch.save(ck, state())
            assert counting.adds == first + 1
            expected, expected_t = params(model), t.t().clone()
            expected_u = t.reshape(-1)[1:4].clone()
            train(model, opt, 1)
            t.add_(100)
            back = load(ck)
            assert all(torch.equal(a, b) for a, b in zip(params(model), expected))
            assert torch.equal(back["t"], expected_t) and torch.equal(back["u"], expected_u)
            assert steps_of(opt) == [2.0] * 4, "not the step counters of the last save"
            after_load = counting.adds
            gtorch.save(ck, state())
            assert counting.adds - after_load == first, "a load's buffers stayed registered"


CHILD = textwrap.dedent("""
    import sys, torch, gpmkit, gpmkit.torch as gtorch
    pm, snap, device = sys.argv[1], sys.argv[2], sys.argv[3]
    pool = gpmkit.Pool.open("p", "%s", pm_dir=pm, snapshot_dir=snap)
    ck = gpmkit.Checkpointer.open(pool, "ck")
    model = torch.nn.Linear(256, 256).to(device)
    step = 0
    while True:
        step += 1
        with torch.no_grad():
            model.weight.fill_(step)
            model.bias.fill_(-step)
        gtorch.save(ck, {"model": model.state_dict(), "step": step})
        print(step, flush=True)   # acknowledged: durable
""" % LAYOUT)


def test_a_killed_training_loop_loads_one_completed_save(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        gpmkit.Checkpointer.create(pool, "ck").close()
    rng = random.Random(7)
    for trial in range(3):
        acked = kill_after_acks(CHILD, [dirs["pm_dir"], dirs["snapshot_dir"], DEVICE],
                                rng.randint(2, 20))
        with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:
            with gpmkit.Checkpointer.open(pool, "ck") as ck:
                model = torch.nn.Linear(256, 256).to(DEVICE)
                state = gtorch.load(ck, {"model": model.state_dict()})
                step = state["step"]
                assert torch.all(model.weight == step) and torch.all(model.bias == -step), \
                    f"trial {trial}: torn"
                assert acked <= step <= acked + 1, f"trial {trial}: step {step}, acked {acked}"


def test_a_large_description_gets_a_large_chunk_and_growth_past_it_is_refused(dirs):
    # An optimizer over thousands of parameters describes itself in more than 64 KiB.
    state = {"w": torch.arange(4.0, device=DEVICE), "ids": list(range(20000))}
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "big") as ck:
            gtorch.save(ck, state)
            state["ids"].append(-1)  # grows, within the room the first save left
            gtorch.save(ck, state)
            state["ids"] += list(range(100000))  # more than twice the first
            with pytest.raises(gpmkit.Error, match="first save left room for"):
                gtorch.save(ck, state)
    with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.open(pool, "big") as ck:
            back = gtorch.load(ck, {"w": torch.zeros(4, device=DEVICE)})
            assert back["ids"][-1] == -1 and len(back["ids"]) == 20001
            assert torch.equal(back["w"], torch.arange(4.0, device=DEVICE))


SECOND_GPU = textwrap.dedent("""
    import sys, torch, gpmkit, gpmkit.torch as gtorch
    pm, snap = sys.argv[1], sys.argv[2]
    dev = torch.device("cuda", 1)
    torch.cuda.set_device(dev)   # as rank 1 of a job does
    model = torch.nn.Linear(64, 64).to(dev)
    with gpmkit.Pool.create("p", 32 << 20, "%s", pm_dir=pm, snapshot_dir=snap) as pool:
        pool.allocate("x", 4096)
        view = torch.from_dlpack(pool.gpu_bytes("x"))
        assert view.device == dev, view.device
        view.fill_(7)
        torch.cuda.synchronize()
        assert (pool.array("x") == 7).all()
        del view
        with gpmkit.Checkpointer.create(pool, "ck") as ck:
            saved = {k: v.clone() for k, v in model.state_dict().items()}
            # The persist of an asynchronous save runs on a thread of its own.
            pending = gtorch.save(ck, {"model": model.state_dict()}, wait=False)
            with torch.no_grad():
                model.weight.add_(1)
            pending.wait()
            gtorch.load(ck, {"model": model.state_dict()})
            assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())
    print("ok")
""" % LAYOUT)


@pytest.mark.skipif(gpmkit.backend() != "cuda", reason="needs the cuda build (streams)")
def test_a_save_comes_after_the_work_queued_on_the_current_stream(dirs):
    """A tensor written by work still queued on a side stream (PyTorch's streams do not
    synchronize with the legacy default stream) is saved as that work leaves it: gpmkit.torch
    orders the checkpoint after the current stream, and the load after it too."""
    side = torch.cuda.Stream()
    t = torch.zeros(1 << 16, device=DEVICE)
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "train") as ck:
            gtorch.save(ck, {"t": t})  # registered once, so the next save is the one that counts
            with torch.cuda.stream(side):
                x = torch.randn(2048, 2048, device=DEVICE)
                for _ in range(30):  # milliseconds of queued work before t changes
                    x = torch.tanh(x @ x / 64)
                t.copy_(x.flatten()[:t.numel()] + 1)
                gtorch.save(ck, {"t": t})
            torch.cuda.synchronize()
            want = t.clone()
            assert torch.count_nonzero(want) > 0
            got = torch.full_like(t, -1)
            with torch.cuda.stream(side):
                gtorch.load(ck, {"t": got})
            torch.cuda.synchronize()
            assert torch.equal(got, want)


@pytest.mark.skipif(gpmkit.backend() != "cuda" or torch.cuda.device_count() < 2,
                    reason="needs the cuda build and a second GPU")
def test_a_process_on_the_second_gpu(dirs):
    """A process whose GPU is not the first (rank 1 of a job): arrays exported from its pools are
    on its GPU, and an asynchronous save, whose persist runs on another thread, works there."""
    done = subprocess.run([sys.executable, "-c", SECOND_GPU, dirs["pm_dir"],
                           dirs["snapshot_dir"]], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr
