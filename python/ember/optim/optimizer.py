"""em.optim.Optimizer: the base of SGD, Adam, AdamW and RMSprop.

An optimizer owns its state as em.Tensors (per-parameter moments, a step counter) and its
hyperparameters as Python numbers. Passed to a compiled function (annotated with its class), all
of them become program inputs: the tensors are updated in place, the hyperparameters are runtime
scalars, so changing `opt.lr` between calls does not recompile. Inside the program
`opt.step(loss)` differentiates `loss` with respect to the parameters (em.grad), clips the
gradients (by value, then by global norm, as torch.nn.utils.clip_grad_value_/clip_grad_norm_),
applies the subclass's update rule and writes parameters, state and step counter back."""
import math

import numpy as np

from .. import _ember as _C
from .. import _tracing as T
from .._autodiff import grad as _grad
from .._control import if_ as _if, var as _var
from .._dtypes import bool as _bool, f32
from .._ops import clamp, sqrt, sum as _sum, where
from .._tensor import tensor, zeros_tensor
from ..nn.module import Module, Parameter

_TRACED = "_em_traced"


class Optimizer:
    """Optimizer(params, **hyper)

    The base of em.optim's optimizers. An optimizer takes a Module (or an iterable of Parameters),
    owns its state as em.Tensors (per-parameter moments, a step counter) and its hyperparameters as
    Python numbers (``opt.lr``). Passed to a compiled function (annotated with its class) next to
    the module, all of them become program inputs: the tensors are updated in place and the
    hyperparameters are runtime scalars, so changing ``opt.lr`` between calls does not recompile.
    Inside the program ``opt.step(loss)`` differentiates, clips, and updates. Subclasses set
    ``_state_names`` and ``_bools`` and define ``_update(p, g, state, h, t)``.

    >>> model = em.nn.Linear(3, 1, seed=0)
    >>> opt = em.optim.SGD(model, lr=0.1)
    >>> isinstance(opt, em.optim.Optimizer), opt.lr, opt.step_count
    (True, 0.1, 0)
    """

    _em_order = 1  # described after the modules, whose parameters it refers to
    _state_names = ()
    _bools = ()

    def __init__(self, params, **hyper):
        if isinstance(params, Module):
            named = params.named_parameters()
        else:
            try:
                named = [(str(i), p) for i, p in enumerate(params)]
            except TypeError:
                raise _C.TypeError(f"{type(self).__name__}: expected a Module or an iterable of Parameters, got "
                                   f"{type(params).__name__}") from None
        for n, p in named:
            if not isinstance(p, Parameter):
                raise _C.TypeError(f"{type(self).__name__}: parameter {n} is a {type(p).__name__}, not an "
                                   "em.nn.Parameter")
        if not named:
            raise _C.Error(f"{type(self).__name__}: no parameters to optimize")
        d = self.__dict__
        d["_names"] = [n for n, _ in named]
        d["_params"] = [p for _, p in named]
        d["_hyper"] = {}
        for k, v in hyper.items():
            self._set_hyper(k, v)
        d["_state"] = [{k: zeros_tensor(p.shape, f32) for k in self._state_names} for p in self._params]
        d["_step"] = zeros_tensor((), f32)

    # Hyperparameters: attributes (opt.lr = 1e-4), also through param_groups[0]["lr"].
    def _set_hyper(self, k, v):
        if k in self._bools:
            if not isinstance(v, (bool, np.bool_)):
                raise _C.TypeError(f"{type(self).__name__}: {k} must be a bool, got {v!r}")
            self._hyper[k] = bool(v)
            return
        if k.startswith("clip_") and v is None:
            self._hyper[k] = None
            return
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) or math.isnan(v):
            raise _C.TypeError(f"{type(self).__name__}: {k} must be a number, got {v!r}")
        v = float(v)
        if v < 0 or (k.startswith("clip_") and v == 0) or (k.startswith("beta") and v >= 1):
            raise _C.Error(f"{type(self).__name__}: invalid {k} = {v}")
        self._hyper[k] = v

    def __getattr__(self, k):
        h = self.__dict__.get("_hyper")
        if h is not None and k in h:
            return h[k]
        raise AttributeError(f"{type(self).__name__} has no attribute {k!r}")

    def __setattr__(self, k, v):
        if k in self.__dict__.get("_hyper", ()):
            self._set_hyper(k, v)
        else:
            object.__setattr__(self, k, v)

    @property
    def param_groups(self):
        """[the hyperparameter dict], as PyTorch's single param group; edits take effect at the next call
        (without recompiling).

        >>> opt = em.optim.Adam(em.nn.Linear(2, 2, seed=0), lr=1e-3)
        >>> opt.param_groups[0]["lr"] = 5e-4
        >>> opt.lr
        0.0005
        """
        return [_Hyper(self)]

    @property
    def step_count(self):
        """The number of steps taken (the value of the step counter tensor).

        >>> model = em.nn.Linear(2, 1, seed=0)
        >>> opt = em.optim.SGD(model, lr=0.1)
        >>> @em.compile
        ... def train(model: em.nn.Linear, opt: em.optim.SGD, x: em.f32["B", 2], y: em.f32["B", 1]):
        ...     opt.step(em.nn.mse_loss(model(x), y))
        >>> x, y = np.ones((4, 2), np.float32), np.zeros((4, 1), np.float32)
        >>> train(model, opt, x, y); train(model, opt, x, y)
        >>> opt.step_count
        2
        """
        return int(self._step.item())

    def zero_grad(self, set_to_none=True):
        """zero_grad(set_to_none=True) -> None

        Does nothing: each step computes its gradients afresh (kept for PyTorch habits).

        >>> em.optim.SGD(em.nn.Linear(2, 1, seed=0)).zero_grad()
        """

    # State.
    def state_dict(self):
        """state_dict() -> dict of str to numpy.ndarray

        {name: NumPy array}: "step", "state.<param>.<name>" and "hyper.<name>" (a clip of None is inf);
        em.save writes it.

        >>> sd = em.optim.Adam(em.nn.Linear(2, 1, seed=0), lr=0.01).state_dict()
        >>> sd["step"].item(), sd["hyper.lr"].item(), sd["state.weight.exp_avg"].shape
        (0.0, 0.01, (1, 2))
        """
        out = {"step": self._step.numpy()}
        for n, st in zip(self._names, self._state):
            for k, t in st.items():
                out[f"state.{n}.{k}"] = t.numpy()
        for k, v in self._hyper.items():
            out[f"hyper.{k}"] = np.array(math.inf if v is None else v)
        return out

    def load_state_dict(self, state):
        """load_state_dict(state) -> None

        Restores state_dict(): ember.Error on a missing or extra key, ember.ShapeError on a shape
        mismatch (then nothing changes).

        >>> model = em.nn.Linear(2, 1, seed=0)
        >>> a, b = em.optim.Adam(model, lr=0.01), em.optim.Adam(model, lr=0.5)
        >>> b.load_state_dict(a.state_dict())
        >>> b.lr
        0.01
        """
        own = self.state_dict()
        missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        if missing or extra:
            raise _C.Error(f"{type(self).__name__}.load_state_dict: "
                           + "; ".join(s for s in (f"missing keys {missing}" if missing else "",
                                                   f"unexpected keys {extra}" if extra else "") if s))
        for k, a in own.items():
            if np.shape(state[k]) != a.shape:
                raise _C.ShapeError(f"{type(self).__name__}.load_state_dict: '{k}' has shape {np.shape(state[k])}, "
                                    f"expected {a.shape}")
        self.__dict__["_step"] = tensor(np.asarray(state["step"], np.float32), f32)
        for n, st in zip(self._names, self._state):
            for k in st:
                st[k] = tensor(np.asarray(state[f"state.{n}.{k}"], np.float32), f32)
        for k in self._hyper:
            v = np.asarray(state[f"hyper.{k}"]).item()
            self._set_hyper(k, None if k.startswith("clip_") and v == math.inf else v)

    # Program arguments (python/ember/_objargs.py).
    def _em_describe(self, argname, ctx):
        parts, leaves = [("optimizer", "", type(self))], []
        for n, p, st in zip(self._names, self._params, self._state):
            owner = ctx.params.get(id(p))
            if owner is None:
                raise _C.TypeError(f"argument '{argname}': the {type(self).__name__} trains parameter '{n}', which "
                                   "is not a parameter of a Module argument of this program; pass the module it "
                                   "was made with as an argument too")
            parts.append(("trains", f"#{n}", owner))
            for k, t in st.items():
                parts.append(("state", f"{n}.{k}", tuple(t.shape), "f32"))
                leaves.append((f"{argname}.state.{n}.{k}", t))
        parts.append(("buffer", "step", (), "f32"))
        leaves.append((f"{argname}.step", self._step))
        parts.append(("hyperparameters", "#hyper", tuple(self._hyper)))
        for k, v in self._hyper.items():
            leaves.append((f"{argname}.{k}", (_bool, v) if k in self._bools else (f32, math.inf if v is None else v)))
        return tuple(parts), leaves

    def _em_snapshot(self):
        """Identity checks standing for _em_describe (python/ember/_objargs.py): the optimizer's
        attributes, parameter list, state tensors and hyperparameter values (a new `lr` value is
        a new float object, so a call after `opt.lr = ...` describes the optimizer again)."""
        from .._objargs import mapping_check, sequence_check
        return ([mapping_check(self.__dict__), mapping_check(self._hyper), sequence_check(self._params),
                 sequence_check(self._state)] + [mapping_check(st) for st in self._state])

    def _em_rebuild(self, values, ctx):
        c = object.__new__(type(self))
        d = c.__dict__
        d[_TRACED] = True
        d["_names"] = self._names
        d["_pvals"] = [ctx.values[id(p)] for p in self._params]
        d["_svals"] = [{k: next(values) for k in st} for st in self._state]
        d["_tstep"] = next(values)
        d["_hvals"] = d["_hyper"] = {k: next(values) for k in self._hyper}  # opt.lr reads the traced scalar
        return c

    def step(self, loss):
        """step(loss) -> None

        Inside a compiled function that takes this optimizer (and its module) as arguments: one
        optimization step on the scalar `loss`: the gradients with respect to the parameters (em.grad),
        clipping by value then by global norm (clip_value, clip_norm; as torch's ``clip_grad_value_`` and
        ``clip_grad_norm_``), the update rule; the parameters, state and step counter are written in place.

        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(64, 3)).astype(np.float32)
        >>> y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
        >>> model = em.nn.Linear(3, 1, seed=0)
        >>> opt = em.optim.Adam(model, lr=0.05)
        >>> @em.compile
        ... def train(model: em.nn.Linear, opt: em.optim.Adam, x: em.f32["B", 3], y: em.f32["B", 1]):
        ...     loss = em.nn.mse_loss(model(x), y)
        ...     opt.step(loss)
        ...     return loss
        >>> first = train(model, opt, x, y).item()
        >>> for _ in range(200):
        ...     last = train(model, opt, x, y).item()
        >>> last < 0.01 * first
        True
        """
        if not self.__dict__.get(_TRACED):
            raise T.error(_C.Error, f"{type(self).__name__}.step(loss) runs inside a compiled function that takes "
                                    f"the optimizer as an argument annotated with em.optim.{type(self).__name__}")
        self.apply_gradients(_grad(loss, list(self._pvals)))

    def apply_gradients(self, grads):
        """apply_gradients(grads) -> None

        Inside a compiled function taking this optimizer as an argument: one optimization step with
        the given gradients (traced values, one per parameter in registration order), for example ones
        all-reduced over MPI ranks (examples/distributed_train.py); ``opt.step(loss)`` is
        ``opt.apply_gradients(em.grad(loss, parameters))``. Clipping and the update rule are step's.

        >>> model = em.nn.Linear(2, 1, seed=0)
        >>> opt = em.optim.SGD(model, lr=0.5)
        >>> @em.compile
        ... def descend(model: em.nn.Linear, opt: em.optim.SGD, gw: em.f32[1, 2], gb: em.f32[1]):
        ...     opt.apply_gradients([gw, gb])
        >>> w0, b0 = model.weight.numpy(), model.bias.numpy()
        >>> descend(model, opt, np.ones((1, 2), np.float32), np.ones(1, np.float32))
        >>> bool(np.allclose(model.weight.numpy(), w0 - 0.5)), bool(np.allclose(model.bias.numpy(), b0 - 0.5))
        (True, True)
        """
        if not self.__dict__.get(_TRACED):
            raise T.error(_C.Error, f"{type(self).__name__}.apply_gradients runs inside a compiled function that "
                                    f"takes the optimizer as an argument annotated with em.optim.{type(self).__name__}")
        h, params = self._hvals, self._pvals
        grads = list(grads)
        if len(grads) != len(params):
            raise T.error(_C.TypeError, f"{type(self).__name__}.apply_gradients: {len(grads)} gradients for "
                                        f"{len(params)} parameters")
        for n, p, g in zip(self._names, params, grads):
            if tuple(getattr(g, "shape", ())) != tuple(p.shape):
                raise T.error(_C.ShapeError, f"{type(self).__name__}.apply_gradients: the gradient of '{n}' has "
                                             f"shape {tuple(getattr(g, 'shape', ()))}, expected {tuple(p.shape)}")
        if "clip_value" in h:
            c = h["clip_value"]
            grads = [clamp(g, -c, c) for g in grads]
        if "clip_norm" in h:  # torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), at most 1
            # The norm is computed only while clipping is on (clip_norm=None passes inf): a host
            # branch on the runtime scalar, so turning it on or off does not recompile.
            coef = _var(1.0)
            with _if(h["clip_norm"] < math.inf):
                total = _sum(grads[0] * grads[0])
                for g in grads[1:]:
                    total = total + _sum(g * g)
                c = h["clip_norm"] / (sqrt(total) + 1e-6)
                coef.val = where(c < 1.0, c, 1.0)
            grads = [g * coef.val for g in grads]
        t = self._tstep + 1.0
        # Each parameter's update is written right after it is computed (it reads only its own
        # parameter, gradient and state): the update and its writes fuse into one kernel.
        for p, g, st in zip(params, grads, self._svals):
            new_p, new_st = self._update(p, g, st, h, t)
            for k, v in new_st.items():
                st[k][...] = v
            p[...] = new_p
        self._tstep[...] = t

    def _update(self, p, g, state, h, t):
        """(new parameter, {state name: new value}) for parameter `p` with gradient `g` (traced)."""
        raise NotImplementedError

    def __repr__(self):
        hp = ", ".join(f"{k}={v}" for k, v in self._hyper.items())
        return f"em.optim.{type(self).__name__}({len(self._params)} parameters, {hp})"


class _Hyper(dict):
    """The param_groups[0] view: reads and writes the optimizer's hyperparameters."""

    def __init__(self, opt):
        super().__init__(opt._hyper)
        self._opt = opt

    def __setitem__(self, k, v):
        if k not in self._opt._hyper:
            raise KeyError(k)
        self._opt._set_hyper(k, v)
        super().__setitem__(k, self._opt._hyper[k])
