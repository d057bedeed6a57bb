"""Reading graphs: infix text of an expression and a one-atom-per-line dump."""
from __future__ import annotations

from typing import Iterable

from .atom import Atom
from .graph import topo

_PREC = {"add": 1, "neg": 2, "mul": 3, "div": 3, "pow": 4}


def _num(v: float) -> str:
    return repr(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def to_text(root: Atom, limit: int = 2000) -> str:
    """Infix text of an expression (shared sub-expressions are written out each time)."""
    memo: dict[Atom, tuple[str, int]] = {}
    for a in topo([root]):
        op = a.op
        if op == "const":
            s, p = _num(a.value), (5 if a.value >= 0 else 2)
        elif op == "sym":
            s, p = a.value.name, 5
        else:
            args = [memo[x] for x in a.args]
            me = _PREC.get(op, 5)

            def wrap(i, strict=False):
                s_, p_ = args[i]
                return f"({s_})" if p_ < me or (strict and p_ == me) else s_

            if op == "add":
                rhs = a.args[1]
                if rhs.op == "neg":
                    inner = memo[rhs.args[0]]
                    r = f"({inner[0]})" if inner[1] <= 1 else inner[0]
                    s = f"{wrap(0)} - {r}"
                else:
                    s = f"{wrap(0)} + {wrap(1)}"
            elif op == "mul":
                s = f"{wrap(0)}*{wrap(1)}"
            elif op == "div":
                s = f"{wrap(0)}/{wrap(1, strict=True)}"
            elif op == "neg":
                s = f"-{wrap(0, strict=True)}"
            elif op == "pow":
                s = f"{wrap(0, strict=True)}**{a.value}"
            else:
                s = f"{op}({', '.join(x[0] for x in args)})"
            p = me
        if len(s) > limit:
            s, p = "<...>", 5
        memo[a] = (s, p)
    return memo[root][0]


def dump(roots: Iterable[Atom], names: list[str] | None = None) -> str:
    """One atom per line, e.g. `t12 = t3 * t7`; outputs last as `out[k] = tN`."""
    roots = list(roots)
    ids: dict[Atom, str] = {}
    lines: list[str] = []
    sym = {"add": "+", "mul": "*", "div": "/"}
    for a in topo(roots):
        if a.op == "const":
            ids[a] = _num(a.value)
            continue
        if a.op == "sym":
            ids[a] = a.value.name
            continue
        t = f"t{len(lines)}"
        args = [ids[x] for x in a.args]
        if a.op in sym:
            rhs = f"{args[0]} {sym[a.op]} {args[1]}"
        elif a.op == "neg":
            rhs = f"-{args[0]}"
        elif a.op == "pow":
            rhs = f"{args[0]} ** {a.value}"
        else:
            rhs = f"{a.op}({', '.join(args)})"
        lines.append(f"{t} = {rhs}")
        ids[a] = t
    for k, r in enumerate(roots):
        label = names[k] if names else f"out[{k}]"
        lines.append(f"{label} = {ids[r]}")
    return "\n".join(lines) + "\n"

