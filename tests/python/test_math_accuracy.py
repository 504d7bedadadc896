"""Transcendental functions against NumPy's own accuracy vectors (issue 39, part 5).

NumPy ships, for each ufunc it validates, a CSV of float32 inputs, the correctly rounded outputs
and the largest error it allows in ulp (2 to 4): numpy/core/tests/data/umath-validation-set-*.csv
(Debian's python3-numpy; numpy/_core/tests/data in NumPy 2). Every float32 row of the thirteen
files for Ember's sin cos tan exp exp2 log log2 tanh sinh cosh asin acos atan runs through one
compiled program per function on every backend; the result's word is compared with the CSV's in
ulp (ordered words: +0 and -0 are one ulp value apart from nothing but each other, and a zero of
the wrong sign is a mismatch; NaN matches any NaN). No row may be over its tolerance, except the
driver exceptions listed in _DRIVER_EXCEPTIONS (none at present: README "Backends", GPU math).

`PYTHONPATH=build/python /usr/bin/python3 tests/python/test_math_accuracy.py [backend ...]` prints the table of rows over
tolerance per function and backend (and the worst row of each), without asserting anything."""
import sys
from pathlib import Path

import numpy as np
import pytest

import ember as em

# (NumPy's ufunc name in the file name, Ember's function)
FUNCTIONS = [("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("exp", "exp"), ("exp2", "exp2"), ("log", "log"),
             ("log2", "log2"), ("tanh", "tanh"), ("sinh", "sinh"), ("cosh", "cosh"), ("arcsin", "asin"),
             ("arccos", "acos"), ("arctan", "atan")]

# Rows a backend's driver cannot get right, by backend: (predicate over (input words, expected
# words) -> bool mask, reason). Those rows are still run and reported, but only an expected failure.
_DRIVER_EXCEPTIONS = {}


def _data_dir():
    for sub in ("core", "_core"):
        d = Path(np.__file__).parent / sub / "tests" / "data"
        if (d / "umath-validation-set-sin.csv").is_file():
            return d
    return None


def load_vectors(ufunc):
    """(inputs, expected outputs, tolerances): the float32 rows of NumPy's CSV for `ufunc`, as
    uint32 words and int ulp tolerances."""
    rows = []
    with open(_data_dir() / f"umath-validation-set-{ufunc}.csv") as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) == 4 and parts[0] == "np.float32":
                rows.append((int(parts[1], 16), int(parts[2], 16), int(parts[3])))
    a = np.array(rows, dtype=np.int64)
    return a[:, 0].astype(np.uint32), a[:, 1].astype(np.uint32), a[:, 2]


def ulp_distance(got, want):
    """Distance in ulp between float32 words (arrays of uint32): the difference of their positions
    on the ordered line of floats (-0 and +0 share one position). A NaN matches any NaN and
    nothing else; a zero of the wrong sign, or NaN against a number, is infinitely far."""
    got = got.astype(np.int64)
    want = want.astype(np.int64)

    def key(w):
        return np.where(w >= 0x80000000, -(w & 0x7FFFFFFF), w)

    def isnan(w):
        return (w & 0x7FFFFFFF) > 0x7F800000

    d = np.abs(key(got) - key(want)).astype(np.float64)
    gn, wn = isnan(got), isnan(want)
    d[gn | wn] = np.inf
    d[gn & wn] = 0.0
    zeros = ((got & 0x7FFFFFFF) == 0) & ((want & 0x7FFFFFFF) == 0)
    d[zeros & (got != want)] = np.inf
    return d


_PROGRAMS = {}


def _program(name):
    """One compiled program per function (kept across backends and tests: cache-friendly)."""
    if name not in _PROGRAMS:
        fn = getattr(em, name)

        def f(x: em.f32["N"]):  # noqa: F821
            return fn(x)
        _PROGRAMS[name] = em.compile(f, name=f"accuracy_{name}")
    return _PROGRAMS[name]


def evaluate(ufunc, name):
    """(inputs, expected, got, tolerance, distance) for one function on the current backend."""
    x, want, tol = load_vectors(ufunc)
    got = _program(name)(x.view(np.float32)).numpy().view(np.uint32)
    return x, want, got, tol, ulp_distance(got, want)


def _f(w):
    return f"{float(np.uint32(w).view(np.float32))!r} (0x{int(w):08x})"


def describe(ufunc, name, x, want, got, tol, dist, rows):
    """The worst of `rows` in words, for failure messages and the table."""
    if not np.any(rows):
        return ""
    i = np.flatnonzero(rows)[np.argmax(dist[rows] - tol[rows])]
    return (f"{name}({_f(x[i])}) = {_f(got[i])}, expected {_f(want[i])}: {dist[i]:g} ulp "
            f"(tolerance {tol[i]})")


needs_data = pytest.mark.skipif(_data_dir() is None,
                                reason="NumPy's accuracy vectors (umath-validation-set-*.csv) are not installed")


@needs_data
@pytest.mark.parametrize("ufunc,name", FUNCTIONS, ids=[n for _, n in FUNCTIONS])
def test_numpy_validation_vectors(backend, ufunc, name):
    x, want, got, tol, dist = evaluate(ufunc, name)
    over = dist > tol
    excused = np.zeros_like(over)
    reasons = []
    for predicate, reason in _DRIVER_EXCEPTIONS.get(backend, ()):
        m = predicate(x, want) & over
        if np.any(m):
            excused |= m
            reasons.append(reason)
    bad = over & ~excused
    assert not np.any(bad), (f"{int(np.sum(bad))} of {len(x)} rows over NumPy's tolerance on {backend}; worst: "
                             + describe(ufunc, name, x, want, got, tol, dist, bad))
    if np.any(excused):
        pytest.xfail(f"{int(np.sum(excused))} rows over tolerance, driver exceptions: " + "; ".join(reasons))


def _table(backends):
    em_backends = [b for b in backends if not em._ember.backend_unavailable(b)]
    print("| function | " + " | ".join(em_backends) + " |")
    print("|---|" + "---|" * len(em_backends))
    worst = []
    for ufunc, name in FUNCTIONS:
        cells = []
        for b in em_backends:
            em.init(b)
            x, want, got, tol, dist = evaluate(ufunc, name)
            over = dist > tol
            cells.append(f"{int(np.sum(over))} / {len(x)}")
            if np.any(over):
                worst.append(f"{b}: " + describe(ufunc, name, x, want, got, tol, dist, over))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    for w in worst:
        print(w)


if __name__ == "__main__":
    _table(sys.argv[1:] or ["cpu", "vulkan", "vulkan-hlsl", "opengl"])
