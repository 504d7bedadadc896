"""em.data: minibatches gathered on the device, inside the compiled train step.

Upload the whole dataset once (`X = em.tensor(images)`, `y = em.tensor(labels)`) and pass the
same em.Tensors to every call; each batch is gathered inside the program from index tensors
made there, so a training loop copies nothing to or from the host per step (the loss only when
you read it)::

    @em.compile
    def train_step(model: MLP, opt: em.optim.Adam, X: em.f32["N", 64], y: em.i32["N"],
                   step: em.i32, batch: em.i32):
        xb, yb = em.data.random_batch(batch, step, X, y)   # step: the seed, a runtime scalar
        opt.step(em.nn.cross_entropy(model(xb), yb))

The batch size may be a runtime scalar too (one program serves every size).
"""
import numpy as np

from . import _ember as _C
from . import _tracing as T
from ._ops import indices
from ._random import randint
from ._tensor import tensor
from ._value import Value

__all__ = ["random_batch", "epoch_batch", "permutation"]


def _check(what, tensors):
    T.tracer(what)
    if not tensors:
        raise T.error(_C.TypeError, f"{what}: give at least one tensor to gather rows from")
    for k, t in enumerate(tensors):
        if not isinstance(t, Value) or t.ndim == 0:
            raise T.error(_C.TypeError, f"{what}: tensor {k} must be a traced tensor with at least one axis "
                                        f"(a program argument), got {type(t).__name__}")
    return tensors[0].shape[0]


def _gather(idx, tensors):
    rows = tuple(t[idx] for t in tensors)
    return rows[0] if len(rows) == 1 else rows


def random_batch(batch_size, seed, *tensors):
    """random_batch(batch_size, seed, *tensors) -> em.Value or tuple of em.Value

    Inside a compiled function: the rows of `tensors` (program arguments with equal first dimension
    N) at `batch_size` indices drawn uniformly from [0, N) by em.random.randint(seed), with
    replacement; one value for one tensor, else a tuple. The batch size and the seed may be runtime
    scalars (a step counter as the seed gives a new batch each call, without recompiling).

    >>> @em.compile
    ... def batch(X: em.f32["N", 2], y: em.i32["N"], seed: em.i32):
    ...     return em.data.random_batch(4, seed, X, y)
    >>> X = np.random.default_rng(0).normal(size=(10, 2)).astype(np.float32)
    >>> y = np.arange(10, dtype=np.int32)
    >>> xb, yb = batch(X, y, 3)
    >>> xb.shape, bool(np.array_equal(xb.numpy(), X[yb.numpy()]))
    ((4, 2), True)
    """
    n = _check("em.data.random_batch", tensors)
    return _gather(randint((batch_size,), seed, 0, n), tensors)


def epoch_batch(perm, step, batch_size, *tensors):
    """epoch_batch(perm, step, batch_size, *tensors) -> em.Value or tuple of em.Value

    The rows of `tensors` at perm[(step * batch_size + k) % N] for k < batch_size: batch `step` of
    an epoch that visits the rows in the order of `perm` (an i32[N] permutation from
    em.data.permutation, uploaded once per epoch).

    >>> @em.compile
    ... def batch(perm: em.i32["N"], X: em.f32["N", 3], step: em.i32):
    ...     return em.data.epoch_batch(perm, step, 2, X)
    >>> X = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    >>> perm = em.data.permutation(6, seed=0)
    >>> rows = np.concatenate([batch(perm, X, s).numpy() for s in range(3)])
    >>> bool(np.array_equal(rows, X[perm.numpy()]))
    True
    """
    n = _check("em.data.epoch_batch", tensors)
    (k,) = indices((batch_size,))
    return _gather(perm[(step * batch_size + k) % n], tensors)


def permutation(n, seed=None):
    """permutation(n, seed=None) -> em.Tensor

    A random permutation of range(n) as an i32 em.Tensor (for em.data.epoch_batch).

    >>> p = em.data.permutation(8, seed=1)
    >>> p.dtype, sorted(p.tolist()) == list(range(8))
    (em.i32, True)
    """
    return tensor(np.random.default_rng(seed).permutation(int(n)).astype(np.int32))
