"""Infix text of an expression, from the op table alone.

This module imports only the op table and the traversal of the IR (atoms are read through
`op`, `args` and `value`), so `atom.py` can print and order atoms with it without an import cycle.
The text of an atom depends only on its structure: it is the tie-break of the canonical
order when two structural keys collide.
"""
from __future__ import annotations

from .ops import OPS
from .walk import topo


def _num(v: float) -> str:
    return repr(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def to_text(root, limit: int = 2000) -> str:
    """Infix text of an expression (shared sub-expressions are written out each time)."""
    memo: dict = {}
    for a in topo([root]):
        op = a.op
        if op == "const":
            s, p = _num(a.value), (5 if a.value >= 0 else 2)
        elif op == "sym":
            s, p = a.value.name, 5
        else:
            args = [memo[x] for x in a.args]
            me = OPS[op].prec

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
            elif op == "div":
                s = f"{wrap(0)}/{wrap(1, strict=True)}"
            elif op == "neg":
                s = f"-{wrap(0, strict=True)}"
            elif op == "pow":
                s = f"{wrap(0, strict=True)}**{a.value}"
            elif OPS[op].infix is not None:  # mul
                s = f"{wrap(0)}{OPS[op].infix}{wrap(1)}"
            else:
                s = f"{op}({', '.join(x[0] for x in args)})"
            p = me
        if len(s) > limit:
            s, p = "<...>", 5
        memo[a] = (s, p)
    return memo[root][0]
