"""Error bounds for the single-precision kernels (IEEE binary32, round to nearest).

Standard model: every operation returns its exact result times (1 + d) with |d| <= u =
2**-24 (no underflow in these ranges; the bound adds the smallest normal to be safe), the
square root likewise, and mbforge's own sin/cos are within 1.5 ulp (see
templates/c/mathf.c.j2; 2 ulp are charged). Absolute bounds propagate through the tape
with the ranges of the exact values, so they are sound for inputs in the declared
ranges, versus exact arithmetic at the real (unrounded) inputs: each input's rounding
to float32 (relative 2**-24) is an initial error propagated like any other.

`float32_bounds_boxes` propagates magnitudes for every box of a BoxRanges at once
(BOUND_RULES; `float32_bounds` over one Ranges is it over one box), and
`float32_forms_boxes` keeps signed first-order error forms (FORM_RULES: analysis.forms,
one symbol per rounding) so that errors cancel where they do in the arithmetic. The c-float32 backend records the smallest of these sound bounds.
"""
from __future__ import annotations


import numpy as np

from ..lower.tape import Tape
from ..lower.tapeops import TAPE_OPS, Rules, run
from . import parallel, piececache, solve_error
from .forms import FormStore, VForm, quotient_factors, sqrt_form, trig_forms, vmerge, vscale
from .ranges import BoxRanges, Ranges
from .solve_error import find_cut, refine_for_solve, solve_errors_boxes, split_failed

U = 2.0 ** -24
TINY = 2.0 ** -126  # smallest normal float
TRIG_ULPS = 2.0
# mbforge's atan2f is within 4.33e-7 of atan2 of its float arguments (templates/c/mathf.c.j2)
ATAN2_ERROR = 8 * U
F32_TERMS = 96  # rounding symbols kept per error form (the rest go into the remainder)


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


class _Bounds:
    """What BOUND_RULES read and write: per temp its error bound (B,) over the boxes of vec.
    For an open tree's LDL^T solve (analysis.ldlback) also: override {temp: a bound on its
    error before its own rounding, proven otherwise}, den_floor {temp: a floor of its
    computed |value|} and local {temp: the error its instruction adds to exact operands}."""

    def __init__(self, vec):
        self.vec, self.B, self.err = vec, vec.n_boxes, {}
        self.rng, self.mag = vec.operand, vec.magnitude
        self.override: dict = {}
        self.den_floor: dict = {}
        self.local: dict = {}
        self.slack: dict = {}  # temp -> a bound on its computed value's distance from the exact (a cut pass)

    def e(self, o):
        kind, v = o
        if kind == "t":
            return self.err[v]
        if kind == "c":
            return np.full(self.B, abs(float(v)) * U)  # the literal is the nearest float
        return self.mag(o) * U + TINY  # the real input rounded to float32

    def e_lit(self, o):
        """o's error with every temp exact (a literal's or an input's own rounding)."""
        return 0.0 if o[0] == "t" else self.e(o)

    def set(self, ins, bound) -> None:
        res = self.mag(("t", ins.dst[0]))
        bound = np.where(np.isfinite(res), bound, np.inf)  # downstream of a divisor reaching 0
        for dd in ins.dst:  # sincos: both results have the bound
            self.err[dd] = bound

    def rounded(self, ins, pre, lit) -> None:
        """Its bound: pre (the operands' errors propagated) or, under an override, the
        override plus lit (pre with every temp exact), then the result's own rounding."""
        d = ins.dst[0]
        if d in self.override:
            pre = np.minimum(pre, self.override[d] + lit)
        # a cut pass (analysis.ababack, ldlback's bodies) bounds the errors from other inputs
        # than the exact ones: the rounding is of the value computed, within slack of the exact
        r = U * (_res(self, ins) + np.maximum(pre, self.slack.get(d, 0.0))) + TINY
        self.local[d] = lit + r
        self.set(ins, pre + r)


def _res(s: _Bounds, ins):
    return s.mag(("t", ins.dst[0]))


def _e_add(s: _Bounds, ins) -> None:  # add, sub
    a = ins.args
    s.rounded(ins, s.e(a[0]) + s.e(a[1]), s.e_lit(a[0]) + s.e_lit(a[1]))


