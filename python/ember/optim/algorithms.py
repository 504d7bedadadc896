"""SGD, Adam, AdamW and RMSprop: the update rules of PyTorch's torch.optim documentation, on
traced values. Every hyperparameter is a runtime scalar (a Value), so branches of PyTorch's
algorithms that test a hyperparameter (momentum != 0, nesterov, centered) are em.where selects."""
from .._ops import sqrt, where
from .optimizer import Optimizer


class SGD(Optimizer):
    """SGD(params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, clip_value=None, clip_norm=None)

    Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay, as
    torch.optim.SGD. The momentum buffer is kept even while momentum is 0 (so changing it does not
    change the program).

    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(32, 2)).astype(np.float32)
    >>> y = x @ np.array([[2.0], [-1.0]], np.float32) + 0.5
    >>> model = em.nn.Linear(2, 1, seed=0)
    >>> opt = em.optim.SGD(model, lr=0.1, momentum=0.9)
    >>> @em.compile
    ... def train(model: em.nn.Linear, opt: em.optim.SGD, x: em.f32["B", 2], y: em.f32["B", 1]):
    ...     loss = em.nn.mse_loss(model(x), y)
    ...     opt.step(loss)
    ...     return loss
    >>> losses = [train(model, opt, x, y).item() for _ in range(100)]
    >>> losses[-1] < 0.05 * losses[0]
    True
    """

    _state_names = ("momentum_buffer",)
    _bools = ("nesterov",)

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 clip_value=None, clip_norm=None):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov, clip_value=clip_value, clip_norm=clip_norm)

    def _update(self, p, g, state, h, t):
        mu = h["momentum"]
        g = g + h["weight_decay"] * p
        b = where(t == 1.0, g, mu * state["momentum_buffer"] + (1.0 - h["dampening"]) * g)
        d = where(mu == 0.0, g, where(h["nesterov"], g + mu * b, b))
        return p - h["lr"] * d, {"momentum_buffer": b}


class Adam(Optimizer):
    """Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, clip_value=None, clip_norm=None)

    Adam with bias correction (by the step count) and L2 weight decay added to the gradient, as
    torch.optim.Adam (amsgrad=False).

    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(32, 2)).astype(np.float32)
    >>> y = x @ np.array([[2.0], [-1.0]], np.float32) + 0.5
    >>> model = em.nn.Linear(2, 1, seed=0)
    >>> opt = em.optim.Adam(model, lr=0.1)
    >>> @em.compile
    ... def train(model: em.nn.Linear, opt: em.optim.Adam, x: em.f32["B", 2], y: em.f32["B", 1]):
    ...     loss = em.nn.mse_loss(model(x), y)
    ...     opt.step(loss)
    ...     return loss
    >>> losses = [train(model, opt, x, y).item() for _ in range(100)]
    >>> losses[-1] < 0.05 * losses[0]
    True
    """

    _state_names = ("exp_avg", "exp_avg_sq")
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 clip_value=None, clip_norm=None):
        b1, b2 = betas
        super().__init__(params, lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=weight_decay,
                         clip_value=clip_value, clip_norm=clip_norm)

    @property
    def betas(self):
        """(beta1, beta2), the moment decay rates; assignable (runtime scalars: no recompile).

        >>> opt = em.optim.Adam(em.nn.Linear(2, 1, seed=0), betas=(0.8, 0.99))
        >>> opt.betas = (0.9, 0.995)
        >>> opt.beta2
        0.995
        """
        return (self.beta1, self.beta2)

    @betas.setter
    def betas(self, v):
        self.beta1, self.beta2 = v

    def _update(self, p, g, state, h, t):
        lr, b1, b2 = h["lr"], h["beta1"], h["beta2"]
        if self._decoupled:
            p = p * (1.0 - lr * h["weight_decay"])
        else:
            g = g + h["weight_decay"] * p
        m = b1 * state["exp_avg"] + (1.0 - b1) * g
        v = b2 * state["exp_avg_sq"] + (1.0 - b2) * (g * g)
        bc1 = 1.0 - b1 ** t
        bc2 = 1.0 - b2 ** t
        denom = sqrt(v) / sqrt(bc2) + h["eps"]
        return p - (lr / bc1) * (m / denom), {"exp_avg": m, "exp_avg_sq": v}


class AdamW(Adam):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, clip_value=None, clip_norm=None)

    Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` before the Adam step, as
    torch.optim.AdamW.

    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(32, 2)).astype(np.float32)
    >>> y = x @ np.array([[2.0], [-1.0]], np.float32) + 0.5
    >>> model = em.nn.Linear(2, 1, seed=0)
    >>> opt = em.optim.AdamW(model, lr=0.1, weight_decay=1e-4)
    >>> @em.compile
    ... def train(model: em.nn.Linear, opt: em.optim.AdamW, x: em.f32["B", 2], y: em.f32["B", 1]):
    ...     loss = em.nn.mse_loss(model(x), y)
    ...     opt.step(loss)
    ...     return loss
    >>> losses = [train(model, opt, x, y).item() for _ in range(100)]
    >>> losses[-1] < 0.05 * losses[0]
    True
    """

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 clip_value=None, clip_norm=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         clip_value=clip_value, clip_norm=clip_norm)


class RMSprop(Optimizer):
    """RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, clip_value=None, clip_norm=None)

    RMSprop with momentum, centering and weight decay, as torch.optim.RMSprop.

    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(32, 2)).astype(np.float32)
    >>> y = x @ np.array([[2.0], [-1.0]], np.float32) + 0.5
    >>> model = em.nn.Linear(2, 1, seed=0)
    >>> opt = em.optim.RMSprop(model, lr=0.03)
    >>> @em.compile
    ... def train(model: em.nn.Linear, opt: em.optim.RMSprop, x: em.f32["B", 2], y: em.f32["B", 1]):
    ...     loss = em.nn.mse_loss(model(x), y)
    ...     opt.step(loss)
    ...     return loss
    >>> losses = [train(model, opt, x, y).item() for _ in range(100)]
    >>> losses[-1] < 0.05 * losses[0]
    True
    """

    _state_names = ("square_avg", "momentum_buffer", "grad_avg")
    _bools = ("centered",)

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 clip_value=None, clip_norm=None):
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                         centered=centered, clip_value=clip_value, clip_norm=clip_norm)

    def _update(self, p, g, state, h, t):
        a = h["alpha"]
        g = g + h["weight_decay"] * p
        sq = a * state["square_avg"] + (1.0 - a) * (g * g)
        ga = a * state["grad_avg"] + (1.0 - a) * g
        avg = sqrt(where(h["centered"], sq - ga * ga, sq)) + h["eps"]
        b = h["momentum"] * state["momentum_buffer"] + g / avg
        new_p = where(h["momentum"] > 0.0, p - h["lr"] * b, p - h["lr"] * (g / avg))
        return new_p, {"square_avg": sq, "momentum_buffer": b, "grad_avg": ga}
