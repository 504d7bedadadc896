"""em.nn: modules (Module, Parameter, layers), their functional forms (em.nn.functional) and
PyTorch-default initialization (em.nn.init). The activations and losses of em.nn.functional are
also em.nn.<name> (em.nn.relu, em.nn.cross_entropy, ...)."""
from . import functional, init  # noqa: F401
from .functional import (cross_entropy, gelu, linear, log_softmax, mse_loss, relu, sigmoid,  # noqa: F401
                         silu, softmax)
from .layers import GELU, Conv2d, Embedding, LayerNorm, Linear, ReLU, Sequential, Sigmoid, SiLU, Softmax  # noqa: F401
from .module import Module, Parameter, load, save  # noqa: F401

__all__ = ["functional", "init", "Module", "Parameter", "Linear", "Conv2d", "Embedding", "LayerNorm", "Sequential",
           "ReLU", "GELU", "Sigmoid", "SiLU", "Softmax", "relu", "gelu", "sigmoid", "silu", "softmax", "log_softmax",
           "linear", "mse_loss", "cross_entropy"]