def _e_neg(s: _Bounds, ins) -> None:
    s.set(ins, s.e(ins.args[0]))


def _e_mul(s: _Bounds, ins) -> None:
    a = ins.args

    def pre(ea, eb):
        return s.mag(a[0]) * eb + s.mag(a[1]) * ea + ea * eb

    ea, eb, la, lb = s.e(a[0]), s.e(a[1]), s.e_lit(a[0]), s.e_lit(a[1])
    s.rounded(ins, pre(ea, eb), pre(la, lb) + la * eb + ea * lb)


def _e_div(s: _Bounds, ins) -> None:
    a, res = ins.args, _res(s, ins)
    dlo, dhi = s.rng(a[1])
    lo = np.where((dlo <= 0) & (dhi >= 0), 0.0, np.minimum(np.abs(dlo), np.abs(dhi)))
    eb = s.e(a[1])
    # the computed divisor's smallest |value|: its range less its error, or a floor proven
    # of the computed value itself (an LDL^T pivot: analysis.ldlback)
    lo_comp = np.maximum(lo - eb, s.den_floor.get(a[1][1], 0.0) if a[1][0] == "t" else 0.0)
    bad = ~(lo_comp > 0)
    with np.errstate(all="ignore"):
        pre = np.where(bad, np.inf, (s.e(a[0]) + res * eb) / lo_comp)
        lit = np.where(bad, np.inf, (s.e_lit(a[0]) + res * s.e_lit(a[1])) / lo_comp)
    s.rounded(ins, pre, lit)


def _e_sqrt(s: _Bounds, ins) -> None:
    xlo, _ = s.rng(ins.args[0])
    lo = np.maximum(xlo, 0.0)

    def pre(ex):
        return np.where(lo > ex, ex / (np.sqrt(lo) + np.sqrt(np.maximum(lo - ex, 0.0))), np.sqrt(ex))

    s.rounded(ins, pre(s.e(ins.args[0])), pre(s.e_lit(ins.args[0])))


def _e_trig(s: _Bounds, ins) -> None:  # every destination (sin and cos of sincos) alike
    s.set(ins, s.e(ins.args[0]) + TRIG_ULPS * U * 1.0 + TINY)


def _e_atan2(s: _Bounds, ins) -> None:
    a = ins.args
    s.set(ins, atan2_error(s.e(a[0]), s.e(a[1]), *s.rng(a[0]), *s.rng(a[1])))


def _no_rule(tape, ins) -> str:
    return f"float32 error bound: no rule for {ins.op!r}"


BOUND_RULES = Rules({"add": _e_add, "sub": _e_add, "neg": _e_neg, "mul": _e_mul, "div": _e_div, "sqrt": _e_sqrt,
                     "sin": _e_trig, "cos": _e_trig, "sincos": _e_trig, "atan2": _e_atan2}, _no_rule)


def float32_bounds(tape: Tape, ranges: Ranges) -> list[float]:
    """The magnitude bound of every output over one Ranges (float32_bounds_boxes of it)."""
    return float32_bounds_boxes(tape, BoxRanges.from_list(tape, [ranges]))


def float32_bounds_boxes(tape: Tape, vec) -> list[float]:
    """The magnitude bound of every output for every box of a BoxRanges at once (numpy
    arrays over the boxes), the largest over the boxes per output: sound on their union,
    and never above the bound over the hull (each box's magnitudes are inside the hull's).
    An open tree's LDL^T solve (tape.hints.backward) gets its factor's errors bounded as a
    perturbation of M (analysis.ldlback), as the fixed-point plan does."""

    def bounds(s):
        with np.errstate(all="ignore"):
            run(tape, BOUND_RULES, s)

    s = None
    bw = getattr(tape.hints, "backward", None)
    if bw is not None:
        def hooks(s):
            return (lambda t: float(np.max(s.local[t])), lambda t: s.err[t],
                    lambda t: s.mag(t if isinstance(t, tuple) else ("t", t)))

        def again(s, override):  # the bounds again under other overrides (analysis.ababack)
            b = _Bounds(vec)
            b.override, b.den_floor, b.slack = override, s.den_floor, s.err
            bounds(b)
            return lambda t: b.err[t]
        s, _ = bw.iterate(lambda: _Bounds(vec), bounds, hooks, again, rel=U)  # none proven: op by op, as before
    if s is None:
        s = _Bounds(vec)
        bounds(s)
    return [float(s.e(o).max()) if o[0] != "c" else abs(float(o[1])) * U for o in tape.outputs]


