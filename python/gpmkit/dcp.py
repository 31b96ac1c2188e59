"""gpmkit.dcp: a torch.distributed.checkpoint storage backend on gpmkit pools, so that
dcp.save / dcp.async_save / dcp.load work unchanged, sharded state (FSDP, DTensor) included.

    import torch.distributed.checkpoint as dcp
    from gpmkit.dcp import PoolWriter, PoolReader, latest
    dcp.save(state, storage_writer=PoolWriter(f"/dev/shm/ckpt/step-{step}"))
    ...
    dcp.load(state, storage_reader=PoolReader(latest("/dev/shm/ckpt")))

A checkpoint is a directory (its checkpoint_id). Each rank writes the items it is given into a
pool of its own in that directory ("rank-<r>.pool", one named object per item, written where the
tensor lives: a CUDA tensor by the GPU straight into the mapped pool, a CPU tensor by the host)
and persists them before its part of the save returns. Only then, once DCP has gathered every
rank's results, does the coordinator commit the checkpoint: it writes the metadata file (DCP's
Metadata and the item locations) to a temporary name, syncs it, and renames it into place. So a
checkpoint exists only if every rank's shards were durable: a crash of any rank during a save
leaves no metadata, and every rank restores the same earlier checkpoint (latest() finds it).

Reading checks what it reads: a missing or foreign metadata file, a pool that is not the one the
metadata names (another checkpoint's, or rewritten), or an item of another size raises
gpmkit.Error naming the checkpoint and the item.
"""
import io
import os
import pickle
import stat
import struct
import sys
import zlib
from typing import Any

import numpy as np
import torch
from torch.distributed.checkpoint import (LoadPlan, LoadPlanner, Metadata, SavePlan,
                                          SavePlanner, StorageReader, StorageWriter)
from torch.distributed.checkpoint.metadata import MetadataIndex
from torch.distributed.checkpoint.planner import LoadItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from . import Error, Pool

__all__ = ["PoolWriter", "PoolReader", "latest"]

LAYOUT = "gpmkit.dcp"
METADATA = "gpmkit-dcp.metadata"
_MAGIC = b"GPMDCP01"          # the metadata file starts with it, then length and CRC-32
_HEADER = struct.Struct("<8sQI")
_ALIGN = 4096                 # objects start on pages, so a GPU's stores into them coalesce


def _error(message, code="invalid_argument"):
    e = Error(message)
    e.code = code
    return e


def _pool_name(rank):
    return f"rank-{rank}.pool"


class _Item:
    """Where one written item lies: its rank's pool, object, byte count, and for tensors the
    stored chunk's dtype and shape."""

    __slots__ = ("pool", "object", "nbytes", "dtype", "shape")

    def __init__(self, pool, obj, nbytes, dtype=None, shape=None):
        self.pool, self.object, self.nbytes = pool, obj, nbytes
        self.dtype, self.shape = dtype, shape

    def __getstate__(self):
        return (self.pool, self.object, self.nbytes, self.dtype, self.shape)

    def __setstate__(self, s):
        self.pool, self.object, self.nbytes, self.dtype, self.shape = s


