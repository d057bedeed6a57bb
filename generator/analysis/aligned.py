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

from ..lower.tape import Tape
from ..lower.tapeops import TAPE_OPS, Rules, run
from .floaterror import ATAN2_ERROR, TRIG_ULPS, U

CHUNK = 2000


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


class _Sweep:
    """What the forward evaluation and ADJOINT_RULES read and write: every value in double
    at the rows of X, then per temp the adjoints of every output at once (m, n), and the
    sum of |adjoint| x rounding size so far."""

    def __init__(self, tape: Tape, X: np.ndarray, at_op, each):
        self.X, self.at_op, self.each = X, at_op, each
        self.n, self.m = len(X), len(tape.outputs)
        self.val: dict[int, np.ndarray] = {}
        self.adj: dict[int, np.ndarray] = {}  # temp -> (m, n) adjoints of every output at once
        self.adj_in = np.zeros((self.m, self.n, X.shape[1]))
        self.lits: dict[float, np.ndarray] = {}  # a literal is one float wherever it appears
        self.total = np.zeros((self.m, self.n))

    def v(self, o):
        kind, x = o
        return self.val[x] if kind == "t" else self.X[:, x] if kind == "in" else np.full(self.n, float(x))

    def charge(self, w) -> None:
        self.total[:] += w
        if self.each is not None:
            self.each(w)

    def give(self, o, g) -> None:
        kind, x = o
        if kind == "t":
            if x in self.adj:
                self.adj[x] += g
            else:
                self.adj[x] = g.copy()
        elif kind == "in":
            self.adj_in[:, :, x] += g
        else:
            self.lits.setdefault(float(x), np.zeros((self.m, self.n)))
            self.lits[float(x)] += g

    def rounded(self, ins):
        """The adjoint of ins's one result, its rounding charged; None if nothing reads it."""
        g = self.adj.pop(ins.dst[0], None)
        if g is not None:
            self.charge(np.abs(g) * self.at_op(ins.dst[0], self.val[ins.dst[0]], ins.op))
        return g


def _evaluate(s: _Sweep, ins) -> None:  # forward, in double (the tape op table's numpy semantics)
    for d, x in zip(ins.dst, TAPE_OPS[ins.op].np(*[s.v(o) for o in ins.args])):
        s.val[d] = x


def _a_neg(s: _Sweep, ins) -> None:  # exact: no rounding
    g = s.adj.pop(ins.dst[0], None)
    if g is not None:
        s.give(ins.args[0], -g)


def _a_add(s: _Sweep, ins) -> None:  # add, sub
    g = s.rounded(ins)
    if g is not None:
        s.give(ins.args[0], g)
        s.give(ins.args[1], g if ins.op == "add" else -g)


def _a_mul(s: _Sweep, ins) -> None:
    g = s.rounded(ins)
    if g is not None:
        s.give(ins.args[0], g * s.v(ins.args[1]))
        s.give(ins.args[1], g * s.v(ins.args[0]))


def _a_div(s: _Sweep, ins) -> None:
    g = s.rounded(ins)
    if g is not None:
        den = s.v(ins.args[1])
        s.give(ins.args[0], g / den)
        s.give(ins.args[1], -g * s.val[ins.dst[0]] / den)


def _a_sqrt(s: _Sweep, ins) -> None:
    g = s.rounded(ins)
    if g is not None:
        s.give(ins.args[0], g / (2 * s.val[ins.dst[0]]))


def _a_atan2(s: _Sweep, ins) -> None:  # d atan2(y, x) = (x dy - y dx) / (x^2 + y^2)
    g = s.rounded(ins)
    if g is not None:
        y, x = s.v(ins.args[0]), s.v(ins.args[1])
        r2 = x * x + y * y
        s.give(ins.args[0], g * x / r2)
        s.give(ins.args[1], -g * y / r2)


def _a_trig(s: _Sweep, ins) -> None:  # sin, cos, sincos: d sin = cos dx, d cos = -sin dx
    gs = [s.adj.pop(d, None) for d in ins.dst]
    if all(g is None for g in gs):
        return
    x = s.v(ins.args[0])
    sn, cs = np.sin(x), np.cos(x)
    gx = np.zeros((s.m, s.n))
    for d, g, fn in zip(ins.dst, gs, TAPE_OPS[ins.op].results):
        if g is None:
            continue
        s.charge(np.abs(g) * s.at_op(d, s.val[d], ins.op))
        gx += g * (cs if fn == "sin" else -sn)
    s.give(ins.args[0], gx)


def _no_rule(tape, ins) -> str:
    return f"aligned rounding error: no rule for {ins.op!r}"


ADJOINT_RULES = Rules({"add": _a_add, "sub": _a_add, "neg": _a_neg, "mul": _a_mul, "div": _a_div, "sqrt": _a_sqrt,
                       "sin": _a_trig, "cos": _a_trig, "sincos": _a_trig, "atan2": _a_atan2}, _no_rule)
_FORWARD = Rules(dict.fromkeys(ADJOINT_RULES.table, _evaluate), _no_rule)  # the ops it can differentiate


def _aligned(tape: Tape, X: np.ndarray, at_op, at_inputs, at_literal, each=None) -> np.ndarray:
    """sum of |adjoint| x rounding size over the roundings: at_op(temp, its value, op)
    for a result, at_inputs(X) (n, n_in) for the inputs, at_literal(c) for a literal;
    each(contribution (outputs, n)) is called for every rounding when given."""
    s = _Sweep(tape, X, at_op, each)
    with np.errstate(all="ignore"):
        run(tape, _FORWARD, s)
        for j, o in enumerate(tape.outputs):
            if o[0] == "t":
                s.adj.setdefault(o[1], np.zeros((s.m, s.n)))[j] += 1.0
            elif o[0] == "in":
                s.adj_in[j, :, o[1]] += 1.0
            else:
                s.lits.setdefault(float(o[1]), np.zeros((s.m, s.n)))[j] += 1.0
        run(tape, ADJOINT_RULES, s, tape.instrs[::-1])  # reverse: each result's adjoint is final there
        sizes = at_inputs(X)
        for k in range(X.shape[1]):  # the real inputs rounded
            s.charge(np.abs(s.adj_in[:, :, k]) * sizes[None, :, k])
        for c, g in s.lits.items():
            s.charge(np.abs(g) * at_literal(c))
    return s.total.T


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
