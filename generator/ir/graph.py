"""Walking atom graphs without recursion (graphs of serial chains are thousands deep)."""
from __future__ import annotations

import gc
from contextlib import contextmanager

from .atom import Atom
from .ops import OPS
from .walk import topo  # noqa: F401  (re-exported: the one traversal)


def flatten(f) -> list[Atom]:
    """The atoms of an atom or a nested list of atoms (numbers become constants)."""
    from .atom import as_atom

    if isinstance(f, (list, tuple)):
        return [y for x in f for y in flatten(x)]
    return [as_atom(f)]


def rebuild(f, fn):
    """The nested list `f` with every atom `a` replaced by `fn(a)`."""
    from .atom import as_atom

    if isinstance(f, (list, tuple)):
        return [rebuild(x, fn) for x in f]
    return fn(as_atom(f))


@contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector while building or walking big graphs.

    Atoms form a DAG and never a reference cycle, so the collector has nothing to free
    there; its full collections, which scan every live atom, cost a third of the time
    of differentiating and lowering a Stewart platform.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def translate(roots, const, symbol, funcs) -> list:
    """The atoms `roots` rebuilt in another algebra (sympy, CasADi SX, ...): constants by
    const(value), symbols by symbol(atom), + - * / and integer powers by the algebra's
    operators, everything else by funcs[op](*arguments) (sqrt, sin, ..., atan2)."""
    memo: dict = {}
    for a in topo(roots):
        op = a.op
        if op == "const":
            r = const(a.value)
        elif op == "sym":
            r = symbol(a)
        else:
            x = [memo[y] for y in a.args]
            o = OPS[op]
            if o.algebra is None:
                r = funcs[op](*x)
            elif o.valued:  # pow
                r = o.algebra(x[0], a.value)
            else:
                r = o.algebra(*x)
        memo[a] = r
    return [memo[r] for r in roots]
