"""The 2-D stable fluid of examples/fluid.py split over MPI ranks by rows, with halo rows
exchanged each step; the result equals the single-process run (fluid.fluid_step) exactly.

Each rank holds its n = H / ranks rows plus `halo` rows above and below (a block of n + 2 halo
rows, full width: the columns stay periodic inside the block). One compiled program runs the
whole step on the block: advection, divergence, the Jacobi iterations in an em.loop, projection.
Rows near the block's edges read garbage (indices clamp there), but the garbage moves inwards by
at most `reach` rows in advection, one row in the divergence, one per Jacobi iteration and one in
the projection, so with halo = reach + iters + 2 the n rows in the middle are exact. Then every
rank sends its first and last `halo` interior rows to its neighbours (two MPI Sendrecv per field,
straight out of and into the em.Tensor results, viewed with em.Tensor.view_numpy: no copies), which
makes the halos valid for the next step. That is one exchange per step, paid for by computing the
halo rows redundantly. Positions use global row numbers, so the arithmetic is the same as in the
single-process program and the results agree bit for bit.

`reach` bounds the advection: |dt * velocity| must stay below reach - 1 cells; every step checks
it (an MPI max over the ranks) and stops with an error otherwise.

Usage: mpirun -n 2 python3 examples/distributed_fluid.py [--size 128] [--steps 40] [--iters 20]
       [--reach 3] [--check]      (also runs without mpirun, as one rank)
"""
import argparse
import sys
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)
import fluid


def _wrap(k, H):
    """k mod H for k in [-H, 2H) (traced): two selects, cheaper than an integer remainder."""
    k = em.where(k < 0, k + H, k)
    return em.where(k >= H, k - H, k)


def _advect_block(F, u, v, dt, i, j, row0, H):
    """F sampled bilinearly at (g - dt v, j - dt u) where g is block row i's global row (traced);
    the same arithmetic as fluid._advect on the whole grid."""
    Hb, W = F.shape
    g = _wrap(i + row0, H)
    x = em.f32(j) - dt * u
    y = em.f32(g) - dt * v
    x0, y0 = em.floor(x), em.floor(y)
    tx, ty = x - x0, y - y0
    j0 = em.i32(x0) % W
    j1 = (j0 + 1) % W
    i0 = em.min(_wrap(em.i32(y0) - row0, H), Hb - 1)  # the block row of global row y0 (mod H); off the
    i1 = em.min(i0 + 1, Hb - 1)                        # block only where results are discarded
    a = F[i0, j0] + (F[i0, j1] - F[i0, j0]) * tx
    b = F[i1, j0] + (F[i1, j1] - F[i1, j0]) * tx
    return a + (b - a) * ty


@em.compile
def block_step(U: em.f32["B", "W"], V: em.f32["B", "W"], D: em.f32["B", "W"], dt: em.f32,  # noqa: F821
               iters: em.i32, row0: em.i32, H: em.i32):
    """fluid.fluid_step on a block of rows whose first row is global row `row0` of an H-row grid:
    (U', V', D', pressure), exact in the rows at least `halo` away from the block's edges."""
    Hb, W = U.shape
    i, j = em.indices(U.shape)
    im, ip = (i - 1) % Hb, (i + 1) % Hb  # wraps inside the block: garbage at its edges only
    jm, jp = (j - 1) % W, (j + 1) % W
    u = _advect_block(U, U, V, dt, i, j, row0, H)
    v = _advect_block(V, U, V, dt, i, j, row0, H)
    d = _advect_block(D, U, V, dt, i, j, row0, H)
    div = 0.5 * ((u[i, jp] - u[i, jm]) + (v[ip, j] - v[im, j]))
    p = em.var(em.zeros(U.shape, em.f32))
    with em.loop(iters):
        q = p.val
        p.val = (q[im, j] + q[ip, j] + q[i, jm] + q[i, jp] - div) * 0.25
    P = p.val
    return u - 0.5 * (P[i, jp] - P[i, jm]), v - 0.5 * (P[ip, j] - P[im, j]), d, P


