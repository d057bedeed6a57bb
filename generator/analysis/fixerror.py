"""Tighter error bounds for fixed-point programs: first-order error forms.

The error of every value is kept as a linear form over the rounding errors committed so
far, E = sum_k c_k d_k + [-r, r], each d_k in [-u_k, u_k] one rounding (its own
symbol), each coefficient c_k an interval (the sensitivity of this value to that
rounding, over the box). Errors that reach a value along two paths then add with their
signs and may cancel (x - y where x and y carry the same rounding), which bounds that add
magnitudes cannot see. Second-order terms (products of errors) and the smallest
coefficients go into r. Sound for inputs in the box: the bound is max over the box of
|sum c_k d_k| + r.

Each real input's conversion to its format (round to nearest, half an ulp) is a rounding
symbol like any other: bounds hold against exact arithmetic at the unrounded inputs.

`bound_over_boxes` is the bound the backends record: formats from the domain's hull,
error bounds for all boxes at once (numpy arrays over the boxes, the same rules as the
scalar code here and in fixedpoint), per box the smaller of fixedpoint's magnitude bound
and the error-form bound, the largest over the boxes reported. Boxes that hold the
largest bound of an output are bisected while that lowers it (within a budget).
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.atom import ExpressionError
from ..lower.tape import Tape
from . import parallel
from .fixedpoint import TRIG_ERROR, FixedProgram, const_bits, half_ulp, plan_fixed
from .ranges import (CHUNK, BoxRanges, BoxView, Interval, Ranges, _config, _last_reads, _vi_trig,
                     analyse_chunked, refine, split_box, union_ids)
from .solve_error import find_cut, refine_for_solve, solve_errors_boxes, split_failed

# error forms keep this many rounding symbols (the largest), the rest join the remainder:
# a rounding that reaches an output along several paths cancels by sign only while it is
# kept. The Stewart reduced kernel on its heave tube: 40 terms, bounds 3.0e-5 .. 2.4e-4 N
# (92% remainder); 400: 1.1e-5 .. 5.7e-5 N, 14 s -> 15 s of generation; 1000: no tighter.
MAX_TERMS = 400


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

    in_forms = []
    for f in fx.in_bits:  # each real input rounded to its format: a rounding of its own
        k, one = new(half_ulp(f))
        in_forms.append(_Form({k: one}, 0.0))

    def form(o) -> _Form:
        return forms[o[1]] if o[0] == "t" else in_forms[o[1]] if o[0] == "in" else ZERO

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


# ---- the same bounds over many boxes at once --------------------------------------------------
# Arrays over the boxes (shape (B,)) replace the floats of plan_fixed(like=...) and of
# output_errors; the rules are the same expressions, column by column. Error forms keep one
# set of symbols for all boxes: the MAX_TERMS of largest max-over-boxes weight.


def _box_where(fx: FixedProgram, ins, vec: BoxRanges, b: int) -> str:
    return f"{ins.op} computing {fx.tape.atoms[ins.dst[0]]!r}"[:300] + \
        f" in the box around {_config(fx.tape, vec.in_lo[b], vec.in_hi[b])}"


def plan_errors(fx: FixedProgram, vec: BoxRanges) -> tuple[dict, list]:
    """plan_fixed(tape, box, like=fx).temp_error and .out_error for every box of vec:
    ({temp: array over boxes}, [array over boxes per output])."""
    B = vec.n_boxes
    in_err = [np.full(B, e) for e in fx.in_error]
    err: dict = {}
    zero = np.zeros(B)

    def ferr(o):
        kind, v = o
        return err[v] if kind == "t" else in_err[v] if kind == "in" else zero

    def fbits(o):
        kind, v = o
        return fx.temp_bits[v] if kind == "t" else fx.in_bits[v]

    rng, mag = vec.operand, vec.magnitude

    with np.errstate(all="ignore"):
        for ins in fx.instrs:
            op, a, p = ins.op, ins.args, ins.params
            d = ins.dst[0]
            f = fx.temp_bits.get(d)
            if op in ("add", "sub"):
                vars_ = [o for o in a if o[0] != "c"]
                e_pre = zero
                for o in vars_:
                    e_pre = e_pre + ferr(o)
                F = p["F"]
                consts = [o for o in a if o[0] == "c"]
                extra = sum(abs(round(o[1] * 2.0 ** F) / 2.0 ** F - o[1]) for o in consts)
                extra += sum(half_ulp(F) for o in vars_ if fbits(o) > F)
                e_pre = e_pre + extra
                e = e_pre + (half_ulp(f) if p["s"] > 0 else 0.0)
            elif op == "neg":
                e = ferr(a[0])
            elif op == "mul":
                if "lit" in p:
                    c, x = (a[0], a[1]) if p["const_first"] else (a[1], a[0])
                    cv = c[1]
                    fc = const_bits(cv)
                    ec = abs(p["lit"] / 2.0 ** fc - cv)
                    e_pre = abs(cv) * ferr(x) + mag(x) * ec + ferr(x) * ec
                    ci = p["lit"]
                    tz = (abs(ci) & -abs(ci)).bit_length() - 1 if ci else 64
                    e = e_pre if p["s"] <= tz else e_pre + (half_ulp(f) if p["s"] > 0 else 0.0)
                else:
                    ea, eb = ferr(a[0]), ferr(a[1])
                    e_pre = mag(a[0]) * eb + mag(a[1]) * ea + ea * eb
                    e = e_pre + (half_ulp(f) if p["s"] > 0 else 0.0)
            elif op == "div":
                num, den = a
                dlo, dhi = rng(den)
                lo_den = np.where((dlo <= 0) & (dhi >= 0), 0.0, np.minimum(np.abs(dlo), np.abs(dhi)))
                eb = ferr(den)
                close = ~(lo_den > eb)
                if close.any():
                    b = int(np.argmax(close))
                    raise ExpressionError(f"{_box_where(fx, ins, vec, b)}: the divisor can come within its error "
                                          f"bound of 0 (range [{dlo[b]:.6g}, {dhi[b]:.6g}], error {eb[b]:.3g})")
                qmag = mag(("t", d))
                e_pre = (ferr(num) + qmag * eb) / (lo_den - eb)
                fn = fbits(num) if num[0] != "c" else const_bits(num[1])
                if p["k"] < 0:
                    e_pre = e_pre + half_ulp(fn + p["k"]) / lo_den
                e = e_pre + half_ulp(f)
            elif op == "sqrt":
                x = a[0]
                xlo, _ = rng(x)
                ex = ferr(x)
                lo = np.maximum(xlo, 0.0)
                e_pre = np.where(lo > ex, ex / (np.sqrt(lo) + np.sqrt(np.maximum(lo - ex, 0.0))), np.sqrt(ex))
                if p["k"] < 0:
                    e_pre = e_pre + math.sqrt(half_ulp(fbits(x) + p["k"]))
                e = e_pre + half_ulp(f)
            elif op in ("sin", "cos", "sincos"):
                e_pre = ferr(a[0]) + TRIG_ERROR
                for dd in ins.dst:
                    fo = fx.temp_bits[dd]
                    err[dd] = e_pre + (half_ulp(fo) if fo < 30 else 0.0)
                continue
            else:  # pragma: no cover
                raise AssertionError(op)
            err[d] = e
    outs = []
    for k, o in enumerate(fx.tape.outputs):
        outs.append(np.full(B, fx.out_error[k]) if o[0] == "c" else ferr(o) + 0.0)
    return err, outs


class _VForm:
    """Error form over boxes: rows `ids` of coefficient intervals (lo, hi) (K, B), and r (B,)."""

    __slots__ = ("ids", "lo", "hi", "r")

    def __init__(self, ids, lo, hi, r):
        self.ids, self.lo, self.hi, self.r = ids, lo, hi, r

    def mag(self, w):
        """sum |c_k| u_k + r; w: the u of the rows (K,)"""
        if not self.ids.shape[0]:
            return self.r
        return (np.maximum(np.abs(self.lo), np.abs(self.hi)) * w[:, None]).sum(0) + self.r


def _vscale(f: _VForm, a, b):
    """coefficients times a value in [a, b] (arrays over boxes); in place where it can (a
    few hundred thousand calls per Stewart kernel: allocation was most of their time)"""
    if a is b:  # a point
        p, q = f.lo * a, f.hi * a
        return np.minimum(p, q), np.maximum(p, q)
    p, q = f.lo * a, f.lo * b
    lo, hi = np.minimum(p, q), np.maximum(p, q)
    for c in (a, b):
        np.multiply(f.hi, c, out=p)
        np.minimum(lo, p, out=lo)
        np.maximum(hi, p, out=hi)
    return lo, hi


def _vmerge(ia, la, ha, ib, lb, hb, sb=1.0):
    if sb < 0:
        lb, hb = -hb, -lb
    if ia.shape == ib.shape and np.array_equal(ia, ib):
        return ia, la + lb, ha + hb
    ids = union_ids(ia, ib)
    B = la.shape[1] if la.ndim == 2 else lb.shape[1]
    lo, hi = np.zeros((ids.shape[0], B)), np.zeros((ids.shape[0], B))
    pa, pb = np.searchsorted(ids, ia), np.searchsorted(ids, ib)
    lo[pa], hi[pa] = la, ha
    lo[pb] += lb
    hi[pb] += hb
    return ids, lo, hi


def output_errors_boxes(fx: FixedProgram, vec: BoxRanges, detail: list | None = None, *,
                        section: set | None = None, exact: frozenset = frozenset(),
                        forms_out: dict | None = None, mags_out: dict | None = None,
                        absorb: dict | None = None, sites_out: list | None = None) -> list:
    """output_errors for every box of vec at once: [array over boxes per output]. With
    `detail` (a list), per output (coefficient magnitudes (K, B), the K roundings' half
    ulps, remainder (B,), the K roundings' instruction indices (-1: an input's)) is
    appended to it. For solve_error's split at a solve: `section`, the instruction
    indices to run (the others' temps are never read); `exact`, operands read without
    error; `forms_out`, a dict keyed by operands filled with their final forms (and
    "u": the symbols' half ulps); `mags_out`, keyed by temps, filled with their error
    magnitudes (B,); `absorb`, a dict keyed by temps whose forms are handed over there
    (stored in it) and read as exact from then on. `sites_out`, a list, gets every
    rounding as (temp it is added to, or None for an input's, half ulp), in symbol order
    (analysis.aligned's floor)."""
    B = vec.n_boxes
    u: list[float] = [0.0]
    origin: list[int] = [-1]
    site: list = [None]
    at = -1
    zero = np.zeros(B)
    empty = np.zeros(0, dtype=np.int64)
    Z = _VForm(empty, np.zeros((0, B)), np.zeros((0, B)), zero)

    def new(mag: float, dst: int | None = None) -> int:
        u.append(mag)
        origin.append(at)
        site.append(None if at < 0 else fx.instrs[at].dst[0] if dst is None else dst)
        return len(u) - 1

    def one(k):
        return _VForm(np.array([k], dtype=np.int64), np.ones((1, B)), np.ones((1, B)), zero)

    in_forms = [one(new(e)) for e in fx.in_error]
    forms: dict = {}

    def form(o):
        if o in exact:
            return Z
        return forms[o[1]] if o[0] == "t" else in_forms[o[1]] if o[0] == "in" else Z

    rng, rmag = vec.operand, vec.magnitude

    def W(ids):
        return np.array([u[k] for k in ids.tolist()])

    def fmag(f):
        return f.mag(W(f.ids))

    def add_sym(ids, lo, hi, k, clo, chi):
        return (np.append(ids, k), np.vstack([lo, np.full((1, B), clo)]), np.vstack([hi, np.full((1, B), chi)]))

    def finish(ids, lo, hi, r):
        if ids.shape[0] > MAX_TERMS:
            w = np.maximum(np.abs(lo), np.abs(hi)) * W(ids)[:, None]
            order = np.lexsort((ids, -w.max(1)))
            kept = np.sort(order[:MAX_TERMS])
            r = r + w[order[MAX_TERMS:]].sum(0)
            ids, lo, hi = ids[kept], lo[kept], hi[kept]
        return _VForm(ids, lo, hi, r * (1 + 1e-12) + 1e-300)

    dead = _last_reads(fx.tape)
    keep = {o[1] for o in fx.tape.outputs if o[0] == "t"} | {o[1] for o in forms_out or () if o[0] == "t"}
    with np.errstate(all="ignore"):
        for i, ins in enumerate(fx.instrs):
            for t in dead[i - 1] if i else ():  # forms are the memory: free them after their last read
                if t not in keep:
                    forms.pop(t, None)
            if section is not None and i not in section:
                continue
            at = i
            op, a, p = ins.op, ins.args, ins.params
            d = ins.dst[0]
            if op in ("add", "sub"):
                fa, fb = form(a[0]), form(a[1])
                ids, lo, hi = _vmerge(fa.ids, fa.lo, fa.hi, fb.ids, fb.lo, fb.hi, 1.0 if op == "add" else -1.0)
                r = fa.r + fb.r
                F = p["F"]
                for o, (kind, v) in zip(a, p["align"]):
                    if kind == "lit":
                        r = r + abs(v / 2.0 ** F - o[1])
                    elif v < 0:  # finer operand rounded to F
                        neg = not (o is a[0] or op == "add")
                        ids, lo, hi = add_sym(ids, lo, hi, new(half_ulp(F)), -1.0 if neg else 1.0,
                                              -1.0 if neg else 1.0)
                if p["s"] > 0:
                    ids, lo, hi = add_sym(ids, lo, hi, new(half_ulp(fx.temp_bits[d])), 1.0, 1.0)
            elif op == "neg":
                f = form(a[0])
                ids, lo, hi, r = f.ids, -f.hi, -f.lo, f.r
            elif op == "mul":
                if "lit" in p:
                    x, cst = (a[1], a[0]) if p["const_first"] else (a[0], a[1])
                    cv = cst[1]
                    fc = const_bits(cv)
                    lv = p["lit"] / 2.0 ** fc
                    ec = abs(lv - cv)
                    fxf = form(x)
                    lo, hi = _vscale(fxf, lv, lv)
                    ids = fxf.ids
                    r = fxf.r * abs(lv) + rmag(x) * ec
                else:
                    fa, fb = form(a[0]), form(a[1])
                    (alo, ahi), (blo, bhi) = rng(a[0]), rng(a[1])
                    l1, h1 = _vscale(fa, blo, bhi)
                    l2, h2 = _vscale(fb, alo, ahi)
                    ids, lo, hi = _vmerge(fa.ids, l1, h1, fb.ids, l2, h2)
                    r = fa.r * rmag(a[1]) + fb.r * rmag(a[0]) + fmag(fa) * fmag(fb)
                tz = 64
                if "lit" in p and p["lit"]:
                    tz = (abs(p["lit"]) & -abs(p["lit"])).bit_length() - 1
                if p["s"] > 0 and not ("lit" in p and p["s"] <= tz):
                    ids, lo, hi = add_sym(ids, lo, hi, new(half_ulp(fx.temp_bits[d])), 1.0, 1.0)
            elif op == "div":
                num, den = a
                dlo, dhi = rng(den)
                qlo, qhi = vec.lo[d], vec.hi[d]
                qmag = np.maximum(np.abs(qlo), np.abs(qhi))
                lo_den = np.minimum(np.abs(dlo), np.abs(dhi))
                fn, fd = form(num), form(den)
                ed = fmag(fd)
                i1, i2 = 1 / dlo, 1 / dhi
                ilo, ihi = np.minimum(i1, i2), np.maximum(i1, i2)
                m1, m2, m3, m4 = -qhi * ilo, -qhi * ihi, -qlo * ilo, -qlo * ihi
                olo = np.minimum(np.minimum(m1, m2), np.minimum(m3, m4))
                ohi = np.maximum(np.maximum(m1, m2), np.maximum(m3, m4))
                l1, h1 = _vscale(fn, ilo, ihi)
                l2, h2 = _vscale(fd, olo, ohi)
                ids, lo, hi = _vmerge(fn.ids, l1, h1, fd.ids, l2, h2)
                first = fmag(fn) + qmag * ed
                r = (fn.r + qmag * fd.r) / lo_den + first * ed / (lo_den * (lo_den - ed))
                if p["k"] < 0 and num[0] != "c":
                    r = r + half_ulp(fx.bits(num) + p["k"]) / lo_den
                if "lit" in p:
                    r = r + abs(p["lit"] / 2.0 ** p["lit_bits"] - num[1]) / lo_den
                ids, lo, hi = add_sym(ids, lo, hi, new(half_ulp(fx.temp_bits[d])), 1.0, 1.0)
            elif op == "sqrt":
                f = form(a[0])
                xlo, xhi = rng(a[0])
                ex = fmag(f)
                xl = np.maximum(xlo, 0.0)
                lin = xl > ex
                sl, sh = np.where(lin, xl, 1.0), np.where(lin, xhi, 1.0)
                lo, hi = _vscale(f, 1 / (2 * np.sqrt(sh)), 1 / (2 * np.sqrt(sl)))
                lo, hi = np.where(lin, lo, 0.0), np.where(lin, hi, 0.0)
                ids = f.ids
                r = np.where(lin, f.r / (2 * np.sqrt(sl)) + ex * ex / (8 * (sl - ex) ** 1.5), np.sqrt(ex))
                if p["k"] < 0:
                    r = r + math.sqrt(half_ulp(fx.bits(a[0]) + p["k"]))
                ids, lo, hi = add_sym(ids, lo, hi, new(half_ulp(fx.temp_bits[d])), 1.0, 1.0)
            elif op in ("sin", "cos", "sincos"):
                f = form(a[0])
                ex = fmag(f)
                xlo, xhi = rng(a[0])
                for dd, fn_ in zip(ins.dst, {"sin": ["sin"], "cos": ["cos"], "sincos": ["sin", "cos"]}[op]):
                    dlo_, dhi_ = _vi_trig(xlo, xhi, "cos" if fn_ == "sin" else "sin")
                    if fn_ == "cos":
                        dlo_, dhi_ = -dhi_, -dlo_
                    lo, hi = _vscale(f, dlo_, dhi_)
                    ids = f.ids
                    rr = f.r + ex * ex / 2 + TRIG_ERROR
                    fo = fx.temp_bits[dd]
                    if fo < 30:
                        ids, lo, hi = add_sym(ids, lo, hi, new(half_ulp(fo), dd), 1.0, 1.0)
                    forms[dd] = finish(ids, lo, hi, rr)
                    if mags_out is not None and dd in mags_out:
                        mags_out[dd] = fmag(forms[dd])
                continue
            else:  # pragma: no cover
                raise AssertionError(op)
            forms[d] = finish(ids, lo, hi, r)
            if mags_out is not None and d in mags_out:
                mags_out[d] = fmag(forms[d])
            if absorb is not None and d in absorb:
                absorb[d], forms[d] = forms[d], Z
    if forms_out is not None:
        for o in list(forms_out):
            forms_out[o] = form(o)
    if sites_out is not None:
        sites_out.extend(zip(site[1:], u[1:]))
    ua = np.array(u)
    for d_ in (forms_out, absorb):
        if d_ is not None:
            d_["u"] = ua.__getitem__  # the symbols' half ulps
    out = []
    for k, o in enumerate(fx.tape.outputs):
        if o[0] == "c":
            out.append(np.full(B, fx.out_error[k]))
        else:
            out.append(fmag(form(o)) * (1 + 1e-12))
        if detail is not None:
            f = form(o) if o[0] != "c" else Z
            detail.append((np.maximum(np.abs(f.lo), np.abs(f.hi)), W(f.ids) if f.ids.shape[0] else np.zeros(0), f.r,
                           np.array([origin[k] for k in f.ids.tolist()], dtype=np.int64)))
    return out


def rounding_statistics(fx: FixedProgram, vec: BoxRanges) -> list[dict]:
    """Why a worst-case bound exceeds the errors seen: per output, in the box of its
    largest first-order bound, the roundings that reach it (nonzero coefficient), that
    bound (sum |c_k| u_k + remainder) and the standard deviation the error would have if
    the roundings were independent and uniform in [-u_k, u_k] (sqrt(sum (c_k u_k)^2 / 3)).
    A sample of n errors rarely exceeds about 4 standard deviations (n ~ 1e4 to 1e5), so
    bound / (4 sigma) is the ratio to expect between the bound and the largest observed
    error when nothing aligns the roundings. Where the bound comes from: its share per
    tenth of the program (by instruction position) and the five largest roundings
    (instruction, op, coefficient, share)."""
    detail: list = []
    bounds = output_errors_boxes(fx, vec, detail)
    out = []
    n = max(len(fx.instrs), 1)
    for b, (c, u, r, org) in zip(bounds, detail):
        k = int(np.argmax(b))
        ck = c[:, k] * u if c.shape[0] else np.zeros(0)
        sigma = float(np.sqrt(np.sum(ck * ck) / 3))
        tenths = np.bincount(np.maximum(org, 0) * 10 // n, weights=ck, minlength=10)[:10] / max(float(b[k]), 1e-300)
        top = [{"instr": int(org[q]), "op": fx.instrs[org[q]].op if org[q] >= 0 else "input",
                "coefficient": float(c[q, k]), "share": float(ck[q] / b[k])} for q in np.argsort(-ck)[:5]]
        out.append({"roundings": int(np.count_nonzero(ck)), "bound": float(b[k]), "sigma": sigma,
                    "remainder": float(r[k]), "bound_over_4sigma": float(b[k] / (4 * sigma)) if sigma else None,
                    "share_by_tenth": [round(float(x), 4) for x in tenths], "top": top})
    return out


SPLIT_AT_SOLVE = True  # analysis.solve_error: a kernel ending in a hinted solve also gets the split bound

SPLIT_BUDGET = 1  # bisections where a box holds the largest bound: measured to gain <1% on the Stewart tube at 8x the time, off by default
SPLIT_ROUNDS = 6


def _box_errors(fx: FixedProgram, vec: BoxRanges, tight: bool, failed: list | None = None) -> np.ndarray:
    """(B, n_out): per box the smaller of the two sound bounds (CHUNK boxes at a time).
    With `failed` (a list): a (B,) mask appended per chunk, the boxes where the split at
    the solve gave no finite bound for some solution output."""
    if vec.n_boxes > CHUNK:
        return np.vstack([_box_errors(fx, vec.take(np.arange(j, min(j + CHUNK, vec.n_boxes))), tight, failed)
                          for j in range(0, vec.n_boxes, CHUNK)])
    parts = parallel.pieces(vec.n_boxes)
    if len(parts) > 1:  # on the cores (analysis.parallel)
        def one(i):
            f: list = []
            return _box_errors(fx, vec.take(np.arange(vec.n_boxes)[parts[i]]), tight, f), f
        done = parallel.run(one, len(parts))
        if failed is not None:
            failed.extend(x for _, f in done for x in f)
        return np.vstack([E for E, _ in done])
    _, plan = plan_errors(fx, vec)
    E = np.stack(plan, 1) if plan else np.zeros((vec.n_boxes, 0))
    if tight and E.shape[1]:
        cut = find_cut(fx.tape) if SPLIT_AT_SOLVE else None
        if cut is None:
            E = np.minimum(E, np.stack(output_errors_boxes(fx, vec), 1))
        else:
            whole, split = solve_errors_boxes(lambda v, **hooks: output_errors_boxes(fx, v, **hooks),
                                              fx.tape, vec, cut, lambda k: fx.in_error[k])
            E = np.minimum(E, np.minimum(np.stack(whole, 1), np.stack(split, 1)))
            if failed is not None:
                failed.append(split_failed(split, cut))
    return E


def bound_over_boxes(tape: Tape, hull: Ranges, boxes: list[Ranges], tight: bool = True,
                     budget: float = SPLIT_BUDGET) -> FixedProgram:
    """Formats from the hull of the domain; error bounds box by box with those formats
    (inside a small box the magnitudes that multiply errors, and the smallest divisors,
    are the box's own), the largest over the boxes reported: sound on the union. With
    `tight`, each box also gets the first-order error-form bound and the smaller of the
    two sound bounds is kept. When `boxes` come from analyse_domain (one vectorised
    analysis), the boxes that hold an output's largest bound are bisected along their
    widest input (relative to the domain) while that lowers the bound, up to `budget`
    times the boxes; the formats stay those of the hull (the halves lie inside it).
    Before that, where the split at the solve gives no bound on some box (A varies too
    much over it for one preconditioner, or its errors reach a pivot), boxes are cut
    along the inputs that move A most (solve_error.refine_for_solve), and the formats
    are planned again over the parts after the first round (their hull is narrower)."""
    vec = BoxRanges.from_list(tape, boxes if len(boxes) > 1 else [hull])
    fx = plan_fixed(tape, hull, boxes=vec if len(boxes) > 1 else None)
    state = {"fx": fx, "hull": hull}

    def bounds(v):
        failed: list = []
        E = _box_errors(state["fx"], v, tight, failed)
        return E, (np.concatenate(failed) if failed else np.zeros(v.n_boxes, dtype=bool))

    def replan(v):  # the parts still cover the domain: their hull encloses every temp, often tighter
        h, parts = state["hull"], v.hull()
        h = Ranges({t: iv & parts.temps[t] for t, iv in h.temps.items()}, h.inputs)
        old, new = state["fx"], plan_fixed(tape, h, boxes=v)
        state.update(fx=new, hull=h)
        return (new.in_bits, new.temp_bits, new.out_bits, new.instrs) != (old.in_bits, old.temp_bits, old.out_bits, old.instrs)

    vec, E = refine_for_solve(tape, vec, bounds, replan) if tight and SPLIT_AT_SOLVE else (vec, bounds(vec)[0])
    fx = state["fx"]
    can_split = len(boxes) > 1 and all(isinstance(r, BoxView) for r in boxes) and budget > 1
    cap = int(budget * vec.n_boxes)
    span = vec.in_hi.max(0) - vec.in_lo.min(0)
    for _ in range(SPLIT_ROUNDS if can_split else 0):
        worst = E.max(0)
        hot = sorted({int(np.argmax(E[:, j])) for j in range(E.shape[1]) if worst[j] > 0})
        hot = hot[:max(0, (cap - vec.n_boxes))]
        if not hot:
            break
        dims = np.argmax((vec.in_hi - vec.in_lo) / np.where(span > 0, span, np.inf), 1)
        halves = [h for b in hot for h in split_box(vec.in_lo[b], vec.in_hi[b], int(dims[b]))]
        sub = analyse_chunked(tape, np.array([h[0] for h in halves]), np.array([h[1] for h in halves]), True)
        if (sub.fail >= 0).any():
            break
        Es = _box_errors(fx, sub, tight)
        # a box is replaced by its halves only where no output's bound gets worse
        good = [j for j, b in enumerate(hot) if (np.maximum(Es[2 * j], Es[2 * j + 1]) <= E[b]).all()]
        if not good:
            break
        take = [hot[j] for j in good]
        pick = [i for j in good for i in (2 * j, 2 * j + 1)]
        sub, Es = sub.take(pick), Es[pick]
        vec = refine(vec, take, dims, analyse=lambda lo, hi, s=sub: s)
        rows, j, ts = [], 0, set(take)
        for b in range(E.shape[0]):
            if b in ts:
                rows += [Es[2 * j], Es[2 * j + 1]]
                j += 1
            else:
                rows.append(E[b])
        E = np.array(rows)
    fx.out_error = [float(x) for x in E.max(0)] if E.shape[0] else []
    return fx
