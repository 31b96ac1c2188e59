"""gpmkit from Python: persistent memory pools that GPU kernels and Python share.

    import gpmkit, numpy as np
    with gpmkit.Pool.create("demo", 64 << 20, layout="my-app") as pool:
        x = pool.allocate_array("x", (1024,), np.float32)   # zero-filled, lives in the pool
        x[:] = np.arange(1024)
        pool.persist("x")                                    # durable: survives a process crash
        pool.snapshot()                                      # and a power loss, from disk
    with gpmkit.Pool.open("demo", layout="my-app") as pool:
        print(pool.array("x", np.float32)[:4])

Arrays are views of the pool's memory, without a copy: NumPy on the host, and through DLPack
(`gpu_bytes`) where a GPU maps the pool. A pool stays mapped while an array views it, and close()
refuses while one does. Failures raise gpmkit.Error, whose .code names the kind (not_found, busy,
corrupt, ...) and whose message says what to do. docs/python.md has the whole API.
"""
from __future__ import annotations

from typing import Any, Hashable, Mapping, Optional, Sequence, Union

import numpy as _np
import numpy.typing as _npt

from ._core import Checkpointer as _CoreCheckpointer
from ._core import Error, PendingCheckpoint, backend, device_info, pm_directory
from ._core import Pool as _CorePool

__all__ = ["Checkpointer", "Error", "PendingCheckpoint", "Pool", "backend", "device_info",
           "pm_directory"]


