"""Tests of gpmkit.Checkpointer (gpm::checkpointer from Python) on the backend the package was
built for, with arrays in the device's memory (NumPy arrays on the emulator): save and restore,
redundant chunks skipped, asynchronous saves, every bad input as a gpmkit.Error naming the
chunk, and SIGKILLs at random moments of a save loop, after which the restored arrays equal one
completed checkpoint, never a mix."""
import os
import random
import sys
import textwrap

import pytest

import gpmkit

LAYOUT = "gpmkit.python-test"
SIZE = 16 << 20

sys.path.insert(0, os.path.dirname(__file__))
from crash_child import kill_after_acks  # noqa: E402
from device_arrays import device_arrays  # noqa: E402

xp = device_arrays()
pytestmark = pytest.mark.skipif(xp is None, reason="the cuda build's arrays are PyTorch CUDA "
                                "tensors, and PyTorch (or a GPU it sees) is missing")



def test_save_and_restore(dirs):
    a = xp.arange(1000, "float32")
    b = xp.full(64, 7, "int64")
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "ck") as ck:
            with pytest.raises(gpmkit.Error) as e:
                ck.restore()
            assert e.value.code == "not_found"
            r = ck.save({"a": a, "b": b})
            assert r["seq"] == 1 and r["chunks"] == 2 and r["copied"] == 2
            assert r["bytes_copied"] == xp.nbytes(a) + xp.nbytes(b)
            redundant = sum(ck.save({"a": a, "b": b})["redundant"] for _ in range(4))
            assert redundant > 0  # unchanged chunks are skipped once the predictor has learnt
            a[:] = -1
            b[:] = 0
            assert ck.restore()["seq"] == 5
            assert xp.all_equal(a, xp.arange(1000, "float32")) and xp.all_equal(b, 7)
            assert ck.last_checkpoint() == 5
            assert sorted(c["name"] for c in ck.chunks()) == ["a", "b"]
            with pytest.raises(gpmkit.Error) as e:
                pool.close()  # the checkpointer still uses it
            assert e.value.code == "busy"
    with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:  # another process's view, after a restart
        with gpmkit.Checkpointer.open(pool, "ck") as ck:
            a2 = xp.zeros(1000, "float32")
            ck.add("a", a2)
            ck.add("b", xp.zeros(64, "int64"))
            ck.restore()
            assert xp.all_equal(a2, xp.arange(1000, "float32"))


def test_asynchronous_save(dirs):
    a = xp.arange(4096, "int32")
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "ck") as ck:
            pending = ck.save({"a": a}, wait=False)
            a[:] = 0  # after save() returned: the checkpoint holds the contents at the call
            r = pending.wait()
            assert r["seq"] == 1 and pending.ready()
            ck.restore()
            assert xp.all_equal(a, xp.arange(4096, "int32"))


def test_bad_inputs_name_the_chunk(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with gpmkit.Checkpointer.create(pool, "ck") as ck:
            ck.save({"weights": xp.zeros(256, "float32")})
            for other in (xp.zeros(255, "float32"), xp.zeros(256, "int32")):
                with pytest.raises(gpmkit.Error) as e:
                    ck.add("weights", other)
                assert e.value.code == "invalid_argument" and "weights" in str(e.value)
            with pytest.raises(TypeError):
                ck.add("strided", xp.zeros(64, "float32")[::2])  # not contiguous
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
    import sys, gpmkit
    pm, snap, tests = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.path.insert(0, tests)
    from device_arrays import device_arrays
    xp = device_arrays()
    pool = gpmkit.Pool.open("p", "%s", pm_dir=pm, snapshot_dir=snap)
    ck = gpmkit.Checkpointer.open(pool, "ck")
    a = xp.zeros(1 << 16, "int64")
    b = xp.zeros(1 << 12, "int64")
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
        acked = kill_after_acks(CHILD, [dirs["pm_dir"], dirs["snapshot_dir"],
                                        os.path.dirname(__file__)], rng.randint(2, 30))
        with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:
            with gpmkit.Checkpointer.open(pool, "ck") as ck:
                a = xp.zeros(1 << 16, "int64")
                b = xp.zeros(1 << 12, "int64")
                ck.add("a", a)
                ck.add("b", b)
                seq = ck.restore()["seq"]
                step = xp.first(a)
                assert xp.all_equal(a, step) and xp.all_equal(b, -step), f"trial {trial}: torn"
                assert acked <= step <= acked + 1, f"trial {trial}: step {step}, acked {acked}"
                assert seq >= step
