"""One rank of a data-parallel training job that checkpoints through gpmkit.dcp after every step,
for test_dcp.py's crash test of a job of several ranks (one of them killed by SIGKILL):

    python dcp_training_rank.py RANK WORLD STORE ROOT DEVICE BACKEND STEPS

A small MLP (seed 0) trains by DDP with AdamW over the process group BACKEND (gloo, nccl) on
DEVICE (cpu; or cuda, rank r on cuda:r), on data that depends only on the rank and the step, so
that every run of the job computes the same states bit for bit. After step n each rank saves
{model, optim, step} by dcp.save into ROOT/step-<n> (gpmkit.dcp.PoolWriter; DCP's plans over a
gloo group, as for async_save), and rank 0 prints "step <n>" once the save has returned (it is
committed then). ROOT "-": no checkpoints (the uninterrupted run the others are compared with).
A job that finds a committed checkpoint in ROOT resumes from latest(ROOT). Every rank prints
"restored <step> <digest>" after resuming, "state <n> <digest>" after step n, and
"final <digest>" at the end; a digest is SHA-256 over the bytes of every tensor of the model's and
the optimizer's state.
"""
import hashlib
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402

from gpmkit.dcp import PoolReader, PoolWriter, latest  # noqa: E402


def digest(model, opt):
    h = hashlib.sha256()
    tensors = list(model.state_dict().items())
    for k, s in sorted(opt.state_dict()["state"].items()):
        tensors += [(f"{k}.{name}", v) for name, v in sorted(s.items())]
    for name, t in tensors:
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def batch(rank, step, device):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 8, generator=g)
    return x.to(device), x[:, :4].sin().to(device)


def main():
    rank, world, store, root, device, backend, steps = sys.argv[1:8]
    rank, world, steps = int(rank), int(world), int(steps)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dev = torch.device(device, rank) if device == "cuda" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
    ckpt_group = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    start = 1
    path = latest(root) if root != "-" else None
    if path is not None:
        # The optimizer's state tensors exist once it has stepped: a step on zero gradients
        # makes them, and the load overwrites every one.
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
        opt.zero_grad(set_to_none=True)
        state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": 0}
        dcp.load(state, storage_reader=PoolReader(path), process_group=ckpt_group)
        opt.load_state_dict(state["optim"])
        start = state["step"] + 1
        print(f"restored {state['step']} {digest(model, opt)}", flush=True)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[dev.index] if dev.type == "cuda" else None)
    for step in range(start, steps + 1):
        x, y = batch(rank, step, dev)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"state {step} {digest(model, opt)}", flush=True)
        if root != "-":
            state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": step}
            dcp.save(state, storage_writer=PoolWriter(f"{root}/step-{step}"),
                     process_group=ckpt_group)
            if rank == 0:
                print(f"step {step}", flush=True)
    print(f"final {digest(model, opt)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Skip interpreter teardown, where PyTorch's distributed threads have aborted a rank now and
    # then after its work was done (test_dcp.py's two-rank test saw it): the job's outcome is
    # what the ranks printed and wrote.
    sys.stdout.flush()
    os._exit(0)
