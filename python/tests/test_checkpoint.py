"""Tests of gpmkit.Checkpointer (gpm::checkpointer from Python) on the backend the package was
built for, with arrays in the device's memory (NumPy arrays on the emulator): save and restore,
redundant chunks skipped, asynchronous saves, every bad input as a gpmkit.Error naming the
chunk, and SIGKILLs at random moments of a save loop, after which the restored arrays equal one
completed checkpoint, never a mix."""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

import gpmkit

LAYOUT = "gpmkit.python-test"
SIZE = 16 << 20

pytestmark = pytest.mark.skipif(gpmkit.backend() != "host",
                                reason="NumPy arrays are device memory on the emulator only")


@pytest.fixture
def dirs(tmp_path):
    pm = tempfile.mkdtemp(prefix="gpmkit-python-test-", dir="/dev/shm")
    snap = tmp_path / "snap"
    snap.mkdir()
    yield {"pm_dir": pm, "snapshot_dir": str(snap)}
    shutil.rmtree(pm, ignore_errors=True)


def test_save_and_restore(dirs):
    a = np.arange(1000, dtype=np.float32)
    b = np.full(64, 7, dtype=np.int64)
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "ck") as ck:
            with pytest.raises(gpmkit.Error) as e:
                ck.restore()
            assert e.value.code == "not_found"
            r = ck.save({"a": a, "b": b})
            assert r["seq"] == 1 and r["chunks"] == 2 and r["copied"] == 2
            assert r["bytes_copied"] == a.nbytes + b.nbytes
            redundant = sum(ck.save({"a": a, "b": b})["redundant"] for _ in range(4))
            assert redundant > 0  # unchanged chunks are skipped once the predictor has learnt
            a[:] = -1
            b[:] = 0
            assert ck.restore()["seq"] == 5
            assert (a == np.arange(1000, dtype=np.float32)).all() and (b == 7).all()
            assert ck.last_checkpoint() == 5
            assert sorted(c["name"] for c in ck.chunks()) == ["a", "b"]
            with pytest.raises(gpmkit.Error) as e:
                pool.close()  # the checkpointer still uses it
            assert e.value.code == "busy"
    with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:  # another process's view, after a restart
        with gpmkit.Checkpointer.open(pool, "ck") as ck:
            a2 = np.zeros(1000, dtype=np.float32)
            ck.add("a", a2)
            ck.add("b", np.zeros(64, dtype=np.int64))
            ck.restore()
            assert (a2 == np.arange(1000, dtype=np.float32)).all()


def test_asynchronous_save(dirs):
    a = np.arange(4096, dtype=np.int32)
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "ck") as ck:
            pending = ck.save({"a": a}, wait=False)
            a[:] = 0  # after save() returned: the checkpoint holds the contents at the call
            r = pending.wait()
            assert r["seq"] == 1 and pending.ready()
            ck.restore()
            assert (a == np.arange(4096, dtype=np.int32)).all()


def test_bad_inputs_name_the_chunk(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "ck") as ck:
            ck.save({"weights": np.zeros(256, dtype=np.float32)})
            for other in (np.zeros(255, dtype=np.float32), np.zeros(256, dtype=np.int32)):
                with pytest.raises(gpmkit.Error) as e:
                    ck.add("weights", other)
                assert e.value.code == "invalid_argument" and "weights" in str(e.value)
            with pytest.raises(TypeError):
                ck.add("strided", np.zeros(64, dtype=np.float32)[::2])  # not contiguous
            with pytest.raises(gpmkit.Error) as e:
                gpmkit.Checkpointer.create(pool, "ck")
            assert e.value.code == "already_exists"
            with pytest.raises(gpmkit.Error) as e:
                gpmkit.Checkpointer.create(pool, "c2", path="teleport")
            assert e.value.code == "invalid_argument"
        with pytest.raises(gpmkit.Error) as e:
            gpmkit.Checkpointer.open(pool, "nothing")
        assert e.value.code == "not_found"


CHILD = textwrap.dedent("""
    import sys, numpy as np, gpmkit
    pm, snap = sys.argv[1], sys.argv[2]
    pool = gpmkit.Pool.open("p", "%s", pm_dir=pm, snapshot_dir=snap)
    ck = gpmkit.Checkpointer.open(pool, "ck")
    a = np.zeros(1 << 16, dtype=np.int64)
    b = np.zeros(1 << 12, dtype=np.int64)
    step = 0
    while True:
        step += 1
        a[:] = step
        b[:] = -step
        ck.save({"a": a, "b": b})
        print(step, flush=True)   # acknowledged: durable
""" % LAYOUT)


def test_a_killed_save_loop_restores_one_completed_checkpoint(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        gpmkit.Checkpointer.create(pool, "ck").close()
    rng = random.Random(22)
    for trial in range(4):
        child = subprocess.Popen([sys.executable, "-c", CHILD, dirs["pm_dir"],
                                  dirs["snapshot_dir"]], stdout=subprocess.PIPE, text=True)
        acked = 0
        for _ in range(rng.randint(2, 30)):
            acked = int(child.stdout.readline())
        os.kill(child.pid, signal.SIGKILL)
        rest = child.stdout.read().split()  # lines printed before the kill landed
        child.wait()
        acked = int(rest[-1]) if rest else acked
        with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:
            with gpmkit.Checkpointer.open(pool, "ck") as ck:
                a = np.zeros(1 << 16, dtype=np.int64)
                b = np.zeros(1 << 12, dtype=np.int64)
                ck.add("a", a)
                ck.add("b", b)
                seq = ck.restore()["seq"]
                step = int(a[0])
                assert (a == step).all() and (b == -step).all(), f"trial {trial}: torn"
                assert acked <= step <= acked + 1, f"trial {trial}: step {step}, acked {acked}"
                assert seq >= step