class Pool:
    """A persistent memory pool (gpm::pool): a file in tmpfs (or device-DAX) mapped into this
    process and, where there is one, the GPU. Create or open it with the class methods; use it as
    a context manager, or call close()."""

    def __init__(self, core: _CorePool, read_only: bool = False) -> None:
        self._core = core
        self._read_only = read_only

    @classmethod
    def create(cls, path: str, nbytes: int, layout: str, *, pm_dir: Optional[str] = None,
               snapshot_dir: Optional[str] = None, gpu: str = "auto",
               directory_capacity: int = 1024) -> Pool:
        """Creates a pool of `nbytes` bytes (a multiple of 4096) for `layout`; `path` without a
        '/' names a file in the PM directory (pm_directory()). gpu: 'auto', 'required', 'none'."""
        return cls(_CorePool.create(path, nbytes, layout, pm_dir=pm_dir,
                                    snapshot_dir=snapshot_dir, gpu=gpu,
                                    directory_capacity=directory_capacity))

    @classmethod
    def open(cls, path: str, layout: str, *, pm_dir: Optional[str] = None,
             snapshot_dir: Optional[str] = None, gpu: str = "auto",
             restore_from_snapshot: bool = True, read_only: bool = False) -> Pool:
        """Opens a pool created for `layout`, validating it (a corrupt, truncated, foreign or
        wrong-version file raises Error) and restoring it from its snapshot if it is missing or
        corrupt (unless restore_from_snapshot is False). A pool is open for writing by one
        gpmkit.Pool at a time (another open raises Error, busy); read_only=True opens it for
        reading, alongside other readers (never a restore: its arrays cannot be written, and
        what would write to it raises Error)."""
        return cls(_CorePool.open(path, layout, pm_dir=pm_dir, snapshot_dir=snapshot_dir,
                                  gpu=gpu, restore_from_snapshot=restore_from_snapshot,
                                  read_only=read_only), read_only)

    @staticmethod
    def remove(path: str, *, pm_dir: Optional[str] = None, snapshot_dir: Optional[str] = None,
               with_snapshot: bool = False) -> None:
        """Deletes a pool file that no process has open (and its snapshot, if asked)."""
        _CorePool.remove(path, pm_dir=pm_dir, snapshot_dir=snapshot_dir,
                         with_snapshot=with_snapshot)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Marks the pool cleanly closed and unmaps it. Raises Error (busy) while arrays view it."""
        self._core.close()

    @property
    def is_open(self) -> bool:
        return self._core.is_open

    @property
    def path(self) -> str:
        return self._core.path

    @property
    def size(self) -> int:
        return self._core.size

    @property
    def durability(self) -> str:
        """What a persisted store survives: 'process-crash' (tmpfs) or 'power-fail'."""
        return self._core.durability

    @property
    def mapped_into_gpu(self) -> bool:
        return self._core.mapped_into_gpu

    @property
    def was_clean_shutdown(self) -> bool:
        """False when the previous writer crashed: run your recovery."""
        return self._core.was_clean_shutdown

    @property
    def notices(self) -> list[str]:
        """What opening the pool had to say (a restore from the snapshot, no GPU, ...)."""
        return list(self._core.notices)

    def info(self) -> dict[str, Any]:
        return self._core.info()

    def objects(self) -> list[dict[str, Any]]:
        """The named objects, in offset order: dicts of name, offset, bytes, alignment."""
        return self._core.objects()

    def get(self, name: str) -> dict[str, Any]:
        """Object `name` (name, offset, bytes, alignment); Error (not_found) if there is none."""
        return self._core.get(name)

    def allocate(self, name: str, nbytes: int, alignment: int = 128) -> int:
        """Allocates a zero-filled named object (crash-atomic) and returns its offset."""
        return self._core.allocate(name, nbytes, alignment)

    def free(self, name: str) -> None:
        self._core.free(name)

    def array(self, name: str, dtype: _npt.DTypeLike = _np.uint8,
              shape: Union[int, Sequence[int], None] = None) -> _np.ndarray:
        """Object `name` as a NumPy array of `dtype` (and `shape`; default: as many elements as
        fit), viewing the pool's memory. Raises Error (not_found) for an unknown name and
        ValueError when the object's size is not a whole number of elements of that shape."""
        raw = self._core.host_bytes(name)
        dtype = _np.dtype(dtype)
        if raw.nbytes % dtype.itemsize != 0:
            raise ValueError(f"object {name!r} holds {raw.nbytes} bytes, not a whole number of "
                             f"{dtype} elements")
        view = raw.view(dtype)
        if self._read_only:
            view.flags.writeable = False  # the mapping is read-only: a store would be SIGSEGV
        return view if shape is None else view.reshape(shape)

    def allocate_array(self, name: str, shape: Union[int, Sequence[int]],
                       dtype: _npt.DTypeLike = _np.float32,
                       alignment: int = 128) -> _np.ndarray:
        """Allocates object `name` sized for an array of `shape` and `dtype`, and returns it
        (zero-filled) as array() does."""
        dtype = _np.dtype(dtype)
        count = int(_np.prod(shape, dtype=_np.int64))  # an int shape: its own product
        if count <= 0:
            raise ValueError(f"shape {shape} has no elements")
        self.allocate(name, count * dtype.itemsize, alignment)
        return self.array(name, dtype, shape)

    def gpu_bytes(self, name: str) -> Any:
        """Object `name`'s bytes as an array with __dlpack__ on the device that maps the pool
        (CUDA where gpmkit runs on a GPU; the CPU on the emulator), for the frameworks' from_dlpack:
        torch.from_dlpack(pool.gpu_bytes("x")).view(torch.float32). Raises Error (no_device) when
        no GPU maps the pool."""
        return self._core.gpu_bytes(name)

    def persist(self, name: Optional[str] = None) -> None:
        """Makes the host's stores to object `name` (all of the pool: None) durable."""
        self._core.persist(name)

    def snapshot(self) -> dict[str, Any]:
        """Writes the pages changed since the last snapshot to disk, atomically (power-loss
        durable); returns seq, pages_total, pages_changed, bytes_written and seconds."""
        return self._core.snapshot()


