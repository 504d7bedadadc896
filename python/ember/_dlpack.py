"""Zero-copy views of an em.Tensor's memory for other libraries: `t.__dlpack__()` and
`t.__dlpack_device__()` (the DLPack protocol: np.from_dlpack(t), mpi4py buffers, torch.from_dlpack)
and `em.Tensor.view_numpy()`. An em.Tensor always lives in host memory (the GPU backends copy
results back), so the DLPack device is the CPU. A bool tensor exports its 32-bit words (0 or 1)
as uint32. Writes through a view change the tensor; the view keeps the tensor's memory alive.

Tensors do not implement the buffer protocol on purpose: NumPy would then prefer it over
__array__, and np.asarray(t) would turn from a copy into a view (and a bool tensor into uint32)."""
import numpy as np

from ._tensor import Tensor

_KDLCPU = 1  # DLDeviceType kDLCPU


class _Interface:
    """An object NumPy wraps without copying (__array_interface__), holding the tensor alive."""

    __slots__ = ("__array_interface__", "tensor")


_NP = {"f32": "<f4", "i32": "<i4", "u32": "<u4", "bool": "<u4"}


def view_numpy(t):
    """view_numpy() -> numpy.ndarray

    ``t.view_numpy()``: a writable NumPy array sharing the tensor's memory (no copy; bool tensors
    as uint32 words 0/1); writes through it change the tensor, and it keeps the tensor's memory
    alive. np.asarray(t) and t.numpy() copy instead.

    >>> t = em.tensor(np.random.default_rng(0).normal(size=4).astype(np.float32))
    >>> a = t.view_numpy()
    >>> a[0] = 7.0
    >>> t.numpy()[0]
    7.0
    """
    holder = _Interface()
    holder.tensor = t
    holder.__array_interface__ = {"version": 3, "shape": tuple(t.shape), "typestr": _NP[t._dtype_name],
                                  "data": (t._data_ptr, False), "strides": None}
    return np.asarray(holder)


def _dlpack(self, *args, **kwargs):
    """DLPack export of the tensor's memory (no copy); arguments as ndarray.__dlpack__."""
    return view_numpy(self).__dlpack__(*args, **kwargs)


def _dlpack_device(self):
    """(kDLCPU, 0): em.Tensor memory is host memory."""
    return (_KDLCPU, 0)


Tensor.__dlpack__ = _dlpack
Tensor.__dlpack_device__ = _dlpack_device
Tensor.view_numpy = view_numpy
