"""Data-parallel training over MPI ranks: train_digits.py's MLP on scikit-learn's digits, each
rank taking an equal share of every step's batch; the result equals one process training on the
whole batch (to float rounding).

Each step is two compiled programs and one MPI call per parameter:
  1. grads(model, g, x, y, share): the loss on this rank's rows, scaled by share = rows / batch,
     and its gradients (em.grad), written in place into `g`, a second model used as the gradient
     buffer (a Module argument's tensors are program inputs and can be stored into);
  2. comm.Allreduce(MPI.IN_PLACE, t) on each of g's em.Tensors: mpi4py reads and writes the
     tensor's memory through DLPack, without copies, and leaves the sum over ranks: the gradient
     of the mean loss over the whole batch;
  3. apply(model, opt, g): opt.apply_gradients(g's tensors) (Adam by default), the same update
     opt.step(loss) makes.
Every rank draws the same batch indices (a seeded generator), so no data moves between ranks.

Usage: mpirun -n 2 python3 examples/distributed_train.py [--steps 100] [--batch 128]
       [--hidden 128] [--lr 3e-3] [--optim adam|sgd] [--check]   (also runs without mpirun)
"""
import argparse
import sys
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)
from train_digits import MLP, load_data

OPTIMIZERS = {"adam": em.optim.Adam, "sgd": lambda m, lr: em.optim.SGD(m, lr=lr, momentum=0.9)}


def traced_params(model, names):
    """The traced values of a traced model's parameters, by dotted name (registration order)."""
    out = []
    for n in names:
        v = model
        for part in n.split("."):
            v = getattr(v, part)
        out.append(v)
    return out


_PROGRAMS = {}


def programs(opt_cls, names):
    """The compiled programs for an MLP trained by `opt_cls` (made once per optimizer class):
    grads, apply and (the single-process reference) train_full."""
    if opt_cls in _PROGRAMS:
        return _PROGRAMS[opt_cls]

    def grads(model: MLP, g: MLP, x: em.f32["B", 64], y: em.i32["B"], share: em.f32):  # noqa: F821
        loss = em.nn.cross_entropy(model(x), y) * share
        for buf, d in zip(traced_params(g, names), em.grad(loss, traced_params(model, names))):
            buf[...] = d
        return loss

    def apply(model: MLP, opt: opt_cls, g: MLP):
        opt.apply_gradients(traced_params(g, names))

    def train_full(model: MLP, opt: opt_cls, x: em.f32["B", 64], y: em.i32["B"]):  # noqa: F821
        loss = em.nn.cross_entropy(model(x), y)
        opt.step(loss)
        return loss

    for f in (grads, apply, train_full):
        f.__qualname__ = f"dp_{opt_cls.__name__}_{f.__name__}"
    progs = _PROGRAMS[opt_cls] = tuple(em.compile(f) for f in (grads, apply, train_full))
    return progs


def make(args):
    """A fresh model (seeded), its optimizer and the gradient buffer model."""
    model = MLP(hidden=args.hidden, seed=0)
    opt = OPTIMIZERS[args.optim](model, lr=args.lr)
    g = MLP(hidden=args.hidden, seed=1)
    return model, opt, g


def batches(X, y, steps, batch, seed=0):
    """The global batch of every step: the same on every rank."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        idx = rng.choice(len(X), batch, replace=False)
        yield X[idx], y[idx]


def train_distributed(comm, args, X, y):
    """Trains on this rank's share of each batch; (model, loss history, seconds per step after
    the first, the slowest rank's)."""
    from mpi4py import MPI
    size, rank = comm.Get_size(), comm.Get_rank()
    if args.batch % size:
        raise SystemExit(f"distributed_train: --batch {args.batch} must be a multiple of the {size} ranks")
    rows = args.batch // size
    model, opt, g = make(args)
    names = [n for n, _ in model.named_parameters()]
    grads, apply, _ = programs(type(opt), names)
    bufs = [p.data for p in g.parameters()]  # em.Tensors: handed to MPI as they are
    losses, t0 = [], None
    for s, (xb, yb) in enumerate(batches(X, y, args.steps, args.batch)):
        if s == 1:
            comm.Barrier()
            t0 = time.perf_counter()
        mine = slice(rank * rows, (rank + 1) * rows)
        loss = grads(model, g, np.ascontiguousarray(xb[mine]), np.ascontiguousarray(yb[mine]), rows / args.batch)
        for t in bufs:
            comm.Allreduce(MPI.IN_PLACE, t, op=MPI.SUM)
        apply(model, opt, g)
        losses.append(float(loss))
    comm.Barrier()
    per_step = (time.perf_counter() - t0) / max(args.steps - 1, 1) if t0 is not None else float("nan")
    losses = comm.allreduce(np.array(losses), op=MPI.SUM)  # per-rank shares of the batch mean
    return model, losses, comm.allreduce(per_step, op=MPI.MAX)


def train_single(args, X, y):
    """The reference: one process, the whole batch each step, opt.step(loss)."""
    model, opt, _ = make(args)
    _, _, train_full = programs(type(opt), [n for n, _ in model.named_parameters()])
    losses = [float(train_full(model, opt, xb, yb)) for xb, yb in batches(X, y, args.steps, args.batch)]
    return model, np.array(losses)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--optim", choices=sorted(OPTIMIZERS), default="adam")
    p.add_argument("--backend", default="cpu", help="each rank's Ember backend")
    p.add_argument("--check", action="store_true", help="compare with the single-process run on rank 0")
    p.add_argument("--tol", type=float, default=1e-4, help="--check: largest |difference| of a parameter")
    a = p.parse_args()
    from mpi4py import MPI  # here, not at the top: importing this module (the tests do) starts no MPI
    em.init(backend=a.backend)
    comm = MPI.COMM_WORLD
    X, y, Xte, yte = load_data()
    model, losses, per_step = train_distributed(comm, a, X, y)
    if comm.Get_rank() != 0:
        return
    acc = float(np.mean(np.argmax(model(em.tensor(Xte)).numpy(), axis=1) == yte))
    print(f"{comm.Get_size()} rank(s): {a.steps} steps of batch {a.batch} ({a.optim}, hidden {a.hidden}), "
          f"{1e3 * per_step:.2f} ms/step after the first; loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"test accuracy {100 * acc:.1f}%")
    if a.check:
        ref, ref_losses = train_single(a, X, y)
        diff = max(float(np.abs(p.numpy() - q.numpy()).max()) for p, q in zip(model.parameters(), ref.parameters()))
        scale = max(float(np.abs(q.numpy()).max()) for q in ref.parameters())
        ldiff = float(np.abs(losses - ref_losses).max())
        print(f"check against one process on the whole batch: max |parameter difference| {diff:.3g} "
              f"(parameters up to {scale:.3g}), max |loss difference| {ldiff:.3g}")
        if not diff <= a.tol:
            sys.exit(1)


if __name__ == "__main__":
    main()
