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
from .graph import flatten, gc_paused, rebuild, topo


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
    op, args = a.op, a.args
    if op == "add":
        return [ONE, ONE]
    if op == "neg":
        return [neg(ONE)]
    if op == "mul":
        return [args[1], args[0]]
    if op == "div":
        return [div(ONE, args[1]), neg(div(a, args[1]))]
    if op == "pow":
        return [mul(as_atom(a.value), power(args[0], a.value - 1))]
    if op == "sqrt":
        return [div(ONE, mul(TWO, a))]
    if op == "sin":
        return [cos(args[0])]
    if op == "cos":
        return [neg(sin(args[0]))]
    if op == "tan":
        return [add(ONE, power(a, 2))]
    if op == "atan2":
        y, x = args
        r2 = add(power(x, 2), power(y, 2))
        return [div(x, r2), neg(div(y, r2))]
    if op == "exp":
        return [a]
    if op == "log":
        return [div(ONE, args[0])]
    if op == "abs":
        return [div(args[0], a)]
    raise ExpressionError(f"no derivative rule for {op!r} in {a}")


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


