"""em.init, @em.compile and the compiled-program object: traces lazily on first use, checks and
converts call arguments (nothing is silently converted), runs, and exposes introspection."""
import functools
import inspect
import struct

import numpy as np

from . import _ember as _C
from . import _dtypes as D
from . import _tracing as T
from ._tensor import Tensor, _check_size, from_numpy_arg
from ._value import Value

_KNOWN_BACKENDS = ("cpu", "vulkan", "vulkan-hlsl", "opengl", "cuda")
_BUILT_BACKENDS = tuple(_C.built_backends())
_LANG = {"cpu": "cpp", "cuda": "cuda", "vulkan": "glsl", "vulkan-hlsl": "hlsl", "opengl": "glsl"}
_state = {"backend": None}


def init(backend="auto"):
    """Chooses the backend for programs compiled from now on: "cpu", "vulkan" (GLSL kernels),
    "vulkan-hlsl" (the Vulkan runtime fed HLSL kernels), "opengl", "cuda" or "auto" (CUDA, then a
    GPU Vulkan device, then cpu). Raises ember.BackendError if it is not built or has no device."""
    if backend != "auto" and backend not in _KNOWN_BACKENDS:
        raise _C.BackendError(f"unknown backend {backend!r}; expected one of auto, {', '.join(_KNOWN_BACKENDS)}")
    backend = _C.resolve_backend(backend)
    if backend not in _BUILT_BACKENDS:
        raise _C.BackendError(f"the {backend} backend is not built into this Ember "
                              f"(available: {', '.join(_BUILT_BACKENDS)})")
    reason = _C.backend_unavailable(backend)
    if reason:
        raise _C.BackendError(reason)
    _state["backend"] = backend


def backend():
    """The name of the backend programs compile for (em.init's choice, cpu by default)."""
    return _state["backend"] or _BUILT_BACKENDS[0]


def device_info():
    """The device the current backend runs on, in words (e.g. "llvmpipe (LLVM 15.0.6, 256 bits) via
    Vulkan 1.3")."""
    return _C.device_info(backend())


def compile(fn=None, *, name=None):
    """Compiles a function of annotated tensor/scalar arguments (`@em.compile` or `em.compile(fn)`).
    The returned program traces and compiles on first use."""
    if fn is None:
        return lambda f: Program(f, name)
    return Program(fn, name)


def _param_spec(fn, pname, ann):
    if isinstance(ann, (D.TensorType, D.DType)):
        return ann
    if ann in (float, int, bool):
        return D.as_dtype(ann)
    raise _C.TypeError(f"parameter '{pname}' of {fn.__qualname__} has annotation {ann!r}; expected a tensor "
                       "type like em.f32['N', 3], or a scalar type (em.f32, em.i32, em.u32, em.bool, float, int)")


def _signature(fn):
    """(signature, [(name, spec)]) with every parameter annotated; raises ember.TypeError otherwise."""
    sig = inspect.signature(fn)
    try:
        anns = inspect.get_annotations(fn, eval_str=True)
    except Exception as e:  # a string annotation that does not evaluate
        raise _C.TypeError(f"cannot evaluate the annotations of {fn.__qualname__}: {e}") from e
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise _C.TypeError(f"{fn.__qualname__}: *args/**kwargs parameters cannot be compiled ('{p.name}')")
        if p.name not in anns:
            raise _C.TypeError(f"parameter '{p.name}' of {fn.__qualname__} has no annotation; annotate it "
                               "with a tensor type like em.f32['N', 3] or a scalar type like em.f32")
        params.append((p.name, _param_spec(fn, p.name, anns[p.name])))
    return sig, params