def float32_forms_boxes(tape: Tape, vec) -> list[float]:
    """A tighter sound bound, box by box: first-order error forms (as fixerror's, one
    symbol per rounding, |d| <= U, its coefficient the range of the rounded value), so
    that errors reaching a value along two paths cancel by sign; second-order terms,
    the rounding of the errors themselves and underflow (TINY per operation) go into
    the remainder. Input rounding is a symbol per input. The largest over the boxes;
    a kernel ending in a hinted solve also gets solve_error's split bound, the smaller
    of the two kept per box."""
    cut = find_cut(tape) if solve_error.SPLIT_AT_SOLVE else None
    if cut is None:
        per = float32_forms_per_box(tape, vec)
    else:
        def piece(v):
            whole, split = solve_errors_boxes(lambda w, **hooks: float32_forms_per_box(tape, w, **hooks), tape, v,
                                              cut, lambda k: U * v.magnitude(("in", k)) + TINY)
            return np.stack([np.minimum(a, b) for a, b in zip(whole, split)], 1), split_failed(split, cut)

        def bounds(v):  # boxes where the split fails are cut, as for fixed point; pieces on the cores
            parts = [np.arange(v.n_boxes)[p] for p in parallel.pieces(v.n_boxes)]
            done = parallel.run(lambda i: piece(v.take(parts[i])), len(parts), v.n_boxes * len(tape.instrs),
                                lambda i: piececache.key(f"float32-forms {solve_error.SPLIT_AT_SOLVE}", tape, *piececache.ranges_parts(v.take(parts[i]))))
            return np.vstack([E for E, _ in done]), np.concatenate([f for _, f in done])
        _, E = refine_for_solve(tape, vec, bounds)
        per = list(E.T)
    out = []
    for o, v in zip(tape.outputs, per):
        out.append(abs(float(o[1])) * U if o[0] == "c" else float(np.where(np.isnan(v), np.inf, v).max()))
    return out



