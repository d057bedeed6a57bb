"""Error bounds for the single-precision kernels (IEEE binary32, round to nearest).

Standard model: every operation returns its exact result times (1 + d) with |d| <= u =
2**-24 (no underflow in these ranges; the bound adds the smallest normal to be safe), the
square root likewise, and mbforge's own sin/cos are within 1.5 ulp (see
templates/c/mathf.c.j2; 2 ulp are charged). Absolute bounds propagate through the tape
with the ranges of the exact values, so they are sound for inputs in the declared
ranges, versus exact arithmetic at the real (unrounded) inputs: each input's rounding
to float32 (relative 2**-24) is an initial error propagated like any other.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.atom import ExpressionError
from ..lower.tape import Tape
from .ranges import Ranges

U = 2.0 ** -24
TINY = 2.0 ** -126  # smallest normal float
TRIG_ULPS = 2.0


# One rule per tape instruction: (operands, result magnitude, e, ranges) -> error bound of
# the result, where e(operand) is the operand's own bound; math.inf when none holds.
def _rounded(pre: float, res: float) -> float:
    return pre + U * (res + pre) + TINY


def _e_add(a, res, e, ranges):
    return _rounded(e(a[0]) + e(a[1]), res)


def _e_neg(a, res, e, ranges):
    return e(a[0])


def _e_mul(a, res, e, ranges):
    ea, eb = e(a[0]), e(a[1])
    return _rounded(ranges.of(a[0]).mag * eb + ranges.of(a[1]).mag * ea + ea * eb, res)


def _e_div(a, res, e, ranges):
    den = ranges.of(a[1])
    lo = 0.0 if den.contains_zero() else min(abs(den.lo), abs(den.hi))
    if lo <= e(a[1]):
        return math.inf
    return _rounded((e(a[0]) + res * e(a[1])) / (lo - e(a[1])), res)


def _e_sqrt(a, res, e, ranges):
    x = ranges.of(a[0])
    ex = e(a[0])
    lo = max(x.lo, 0.0)
    return _rounded(ex / (math.sqrt(lo) + math.sqrt(lo - ex)) if lo > ex else math.sqrt(ex), res)


def _e_trig(a, res, e, ranges):  # every destination (sin and cos of sincos) alike
    return e(a[0]) + TRIG_ULPS * U * 1.0 + TINY


_RULES = {"add": _e_add, "sub": _e_add, "neg": _e_neg, "mul": _e_mul, "div": _e_div, "sqrt": _e_sqrt,
          "sin": _e_trig, "cos": _e_trig, "sincos": _e_trig}


def float32_bounds(tape: Tape, ranges: Ranges) -> list[float]:
    err: dict[int, float] = {}

    def e(o) -> float:
        kind, v = o
        if kind == "t":
            return err[v]
        if kind == "c":
            return abs(float(v)) * U  # the literal is the nearest float
        return ranges.inputs[v].mag * U + TINY  # the real input rounded to float32

    for ins in tape.instrs:
        op, a = ins.op, ins.args
        d = ins.dst[0]
        res = ranges.temps[d].mag
        if not math.isfinite(res):  # downstream of a divisor that can reach 0
            for dd in ins.dst:
                err[dd] = math.inf
            continue
        rule = _RULES.get(op)
        if rule is None:
            raise ExpressionError(f"float32 error bound: no rule for {op!r}")
        bound = rule(a, res, e, ranges)
        for dd in ins.dst:  # sincos: both results have the bound
            err[dd] = bound
    out = []
    for o in tape.outputs:
        out.append(e(o) if o[0] != "c" else abs(float(o[1])) * U)
    return out


def float32_bounds_boxes(tape: Tape, vec) -> list[float]:
    """float32_bounds for every box of a BoxRanges at once (the same rules, numpy arrays
    over the boxes), the largest over the boxes per output: sound on their union, and
    never above the bound over the hull (each box's magnitudes are inside the hull's)."""
    B = vec.n_boxes
    err: dict = {}

    def rng(o):
        kind, v = o
        if kind == "t":
            return vec.lo[v], vec.hi[v]
        if kind == "in":
            return vec.in_lo[:, v], vec.in_hi[:, v]
        c = np.full(B, float(v))
        return c, c

    def mag(o):
        lo, hi = rng(o)
        return np.maximum(np.abs(lo), np.abs(hi))

    def e(o):
        kind, v = o
        if kind == "t":
            return err[v]
        if kind == "c":
            return np.full(B, abs(float(v)) * U)
        return mag(o) * U + TINY

    def rounded(pre, res):
        return pre + U * (res + pre) + TINY

    with np.errstate(all="ignore"):
        for ins in tape.instrs:
            op, a = ins.op, ins.args
            d = ins.dst[0]
            res = mag(("t", d))
            if op in ("add", "sub"):
                bound = rounded(e(a[0]) + e(a[1]), res)
            elif op == "neg":
                bound = e(a[0])
            elif op == "mul":
                ea, eb = e(a[0]), e(a[1])
                bound = rounded(mag(a[0]) * eb + mag(a[1]) * ea + ea * eb, res)
            elif op == "div":
                dlo, dhi = rng(a[1])
                lo = np.where((dlo <= 0) & (dhi >= 0), 0.0, np.minimum(np.abs(dlo), np.abs(dhi)))
                eb = e(a[1])
                bound = np.where(lo <= eb, np.inf, rounded((e(a[0]) + res * eb) / (lo - eb), res))
            elif op == "sqrt":
                xlo, _ = rng(a[0])
                ex = e(a[0])
                lo = np.maximum(xlo, 0.0)
                bound = rounded(np.where(lo > ex, ex / (np.sqrt(lo) + np.sqrt(np.maximum(lo - ex, 0.0))),
                                         np.sqrt(ex)), res)
            elif op in ("sin", "cos", "sincos"):
                bound = e(a[0]) + TRIG_ULPS * U * 1.0 + TINY
            else:
                raise ExpressionError(f"float32 error bound: no rule for {op!r}")
            bound = np.where(np.isfinite(res), bound, np.inf)  # downstream of a divisor reaching 0
            for dd in ins.dst:
                err[dd] = bound
    out = []
    for o in tape.outputs:
        out.append(float(e(o).max()) if o[0] != "c" else abs(float(o[1])) * U)
    return out