def _bytes_of(t):
    """A contiguous uint8 view of tensor t's data (0-d tensors included)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def _pool_bytes(payloads):
    """A pool size that holds `payloads` (byte counts) as page-aligned objects, with room for its
    header and directory."""
    def pages(n):
        return (n + _ALIGN - 1) // _ALIGN * _ALIGN
    return (1 << 20) + pages(256 * len(payloads)) + sum(pages(max(n, 1)) for n in payloads)


class PoolWriter(StorageWriter):
    """Writes a DCP checkpoint into the directory `path` (its checkpoint_id; a later reset() with
    a checkpoint_id writes there instead). The directory is created; one that already holds a
    committed checkpoint is refused unless overwrite=True. The pools' snapshots (pool.snapshot,
    not taken by the writer) would go to snapshot_dir (default: gpmkit's)."""

    def __init__(self, path=None, *, overwrite=False, snapshot_dir=None):
        super().__init__()
        self.path = os.fspath(path) if path is not None else None
        self.overwrite = overwrite
        self.snapshot_dir = snapshot_dir
        self.rank = 0
        self.is_coordinator = True

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)

    def set_up_storage_writer(self, is_coordinator, *args, rank=None, **kwargs):
        if self.path is None:
            raise _error("gpmkit.dcp.PoolWriter: no checkpoint directory (give a path or a "
                         "checkpoint_id)")
        self.is_coordinator = is_coordinator
        if rank is None:
            dist = torch.distributed
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        self.rank = rank
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise _error(f"{self.path} is not a directory: a gpmkit.dcp checkpoint is a "
                         "directory (give another checkpoint_id)")
        meta = os.path.join(self.path, METADATA)
        if os.path.lexists(meta) and not stat.S_ISREG(os.lstat(meta).st_mode):
            raise _error(f"{meta} is not a gpmkit.dcp metadata file (not a regular file): move "
                         "it away, or give another checkpoint_id", "corrupt")
        if is_coordinator and os.path.exists(meta):
            if not self.overwrite:
                raise _error(f"{self.path} already holds a committed checkpoint: give another "
                             "checkpoint_id, or overwrite=True", "already_exists")
            os.remove(meta)  # uncommitted from here on, before any pool is rewritten
            _sync_dir(self.path)

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        os.makedirs(self.path, exist_ok=True)
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future:
        name = _pool_name(self.rank)
        path = os.path.join(self.path, name)
        data = [(item, planner.resolve_data(item)) for item in plan.items]
        sizes = [d.getbuffer().nbytes if isinstance(d, io.BytesIO)  # the BYTE_IO items
                 else d.numel() * d.element_size() for _, d in data]
        if os.path.exists(path):  # a rank's leftover of an uncommitted or overwritten save
            Pool.remove(path)
        results = []
        with Pool.create(path, _pool_bytes(sizes), LAYOUT, snapshot_dir=self.snapshot_dir,
                         directory_capacity=max(1, len(data))) as pool:
            gpu = pool.mapped_into_gpu
            for i, ((item, d), n) in enumerate(zip(data, sizes)):
                obj = f"i{i}"
                pool.allocate(obj, max(n, 1), alignment=_ALIGN)
                if isinstance(d, io.BytesIO):  # the BYTE_IO items
                    pool.array(obj)[:n] = np.frombuffer(d.getbuffer(), dtype=np.uint8)
                    where = _Item(name, obj, n)
                else:
                    _store(pool, obj, d, n, gpu)
                    where = _Item(name, obj, n, str(d.dtype).removeprefix("torch."),
                                  list(d.shape))
                results.append(WriteResult(index=item.index, size_in_bytes=n,
                                           storage_data=where))
            if gpu and torch.cuda.is_available():
                torch.cuda.synchronize()  # the GPU's stores into the pool have landed
            pool.persist()
        f: Future = Future()
        f.set_result(results)
        return f

    def finish(self, metadata: Metadata, results) -> None:
        storage = {}
        for rank_results in results:
            for r in rank_results:
                storage[r.index] = r.storage_data
        metadata.storage_data = storage
        body = pickle.dumps(metadata, protocol=pickle.HIGHEST_PROTOCOL)
        blob = _HEADER.pack(_MAGIC, len(body), zlib.crc32(body)) + body
        tmp = os.path.join(self.path, f".{METADATA}.{os.getpid()}")
        with open(tmp, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, os.path.join(self.path, METADATA))  # the commit
        _sync_dir(self.path)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        return False  # only when asked for by name, never chosen for a plain path

    def storage_meta(self):
        return None


def _store(pool, obj, tensor, n, gpu):
    """Copies `tensor`'s data into pool object `obj`: on the GPU into the mapped pool when both
    are there, else through the host's view."""
    if n == 0:
        return
    src = _bytes_of(tensor)
    if gpu and src.is_cuda:
        dst = torch.from_dlpack(pool.gpu_bytes(obj))[:n]
        dst.copy_(src)
    else:
        dst = torch.from_numpy(pool.array(obj))[:n]
        dst.copy_(src.cpu())


