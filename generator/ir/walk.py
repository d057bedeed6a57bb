"""The one traversal of atom graphs, without recursion (graphs of serial chains are
thousands deep). It reads atoms only through `args` and `mask`, so it imports nothing of
the IR: atom.py's printing (text.py) and every pass share it without an import cycle."""
from __future__ import annotations

from typing import Iterable


def topo(roots: Iterable, mask: int | None = None) -> list:
    """Atoms reachable from `roots`, arguments before users, in a deterministic order.

    With `mask`, only atoms whose free symbols meet it are visited (and returned): the
    sub-graph that depends on those symbols.
    """
    seen: set = set()
    out: list = []
    for r in roots:
        if r in seen or (mask is not None and not r.mask & mask):
            continue
        stack = [r]
        while stack:
            a = stack[-1]
            if a in seen:
                stack.pop()
                continue
            if mask is None:
                pending = [x for x in a.args if x not in seen]
            else:
                pending = [x for x in a.args if x.mask & mask and x not in seen]
            if pending:
                stack.extend(reversed(pending))
            else:
                seen.add(a)
                out.append(a)
                stack.pop()
    return out
