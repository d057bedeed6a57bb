"""Tighter error bounds for fixed-point programs: first-order error forms.

The error of every value is kept as a linear form over the rounding errors committed so
far, E = sum_k c_k d_k + [-r, r], each d_k in [-u_k, u_k] one rounding (its own
symbol), each coefficient c_k an interval (the sensitivity of this value to that
rounding, over the box). Errors that reach a value along two paths then add with their
signs and may cancel (x - y where x and y carry the same rounding), which bounds that add
magnitudes cannot see. Second-order terms (products of errors) and the smallest
coefficients go into r. Sound for inputs in the box: the bound is max over the box of
|sum c_k d_k| + r.

`bound_over_boxes` is the bound the backends record: formats from the domain's hull,
error bounds box by box (the smaller of fixedpoint's magnitude bound and this one).
"""
from __future__ import annotations

import math

from .fixedpoint import TRIG_ERROR, FixedProgram, half_ulp, plan_fixed
from ..lower.tape import Tape
from .ranges import Interval, Ranges

MAX_TERMS = 40


class _Form:
    __slots__ = ("c", "r")

    def __init__(self, c: dict, r: float):
        self.c = c  # symbol -> (lo, hi)
        self.r = r

    def mag(self, u: dict) -> float:
        return sum(max(abs(lo), abs(hi)) * u[k] for k, (lo, hi) in self.c.items()) + self.r


ZERO = _Form({}, 0.0)


def _scale(f: _Form, iv: Interval) -> dict:
    """coefficients times a value in iv"""
    a, b = iv.lo, iv.hi
    out = {}
    for k, (lo, hi) in f.c.items():
        p = (lo * a, lo * b, hi * a, hi * b)
        out[k] = (min(p), max(p))
    return out


def _merge(x: dict, y: dict, sy: float = 1.0) -> dict:
    out = dict(x)
    for k, (lo, hi) in y.items():
        if sy < 0:
            lo, hi = -hi, -lo
        if k in out:
            a, b = out[k]
            out[k] = (a + lo, b + hi)
        else:
            out[k] = (lo, hi)
    return out


def _condense(c: dict, r: float, u: dict) -> tuple[dict, float]:
    if len(c) <= MAX_TERMS:
        return c, r
    items = sorted(c.items(), key=lambda kv: -max(abs(kv[1][0]), abs(kv[1][1])) * u[kv[0]])
    keep = dict(items[:MAX_TERMS])
    r += sum(max(abs(lo), abs(hi)) * u[k] for k, (lo, hi) in items[MAX_TERMS:])
    return keep, r