class Checkpointer:
    """Crash-consistent checkpoints of arrays in the device's memory (CUDA arrays or tensors on a
    GPU; NumPy arrays on the emulator, whose device is the CPU) into a pool: gpm::checkpointer,
    HeteroCheckpoint's named chunks with pre-copy hints and redundant-chunk elimination, and the
    GPM paper's two copies per chunk with an atomic flip. A crash at any moment leaves the last
    completed checkpoint restorable. The pool stays open while the checkpointer is."""

    def __init__(self, core: _CoreCheckpointer) -> None:
        self._core = core
        # Per chunk name: (group, where) of the memory _attach() registered last; add()
        # forgets the name, since it may register other memory under it.
        self._attached: dict[str, tuple[int, Hashable]] = {}

    @classmethod
    def _open(cls, how: str, pool: Pool, name: str, max_chunks: int, path: str,
              eliminate_redundant: bool, honour_precopy: bool,
              snapshot_every: int) -> Checkpointer:
        return cls(_CoreCheckpointer.open(pool._core, name, how, max_chunks, path,
                                          eliminate_redundant, honour_precopy, snapshot_every))

    @classmethod
    def create(cls, pool: Pool, name: str, *, max_chunks: int = 64, path: str = "automatic",
               eliminate_redundant: bool = True, honour_precopy: bool = True,
               snapshot_every: int = 0) -> Checkpointer:
        """A new checkpoint `name` in `pool`. path: 'automatic' (measured), 'gpu_stores', 'dma';
        snapshot_every=n: every n-th checkpoint also snapshots the pool (power-loss durable)."""
        return cls._open("create", pool, name, max_chunks, path, eliminate_redundant,
                         honour_precopy, snapshot_every)

    @classmethod
    def open(cls, pool: Pool, name: str, *, max_chunks: int = 64, path: str = "automatic",
             eliminate_redundant: bool = True, honour_precopy: bool = True,
             snapshot_every: int = 0) -> Checkpointer:
        return cls._open("open", pool, name, max_chunks, path, eliminate_redundant,
                         honour_precopy, snapshot_every)

    @classmethod
    def open_or_create(cls, pool: Pool, name: str, *, max_chunks: int = 64,
                       path: str = "automatic", eliminate_redundant: bool = True,
                       honour_precopy: bool = True, snapshot_every: int = 0) -> Checkpointer:
        return cls._open("open_or_create", pool, name, max_chunks, path, eliminate_redundant,
                         honour_precopy, snapshot_every)

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, name: str, array: Any, group: int = 0) -> None:
        """Registers `array` (C-contiguous, in the device's memory) as chunk `name` of `group`.
        After a restart the same name finds its chunk again; registering it with another size or
        element type raises Error (invalid_argument) naming both."""
        self._core.add(name, array, group)
        self._attached.pop(name, None)

    def _attach(self, name: str, array: Any, group: int, where: Hashable) -> None:
        """add(name, array, group) unless chunk `name` of `group` is registered with the memory
        `where` already (what identifies the array's memory: its address, size, element type
        and device). The registration holds the array it was given, so that memory is still
        the same allocation, and registering it again would change nothing; skipping it spares
        the DLPack import, some microseconds a tensor, which a model's parameters and an
        optimizer's moments (updated in place) would otherwise cost at every save."""
        if self._attached.get(name) == (group, where):
            return
        self._core.add(name, array, group)
        self._attached[name] = (group, where)

    def save(self, arrays: Mapping[str, Any], group: int = 0, wait: bool = True,
             stream: int = 0) -> Union[dict[str, Any], PendingCheckpoint]:
        """Registers every {name: array} of `arrays` in `group` and checkpoints the group. Returns
        what checkpoint() returns (seq, copied, redundant, bytes_copied, ...), or with
        wait=False a PendingCheckpoint as soon as the arrays' contents are captured: its wait()
        returns once the checkpoint is durable. `stream`: the CUDA stream (a handle, such as
        torch.cuda.current_stream().cuda_stream) whose queued work the checkpoint comes after;
        0, the legacy default stream, does not wait for work on non-blocking streams."""
        for name, array in arrays.items():
            self.add(name, array, group)
        if wait:
            return self._core.checkpoint(group, stream)
        return self._core.checkpoint_async(group, stream)

    def precopy(self, name: str) -> None:
        """Hint: chunk `name` will not change before the group's next checkpoint."""
        self._core.precopy(name)

    def restore(self, group: int = 0, stream: int = 0) -> dict[str, Any]:
        """Copies the group's last completed checkpoint into its registered arrays, checking
        every chunk's checksum (a corrupt copy is repaired from the older one, or raises); after
        the work queued on `stream` (as in save())."""
        return self._core.restore(group, stream)

    def last_checkpoint(self, group: int = 0) -> int:
        """The newest completed checkpoint of the group (0: none)."""
        return self._core.last_checkpoint(group)

    def chunks(self) -> list[dict[str, Any]]:
        return self._core.chunks()

    @property
    def chosen_path(self) -> str:
        return self._core.chosen_path()

    def close(self) -> None:
        """Waits for a pending checkpoint and releases the checkpointer (and its share of the
        pool)."""
        self._core.close()
        self._attached.clear()
