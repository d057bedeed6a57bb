"""Reading graphs: infix text of an expression and a one-atom-per-line dump."""
from __future__ import annotations

from typing import Iterable

from .atom import Atom
from .graph import topo
from .ops import OPS
from .text import _num, to_text  # noqa: F401  (to_text re-exported)


def dump(roots: Iterable[Atom], names: list[str] | None = None) -> str:
    """One atom per line, e.g. `t12 = t3 * t7`; outputs last as `out[k] = tN`."""
    roots = list(roots)
    ids: dict[Atom, str] = {}
    lines: list[str] = []
    for a in topo(roots):
        if a.op == "const":
            ids[a] = _num(a.value)
            continue
        if a.op == "sym":
            ids[a] = a.value.name
            continue
        t = f"t{len(lines)}"
        args = [ids[x] for x in a.args]
        o = OPS[a.op]
        if o.valued:  # pow
            rhs = f"{args[0]} {o.infix} {a.value}"
        elif o.infix is None:
            rhs = f"{a.op}({', '.join(args)})"
        elif o.arity == 1:  # neg
            rhs = f"{o.infix}{args[0]}"
        else:
            rhs = f"{args[0]} {o.infix} {args[1]}"
        lines.append(f"{t} = {rhs}")
        ids[a] = t
    for k, r in enumerate(roots):
        label = names[k] if names else f"out[{k}]"
        lines.append(f"{label} = {ids[r]}")
    return "\n".join(lines) + "\n"