def output_errors(fx: FixedProgram, ranges: Ranges) -> list[float]:
    """Error bound of every output of fx (its formats and shifts) over these ranges."""
    u: dict[int, float] = {}
    forms: dict[int, _Form] = {}
    sym = [0]

    def new(mag: float) -> tuple[int, tuple]:
        sym[0] += 1
        u[sym[0]] = mag
        return sym[0], (1.0, 1.0)

    def form(o) -> _Form:
        return forms[o[1]] if o[0] == "t" else ZERO

    def rng(o) -> Interval:
        return ranges.of(o)

    def slack(c: dict, r: float) -> float:
        """1e-12 relative widening for the floating-point rounding of this analysis"""
        return r * (1 + 1e-12) + 1e-300

    for ins in fx.instrs:
        op, a, p = ins.op, ins.args, ins.params
        d = ins.dst[0]
        if op in ("add", "sub"):
            fa, fb = form(a[0]), form(a[1])
            c = _merge(fa.c, fb.c, 1.0 if op == "add" else -1.0)
            r = fa.r + fb.r
            F = p["F"]
            for o, (kind, v) in zip(a, p["align"]):
                if kind == "lit":
                    r += abs(v / 2.0 ** F - o[1])
                elif v < 0:  # finer operand rounded to F
                    k, one = new(half_ulp(F))
                    c[k] = one if (o is a[0] or op == "add") else (-1.0, -1.0)
            if p["s"] > 0:
                k, one = new(half_ulp(fx.temp_bits[d]))
                c[k] = one
        elif op == "neg":
            f = form(a[0])
            c = {k: (-hi, -lo) for k, (lo, hi) in f.c.items()}
            r = f.r
        elif op == "mul":
            if "lit" in p:
                x, cst = (a[1], a[0]) if p["const_first"] else (a[0], a[1])
                from .fixedpoint import const_bits

                cv = cst[1]
                fc = const_bits(cv)
                ec = abs(p["lit"] / 2.0 ** fc - cv)
                fxf = form(x)
                c = _scale(fxf, Interval(p["lit"] / 2.0 ** fc, p["lit"] / 2.0 ** fc))
                r = fxf.r * abs(p["lit"] / 2.0 ** fc) + rng(x).mag * ec
            else:
                fa, fb = form(a[0]), form(a[1])
                c = _merge(_scale(fa, rng(a[1])), _scale(fb, rng(a[0])))
                r = fa.r * rng(a[1]).mag + fb.r * rng(a[0]).mag + fa.mag(u) * fb.mag(u)
            tz = 64
            if "lit" in p and p["lit"]:
                tz = (abs(p["lit"]) & -abs(p["lit"])).bit_length() - 1
            if p["s"] > 0 and not ("lit" in p and p["s"] <= tz):
                k, one = new(half_ulp(fx.temp_bits[d]))
                c[k] = one
        elif op == "div":
            num, den = a
            dr, qr = rng(den), ranges.temps[d]
            lo_den = min(abs(dr.lo), abs(dr.hi))
            fn, fd = form(num), form(den)
            ed = fd.mag(u)
            inv = Interval(min(1 / dr.lo, 1 / dr.hi), max(1 / dr.lo, 1 / dr.hi))
            mq = Interval(-qr.hi, -qr.lo)
            q_over = Interval(min(x * y for x in (mq.lo, mq.hi) for y in (inv.lo, inv.hi)),
                              max(x * y for x in (mq.lo, mq.hi) for y in (inv.lo, inv.hi)))
            c = _merge(_scale(fn, inv), _scale(fd, q_over))
            first = fn.mag(u) + qr.mag * ed  # |E_a - q E_b|
            r = (fn.r + qr.mag * fd.r) / lo_den + first * ed / (lo_den * (lo_den - ed))
            if p["k"] < 0:
                r += half_ulp(fx.bits(num) + p["k"]) / lo_den if num[0] != "c" else 0.0
            if "lit" in p:
                r += abs(p["lit"] / 2.0 ** p["lit_bits"] - num[1]) / lo_den
            k, one = new(half_ulp(fx.temp_bits[d]))
            c[k] = one
        elif op == "sqrt":
            # no linearisation near 0: the magnitude bound of the planner
            c, r = {}, fx.temp_error[d] if d in fx.temp_error else math.inf
            f = form(a[0])
            xr = rng(a[0])
            ex = f.mag(u)
            lo = max(xr.lo, 0.0)
            if lo > ex:
                c = _scale(f, Interval(1 / (2 * math.sqrt(xr.hi)), 1 / (2 * math.sqrt(lo))))
                # second order: |sqrt(a+e) - sqrt(a) - e/(2 sqrt a)| <= e^2 / (8 (a-e)^1.5)
                r = f.r / (2 * math.sqrt(lo)) + ex * ex / (8 * (lo - ex) ** 1.5)
            else:
                r = math.sqrt(ex)
            if p["k"] < 0:
                r += math.sqrt(half_ulp(fx.bits(a[0]) + p["k"]))
            k, one = new(half_ulp(fx.temp_bits[d]))
            c[k] = one
        elif op in ("sin", "cos", "sincos"):
            f = form(a[0])
            ex = f.mag(u)
            for dd, fn_ in zip(ins.dst, {"sin": ["sin"], "cos": ["cos"], "sincos": ["sin", "cos"]}[op]):
                # d sin = cos(x) dx, d cos = -sin(x) dx; second order |dx|^2 / 2
                from .ranges import i_trig

                deriv = i_trig(rng(a[0]), "cos" if fn_ == "sin" else "sin")
                if fn_ == "cos":
                    deriv = Interval(-deriv.hi, -deriv.lo)
                cc = _scale(f, deriv)
                rr = f.r + ex * ex / 2 + TRIG_ERROR
                fo = fx.temp_bits[dd]
                if fo < 30:
                    k, one = new(half_ulp(fo))
                    cc[k] = one
                cc, rr = _condense(cc, rr, u)
                forms[dd] = _Form(cc, slack(cc, rr))
            continue
        else:  # pragma: no cover
            raise AssertionError(op)
        c, r = _condense(c, r, u)
        forms[d] = _Form(c, slack(c, r))
    out = []
    for o in fx.tape.outputs:
        if o[0] == "c":
            fb = fx.out_bits[len(out)]
            out.append(abs(round(o[1] * 2.0 ** fb) / 2.0 ** fb - o[1]))
        else:
            out.append(form(o).mag(u) * (1 + 1e-12))
    return out


def bound_over_boxes(tape: Tape, hull: Ranges, boxes: list[Ranges], tight: bool = True) -> FixedProgram:
    """Formats from the hull of the domain; error bounds box by box with those formats
    (inside a small box the magnitudes that multiply errors, and the smallest divisors,
    are the box's own), the largest over the boxes reported: sound on the union. With
    `tight`, each box also gets the first-order error-form bound (output_errors) and the
    smaller of the two sound bounds is kept."""
    fx = plan_fixed(tape, hull)
    worst = [0.0] * len(fx.out_error)
    for r in boxes if len(boxes) > 1 else [hull]:
        b = plan_fixed(tape, r, like=fx) if len(boxes) > 1 else fx
        if [i.params for i in b.instrs] != [i.params for i in fx.instrs]:  # pragma: no cover
            raise AssertionError("re-bounding changed the fixed-point program")
        box_err = b.out_error
        if tight:
            box_err = [min(x, y) for x, y in zip(box_err, output_errors(b, r))]
        worst = [max(w, e) for w, e in zip(worst, box_err)]
    fx.out_error = worst
    return fx
