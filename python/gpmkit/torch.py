"""gpmkit.torch: PyTorch state dicts (a model's, an optimizer's, nested in any dict or list)
checkpointed into a pool through gpmkit.Checkpointer. Each tensor is one chunk, so tensors that did
not change since the last save are skipped (redundant-chunk elimination), and a crash at any moment
leaves the last completed save restorable. Tensors in the device's memory (CUDA tensors on this
process's GPU, CPU tensors on the emulator) and contiguous are captured where they are, without a
copy; others (an optimizer's CPU step counters on a GPU, non-contiguous views) through device
buffers kept from save to save, the CPU tensors' filled by one copy from pinned memory. A chunk is
registered again only when its tensor's memory changed. Values that are not tensors
(hyperparameters, step numbers) are kept as JSON in one more chunk.

    ck = gpmkit.Checkpointer.open_or_create(pool, "train")
    gpmkit.torch.save(ck, {"model": model.state_dict(), "optim": opt.state_dict(), "step": step})
    # after a restart, with the model and optimizer built the same way (an optimizer has state
    # tensors once it has stepped, or after load_state_dict):
    state = gpmkit.torch.load(ck, {"model": model.state_dict(), "optim": opt.state_dict()})
    opt.load_state_dict(state["optim"]); step = state["step"]

load() restores into the tensors of the template it is given (model.state_dict()'s share the
parameters' memory, so the model is restored in place) and returns the saved structure, with the
template's tensors and the saved values that are not tensors."""
from __future__ import annotations

import json
import weakref
from typing import Any, Union

import torch

from . import Checkpointer, Error, PendingCheckpoint, backend

_META = "gpmkit.torch.meta"   # the chunk of the JSON description
_META_MIN = 1 << 16           # its smallest size: 8 bytes of length, then the JSON
_TENSOR = "__gpmkit_tensor__"


def _device():
    """The device whose memory the checkpointer captures: this process's current GPU (rank r of
    a job on cuda:r), or the CPU on the emulator."""
    if backend() == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _stream() -> int:
    """The current CUDA stream's handle, whose queued work (a training step, the staging copies)
    a save or load is ordered after; 0 on the emulator."""
    if backend() == "cuda":
        return torch.cuda.current_stream().cuda_stream
    return 0


def _chunk(i):
    return f"t{i}"


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def _dtype_name(dtype):
    """str(dtype), remembered: a save describes hundreds of tensors."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def _describe(obj, path, tensors):
    """The JSON-able description of obj; its tensors appended to `tensors` as (path, tensor)."""
    if isinstance(obj, torch.Tensor):
        tensors.append((path, obj))
        return {_TENSOR: len(tensors) - 1, "shape": list(obj.shape),
                "dtype": _dtype_name(obj.dtype)}
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, (str, int)):
                raise _error(f"key {path}/{k!r}: only str and int keys can be saved")
        return {"dict": [[k, _describe(v, f"{path}/{k}", tensors)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"tuple" if isinstance(obj, tuple) else "list":
                [_describe(v, f"{path}/{i}", tensors) for i, v in enumerate(obj)]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    raise _error(f"key {path}: a {type(obj).__name__} is neither a tensor nor a JSON value")


def _rebuild(desc, tensors):
    if _TENSOR in desc:
        return tensors[desc[_TENSOR]]
    if "dict" in desc:
        return {k: _rebuild(v, tensors) for k, v in desc["dict"]}
    if "list" in desc:
        return [_rebuild(v, tensors) for v in desc["list"]]
    if "tuple" in desc:
        return tuple(_rebuild(v, tensors) for v in desc["tuple"])
    return desc["value"]


def _error(message, code="invalid_argument"):
    """A gpmkit.Error with `code`, as the C++ core raises them."""
    e = Error(message)
    e.code = code
    return e


def _capturable(t, device):
    """Whether the checkpointer can capture t where it is: in `device`'s memory, contiguous, and
    8-byte aligned (a view may start anywhere in its storage)."""
    return t.device == device and t.is_contiguous() and t.data_ptr() % 8 == 0


def _where(t):
    """What identifies tensor t's memory for Checkpointer._attach."""
    return (t.data_ptr(), t.nbytes, t.dtype, t.device)


def _add(ck, path, name, tensor, group, where=None):
    """Registers `tensor` as chunk `name` (with `where`, only if its memory changed); an error
    names the state dict's key `path`."""
    try:
        if where is None:
            ck.add(name, tensor, group)
        else:
            ck._attach(name, tensor, group, where)
    except Error as e:
        raise _error(f"key {path}: {e}", getattr(e, "code", "invalid_argument")) from e


