"""A bit-exact interpreter of fixed-point programs, vectorised with numpy int64.

It implements the semantics of mbforge.analysis.fixedpoint instruction by instruction, the
same bits as the c-fixed C (tests compare the two), without a C compiler: useful where
compiling a big kernel takes minutes, and to look at every intermediate value.
"""
from __future__ import annotations

import numpy as np

from ...analysis.fixedpoint import FixedProgram

I32_MAX = np.int64(2**31 - 1)
I32_MIN = np.int64(-(2**31))


def _rsh(v: np.ndarray, s: int) -> np.ndarray:
    if s > 0:
        return (v + np.int64(1 << (s - 1))) >> np.int64(s)
    return v * np.int64(1 << -s)


def _sat(v: np.ndarray, ovf: np.ndarray) -> np.ndarray:
    ovf |= (v > I32_MAX) | (v < I32_MIN)
    return np.clip(v, I32_MIN, I32_MAX)


def _wide(x: np.ndarray, shift: int) -> np.ndarray:
    return x * np.int64(1 << shift) if shift >= 0 else _rsh(x, -shift)


def _div(n: np.ndarray, d: np.ndarray, ovf: np.ndarray) -> np.ndarray:
    un = np.abs(n).astype(np.uint64)
    ud = np.abs(d).astype(np.uint64)
    zero = ud == 0
    ovf |= zero
    q = ((un << np.uint64(1)) // np.where(zero, 1, ud) + np.uint64(1)) >> np.uint64(1)
    neg = (n < 0) != (d < 0)
    limit = np.where(neg, np.uint64(2**31), np.uint64(2**31 - 1))
    big = (q > limit) | zero
    ovf |= big
    q = np.minimum(q, limit).astype(np.int64)
    return np.where(neg, -q, q)


def _sqrt(n: np.ndarray, ovf: np.ndarray) -> np.ndarray:
    pos = n > 0
    u = np.where(pos, n, 0).astype(np.uint64)
    r = np.floor(np.sqrt(u.astype(np.float64))).astype(np.uint64)
    for _ in range(3):  # float's 53 bits leave r off by at most one or two
        r = np.where(r * r > u, r - np.uint64(1), r)
        r = np.where((r + np.uint64(1)) * (r + np.uint64(1)) <= u, r + np.uint64(1), r)
    r = np.where(u - r * r > r, r + np.uint64(1), r)  # nearest integer
    return _sat(np.where(pos, r.astype(np.int64), 0), ovf)


def _sincos(x: np.ndarray, fx: int, c: dict) -> tuple[np.ndarray, np.ndarray]:
    X = _rsh(x, fx - 29) if fx >= 29 else x * np.int64(1 << (29 - fx))
    k = _rsh(X * np.int64(c["two_over_pi_q24"]), 53)
    r = X - k * np.int64(c["pio2_hi_q29"]) - _rsh(k * np.int64(c["pio2_lo_q60"]), 31)
    r30 = r * 2
    z = _rsh(r30 * r30, 30)
    ps = np.full_like(x, c["sin"][-1])
    for coef in c["sin"][-2::-1]:
        ps = coef + _rsh(z * ps, 30)
    ps = (1 << 30) + _rsh(z * ps, 30)
    sv = _rsh(r30 * ps, 30)
    pc = np.full_like(x, c["cos"][-1])
    for coef in c["cos"][-2::-1]:
        pc = coef + _rsh(z * pc, 30)
    cv = (1 << 30) + _rsh(z * pc, 30)
    q = k & 3
    s = np.select([q == 0, q == 1, q == 2], [sv, cv, -sv], -cv)
    co = np.select([q == 0, q == 1, q == 2], [cv, -sv, -cv], sv)
    return s, co


def simulate(fx: FixedProgram, X, keep: bool = False):
    """Run the program on int32 inputs X [N, n_in]. Returns (Y [N, n_out] int32 values as
    int64, status [N] (1 where something saturated)) and, with keep, {temp: values}."""
    from .c import trig_constants

    X = np.asarray(X, dtype=np.int64)
    if X.ndim == 1:
        X = X[None, :]
    n = X.shape[0]
    ovf = np.zeros(n, dtype=bool)
    val: dict[int, np.ndarray] = {}
    trig = None

    def get(o):
        kind, v = o
        return val[v] if kind == "t" else X[:, v]

    for ins in fx.instrs:
        op, p, a = ins.op, ins.params, ins.args
        if op in ("add", "sub"):
            terms = [np.full(n, v, dtype=np.int64) if kind == "lit" else _wide(get(o), v)
                     for o, (kind, v) in zip(a, p["align"])]
            acc = terms[0] + terms[1] if op == "add" else terms[0] - terms[1]
            val[ins.dst[0]] = _sat(_rsh(acc, p["s"]), ovf)
        elif op == "neg":
            val[ins.dst[0]] = _sat(-get(a[0]), ovf)
        elif op == "mul":
            if "lit" in p:
                x = get(a[1] if p["const_first"] else a[0])
                prod = x * np.int64(p["lit"])
            else:
                prod = get(a[0]) * get(a[1])
            val[ins.dst[0]] = _sat(_rsh(prod, p["s"]), ovf)
        elif op == "div":
            k = p["k"]
            num = np.full(n, p["lit"], dtype=np.int64) if "lit" in p else get(a[0])
            val[ins.dst[0]] = _sat(_div(_wide(num, k), get(a[1]), ovf), ovf)
        elif op == "sqrt":
            val[ins.dst[0]] = _sqrt(_wide(get(a[0]), p["k"]), ovf)
        elif op in ("sin", "cos", "sincos"):
            trig = trig or trig_constants()
            s, c = _sincos(get(a[0]), p["fx"], trig)
            picks = {"sin": [s], "cos": [c], "sincos": [s, c]}[op]
            for d, v, fo in zip(ins.dst, picks, p["fo"]):
                val[d] = _sat(_rsh(v, 30 - fo), ovf)
        else:  # pragma: no cover - the planner rejects anything else
            raise AssertionError(op)
    Y = np.empty((n, len(fx.tape.outputs)), dtype=np.int64)
    for k, o in enumerate(fx.tape.outputs):
        if o[0] == "c":
            Y[:, k] = round(o[1] * 2.0 ** fx.out_bits[k])
        else:
            Y[:, k] = get(o)
    status = ovf.astype(np.int32)
    return (Y, status, val) if keep else (Y, status)
