"""Interval evaluation of atoms, vectorised over boxes: for B boxes of the inputs, an
enclosure [lo, hi] of every output over each box.

This is what the verified covers of domain.cover evaluate (constraints and their
Jacobians over a cell): one numpy pass over the atom graph in topological order, every
value an array of B lower and B upper bounds. Sound: each rule encloses the exact range of
its op over its argument intervals, and every computed bound is rounded outwards by one
ulp (np.nextafter), which covers numpy's rounding to nearest. A division whose divisor's
interval contains 0 gives [-inf, inf] (callers test `np.isfinite`), never an error: a cell
that fails is split by the caller.
"""
from __future__ import annotations

import numpy as np

from ..ir.atom import Atom, ExpressionError
from ..ir.evaluate import evaluation_order
from ..ir.graph import flatten

_PI = np.pi
_TWO_PI = 2 * np.pi


def _out(lo, hi):
    with np.errstate(invalid="ignore"):
        return np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)


def _mul(al, ah, bl, bh):
    with np.errstate(invalid="ignore"):
        p = np.stack([al * bl, al * bh, ah * bl, ah * bh])
    nan = np.isnan(p).any(axis=0)  # 0 * inf: unbounded, conservatively
    return _out(np.where(nan, -np.inf, p.min(axis=0)), np.where(nan, np.inf, p.max(axis=0)))


def _div(al, ah, bl, bh):
    zero = (bl <= 0) & (bh >= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rl, rh = _out(1.0 / np.where(zero, 1.0, bh), 1.0 / np.where(zero, 1.0, bl))
    lo, hi = _mul(al, ah, rl, rh)
    return np.where(zero, -np.inf, lo), np.where(zero, np.inf, hi)


def _pow(al, ah, n: int):
    if n < 0:
        lo, hi = _pow(al, ah, -n)
        return _div(np.ones_like(lo), np.ones_like(hi), lo, hi)
    el, eh = al ** n, ah ** n
    if n % 2:
        return _out(el, eh)
    lo = np.where((al <= 0) & (ah >= 0), 0.0, np.minimum(el, eh))
    return _out(lo, np.maximum(el, eh))


def _sqrt(al, ah):
    with np.errstate(invalid="ignore"):
        lo, hi = _out(np.sqrt(np.maximum(al, 0.0)), np.sqrt(np.maximum(ah, 0.0)))
    lo = np.maximum(lo, 0.0)
    bad = ah < 0  # sqrt of an always-negative value: no enclosure
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def _periodic(al, ah, f, peak, trough):
    """sin/cos: ends of the interval, plus +-1 where a peak (trough) lies inside it. The
    tests use peak - 1e-15 relative slack, so a peak within rounding of an end counts."""
    lo, hi = _out(np.minimum(f(al), f(ah)), np.maximum(f(al), f(ah)))
    slack = 1e-15 * np.maximum(1.0, np.maximum(np.abs(al), np.abs(ah)))

    def inside(x0):
        k = np.ceil((al - slack - x0) / _TWO_PI)
        return x0 + k * _TWO_PI <= ah + slack

    hi = np.where(inside(peak), 1.0, np.minimum(hi, 1.0))
    lo = np.where(inside(trough), -1.0, np.maximum(lo, -1.0))
    wide = ~((ah - al) < _TWO_PI)
    return np.where(wide, -1.0, lo), np.where(wide, 1.0, hi)


def _monotone(f):
    return lambda al, ah: _out(f(al), f(ah))


def _abs(al, ah):
    lo = np.where((al <= 0) & (ah >= 0), 0.0, np.minimum(np.abs(al), np.abs(ah)))
    return lo, np.maximum(np.abs(al), np.abs(ah))


_UNARY = {
    "neg": lambda al, ah: (-ah, -al),
    "sqrt": _sqrt,
    "sin": lambda al, ah: _periodic(al, ah, np.sin, _PI / 2, -_PI / 2),
    "cos": lambda al, ah: _periodic(al, ah, np.cos, 0.0, _PI),
    "exp": _monotone(np.exp),
    "abs": _abs,
}


class IntervalEvaluator:
    """Enclosures of `outputs` (atoms) over boxes of `inputs` (symbols)."""

    def __init__(self, outputs, inputs: list[Atom]):
        self.outputs = flatten(outputs)
        self.inputs = list(inputs)
        self.order = evaluation_order(self.outputs, self.inputs, "interval evaluation: no range")
        ops = {a.op for a in self.order} - {"sym", "const", "add", "mul", "div", "pow"} - set(_UNARY)
        if ops:
            raise ExpressionError(f"interval evaluation: no rule for {', '.join(sorted(ops))}")

    def __call__(self, lo, hi) -> tuple[np.ndarray, np.ndarray]:
        """lo, hi: [B, n_in]; returns (lo, hi), each [B, n_out]. NaN marks a value with no
        enclosure (sqrt of a negative interval), +-inf an unbounded one."""
        lo = np.atleast_2d(np.asarray(lo, dtype=float))
        hi = np.atleast_2d(np.asarray(hi, dtype=float))
        if lo.shape != hi.shape or lo.shape[1] != len(self.inputs):
            raise ExpressionError(f"interval evaluation got {lo.shape[1]} input columns, expected {len(self.inputs)}")
        B = lo.shape[0]
        val: dict[Atom, tuple] = {s: (lo[:, k], hi[:, k]) for k, s in enumerate(self.inputs)}
        with np.errstate(over="ignore"):
            for a in self.order:
                op = a.op
                if op == "sym":
                    continue
                if op == "const":
                    v = np.full(B, float(a.value))
                    val[a] = (v, v)
                    continue
                args = [val[x] for x in a.args]
                if op == "add":
                    (al, ah), (bl, bh) = args
                    val[a] = _out(al + bl, ah + bh)
                elif op == "mul":
                    val[a] = _mul(*args[0], *args[1])
                elif op == "div":
                    val[a] = _div(*args[0], *args[1])
                elif op == "pow":
                    val[a] = _pow(*args[0], int(a.value))
                else:
                    val[a] = _UNARY[op](*args[0])
        L = np.empty((B, len(self.outputs)))
        H = np.empty((B, len(self.outputs)))
        for k, a in enumerate(self.outputs):
            L[:, k], H[:, k] = val[a]
        return L, H
