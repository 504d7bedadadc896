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
    """y = x @ weight.T + bias; weight [out_features, in_features] (torch.nn.Linear)."""

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
    """2-D convolution of NCHW input with weight [out_ch, in_ch, kh, kw], stride and zero padding
    (torch.nn.Conv2d; kernel_size, stride and padding an int or a pair)."""

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
    """A lookup table: rows of weight [num_embeddings, embedding_dim] (N(0, 1)) for i32 indices."""

    def __init__(self, num_embeddings, embedding_dim, seed=None):
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(init.embedding(num_embeddings, embedding_dim, init.generator(seed)))

    def forward(self, indices):
        return F.embedding(indices, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """Normalizes the last dimensions (`normalized_shape`) to mean 0, variance 1, then scales by
    weight (ones) and shifts by bias (zeros) (torch.nn.LayerNorm)."""

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
    """Runs its modules in order, each on the previous one's output; members are named "0", "1", ..."""

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


def _activation(name, fn, doc):
    cls = type(name, (Module,), {"forward": lambda self, x: fn(x), "__doc__": doc, "__module__": __name__})
    cls.forward.__doc__ = f"{fn.__name__}(x)."
    return cls


ReLU = _activation("ReLU", F.relu, "max(x, 0) elementwise (em.nn.functional.relu).")
GELU = _activation("GELU", F.gelu, "The exact (erf) GELU elementwise (em.nn.functional.gelu).")
Sigmoid = _activation("Sigmoid", F.sigmoid, "1 / (1 + exp(-x)) elementwise (em.nn.functional.sigmoid).")
SiLU = _activation("SiLU", F.silu, "x * sigmoid(x) elementwise (em.nn.functional.silu).")


class Softmax(Module):
    """softmax along `axis` (em.nn.functional.softmax)."""

    def __init__(self, axis=-1):
        self.axis = axis

    def forward(self, x):
        return F.softmax(x, self.axis)
