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
from ..ir.ops import OPS
from ..lower.tape import Tape
from .floaterror import ATAN2_ERROR, TRIG_ULPS, U

CHUNK = 2000
_REVERSE = {"add", "sub", "neg", "mul", "div", "sqrt", "sin", "cos", "sincos", "atan2"}  # the ops _aligned differentiates


def aligned_errors(tape: Tape, X: np.ndarray) -> np.ndarray:
    """(n, n_outputs): A_y(x) at each row of X (the kernel's inputs, double)."""
    return _chunked(tape, X, *_FLOAT32)


def _f32_op(d, r, op):
    """The float32 rounding of a result r of op: relative U, absolute for mbforge's sin, cos
    and atan2 (floaterror's model)."""
    if op in ("sin", "cos", "sincos"):
        return TRIG_ULPS * U
    return ATAN2_ERROR if op == "atan2" else U * np.abs(r)


def _f32_literal(c):  # a literal a float holds exactly is not rounded
    return U * abs(c) if float(np.float32(c)) != c else 0.0


_FLOAT32 = (_f32_op, lambda X: U * np.abs(X), _f32_literal)  # at_op, at_inputs, at_literal of _aligned


def fixed_aligned_errors(tape: Tape, sites: list, X: np.ndarray) -> np.ndarray:
    """(n, n_outputs): the same floor for a fixed-point program, whose roundings are
    absolute: sum over its rounding symbols (fixerror.output_errors_boxes' `sites_out`:
    (temp or None for an input's, half ulp)) of |dy/d temp| times the half ulp. The
    literals' conversion errors are left out (a floor may leave terms out)."""
    per_temp: dict[int, float] = {}
    ins = []
    for d, h in sites:
        if d is None:
            ins.append(h)
        else:
            per_temp[d] = per_temp.get(d, 0.0) + h
    w_in = np.array(ins)
    return _chunked(tape, X, lambda d, r, op: per_temp.get(d, 0.0), lambda X: np.broadcast_to(w_in, X.shape),
                    lambda c: 0.0)


def _chunked(tape, X, at_op, at_inputs, at_literal):
    X = np.atleast_2d(np.asarray(X, dtype=float))
    return np.vstack([_aligned(tape, X[i:i + CHUNK], at_op, at_inputs, at_literal) for i in range(0, len(X), CHUNK)])


def summed_maxima(tape: Tape, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(floor, summed) per output over the rows of X (the states of one cell, at most CHUNK):
    the largest A_y(x), and the sum over the roundings of each one's largest |dy/dv_i| x
    rounding_i. A bound that charges every rounding its own largest over the cell can come
    no closer to the floor than summed / floor (and no bound below the floor); the rest of
    a cell-wise analysis' distance to the floor is in how it encloses the adjoints."""
    X = np.atleast_2d(np.asarray(X, dtype=float))[:CHUNK]
    summed = np.zeros(len(tape.outputs))

    def each(w):
        summed[:] += w.max(axis=1)
    total = _aligned(tape, X, *_FLOAT32, each)
    return total.max(axis=0), summed


def _aligned(tape: Tape, X: np.ndarray, at_op, at_inputs, at_literal, each=None) -> np.ndarray:
    """sum of |adjoint| x rounding size over the roundings: at_op(temp, its value, op)
    for a result, at_inputs(X) (n, n_in) for the inputs, at_literal(c) for a literal;
    each(contribution (outputs, n)) is called for every rounding when given."""
    n = len(X)
    val: dict[int, np.ndarray] = {}

    def v(o):
        kind, x = o
        return val[x] if kind == "t" else X[:, x] if kind == "in" else np.full(n, float(x))

    with np.errstate(all="ignore"):
        for ins in tape.instrs:  # forward, in double (the op table's numpy semantics)
            if ins.op not in _REVERSE:
                raise ExpressionError(f"aligned rounding error: no rule for {ins.op!r}")
            a = [v(o) for o in ins.args]
            if ins.op == "sincos":
                r = (np.sin(a[0]), np.cos(a[0]))
            else:
                r = (np.subtract(*a) if ins.op == "sub" else OPS[ins.op].np(*a),)  # atan2: np.arctan2(y, x)
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

        def charge(w):
            total[:] += w
            if each is not None:
                each(w)

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
                for d, g, fn in zip(ins.dst, gs, {"sin": "s", "cos": "c", "sincos": "sc"}[op]):
                    if g is None:
                        continue
                    charge(np.abs(g) * at_op(d, val[d], op))
                    gx += g * (c if fn == "s" else -s)
                give(args[0], gx)
                continue
            g = gs[0]
            r = val[ins.dst[0]]
            charge(np.abs(g) * at_op(ins.dst[0], r, op))
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
            elif op == "atan2":  # d atan2(y, x) = (x dy - y dx) / (x^2 + y^2)
                y, x = v(args[0]), v(args[1])
                r2 = x * x + y * y
                give(args[0], g * x / r2)
                give(args[1], -g * y / r2)
        sizes = at_inputs(X)
        for k in range(X.shape[1]):  # the real inputs rounded
            charge(np.abs(adj_in[:, :, k]) * sizes[None, :, k])
        for c, g in lits.items():
            charge(np.abs(g) * at_literal(c))
    return total.T


def rounded_operations(tape: Tape) -> list[int]:
    """Per output, the float32 roundings that reach it: operations other than negation
    (two for sincos when both results are used) and the inputs it reads."""
    op = {d: ins.op for ins in tape.instrs for d in ins.dst}
    cones = [tape.cone([o]) for o in tape.outputs]
    return [sum(op[d] != "neg" for d in temps) + len(inputs) for temps, inputs in cones]


def fixed_roundings(tape: Tape, sites: list) -> list[int]:
    """Per output, the fixed-point roundings (fixerror's sites) that reach it."""
    at: dict = {}
    for d, _ in sites:
        if d is not None:
            at[d] = at.get(d, 0) + 1
    cones = [tape.cone([o]) for o in tape.outputs]
    return [sum(at.get(d, 0) for d in temps) + len(inputs) for temps, inputs in cones]
