"""em.nn.init: PyTorch's default parameter initializations, on the host with NumPy.

A layer's parameters are created when it is constructed, as float32 NumPy arrays drawn from a
np.random.Generator::

    generator(seed)      a given seed: its own reproducible stream (np.random.SeedSequence(seed));
    generator()          the next stream of the global seed set by em.random.seed(s) (0 until set),
                         so em.random.seed(s) followed by the same layers gives the same parameters,
                         and each layer (each call) gets a different stream.

The formulas are those of torch.nn's reset_parameters()::

    Linear, Conv2d  weight: kaiming_uniform_(a=sqrt(5)), i.e. U(-b, b) with
                    b = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2)) = sqrt(1/3), so
                    b = 1 / sqrt(fan_in); bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
                    fan_in = in_features (Linear) or in_channels * kh * kw (Conv2d).
    Embedding       weight: N(0, 1).
    LayerNorm       weight ones, bias zeros.
"""
import math

import numpy as np

from .. import _ember as _C
from .. import _random
from .. import _tracing as T

__all__ = ["generator", "uniform", "normal", "linear", "conv2d", "embedding", "layer_norm"]

_INT_TYPES = (int, np.integer)
_BOOL_TYPES = (bool, np.bool_)


def generator(seed=None):
    """generator(seed=None) -> numpy.random.Generator

    A NumPy generator for parameter initialization: its own reproducible stream for an int seed
    (>= 0), or for None the next stream of the global seed that em.random.seed(s) sets
    (deterministic: 0 until set), so each layer built without a seed gets a different stream.

    >>> a = em.nn.init.generator(7).uniform(size=3)
    >>> b = em.nn.init.generator(7).uniform(size=3)
    >>> bool(np.array_equal(a, b))
    True
    """
    if seed is None:
        return np.random.Generator(np.random.PCG64(_random._next_host_stream()))
    if isinstance(seed, _BOOL_TYPES) or not isinstance(seed, _INT_TYPES):
        raise T.error(_C.TypeError, f"em.nn.init.generator: seed must be an int or None, got {seed!r}")
    if int(seed) < 0:
        raise T.error(_C.Error, f"em.nn.init.generator: seed must be >= 0, got {seed}")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))


def _rng(rng, what):
    if rng is None:
        return generator()
    if not isinstance(rng, np.random.Generator):
        raise T.error(_C.TypeError, f"{what}: rng must be a np.random.Generator (em.nn.init.generator(seed)) "
                                    f"or None, got {type(rng).__name__}")
    return rng


def _size(v, name, what, minimum=1):
    if isinstance(v, _BOOL_TYPES) or not isinstance(v, _INT_TYPES):
        raise T.error(_C.TypeError, f"{what}: {name} must be an int, got {v!r}")
    if int(v) < minimum:
        raise T.error(_C.ShapeError, f"{what}: {name} must be >= {minimum}, got {v}")
    return int(v)


def uniform(shape, bound, rng=None):
    """uniform(shape, bound, rng=None) -> numpy.ndarray

    float32 U(-bound, bound) of `shape` (bound 0 gives zeros), from `rng` (em.nn.init.generator())
    or the next global stream.

    >>> w = em.nn.init.uniform((100,), 0.5, em.nn.init.generator(0))
    >>> w.dtype, bool(np.all(np.abs(w) <= 0.5))
    (dtype('float32'), True)
    """
    rng = _rng(rng, "em.nn.init.uniform")
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def normal(shape, std=1.0, rng=None):
    """normal(shape, std=1.0, rng=None) -> numpy.ndarray

    float32 N(0, std^2) of `shape`.

    >>> w = em.nn.init.normal((20000,), 2.0, em.nn.init.generator(0))
    >>> bool(abs(w.std() - 2.0) < 0.05)
    True
    """
    rng = _rng(rng, "em.nn.init.normal")
    return (rng.standard_normal(shape) * std).astype(np.float32)


def _fan_in_bound(fan_in):
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0


def linear(in_features, out_features, bias=True, rng=None):
    """linear(in_features, out_features, bias=True, rng=None) -> (numpy.ndarray, numpy.ndarray or None)

    (W [out, in], b [out] or None), float32, as torch.nn.Linear initializes them:
    W = kaiming_uniform(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and b = U(-1/sqrt(in),
    1/sqrt(in)).

    >>> w, b = em.nn.init.linear(16, 4, rng=em.nn.init.generator(0))
    >>> w.shape, b.shape, bool(np.abs(w).max() <= 0.25)
    ((4, 16), (4,), True)
    """
    what = "em.nn.init.linear"
    fi = _size(in_features, "in_features", what, 0)
    fo = _size(out_features, "out_features", what, 0)
    rng = _rng(rng, what)
    bound = _fan_in_bound(fi)
    w = uniform((fo, fi), bound, rng)
    return w, (uniform((fo,), bound, rng) if bias else None)


def conv2d(in_channels, out_channels, kh, kw, bias=True, rng=None):
    """conv2d(in_channels, out_channels, kh, kw, bias=True, rng=None) -> (numpy.ndarray, numpy.ndarray or None)

    (W [out, in, kh, kw], b [out] or None), float32, as torch.nn.Conv2d: U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) for both, fan_in = in_channels * kh * kw.

    >>> w, b = em.nn.init.conv2d(4, 8, 2, 2, rng=em.nn.init.generator(0))
    >>> w.shape, bool(np.abs(w).max() <= 0.25)
    ((8, 4, 2, 2), True)
    """
    what = "em.nn.init.conv2d"
    ci = _size(in_channels, "in_channels", what)
    co = _size(out_channels, "out_channels", what)
    kh = _size(kh, "kh", what)
    kw = _size(kw, "kw", what)
    rng = _rng(rng, what)
    bound = _fan_in_bound(ci * kh * kw)
    w = uniform((co, ci, kh, kw), bound, rng)
    return w, (uniform((co,), bound, rng) if bias else None)


def embedding(num_embeddings, embedding_dim, rng=None):
    """embedding(num_embeddings, embedding_dim, rng=None) -> numpy.ndarray

    W [num, dim] float32 ~ N(0, 1), as torch.nn.Embedding.

    >>> em.nn.init.embedding(10, 3, em.nn.init.generator(0)).shape
    (10, 3)
    """
    what = "em.nn.init.embedding"
    n = _size(num_embeddings, "num_embeddings", what)
    d = _size(embedding_dim, "embedding_dim", what)
    return normal((n, d), 1.0, _rng(rng, what))


def layer_norm(normalized_shape):
    """layer_norm(normalized_shape) -> (numpy.ndarray, numpy.ndarray)

    (weight ones, bias zeros) of `normalized_shape` (an int or a tuple), float32, as
    torch.nn.LayerNorm (elementwise_affine=True).

    >>> w, b = em.nn.init.layer_norm(3)
    >>> w.tolist(), b.tolist()
    ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    """
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    shape = tuple(_size(d, "normalized_shape", "em.nn.init.layer_norm") for d in shape)
    return np.ones(shape, np.float32), np.zeros(shape, np.float32)
