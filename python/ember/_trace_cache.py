"""The trace cache: lets a new process run a program it compiled before without tracing it again.

Tracing runs the user's Python function, one Python call per operation (40 ms for a 200-step
stencil); the lowered program is already in the program cache. A trace entry
(`trace-<key>.trace` in $EMBER_CACHE_DIR) maps a *fingerprint* of the Python function to the
traced program's digest, from which the C++ side finds the lowered program
(CompiledProgram.from_program_cache).

The fingerprint covers what a trace can depend on: the function's bytecode, constants, names, file
and line table (marshal of its code object), its defaults and closure cells, and, by value, every
global it or its nested functions name; functions it calls are fingerprinted the same way,
recursively; attributes read from user modules are fingerprinted by value, user classes by their
bases and the content of their bodies. Library modules (the
standard library, site-packages) count by name and version, Ember by the digest of its Python
sources and its binary. The parameter annotations, Python version and every EMBER_* environment
variable are part of the key. A value that cannot be fingerprinted by content (a list, dict, NumPy
array or any other mutable object, a bound method of one, an instance of a user class) makes the
function uncacheable: it is traced every time, as without the cache.

Assumption, as Warp's and Taichi's kernel caches make: a trace is a function of the above. A
function that reads a file, a clock or a random generator at trace time (not through arguments)
breaks it; compile such a function with `em.compile(fn, trace_cache=False)`, or turn the cache off
with EMBER_TRACE_CACHE=0. EMBER_PROGRAM_CACHE=0, EMBER_VERIFY and EMBER_DEBUG=ir|time turn it off too.
"""
import builtins
import functools
import hashlib
import json
import marshal
import os
import site
import sys
import types

import numpy as np

from . import _ember as _C
from . import _dtypes as D

_EXT = "trace"
_FORMAT = 1
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class _Uncacheable(Exception):
    pass


def enabled():
    """Whether the trace cache is on (EMBER_TRACE_CACHE, and the program cache's switches)."""
    e = os.environ.get("EMBER_TRACE_CACHE", "1").lower()
    return e not in ("0", "off", "false") and _C._program_cache_enabled()


@functools.lru_cache(maxsize=None)
def _library_dirs():
    """The standard library's and site-packages' directories: sysconfig's stdlib, platstdlib,
    purelib and platlib, taken without sysconfig.get_paths() (its first call loads the build's
    configuration data: 2-10 ms of a warm-cache process's first call)."""
    ver = "python%d.%d" % sys.version_info[:2]
    dirs = {os.path.dirname(os.__file__), os.path.join(sys.exec_prefix, getattr(sys, "platlibdir", "lib"), ver)}
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's site module may lack them
        pass
    return tuple(os.path.realpath(d) + os.sep for d in dirs if d)