def jet_mask(rows, n):
    """Where fluid.py's demo forces the flow, on global rows `rows` (all columns of an n x n grid)."""
    ii, jj = np.meshgrid(rows, np.arange(n), indexing="ij")
    return (ii - n // 2) ** 2 + (jj - n // 6) ** 2 < (n // 16) ** 2


def jet_values(s):
    """(u, v, dye) the jet sets at step s."""
    return np.float32(1.0), np.float32(0.3 * np.sin(s / 5.0)), np.float32(1.0)


def _host(f):
    """A writable NumPy view of a block: an em.Tensor's memory (no copy), or the array itself."""
    return f.view_numpy() if isinstance(f, em.Tensor) else f


class Domain:
    """This rank's rows of an n x n grid: n_local interior rows from global row `first`, a halo
    of `halo` rows each side, the neighbours above (rank - 1) and below (rank + 1), periodic."""

    def __init__(self, comm, n, iters, reach):
        self.comm, self.n, self.iters, self.reach = comm, n, iters, reach
        size, rank = comm.Get_size(), comm.Get_rank()
        if n % size:
            raise SystemExit(f"distributed_fluid: --size {n} must be a multiple of the {size} ranks")
        self.n_local = n // size
        self.halo = reach + iters + 2
        if self.halo > self.n_local or self.halo + reach >= n:  # (the second: _wrap's range)
            raise SystemExit(f"distributed_fluid: the halo ({self.halo} rows = reach {reach} + iters {iters} + 2) "
                             f"exceeds the {self.n_local} rows per rank; use fewer ranks, a larger grid or fewer "
                             "iterations")
        self.first = rank * self.n_local
        self.row0 = self.first - self.halo
        self.up, self.down = (rank - 1) % size, (rank + 1) % size
        self.rows = (np.arange(self.n_local + 2 * self.halo) + self.row0) % n  # global row of each block row

    def exchange(self, *fields):
        """Fills the halo rows of each block (em.Tensor or array, in place) from the neighbours'
        interior rows: two Sendrecv per field, no copies on either side."""
        h, m = self.halo, self.n_local
        for f in fields:
            a = _host(f)
            self.comm.Sendrecv(a[h:2 * h], dest=self.up, sendtag=1, recvbuf=a[h + m:], source=self.down, recvtag=1)
            self.comm.Sendrecv(a[m:h + m], dest=self.down, sendtag=2, recvbuf=a[:h], source=self.up, recvtag=2)

    def interior(self, f):
        """The interior rows of a block (a view)."""
        return _host(f)[self.halo:self.halo + self.n_local]

    def gather(self, f):
        """The whole n x n field on rank 0 (None elsewhere)."""
        out = np.empty((self.n, self.n), np.float32) if self.comm.Get_rank() == 0 else None
        self.comm.Gather(np.ascontiguousarray(self.interior(f)), out, root=0)
        return out


def run_distributed(comm, n, steps, iters, dt, reach):
    """Runs the demo's jet for `steps` steps; (U, V, D, P) gathered on rank 0 (None elsewhere) and
    the seconds per step after the first (compiling) one, the slowest rank's."""
    from mpi4py import MPI
    dom = Domain(comm, n, iters, reach)
    shape = (dom.n_local + 2 * dom.halo, n)
    U, V, D = (np.zeros(shape, np.float32) for _ in range(3))
    P = None
    t0 = None
    mask = jet_mask(dom.rows, n)
    for s in range(steps):
        if s == 1:
            comm.Barrier()
            t0 = time.perf_counter()
        if s < steps // 2:
            for f, val in zip((U, V, D), jet_values(s)):
                _host(f)[mask] = val  # on the halo rows too: they are the neighbours' rows, forced alike
        vmax = max(float(np.abs(dom.interior(U)).max()), float(np.abs(dom.interior(V)).max()))
        if comm.allreduce(vmax * abs(dt), op=MPI.MAX) >= reach - 1:
            raise SystemExit(f"distributed_fluid: |dt * velocity| reached {reach - 1} cells at step {s}; "
                             "raise --reach")
        U, V, D, P = block_step(U, V, D, dt, iters, dom.row0, n)
        dom.exchange(U, V, D)
    comm.Barrier()
    per_step = (time.perf_counter() - t0) / max(steps - 1, 1) if t0 is not None else float("nan")
    per_step = comm.allreduce(per_step, op=MPI.MAX)
    return tuple(dom.gather(f) for f in (U, V, D, P)), per_step


def run_single(n, steps, iters, dt):
    """The same run with fluid.fluid_step on the whole grid in this process: (U, V, D, P)."""
    U, V, D = (np.zeros((n, n), np.float32) for _ in range(3))
    P = None
    mask = jet_mask(np.arange(n), n)
    for s in range(steps):
        if s < steps // 2:
            U[mask], V[mask], D[mask] = jet_values(s)
        Ut, Vt, Dt, Pt = fluid.fluid_step(U, V, D, dt, iters)
        U, V, D, P = Ut.numpy(), Vt.numpy(), Dt.numpy(), Pt.numpy()
    return U, V, D, P


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dt", type=float, default=1.0)
    p.add_argument("--reach", type=int, default=3)
    p.add_argument("--backend", default="cpu", help="each rank's Ember backend")
    p.add_argument("--check", action="store_true", help="compare with the single-process run on rank 0")
    a = p.parse_args()
    from mpi4py import MPI  # here, not at the top: importing this module (the tests do) starts no MPI
    em.init(backend=a.backend)
    comm = MPI.COMM_WORLD
    fields, per_step = run_distributed(comm, a.size, a.steps, a.iters, a.dt, a.reach)
    if comm.Get_rank() != 0:
        return
    U, V, D, P = fields
    print(f"{comm.Get_size()} rank(s), {a.size}x{a.size}, {a.steps} steps, {a.iters} Jacobi iterations: "
          f"{1e3 * per_step:.2f} ms/step after the first; max |div u| {np.abs(fluid.divergence(U, V)).max():.2e}, "
          f"dye total {D.sum():.4f}")
    if a.check:
        ref = run_single(a.size, a.steps, a.iters, a.dt)
        diffs = [float(np.abs(x - y).max()) for x, y in zip(fields, ref)]
        same = all(np.array_equal(x, y) for x, y in zip(fields, ref))
        print(f"check against the single-process run: max |difference| U {diffs[0]:.3g} V {diffs[1]:.3g} "
              f"D {diffs[2]:.3g} P {diffs[3]:.3g}; {'bitwise equal' if same else 'NOT bitwise equal'}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
