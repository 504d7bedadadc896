"""em.schedule: loop transformations a compiled program asks for, each checked for legality by
the isl dependence analysis before it is applied (core/passes/apply_schedule.h).

Loops are named by their ``with em.loop(...) as name:`` line, kernels by a name of their
``with em.kernel(...) as (i, j):`` axes or by their number in program order before merging
(``prog.ir("parallelize_host_loops")``). Apply requests with ``prog.schedule(...)`` (a new
program; the original stays as it was) or ``@em.compile(schedule=[...])``. A request that would
reverse or break a dependence raises ember.CompileError naming it (memory, index, source line).
"""
import linecache
import os
import re

from . import _ember as _C

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Request:
    """One schedule request (made by em.schedule.interchange, tile, parallelize or fuse)."""

    __slots__ = ("op", "args")

    def __init__(self, op, args):
        self.op, self.args = op, tuple(args)

    def __repr__(self):
        return f"em.schedule.{self.op}({', '.join(repr(a) for a in self.args)})"

    def __eq__(self, other):
        return isinstance(other, Request) and (self.op, self.args) == (other.op, other.args)

    def __hash__(self):
        return hash((self.op, self.args))

    def line(self):
        """The request as apply_schedule reads it: `op arg...`."""
        return " ".join([self.op] + [str(a) for a in self.args])


def _loop(name, what):
    if not isinstance(name, str) or not _NAME.match(name):
        raise _C.TypeError(f"{what} names a loop by its `with em.loop(...) as name:` name, got {name!r}")
    return name


def _kernel(ref, what):
    if isinstance(ref, int) and not isinstance(ref, bool) and ref >= 0:
        return ref
    if isinstance(ref, str) and _NAME.match(ref):
        return ref
    raise _C.TypeError(f"{what} names a kernel by a number (program order) or an axis name, got {ref!r}")


def interchange(a, b):
    """interchange(a, b) -> request: swap loop a and loop b, nested one directly in the other
    with nothing else in the outer one's body (a perfect nest). Illegal when a dependence has an
    earlier iteration of the outer loop and a later one of the inner (a wavefront). One of them may
    be a kernel axis (``as (i, j)``) whose kernel is the loop: the loop's iterations become that
    axis's threads and the loop runs over the axis's old range (illegal when the loop carries a
    dependence).

    >>> em.schedule.interchange("n1", "l1")
    em.schedule.interchange('n1', 'l1')
    """
    return Request("interchange", (_loop(a, "interchange"), _loop(b, "interchange")))


def tile(loop, size):
    """tile(loop, size) -> request: strip-mine a loop with a constant step: an outer loop
    ``<loop>_tile`` steps by `size` tiles and `loop` runs inside one tile (interchange the tile
    loop outward to block). Keeps every order, so it is always legal.

    >>> em.schedule.tile("k", 8)
    em.schedule.tile('k', 8)
    """
    if not isinstance(size, int) or isinstance(size, bool) or size < 2:
        raise _C.TypeError(f"tile: the size must be an int >= 2, got {size!r}")
    return Request("tile", (_loop(loop, "tile"), size))


def parallelize(loop):
    """parallelize(loop) -> request: a loop that is its kernel's whole body (besides index math)
    becomes the kernel's last axis: its iterations run as threads. Illegal when one iteration
    touches an element another iteration writes.

    >>> em.schedule.parallelize("r")
    em.schedule.parallelize('r')
    """
    return Request("parallelize", (_loop(loop, "parallelize"),))


def fuse(k1, k2):
    """fuse(k1, k2) -> request: kernel k2 joins kernel k1 (same shape, adjacent), even where the
    cost model would keep them apart. Illegal when a dependence between them crosses threads.

    >>> em.schedule.fuse(0, "q")
    em.schedule.fuse(0, 'q')
    """
    return Request("fuse", (_kernel(k1, "fuse"), _kernel(k2, "fuse")))


def requests(reqs):
    """The tuple of requests in `reqs` (checked)."""
    out = tuple(reqs)
    for r in out:
        if not isinstance(r, Request):
            raise _C.TypeError(f"a schedule takes em.schedule.interchange/tile/parallelize/fuse requests, got {r!r}")
    return out


def text(reqs):
    """The requests as Program::schedule holds them, one a line."""
    return "".join(r.line() + "\n" for r in reqs)


def register_source(fn):
    """Hands the lines of fn's source to the compiler when they are not in a readable file (a
    doctest, a notebook cell), so the schedule finds its loops' names."""
    code = getattr(fn, "__code__", None)
    if code is None or os.path.isfile(code.co_filename):
        return
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    if lines:
        _C._register_source(code.co_filename, [ln.rstrip("\n") for ln in lines])
