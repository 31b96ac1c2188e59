"""Tests of the Python package gpmkit (python/gpmkit) on the backend it was built for: pools from
Python, arrays that view them without a copy, readers sharing a pool that a writer holds alone,
persistence across a process crash (SIGKILL) and a snapshot restore, and every bad input as a
gpmkit.Error carrying its code and message."""
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpmkit

LAYOUT = "gpmkit.python-test"
SIZE = 4 << 20



def test_backend_and_device():
    assert gpmkit.backend() in ("host", "cuda")
    info = gpmkit.device_info()
    assert info["present"] or info["absent_reason"]
    assert info["emulated"] == (gpmkit.backend() == "host")


def test_type_stubs_ship_with_the_package():
    """The compiled module's stubs (nanobind's stubgen) and the py.typed marker sit beside it, so
    type checkers see the whole package; the stubs parse and declare the public classes."""
    import ast
    import pathlib

    here = pathlib.Path(gpmkit.__file__).parent
    assert (here / "py.typed").exists()
    tree = ast.parse((here / "_core.pyi").read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert {"Pool", "Checkpointer"} <= set(classes)
    pool_methods = {n.name for n in classes["Pool"].body if isinstance(n, ast.FunctionDef)}
    assert {"create", "open", "allocate", "close"} <= pool_methods


def test_the_package_type_checks():
    """mypy over the package (its annotations against the compiled module's stubs) finds no
    issue, so what the stubs and annotations promise holds together."""
    pytest.importorskip("mypy")
    import pathlib

    root = pathlib.Path(gpmkit.__file__).parent.parent
    r = subprocess.run([sys.executable, "-m", "mypy", "-p", "gpmkit", "--ignore-missing-imports",
                        "--no-incremental", "--cache-dir", os.devnull],
                       cwd=root, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_create_write_reopen(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        assert pool.is_open and pool.size == SIZE
        assert pool.durability in ("process-crash", "power-fail")
        x = pool.allocate_array("x", (16, 32), np.float32)
        assert x.shape == (16, 32) and x.dtype == np.float32 and not x.any()
        x[:] = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
        pool.persist("x")
        assert [o["name"] for o in pool.objects()] == ["x"]
        assert pool.get("x")["bytes"] == 16 * 32 * 4
        del x
    with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:
        assert pool.was_clean_shutdown
        y = pool.array("x", np.float32, (16, 32))
        assert (y == np.arange(16 * 32, dtype=np.float32).reshape(16, 32)).all()
        z = pool.array("x", np.uint8)
        assert z.nbytes == 16 * 32 * 4
        y[0, 0] = -1.0  # the same memory: no copy
        assert pool.array("x", np.float32)[0] == -1.0
        del y, z


def test_readers_share_a_pool_that_a_writer_holds_alone(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        pool.allocate_array("x", 8, np.int64)[:] = np.arange(8)
        pool.persist()
    readers = [gpmkit.Pool.open("p", LAYOUT, read_only=True, **dirs) for _ in range(2)]
    try:
        x = readers[1].array("x", np.int64)
        assert (x == np.arange(8)).all() and not x.flags.writeable
        del x
        with pytest.raises(gpmkit.Error) as e:
            gpmkit.Pool.open("p", LAYOUT, **dirs)
        assert e.value.code == "busy"
        with pytest.raises(gpmkit.Error) as e:
            readers[0].allocate("y", 64)
        assert "read-only" in str(e.value)
    finally:
        for r in readers:
            r.close()
    with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:  # writable again once they are gone
        with pytest.raises(gpmkit.Error) as e:
            gpmkit.Pool.open("p", LAYOUT, read_only=True, **dirs)
        assert e.value.code == "busy"


def test_arrays_keep_the_pool_mapped(dirs):
    pool = gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs)
    x = pool.allocate_array("x", 8, np.int64)
    with pytest.raises(gpmkit.Error) as e:
        pool.close()
    assert e.value.code == "busy" and "delete them" in str(e.value)
    del x
    pool.close()
    assert not pool.is_open
    with pytest.raises(gpmkit.Error, match="closed"):
        pool.objects()


def test_errors_carry_code_and_message(dirs):
    with pytest.raises(gpmkit.Error) as e:
        gpmkit.Pool.open("missing", LAYOUT, restore_from_snapshot=False, **dirs)
    assert e.value.code == "not_found"
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        with pytest.raises(gpmkit.Error) as e:
            gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs)
        assert e.value.code == "already_exists"
        with pytest.raises(gpmkit.Error) as e:
            pool.array("nope")
        assert e.value.code == "not_found" and "nope" in str(e.value)
        with pytest.raises(gpmkit.Error) as e:
            pool.allocate("huge", 2**64 - 1)
        assert e.value.code == "out_of_memory"
        pool.allocate("odd", 6)
        with pytest.raises(ValueError, match="whole number"):
            pool.array("odd", np.float32)
        with pytest.raises(ValueError, match="no elements"):
            pool.allocate_array("empty", (0,), np.float32)
        with pytest.raises(gpmkit.Error) as e:
            gpmkit.Pool.create("q", SIZE, LAYOUT, gpu="sometimes", **dirs)
        assert e.value.code == "invalid_argument"
    with pytest.raises(gpmkit.Error) as e:
        gpmkit.Pool.open("p", "another-layout", **dirs)
    assert e.value.code == "layout_mismatch"
    with pytest.raises(gpmkit.Error) as e:
        gpmkit.Pool.create("bad", 4097, LAYOUT, **dirs)
    assert e.value.code == "invalid_argument"
    # A str may hold a NUL byte, which would cut the path short ("p\0x" is not "p").
    with pytest.raises(gpmkit.Error) as e:
        gpmkit.Pool.open("p\0x", LAYOUT, **dirs)
    assert e.value.code == "invalid_argument" and "NUL byte" in str(e.value)


def test_a_corrupt_pool_is_an_error_not_a_crash(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        pool.allocate("x", 64)
    path = os.path.join(dirs["pm_dir"], "p")
    with open(path, "r+b") as f:
        f.write(b"\xff" * 64)  # the header
    with pytest.raises(gpmkit.Error) as e:
        gpmkit.Pool.open("p", LAYOUT, restore_from_snapshot=False, **dirs)
    assert e.value.code in ("corrupt", "version", "layout_mismatch")


CHILD = textwrap.dedent("""
    import os, sys, numpy as np, gpmkit
    pm, snap = sys.argv[1], sys.argv[2]
    pool = gpmkit.Pool.open("p", "%s", pm_dir=pm, snapshot_dir=snap)
    x = pool.array("x", np.int64)
    for i in range(1, len(x)):
        x[0] = i          # the count of completed steps, written last: x[1:i+1] are set
        x[i] = i * i
        pool.persist("x")
        if i == 100:
            os.write(1, b"ready\\n")
            os.kill(os.getpid(), %d)
""" % (LAYOUT, signal.SIGKILL))


def test_persisted_stores_survive_a_sigkill(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        pool.allocate_array("x", 1024, np.int64)
    child = subprocess.run([sys.executable, "-c", CHILD, dirs["pm_dir"], dirs["snapshot_dir"]],
                           capture_output=True, env=dict(os.environ))
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:
        assert not pool.was_clean_shutdown
        x = pool.array("x", np.int64)
        n = int(x[0])
        assert n == 100
        assert (x[1:n] == np.arange(1, n) ** 2).all()
        del x


def test_snapshot_restores_a_lost_pool(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, **dirs) as pool:
        x = pool.allocate_array("x", 256, np.uint32)
        x[:] = np.arange(256, dtype=np.uint32)
        del x
        r = pool.snapshot()
        assert r["seq"] == 1 and r["bytes_written"] > 0
    os.remove(os.path.join(dirs["pm_dir"], "p"))
    with gpmkit.Pool.open("p", LAYOUT, **dirs) as pool:
        assert any("snapshot" in n for n in pool.notices)
        assert (pool.array("x", np.uint32) == np.arange(256, dtype=np.uint32)).all()


def test_gpu_bytes_needs_a_gpu_mapping(dirs):
    with gpmkit.Pool.create("p", SIZE, LAYOUT, gpu="none", **dirs) as pool:
        pool.allocate("x", 64)
        with pytest.raises(gpmkit.Error) as e:
            pool.gpu_bytes("x")
        assert e.value.code == "no_device"
    with gpmkit.Pool.create("q", SIZE, LAYOUT, **dirs) as pool:
        pool.allocate("x", 64)
        if pool.mapped_into_gpu:
            b = pool.gpu_bytes("x")
            assert hasattr(b, "__dlpack__")
            if gpmkit.backend() == "host":  # the emulator's GPU memory is this CPU's
                v = np.from_dlpack(b)
                assert v.shape == (64,)
                v[3] = 7
                assert pool.array("x")[3] == 7
                del v
            del b


def test_python_m_gpmkit_info():
    out = subprocess.run([sys.executable, "-m", "gpmkit", "info"], capture_output=True,
                         text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert f"gpmkit backend: {gpmkit.backend()}" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "gpmkit", "nonsense"], capture_output=True,
                         text=True, env=dict(os.environ))
    assert bad.returncode == 2 and "usage" in bad.stderr
