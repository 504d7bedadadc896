"""em.init, @em.compile and the compiled-program object: traces lazily on first use, checks and
converts call arguments (nothing is silently converted), runs, and exposes introspection."""
import functools
import inspect
import logging
import struct
import time
import weakref

import numpy as np

from . import _ember as _C
from . import _dtypes as D
from . import _log
from . import _objargs as O
from . import _schedule
from . import _trace_cache
from . import _tracing as T
from ._tensor import Tensor, _check_size, from_numpy_arg
from ._value import Value

_KNOWN_BACKENDS = ("cpu", "vulkan", "vulkan-hlsl", "opengl", "cuda")
_BUILT_BACKENDS = tuple(_C.built_backends())
_LANG = {"cpu": "cpp", "cuda": "cuda", "vulkan": "glsl", "vulkan-hlsl": "hlsl", "opengl": "glsl"}
_state = {"backend": None}


def init(backend="auto"):
    """init(backend="auto") -> None

    Chooses the backend for programs compiled from now on: "cpu" (C++ kernels compiled by the
    system compiler, run with OpenMP), "vulkan" (GLSL kernels), "vulkan-hlsl" (the Vulkan runtime
    fed HLSL kernels), "opengl", "cuda", or "auto" (CUDA, then a GPU Vulkan device, then cpu).
    Raises ember.BackendError if the backend is not built or has no device. A program keeps one
    compiled form per backend, so switching back and forth does not recompile.

    >>> em.init("cpu")
    >>> em.backend()
    'cpu'
    >>> try:
    ...     em.init("metal")
    ... except em.BackendError as e:
    ...     print("BackendError")
    BackendError
    """
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
    """backend() -> str

    The name of the backend programs compile for now (em.init's choice; cpu by default).

    >>> em.init("cpu")
    >>> em.backend()
    'cpu'
    """
    return _state["backend"] or _BUILT_BACKENDS[0]


def device_info():
    """device_info() -> str

    The device the current backend runs on, in words: for example "llvmpipe (LLVM 15.0.6, 256
    bits) via Vulkan 1.3", or the host CPU for the cpu backend.

    >>> em.init("cpu")
    >>> isinstance(em.device_info(), str) and len(em.device_info()) > 0
    True
    """
    return _C.device_info(backend())


def compile(fn=None, *, name=None, trace_cache=True, schedule=(), fast_math=False):
    """compile(fn=None, *, name=None, trace_cache=True, schedule=(), fast_math=False) -> em.Program

    Compiles a Python function whose parameters are annotated with tensor types
    (``em.f32["N", 3]``), scalar types (``em.f32``, ``float``, ``int``) or em.nn.Module / em.optim
    classes; use it as ``@em.compile``, ``@em.compile(name=...)`` or ``prog = em.compile(fn)``. The
    returned em.Program traces the function on first use (the body runs once, on em.Value
    stand-ins), fuses it into kernels and compiles them for the current backend (cached on disk in
    $EMBER_CACHE_DIR). ``trace_cache=False`` always traces in a new process (for a function whose
    trace reads files, clocks or random state). ``schedule``: em.schedule requests applied when it
    compiles (see em.Program.schedule). ``fast_math=True``: on the GPU backends, exp, exp2, log,
    log2, sin, cos, tan, sinh, cosh, tanh and pow are the shading language's builtins (faster, but
    only as exact as the driver makes them: several ulp, far more at large arguments) instead of
    Ember's float-only functions (within 1-2 ulp, as on the CPU); EMBER_FAST_MATH=1 turns it on
    for every program. The cpu backend ignores it.

    >>> @em.compile
    ... def step(X: em.f32["N", 3], V: em.f32["N", 3], dt: em.f32):
    ...     return X + V * dt
    >>> rng = np.random.default_rng(0)
    >>> X, V = rng.normal(size=(2, 5, 3)).astype(np.float32)
    >>> bool(np.allclose(step(X, V, 0.1).numpy(), X + V * 0.1))
    True
    >>> step.kernel_count
    1
    """
    if fn is None:
        return lambda f: Program(f, name, trace_cache, schedule, fast_math)
    return Program(fn, name, trace_cache, schedule, fast_math)


