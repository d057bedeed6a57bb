"""Substitution of symbols in atomized graphs without expanding them (thesis §3.5).

Memoised over the sub-graph that depends on the substituted symbols; everything else is
returned as it is (shared). Results are rebuilt through the interning constructors, so
they fold (substituting 0 removes terms) and are atomized.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from .atom import Atom, ExpressionError, apply, as_atom
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


