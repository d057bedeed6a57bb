"""The float32 error the rounding model allows at given inputs, all roundings aligned.

floaterror's bounds hold for every rounding d_i in [-u, u] of every operation, at every
input of the domain. At one input x the first-order error of output y is

    sum_i  (dy/dv_i)(x) * v_i(x) * d_i      (+ the inputs' and literals' roundings),

so no bound that is sound under that model can be below

    A_y(x) = u * sum_i |(dy/dv_i)(x) * v_i(x)|   (+ the same for inputs and literals,
                                                 TRIG_ULPS * u * |dy/dv_i| for sin/cos,
                                                 literals only if a float cannot hold them),

the error when every rounding takes the sign that adds up. max_x A_y(x) over the domain
is therefore the floor of any such bound; what lies between it and the errors a kernel
shows is the roundings' cancellation, which the model cannot promise. A sampling tool
(the bench and the tests use it), not a bound: dy/dv_i are the tape's adjoints in double.
"""
from __future__ import annotations

import numpy as np

from ..ir.atom import ExpressionError
from ..lower.tape import Tape
from .floaterror import TRIG_ULPS, U

CHUNK = 2000


def aligned_errors(tape: Tape, X: np.ndarray) -> np.ndarray:
    """(n, n_outputs): A_y(x) at each row of X (the kernel's inputs, double)."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    return np.vstack([_aligned(tape, X[i:i + CHUNK]) for i in range(0, len(X), CHUNK)])


def _aligned(tape: Tape, X: np.ndarray) -> np.ndarray:
    n = len(X)
    val: dict[int, np.ndarray] = {}

    def v(o):
        kind, x = o
        return val[x] if kind == "t" else X[:, x] if kind == "in" else np.full(n, float(x))

    with np.errstate(all="ignore"):
        for ins in tape.instrs:  # forward, in double
            a = [v(o) for o in ins.args]
            op = ins.op
            if op == "add":
                r = (a[0] + a[1],)
            elif op == "sub":
                r = (a[0] - a[1],)
            elif op == "neg":
                r = (-a[0],)
            elif op == "mul":
                r = (a[0] * a[1],)
            elif op == "div":
                r = (a[0] / a[1],)
            elif op == "sqrt":
                r = (np.sqrt(a[0]),)
            elif op == "sin":
                r = (np.sin(a[0]),)
            elif op == "cos":
                r = (np.cos(a[0]),)
            elif op == "sincos":
                r = (np.sin(a[0]), np.cos(a[0]))
            else:
                raise ExpressionError(f"aligned float32 error: no rule for {op!r}")
            for d, x in zip(ins.dst, r):
                val[d] = x

        m = len(tape.outputs)
        adj: dict[int, np.ndarray] = {}  # temp -> (m, n) adjoints of every output at once
        adj_in = np.zeros((m, n, X.shape[1]))
        lits: dict[float, np.ndarray] = {}  # a literal is one float wherever it appears
        for j, o in enumerate(tape.outputs):
            if o[0] == "t":
                adj.setdefault(o[1], np.zeros((m, n)))[j] += 1.0
            elif o[0] == "in":
                adj_in[j, :, o[1]] += 1.0
            else:
                lits.setdefault(float(o[1]), np.zeros((m, n)))[j] += 1.0
        total = np.zeros((m, n))

        def give(o, g):
            kind, x = o
            if kind == "t":
                if x in adj:
                    adj[x] += g
                else:
                    adj[x] = g.copy()
            elif kind == "in":
                adj_in[:, :, x] += g
            else:
                lits.setdefault(float(x), np.zeros((m, n)))
                lits[float(x)] += g

        for ins in reversed(tape.instrs):  # reverse: each result's adjoint is final here
            gs = [adj.pop(d, None) for d in ins.dst]
            if all(g is None for g in gs):
                continue
            op, args = ins.op, ins.args
            if op == "neg":  # exact: no rounding
                give(args[0], -gs[0])
                continue
            if op in ("sin", "cos", "sincos"):
                x = v(args[0])
                s, c = np.sin(x), np.cos(x)
                gx = np.zeros((m, n))
                for g, fn in zip(gs, {"sin": "s", "cos": "c", "sincos": "sc"}[op]):
                    if g is None:
                        continue
                    total += TRIG_ULPS * U * np.abs(g)
                    gx += g * (c if fn == "s" else -s)
                give(args[0], gx)
                continue
            g = gs[0]
            r = val[ins.dst[0]]
            total += U * np.abs(g * r)
            if op == "add":
                give(args[0], g)
                give(args[1], g)
            elif op == "sub":
                give(args[0], g)
                give(args[1], -g)
            elif op == "mul":
                give(args[0], g * v(args[1]))
                give(args[1], g * v(args[0]))
            elif op == "div":
                den = v(args[1])
                give(args[0], g / den)
                give(args[1], -g * r / den)
            elif op == "sqrt":
                give(args[0], g / (2 * r))
        total += U * np.abs(adj_in * X[None, :, :]).sum(2)  # the real inputs rounded to float32
        for c, g in lits.items():
            if float(np.float32(c)) != c:  # a literal a float holds exactly is not rounded
                total += U * np.abs(g * c)
    return total.T


def rounded_operations(tape: Tape) -> list[int]:
    """Per output: the roundings that reach it (operations other than negation, two for
    sincos when both results are used, and the inputs it reads)."""
    writer = {d: ins for ins in tape.instrs for d in ins.dst}
    out = []
    for o in tape.outputs:
        seen, inputs, stack = set(), set(), [o]
        while stack:
            kind, x = stack.pop()
            if kind == "in":
                inputs.add(x)
            elif kind == "t" and x not in seen:
                seen.add(x)
                stack.extend(writer[x].args)
        out.append(sum(writer[d].op != "neg" for d in seen) + len(inputs))
    return out
