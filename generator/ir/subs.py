"""Substitution of symbols in atomized graphs without expanding them (thesis §3.5).

Memoised over the sub-graph that depends on the substituted symbols; everything else is
returned as it is (shared). Results are rebuilt through the interning constructors, so
they fold (substituting 0 removes terms) and are atomized.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from .atom import ZERO, Atom, ExpressionError, add, apply, as_atom, const, mul, neg
from .graph import flatten, gc_paused, rebuild, topo


def substitute_all(roots: Iterable[Atom], mapping: Mapping[Atom, object]) -> dict[Atom, Atom]:
    """{atom: substituted atom} for every atom under `roots` that depends on `mapping`."""
    mask = 0
    m: dict[Atom, Atom] = {}
    for s, v in mapping.items():
        if not isinstance(s, Atom) or not s.is_symbol:
            raise ExpressionError(f"can only substitute symbols, not {s!r}")
        m[s] = as_atom(v)
        mask |= s.mask
    out: dict[Atom, Atom] = {}
    with gc_paused():
        for a in topo(roots, mask):
            if a.op == "sym":
                out[a] = m.get(a, a)
                continue
            args = tuple(out.get(x, x) for x in a.args)
            out[a] = apply(a.op, args, a.value)
    return out


def subs(f, mapping: Mapping[Atom, object]):
    """f with symbols replaced; f is an atom or a (nested) list of atoms."""
    if isinstance(f, (list, tuple)):
        flat = flatten(f)
        done = substitute_all(flat, mapping)
        return rebuild(f, lambda a: done.get(a, a))
    f = as_atom(f)
    return substitute_all([f], mapping).get(f, f)




def subs_shifted(f, shift: Mapping[Atom, tuple[float, Atom]]):
    """f with each symbol s of `shift` replaced by c + d ((c, d) = shift[s], c a float),
    the constants of sums, differences and constant multiples of the shifted symbols kept
    apart and folded before any other operation sees them: (c1 + d1) - (c2 + d2) becomes
    (c1 - c2) + (d1 - d2), never a rounding of c1 + d1. With c the size of a coordinate and
    d a small displacement, float32 keeps d's digits (ulp(1) instead of ulp(40)).
    f is an atom or a (nested) list of atoms, like subs."""
    mask = 0
    for s in shift:
        if not isinstance(s, Atom) or not s.is_symbol:
            raise ExpressionError(f"can only substitute symbols, not {s!r}")
        mask |= s.mask
    aff: dict[Atom, tuple[float, Atom]] = {}  # atom -> (constant, rest) of its value

    def part(x: Atom) -> tuple[float, Atom]:
        if x in aff:
            return aff[x]
        if x.is_const:
            return float(x.value), ZERO
        return 0.0, x

    def whole(x: Atom) -> Atom:
        c, r = part(x)
        return r if c == 0.0 else add(const(c), r)

    flat = flatten(f) if isinstance(f, (list, tuple)) else [as_atom(f)]
    with gc_paused():
        for a in topo(flat, mask):
            if a.op == "sym":
                if a in shift:
                    aff[a] = (float(shift[a][0]), as_atom(shift[a][1]))
                continue
            if a.op == "add":
                (c1, r1), (c2, r2) = part(a.args[0]), part(a.args[1])
                aff[a] = (c1 + c2, add(r1, r2))
            elif a.op == "neg":
                c, r = part(a.args[0])
                aff[a] = (-c, neg(r))
            elif a.op == "mul" and (a.args[0].is_const or a.args[1].is_const):
                k, x = (a.args[0], a.args[1]) if a.args[0].is_const else (a.args[1], a.args[0])
                c, r = part(x)
                aff[a] = (float(k.value) * c, mul(k, r))
            else:
                aff[a] = (0.0, apply(a.op, tuple(whole(x) for x in a.args), a.value))
    if isinstance(f, (list, tuple)):
        return rebuild(f, whole)
    return whole(flat[0])
