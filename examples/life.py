"""Conway's Game of Life on a torus; neighbours are gathered with wrap-around (modular) indices.

life_step is one generation (one fused kernel), called once per generation; life runs all the
generations in one program (a host em.loop over an em.var grid; the compiler keeps reading the
neighbours and writing the new grid in separate kernels). The demo uses life_step unless
--one-program is given.

Usage: /usr/bin/python3 examples/life.py [--size 48] [--steps 32] [--one-program] [--backend cpu]
"""
import argparse
import time

import numpy as np

from _ember_path import em  # ember from the build tree (or an installed copy)

OFFSETS = [(di, dj) for di in (-1, 0, 1) for dj in (-1, 0, 1) if (di, dj) != (0, 0)]


def generation(G):
    """One generation of grid G (i32, 0 or 1), traced: counts the 8 neighbours, applies B3/S23."""
    H, W = G.shape
    i, j = em.indices(G.shape)
    n = 0
    for di, dj in OFFSETS:
        n = n + G[(i + di) % H, (j + dj) % W]  # % has floor semantics: (0 - 1) % H == H - 1
    return em.where((n == 3) | ((G == 1) & (n == 2)), 1, 0)


@em.compile
def life(G: em.i32["H", "W"], steps: em.i32):  # noqa: F821
    """The grid after `steps` generations."""
    g = em.var(G)
    with em.loop(steps):
        g.val = generation(g.val)
    return g.val


@em.compile
def life_step(G: em.i32["H", "W"]):  # noqa: F821
    """One generation (a single fused kernel)."""
    return generation(G)


def life_numpy(G, steps):
    """The NumPy reference: neighbour counts with np.roll (wrap-around)."""
    for _ in range(steps):
        n = sum(np.roll(G, (-di, -dj), axis=(0, 1)) for di, dj in OFFSETS)
        G = ((n == 3) | ((G == 1) & (n == 2))).astype(np.int32)
    return G


def main():
    """Runs a random soup (plus a glider) and prints the final board and the population."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=48)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--one-program", action="store_true", help="all generations in one program (em.loop)")
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    em.init(backend=a.backend)

    G = (np.random.default_rng(1).random((a.size, a.size)) < 0.3).astype(np.int32)
    G[:4, :4] = 0
    G[0, 1] = G[1, 2] = G[2, 0] = G[2, 1] = G[2, 2] = 1  # a glider in the corner
    t0 = time.perf_counter()
    if a.one_program:
        prog, out = life, life(G, a.steps).numpy()
    else:
        prog, out = life_step, G
        for _ in range(a.steps):
            out = life_step(out)
        out = np.asarray(out)
    ms = (time.perf_counter() - t0) * 1e3
    for row in out[:24]:
        print("".join("#" if c else "." for c in row[:72]))
    same = np.array_equal(out, life_numpy(G, a.steps))
    print(f"{a.size}x{a.size}, {a.steps} generations in {ms:.1f} ms (with compiling), "
          f"population {G.sum()} -> {out.sum()}, {prog.name}: {prog.kernel_count} kernel(s); equal to NumPy: {same}")


if __name__ == "__main__":
    main()
