"""Arrays in the memory gpmkit's checkpoints capture (the device's), for tests that run on both
backends: NumPy arrays on the emulator, whose device is the CPU; PyTorch CUDA tensors on a GPU.
device_arrays() returns None where this backend's arrays need a package that is missing."""
import gpmkit


class _NumPy:
    def __init__(self):
        import numpy
        self.np = numpy

    def zeros(self, n, dtype):
        return self.np.zeros(n, dtype=dtype)

    def arange(self, n, dtype):
        return self.np.arange(n, dtype=dtype)

    def full(self, n, value, dtype):
        return self.np.full(n, value, dtype=dtype)

    @staticmethod
    def nbytes(a):
        return a.nbytes

    @staticmethod
    def all_equal(a, b):
        return bool((a == b).all())

    @staticmethod
    def first(a):
        return int(a[0])


class _TorchCuda:
    def __init__(self, torch):
        self.torch = torch

    def _dtype(self, dtype):
        return getattr(self.torch, dtype)

    def zeros(self, n, dtype):
        return self.torch.zeros(n, dtype=self._dtype(dtype), device="cuda")

    def arange(self, n, dtype):
        return self.torch.arange(n, dtype=self._dtype(dtype), device="cuda")

    def full(self, n, value, dtype):
        return self.torch.full((n,), value, dtype=self._dtype(dtype), device="cuda")

    @staticmethod
    def nbytes(a):
        return a.numel() * a.element_size()

    @staticmethod
    def all_equal(a, b):
        return bool((a == b).all().item())

    @staticmethod
    def first(a):
        return int(a[0].item())


def device_arrays():
    if gpmkit.backend() == "host":
        return _NumPy()
    try:
        import torch
    except ImportError:
        return None
    return _TorchCuda(torch) if torch.cuda.is_available() else None