def _param_spec(fn, pname, ann):
    if isinstance(ann, (D.TensorType, D.DType)):
        return ann
    if ann in (float, int, bool):
        return D.as_dtype(ann)
    if O.is_object_class(ann):
        return O.ObjSpec(ann)
    raise _C.TypeError(f"parameter '{pname}' of {fn.__qualname__} has annotation {ann!r}; expected a tensor "
                       "type like em.f32['N', 3], a scalar type (em.f32, em.i32, em.u32, em.bool, float, int), "
                       "or an em.nn.Module or em.optim optimizer class")


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
    """Program(fn, name=None, trace_cache=True, schedule=(), fast_math=False)

    A compiled function, made by em.compile: call it with NumPy arrays / em.Tensor and Python
    numbers; it returns an em.Tensor, a tuple of them, or None. Arguments are checked against the
    annotations before anything runs (a wrong shape is an ember.ShapeError, a wrong dtype an
    ember.TypeError: nothing is silently converted). Introspection: kernel_count, ir(stage),
    source(lang), stats.

    Tensor arguments are passed without a copy (CPU backend), so a program that assigns into an
    argument writes the caller's array. bool, non-contiguous (strided, transposed, negative
    strides) and read-only arrays are copied first; when the program writes such an argument,
    the copy is written back into the caller's array after the call (a read-only one is an
    ember.TypeError before anything runs). On the GPU backends, NumPy arguments are copied into
    device memory and the ones the program writes are copied back after the call, so the same
    holds; em.Tensor results stay in device memory and are used in place when passed back in.
    Results never alias an argument.

    >>> @em.compile
    ... def add_into(acc: em.f32["N"], x: em.f32["N"]):
    ...     acc[...] = acc + x
    >>> acc = np.zeros(4, np.float32)
    >>> x = np.random.default_rng(0).normal(size=4).astype(np.float32)
    >>> add_into(acc, x); add_into(acc, x)
    >>> isinstance(add_into, em.Program), bool(np.allclose(acc, 2 * x))
    (True, True)
    >>> try:
    ...     add_into(acc, np.zeros(5, np.float32))
    ... except em.ShapeError:
    ...     print("ShapeError")
    ShapeError
    """

    def __init__(self, fn, name=None, trace_cache=True, schedule=(), fast_math=False):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or fn.__name__
        self._schedule = _schedule.requests(schedule)
        self._fast_math = bool(fast_math)
        self._use_trace_cache = trace_cache
        self._trace_key = None  # the trace cache key, once computed ("" when uncacheable)
        self._trace_ms = 0.0  # the last trace's time
        self._trace_hits = set()  # backends whose program came from the trace cache
        # Compile keeping a copy of the traced program (ir stages, explain): set once one is asked for.
        self._keep_trace = False
        self._sig = None
        self._params = None
        self._tracer = None
        self._traced_text = None
        self._returns = None  # "none", "one" or the number of returned values (a tuple)
        self._compiled = {}  # backend name -> CompiledProgram
        self._written = {}  # backend name -> positions of the arguments the program writes
        # Module/optimizer arguments (python/ember/_objargs.py): their structures {position: ...}
        # as traced, whether one has no content fingerprint, and the last call's objects (weak).
        self._obj_structs = None
        self._obj_uncacheable = False
        self._obj_last = None
        self._has_obj = None  # whether a parameter is a Module or optimizer (known once annotations are read)
        # The last call's object arguments as run arguments, while their _em_snapshot checks hold:
        # (backend, {position: weakref}, [checks], {position: [run values]}) or None.
        self._snap = None
        # The last call's em.Tensor arguments (weak, by position) once their shapes were checked:
        # a call passing the very same tensors (whose shapes cannot change) skips those checks.
        self._same_tensors = None

    def __repr__(self):
        state = "compiled" if self._compiled else ("traced" if self._traced_text else "not traced")
        return f"<em.Program {self.name} ({state})>"

    # Tracing and compiling.
    def _trace(self, call_args=None):
        if self._traced_text is not None:
            return
        t0 = time.perf_counter()
        sig, params = _signature(self.fn)
        tr = _C.Tracer(self.name)
        args, objs = [], None
        if any(isinstance(spec, O.ObjSpec) for _, spec in params):
            objs = self._trace_objects(params, call_args)
        for k, (pname, spec) in enumerate(params):
            if isinstance(spec, D.TensorType):
                args.append(Value(tr.input(spec.dtype._c, list(spec.dims), pname)))
            elif isinstance(spec, D.DType):
                args.append(Value(tr.scalar(spec._c, pname)))
            else:  # a Module or optimizer: one input per leaf; rebuilt below
                vals = []
                for name, lspec in O.leaf_specs(objs[1][k]):
                    if isinstance(lspec, D.TensorType):
                        vals.append(Value(tr.input(lspec.dtype._c, list(lspec.dims), name)))
                    else:
                        vals.append(Value(tr.scalar(lspec._c, name)))
                args.append(vals)
        if objs is not None:  # modules first: optimizers find their parameters' Values in ctx
            ctx = objs[0]
            for k in sorted(objs[1], key=lambda k: getattr(params[k][1].cls, "_em_order", 0)):
                args[k] = objs[2][k]._em_rebuild(iter(args[k]), ctx)
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
            # The outputs' source line is the function's definition, not the line that started the
            # trace (a call, or ir() tracing again): the traced program, and with it the program
            # cache key, do not depend on where it was traced from.
            code = getattr(self.fn, "__code__", None)
            if code is not None:
                trc.set_loc(code.co_filename, code.co_firstlineno)
            for i, o in enumerate(outs):
                if not isinstance(o, Value) and not T.is_scalar(o):
                    raise T.error(_C.TypeError, f"{self.name} returns a {type(o).__name__} (return value {i}); "
                                                "return traced values or Python numbers")
                trc.output(T.node_of(trc, o))
        finally:
            T.pop()
        self._sig, self._params, self._returns = sig, params, kind
        self._tracer, self._traced_text = tr, tr.print()
        self._trace_ms = (time.perf_counter() - t0) * 1e3

    def _trace_objects(self, params, call_args):
        """(ctx, leaves {position: ...}, objects {position: ...}) of the object arguments to trace
        with: this call's, else the last call's (a retrace for another backend or introspection)."""
        if call_args is None:
            last = self._obj_last and {k: r() for k, r in self._obj_last.items()}
            if not last or any(o is None for o in last.values()):
                raise _C.Error(f"{self.name} takes a Module or optimizer argument: call it once first (its "
                               "structure comes from the objects passed)")
            call_args = [last.get(k) for k in range(len(params))]
        ctx, _, leaves = O.describe(self.name, params, call_args)
        return ctx, leaves, {k: call_args[k] for k in leaves}

    def _cache_key(self):
        """This program's trace cache key, or "" (the cache is off, or the function is uncacheable)."""
        if self._trace_key is None:
            if self._params is None:
                self._sig, self._params = _signature(self.fn)
            if self._obj_structs is None and any(isinstance(s, O.ObjSpec) for _, s in self._params):
                return ""  # the key needs the structure of the Module/optimizer arguments: not called yet
            self._trace_key = ""
            if self._use_trace_cache and _trace_cache.enabled():
                extra = ()
                if self._obj_structs is not None:
                    extra = tuple(self._obj_structs[k] for k in sorted(self._obj_structs))
                if self._schedule:
                    extra += ("schedule", _schedule.text(self._schedule))
                if not self._obj_uncacheable:
                    self._trace_key = _trace_cache.key(self.fn, self.name, self._params, extra) or ""
        return self._trace_key

    def _from_trace_cache(self):
        """Compiles for the current backend from the trace cache without tracing; False on a miss."""
        be = backend()
        if be in self._compiled:
            return True
        if self._traced_text is not None or not self._cache_key():
            return False
        entry = _trace_cache.load(self._trace_key)
        if entry is None:
            return False
        cp = _C.CompiledProgram.from_program_cache(entry["digest"], be, self._fast_math)
        if cp is None:
            return False
        self._returns = entry["returns"]
        self._compiled[be] = cp
        self._trace_hits.add(be)
        return True
    def _compile(self):
        """The program compiled for the current backend (one compilation per backend used)."""
        be = backend()
        if be in self._compiled:
            return self._compiled[be]
        if self._tracer is None:
            self._traced_text = None  # the tracer gave its program to another backend: trace again
        self._trace()
        tr, self._tracer = self._tracer, None
        nodes = self._traced_text.count("\n")
        _log.logger.debug("compiling %s for %s: %d traced nodes", self.name, be, nodes)
        t0 = time.perf_counter()
        schedule = self._schedule_text()
        try:
            # The traced text is the program cache's key (printed from this tracer's program by
            # _trace), passed so that it is not printed twice.
            cp = self._compiled[be] = _C.CompiledProgram(tr, be, self._traced_text, schedule, self._keep_trace,
                                                         self._fast_math)
        except BaseException:
            self._traced_text = None  # the tracer gave its program away: trace again next time
            raise
        _log_compile(self.name, be, nodes, self._trace_ms, time.perf_counter() - t0, cp)
        self._trace_hits.discard(be)
        digest = cp.stats["traced_digest"]
        if digest and self._cache_key():
            _trace_cache.save(self._trace_key, digest, self._returns)
        return cp

    # Calling.
    def _bind(self, args, kwargs):
        """The call's arguments in parameter order (defaults applied); ember.TypeError when they do
        not fit the signature."""
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise _C.TypeError(f"{self.name}: {e}") from None
        bound.apply_defaults()
        return [bound.arguments[p] for p, _ in self._params]

    def _arguments(self, args, kwargs, copies=None, leaves=None, objects=None):
        """The run arguments (em.Tensor or scalar words) after checking them; NumPy arrays that had
        to be copied are appended to `copies` as (position, array, tensor, parameter name). `leaves`: the flattened
        Module/optimizer arguments {position: [(name, em.Tensor or (dtype, value))]}; `objects`:
        {position: [run values]} of the object arguments, filled from `leaves`, or given (a snapshot)."""
        if kwargs or len(args) != len(self._params):
            args = self._bind(args, kwargs)
        env, out = {}, []
        for k, ((pname, spec), v) in enumerate(zip(self._params, args)):
            if isinstance(spec, D.DType):
                out.append(_scalar_word(pname, spec, v))
                continue
            if isinstance(spec, O.ObjSpec):
                if leaves is None:
                    out.extend(objects[k])
                    continue
                vals = [_scalar_word(name, *leaf) if isinstance(leaf, tuple) else leaf for name, leaf in leaves[k]]
                if objects is not None:
                    objects[k] = vals
                out.extend(vals)
                continue
            dt = spec.dtype
            if not isinstance(v, (Tensor, np.ndarray)):
                from .nn.module import Parameter
                if isinstance(v, Parameter):
                    v = v.data
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
                    copies.append((len(out), v, t, pname))  # from_numpy_arg copied it
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
        leaves = objects = None
        if self._has_obj is None:
            self._sig, self._params = _signature(self.fn)
            self._has_obj = any(isinstance(s, O.ObjSpec) for _, s in self._params)
        if self._has_obj:
            objects = self._snapshot_arguments(args, kwargs)
            if objects is None:
                args, leaves = self._object_arguments(args, kwargs)
                kwargs, objects = {}, {}
        if not self._from_trace_cache():
            self._trace(args if leaves is not None else None)
        copies = []
        run_args = self._rerun_arguments(args, kwargs, leaves, objects)
        if run_args is None:
            run_args = self._arguments(args, kwargs, copies, leaves, objects)  # argument errors come before any compiling
            self._keep_tensors(args, kwargs)
        cp = self._compile()
        back = []
        if copies:  # arrays passed as copies: the ones the program writes get the copy back
            written = self._written.get(cp.backend_name)
            if written is None:
                written = self._written[cp.backend_name] = frozenset(cp.written_args)
            back = [(pos, a, t, pname) for pos, a, t, pname in copies if pos in written]
            for _, a, _, pname in back:
                if not a.flags.writeable:
                    raise _C.TypeError(f"argument '{pname}' is a read-only NumPy array, but "
                                       f"{self.name} writes into it; pass a writeable array (e.g. a .copy())")
        outs = cp.run(run_args)
        for _, a, t, _ in back:
            np.copyto(a, t.numpy())
        if leaves is not None:
            self._save_snapshot(args, objects)
        if self._returns == "none":
            return None
        if self._returns == "one":
            return outs[0]
        return tuple(outs)

    def _keep_tensors(self, args, kwargs):
        """Remembers this call's tensor arguments (all em.Tensor, passed positionally) as checked."""
        self._same_tensors = None
        if kwargs or len(args) != len(self._params):
            return
        kept = {}
        for k, (_, spec) in enumerate(self._params):
            if isinstance(spec, (D.DType, O.ObjSpec)):
                continue
            if type(args[k]) is not Tensor:
                return
            kept[k] = weakref.ref(args[k])
        self._same_tensors = (backend(), kept)

    def _rerun_arguments(self, args, kwargs, leaves, objects):
        """The run arguments when this call passes the last call's tensors again (their checks
        stand) and its object arguments from a snapshot; None otherwise (then _arguments)."""
        same = self._same_tensors
        if same is None or kwargs or leaves is not None or len(args) != len(self._params) or same[0] != backend():
            return None
        kept = same[1]
        out = []
        for k, (pname, spec) in enumerate(self._params):
            v = args[k]
            if isinstance(spec, D.DType):
                out.append(_scalar_word(pname, spec, v))
            elif isinstance(spec, O.ObjSpec):
                out.extend(objects[k])
            else:
                t = kept[k]()
                if t is None or v is not t:
                    return None
                out.append(v)
        return out

    def _snapshot_arguments(self, args, kwargs):
        """{position: [run values]} of the object arguments from the last call's snapshot when this
        call passes the same objects, positionally, for the same backend and every check holds; else None."""
        snap = self._snap
        if snap is None or kwargs or len(args) != len(self._params) or snap[0] != backend():
            return None
        for k, ref in snap[1].items():
            if args[k] is not ref():
                return None
        for checks in snap[2]:
            if not O.holds(checks):
                return None
        return snap[3]

    def _save_snapshot(self, args, objects):
        """Keeps this call's object arguments (flattened into `objects`) with their _em_snapshot
        checks, if every one has them; released when an object dies."""
        self._snap = None
        checks = []
        for k in objects:
            take = getattr(args[k], "_em_snapshot", None)
            c = take() if take is not None else None
            if c is None:
                return
            checks.append(c)
        me = weakref.ref(self)

        def drop(_):
            p = me()
            if p is not None:
                p._snap = None
        self._snap = (backend(), {k: weakref.ref(args[k], drop) for k in objects}, checks, objects)

    def _object_arguments(self, args, kwargs):
        """Binds the arguments of a program with Module/optimizer parameters, checks (or, at the
        first call, records) their structures; returns (arguments in parameter order, leaves)."""
        args = self._bind(args, kwargs)
        ctx, structs, leaves = O.describe(self.name, self._params, args)
        if self._obj_structs is None:
            self._obj_structs, self._obj_uncacheable = structs, ctx.uncacheable
        else:
            O.check(self.name, self._params, self._obj_structs, structs)
        self._obj_last = {k: weakref.ref(args[k]) for k in structs}
        return args, leaves

    def _interpret_stages(self, *args, lower_groups=False, tile_threads=False, contract_fma=None, split_reductions=0):
        """The reference interpreter's results as traced and after every pass that changed the IR
        (the pipeline as a backend with these options runs it): [(stage, [arrays])], each list the
        outputs followed by the tensor arguments after the run; a failing pass or verifier ends
        the list with ("error:after <pass>", message). Used by the differential fuzzer.
        contract_fma (default: tile_threads, i.e. as the CPU backend on a host with FMA) runs
        contract_fma; the interpreter computes fma in software, whatever this host has.
        split_reductions: the minimum trip count of the loops split_reductions splits (0: off; the
        GPU backends run it with 2048)."""
        if contract_fma is None:
            contract_fma = tile_threads
        if self._has_obj or any(isinstance(s, O.ObjSpec) for _, s in _signature(self.fn)[1]):
            raise _C.Error(f"{self.name}: the reference interpreter does not take Module or optimizer arguments")
        self._trace()
        if self._tracer is None:
            self._traced_text = None
            self._trace()
        run_args = self._arguments(args, {})
        return _C.interpret_stages(self._tracer, run_args, lower_groups, tile_threads, contract_fma,
                                   self._schedule_text(), split_reductions)

    # Schedules.
    def _schedule_text(self):
        """The schedule as the compiler takes it (CompiledProgram and the interpreter's stages both
        run apply_schedule), with fn's source registered first so the requests find their loops."""
        if self._schedule:
            _schedule.register_source(self.fn)
        return _schedule.text(self._schedule)

    def schedule(self, *requests):
        """schedule(*requests) -> em.Program

        The same function compiled with loop transformations applied after the given ones (this
        program stays as it is): em.schedule.interchange(a, b), tile(loop, size),
        parallelize(loop) and fuse(k1, k2). Loops are named by their ``with em.loop(...) as name:``
        line; kernels by an axis name of ``with em.kernel(...) as (i, j):`` or their number.
        Each request is checked by the isl dependence analysis when the program compiles (its
        first call or introspection); one that would reverse or break a dependence raises
        ember.CompileError naming it. The schedule is part of the compile caches' keys.

        >>> @em.compile
        ... def rowsum(x: em.f32["N", "M"]):
        ...     out = em.zeros((x.shape[0],))
        ...     with em.kernel(1) as _:
        ...         with em.loop(x.shape[0]) as r:
        ...             with em.loop(x.shape[1]) as c:
        ...                 out[r] = out[r] + x[r, c]
        ...     return out
        >>> fast = rowsum.schedule(em.schedule.parallelize("r"))
        >>> x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
        >>> bool(np.allclose(fast(x).numpy(), x.sum(1), atol=1e-5)), "[N, 1]" in fast.ir() or "[1, N]" in fast.ir()
        (True, True)
        >>> bad = rowsum.schedule(em.schedule.interchange("r", "c"), em.schedule.parallelize("c"))
        >>> try:
        ...     bad(x)
        ... except em.CompileError as e:
        ...     print("out[" in str(e))
        True
        """
        return Program(self.fn, self.name, self._use_trace_cache, self._schedule + _schedule.requests(requests),
                       self._fast_math)

    # Introspection.
    def _compiled_or_cached(self):
        """The program for the current backend, from the trace cache when it has it."""
        self._from_trace_cache()
        return self._compile()

    @property
    def kernel_count(self):
        """The number of kernels after fusion (compiles the program for the current backend if needed).

        >>> @em.compile
        ... def f(x: em.f32["N"]):
        ...     y = em.exp(x) * 2.0 + 1.0      # elementwise ops fuse into one kernel
        ...     return y / em.sum(y)           # a reduction, then a kernel that reads its result
        >>> f.kernel_count >= 1
        True
        """
        return self._compiled_or_cached().kernel_count

    def ir(self, stage="final"):
        """ir(stage="final") -> str

        The program's IR as text after a stage: "traced" (as traced, before any pass), a pass name
        (for example "fuse_kernels") or "final" (what the backend compiles). A pass the pipeline runs
        several times (the cleanup simplify, cse, dce) shows its last run under its name and run k as
        "simplify#k"; the text's first line names the run. See the README's "Reading generated code
        and the IR". The first request for a stage other than "traced" and "final" traces the
        function again and compiles it keeping its traced program (compiling does not copy it).

        >>> @em.compile
        ... def f(x: em.f32["N"]):
        ...     return em.sqrt(x) + 1.0
        >>> "sqrt" in f.ir("traced"), "sqrt" in f.ir()
        (True, True)
        """
        if stage == "traced":
            self._trace()
            return self._traced_text
        if stage != "final":
            self._need_trace()
        return self._compile().ir(stage)

    def explain(self):
        """explain() -> str

        Why the program has the kernels it has, one line each: for every pair of adjacent kernels
        that stayed apart, the dependence that keeps them apart in the program's own terms (the
        tensor's name, the index in the kernel's indices i, j, k and loop counters, the source
        line), or the shape, workgroup or cost-model reason; for every host loop with kernels, the
        dependence between its iterations that keeps it sequential. Kernels are numbered as in
        ir(). A program fused into one kernel says so. Runs the pipeline again on a copy of the
        traced program when first asked for (compiling records nothing; like ir(stage), the first
        request traces the function again to keep that program); prints nothing.

        >>> @em.compile
        ... def f(x: em.f32["N"]):
        ...     return em.exp(x) * 2.0 + 1.0
        >>> f.explain()
        'all fused: 1 kernel, no adjacent kernels left apart and no host loop left sequential'
        """
        self._need_trace()
        return self._compile().explain()

    def _need_trace(self):
        """From now on compile keeping the traced program (ir stages and explain lower a copy of it).
        The current backend's program compiled without it (from the trace cache, or by a compile
        that did not keep it: a copy of the whole program, made only when asked) is traced and
        compiled again."""
        self._keep_trace = True
        be = backend()
        cp = self._compiled.get(be)
        if cp is not None and not cp.has_trace:
            del self._compiled[be]
            self._trace_hits.discard(be)

    def source(self, lang=None):
        """source(lang=None) -> str

        The generated kernel source: "cpp", "cuda", "glsl" or "hlsl" (the current backend's language by
        default; the shader languages print one shader per kernel, cpp and cuda one translation unit).
        It is the code that runs, readable: one kernel per fused loop nest.

        >>> @em.compile
        ... def saxpy(a: em.f32, x: em.f32["N"], y: em.f32["N"]):
        ...     return a * x + y
        >>> "Generated by Ember" in saxpy.source()
        True
        >>> "void main" in saxpy.source("glsl")
        True
        """
        cp = self._compiled_or_cached()
        return cp.source(lang or _LANG.get(cp.backend_name, "cpp"))

    @property
    def stats(self):
        """Compile statistics, a dict: passes [{name, ms, cpu_ms, changed, visits}], passes_ms,
        passes_cpu_ms (the same span in the compiling thread's CPU time), codegen_ms (printing
        the distinct kernels), compile_ms (cache lookups, compiler runs and loading), kernels (the
        kernel count), distinct_kernels (distinct kernel bodies: kernels bound to other buffers or
        params but otherwise equal share one compiled function or shader), compiled_kernels (the
        distinct kernels this compile had to compile: per-kernel cache misses), translation_units
        (compiler runs: cpu translation units compiled concurrently, or GPU shaders), cache_hit
        (True when nothing was compiled), buffers, buffer_shapes (each buffer's shape, e.g.
        "[N, 3]"), cache_key, tape_bytes (autodiff tape of the last call), program_cache_hit,
        program_cache_key, traced_digest, trace_ms (tracing the Python function; 0 when the trace
        cache had it), trace_cache_hit, linked (cpu: a cached program's
        kernels were bound through the link record saved with it, without generating code), host ("plan": calls run the host
        plan em.export writes; "interpreter": the host IR is interpreted) and host_reason (why the
        interpreter: EMBER_HOST_PLAN=0, an autodiff tape, or a host step the plan cannot express)
        and host_plan_ms (building the plan when compiling).

        The program cache keeps each lowered program on disk ($EMBER_CACHE_DIR, `<program_cache_key>.prog`),
        keyed by the traced IR, its source lines, the backend and this Ember build. When a process
        compiles a program another process lowered already, program_cache_hit is True: the pipeline
        did not run, `passes` is empty and passes_ms is the time it took to load the saved program.
        EMBER_PROGRAM_CACHE=0 turns the program cache off, and so do EMBER_VERIFY=1 and
        EMBER_DEBUG=ir|time (then program_cache_key is empty). ir(stage) works either way: stages
        other than "final" run the pipeline on a copy of the traced program when first asked for.
        The trace cache (`trace-<key>.trace` entries, python/ember/_trace_cache.py) lets a new process skip
        tracing too: trace_cache_hit is True then.

        >>> @em.compile
        ... def f(x: em.f32["N"]):
        ...     return x * x
        >>> st = f.stats
        >>> st["kernels"], isinstance(st["compile_ms"], float), isinstance(st["cache_hit"], bool)
        (1, True, True)
        """
        cp = self._compiled_or_cached()
        st = cp.stats
        hit = cp.backend_name in self._trace_hits
        st["trace_cache_hit"] = hit
        st["trace_ms"] = 0.0 if hit else self._trace_ms
        return st


# A compile is worth an INFO line when the traced program has this many nodes or it took this long.
_LARGE_PROGRAM_NODES = 2000
_SLOW_COMPILE_S = 1.0


def _log_compile(name, be, nodes, trace_ms, seconds, cp):
    """The one INFO line of a large or slow first compile: its time and where it went."""
    if not _log.logger.isEnabledFor(logging.INFO) or (nodes < _LARGE_PROGRAM_NODES and seconds < _SLOW_COMPILE_S):
        return
    st = cp.stats
    cached = " (program cache hit)" if st.get("program_cache_hit") else ""
    _log.logger.info("%s: first compile for %s took %.2f s%s: %d traced nodes -> %d kernels (%d compiled); trace "
                     "%.2f s, passes %.2f s, codegen %.2f s, compiler %.2f s", name, be, seconds, cached, nodes,
                     st["kernels"], st["compiled_kernels"], trace_ms / 1e3, st["passes_ms"] / 1e3,
                     st["codegen_ms"] / 1e3, st["compile_ms"] / 1e3)


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

