"""Rewrites of a kernel's output atoms that keep their values and lower their cost.

share_reciprocals: one reciprocal per distinct denominator. Exact in binary where it
scales a shared reciprocal by a power of two; elsewhere a / b becomes a * (1 / b), which
rounds differently in floating point (one more rounding), so it applies where the
kernel's builder chooses it (the reduced inverse dynamics), never as a general pass.
"""
from __future__ import annotations

import math

from ..ir import ONE, Atom, as_atom, mul, topo
from ..ir.atom import apply


def _pow2(c: float) -> bool:
    m, _ = math.frexp(abs(c))
    return c != 0 and m == 0.5


def share_reciprocals(roots: list[Atom]) -> list[Atom]:
    """`roots` with every division a / b rewritten as a * r_b, r_b = 1 / b one atom per
    distinct denominator (a denominator c * y with c a power of two, as in the derivative
    of a square root, shares y's: r_(c y) = (1/c) r_y, exact in binary). The chain rule
    gives each derivative of a quotient or a square root its own division by the same
    denominator; a division costs 14 cycles on a Cortex-M4F (a long routine in fixed
    point), a multiplication one."""
    new: dict[Atom, Atom] = {}
    recip: dict[Atom, Atom] = {}

    def r_of(b: Atom) -> Atom:
        got = recip.get(b)
        if got is None:
            if b.op == "mul" and b.args[0].is_const and _pow2(b.args[0].value):
                got = mul(as_atom(1.0 / b.args[0].value), r_of(b.args[1]))
            else:
                got = apply("div", (ONE, b))
            recip[b] = got
        return got

    for a in topo(roots):
        if not a.args:
            continue
        args = tuple(new.get(x, x) for x in a.args)
        if a.op == "div":
            num, den = args
            r = r_of(den)
            new[a] = r if num is ONE else mul(num, r)
        else:
            new[a] = apply(a.op, args, a.value)
    return [new.get(a, a) for a in roots]
