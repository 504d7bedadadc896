"""em.random: counter-based random numbers inside traced functions.

Every element is a pure function of (its row-major flat index in `shape`, `seed`): a 32-bit
xxHash32-style hash built only from traced u32 multiply, add, xor and shift, so the same bits
come out on every backend and in the reference interpreter, and a program can draw them anywhere
(fused into any kernel, no generator state). Equal (shape, seed) give equal numbers; draw
independent numbers by passing different seeds (e.g. a step counter as a program argument)::

    @em.compile
    def noise(X: em.f32["H", "W"], seed: em.i32):
        return X + 0.1 * em.random.randn(X.shape, seed)

`seed` is a Python int or a scalar integer traced value (i32 or u32).

em.random.seed(s) is host side: it seeds the initialization of em.nn layers (the NumPy streams of
em.nn.init.generator()), not the numbers above, which always take their seed explicitly.
"""
import math
import threading

import numpy as np

from . import _dtypes as D
from . import _ember as _C
from . import _tracing as T
from ._ops import cast, cos, indices, log, sqrt
from ._value import Value

__all__ = ["rand", "randn", "randint", "hash", "seed"]

# xxHash32 primes (as in Jarzynski & Olano, "Hash Functions for GPU Rendering", JCGT 2020).
_P2, _P3, _P4, _P5 = 2246822519, 3266489917, 668265263, 374761393
# Stream constants: rand, and the two uniforms of randn's Box-Muller pair, and randint.
_S_RAND, _S_BM1, _S_BM2, _S_INT = 0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344


def _u32(x):
    """A u32 traced value of x (Python ints wrap to 32 bits; i32 values are reinterpreted)."""
    if isinstance(x, Value):
        return x if x.node.dtype == "u32" else cast(x, D.u32)
    if isinstance(x, T._BOOL_TYPES) or not isinstance(x, T._INT_TYPES):
        raise T.error(_C.TypeError, f"a seed or counter must be an int or an integer traced value, got {x!r}")
    return cast(int(x) & 0xFFFFFFFF, D.u32)


def _rotl(h, r):
    return (h << r) | (h >> (32 - r))


def hash(counter, key):
    """hash(counter, key) -> em.Value

    A 32-bit hash (u32) of two 32-bit words, elementwise with broadcasting: the xxHash32 of
    (counter, key). Both are ints or integer traced values (i32 bits are taken as u32). The same
    bits come out on every backend.

    >>> @em.compile
    ... def h(x: em.u32["N"]):
    ...     return em.random.hash(x, 7)
    >>> x = np.arange(1000, dtype=np.uint32)
    >>> bits = h(x).numpy()
    >>> len(set(bits.tolist())) == 1000, bool(np.array_equal(bits, h(x).numpy()))
    (True, True)
    """
    T.tracer("em.random.hash")
    x, y = _u32(counter), _u32(key)
    h = y + _P5 + x * _P3
    h = _rotl(h, 17) * _P4
    h = h + y * _P3
    h = _rotl(h, 17) * _P4
    h = (h ^ (h >> 15)) * _P2
    h = (h ^ (h >> 13)) * _P3
    return h ^ (h >> 16)


def _flat_index(shape):
    """The row-major flat index (u32) of every element of `shape` (a scalar 0 for shape ())."""
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    idx = indices(tuple(shape))
    if not idx:
        return cast(0, D.u32)
    flat = _u32(idx[0])
    for d, i in zip(shape[1:], idx[1:]):
        flat = flat * _u32(d) + _u32(i)
    return flat


def _bits(shape, seed, stream):
    key = hash(_u32(seed), stream)  # a scalar: one hash per program, not per element
    return hash(_flat_index(shape), key)


def _unit(bits):
    """The top 24 bits as a float in [0, 1): exact in f32, multiples of 2**-24."""
    return cast(bits >> 8, D.f32) * (1.0 / (1 << 24))


def rand(shape, seed=0):
    """rand(shape, seed=0) -> em.Value

    Uniform f32 numbers in [0, 1) of `shape` (multiples of 2**-24), reproducible for a seed: each
    element is a pure function of (its flat index, seed). `seed` is an int or a scalar integer
    traced value (a step counter as a program argument gives fresh numbers each call).

    >>> @em.compile
    ... def noise(X: em.f32["H", "W"], seed: em.i32):
    ...     return em.random.rand(X.shape, seed)
    >>> X = np.zeros((64, 64), np.float32)
    >>> a, b = noise(X, 1).numpy(), noise(X, 2).numpy()
    >>> bool(a.min() >= 0 and a.max() < 1), bool(abs(a.mean() - 0.5) < 0.02), bool(np.any(a != b))
    (True, True, True)
    """
    T.tracer("em.random.rand")
    return _unit(_bits(shape, seed, _S_RAND))


