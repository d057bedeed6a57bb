"""Error bounds for the single-precision kernels (IEEE binary32, round to nearest).

Standard model: every operation returns its exact result times (1 + d) with |d| <= u =
2**-24 (no underflow in these ranges; the bound adds the smallest normal to be safe), the
square root likewise, and mbforge's own sin/cos are within 1.5 ulp (see
templates/c/mathf.c.j2; 2 ulp are charged). Absolute bounds propagate through the tape
with the ranges of the exact values, so they are sound for inputs in the declared
ranges, versus exact arithmetic at the real (unrounded) inputs: each input's rounding
to float32 (relative 2**-24) is an initial error propagated like any other.

`float32_bounds` propagates magnitudes over one Ranges; `float32_bounds_boxes` does the
same for every box of a BoxRanges at once, and `float32_forms_boxes` keeps signed
first-order error forms (fixerror's, one symbol per rounding) so that errors cancel where
they do in the arithmetic. The c-float32 backend records the smallest of these sound bounds.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.atom import ExpressionError
from ..lower.tape import Tape
from .ranges import Ranges, _last_reads

U = 2.0 ** -24
TINY = 2.0 ** -126  # smallest normal float
TRIG_ULPS = 2.0
# mbforge's atan2f is within 4.33e-7 of atan2 of its float arguments (templates/c/mathf.c.j2)
ATAN2_ERROR = 8 * U
F32_TERMS = 96  # rounding symbols kept per error form (the rest go into the remainder)


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


def atan2_error(ey, ex, ylo, yhi, xlo, xhi):
    """(arrays) How far atan2 of float arguments within ey, ex of exact ones in the box can
    be from the exact atan2, mbforge's own rounding included: the angle's gradient is 1 / r,
    so sqrt(ey^2 + ex^2) / (the box's distance to the origin less it), provided the box
    widened by the errors holds neither the origin nor a piece of the branch cut (x < 0,
    y = 0) with y < 0 (there the angle jumps by 2 pi): inf otherwise."""
    with np.errstate(all="ignore"):
        d = np.hypot(ey, ex)
        gy = np.where((ylo - ey <= 0) & (yhi + ey >= 0), 0.0, np.minimum(np.abs(ylo), np.abs(yhi)) - ey)
        gx = np.where((xlo - ex <= 0) & (xhi + ex >= 0), 0.0, np.minimum(np.abs(xlo), np.abs(xhi)) - ex)
        r = np.hypot(np.maximum(gy, 0.0), np.maximum(gx, 0.0))
        cut = (xlo - ex < 0) & (ylo - ey < 0) & (yhi + ey >= 0)
        bad = ~(r > 0) | cut | ~np.isfinite(d)
        return np.where(bad, np.inf, d / np.where(bad, 1.0, r) * (1 + 1e-12) + ATAN2_ERROR + TINY)


def _e_atan2(a, res, e, ranges):
    iy, ix = ranges.of(a[0]), ranges.of(a[1])
    return float(atan2_error(np.array(e(a[0])), np.array(e(a[1])), iy.lo, iy.hi, ix.lo, ix.hi))


_RULES = {"add": _e_add, "sub": _e_add, "neg": _e_neg, "mul": _e_mul, "div": _e_div, "sqrt": _e_sqrt,
          "sin": _e_trig, "cos": _e_trig, "sincos": _e_trig, "atan2": _e_atan2}


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

    rng, mag = vec.operand, vec.magnitude

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
            elif op == "atan2":
                bound = atan2_error(e(a[0]), e(a[1]), *rng(a[0]), *rng(a[1]))
            else:
                raise ExpressionError(f"float32 error bound: no rule for {op!r}")
            bound = np.where(np.isfinite(res), bound, np.inf)  # downstream of a divisor reaching 0
            for dd in ins.dst:
                err[dd] = bound
    out = []
    for o in tape.outputs:
        out.append(float(e(o).max()) if o[0] != "c" else abs(float(o[1])) * U)
    return out


def float32_forms_boxes(tape: Tape, vec) -> list[float]:
    """A tighter sound bound, box by box: first-order error forms (as fixerror's, one
    symbol per rounding, |d| <= U, its coefficient the range of the rounded value), so
    that errors reaching a value along two paths cancel by sign; second-order terms,
    the rounding of the errors themselves and underflow (TINY per operation) go into
    the remainder. Input rounding is a symbol per input. The largest over the boxes;
    a kernel ending in a hinted solve also gets solve_error's split bound, the smaller
    of the two kept per box."""
    from . import fixerror, parallel
    from .solve_error import find_cut, refine_for_solve, solve_errors_boxes, split_failed
    cut = find_cut(tape) if fixerror.SPLIT_AT_SOLVE else None
    if cut is None:
        per = float32_forms_per_box(tape, vec)
    else:
        def piece(v):
            whole, split = solve_errors_boxes(lambda w, **hooks: float32_forms_per_box(tape, w, **hooks), tape, v,
                                              cut, lambda k: U * v.magnitude(("in", k)) + TINY)
            return np.stack([np.minimum(a, b) for a, b in zip(whole, split)], 1), split_failed(split, cut)

        def bounds(v):  # boxes where the split fails are cut, as for fixed point; pieces on the cores
            parts = parallel.pieces(v.n_boxes)
            done = parallel.run(lambda i: piece(v.take(np.arange(v.n_boxes)[parts[i]])), len(parts))
            return np.vstack([E for E, _ in done]), np.concatenate([f for _, f in done])
        _, E = refine_for_solve(tape, vec, bounds)
        per = list(E.T)
    out = []
    for o, v in zip(tape.outputs, per):
        out.append(abs(float(o[1])) * U if o[0] == "c" else float(np.where(np.isnan(v), np.inf, v).max()))
    return out


def float32_forms_per_box(tape: Tape, vec, *, section: set | None = None, exact: frozenset = frozenset(),
                          forms_out: dict | None = None, mags_out: dict | None = None,
                          absorb: dict | None = None) -> list:
    """float32_forms_boxes' bound per box: [array (B,) per output]. The keywords are
    fixerror.output_errors_boxes' (solve_error's split at a solve)."""
    from .fixerror import _VForm, _vmerge, _vscale  # (fixerror imports nothing of this module)

    B = vec.n_boxes
    zero = np.zeros(B)
    Z = _VForm(np.zeros(0, dtype=np.int64), np.zeros((0, B)), np.zeros((0, B)), zero)
    count = [0]
    forms: dict = {}

    rng, rmag = vec.operand, vec.magnitude

    def fmag(f):
        if not f.ids.shape[0]:
            return f.r
        return np.maximum(np.abs(f.lo), np.abs(f.hi)).sum(0) * U + f.r

    def rounding(ids, lo, hi, r, pre, vlo, vhi):
        """+ the rounding of a value in [vlo, vhi] (exact) + pre (its error so far). The
        rounding v d (|d| <= U) is written M d' with M = max |v| over the box and |d'| =
        |v d| / M <= U: one point coefficient, which keeps its sign through what follows
        (as a fixed-point rounding's does), where [vlo, vhi] across 0 would lose it."""
        count[0] += 1
        ids = np.append(ids, -count[0])  # rounding symbols below the inputs' (kept sorted)
        m = np.maximum(np.abs(vlo), np.abs(vhi))
        lo = np.vstack([m[None, :], lo])
        hi = np.vstack([m[None, :], hi])
        order = np.argsort(ids, kind="stable")
        return ids[order], lo[order], hi[order], r + U * pre + TINY

    def scaled(f, a, b):
        """f times a value x in [a, b] (per box): f m with m the midpoint keeps f's symbols;
        f (x - m) is one new symbol of size |f| r, r the half-width. That term is one value
        wherever it flows, so it keeps its sign through what follows (a rate or an
        acceleration spanning its whole range makes x - m most of x), where intervals of
        coefficients [c a, c b] would turn into radii that add up."""
        m = (a + b) / 2
        rad = np.maximum(b - m, m - a) * (1 + 1e-15)
        lo, hi = _vscale(f, m, m)
        if not f.ids.shape[0] or not (rad > 0).any():
            return f.ids, lo, hi
        w = np.maximum(np.abs(f.lo), np.abs(f.hi)).sum(0) * rad * (1 + 1e-15)
        count[0] += 1  # below every symbol so far: the ids stay sorted
        return np.concatenate([[-count[0]], f.ids]), np.vstack([w[None, :], lo]), np.vstack([w[None, :], hi])

    def finish(ids, lo, hi, r):
        if ids.shape[0] > F32_TERMS:
            w = np.maximum(np.abs(lo), np.abs(hi))
            order = np.lexsort((ids, -w.max(1)))
            kept = np.sort(order[:F32_TERMS])
            r = r + w[order[F32_TERMS:]].sum(0) * U
            ids, lo, hi = ids[kept], lo[kept], hi[kept]
        return _VForm(ids, lo, hi, r * (1 + 1e-12) + 1e-300)

    in_forms = []
    for k in range(len(tape.inputs)):  # the real input rounded to float32
        lo, hi = rng(("in", k))
        in_forms.append(_VForm(np.array([k], dtype=np.int64), lo[None, :].copy(), hi[None, :].copy(),
                               np.full(B, TINY)))

    def form(o):
        kind, v = o
        if o in exact:
            return Z
        if kind == "t":
            return forms[v]
        if kind == "in":
            return in_forms[v]
        return _VForm(Z.ids, Z.lo, Z.hi, np.full(B, abs(float(v)) * U))  # the nearest float

    def _handed(d):
        if mags_out is not None and d in mags_out:
            mags_out[d] = fmag(forms[d])
        if absorb is not None and d in absorb:
            absorb[d], forms[d] = forms[d], Z

    inf = np.full(B, np.inf)
    # a form is dropped after its last reader: the live forms, not all of them, bound the
    # memory (the Stewart reduced kernel's 7,000 forms of 96 terms over 1,000 boxes: 10 GB)
    dead = _last_reads(tape)
    keep = {o[1] for o in tape.outputs if o[0] == "t"} | {o[1] for o in forms_out or () if o[0] == "t"}
    with np.errstate(all="ignore"):
        for i, ins in enumerate(tape.instrs):
            for t in dead[i - 1] if i else ():
                if t not in keep:
                    forms.pop(t, None)
            if section is not None and i not in section:
                continue
            op, a = ins.op, ins.args
            d = ins.dst[0]
            vlo, vhi = vec.lo[d], vec.hi[d]
            if op in ("add", "sub"):
                fa, fb = form(a[0]), form(a[1])
                ids, lo, hi = _vmerge(fa.ids, fa.lo, fa.hi, fb.ids, fb.lo, fb.hi, 1.0 if op == "add" else -1.0)
                r = fa.r + fb.r
                pre = fmag(fa) + fmag(fb)
            elif op == "neg":
                f = form(a[0])
                forms[d] = _VForm(f.ids, -f.hi, -f.lo, f.r)
                continue
            elif op == "mul":
                fa, fb = form(a[0]), form(a[1])
                (alo, ahi), (blo, bhi) = rng(a[0]), rng(a[1])
                ids, lo, hi = _vmerge(*scaled(fa, blo, bhi), *scaled(fb, alo, ahi))
                ma, mb = fmag(fa), fmag(fb)
                r = fa.r * rmag(a[1]) + fb.r * rmag(a[0]) + ma * mb
                pre = ma * rmag(a[1]) + mb * rmag(a[0]) + ma * mb
            elif op == "div":
                num, den = a
                dlo, dhi = rng(den)
                qlo, qhi = vlo, vhi
                qmag = np.maximum(np.abs(qlo), np.abs(qhi))
                lo_den = np.where((dlo <= 0) & (dhi >= 0), 0.0, np.minimum(np.abs(dlo), np.abs(dhi)))
                fn, fd = form(num), form(den)
                ed = fmag(fd)
                i1, i2 = 1 / dlo, 1 / dhi
                ilo, ihi = np.minimum(i1, i2), np.maximum(i1, i2)
                m1, m2, m3, m4 = -qhi * ilo, -qhi * ihi, -qlo * ilo, -qlo * ihi
                olo = np.minimum(np.minimum(m1, m2), np.minimum(m3, m4))
                ohi = np.maximum(np.maximum(m1, m2), np.maximum(m3, m4))
                ids, lo, hi = _vmerge(*scaled(fn, ilo, ihi), *scaled(fd, olo, ohi))
                first = fmag(fn) + qmag * ed
                r = (fn.r + qmag * fd.r) / lo_den + first * ed / (lo_den * (lo_den - ed))
                r = np.where(lo_den > ed, r, inf)
                pre = np.where(lo_den > ed, first / (lo_den - ed), inf)
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
                pre = np.where(lin, ex / (np.sqrt(sl) + np.sqrt(np.maximum(sl - ex, 0.0))), np.sqrt(ex))
            elif op in ("sin", "cos", "sincos"):
                from .ranges import _vi_trig

                f = form(a[0])
                ex = fmag(f)
                xlo, xhi = rng(a[0])
                for dd, fn_ in zip(ins.dst, {"sin": ["sin"], "cos": ["cos"], "sincos": ["sin", "cos"]}[op]):
                    dlo_, dhi_ = _vi_trig(xlo, xhi, "cos" if fn_ == "sin" else "sin")
                    if fn_ == "cos":
                        dlo_, dhi_ = -dhi_, -dlo_
                    lo, hi = _vscale(f, dlo_, dhi_)
                    # mbforge's sinf/cosf: within TRIG_ULPS ulp of the float argument's value
                    rr = f.r + ex * ex / 2 + TRIG_ULPS * U + TINY
                    forms[dd] = finish(f.ids, lo, hi, rr)
                    _handed(dd)
                continue
            elif op == "atan2":  # its error a remainder of its own (the forms' signs are not carried)
                r = atan2_error(fmag(form(a[0])), fmag(form(a[1])), *rng(a[0]), *rng(a[1]))
                forms[d] = finish(Z.ids, Z.lo, Z.hi, np.where(np.isfinite(vlo) & np.isfinite(vhi), r, np.inf))
                _handed(d)
                continue
            else:
                raise ExpressionError(f"float32 error bound: no rule for {op!r}")
            ids, lo, hi, r = rounding(ids, lo, hi, r, pre, vlo, vhi)
            r = np.where(np.isfinite(vlo) & np.isfinite(vhi), r, np.inf)
            forms[d] = finish(ids, lo, hi, r)
            _handed(d)
    if forms_out is not None:
        for o in list(forms_out):
            forms_out[o] = form(o)
    for d_ in (forms_out, absorb):
        if d_ is not None:
            d_["u"] = lambda ids: np.full(ids.shape[0], U)
    out = []
    for o in tape.outputs:
        if o[0] == "c":
            out.append(np.full(B, abs(float(o[1])) * U))
            continue
        v = fmag(form(o)) * (1 + 1e-12)
        out.append(np.where(np.isnan(v), np.inf, v))  # nan: an unbounded box
    return out
