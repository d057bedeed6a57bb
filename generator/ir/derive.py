"""Differentiation of atomized expressions without expanding them (thesis §3.6).

One memoised pass over the sub-graph that depends on the variable: every atom's
derivative is built once, from its arguments' derivatives, through the same interning
constructors, so results are atomized and share atoms with the original (d(u/v) reuses
u/v, d(sqrt u) reuses sqrt u). The cost is linear in the size of that sub-graph.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from .atom import (ONE, TWO, ZERO, Atom, ExpressionError, add, as_atom, cos, div, mul, neg,
                   power, sin, sub)
from .graph import flatten, rebuild, topo


def _rule(a: Atom, d: dict) -> Atom:
    """Derivative of `a` given the derivatives `d` of its arguments (missing = 0)."""
    op = a.op
    args = a.args
    da = [d.get(x, ZERO) for x in args]
    if op == "add":
        return add(da[0], da[1])
    if op == "neg":
        return neg(da[0])
    if op == "mul":
        u, v = args
        return add(mul(da[0], v), mul(u, da[1]))
    if op == "div":  # (du - (u/v) dv) / v
        u, v = args
        return div(sub(da[0], mul(a, da[1])), v)
    if op == "pow":
        n = a.value
        return mul(mul(as_atom(n), power(args[0], n - 1)), da[0])
    if op == "sqrt":
        return div(da[0], mul(TWO, a))
    if op == "sin":
        return mul(cos(args[0]), da[0])
    if op == "cos":
        return neg(mul(sin(args[0]), da[0]))
    if op == "tan":
        return mul(add(ONE, power(a, 2)), da[0])
    if op == "atan2":  # d atan2(y, x) = (x dy - y dx) / (x^2 + y^2)
        y, x = args
        return div(sub(mul(x, da[0]), mul(y, da[1])), add(power(x, 2), power(y, 2)))
    if op == "exp":
        return mul(a, da[0])
    if op == "log":
        return div(da[0], args[0])
    if op == "abs":
        return mul(div(args[0], a), da[0])
    raise ExpressionError(f"no derivative rule for {op!r} in {a}")


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