class _Staging:
    """Device buffers for the tensors of a group that the checkpointer cannot capture where they
    are, kept from save to save while the group's structure stays: their chunks keep their memory
    (no new registration). On a GPU the CPU tensors (an optimizer's step counters) are copied into
    a pinned buffer and from it in one copy on the current stream: a synchronous copy each, as
    .to("cuda") makes, costs some microseconds a tensor and waits for the work queued on the
    GPU. Other tensors (strided views, tensors on another device) are copied into a buffer of
    their own on the current stream."""

    _ALIGN = 256  # each CPU tensor's place in the buffers, aligned as cudaMalloc aligns

    def __init__(self):
        self.key = None
        self.slots = {}       # tensor index -> the device tensor its chunk captures
        self.pinned = {}      # tensor index -> its place in the pinned buffer (CPU tensors)
        self.host = self.device = None
        self.uploaded = None  # an event after the last copy from the pinned buffer

    def stage(self, tensors, dev):
        """{index: tensor on `dev`} holding the values of `tensors` ((index, tensor) pairs) as of
        this call, in buffers that the next call with the same shapes and dtypes reuses."""
        key = (dev, tuple((i, tuple(t.shape), t.dtype, t.device.type) for i, t in tensors))
        if key != self.key:
            self._lay_out(tensors, dev)
            self.key = key
        with torch.no_grad():
            if self.pinned:
                if self.uploaded is not None:
                    self.uploaded.synchronize()  # the last copy has read the pinned buffer
                # one dispatch for all of them: an optimizer has a step counter per parameter
                pairs = [(self.pinned[i], t) for i, t in tensors if i in self.pinned]
                torch._foreach_copy_([d for d, _ in pairs], [t for _, t in pairs])
                self.device.copy_(self.host, non_blocking=True)
                self.uploaded = torch.cuda.Event()
                self.uploaded.record()
            for i, t in tensors:
                if i not in self.pinned:
                    self.slots[i].copy_(t)
        return self.slots

    def _lay_out(self, tensors, dev):
        gpu = dev.type == "cuda"
        self.slots, self.pinned, self.uploaded = {}, {}, None
        places, end = {}, 0
        for i, t in tensors:
            if gpu and t.device.type == "cpu":
                places[i] = end
                end += -(-t.numel() * t.element_size() // self._ALIGN) * self._ALIGN
        self.host = torch.empty(end, dtype=torch.uint8, pin_memory=True) if places else None
        self.device = torch.empty(end, dtype=torch.uint8, device=dev) if places else None
        for i, t in tensors:
            if i in places:
                n = t.numel() * t.element_size()
                at = slice(places[i], places[i] + n)
                self.pinned[i] = self.host[at].view(t.dtype).view(t.shape)
                self.slots[i] = self.device[at].view(t.dtype).view(t.shape)
            else:
                self.slots[i] = torch.empty(t.shape, dtype=t.dtype, device=dev)


class _Meta:
    """The description chunk: a uint8 tensor on the device holding length + JSON. A chunk keeps
    its size from its first save, so it is made twice as large as the first description needs
    (at least 64 KiB), leaving room for the structure to grow."""

    def __init__(self, nbytes):
        self.tensor = torch.zeros(nbytes, dtype=torch.uint8, device=_device())
        self.written = None
        self.described = None  # the description `written` encodes

    @staticmethod
    def size_for(data):
        n = _META_MIN
        while n < 2 * (len(data) + 8):
            n *= 2
        return n

    def write(self, data):
        room = self.tensor.numel() - 8
        if len(data) > room:
            raise _error(f"the state dict's description takes {len(data)} bytes, more than the "
                         f"{room} this checkpoint's first save left room for: save the values "
                         "that are not tensors elsewhere, or start a new checkpoint")
        if data == self.written:
            return  # unchanged since this checkpointer's last save: no copy, and a skipped chunk
        buf = len(data).to_bytes(8, "little") + data
        self.tensor[:len(buf)].copy_(torch.frombuffer(bytearray(buf), dtype=torch.uint8))
        self.written = data

    def read(self):
        raw = bytes(self.tensor.cpu().numpy())
        n = int.from_bytes(raw[:8], "little")
        if n == 0 or n > len(raw) - 8:
            raise _error("the checkpoint holds no gpmkit.torch description", "corrupt")
        return json.loads(raw[8:8 + n])


# Each checkpointer's description chunk and staging buffers per group, kept between saves.
_metas: weakref.WeakKeyDictionary[Checkpointer, dict[int, _Meta]] = weakref.WeakKeyDictionary()
_stagings: weakref.WeakKeyDictionary[Checkpointer, dict[int, _Staging]] = \
    weakref.WeakKeyDictionary()


def _saved_meta_bytes(ck, group):
    """The size of the group's description chunk in the checkpoint, None if it has none."""
    for c in ck.chunks():
        if c["name"] == _META and c["group"] == group:
            return c["bytes"]
    return None


def _meta_for_save(ck, group, desc):
    """The group's description chunk, holding `desc`: encoded again only when it changed (a
    training loop saves the same structure each time, and encoding it costs a millisecond)."""
    per_group = _metas.setdefault(ck, {})
    meta = per_group.get(group)
    if meta is not None and meta.described == desc:
        return meta
    data = json.dumps(desc, separators=(",", ":")).encode()
    if meta is None:
        meta = per_group[group] = _Meta(_saved_meta_bytes(ck, group) or _Meta.size_for(data))
    meta.write(data)
    meta.described = desc
    return meta


def save(ck: Checkpointer, state: Any, group: int = 0,
         wait: bool = True) -> Union[dict[str, Any], PendingCheckpoint]:
    """Checkpoints `state` (a dict or list nesting tensors and JSON values) into checkpointer
    `ck`'s `group`: what Checkpointer.save returns, or with wait=False a PendingCheckpoint as soon
    as the tensors are captured (they may change at once; wait() returns once durable)."""
    tensors: list[tuple[str, torch.Tensor]] = []
    meta = _meta_for_save(ck, group, _describe(state, "", tensors))
    _add(ck, _META, _META, meta.tensor, group, _where(meta.tensor))
    # state_dict()'s tensors are detached already; keep_vars=True ones are not
    tensors = [(p, t.detach() if t.requires_grad else t) for p, t in tensors]
    dev = _device()
    staging = _stagings.setdefault(ck, {}).setdefault(group, _Staging())
    staged = staging.stage([(i, t) for i, (_, t) in enumerate(tensors)
                            if not _capturable(t, dev)], dev)
    for i, (path, t) in enumerate(tensors):
        d = staged.get(i, t)
        _add(ck, path, _chunk(i), d, group, _where(d))
    return ck.save({}, group=group, wait=wait, stream=_stream())


def load(ck: Checkpointer, template: Any, group: int = 0) -> Any:
    """Restores the last completed save of `group` into the tensors of `template` (the same
    structure as saved: same keys, shapes and dtypes) and returns the saved structure with those
    tensors and the saved values that are not tensors. The checkpoint is restored into device
    buffers first and checked against the template, so a key missing from the template, or a
    tensor of another shape or dtype, raises Error naming the key and changes no tensor."""
    meta = _Meta(_saved_meta_bytes(ck, group) or _META_MIN)
    _add(ck, _META, _META, meta.tensor, group)
    tensors: list[tuple[str, torch.Tensor]] = []
    _describe(template, "", tensors)
    staged = [torch.empty(t.shape, dtype=t.dtype, device=_device()) for _, t in tensors]
    for i, ((path, _), d) in enumerate(zip(tensors, staged)):
        _add(ck, path, _chunk(i), d, group)
    ck.restore(group, stream=_stream())
    desc = meta.read()
    saved: list[tuple[str, dict[str, Any]]] = []
    _describe_paths(desc, "", saved)
    paths = [p for p, _ in tensors]
    saved_paths = [p for p, _ in saved]
    if saved_paths != paths:
        # the first template key the save lacks, else the first saved key the template lacks,
        # else the first out of order
        differ = ([p for p in paths if p not in saved_paths] +
                  [p for p in saved_paths if p not in paths] +
                  [a for a, b in zip(paths, saved_paths) if a != b])
        raise _error(f"key {differ[0]}: the template's tensors are not the saved ones (saved "
                     f"{len(saved_paths)}, template {len(paths)}): build it like the saved state")
    for (path, t), (_, s) in zip(tensors, saved):
        if list(t.shape) != s["shape"] or str(t.dtype) != s["dtype"]:
            raise _error(f"key {path}: the template holds {str(t.dtype)} {list(t.shape)}, the "
                         f"checkpoint {s['dtype']} {s['shape']}")
    with torch.no_grad():
        for (_, t), d in zip(tensors, staged):
            t.copy_(d)
    return _rebuild(desc, [t for _, t in tensors])


def _describe_paths(desc, path, out):
    """The (path, tensor description) pairs of a saved description, in save order."""
    if _TENSOR in desc:
        out.append((path, desc))
    elif "dict" in desc:
        for k, v in desc["dict"]:
            _describe_paths(v, f"{path}/{k}", out)
    elif "list" in desc or "tuple" in desc:
        for i, v in enumerate(desc.get("list", desc.get("tuple"))):
            _describe_paths(v, f"{path}/{i}", out)
