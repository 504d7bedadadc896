"""Helpers shared by workloads: skipping, finding ember, building the C++ references."""
import contextlib
import ctypes
import hashlib
import importlib
import importlib.metadata
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
BUILD_DIR = BENCH_DIR / ".build"
# -fno-math-errno lets g++ vectorize sqrtf (without it every sqrtf is a libm call that may set
# errno); it changes no result here, since every argument is positive.
CXX_FLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-shared", "-fPIC"]


def cxx_flags():
    """CXX_FLAGS, then $EMBER_CPU_FLAGS (words), as the cpu backend appends them to its kernels'
    flags: EMBER_CPU_FLAGS=-mno-avx512f times both sides with AVX2 on an AVX-512 host."""
    return CXX_FLAGS + shlex.split(os.environ.get("EMBER_CPU_FLAGS", ""))


class Skip(Exception):
    """Raised by an implementation's setup when it cannot run here; the message says why."""


class PeerBroken(Skip):
    """Raised by require() when a peer's package is installed in this Python but importing it
    fails: a broken environment (Debian's python3-coverage under numba, a wheel built for another
    numpy), not an absent peer. The harnesses report it as "broken", loudly, never as a skip."""


# The peers tools/bootstrap-bench installs (by its names, the lower-cased module names).
BOOTSTRAP_PEERS = ("torch", "jax", "taichi", "warp", "numba", "tensorfrost")

# Peers found broken in this process: module -> the loud line said about it (said once).
BROKEN = {}


def _site_packages(venv):
    """The site-packages folders of a virtual environment."""
    return sorted(str(p) for p in Path(venv).glob("lib/python*/site-packages"))


def installed_distributions(module, path=None):
    """'name version' of each installed distribution that provides top-level module `module`
    (in this Python's sys.path, or in the folders `path`), from the packages' metadata, so a
    module whose import fails can still be told apart from one that is not installed."""
    found = []
    for dist in importlib.metadata.distributions(**({"path": path} if path else {})):
        tops = (dist.read_text("top_level.txt") or "").split()
        if not tops:
            tops = {f.parts[0].removesuffix(".py") for f in dist.files or () if f.parts}
        if module in tops:
            found.append(f"{dist.metadata['Name']} {dist.version}")
    return sorted(set(found))


def require(module):
    """Imports an optional package or raises Skip naming it, so missing peers never fail a run.

    A package that is installed here but fails to import raises PeerBroken instead, after one
    loud line on stderr naming the package, its version and the error: such a peer used to
    vanish from every table as a quiet "skipped" (issue 39: numba under Debian's coverage)."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # ImportError, or a package that breaks while importing
        error = f"{type(e).__name__}: {e}"
        absent = isinstance(e, ModuleNotFoundError) and e.name == module
        dists = installed_distributions(module)
        if dists or not absent:
            what = ", ".join(dists) if dists else f"module {module}"
            fix = {"ember": "rebuild it (tools/build)"}.get(
                module, f"tools/bootstrap-bench {module.lower()} repairs the venv or says why"
                if module.lower() in BOOTSTRAP_PEERS else "reinstall it")
            line = (f"!!! BROKEN PEER: {what} is installed for {sys.executable} but `import {module}` "
                    f"fails: {error}. Its column is missing from this run; {fix}.")
            if module not in BROKEN:
                print(line, file=sys.stderr, flush=True)
            BROKEN[module] = line
            raise PeerBroken(line.removeprefix("!!! ")) from None
        hint = ""
        if module != "ember":
            venv = REPO_ROOT / ".venv-bench"
            in_venv = installed_distributions(module, _site_packages(venv)) if venv.is_dir() else []
            if in_venv and Path(sys.prefix).resolve() != venv.resolve():
                hint = (f" ({', '.join(in_venv)} is installed in {venv}, but this run uses "
                        f"{sys.executable}: run with .venv-bench/bin/python)")
            else:
                hint = " (tools/bootstrap-bench installs the peers; run with .venv-bench/bin/python)"
        raise Skip(f"cannot import {module}: {error}{hint}") from None


@contextlib.contextmanager
def quiet_output():
    """Sends whatever is written to file descriptors 1 and 2 inside the block (a peer's compiler
    chatter, printed from C++) to a temporary file, so the bench's table stays readable; when
    the block raises, the captured text is replayed to stderr before the exception goes on."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    with tempfile.TemporaryFile() as log:
        try:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
        except BaseException:
            log.seek(0)
            sys.stderr.write(log.read()[-4000:].decode(errors="replace"))
            raise
        finally:
            os.close(saved[0])
            os.close(saved[1])


