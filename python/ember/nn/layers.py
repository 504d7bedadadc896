"""Layers (em.nn.Linear, Conv2d, Embedding, LayerNorm, Sequential) and activation modules, on
em.nn.functional. Parameters are initialized as PyTorch's defaults (em.nn.init) from `seed=` or,
without one, from the next stream of em.random.seed's global seed."""
from .. import _ember as _C
from . import functional as F
from . import init
from .module import Module, Parameter


def _param(a):
    return None if a is None else Parameter(a)


class Linear(Module):
    """Linear(in_features, out_features, bias=True, seed=None)

    y = x @ weight.T + bias (torch.nn.Linear): weight [out_features, in_features] and bias
    [out_features] are Parameters initialized as PyTorch does, U(-1/sqrt(in), 1/sqrt(in)), from
    `seed` or the next stream of em.random.seed's global seed.

    >>> layer = em.nn.Linear(4, 3, seed=0)
    >>> x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    >>> w, b = layer.weight.numpy(), layer.bias.numpy()
    >>> w.shape, bool(np.allclose(layer(x).numpy(), x @ w.T + b, atol=1e-5))
    ((3, 4), True)
    """

    def __init__(self, in_features, out_features, bias=True, seed=None):
        self.in_features, self.out_features = in_features, out_features
        w, b = init.linear(in_features, out_features, bias, init.generator(seed))
        self.weight = Parameter(w)
        self.bias = _param(b)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Conv2d(Module):
    """Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True, seed=None)

    2-D convolution of NCHW input with weight [out_ch, in_ch, kh, kw], stride and zero padding
    (torch.nn.Conv2d; kernel_size, stride and padding an int or a pair), em.nn.functional.conv2d.

    >>> conv = em.nn.Conv2d(3, 8, 3, padding=1, seed=0)
    >>> x = np.random.default_rng(0).normal(size=(2, 3, 6, 6)).astype(np.float32)
    >>> conv(x).shape, conv.weight.shape
    ((2, 8, 6, 6), (8, 3, 3, 3))
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True, seed=None):
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (kh, kw)
        self.stride, self.padding = stride, padding
        w, b = init.conv2d(in_channels, out_channels, kh, kw, bias, init.generator(seed))
        self.weight = Parameter(w)
        self.bias = _param(b)

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")


class Embedding(Module):
    """Embedding(num_embeddings, embedding_dim, seed=None)

    A lookup table: the rows of weight [num_embeddings, embedding_dim] (initialized N(0, 1)) for
    i32 indices of any shape (em.nn.functional.embedding).

    >>> emb = em.nn.Embedding(10, 4, seed=0)
    >>> idx = np.array([[1, 7], [7, 0]], np.int32)
    >>> out = emb(idx)
    >>> out.shape, bool(np.array_equal(out.numpy(), emb.weight.numpy()[idx]))
    ((2, 2, 4), True)
    """

    def __init__(self, num_embeddings, embedding_dim, seed=None):
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(init.embedding(num_embeddings, embedding_dim, init.generator(seed)))

    def forward(self, indices):
        return F.embedding(indices, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """LayerNorm(normalized_shape, eps=1e-5)

    Normalizes the last dimensions (`normalized_shape`) to mean 0 and variance 1, then scales by
    weight (ones) and shifts by bias (zeros), as torch.nn.LayerNorm.

    >>> ln = em.nn.LayerNorm(6)
    >>> y = ln(np.random.default_rng(0).normal(5, 3, size=(4, 6)).astype(np.float32)).numpy()
    >>> bool(np.allclose(y.mean(1), 0, atol=1e-5))
    True
    """

    def __init__(self, normalized_shape, eps=1e-5):
        shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
        self.normalized_shape, self.eps = shape, float(eps)
        w, b = init.layer_norm(shape)
        self.weight = Parameter(w)
        self.bias = Parameter(b)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Sequential(Module):
    """Sequential(*modules)

    Runs its modules in order, each on the previous one's output; the members are named "0", "1",
    ... (so parameters are "0.weight", ...), and ``seq[i]`` / ``len(seq)`` work.

    >>> mlp = em.nn.Sequential(em.nn.Linear(4, 8, seed=1), em.nn.ReLU(), em.nn.Linear(8, 2, seed=2))
    >>> [name for name, _ in mlp.named_parameters()]
    ['0.weight', '0.bias', '2.weight', '2.bias']
    >>> mlp(np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)).shape
    (5, 2)
    """

    def __init__(self, *modules):
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise _C.TypeError(f"em.nn.Sequential: argument {i} is a {type(m).__name__}, not an em.nn.Module")
            setattr(self, str(i), m)

    def __len__(self):
        return len(self.children())

    def __getitem__(self, i):
        return self.children()[i]

    def forward(self, x):
        for m in self.children():
            x = m(x)
        return x


def _activation(name, fn, doc, ref):
    """An activation module class running `fn`; its docstring's example checks it against the
    NumPy expression `ref` (of x)."""
    doc = f"""{name}()

{doc} as a module, for em.nn.Sequential.

{">>> import math" if "math." in ref else ""}
>>> x = np.random.default_rng(0).normal(size=(2, 5)).astype(np.float32)
>>> bool(np.allclose(em.nn.{name}()(x).numpy(), {ref}, rtol=1e-5, atol=1e-6))
True
"""
    cls = type(name, (Module,), {"forward": lambda self, x: fn(x), "__doc__": doc, "__module__": __name__})
    cls.forward.__doc__ = f"{fn.__name__}(x)."
    return cls


ReLU = _activation("ReLU", F.relu, "max(x, 0) elementwise (em.nn.functional.relu)", "np.maximum(x, 0)")
GELU = _activation("GELU", F.gelu, "The exact (erf) GELU elementwise (em.nn.functional.gelu)",
                   "[[0.5 * v * math.erfc(-v / math.sqrt(2)) for v in r] for r in x]")
Sigmoid = _activation("Sigmoid", F.sigmoid, "1 / (1 + exp(-x)) elementwise (em.nn.functional.sigmoid)",
                      "1 / (1 + np.exp(-x))")
SiLU = _activation("SiLU", F.silu, "x * sigmoid(x) elementwise (em.nn.functional.silu)", "x / (1 + np.exp(-x))")


class Softmax(Module):
    """Softmax(axis=-1)

    softmax along `axis` as a module (em.nn.functional.softmax).

    >>> y = em.nn.Softmax()(np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)).numpy()
    >>> bool(np.allclose(y.sum(1), 1, atol=1e-6))
    True
    """

    def __init__(self, axis=-1):
        self.axis = axis

    def forward(self, x):
        return F.softmax(x, self.axis)
