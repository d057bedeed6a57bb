"""THE fixed-point op set: the lowered int32 operations every fixed-point back end prints,
their semantics (once, here), their table and the one interpreter.

    FixedProgram (analysis.fixedpoint) -> lower_hw -> HwProgram: a DAG of HwOps on int32 words

Words are int32; intermediates are int64 and wrap modulo 2**64 (two's complement, as the
C on GCC/Clang and the Verilog's 64-bit signed wires). With
    rsh(v, s) = (v + 2**(s-1)) >> s     for s > 0: a shift right ROUNDING HALF UP (ties go
                                        towards +inf: rsh(-3, 1) = -1, rsh(3, 1) = 2), `>>`
                                        arithmetic;
              = v * 2**-s               for s <= 0: a NEGATIVE SHIFT is a left shift;
    align(a, sh) = rsh(a, -sh)          (a << sh for sh >= 0);
    sat(v) = min(max(v, INT32_MIN), INT32_MAX), raising the status flag when it clamps, at
             either end (every op below ends in sat and flags, unless flag=False);
the ops are

    add   sat(rsh(lit + sum_i sign_i * align(a_i, sh_i), s))   1 or 2 operands, int64 lit
    mul   sat(rsh(a * b, s))                 b an operand or an int32 literal
    div   n = align(a, k) (or a 64-bit literal n), d an operand:
          |d| = 0: INT32_MAX if n >= 0, INT32_MIN if n < 0 (the numerator's sign alone,
          also for 0 / 0), flagged;
          else q = ((2|n| mod 2**64) // |d| + 1) >> 1, i.e. |n| / |d| rounded HALF AWAY
          FROM ZERO (the doubling wraps only for |n| >= 2**63, identically everywhere),
          result sign * q, where sign = - iff n and d have opposite signs; a q beyond the
          int32 range of that sign saturates (INT32_MIN is reachable: -2**31), flagged
    sqrt  n = align(a, k); n <= 0 gives 0 (a negative radicand is not flagged); else the
          nearest integer to sqrt(n) (floor root r, plus 1 when n - r*r > r: no ties
          exist), then sat (sqrt of an int64 can reach 3037000500 > INT32_MAX)
    tred  sin/cos argument reduction of x / 2**fx, sh = 29 - fx: X = align(x, sh),
          k = rsh(X * TWO_OVER_PI_Q24, 53), r = X - k * PIO2_HI_Q29 - rsh(k * PIO2_LO_Q60, 31);
          two results: r30 = 2 r (Q30) and q = k & 3. Never flags.
    tsel  quadrant select of the Q30 polynomials sv = sin(r), cv = cos(r) by q (sin:
          sv, cv, -sv, -cv; cos: cv, -sv, -cv, sv for q = 0..3), wrapped to int32 (the
          C's cast), then sat(rsh(., sh)) with sh = 30 - frac bits of the result

Besides the values they need, add ops keep "form" (add, sub or neg) and "lit_at" (where the
literal stood) and a division by a literal keeps "lit" and "lk" (the literal and its
shift): how the tape wrote the instruction, for printers that keep its text (the c-fixed
C); the value never depends on them.

A tape instruction is one op, except neg (add with sign -1) and sin/cos/sincos: their
reduction (tred), the Horner polynomials of TRIG on mul and add ops (z = r30^2 >> 30, then
c_i + z p) and one tsel per result. The c-fixed C keeps the polynomial in int64 without
saturation; here every value is an int32, which is exact because `trig_bounds` proves
|r30| < 2**30 and every Horner value below 2**31 for every int32 argument of the format
(checked per instance; a format where that fails is refused). Those ops carry flag=False.

OPS holds each op's semantics once: its numpy implementation (vectorised, int64), the
latency of its hardware operator (clocks from operands to result register; the Verilog
operators in templates/verilog/ops.v.j2 are generated with these depths and rtl.schedule
reads them), and the names of its C helper and Verilog operator. `run` is the one
interpreter; backends.fixed.interp.simulate and backends.rtl.lower.evaluate wrap it. The
C helpers (templates/c/fixed.c.j2, hls/ops.c.j2) and the Verilog operators implement the
same bits; tests/test_fixed_ops.py checks all of them on edge and random words.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from typing import Callable

import numpy as np

from ...analysis.fixedpoint import COS_TAYLOR, SIN_TAYLOR, FixedProgram
from ...ir.atom import ExpressionError
from ...lower import tapeops
from ...lower.tapeops import TAPE_OPS, Rules

INT32_MAX, INT32_MIN = (1 << 31) - 1, -(1 << 31)
ONE_Q30 = 1 << 30

_PI = "3.14159265358979323846264338327950288419716939937510582097494459"


def _trig() -> dict:
    with localcontext() as ctx:
        ctx.prec = 60
        pio2 = Decimal(_PI) / 2
        hi = int((pio2 * (1 << 29)).to_integral_value())
        lo = int(((pio2 - Decimal(hi) / (1 << 29)) * (1 << 60)).to_integral_value())
        two_over_pi = int((2 / Decimal(_PI) * (1 << 24)).to_integral_value())
    return {
        "two_over_pi_q24": two_over_pi,  # 2/pi in Q24
        "pio2_hi_q29": hi,  # pi/2 in Q29 ...
        "pio2_lo_q60": lo,  # ... and the rest of it in Q60
        "sin": [round(c * 2 ** 30) for c in SIN_TAYLOR],  # Q30 coefficients of r^3 .. r^11
        "cos": [round(c * 2 ** 30) for c in COS_TAYLOR],  # Q30 coefficients of r^2 .. r^12
    }


TRIG = _trig()


def trig_constants() -> dict:
    """A copy of TRIG (the renderers' templates take it as a dict)."""
    return {k: list(v) if isinstance(v, list) else v for k, v in TRIG.items()}


# ---------------------------------------------------------------------------------------
# the semantics, numpy int64 (arrays of shape [N]); ovf: bool [N] or None (do not flag)

def rsh(v: np.ndarray, s: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        if s > 0:
            return (v + np.int64(1 << (s - 1))) >> np.int64(s)
        return v << np.int64(-s)


def align(a: np.ndarray, sh: int) -> np.ndarray:
    return rsh(a, -sh)


def sat(v: np.ndarray, ovf: np.ndarray | None) -> np.ndarray:
    if ovf is not None:
        ovf |= (v > INT32_MAX) | (v < INT32_MIN)
    return np.clip(v, INT32_MIN, INT32_MAX)


def wrap32(v: np.ndarray) -> np.ndarray:
    """v modulo 2**32 as a signed int32 value (the C's (int32_t) cast)."""
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def divide(n: np.ndarray, d: np.ndarray, ovf: np.ndarray) -> np.ndarray:
    un = np.where(n < 0, np.uint64(0) - n.astype(np.uint64), n.astype(np.uint64))
    ud = np.where(d < 0, np.uint64(0) - d.astype(np.uint64), d.astype(np.uint64))
    zero = ud == 0
    with np.errstate(over="ignore"):
        q = ((un << np.uint64(1)) // np.where(zero, np.uint64(1), ud) + np.uint64(1)) >> np.uint64(1)
    neg = (n < 0) != (d < 0)
    big = zero | (q > np.uint64(INT32_MAX) + neg.astype(np.uint64))
    ovf |= big
    # saturation: by the numerator's sign for a zero divisor, by the quotient's otherwise
    limit = np.where(np.where(zero, n < 0, neg), INT32_MIN, INT32_MAX)
    qi = np.minimum(q, np.uint64(1 << 31)).astype(np.int64)
    return np.where(big, limit, np.where(neg, -qi, qi)).astype(np.int64)


def square_root(n: np.ndarray, ovf: np.ndarray) -> np.ndarray:
    pos = n > 0
    u = np.where(pos, n, 0).astype(np.uint64)
    r = np.floor(np.sqrt(u.astype(np.float64))).astype(np.uint64)
    one = np.uint64(1)
    for _ in range(3):  # float's 53 bits leave r off by at most one or two
        r = np.where(r * r > u, r - one, r)
        r = np.where((r + one) * (r + one) <= u, r + one, r)
    r = np.where(u - r * r > r, r + one, r)  # the nearest integer
    return sat(np.where(pos, r.astype(np.int64), 0), ovf)


def trig_reduce(x: np.ndarray, sh: int) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(over="ignore"):
        X = align(x, sh)
        k = rsh(X * np.int64(TRIG["two_over_pi_q24"]), 53)
        r = X - k * np.int64(TRIG["pio2_hi_q29"]) - rsh(k * np.int64(TRIG["pio2_lo_q60"]), 31)
    return r * 2, k & 3


def quadrant(sv: np.ndarray, cv: np.ndarray, q: np.ndarray, which: str) -> np.ndarray:
    if which == "sin":
        sel = np.select([q == 0, q == 1, q == 2], [sv, cv, -sv], -cv)
    else:
        sel = np.select([q == 0, q == 1, q == 2], [cv, -sv, -cv], sv)
    return wrap32(sel)


# ---------------------------------------------------------------------------------------
# the op set

@dataclass
class HwOp:
    id: int
    kind: str  # a key of OPS
    srcs: tuple  # operand refs: ("in", k) or ("h", op id, result index)
    p: dict  # static parameters, see the module doc
    flag: bool = True  # saturation raises the status flag
    nres: int = 1  # tred has two results (r30, q)
    note: object = ""  # str, or a _Note (text made when first read)
    widths: tuple = (32,)


class _Note:
    """An op's note made when first read: the text of every atom of a large kernel
    cost more than all the rest of lowering (28 s of the Stewart envelope kernel's 85),
    and only the Verilog comments and the errors read it."""

    __slots__ = ("make", "text")

    def __init__(self, make):
        self.make, self.text = make, None

    def __str__(self) -> str:
        if self.text is None:
            self.text = self.make()
        return self.text


@dataclass
class HwProgram:
    ops: list[HwOp]
    outputs: list[tuple]  # per flat output: ("in", k), ("h", id, j) or ("c", int raw)
    n_in: int
    in_bits: list[int]
    out_bits: list[int]
    stats: dict = field(default_factory=dict)
    temps: dict = field(default_factory=dict)  # tape temp id -> ("h", id, j): the value it is

    def counts(self) -> dict:
        c: dict[str, int] = {}
        for o in self.ops:
            c[o.kind] = c.get(o.kind, 0) + 1
        return dict(sorted(c.items()))


def _add(op: HwOp, a: list, N: int, ovf) -> list:
    p = op.p
    acc = np.full(N, p["lit"], dtype=np.int64)
    with np.errstate(over="ignore"):
        for x, sh, sg in zip(a, p["sh"], p["sign"]):
            t = align(x, sh)
            acc = acc + t if sg > 0 else acc - t
    return [sat(rsh(acc, p["s"]), ovf)]


def _mul(op: HwOp, a: list, N: int, ovf) -> list:
    b = np.int64(op.p["lit"]) if "lit" in op.p else a[1]
    return [sat(rsh(a[0] * b, op.p["s"]), ovf)]


def _div(op: HwOp, a: list, N: int, ovf) -> list:
    if "nlit" in op.p:
        return [divide(np.full(N, op.p["nlit"], dtype=np.int64), a[0], ovf)]
    return [divide(align(a[0], op.p["k"]), a[1], ovf)]


def _sqrt(op: HwOp, a: list, N: int, ovf) -> list:
    return [square_root(align(a[0], op.p["k"]), ovf)]


def _tred(op: HwOp, a: list, N: int, ovf) -> list:
    return list(trig_reduce(a[0], op.p["sh"]))


def _tsel(op: HwOp, a: list, N: int, ovf) -> list:
    return [sat(rsh(quadrant(a[0], a[1], a[2], op.p["which"]), op.p["sh"]), ovf)]


@dataclass(frozen=True)
class OpDef:
    kind: str
    evaluate: Callable  # (op, operand values, N, ovf or None) -> [result arrays]
    latency: int  # clocks from operands to the result register of its hardware operator
    c_helper: str  # the C helper <prefix>_<c_helper> its statement calls (fixed.c.j2, hls/ops.c.j2)
    verilog: str | None  # the Verilog operator module <top>_<verilog> (None: inline)


OPS: dict[str, OpDef] = {o.kind: o for o in (
    OpDef("add", _add, 1, "sat", None),
    OpDef("mul", _mul, 2, "sat", None),
    # restoring division, two quotient bits per stage: 1 + 17 + 1
    OpDef("div", _div, 19, "div", "div"),
    # digit recurrence, two root bits per stage: 16 + 1
    OpDef("sqrt", _sqrt, 17, "sqrt", "sqrt"),
    OpDef("tred", _tred, 3, "sincos", "trig_reduce"),
    OpDef("tsel", _tsel, 1, "sat", None),
)}

LATENCY = {k: o.latency for k, o in OPS.items()}
# ops.v.j2 builds its pipelines from these: the divider is an input stage, DIV_STAGES stages
# of two quotient bits and an output stage; the square root SQRT_STAGES stages of two root
# bits and an output stage. The algorithms need exactly 34 quotient bits (2|n|/|d| >= 2**34
# saturates) and 32 root bits (sqrt of 2**64): a latency is not a free choice.
DIV_STAGES = LATENCY["div"] - 2
SQRT_STAGES = LATENCY["sqrt"] - 1
assert 2 * DIV_STAGES == 34 and 2 * SQRT_STAGES == 32, "the op table's latencies do not fit ops.v.j2"


def run(hp: HwProgram, X, keep: bool = False):
    """THE interpreter. Raw int32 inputs X [N, n_in] -> (outputs [N, n_out] int64 holding
    int32 values, status [N] int32: 1 where a flagged op saturated) and, with keep, every
    value {ref: array}."""
    X = np.asarray(X, dtype=np.int64)
    if X.ndim == 1:
        X = X[None, :]
    N = X.shape[0]
    ovf = np.zeros(N, dtype=bool)
    val: dict[tuple, np.ndarray] = {}

    def g(ref):
        return X[:, ref[1]] if ref[0] == "in" else val[ref]

    for op in hp.ops:
        res = OPS[op.kind].evaluate(op, [g(s) for s in op.srcs], N, ovf if op.flag else None)
        for j, v in enumerate(res):
            val[("h", op.id, j)] = v
    Y = np.zeros((N, len(hp.outputs)), dtype=np.int64)
    for k, o in enumerate(hp.outputs):
        Y[:, k] = o[1] if o[0] == "c" else g(o)
    status = ovf.astype(np.int32)
    return (Y, status, val) if keep else (Y, status)


# ---------------------------------------------------------------------------------------
# lowering

def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def rsh_int(v: int, s: int) -> int:
    """rsh on one Python int (int64 wrap)."""
    return _wrap64((v + (1 << (s - 1))) >> s) if s > 0 else _wrap64(v << -s)


def trig_bounds(fx: int) -> dict:
    """Worst-case magnitudes inside the reduction and the polynomials for any int32 x in
    format fx; raises if the int32 operators would not be exact."""
    C, HI, LO = TRIG["two_over_pi_q24"], TRIG["pio2_hi_q29"], TRIG["pio2_lo_q60"]
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
    for q in (TRIG["sin"], TRIG["cos"]):
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


class _Lower:
    """What LOWER_RULES read and write: the ops so far and, per tape temp, its value."""

    def __init__(self, tape):
        self.tape = tape
        self.ops: list[HwOp] = []
        self.ref: dict[int, tuple] = {}

    def new(self, kind, srcs, p, flag=True, nres=1, note="", widths=(32,)) -> HwOp:
        # rsh/align on int64 are defined for shifts of at most 62 bits either way (the C
        # builds 1 << (s - 1) and shifts by s): a plan beyond that is refused, not printed
        shifts = [p[x] for x in ("s", "k") if x in p] + (p["sh"] if isinstance(p.get("sh"), list) else
                                                         [p["sh"]] if "sh" in p else [])
        if any(abs(v) > 62 for v in shifts):
            raise ExpressionError(f"fixed point: a shift of {max(shifts, key=abs)} bits in {kind} computing "
                                  f"{str(note)[:100]} is beyond int64 (formats of more than 62 fractional bits?)")
        op = HwOp(len(self.ops), kind, tuple(srcs), p, flag, nres, note, widths)
        self.ops.append(op)
        return op

    def r(self, o):
        kind, v = o
        if kind == "in":
            return ("in", v)
        if kind == "t":
            return self.ref[v]
        raise AssertionError(o)

    def note(self, ins) -> _Note:
        return _Note(lambda a=self.tape.atoms[ins.dst[0]]: repr(a)[:120])

    def one(self, ins, kind, srcs, p) -> None:
        """ins is one op of kind: its result is the temp's value"""
        self.ref[ins.dst[0]] = ("h", self.new(kind, srcs, p, note=self.note(ins)).id, 0)


def _l_add(s: _Lower, ins) -> None:  # add, sub
    srcs, sh, sg, lit, at = [], [], [], 0, None
    for pos, (o, (kind, v)) in enumerate(zip(ins.args, ins.params["align"])):
        sign = -1 if (ins.op == "sub" and pos == 1) else 1
        if kind == "lit":
            lit += sign * v
            at = pos
        else:
            srcs.append(s.r(o))
            sh.append(v)
            sg.append(sign)
    # form and lit_at: the instruction as written (a + b, a - b, where the literal
    # stands), for printers that keep its shape; the value does not depend on them
    p = {"sh": sh, "sign": sg, "lit": lit, "s": ins.params["s"], "form": ins.op}
    if at is not None:
        p["lit_at"] = at
    s.one(ins, "add", srcs, p)


def _l_neg(s: _Lower, ins) -> None:
    s.one(ins, "add", [s.r(ins.args[0])], {"sh": [0], "sign": [-1], "lit": 0, "s": 0, "form": "neg"})


def _l_mul(s: _Lower, ins) -> None:
    a, pr = ins.args, ins.params
    if "lit" in pr:
        s.one(ins, "mul", [s.r(a[1] if pr["const_first"] else a[0])], {"lit": pr["lit"], "s": pr["s"]})
    else:
        s.one(ins, "mul", [s.r(a[0]), s.r(a[1])], {"s": pr["s"]})


def _l_div(s: _Lower, ins) -> None:
    (num, den), pr = ins.args, ins.params
    k = pr["k"]
    if "lit" in pr:
        # nlit is the numerator; lit and lk its literal and shift (how the C spells it)
        s.one(ins, "div", [s.r(den)], {"nlit": rsh_int(pr["lit"], -k), "k": 0, "lit": pr["lit"], "lk": k})
    else:
        s.one(ins, "div", [s.r(num), s.r(den)], {"k": k})


def _l_sqrt(s: _Lower, ins) -> None:
    s.one(ins, "sqrt", [s.r(ins.args[0])], {"k": ins.params["k"]})


def _l_trig(s: _Lower, ins) -> None:  # sin, cos, sincos: the reduction, the polynomials, a select per result
    pr, note = ins.params, s.note(ins)
    b = trig_bounds(pr["fx"])
    t = s.new("tred", [s.r(ins.args[0])], {"sh": 29 - pr["fx"], "kw": b["kw"]}, flag=False, nres=2,
              note=_Note(lambda n=note: f"reduce {n}"), widths=(32, 2))
    r30, q = ("h", t.id, 0), ("h", t.id, 1)
    # the polynomial's ops carry "of": the reduction they belong to (the C computes
    # them inside its sincos helper, in int64)
    z = ("h", s.new("mul", [r30, r30], {"s": 30, "of": t.id}, flag=False, note="z = r^2").id, 0)
    polys = {}
    for name in ("sin", "cos"):
        coefs = TRIG[name]
        m = s.new("mul", [z], {"lit": coefs[-1], "s": 30, "of": t.id}, flag=False, note=f"{name} horner")
        acc = ("h", m.id, 0)
        for c in list(coefs[-2::-1]) + [ONE_Q30]:
            s_ = s.new("add", [acc], {"sh": [0], "sign": [1], "lit": c, "s": 0, "of": t.id}, flag=False,
                       note=f"{name} horner")
            acc = ("h", s_.id, 0)
            if c != ONE_Q30 or name == "sin":
                m = s.new("mul", [z if c != ONE_Q30 else r30, acc], {"s": 30, "of": t.id}, flag=False,
                          note=f"{name} horner")
                acc = ("h", m.id, 0)
        polys[name] = acc
    for dst, w, fo in zip(ins.dst, TAPE_OPS[ins.op].results, pr["fo"]):
        h = s.new("tsel", [polys["sin"], polys["cos"], q], {"which": w, "sh": 30 - fo},
                  note=_Note(lambda w=w, a=s.tape.atoms[dst]: f"{w} {repr(a)[:100]}"))
        s.ref[dst] = ("h", h.id, 0)


# the planner (analysis.fixedpoint.PLAN_RULES) refuses any other op first
LOWER_RULES = Rules({"add": _l_add, "sub": _l_add, "neg": _l_neg, "mul": _l_mul, "div": _l_div, "sqrt": _l_sqrt,
                     "sin": _l_trig, "cos": _l_trig, "sincos": _l_trig},
                    lambda tape, ins: f"fixed point: no lowering of {ins.op!r}")


def lower_hw(fx: FixedProgram, order=None) -> HwProgram:
    """The program's ops, in the order of `order` (tape instructions, e.g. the C
    schedule's register-pressure order) or the tape's. The one place where tape
    instructions become ops."""
    tape = fx.tape
    instrs = fx.instrs
    if order is not None:
        by_dst = {i.dst: i for i in fx.instrs}
        instrs = [by_dst[i.dst] for i in order]
    s = _Lower(tape)
    tapeops.run(tape, LOWER_RULES, s, instrs)
    outs = []
    for k, o in enumerate(tape.outputs):
        if o[0] == "c":
            outs.append(("c", round(o[1] * 2.0 ** fx.out_bits[k])))
        else:
            outs.append(s.r(o))
    return HwProgram(s.ops, outs, len(tape.inputs), list(fx.in_bits), list(fx.out_bits), temps=dict(s.ref))
