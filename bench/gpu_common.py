"""Helpers for the GPU setups (bench/gpu.py, GPU_IMPLS in the workload modules): each finds its
library on the device opts["device"] names ("cuda" on the GPU; "cpu" lets a test run the same peer
code where there is no GPU) or raises Skip saying why, and says how to wait for the device.

A GPU setup is setup(inputs, opts) -> (step, fetch): it uploads the inputs once; step() runs one
step on them and returns when the device is done; fetch() returns the last step's outputs as NumPy.
"""
import os

import numpy as np

from common import Skip, import_ember, require


def torch_on(opts):
    """(torch, device, sync): PyTorch on opts["device"]; sync() waits for the device's queued work.
    float32 matmuls stay full FP32 by PyTorch's default (no TF32), the NumPy reference's math; the
    flags are not set, as newer torch refuses a mix of its legacy and new TF32 switches."""
    torch = require("torch")
    dev = opts.get("device", "cuda")
    if dev == "cuda" and not torch.cuda.is_available():
        raise Skip(f"torch {torch.__version__}: no CUDA device (torch.cuda.is_available() is False)")
    if dev == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    return torch, torch.device(dev), sync


def torch_compile(torch, fn):
    """torch.compile(fn) in its default mode, or Skip when this torch cannot compile."""
    try:
        return torch.compile(fn, dynamic=False)
    except Exception as e:
        raise Skip(f"torch.compile unavailable: {type(e).__name__}: {e}") from None


def jax_on(opts):
    """(jax, device): JAX's first device of opts["device"]'s platform ("cuda" -> its gpu backend),
    float32 matmuls at full precision (JAX's GPU default would use TF32)."""
    jax = require("jax")
    dev = opts.get("device", "cuda")
    platform = "gpu" if dev == "cuda" else dev
    try:
        device = jax.devices(platform)[0]
    except RuntimeError as e:
        raise Skip(f"jax {jax.__version__}: no {platform} device: {str(e).splitlines()[0]}") from None
    jax.config.update("jax_default_matmul_precision", "highest")
    return jax, device


def xp_on(opts):
    """(xp, sync): CuPy and a wait for its current stream; with opts["xp"] == "numpy", NumPy and a
    no-op, so the CuPy code (written like the NumPy reference) can be checked without a GPU."""
    if opts.get("xp") == "numpy":
        return np, lambda: None
    cp = require("cupy")
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # cupy raises CUDARuntimeError when there is no driver or device
        raise Skip(f"cupy {cp.__version__}: no CUDA device: {type(e).__name__}: {e}") from None
    if count < 1:
        raise Skip(f"cupy {cp.__version__}: no CUDA device")
    return cp, lambda: cp.cuda.get_current_stream().synchronize()


def ember_on(opts):
    """Imports ember and selects opts["backend"]; a backend that is not built or has no device is a
    Skip with ember's reason."""
    em = import_ember()
    try:
        em.init(backend=opts.get("backend", "cuda"))
    except em.BackendError as e:
        raise Skip(f"ember backend {opts.get('backend')!r}: {e}") from None
    return em


_UPLOADS = {}


def ember_upload(em, *arrays):
    """The arrays as ember Tensors in the backend's memory: each is returned by a copy program, as
    em.tensor gives host memory that a cuda program copies in on every call. Warns when a cuda
    result is not device memory (the timing would then include the copies)."""
    out = []
    for a in arrays:
        a = np.ascontiguousarray(a)
        dt = em.f32 if a.dtype.kind == "f" else em.i32
        key = (em.backend(), dt.name, a.ndim)
        if key not in _UPLOADS:
            def upload(x):
                return x
            upload.__annotations__ = {"x": dt[tuple(f"d{k}" for k in range(a.ndim))]}
            _UPLOADS[key] = em.compile(upload, name=f"bench_upload_{dt.name}_{a.ndim}")
        t = _UPLOADS[key](a.astype(dt.np, copy=False))
        if em.backend() == "cuda" and t.__dlpack_device__()[0] != 2:  # 2: kDLCUDA
            print(f"  warning: ember upload of {a.shape} is not in device memory", flush=True)
        out.append(t)
    return out


def steps(call, sync, to_numpy):
    """(step, fetch) for a GPU setup: step() runs call() (one step, returning its outputs), waits
    with sync(outputs) and keeps the outputs; fetch() returns the kept ones through to_numpy."""
    last = []

    def step():
        outs = call()
        outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
        sync(outs)
        last[:] = outs

    return step, lambda: tuple(to_numpy(t) for t in last)


def ember_steps(call):
    """steps() for an ember program: every ember call has synchronized when it returns."""
    return steps(call, lambda outs: None, lambda t: t.numpy())


def torch_steps(torch, call, sync, grad=False):
    """steps() for PyTorch: waits with sync() (torch.cuda.synchronize on the GPU); call() runs
    under torch.no_grad() unless `grad` (a training step)."""
    def run():
        with torch.set_grad_enabled(grad):
            return call()
    return steps(run, lambda outs: sync(), lambda t: t.detach().cpu().numpy())


def jax_steps(jax, call):
    """steps() for JAX: waits with jax.block_until_ready on the outputs."""
    return steps(call, jax.block_until_ready, np.asarray)


def xp_steps(xp, call, sync):
    """steps() for CuPy (or NumPy standing in for it): waits with sync()."""
    to_numpy = np.asarray if xp is np else xp.asnumpy
    return steps(call, lambda outs: sync(), to_numpy)
