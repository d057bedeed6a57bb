"""Fixed-point formats and error bounds for a tape (32-bit words, 64-bit intermediates).

Every value v is held as an int32 x with f fractional bits: v ~ x / 2**f. Formats come
from the range analysis: f is the largest that keeps |v| + (its error bound) below 2**31
/ 2**f, so no operation can overflow for inputs in their declared ranges (the generated
code still saturates and raises a flag for inputs outside them).

The semantics of each instruction are fixed here and implemented identically by the C
renderer and the Verilog generator (bit-exact), with rsh(v, s) = (v + 2**(s-1)) >> s
(round half up, arithmetic shift) for s > 0 and v << -s for s <= 0, on int64:
  add/sub  rsh((a << la) +- (b << lb), s)         operands aligned to a common format
  mul      rsh(a * b, s)                           a constant operand is an int32 literal
  neg      -a
  div      sign * ((2|n| / |d| + 1) >> 1), n = a << k (or rsh(a, -k))
  sqrt     nearest integer square root of a << k (a < 0 read as 0)
  sincos   reduction by pi/2 and Taylor polynomials in Q30 (see FIXED_TRIG)
then saturation to int32. Error bounds are absolute, sound, versus exact arithmetic at
the real inputs before their conversion to int32 (round to nearest: half an ulp of each
input's format, included and propagated).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from ..ir.atom import ExpressionError
from ..lower.tape import Tape, describe
from ..lower.tapeops import Rules, run
from .ranges import Ranges, _config

WORD = 32
MAXMAG = 2.0 ** (WORD - 1)
TRIG_ARG_LIMIT = 256.0  # |x| for sin/cos: keeps the reduction's products inside int64
# sin/cos in Q30: truncation < 1e-11 and 14 roundings of 2**-31, each damped by |r|^2 < 0.62
TRIG_ERROR = 2.0 ** -28
SIN_TAYLOR = [(-1) ** k / math.factorial(2 * k + 1) for k in range(1, 6)]  # r^3 .. r^11
COS_TAYLOR = [(-1) ** k / math.factorial(2 * k) for k in range(1, 7)]  # r^2 .. r^12


def frac_bits_for(mag: float) -> int:
    """Largest f <= 62 with mag * 2**f < 2**31 (with a hair of margin)."""
    if mag <= 0.0:
        return WORD - 2
    f = WORD - 1 - math.floor(math.log2(mag)) - 1
    while mag * 2.0 ** f >= MAXMAG * (1 - 1e-12):
        f -= 1
    while mag * 2.0 ** (f + 1) < MAXMAG * (1 - 1e-12) and f < 62:
        f += 1
    # at most 62: a product of two such words then shifts by at most 62 (rsh needs s < 64)
    return min(f, 62)


def const_bits(c: float) -> int:
    """Fractional bits of an int32 literal for the constant c (31 significant bits)."""
    return min(frac_bits_for(abs(c)), 62)


def half_ulp(f: int) -> float:
    return 2.0 ** -(f + 1)


def local_error(s, fi) -> float:
    """The error instruction fi adds to exact operands (its roundings, its literals'
    quantisation): this module's rules with every operand's error 0 (analysis.ldlback's
    perturbation bound charges each factor value its own local error on top)."""
    p, f = fi.params, s.bits[fi.dst[0]]
    if fi.op in ("add", "sub"):
        e = 0.0
        for o, (kind, v) in zip(fi.args, p["align"]):
            e += abs(v / 2.0 ** p["F"] - o[1]) if kind == "lit" else half_ulp(p["F"]) if v < 0 else 0.0
        return e + (half_ulp(f) if p["s"] > 0 else 0.0)
    if fi.op == "neg":
        return 0.0
    if fi.op == "mul":
        if "lit" not in p:
            return half_ulp(f) if p["s"] > 0 else 0.0
        x, cst = (fi.args[1], fi.args[0]) if p["const_first"] else fi.args
        ec = abs(p["lit"] / 2.0 ** const_bits(cst[1]) - cst[1])
        tz = (abs(p["lit"]) & -abs(p["lit"])).bit_length() - 1 if p["lit"] else 64
        return float(np.max(s.mag(x) + s.ferr(x))) * ec + (half_ulp(f) if 0 < p["s"] and p["s"] > tz else 0.0)
    if fi.op == "div" and fi.args[0][0] == "c" and p["lit"] == round(fi.args[0][1] * 2.0 ** p["lit_bits"]):
        if p["lit"] / 2.0 ** p["lit_bits"] == fi.args[0][1]:  # an exact constant over the pivot: 1 / D_k
            return half_ulp(f)
    if fi.op == "div" and fi.args[0][0] == "t":  # a quotient of temps (a divided LDL^T step's E / D_k)
        if p["k"] >= 0:  # the numerator shifted left exactly: the quotient's rounding alone
            return half_ulp(f)
        floor = s.den_floor.get(fi.args[1][1], 0.0)  # a right shift rounds the numerator, over |D| >= floor
        if floor > 0:
            return half_ulp(f) + half_ulp(s.fbits(fi.args[0]) + p["k"]) / floor
    raise LookupError(f"no local error rule for {fi.op}")


@dataclass
class FixedInstr:
    op: str
    dst: tuple[int, ...]
    args: tuple[tuple, ...]
    params: dict  # shifts and integer literals, see the module doc


@dataclass
class FixedProgram:
    tape: Tape
    in_bits: list[int]
    temp_bits: dict[int, int]
    out_bits: list[int]
    instrs: list[FixedInstr]
    out_error: list[float]
    in_error: list[float]
    temp_error: dict[int, float] = field(default_factory=dict)

    def bits(self, o: tuple) -> int:
        kind, v = o
        return self.temp_bits[v] if kind == "t" else self.in_bits[v]


def _enc(v):
    """JSON of nested tuples, lists, dicts (any keys), ints, floats (inf too), bools, strings,
    each read back as the same type (tuples and int keys included)."""
    if isinstance(v, tuple):
        return {"t": [_enc(x) for x in v]}
    if isinstance(v, list):
        return [_enc(x) for x in v]
    if isinstance(v, dict):
        return {"d": [[_enc(k), _enc(x)] for k, x in v.items()]}
    return v


def _dec(v):
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if isinstance(v, dict):
        return tuple(_dec(x) for x in v["t"]) if "t" in v else {_dec(k): _dec(x) for k, x in v["d"]}
    return v


def program_text(fx: FixedProgram) -> str:
    """The program without its tape, as text (program_from_text reads it back equal)."""
    fields = {k: getattr(fx, k) for k in ("in_bits", "temp_bits", "out_bits", "out_error", "in_error", "temp_error")}
    fields["instrs"] = [(i.op, i.dst, i.args, i.params) for i in fx.instrs]
    return json.dumps(_enc(fields))


def program_from_text(tape: Tape, text: str) -> FixedProgram:
    f = _dec(json.loads(text))
    return FixedProgram(tape, f["in_bits"], f["temp_bits"], f["out_bits"],
                        [FixedInstr(*i) for i in f["instrs"]], f["out_error"], f["in_error"], f["temp_error"])


class _Plan:
    """What the magnitude rules (PLAN_RULES) read and write, over one Ranges (floats) or
    box by box (arrays over the boxes of a BoxRanges). With `like`, its formats are kept
    and only the error bounds are derived again (plan_errors)."""

    def __init__(self, tape: Tape, ranges: Ranges | None, boxes, like: FixedProgram | None, in_err, zero,
                 caps: dict | None = None):
        self.tape, self.ranges, self.boxes, self.like = tape, ranges, boxes, like
        # caps: {("in", k) or ("t", d): the most fractional bits it may get} (tie_feedback)
        self.caps = caps or {}
        self.in_bits = list(like.in_bits) if like else [min(frac_bits_for(iv.mag), self.caps.get(("in", k), 99))
                                                        for k, iv in enumerate(ranges.inputs)]
        # bounds are against exact arithmetic at the real (unrounded) inputs: converting one
        # to its format rounds to nearest, half an ulp, an error that propagates like any other
        self.in_err = in_err(self.in_bits)
        self.zero = zero
        self.bits: dict[int, int] = {}
        self.err: dict = {}
        self.out: list[FixedInstr] = []
        self.override: dict = {}  # temp -> a bound on its error proven otherwise (analysis.ldlback)
        self.den_floor: dict = {}  # temp -> a floor of its computed |value| proven otherwise (same)
        # temp -> a bound on its computed |value| before its rounding, proven otherwise (analysis.ababack):
        # where the error against the exact value is large but the computed value is not
        self.value_cap: dict = {}

    def ferr(self, o):
        kind, v = o
        return self.err[v] if kind == "t" else self.in_err[v] if kind == "in" else self.zero

    def fbits(self, o) -> int:
        kind, v = o
        return self.bits[v] if kind == "t" else self.in_bits[v]

    def mag(self, o):
        return self.ranges.of(o).mag if self.boxes is None else self.boxes.magnitude(o)

    def operand(self, o):
        if self.boxes is not None:
            return self.boxes.operand(o)
        iv = self.ranges.of(o)
        return iv.lo, iv.hi

    def where(self, ins, b: int | None = None) -> str:
        text = describe(self.tape, ins)
        if self.like is None or b is None:
            return text
        return text + f" in the box around {_config(self.tape, self.boxes.in_lo[b], self.boxes.in_hi[b])}"

    def choose(self, d: int, pre_err, rounding) -> int:
        """Format for temp d: its range plus error must fit; rounding(f) is the error the
        final rounding to f adds."""
        if self.like is not None:
            return self.like.temp_bits[d]
        m = self.ranges.temps[d].mag
        pre_err = float(np.max(pre_err))
        if self.override.get(d, np.inf) < pre_err:  # the value before its rounding, and at most 2 half ulps
            pre_err, rounding = self.override[d], (lambda f, r=rounding: 3 * r(f))  # of alignment before it
        fit = m + pre_err
        if self.value_cap.get(d, np.inf) < fit:
            fit, rounding = self.value_cap[d], (lambda f, r=rounding: 3 * r(f))
        f = frac_bits_for(fit + 2.0 ** -60)
        while f > -30 and (fit + rounding(f)) * 2.0 ** f >= MAXMAG * (1 - 1e-12):
            f -= 1
        return min(f, self.caps.get(("t", d), f))

    def set(self, ins, f: int, e, p: dict) -> None:
        d = ins.dst[0]
        fi = FixedInstr(ins.op, ins.dst, ins.args, p)
        self.bits[d] = f
        if d in self.override:  # the override bounds the value before the instruction's own errors
            e = np.minimum(e, self.override[d] + local_error(self, fi))
        self.err[d] = e
        self.out.append(fi)


def _r_add(s: _Plan, ins) -> None:  # add, sub: operands aligned to a common format
    a = ins.args
    consts = [o for o in a if o[0] == "c"]
    vars_ = [o for o in a if o[0] != "c"]
    e_pre = s.zero
    for o in vars_:
        e_pre = e_pre + s.ferr(o)
    fs = [s.fbits(o) for o in vars_]
    # every constant must fit int64 at the common format, with a bit to spare
    cap_c = min((61 - math.ceil(math.log2(abs(o[1]))) for o in consts if o[1] != 0.0), default=10 ** 6)

    def common(f_out: int) -> int:
        """The format operands are aligned to: the finer operand's, but never more than 31
        bits of shift for either operand nor 31 bits below the result."""
        F_ = min(max(fs), min(fs) + 31, f_out + 31) if len(fs) == 2 else max(fs[0], f_out)
        return min(F_, cap_c)

    def extra(F_: int) -> float:
        """errors of the alignment: constants quantised, finer operands rounded"""
        e_x = sum(abs(round(o[1] * 2.0 ** F_) / 2.0 ** F_ - o[1]) for o in consts)
        return e_x + sum(half_ulp(F_) for fo in fs if fo > F_)

    d = ins.dst[0]
    f = s.choose(d, e_pre, half_ulp)
    for _ in range(64):  # alignment errors are far below the margin: settles at once
        F = common(f)
        f2 = s.choose(d, e_pre + extra(F), half_ulp)
        if f2 == f:
            break
        f = f2
    e_pre = e_pre + extra(F)
    sh = [("lit", round(o[1] * 2.0 ** F)) if o[0] == "c" else ("shift", F - s.fbits(o)) for o in a]
    e = e_pre + (half_ulp(f) if F - f > 0 else 0.0)
    s.set(ins, f, e, {"align": sh, "F": F, "s": F - f})


def _r_neg(s: _Plan, ins) -> None:
    s.set(ins, s.fbits(ins.args[0]), s.ferr(ins.args[0]), {})


def _r_mul(s: _Plan, ins) -> None:
    a, d = ins.args, ins.dst[0]
    if a[0][0] == "c" or a[1][0] == "c":
        c, x = (a[0], a[1]) if a[0][0] == "c" else (a[1], a[0])
        cv = c[1]
        fc = const_bits(cv)
        ci = round(cv * 2.0 ** fc)
        ec = abs(ci / 2.0 ** fc - cv)
        e_pre = abs(cv) * s.ferr(x) + s.mag(x) * ec + s.ferr(x) * ec
        f = s.choose(d, e_pre, half_ulp)
        sh = s.fbits(x) + fc - f
        tz = (abs(ci) & -abs(ci)).bit_length() - 1 if ci else 64
        # the literal's trailing zero bits absorb a shift up to tz: exact
        e = e_pre if sh <= tz else e_pre + (half_ulp(f) if sh > 0 else 0.0)
        s.set(ins, f, e, {"lit": ci, "const_first": a[0][0] == "c", "s": sh})
        return
    ea, eb = s.ferr(a[0]), s.ferr(a[1])
    e_pre = s.mag(a[0]) * eb + s.mag(a[1]) * ea + ea * eb
    f = s.choose(d, e_pre, half_ulp)
    sh = s.fbits(a[0]) + s.fbits(a[1]) - f
    s.set(ins, f, e_pre + (half_ulp(f) if sh > 0 else 0.0), {"s": sh})


def _r_div(s: _Plan, ins) -> None:
    (num, den), d = ins.args, ins.dst[0]
    if den[0] == "c":
        raise ExpressionError(f"{s.where(ins)}: division by a constant should have been a multiplication")
    dlo, dhi = s.operand(den)
    lo_den = np.where((dlo <= 0) & (dhi >= 0), 0.0, np.minimum(np.abs(dlo), np.abs(dhi)))
    eb = s.ferr(den)
    # the computed divisor's smallest |value|: its range less its error, or a floor proven
    # of the computed value itself (an LDL^T pivot: analysis.ldlback)
    lo_comp = np.maximum(lo_den - eb, s.den_floor.get(den[1], 0.0) if den[0] == "t" else 0.0)
    close = np.atleast_1d(~(lo_comp > 0))
    if close.any():
        b = int(np.argmax(close))
        dl, dh, e_b = (np.broadcast_to(x, close.shape)[b] for x in (dlo, dhi, eb))
        raise ExpressionError(f"{s.where(ins, b)}: the divisor can come within its error bound of 0 "
                              f"(range [{dl:.6g}, {dh:.6g}], error {e_b:.3g})")
    qmag = s.mag(("t", d)) if s.boxes is not None else s.ranges.temps[d].mag
    e_pre = (s.ferr(num) + qmag * eb) / lo_comp
    f = s.choose(d, e_pre, half_ulp)
    fn = s.fbits(num) if num[0] != "c" else const_bits(num[1])
    k = f - fn + s.fbits(den)
    if k > 31:  # n = a << k must fit int64 with a bit to spare for 2n
        f -= k - 31
        k = 31
    if k < 0:
        e_pre = e_pre + half_ulp(fn + k) / lo_den
    p = {"k": k}
    if num[0] == "c":
        p["lit"] = round(num[1] * 2.0 ** fn)
        p["lit_bits"] = fn
    s.set(ins, f, e_pre + half_ulp(f), p)


def _r_sqrt(s: _Plan, ins) -> None:
    x = ins.args[0]
    ex = s.ferr(x)
    lo = np.maximum(s.operand(x)[0], 0.0)
    with np.errstate(all="ignore"):
        e_pre = np.where(lo > ex, ex / (np.sqrt(lo) + np.sqrt(np.maximum(lo - ex, 0.0))), np.sqrt(ex))
    f = s.choose(ins.dst[0], e_pre, half_ulp)
    k = 2 * f - s.fbits(x)
    if k > 31:
        f -= (k - 31 + 1) // 2
        k = 2 * f - s.fbits(x)
    if k < 0:  # pre-rounding of the radicand
        e_pre = e_pre + math.sqrt(half_ulp(s.fbits(x) + k))
    s.set(ins, f, e_pre + half_ulp(f), {"k": k})


def _r_trig(s: _Plan, ins) -> None:  # sin, cos, sincos: every result alike
    x = ins.args[0]
    if np.max(s.mag(x)) > TRIG_ARG_LIMIT:
        raise ExpressionError(f"{s.where(ins)}: |argument| up to {np.max(s.mag(x)):.6g} exceeds {TRIG_ARG_LIMIT} "
                              "(fixed-point sin/cos)")
    e_pre = s.ferr(x) + TRIG_ERROR
    fx = s.fbits(x)
    if fx < -2:
        raise ExpressionError(f"{s.where(ins)}: argument format Q{fx} too coarse for sin/cos")
    for dd in ins.dst:
        fo = min(s.choose(dd, e_pre, half_ulp), 30)  # computed in Q30: finer formats would only pad zeros
        s.bits[dd] = fo
        s.err[dd] = e_pre + (half_ulp(fo) if fo < 30 else 0.0)
    s.out.append(FixedInstr(ins.op, ins.dst, ins.args, {"fx": fx, "fo": [s.bits[dd] for dd in ins.dst]}))


PLAN_RULES = Rules({"add": _r_add, "sub": _r_add, "neg": _r_neg, "mul": _r_mul, "div": _r_div, "sqrt": _r_sqrt,
                    "sin": _r_trig, "cos": _r_trig, "sincos": _r_trig},
                   lambda tape, ins: f"fixed point has no {ins.op!r} yet "
                                     f"({(f'{ins.op} computing {tape.atoms[ins.dst[0]]!r}')[:300]})")


FEEDBACK_ROUNDS = 8  # formats only get coarser from round to round: two or three settle them


def _out_bits(tape: Tape, s: _Plan, k: int) -> int:
    o = tape.outputs[k]
    return frac_bits_for(abs(o[1])) if o[0] == "c" else s.fbits(o)


def _tie_feedback(tape: Tape, s: _Plan, caps: dict) -> bool:
    """Cap both sides of every feedback pair whose formats differ at the coarser of the
    two (a step kernel's state out[k] is copied to in[k] between calls as it is: the
    formats must agree, or the next call reads it 2^d off); True if a cap changed."""
    changed = False
    for ko, ki in tape.feedback:
        o, want = tape.outputs[ko], min(_out_bits(tape, s, ko), s.in_bits[ki])
        for key in (("in", ki), o if o[0] in ("t", "in") else None):
            if key is not None and caps.get(key, 99) > want and (key[0] == "in" and s.in_bits[key[1]] > want
                                                                    or key[0] == "t" and s.bits[key[1]] > want):
                caps[key] = want
                changed = True
    return changed


def plan_fixed(tape: Tape, ranges: Ranges, boxes=None) -> FixedProgram:
    """Formats and error bounds for the tape over `ranges`. With `boxes` (a BoxRanges
    whose union `ranges` encloses), the errors that steer each format are propagated box
    by box (arrays over the boxes) and their largest is used: over a wide domain the
    hull's magnitudes and smallest divisors belong to different boxes, and their
    products overstate the errors by orders of magnitude (the Stewart platform's
    elimination); the reported bounds are the largest over the boxes."""
    caps: dict = {}
    for _ in range(FEEDBACK_ROUNDS):
        s = _backward_run(tape, lambda: _Plan(tape, ranges, boxes, None, lambda bits: [half_ulp(f) for f in bits],
                                              0.0, caps))
        if not _tie_feedback(tape, s, caps):
            break
    else:
        k_out, k_in = next((ko, ki) for ko, ki in tape.feedback
                           if _out_bits(tape, s, ko) != s.in_bits[ki])
        raise ExpressionError(f"fixed point: output {k_out} (the next value of input {k_in}) gets no format "
                              f"that input can take ({_out_bits(tape, s, k_out)} and {s.in_bits[k_in]} fractional bits)")
    out_bits, out_err = [], []
    for o in tape.outputs:
        if o[0] == "c":
            fb = frac_bits_for(abs(o[1]))
            out_bits.append(fb)
            out_err.append(abs(round(o[1] * 2.0 ** fb) / 2.0 ** fb - o[1]))
        else:
            out_bits.append(s.fbits(o))
            out_err.append(float(np.max(s.ferr(o))))
    err = {d: float(np.max(e)) for d, e in s.err.items()}
    return FixedProgram(tape, s.in_bits, s.bits, out_bits, s.out, out_err, s.in_err, err)


def plan_errors(fx: FixedProgram, vec) -> tuple[dict, list]:
    """The error bounds of plan_fixed with fx's formats kept, for every box of the
    BoxRanges vec (how a union of boxes gets bounds box by box, fixerror.bound_over_boxes):
    ({temp: array over boxes}, [array over boxes per output])."""
    B = vec.n_boxes
    with np.errstate(all="ignore"):
        s = _backward_run(fx.tape, lambda: _Plan(fx.tape, None, vec, fx, lambda bits: [np.full(B, e) for e in fx.in_error],
                                                 np.zeros(B)))
    outs = [np.full(B, fx.out_error[k]) if o[0] == "c" else s.ferr(o) + 0.0 for k, o in enumerate(fx.tape.outputs)]
    return s.err, outs


def _backward_run(tape: Tape, make) -> _Plan:
    """run PLAN_RULES on the state make() returns; for an open tree's LDL^T solve, with its
    factor's errors bounded as a perturbation of M (analysis.ldlback.iterate)."""
    bw = getattr(tape.hints, "backward", None)
    if bw is not None:
        def hooks(s):
            ins = {fi.dst[0]: fi for fi in s.out}
            return (lambda t: local_error(s, ins[t]), lambda t: s.ferr(("t", t)),
                    lambda t: s.mag(t if isinstance(t, tuple) else ("t", t)))

        def again(s, override):  # the errors again, s's formats kept, under other overrides (analysis.ababack)
            p = _Plan(tape, s.ranges, s.boxes, SimpleNamespace(temp_bits=s.bits, in_bits=s.in_bits),
                      lambda bits: s.in_err, s.zero)
            p.override, p.den_floor = override, s.den_floor
            with np.errstate(all="ignore"):  # past the cut, unbounded errors are expected (and unread)
                run(tape, PLAN_RULES, p)
            return lambda t: p.ferr(("t", t))
        s, why = bw.iterate(make, lambda s: run(tape, PLAN_RULES, s), hooks, again)
        if s is not None:
            return s
        if why is not None:
            raise ExpressionError(f"fixed point: {why}")
    s = make()
    run(tape, PLAN_RULES, s)
    return s
