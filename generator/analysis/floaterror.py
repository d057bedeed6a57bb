"""Error bounds for the single-precision kernels (IEEE binary32, round to nearest).

Standard model: every operation returns its exact result times (1 + d) with |d| <= u =
2**-24 (no underflow in these ranges; the bound adds the smallest normal to be safe), the
square root likewise, and mbforge's own sin/cos are within 1.5 ulp (see
templates/c/mathf.c.j2; 2 ulp are charged). Absolute bounds propagate through the tape
with the ranges of the exact values, so they are sound for inputs in the declared
ranges, versus exact arithmetic on the float inputs the kernel receives.
"""
from __future__ import annotations

import math

from ..ir.atom import ExpressionError
from ..lower.tape import Tape
from .ranges import Ranges

U = 2.0 ** -24
TINY = 2.0 ** -126  # smallest normal float
TRIG_ULPS = 2.0


def float32_bounds(tape: Tape, ranges: Ranges) -> list[float]:
    err: dict[int, float] = {}

    def e(o) -> float:
        kind, v = o
        if kind == "t":
            return err[v]
        if kind == "c":
            return abs(float(v)) * U  # the literal is the nearest float
        return 0.0

    def mag(o) -> float:
        return ranges.of(o).mag

    for ins in tape.instrs:
        op, a = ins.op, ins.args
        d = ins.dst[0]
        res = ranges.temps[d].mag
        if not math.isfinite(res):  # downstream of a divisor that can reach 0
            for dd in ins.dst:
                err[dd] = math.inf
            continue
        if op in ("add", "sub"):
            pre = e(a[0]) + e(a[1])
            err[d] = pre + U * (res + pre) + TINY
        elif op == "neg":
            err[d] = e(a[0])
        elif op == "mul":
            ea, eb = e(a[0]), e(a[1])
            pre = mag(a[0]) * eb + mag(a[1]) * ea + ea * eb
            err[d] = pre + U * (res + pre) + TINY
        elif op == "div":
            den = ranges.of(a[1])
            lo = 0.0 if den.contains_zero() else min(abs(den.lo), abs(den.hi))
            if lo <= e(a[1]):
                err[d] = math.inf
                continue
            pre = (e(a[0]) + res * e(a[1])) / (lo - e(a[1]))
            err[d] = pre + U * (res + pre) + TINY
        elif op == "sqrt":
            x = ranges.of(a[0])
            ex = e(a[0])
            lo = max(x.lo, 0.0)
            pre = ex / (math.sqrt(lo) + math.sqrt(lo - ex)) if lo > ex else math.sqrt(ex)
            err[d] = pre + U * (res + pre) + TINY
        elif op in ("sin", "cos", "sincos"):
            for dd in ins.dst:
                err[dd] = e(a[0]) + TRIG_ULPS * U * 1.0 + TINY
        else:
            raise ExpressionError(f"float32 error bound: no rule for {op!r}")
    out = []
    for o in tape.outputs:
        out.append(e(o) if o[0] != "c" else abs(float(o[1])) * U)
    return out