def _sync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_metadata(path):
    meta = os.path.join(path, METADATA)
    try:
        # O_NONBLOCK: a FIFO in the metadata's place is refused below instead of blocking here.
        fd = os.open(meta, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _error(f"{path} holds no committed gpmkit.dcp checkpoint (no {METADATA}: the save "
                     "did not complete, or this is not a gpmkit.dcp checkpoint)",
                     "not_found") from None
    except NotADirectoryError:
        raise _error(f"{path} is not a directory: a gpmkit.dcp checkpoint is a directory",
                     "not_found") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _error(f"{meta}: not a gpmkit.dcp metadata file (not a regular file)", "corrupt")
    with os.fdopen(fd, "rb") as f:
        blob = f.read()
    if len(blob) < _HEADER.size:
        raise _error(f"{meta}: truncated ({len(blob)} bytes)", "corrupt")
    magic, n, crc = _HEADER.unpack_from(blob)
    if magic != _MAGIC:
        raise _error(f"{meta}: not a gpmkit.dcp metadata file (magic {magic!r})", "corrupt")
    body = blob[_HEADER.size:]
    if len(body) != n or zlib.crc32(body) != crc:
        raise _error(f"{meta}: damaged (length or checksum does not match)", "corrupt")
    try:
        return _MetadataUnpickler(io.BytesIO(body)).load()
    except _ForeignGlobal as e:
        raise _error(f"{meta}: names {e}, which no gpmkit.dcp metadata holds: not loaded (a "
                     "pickle from elsewhere could run code)", "corrupt") from None


class _ForeignGlobal(Exception):
    pass


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles what PoolWriter.finish pickles (DCP's Metadata, its item locations) and nothing
    else. The checksum catches damage, not a crafted file, and a plain pickle.loads of one can
    call any function it names; this unpickler resolves only DCP's metadata classes, torch's
    dtypes, Size and layouts, and gpmkit.dcp's own item record."""

    def find_class(self, module, name):
        if module == "torch.distributed.checkpoint.metadata":
            found = getattr(sys.modules.get(module), name, None)
            if isinstance(found, type) and found.__module__ == module:
                return found
        elif module == "torch":
            found = getattr(torch, name, None)
            if name == "Size" or isinstance(found, (torch.dtype, torch.layout)):
                return found
        elif (module, name) in (("torch.serialization", "_get_layout"), (__name__, "_Item")):
            return super().find_class(module, name)
        raise _ForeignGlobal(f"{module}.{name}")


class PoolReader(StorageReader):
    """Reads a DCP checkpoint written by PoolWriter from the directory `path` (its
    checkpoint_id)."""

    def __init__(self, path=None, *, snapshot_dir=None):
        super().__init__()
        self.path = os.fspath(path) if path is not None else None
        self.snapshot_dir = snapshot_dir
        self.storage_data = None

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)
        self.storage_data = None

    def read_metadata(self, *args, **kwargs) -> Metadata:
        if self.path is None:
            raise _error("gpmkit.dcp.PoolReader: no checkpoint directory (give a path or a "
                         "checkpoint_id)")
        return _read_metadata(self.path)

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator, *args, **kwargs):
        self.storage_data = metadata.storage_data

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future:
        per_pool: dict[str, list[tuple[Any, _Item]]] = {}
        for req in plan.items:
            where = self.storage_data.get(req.storage_index)
            if not isinstance(where, _Item):
                raise _error(f"{self.path}: item {_key(req.storage_index)} is not in the "
                             "checkpoint's metadata", "corrupt")
            per_pool.setdefault(where.pool, []).append((req, where))
        for name, reqs in per_pool.items():
            path = os.path.join(self.path, name)
            # Read-only: the ranks of a job read the same pools at once (each replicated item
            # lies in one rank's pool, and every rank loads it).
            with Pool.open(path, LAYOUT, snapshot_dir=self.snapshot_dir,
                           restore_from_snapshot=False, read_only=True) as pool:
                for req, where in reqs:
                    _load(pool, self.path, req, where, planner)
        f: Future = Future()
        f.set_result(None)
        return f

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        try:
            return os.path.isfile(os.path.join(os.fspath(checkpoint_id), METADATA))
        except TypeError:
            return False


def _key(index: MetadataIndex):
    return index.fqn if index.offset is None else f"{index.fqn} at {list(index.offset)}"


def _load(pool, path, req, where, planner):
    try:
        got = pool.get(where.object)["bytes"]
    except Error as e:
        raise _error(f"{path}: item {_key(req.storage_index)}: {e}", "corrupt") from e
    if got < where.nbytes:
        raise _error(f"{path}: item {_key(req.storage_index)} holds {got} bytes, the metadata "
                     f"says {where.nbytes}", "corrupt")
    raw = torch.from_numpy(pool.array(where.object))[:where.nbytes]
    if req.type == LoadItemType.BYTE_IO:
        planner.load_bytes(req, io.BytesIO(raw.numpy().tobytes()))
        return
    dtype = getattr(torch, where.dtype)
    stored = raw.view(dtype).reshape(where.shape)
    for dim, (start, length) in enumerate(zip(req.storage_offsets, req.lengths)):
        stored = stored.narrow(dim, start, length)
    target = planner.resolve_tensor(req).detach()
    if target.shape != stored.shape:
        raise _error(f"{path}: item {_key(req.storage_index)} is {list(stored.shape)}, the "
                     f"state dict wants {list(target.shape)}")
    target.copy_(stored)
    planner.commit_tensor(req, target)


def latest(root):
    """The checkpoint directory under `root` committed last (by its metadata's commit time), or
    None when none is committed: what to load after a crash."""
    best, when = None, -1
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise _error(f"{root} is not a directory: latest() looks for checkpoint directories "
                     "in a directory") from None
    for e in entries:
        meta = os.path.join(e.path, METADATA)
        if e.is_dir() and os.path.isfile(meta):
            t = os.stat(meta).st_mtime_ns
            if t > when:
                best, when = e.path, t
    return best

