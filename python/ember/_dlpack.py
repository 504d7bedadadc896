"""Zero-copy views of an em.Tensor's memory for other libraries and back: `t.__dlpack__()` and
`t.__dlpack_device__()` (the DLPack protocol, current specification: max_version, copy,
dl_device; np.from_dlpack(t), torch.from_dlpack(t), mpi4py buffers), `em.from_dlpack(x)` and
`em.Tensor.view_numpy()`. An em.Tensor's memory is host-addressable: host memory (DLPack kDLCPU)
or, on the cuda backend, CUDA managed memory (exported as kDLCUDA). A bool tensor exports its
32-bit words (0 or 1) as uint32. Writes through a view change the tensor; the view keeps the
tensor's memory alive (python/src/bind_dlpack.cpp holds the capsules' C side).

Tensors do not implement the buffer protocol on purpose: NumPy would then prefer it over
__array__, and np.asarray(t) would turn from a copy into a view (and a bool tensor into uint32)."""
import numpy as np

from . import _ember as _C
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


_KDLCUDA = 2  # kDLCUDA: the tensor lives in CUDA memory (the cuda backend's managed buffers)


def _device(t):
    """(DLPack device type, id) of tensor `t`: kDLCUDA for the cuda backend's buffers."""
    dev = _C._cuda_buffer_device(t._data_ptr)
    return (_KDLCUDA, dev) if dev >= 0 else (_KDLCPU, 0)


def _dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> PyCapsule

    DLPack export of the tensor's words (the current specification): a "dltensor_versioned"
    capsule (DLPack 1.0, not read-only) when the consumer passes max_version >= (1, 0), else the
    legacy "dltensor". No copy unless copy=True (then a host copy, flagged as copied). `dl_device`
    other than the tensor's own device raises BufferError. The cuda backend's tensors are exported
    as kDLCUDA after its queued kernels finish (any consumer stream may then read them).

    >>> t = em.tensor(np.random.default_rng(0).normal(size=3).astype(np.float32))
    >>> bool(np.array_equal(np.from_dlpack(t), t.numpy()))
    True
    """
    dev = _device(self)
    if dl_device is not None and tuple(dl_device) != dev:
        raise BufferError(f"em.Tensor.__dlpack__: the tensor is on DLPack device {dev}, not {tuple(dl_device)}")
    if dev[0] == _KDLCPU and stream is not None:
        raise BufferError("em.Tensor.__dlpack__: stream must be None for a CPU tensor")
    if copy is True and dev[0] != _KDLCPU:
        raise BufferError("em.Tensor.__dlpack__: copy=True makes a host copy; export the device tensor without a copy")
    if dev[0] == _KDLCUDA:
        _C._cuda_synchronize()
    versioned = max_version is not None and int(max_version[0]) >= 1
    return _C._dlpack_export(self, versioned, copy is True, dev[0], dev[1])


def _dlpack_device(self):
    """__dlpack_device__() -> (int, int)

    (kDLCPU, 0) = (1, 0) for tensors in host memory; (kDLCUDA, device) = (2, device) for the cuda
    backend's tensors.

    >>> em.tensor(np.random.default_rng(0).normal(size=3)).__dlpack_device__()
    (1, 0)
    """
    return _device(self)


def from_dlpack(x, *, copy=None):
    """from_dlpack(x, *, copy=None) -> em.Tensor

    An em.Tensor over the memory of `x`, any object with __dlpack__ (a NumPy array, a PyTorch CPU
    tensor, ...), without a copy: writes on either side are seen on the other, and the tensor
    keeps the producer's memory alive. f32, i32 and u32 elements are shared as they are; bool (one
    byte each), non-contiguous and read-only tensors are copied (copy=None), refused with
    ember.TypeError (copy=False), and copy=True always copies. Other dtypes raise ember.TypeError;
    device memory (kDLCUDA) raises ember.BackendError (em.Tensor memory is host-addressable).

    >>> a = np.random.default_rng(0).normal(size=4).astype(np.float32)
    >>> t = em.from_dlpack(a)
    >>> a[0] = 7.0
    >>> float(t.numpy()[0])
    7.0
    """
    if copy not in (None, True, False):
        raise _C.TypeError(f"em.from_dlpack: copy must be None, True or False, got {copy!r}")
    if not hasattr(x, "__dlpack__"):
        raise _C.TypeError(f"em.from_dlpack: {type(x).__name__} has no __dlpack__ (expected a NumPy array, a "
                           "PyTorch tensor or another DLPack producer)")
    try:
        try:
            cap = x.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer from before DLPack 1.0 (NumPy < 2.1, older PyTorch)
            cap = x.__dlpack__()
    except BufferError as e:  # e.g. NumPy 1.x exports no bool arrays
        raise _C.TypeError(f"em.from_dlpack: {type(x).__name__} cannot export this tensor through DLPack: {e}") from None
    return _C._dlpack_import(cap, -1 if copy is None else int(bool(copy)))


Tensor.__dlpack__ = _dlpack
Tensor.__dlpack_device__ = _dlpack_device
Tensor.view_numpy = view_numpy