def randn(shape, seed=0):
    """randn(shape, seed=0) -> em.Value

    Standard normal f32 numbers of `shape` (Box-Muller of two independent uniforms), reproducible
    for a seed.

    >>> @em.compile
    ... def f(X: em.f32["N"], seed: em.i32):
    ...     return X + em.random.randn(X.shape, seed)
    >>> z = f(np.zeros(20000, np.float32), 5).numpy()
    >>> bool(abs(z.mean()) < 0.03), bool(abs(z.std() - 1) < 0.03)
    (True, True)
    """
    T.tracer("em.random.randn")
    u1 = (cast(_bits(shape, seed, _S_BM1) >> 8, D.f32) + 1.0) * (1.0 / (1 << 24))  # (0, 1]: log is finite
    u2 = _unit(_bits(shape, seed, _S_BM2))
    return sqrt(-2.0 * log(u1)) * cos((2.0 * math.pi) * u2)


def randint(shape, seed, low, high):
    """randint(shape, seed, low, high) -> em.Value

    Integers (i32) uniform in [low, high) of `shape`; low and high are ints or scalar integer values
    with low < high. Drawn as hash % (high - low): the bias is below (high - low) / 2**32.

    >>> @em.compile
    ... def dice(n: em.i32, seed: em.i32):
    ...     return em.random.randint((n,), seed, 1, 7)
    >>> r = dice(6000, 0).numpy()
    >>> sorted(set(r.tolist())), bool(np.all(np.abs(np.bincount(r)[1:] - 1000) < 120))
    ([1, 2, 3, 4, 5, 6], True)
    """
    T.tracer("em.random.randint")
    for name, b in (("low", low), ("high", high)):
        if isinstance(b, Value) and b.node.dtype not in ("i32", "u32") or \
                not isinstance(b, Value) and (isinstance(b, T._BOOL_TYPES) or not isinstance(b, T._INT_TYPES)):
            raise T.error(_C.TypeError, f"em.random.randint: {name} must be an int or an integer traced value, "
                                        f"got {b!r}")
    if not isinstance(low, Value) and not isinstance(high, Value):
        if not -2 ** 31 <= int(low) < int(high) <= 2 ** 31:
            raise T.error(_C.Error, f"em.random.randint: need -2**31 <= low < high <= 2**31, got low={low}, "
                                    f"high={high}")
        if int(high) - int(low) == 2 ** 32:  # the whole i32 range: every bit pattern
            return cast(_bits(shape, seed, _S_INT), D.i32)
    r = _bits(shape, seed, _S_INT) % _u32(high - low)
    return cast(r, D.i32) + low


# ---- host-side seeding of layer initialization -----------------------------------------------
_host_lock = threading.Lock()
_host_seed = 0      # the global seed of em.nn initialization (em.random.seed); 0 until set
_host_streams = 0   # streams handed out since the global seed was last set


def seed(s):
    """seed(s) -> None

    Seeds layer initialization (host side): after em.random.seed(s), each em.nn layer built
    without its own seed= draws from the next of a reproducible sequence of NumPy streams derived
    from s, so the same s and the same order of construction give the same parameters. It does not
    affect em.random.rand/randn/randint inside programs: those take their seed explicitly.

    >>> em.random.seed(42)
    >>> a = em.nn.Linear(3, 3).weight.numpy()
    >>> em.random.seed(42)
    >>> bool(np.array_equal(a, em.nn.Linear(3, 3).weight.numpy()))
    True
    """
    if isinstance(s, T._BOOL_TYPES) or not isinstance(s, T._INT_TYPES):
        raise T.error(_C.TypeError, f"em.random.seed: the seed must be an int, got {s!r}")
    if int(s) < 0:
        raise T.error(_C.Error, f"em.random.seed: the seed must be >= 0, got {s}")
    global _host_seed, _host_streams
    with _host_lock:
        _host_seed, _host_streams = int(s), 0


def _next_host_stream():
    """The next np.random.SeedSequence of the global initialization seed (spawn key = its number)."""
    global _host_streams
    with _host_lock:
        k = _host_streams
        _host_streams += 1
        return np.random.SeedSequence(_host_seed, spawn_key=(k,))
