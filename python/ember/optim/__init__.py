"""em.optim: optimizers (SGD, Adam, AdamW, RMSprop) that take a module, `opt = em.optim.Adam(model,
lr=3e-3)`, and update it inside a compiled function that takes both as arguments (`opt.step(loss)`).
Hyperparameters are runtime scalars: change them between calls without recompiling."""
from .algorithms import SGD, Adam, AdamW, RMSprop
from .optimizer import Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop"]