def _scalar_word(pname, dt, v):
    """The 32-bit word of scalar argument `v` for dtype `dt`; raises ember.TypeError if it does not fit."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, np.generic):
        v = v.item()
    if dt is D.bool:
        if isinstance(v, bool):
            return int(v)
    elif dt is D.f32:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return struct.unpack("<I", struct.pack("<f", float(v)))[0]
    elif isinstance(v, int) and not isinstance(v, bool):
        lo, hi = (-2 ** 31, 2 ** 31) if dt is D.i32 else (0, 2 ** 32)
        if not lo <= v < hi:
            raise _C.TypeError(f"argument '{pname}' is {v}, which does not fit in {dt.name}")
        return v & 0xFFFFFFFF
    raise _C.TypeError(f"argument '{pname}' expects a scalar of dtype {dt.name}, got {type(v).__name__} {v!r}")


class Program:
    """A compiled function: call it with NumPy arrays / em.Tensor and Python numbers; it returns
    em.Tensor (or a tuple of them). Introspection: kernel_count, ir(stage), source(lang), stats.

    Tensor arguments are passed without a copy (CPU backend), so a program that assigns into an
    argument writes the caller's array. bool, non-contiguous (strided, transposed, negative
    strides) and read-only arrays are copied first; when the program writes such an argument,
    the copy is written back into the caller's array after the call (a read-only one is an
    ember.TypeError before anything runs). On the GPU backends, NumPy arguments are copied into
    device memory and the ones the program writes are copied back after the call, so the same
    holds; em.Tensor results stay in device memory and are used in place when passed back in.
    Results never alias an argument."""

    def __init__(self, fn, name=None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or fn.__name__
        self._sig = None
        self._params = None
        self._tracer = None
        self._traced_text = None
        self._returns = None  # "none", "one" or the number of returned values (a tuple)
        self._compiled = {}  # backend name -> CompiledProgram
        self._written = {}  # backend name -> positions of the arguments the program writes

    def __repr__(self):
        state = "compiled" if self._compiled else ("traced" if self._traced_text else "not traced")
        return f"<em.Program {self.name} ({state})>"

    # Tracing and compiling.
    def _trace(self):
        if self._traced_text is not None:
            return
        sig, params = _signature(self.fn)
        tr = _C.Tracer(self.name)
        args = []
        for pname, spec in params:
            if isinstance(spec, D.TensorType):
                args.append(Value(tr.input(spec.dtype._c, list(spec.dims), pname)))
            else:
                args.append(Value(tr.scalar(spec._c, pname)))
        T.push(tr)
        try:
            result = self.fn(*args)
            if result is None:
                outs, kind = [], "none"
            elif isinstance(result, (tuple, list)):
                outs, kind = list(result), len(result)
            else:
                outs, kind = [result], "one"
            trc = T.tracer()
            for i, o in enumerate(outs):
                if not isinstance(o, Value) and not T.is_scalar(o):
                    raise T.error(_C.TypeError, f"{self.name} returns a {type(o).__name__} (return value {i}); "
                                                "return traced values or Python numbers")
                trc.output(T.node_of(trc, o))
        finally:
            T.pop()
        self._sig, self._params, self._returns = sig, params, kind
        self._tracer, self._traced_text = tr, tr.print()

    def _compile(self):
        """The program compiled for the current backend (one compilation per backend used)."""
        be = backend()
        if be in self._compiled:
            return self._compiled[be]
        if self._tracer is None:
            self._traced_text = None  # the tracer gave its program to another backend: trace again
        self._trace()
        tr, self._tracer = self._tracer, None
        try:
            # The traced text is the program cache's key (printed from this tracer's program by
            # _trace), passed so that it is not printed twice.
            self._compiled[be] = _C.CompiledProgram(tr, be, self._traced_text)
        except BaseException:
            self._traced_text = None  # the tracer gave its program away: trace again next time
            raise
        return self._compiled[be]

    # Calling.
    def _arguments(self, args, kwargs, copies=None):
        """The run arguments (em.Tensor or scalar words) after checking them; NumPy arrays that had
        to be copied are appended to `copies` as (position, array, tensor)."""
        if kwargs or len(args) != len(self._params):
            try:
                bound = self._sig.bind(*args, **kwargs)
            except TypeError as e:
                raise _C.TypeError(f"{self.name}: {e}") from None
            bound.apply_defaults()
            args = [bound.arguments[p] for p, _ in self._params]
        env, out = {}, []
        for (pname, spec), v in zip(self._params, args):
            if isinstance(spec, D.DType):
                out.append(_scalar_word(pname, spec, v))
                continue
            dt = spec.dtype
            if isinstance(v, Tensor):
                if v._dtype_name != dt.name:
                    raise _C.TypeError(f"argument '{pname}' expects {spec}, got an em.Tensor of dtype {v._dtype_name}")
                t = v
            elif isinstance(v, np.ndarray):
                if v.dtype != dt.np:
                    raise _C.TypeError(f"argument '{pname}' expects {spec} (NumPy dtype {dt.np}), got a NumPy array "
                                       f"of dtype {v.dtype}; convert it explicitly (e.g. .astype(np.{dt.np}))")
                _check_shape(pname, spec, v.shape, env)  # before any copy
                t = from_numpy_arg(v, dt)
                if copies is not None and (dt is D.bool or not v.flags.c_contiguous or not v.flags.writeable):
                    copies.append((len(out), v, t))  # from_numpy_arg copied it
                out.append(t)
                continue
            else:
                raise _C.TypeError(f"argument '{pname}' expects a tensor {spec} (a NumPy array or em.Tensor), "
                                   f"got {type(v).__name__}")
            _check_shape(pname, spec, t.shape, env)
            out.append(t)
        return out

    def __call__(self, *args, **kwargs):
        """Runs the program (tracing and compiling it on the first call)."""
        if T.active() is not None:
            raise T.error(_C.Error, f"calling the compiled program {self.name} inside a traced function is "
                                    "not supported; call its Python function instead")
        self._trace()
        copies = []
        run_args = self._arguments(args, kwargs, copies)  # argument errors come before any compiling
        cp = self._compile()
        back = []
        if copies:  # arrays passed as copies: the ones the program writes get the copy back
            written = self._written.get(cp.backend_name)
            if written is None:
                written = self._written[cp.backend_name] = frozenset(cp.written_args)
            back = [(pos, a, t) for pos, a, t in copies if pos in written]
            for pos, a, _ in back:
                if not a.flags.writeable:
                    raise _C.TypeError(f"argument '{self._params[pos][0]}' is a read-only NumPy array, but "
                                       f"{self.name} writes into it; pass a writeable array (e.g. a .copy())")
        outs = cp.run(run_args)
        for _, a, t in back:
            np.copyto(a, t.numpy())
        if self._returns == "none":
            return None
        if self._returns == "one":
            return outs[0]
        return tuple(outs)

    def _interpret_stages(self, *args, lower_groups=False, tile_threads=False):
        """The reference interpreter's results as traced and after every pass that changed the IR
        (the pipeline as a backend with these options runs it): [(stage, [arrays])], each list the
        outputs followed by the tensor arguments after the run; a failing pass or verifier ends
        the list with ("error:after <pass>", message). Used by the differential fuzzer."""
        self._trace()
        if self._tracer is None:
            self._traced_text = None
            self._trace()
        run_args = self._arguments(args, {})
        return _C.interpret_stages(self._tracer, run_args, lower_groups, tile_threads)

    # Introspection.
    @property
    def kernel_count(self):
        """The number of kernels after fusion."""
        return self._compile().kernel_count

    def ir(self, stage="final"):
        """The IR text after a stage: "traced", a pass name (e.g. "fuse_kernels") or "final"."""
        if stage == "traced":
            self._trace()
            return self._traced_text
        return self._compile().ir(stage)

    def source(self, lang=None):
        """The generated kernel source: "cpp", "glsl" or "hlsl" (the backend's language by default; GPU
        languages print one shader per kernel)."""
        cp = self._compile()
        return cp.source(lang or _LANG.get(cp.backend_name, "cpp"))

    @property
    def stats(self):
        """Compile statistics: passes [{name, ms, changed, visits}], passes_ms, codegen_ms (printing
        the distinct kernels), compile_ms (cache lookups, compiler runs and loading), kernels (the
        kernel count), distinct_kernels (distinct kernel bodies: kernels bound to other buffers or
        params but otherwise equal share one compiled function or shader), compiled_kernels (the
        distinct kernels this compile had to compile: per-kernel cache misses), translation_units
        (compiler runs: cpu translation units compiled concurrently, or GPU shaders), cache_hit
        (True when nothing was compiled), buffers, cache_key, tape_bytes (autodiff tape of the
        last call), program_cache_hit and program_cache_key.

        The program cache keeps each lowered program on disk ($EMBER_CACHE_DIR, `<program_cache_key>.prog`),
        keyed by the traced IR, its source lines, the backend and this Ember build. When a process
        compiles a program another process lowered already, program_cache_hit is True: the pipeline
        did not run, `passes` is empty and passes_ms is the time it took to load the saved program.
        EMBER_PROGRAM_CACHE=0 turns the program cache off, and so do EMBER_VERIFY=1 and
        EMBER_DEBUG=ir|time (then program_cache_key is empty). ir(stage) works either way: stages
        other than "final" run the pipeline on a copy of the traced program when first asked for."""
        return self._compile().stats


def _check_shape(pname, spec, shape, env):
    """Checks an argument's shape against its annotation; `env` binds symbolic names across arguments."""
    shape = tuple(int(s) for s in shape)
    _check_size(f"argument '{pname}'", shape)
    if len(shape) != len(spec.dims):
        raise _C.ShapeError(f"argument '{pname}' has shape {shape}, expected {spec} ({len(spec.dims)} dimensions)")
    for k, (d, s) in enumerate(zip(spec.dims, shape)):
        if isinstance(d, int) and d != s:
            raise _C.ShapeError(f"argument '{pname}' has shape {shape}, expected {spec}: dimension {k} is {s}, "
                                f"expected {d}")
        if isinstance(d, str):
            prev = env.setdefault(d, (s, pname, k))
            if prev[0] != s:
                raise _C.ShapeError(f"argument '{pname}' has shape {shape}, expected {spec}: dimension {k} is {s}, "
                                    f"but {d} = {prev[0]} from dimension {prev[2]} of argument '{prev[1]}'")

