"""Hardware operations: a fixed-point program lowered to the operators the RTL builds.

    FixedProgram (passes.fixedpoint) -> HwProgram: a DAG of HwOps over 32-bit values

Every HwOp is one hardware operator with the integer semantics below (int64 arithmetic
wraps modulo 2**64 like the C on GCC; rsh(v, s) = (v + 2**(s-1)) >> s for s > 0, v << -s
for s <= 0; sat() clamps to int32 and raises the overflow flag when `flag` is set):

    add   sat(rsh(sum_i sign_i * align(a_i, sh_i) + lit, s))   align: a << sh (sh >= 0),
                                                               rsh(a, -sh) (sh < 0)
    mul   sat(rsh(a * b, s))                                   b may be an int32 literal
    div   the c-fixed division of n = align(a, k) (or a 64-bit literal n) by d
    sqrt  the c-fixed square root of n = align(a, k)
    tred  sin/cos argument reduction of x / 2**fx: results r30 = 2 (X - k pi/2) (Q30) and
          q = k & 3, exactly as fixed.c.j2 computes X, k and r
    tsel  the quadrant's choice among +-sv, +-cv, then sat(rsh(., 30 - fo))

A tape instruction is one HwOp except sin/cos/sincos, which become their reduction (tred),
the Horner polynomials on mul and add operators (z = r30^2, then c_i + z p), and one tsel
per result. The C keeps the polynomial in int64 without saturation; here every value is
an int32, which is exact because `trig_bounds` proves |r30| < 2**30 and every Horner value
below 2**31 for every int32 argument in the argument's format (checked per instance; a
format where that fails is refused). Those ops carry flag=False: they cannot saturate.

The program is the single description both RTL variants and `evaluate` (the numpy model,
bit-exact with the c-fixed C) are built from.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...ir.atom import ExpressionError
from ...analysis.fixedpoint import COS_TAYLOR, SIN_TAYLOR, FixedProgram

ONE_Q30 = 1 << 30
INT32_MAX, INT32_MIN = (1 << 31) - 1, -(1 << 31)
KIND_FU = {"add": "add", "mul": "mul", "div": "div", "sqrt": "sqrt", "tred": "tred", "tsel": "tsel"}


def trig_constants() -> dict:
    from ..fixed.c import trig_constants as tc

    return tc()


@dataclass
class HwOp:
    id: int
    kind: str  # add mul div sqrt tred tsel
    srcs: tuple  # operand refs: ("in", k) or ("h", op id, result index)
    p: dict  # static parameters, see the module doc
    flag: bool = True  # saturation raises the overflow flag (ops of the C's sat())
    nres: int = 1  # tred has two results (r30, q)
    note: str = ""
    widths: tuple = (32,)


@dataclass
class HwProgram:
    ops: list[HwOp]
    outputs: list[tuple]  # per flat output: ("in", k), ("h", id, j) or ("c", int raw)
    n_in: int
    in_bits: list[int]
    out_bits: list[int]
    stats: dict = field(default_factory=dict)

    def counts(self) -> dict:
        c: dict[str, int] = {}
        for o in self.ops:
            c[o.kind] = c.get(o.kind, 0) + 1
        return dict(sorted(c.items()))


def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def rsh_int(v: int, s: int) -> int:
    return _wrap64((v + (1 << (s - 1))) >> s) if s > 0 else _wrap64(v << -s)


def trig_bounds(fx: int) -> dict:
    """Worst-case magnitudes inside the reduction and the polynomials for any int32 x in
    format fx; raises if the int32 operators would not be exact."""
    t = trig_constants()
    C, HI, LO = t["two_over_pi_q24"], t["pio2_hi_q29"], t["pio2_lo_q60"]
    sh = 29 - fx
    xmax = (1 << 31) if sh >= 0 else ((1 << 31) >> -sh) + 1
    X = xmax << max(sh, 0)
    if X * C >= (1 << 63) - (1 << 53):
        raise ExpressionError(f"sin/cos argument format Q{fx}: the reduction's product leaves int64")
    kmax = (X * C >> 53) + 1
    P = HI + LO / 2.0 ** 31  # the machine's pi/2 in Q29
    pio2 = math.pi / 2 * 2 ** 29
    eps = abs(2.0 ** 53 / (C * pio2) - 1.0)
    r = pio2 * (0.5 + (X * C / 2.0 ** 53) * eps * 1.0001) + kmax * abs(P - pio2) + 4
    r30 = 2 * r
    if r30 >= 2 ** 30:
        raise ExpressionError(f"sin/cos argument format Q{fx}: reduced argument not below pi/2")
    z = r30 * r30 / 2 ** 30 + 1
    worst = max(r30, z)
    for coefs in (SIN_TAYLOR, COS_TAYLOR):
        q = [round(c * 2 ** 30) for c in coefs]
        ps = abs(q[-1])
        for c in q[-2::-1]:
            ps = abs(c) + z * ps / 2 ** 30 + 1
            worst = max(worst, ps)
        ps = ONE_Q30 + z * ps / 2 ** 30 + 1
        worst = max(worst, ps, r30 * ps / 2 ** 30 + 1)
    if worst >= INT32_MAX:
        raise ExpressionError(f"sin/cos argument format Q{fx}: polynomial leaves int32")
    kw = int(kmax).bit_length() + 2
    return {"kmax": int(kmax), "kw": kw, "r30": r30, "worst": worst}


def lower_hw(fx: FixedProgram, order=None) -> HwProgram:
    """The program's HwOps, in the order of `order` (tape instructions, e.g. the C
    schedule's register-pressure order) or the tape's."""
    tape = fx.tape
    instrs = fx.instrs
    if order is not None:
        by_dst = {i.dst: i for i in fx.instrs}
        instrs = [by_dst[i.dst] for i in order]
    ops: list[HwOp] = []
    ref: dict[int, tuple] = {}

    def new(kind, srcs, p, flag=True, nres=1, note="", widths=(32,)) -> HwOp:
        op = HwOp(len(ops), kind, tuple(srcs), p, flag, nres, note, widths)
        ops.append(op)
        return op

    def r(o):
        kind, v = o
        if kind == "in":
            return ("in", v)
        if kind == "t":
            return ref[v]
        raise AssertionError(o)

    tc = trig_constants()
    for ins in instrs:
        op, a, pr = ins.op, ins.args, ins.params
        note = repr(tape.atoms[ins.dst[0]])[:120]
        d = ins.dst[0]
        if op in ("add", "sub"):
            srcs, sh, sg, lit = [], [], [], 0
            for pos, (o, (kind, v)) in enumerate(zip(a, pr["align"])):
                sign = -1 if (op == "sub" and pos == 1) else 1
                if kind == "lit":
                    lit += sign * v
                else:
                    srcs.append(r(o))
                    sh.append(v)
                    sg.append(sign)
            h = new("add", srcs, {"sh": sh, "sign": sg, "lit": lit, "s": pr["s"]}, note=note)
            ref[d] = ("h", h.id, 0)
        elif op == "neg":
            h = new("add", [r(a[0])], {"sh": [0], "sign": [-1], "lit": 0, "s": 0}, note=note)
            ref[d] = ("h", h.id, 0)
        elif op == "mul":
            if "lit" in pr:
                x = a[1] if pr["const_first"] else a[0]
                h = new("mul", [r(x)], {"lit": pr["lit"], "s": pr["s"]}, note=note)
            else:
                h = new("mul", [r(a[0]), r(a[1])], {"s": pr["s"]}, note=note)
            ref[d] = ("h", h.id, 0)
        elif op == "div":
            num, den = a
            k = pr["k"]
            if "lit" in pr:
                nlit = rsh_int(pr["lit"], -k)
                h = new("div", [r(den)], {"nlit": nlit, "k": 0}, note=note)
            else:
                h = new("div", [r(num), r(den)], {"k": k}, note=note)
            ref[d] = ("h", h.id, 0)
        elif op == "sqrt":
            h = new("sqrt", [r(a[0])], {"k": pr["k"]}, note=note)
            ref[d] = ("h", h.id, 0)
        elif op in ("sin", "cos", "sincos"):
            b = trig_bounds(pr["fx"])
            t = new("tred", [r(a[0])], {"sh": 29 - pr["fx"], "kw": b["kw"]}, flag=False, nres=2,
                    note=f"reduce {note}", widths=(32, 2))
            r30, q = ("h", t.id, 0), ("h", t.id, 1)
            z = ("h", new("mul", [r30, r30], {"s": 30}, flag=False, note="z = r^2").id, 0)
            polys = {}
            for name, coefs in (("sin", tc["sin"]), ("cos", tc["cos"])):
                m = new("mul", [z], {"lit": coefs[-1], "s": 30}, flag=False, note=f"{name} horner")
                acc = ("h", m.id, 0)
                for c in list(coefs[-2::-1]) + [ONE_Q30]:
                    s_ = new("add", [acc], {"sh": [0], "sign": [1], "lit": c, "s": 0}, flag=False,
                             note=f"{name} horner")
                    acc = ("h", s_.id, 0)
                    if c != ONE_Q30 or name == "sin":
                        m = new("mul", [z if c != ONE_Q30 else r30, acc], {"s": 30}, flag=False,
                                note=f"{name} horner")
                        acc = ("h", m.id, 0)
                polys[name] = acc
            which = {"sin": ["sin"], "cos": ["cos"], "sincos": ["sin", "cos"]}[op]
            for dst, w, fo in zip(ins.dst, which, pr["fo"]):
                h = new("tsel", [polys["sin"], polys["cos"], q], {"which": w, "sh": 30 - fo},
                        note=f"{w} {repr(tape.atoms[dst])[:100]}")
                ref[dst] = ("h", h.id, 0)
        else:  # the planner refuses anything else first
            raise AssertionError(op)

    outs = []
    for k, o in enumerate(tape.outputs):
        if o[0] == "c":
            outs.append(("c", round(o[1] * 2.0 ** fx.out_bits[k])))
        else:
            outs.append(r(o))
    return HwProgram(ops, outs, len(tape.inputs), list(fx.in_bits), list(fx.out_bits))


# ---------------------------------------------------------------------------------------
# numpy model (bit-exact with the c-fixed C)

def _rsh(v: np.ndarray, s: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        if s > 0:
            return (v + np.int64(1 << (s - 1))) >> np.int64(s)
        return v << np.int64(-s)


def _sat(v: np.ndarray, ovf: np.ndarray | None) -> np.ndarray:
    hi, lo = v > INT32_MAX, v < INT32_MIN
    if ovf is not None:
        ovf |= hi | lo
    return np.clip(v, INT32_MIN, INT32_MAX)


def _align(a: np.ndarray, sh: int) -> np.ndarray:
    return a << np.int64(sh) if sh >= 0 else _rsh(a, -sh)


def _div(n: np.ndarray, d: np.ndarray, ovf: np.ndarray) -> np.ndarray:
    un = np.where(n < 0, (np.uint64(0) - n.astype(np.uint64)), n.astype(np.uint64))
    ud = np.where(d < 0, (np.uint64(0) - d.astype(np.uint64)), d.astype(np.uint64))
    zero = ud == 0
    safe = np.where(zero, np.uint64(1), ud)
    with np.errstate(over="ignore"):
        q = ((un << np.uint64(1)) // safe + np.uint64(1)) >> np.uint64(1)
    neg = (n < 0) != (d < 0)
    limit = np.uint64(INT32_MAX) + neg.astype(np.uint64)
    big = zero | (q > limit)
    ovf |= big
    sat = np.where(np.where(zero, n < 0, neg), INT32_MIN, INT32_MAX)
    val = np.where(neg, -(np.minimum(q, np.uint64(1 << 31)).astype(np.int64)), np.minimum(q, np.uint64(1 << 31)).astype(np.int64))
    return np.where(big, sat, val).astype(np.int64)


def _sqrt(n: np.ndarray, ovf: np.ndarray) -> np.ndarray:
    out = np.zeros(n.shape, dtype=np.int64)
    for i, v in enumerate(n.tolist()):
        if v > 0:
            rt = math.isqrt(v)
            if v - rt * rt > rt:
                rt += 1
            out[i] = rt
    return _sat(out, ovf)


def evaluate(hp: HwProgram, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw int32 inputs [N, n_in] -> (raw int32 outputs [N, n_out], status [N])."""
    X = np.asarray(X, dtype=np.int64)
    N = X.shape[0]
    ovf = np.zeros(N, dtype=bool)
    val: dict[tuple, np.ndarray] = {}
    tc = trig_constants()

    def g(ref):
        return X[:, ref[1]] if ref[0] == "in" else val[ref]

    with np.errstate(over="ignore"):
        for op in hp.ops:
            p = op.p
            f = ovf if op.flag else None
            if op.kind == "add":
                acc = np.full(N, p["lit"], dtype=np.int64)
                for s_, sh, sg in zip(op.srcs, p["sh"], p["sign"]):
                    t = _align(g(s_), sh)
                    acc = acc + t if sg > 0 else acc - t
                val[(("h", op.id, 0))] = _sat(_rsh(acc, p["s"]), f)
            elif op.kind == "mul":
                b = np.int64(p["lit"]) if "lit" in p else g(op.srcs[1])
                val[("h", op.id, 0)] = _sat(_rsh(g(op.srcs[0]) * b, p["s"]), f)
            elif op.kind == "div":
                if "nlit" in p:
                    n, d = np.full(N, p["nlit"], dtype=np.int64), g(op.srcs[0])
                else:
                    n, d = _align(g(op.srcs[0]), p["k"]), g(op.srcs[1])
                val[("h", op.id, 0)] = _div(n, d, ovf)
            elif op.kind == "sqrt":
                val[("h", op.id, 0)] = _sqrt(_align(g(op.srcs[0]), p["k"]), ovf)
            elif op.kind == "tred":
                x = g(op.srcs[0])
                Xv = _align(x, p["sh"])
                k = _rsh(Xv * np.int64(tc["two_over_pi_q24"]), 53)
                rr = Xv - k * np.int64(tc["pio2_hi_q29"]) - _rsh(k * np.int64(tc["pio2_lo_q60"]), 31)
                val[("h", op.id, 0)] = rr * 2
                val[("h", op.id, 1)] = k & 3
            elif op.kind == "tsel":
                sv, cv, q = (g(s_) for s_ in op.srcs)
                if p["which"] == "sin":
                    sel = np.select([q == 0, q == 1, q == 2], [sv, cv, -sv], -cv)
                else:
                    sel = np.select([q == 0, q == 1, q == 2], [cv, -sv, -cv], sv)
                sel = ((sel + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)  # the C's (int32_t) cast
                val[("h", op.id, 0)] = _sat(_rsh(sel, p["sh"]), f)
            else:
                raise AssertionError(op.kind)
    Y = np.zeros((N, len(hp.outputs)), dtype=np.int64)
    for k, o in enumerate(hp.outputs):
        Y[:, k] = o[1] if o[0] == "c" else g(o)
    return Y.astype(np.int32), ovf.astype(np.int32)