def init_warp():
    """Imports and initializes NVIDIA Warp (raising Skip when absent), its per-module load
    messages off; returns the module."""
    wp = require("warp")
    if hasattr(wp, "LOG_WARNING") and hasattr(wp.config, "log_level"):
        wp.config.log_level = wp.LOG_WARNING  # Warp >= 1.10
    else:
        wp.config.quiet = True  # older Warp
    with quiet_output():  # "Could not find or load the NVIDIA CUDA driver" on CPU-only hosts
        wp.init()
    return wp


def init_taichi():
    """Imports Taichi (raising Skip when absent) and (re)initializes it on the CPU with float32
    default precision; returns the module."""
    with quiet_output():  # its version banner
        ti = require("taichi")
        ti.init(arch=ti.cpu, default_fp=ti.f32, log_level=ti.WARN)
    return ti


def ember_python_dir():
    """Where a build puts the ember package: $EMBER_BUILD_DIR/python, else <repo>/build/python."""
    build = os.environ.get("EMBER_BUILD_DIR")
    return Path(build).resolve() / "python" if build else REPO_ROOT / "build" / "python"


def import_ember():
    """Imports ember from the build tree (or an installed copy), raising Skip when absent."""
    path = ember_python_dir()
    if path.is_dir() and str(path) not in sys.path:
        sys.path.insert(0, str(path))
    try:
        return require("ember")
    except Skip as e:
        where = path if path.is_dir() else f"{path} (missing; build Ember or set EMBER_BUILD_DIR)"
        raise type(e)(f"{e}; looked in {where}") from None


def import_example(name):
    """Imports examples/<name>.py (after import_ember), so the bench times the example's own program."""
    import importlib.util
    path = BENCH_DIR.parent / "examples" / f"{name}.py"
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # for the examples' shared _ember_path
    spec = importlib.util.spec_from_file_location(f"ember_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_cpp(source_name):
    """Compiles bench/reference/<source_name> into a cached shared library and loads it (ctypes)."""
    src = BENCH_DIR / "reference" / source_name
    cxx = os.environ.get("CXX", "g++")
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    except OSError as e:
        raise Skip(f"no C++ compiler ({cxx}): {e}") from None
    flags = cxx_flags()
    key = hashlib.sha256(src.read_bytes() + " ".join([cxx, *flags, version]).encode())
    lib = BUILD_DIR / f"{src.stem}-{key.hexdigest()[:16]}.so"
    if not lib.exists():
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        cmd = [cxx, *flags, str(src), "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise Skip(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()}")
        os.replace(tmp, lib)  # atomic: a concurrent or interrupted run never sees half a file
    return ctypes.CDLL(str(lib))


def float_ptr(a):
    """A ctypes float* into a C-contiguous float32 NumPy array (no copy)."""
    assert a.dtype.name == "float32" and a.flags.c_contiguous
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def numpy_adam_step(p, m, v, grads, step, lr, betas, eps):
    """One torch.optim.Adam step (bias-corrected, no weight decay) in place on the lists of NumPy
    parameters p and moments m, v: the hand-written peers' optimizer in the training workloads."""
    for n, g in enumerate(grads):
        m[n] = betas[0] * m[n] + (1 - betas[0]) * g
        v[n] = betas[1] * v[n] + (1 - betas[1]) * g * g
        mh = m[n] / (1 - betas[0] ** step)
        vh = v[n] / (1 - betas[1] ** step)
        p[n] = p[n] - lr * mh / (np.sqrt(vh) + eps)