@functools.lru_cache(maxsize=None)
def _ember_id():
    """Ember's own share of every key: its binary and the text of its Python sources."""
    h = hashlib.sha256(_C._build_id().encode())
    for root, dirs, files in os.walk(_PKG_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    h.update(os.path.relpath(path, _PKG_DIR).encode() + b"\0" + f.read())
    return h.hexdigest()


def _is_library_module(mod):
    """Standard library, site-packages and Ember: fingerprinted by name and version. A script's
    `__main__`, a notebook's, or code from no file is the user's: fingerprinted by content."""
    name = getattr(mod, "__name__", "") or ""
    if name == "__main__":
        return False
    top = name.partition(".")[0]
    if top == "ember" or top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
        return True
    f = getattr(mod, "__file__", None)
    return f is not None and os.path.realpath(f).startswith(_library_dirs())


def _library_tag(mod):
    name = mod.__name__
    top = sys.modules.get(name.partition(".")[0])
    return f"lib:{name}@{getattr(top, '__version__', '')}"


class _Fingerprint:
    """Walks a function and what it reaches; `parts` collects the bytes of the fingerprint."""

    def __init__(self):
        self.parts = []
        self.seen = {}  # id -> index of the object in the walk (cycles and shared objects)

    def add(self, *xs):
        for x in xs:
            self.parts.append(x if isinstance(x, bytes) else str(x).encode())
            self.parts.append(b"\0")

    def value(self, x, names=()):
        """Adds value `x`; `names` are the attribute names the code could read from it (modules)."""
        t = type(x)
        if x is None or x is Ellipsis or t in (bool, int, float, complex, str, bytes):
            self.add(t.__name__, repr(x))
        elif t in (tuple, frozenset):
            items = list(x)
            if t is frozenset:
                items.sort(key=repr)
            self.add(t.__name__, len(items))
            for item in items:
                self.value(item, names)
        elif isinstance(x, np.generic):
            self.add("np", x.dtype.str, repr(x.item()))
        elif isinstance(x, (D.DType, D.TensorType)):
            self.add("ember-type", repr(x))
        elif id(x) in self.seen:
            self.add("ref", self.seen[id(x)])
        else:
            self.seen[id(x)] = len(self.seen)
            self.reference(x, names)

    def reference(self, x, names):
        """Objects with identity: modules, functions, classes, builtins."""
        if isinstance(x, types.ModuleType):
            if _is_library_module(x):
                self.add(_library_tag(x))
                return
            self.add("module", x.__name__)  # user module: the attributes the code can name, by value
            for n in sorted(names):
                if n in vars(x):
                    self.add("attr", n)
                    self.value(vars(x)[n], names)
        elif isinstance(x, types.FunctionType):
            mod = sys.modules.get(x.__module__)
            if mod is not None and _is_library_module(mod):
                self.add("libfn", x.__module__, x.__qualname__)
            else:
                self.function(x)
        elif type(x).__module__ == "ember._program" and type(x).__name__ == "Program":
            self.add("program", x.name, x._use_trace_cache)  # another compiled program: its function
            self.value(x.fn)
        elif isinstance(x, functools.partial):
            self.add("partial")
            self.value(x.func)
            self.value(tuple(x.args))
            self.value(tuple(sorted(x.keywords.items())))
        elif isinstance(x, (types.BuiltinFunctionType, np.ufunc)):
            owner = getattr(x, "__self__", None)
            if isinstance(x, types.BuiltinFunctionType) and owner is not None and not isinstance(owner, types.ModuleType):
                raise _Uncacheable(f"{x!r} is a method of an object")
            self.add("builtin", getattr(x, "__module__", None) or "", getattr(x, "__qualname__", x.__name__))
        elif isinstance(x, type):
            mod = sys.modules.get(x.__module__)
            if mod is not None and _is_library_module(mod):
                self.add("type", x.__module__, x.__qualname__)
            else:
                self.user_class(x)
        else:
            raise _Uncacheable(f"a {type(x).__name__} has no content fingerprint")

    def user_class(self, cls):
        """A class of user code by content: its bases and every attribute of its body (methods by
        code, class constants by value), so editing a method of a module misses."""
        self.add("class", cls.__module__, cls.__qualname__)
        for base in cls.__bases__:
            self.value(base)
        for n, v in sorted(vars(cls).items()):
            if n in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__") or n.startswith("_abc_"):
                continue
            self.add("member", n)
            if n == "__annotations__":
                v = tuple(sorted((k, repr(a)) for k, a in v.items()))
            elif isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            elif isinstance(v, property):
                v = (v.fget, v.fset, v.fdel)
            self.value(v)

    def function(self, f):
        code = f.__code__
        self.add("fn", f.__module__, f.__qualname__, hashlib.sha256(marshal.dumps(code)).hexdigest())
        self.value(f.__defaults__)
        self.value(tuple(sorted((f.__kwdefaults__ or {}).items())))
        for cell in f.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:
                self.add("empty-cell")
                continue
            self.value(contents, _names(code))
        names = _names(code)
        g = f.__globals__
        b = vars(builtins)
        for n in sorted(names):
            if n in g:
                self.add("global", n)
                self.value(g[n], names)
            elif n in b:
                self.add("builtin-name", n)


def _names(code):
    """Every global or attribute name the code object and the code nested in it use."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return frozenset(out)


def key(fn, name, params, extra=()):
    """The trace cache key of function `fn` compiled as `name` with parameters `params`
    [(name, spec)], or None when something it reaches cannot be fingerprinted. `extra`: more
    values the trace depends on (e.g. the classes of module arguments, whose methods it runs)."""
    fp = _Fingerprint()
    fp.add(f"ember-trace-{_FORMAT}", _ember_id(), sys.version, name, repr(params))
    fp.add(*sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("EMBER_")))
    try:
        fp.value(tuple(extra))
        fp.value(fn)
    except (_Uncacheable, RecursionError):
        return None
    return "trace-" + hashlib.sha256(b"".join(fp.parts)).hexdigest()[:32]


def load(key):
    """The entry of `key`: {"digest": ..., "returns": ...}, or None."""
    data = _C._cache_entry_read(key, _EXT)
    if data is None:
        return None
    try:
        entry = json.loads(data)
        if entry.get("format") == _FORMAT and isinstance(entry.get("digest"), str) and "returns" in entry:
            return entry
    except ValueError:
        pass
    return None


def save(key, digest, returns):
    """Records that the function of `key` traces to the program of `digest` returning `returns`."""
    _C._cache_entry_write(key, _EXT, json.dumps({"format": _FORMAT, "digest": digest, "returns": returns}).encode())