class _Forms(FormStore):
    """What FORM_RULES read and write: the forms of the temps over the boxes of vec, and
    the count of rounding symbols (numbered below the inputs', so ids stay sorted). See
    float32_forms_per_box for the hooks."""

    def __init__(self, tape: Tape, vec, exact, mags_out, absorb):
        B = self.B = vec.n_boxes
        self.vec, self.exact, self.mags_out, self.absorb = vec, exact, mags_out, absorb
        self.zero = np.zeros(B)
        self.Z = VForm(np.zeros(0, dtype=np.int64), np.zeros((0, B)), np.zeros((0, B)), self.zero)
        self.count = 0
        self.forms: dict = {}
        self.rng, self.rmag = vec.operand, vec.magnitude
        self.terms = F32_TERMS
        self.in_forms = []
        for k in range(len(tape.inputs)):  # the real input rounded to float32
            lo, hi = self.rng(("in", k))
            self.in_forms.append(VForm(np.array([k], dtype=np.int64), lo[None, :].copy(), hi[None, :].copy(),
                                       np.full(B, TINY)))

    def form(self, o) -> VForm:
        kind, v = o
        if o in self.exact:
            return self.Z
        if kind == "t":
            return self.forms[v]
        if kind == "in":
            return self.in_forms[v]
        return VForm(self.Z.ids, self.Z.lo, self.Z.hi, np.full(self.B, abs(float(v)) * U))  # the nearest float

    @staticmethod
    def fmag(f: VForm):
        if not f.ids.shape[0]:
            return f.r
        return np.maximum(np.abs(f.lo), np.abs(f.hi)).sum(0) * U + f.r

    def scaled(self, f: VForm, a, b):
        """f times a value x in [a, b] (per box): f m with m the midpoint keeps f's symbols;
        f (x - m) is one new symbol of size |f| r, r the half-width. That term is one value
        wherever it flows, so it keeps its sign through what follows (a rate or an
        acceleration spanning its whole range makes x - m most of x), where intervals of
        coefficients [c a, c b] would turn into radii that add up."""
        m = (a + b) / 2
        rad = np.maximum(b - m, m - a) * (1 + 1e-15)
        lo, hi = vscale(f, m, m)
        if not f.ids.shape[0] or not (rad > 0).any():
            return f.ids, lo, hi
        w = np.maximum(np.abs(f.lo), np.abs(f.hi)).sum(0) * rad * (1 + 1e-15)
        self.count += 1  # below every symbol so far: the ids stay sorted
        ids = np.concatenate([[-self.count], f.ids])
        return ids, np.concatenate((w[None, :], lo)), np.concatenate((w[None, :], hi))

    @staticmethod
    def row_sizes(ids, lo, hi):
        """|c_k|, times U: a row's relative rounding (FormStore.store keeps the F32_TERMS largest)."""
        return np.maximum(np.abs(lo), np.abs(hi)), U

    def rounded(self, d: int, ids, lo, hi, r, pre) -> None:
        """store + the rounding of the exact value of d (in [vlo, vhi]) with its error so
        far `pre`. The rounding v e (|e| <= U) is written M e' with M = max |v| over the
        box and |e'| = |v e| / M <= U: one point coefficient, which keeps its sign through
        what follows (as a fixed-point rounding's does), where [vlo, vhi] across 0 would
        lose it."""
        vlo, vhi = self.vec.lo[d], self.vec.hi[d]
        self.count += 1
        # the new rounding symbol is below every symbol so far: its id and its row both go first, so
        # the ids stay sorted and each row stays with its symbol (an id appended last beside a row put
        # first paired every symbol with its neighbour's coefficients, 2026-12-02 .. 12-07)
        ids = np.concatenate(([-self.count], ids))
        m = np.maximum(np.abs(vlo), np.abs(vhi))
        lo = np.concatenate((m[None, :], lo))
        hi = np.concatenate((m[None, :], hi))
        r = r + U * pre + TINY
        self.store(d, ids, lo, hi, np.where(np.isfinite(vlo) & np.isfinite(vhi), r, np.inf))


def _g_add(s: _Forms, ins) -> None:  # add, sub
    fa, fb = s.form(ins.args[0]), s.form(ins.args[1])
    ids, lo, hi = vmerge(fa.ids, fa.lo, fa.hi, fb.ids, fb.lo, fb.hi, 1.0 if ins.op == "add" else -1.0)
    s.rounded(ins.dst[0], ids, lo, hi, fa.r + fb.r, s.fmag(fa) + s.fmag(fb))


def _g_neg(s: _Forms, ins) -> None:  # exact, and not handed to the hooks
    f = s.form(ins.args[0])
    s.forms[ins.dst[0]] = VForm(f.ids, -f.hi, -f.lo, f.r)


def _g_mul(s: _Forms, ins) -> None:
    a = ins.args
    fa, fb = s.form(a[0]), s.form(a[1])
    (alo, ahi), (blo, bhi) = s.rng(a[0]), s.rng(a[1])
    ids, lo, hi = vmerge(*s.scaled(fa, blo, bhi), *s.scaled(fb, alo, ahi))
    ma, mb = s.fmag(fa), s.fmag(fb)
    r = fa.r * s.rmag(a[1]) + fb.r * s.rmag(a[0]) + ma * mb
    s.rounded(ins.dst[0], ids, lo, hi, r, ma * s.rmag(a[1]) + mb * s.rmag(a[0]) + ma * mb)


