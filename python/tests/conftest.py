"""Fixtures shared by the Python package's tests."""
import shutil
import tempfile

import pytest


@pytest.fixture
def dirs(tmp_path):
    """Pools in a fresh directory of /dev/shm (a GPU maps pools in tmpfs only), snapshots on
    disk; both removed afterwards."""
    pm = tempfile.mkdtemp(prefix="gpmkit-python-test-", dir="/dev/shm")
    snap = tmp_path / "snap"
    snap.mkdir()
    yield {"pm_dir": pm, "snapshot_dir": str(snap)}
    shutil.rmtree(pm, ignore_errors=True)

