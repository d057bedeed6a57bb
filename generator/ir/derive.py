"""Differentiation of atomized expressions without expanding them (thesis §3.6).

One memoised pass over the sub-graph that depends on the variable: every atom's
derivative is built once, by its op's rule in the op table (ops.py), from its arguments'
derivatives, through the same interning constructors, so results are atomized and share atoms with the original (d(u/v) reuses
u/v, d(sqrt u) reuses sqrt u). The cost is linear in the size of that sub-graph.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from . import atom as _K  # the constructors the rules of the op table build with
from .atom import ONE, ZERO, Atom, ExpressionError, add, mul
from .graph import flatten, gc_paused, rebuild, topo
from .ops import OPS


def _rule(a: Atom, d: dict) -> Atom:
    """Derivative of `a` given the derivatives `d` of its arguments (missing = 0)."""
    rule = OPS[a.op].forward
    if rule is None:
        raise ExpressionError(f"no derivative rule for {a.op!r} in {a}")
    return rule(a, [d.get(x, ZERO) for x in a.args], _K)


def derivatives(roots: Iterable[Atom], seeds: Mapping[Atom, Atom]) -> dict[Atom, Atom]:
    """Directional derivative of every atom under `roots` that depends on a seeded symbol.

    `seeds` maps symbols to their derivatives ({x: 1} for d/dx; {q: qd, qd: qdd, t: 1} for
    d/dt). Atoms absent from the result have derivative zero.
    """
    mask = 0
    for s in seeds:
        if not s.is_symbol:
            raise ExpressionError(f"can only differentiate with respect to symbols, not {s}")
        mask |= s.mask
    d: dict[Atom, Atom] = {}
    with gc_paused():
        for a in topo(roots, mask):
            if a.op == "sym":
                dv = seeds.get(a)
                if dv is not None:
                    d[a] = dv
                continue
            r = _rule(a, d)
            if r is not ZERO:
                d[a] = r
    return d


def _partials(a: Atom) -> list[Atom]:
    """d a / d arg for each argument of `a` (reverse mode)."""
    rule = OPS[a.op].partials
    if rule is None:
        raise ExpressionError(f"no derivative rule for {a.op!r} in {a}")
    return rule(a, _K)


def adjoints(f: Atom, mask: int) -> dict[Atom, Atom]:
    """Reverse mode: d f / d a for every atom a under f that depends on `mask` (symbols
    included). One sweep per output, so a gradient costs about as much as f itself."""
    adj: dict[Atom, Atom] = {f: ONE}
    with gc_paused():
        for a in reversed(topo([f], mask)):
            g = adj.get(a)
            if g is None or not a.args:
                continue
            for x, p in zip(a.args, _partials(a)):
                if x.mask & mask:
                    term = mul(g, p)
                    prev = adj.get(x)
                    adj[x] = term if prev is None else add(prev, term)
    return adj


def diff(f, x: Atom):
    """d f / d x for an atom or a (nested) list of atoms."""
    flat = flatten(f)
    d = derivatives(flat, {x: ONE})
    return rebuild(f, lambda a: d.get(a, ZERO))


def time_derivative(f, tangents: Mapping[Atom, Atom]):
    """Total derivative d f/dt by the chain rule, `tangents` = {q: qd, qd: qdd, t: 1}."""
    flat = flatten(f)
    d = derivatives(flat, tangents)
    return rebuild(f, lambda a: d.get(a, ZERO))