def _g_div(s: _Forms, ins) -> None:
    (num, den), d = ins.args, ins.dst[0]
    dlo, dhi = s.rng(den)
    qlo, qhi = s.vec.lo[d], s.vec.hi[d]
    qmag = np.maximum(np.abs(qlo), np.abs(qhi))
    lo_den = np.where((dlo <= 0) & (dhi >= 0), 0.0, np.minimum(np.abs(dlo), np.abs(dhi)))
    fn, fd = s.form(num), s.form(den)
    ed = s.fmag(fd)
    ilo, ihi, olo, ohi = quotient_factors(dlo, dhi, qlo, qhi)
    ids, lo, hi = vmerge(*s.scaled(fn, ilo, ihi), *s.scaled(fd, olo, ohi))
    first = s.fmag(fn) + qmag * ed
    r = (fn.r + qmag * fd.r) / lo_den + first * ed / (lo_den * (lo_den - ed))
    r = np.where(lo_den > ed, r, np.inf)
    s.rounded(d, ids, lo, hi, r, np.where(lo_den > ed, first / (lo_den - ed), np.inf))


def _g_sqrt(s: _Forms, ins) -> None:
    f = s.form(ins.args[0])
    xlo, xhi = s.rng(ins.args[0])
    ex = s.fmag(f)
    lo, hi, r, lin, sl = sqrt_form(f, xlo, xhi, ex)
    pre = np.where(lin, ex / (np.sqrt(sl) + np.sqrt(np.maximum(sl - ex, 0.0))), np.sqrt(ex))
    s.rounded(ins.dst[0], f.ids, lo, hi, r, pre)


def _g_trig(s: _Forms, ins) -> None:  # sin, cos, sincos
    f = s.form(ins.args[0])
    ex = s.fmag(f)
    xlo, xhi = s.rng(ins.args[0])
    for dd, (lo, hi) in zip(ins.dst, trig_forms(f, xlo, xhi, TAPE_OPS[ins.op].results)):
        # mbforge's sinf/cosf: within TRIG_ULPS ulp of the float argument's value
        s.store(dd, f.ids, lo, hi, f.r + ex * ex / 2 + TRIG_ULPS * U + TINY)


def _g_atan2(s: _Forms, ins) -> None:  # its error a remainder of its own (the forms' signs are not carried)
    a, d = ins.args, ins.dst[0]
    r = atan2_error(s.fmag(s.form(a[0])), s.fmag(s.form(a[1])), *s.rng(a[0]), *s.rng(a[1]))
    vlo, vhi = s.vec.lo[d], s.vec.hi[d]
    s.store(d, s.Z.ids, s.Z.lo, s.Z.hi, np.where(np.isfinite(vlo) & np.isfinite(vhi), r, np.inf))


FORM_RULES = Rules({"add": _g_add, "sub": _g_add, "neg": _g_neg, "mul": _g_mul, "div": _g_div, "sqrt": _g_sqrt,
                    "sin": _g_trig, "cos": _g_trig, "sincos": _g_trig, "atan2": _g_atan2}, _no_rule)


def float32_forms_per_box(tape: Tape, vec, *, section: set | None = None, exact: frozenset = frozenset(),
                          forms_out: dict | None = None, mags_out: dict | None = None,
                          absorb: dict | None = None) -> list:
    """float32_forms_boxes' bound per box: [array (B,) per output]. The keywords are
    fixerror.output_errors_boxes' (solve_error's split at a solve)."""
    s = _Forms(tape, vec, exact, mags_out, absorb)
    # a form is dropped after its last reader: the live forms, not all of them, bound the
    # memory (the Stewart reduced kernel's 7,000 forms of 96 terms over 1,000 boxes: 10 GB)
    keep = {o[1] for o in tape.outputs if o[0] == "t"} | {o[1] for o in forms_out or () if o[0] == "t"}

    def release(t):
        if t not in keep:
            s.forms.pop(t, None)
    with np.errstate(all="ignore"):
        run(tape, FORM_RULES, s, section=section, release=release)
    if forms_out is not None:
        for o in list(forms_out):
            forms_out[o] = s.form(o)
    for d_ in (forms_out, absorb):
        if d_ is not None:
            d_["u"] = lambda ids: np.full(ids.shape[0], U)
    out = []
    for o in tape.outputs:
        if o[0] == "c":
            out.append(np.full(s.B, abs(float(o[1])) * U))
            continue
        v = s.fmag(s.form(o)) * (1 + 1e-12)
        out.append(np.where(np.isnan(v), np.inf, v))  # nan: an unbounded box
    return out
