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
error bounds for all boxes at once (numpy arrays over the boxes: fixedpoint's PLAN_RULES
with the formats kept, and this module's FORM_RULES, both run by lower.tapeops.run), per
box the smaller of the magnitude bound and the error-form bound, the largest over the boxes reported. Boxes that hold the
largest bound of an output are bisected while that lowers it (within a budget).
"""
from __future__ import annotations

import math

import numpy as np

from ..lower.tape import Tape
from ..lower.tapeops import TAPE_OPS, Rules, run
from . import parallel, piececache, solve_error
from .fixedpoint import TRIG_ERROR, FixedProgram, const_bits, half_ulp, plan_errors, plan_fixed
from .forms import FormStore, VForm, quotient_factors, sqrt_form, trig_forms, vmerge, vscale
from .ranges import CHUNK, BoxRanges, BoxView, Ranges, analyse_chunked, refine, split_box
from .solve_error import find_cut, refine_for_solve, solve_errors_boxes, split_failed

# error forms keep this many rounding symbols (the largest), the rest join the remainder:
# a rounding that reaches an output along several paths cancels by sign only while it is
# kept. The Stewart reduced kernel on its heave tube: 40 terms, bounds 3.0e-5 .. 2.4e-4 N
# (92% remainder); 400: 1.1e-5 .. 5.7e-5 N, 14 s -> 15 s of generation; 1000: no tighter.
MAX_TERMS = 400


class _Forms(FormStore):
    """What FORM_RULES read and write: the forms of the temps (arrays over the boxes of
    vec) and the rounding symbols (u: half ulps; origin: instruction index, -1 an
    input's; site: the temp each is added to). See output_errors_boxes for the hooks."""

    def __init__(self, fx: FixedProgram, vec: BoxRanges, exact, mags_out, absorb):
        B = self.B = vec.n_boxes
        self.fx, self.vec, self.exact, self.mags_out, self.absorb = fx, vec, exact, mags_out, absorb
        self.u: list[float] = [0.0]
        self.origin: list[int] = [-1]
        self.site: list = [None]
        self.at = -1
        self.index = {ins.dst: i for i, ins in enumerate(fx.instrs)}
        self.zero = np.zeros(B)
        self.Z = VForm(np.zeros(0, dtype=np.int64), np.zeros((0, B)), np.zeros((0, B)), self.zero)
        self.in_forms = [self.one(self.new(e)) for e in fx.in_error]
        self.forms: dict = {}
        self.rng, self.rmag = vec.operand, vec.magnitude
        self.terms = MAX_TERMS

    def new(self, mag: float, dst: int | None = None) -> int:
        self.u.append(mag)
        self.origin.append(self.at)
        self.site.append(None if self.at < 0 else self.fx.instrs[self.at].dst[0] if dst is None else dst)
        return len(self.u) - 1

    def one(self, k) -> VForm:
        return VForm(np.array([k], dtype=np.int64), np.ones((1, self.B)), np.ones((1, self.B)), self.zero)

    def form(self, o) -> VForm:
        if o in self.exact:
            return self.Z
        return self.forms[o[1]] if o[0] == "t" else self.in_forms[o[1]] if o[0] == "in" else self.Z

    def W(self, ids):
        return np.array([self.u[k] for k in ids.tolist()])

    def fmag(self, f: VForm):
        return f.mag(self.W(f.ids))

    def rounded(self, ids, lo, hi, mag: float, dst: int | None = None, sign: float = 1.0):
        """+ a rounding of half ulp `mag` (its own symbol, coefficient sign)."""
        k = self.new(mag, dst)
        return (np.append(ids, k), np.vstack([lo, np.full((1, self.B), sign)]),
                np.vstack([hi, np.full((1, self.B), sign)]))

    def row_sizes(self, ids, lo, hi):
        """|c_k| u_k: a row's absolute error (FormStore.store keeps the MAX_TERMS largest)."""
        return np.maximum(np.abs(lo), np.abs(hi)) * self.W(ids)[:, None], 1.0


def _f_add(s: _Forms, ins) -> None:  # add, sub
    a, p = ins.args, ins.params
    fa, fb = s.form(a[0]), s.form(a[1])
    ids, lo, hi = vmerge(fa.ids, fa.lo, fa.hi, fb.ids, fb.lo, fb.hi, 1.0 if ins.op == "add" else -1.0)
    r = fa.r + fb.r
    F = p["F"]
    for o, (kind, v) in zip(a, p["align"]):
        if kind == "lit":
            r = r + abs(v / 2.0 ** F - o[1])
        elif v < 0:  # finer operand rounded to F
            neg = not (o is a[0] or ins.op == "add")
            ids, lo, hi = s.rounded(ids, lo, hi, half_ulp(F), sign=-1.0 if neg else 1.0)
    if p["s"] > 0:
        ids, lo, hi = s.rounded(ids, lo, hi, half_ulp(s.fx.temp_bits[ins.dst[0]]))
    s.store(ins.dst[0], ids, lo, hi, r)


def _f_neg(s: _Forms, ins) -> None:
    f = s.form(ins.args[0])
    s.store(ins.dst[0], f.ids, -f.hi, -f.lo, f.r)


def _f_mul(s: _Forms, ins) -> None:
    a, p = ins.args, ins.params
    if "lit" in p:
        x, cst = (a[1], a[0]) if p["const_first"] else (a[0], a[1])
        cv = cst[1]
        lv = p["lit"] / 2.0 ** const_bits(cv)
        fxf = s.form(x)
        lo, hi = vscale(fxf, lv, lv)
        ids, r = fxf.ids, fxf.r * abs(lv) + s.rmag(x) * abs(lv - cv)
    else:
        fa, fb = s.form(a[0]), s.form(a[1])
        (alo, ahi), (blo, bhi) = s.rng(a[0]), s.rng(a[1])
        l1, h1 = vscale(fa, blo, bhi)
        l2, h2 = vscale(fb, alo, ahi)
        ids, lo, hi = vmerge(fa.ids, l1, h1, fb.ids, l2, h2)
        r = fa.r * s.rmag(a[1]) + fb.r * s.rmag(a[0]) + s.fmag(fa) * s.fmag(fb)
    tz = (abs(p["lit"]) & -abs(p["lit"])).bit_length() - 1 if p.get("lit") else 64
    if p["s"] > 0 and not ("lit" in p and p["s"] <= tz):  # the literal's zero bits absorb s <= tz
        ids, lo, hi = s.rounded(ids, lo, hi, half_ulp(s.fx.temp_bits[ins.dst[0]]))
    s.store(ins.dst[0], ids, lo, hi, r)


def _f_div(s: _Forms, ins) -> None:
    (num, den), p, d = ins.args, ins.params, ins.dst[0]
    dlo, dhi = s.rng(den)
    qlo, qhi = s.vec.lo[d], s.vec.hi[d]
    qmag = np.maximum(np.abs(qlo), np.abs(qhi))
    lo_den = np.minimum(np.abs(dlo), np.abs(dhi))
    fn, fd = s.form(num), s.form(den)
    ed = s.fmag(fd)
    ilo, ihi, olo, ohi = quotient_factors(dlo, dhi, qlo, qhi)
    l1, h1 = vscale(fn, ilo, ihi)
    l2, h2 = vscale(fd, olo, ohi)
    ids, lo, hi = vmerge(fn.ids, l1, h1, fd.ids, l2, h2)
    first = s.fmag(fn) + qmag * ed
    r = (fn.r + qmag * fd.r) / lo_den + first * ed / (lo_den * (lo_den - ed))
    r = np.where(lo_den > ed, r, np.inf)  # the divisor's error reaches 0: no first-order bound
    if p["k"] < 0 and num[0] != "c":
        r = r + half_ulp(s.fx.bits(num) + p["k"]) / lo_den
    if "lit" in p:
        r = r + abs(p["lit"] / 2.0 ** p["lit_bits"] - num[1]) / lo_den
    ids, lo, hi = s.rounded(ids, lo, hi, half_ulp(s.fx.temp_bits[d]))
    s.store(d, ids, lo, hi, r)


def _f_sqrt(s: _Forms, ins) -> None:
    f = s.form(ins.args[0])
    xlo, xhi = s.rng(ins.args[0])
    lo, hi, r, _, _ = sqrt_form(f, xlo, xhi, s.fmag(f))
    if ins.params["k"] < 0:
        r = r + math.sqrt(half_ulp(s.fx.bits(ins.args[0]) + ins.params["k"]))
    ids, lo, hi = s.rounded(f.ids, lo, hi, half_ulp(s.fx.temp_bits[ins.dst[0]]))
    s.store(ins.dst[0], ids, lo, hi, r)


def _f_trig(s: _Forms, ins) -> None:  # sin, cos, sincos
    f = s.form(ins.args[0])
    ex = s.fmag(f)
    xlo, xhi = s.rng(ins.args[0])
    for dd, (lo, hi) in zip(ins.dst, trig_forms(f, xlo, xhi, TAPE_OPS[ins.op].results)):
        ids, fo = f.ids, s.fx.temp_bits[dd]
        if fo < 30:  # computed in Q30: a coarser result is rounded
            ids, lo, hi = s.rounded(ids, lo, hi, half_ulp(fo), dd)
        s.store(dd, ids, lo, hi, f.r + ex * ex / 2 + TRIG_ERROR)


def _located(rule):
    """rule, with the instruction it runs recorded first (the origin of its roundings)"""
    def at(s: _Forms, ins) -> None:
        s.at = s.index[ins.dst]
        rule(s, ins)
    return at


FORM_RULES = Rules({op: _located(rule) for op, rule in (
    ("add", _f_add), ("sub", _f_add), ("neg", _f_neg), ("mul", _f_mul), ("div", _f_div), ("sqrt", _f_sqrt),
    ("sin", _f_trig), ("cos", _f_trig), ("sincos", _f_trig))},
    lambda tape, ins: f"fixed-point error forms: no rule for {ins.op!r}")


def output_errors_boxes(fx: FixedProgram, vec: BoxRanges, detail: list | None = None, *,
                        section: set | None = None, exact: frozenset = frozenset(),
                        forms_out: dict | None = None, mags_out: dict | None = None,
                        absorb: dict | None = None, sites_out: list | None = None) -> list:
    """The error-form bound of every output of fx for every box of vec at once: [array
    over boxes per output]. With `detail` (a list), per output (coefficient magnitudes
    (K, B), the K roundings' half ulps, remainder (B,), the K roundings' instruction
    indices (-1: an input's)) is appended to it. For solve_error's split at a solve:
    `section`, the instruction indices to run (the others' temps are never read);
    `exact`, operands read without error; `forms_out`, a dict keyed by operands filled
    with their final forms (and "u": the symbols' half ulps); `mags_out`, keyed by temps,
    filled with their error magnitudes (B,); `absorb`, a dict keyed by temps whose forms
    are handed over there (stored in it) and read as exact from then on. `sites_out`, a
    list, gets every rounding as (temp it is added to, or None for an input's, half ulp),
    in symbol order (analysis.aligned's floor)."""
    s = _Forms(fx, vec, exact, mags_out, absorb)
    keep = {o[1] for o in fx.tape.outputs if o[0] == "t"} | {o[1] for o in forms_out or () if o[0] == "t"}

    def release(t):  # forms are the memory: free them after their last read
        if t not in keep:
            s.forms.pop(t, None)

    with np.errstate(all="ignore"):
        run(fx.tape, FORM_RULES, s, fx.instrs, section=section, release=release)
    if forms_out is not None:
        for o in list(forms_out):
            forms_out[o] = s.form(o)
    if sites_out is not None:
        sites_out.extend(zip(s.site[1:], s.u[1:]))
    ua = np.array(s.u)
    for d_ in (forms_out, absorb):
        if d_ is not None:
            d_["u"] = ua.__getitem__  # the symbols' half ulps
    out = []
    for k, o in enumerate(fx.tape.outputs):
        out.append(np.full(s.B, fx.out_error[k]) if o[0] == "c" else s.fmag(s.form(o)) * (1 + 1e-12))
        if detail is not None:
            f = s.form(o) if o[0] != "c" else s.Z
            detail.append((np.maximum(np.abs(f.lo), np.abs(f.hi)), s.W(f.ids) if f.ids.shape[0] else np.zeros(0), f.r,
                           np.array([s.origin[k] for k in f.ids.tolist()], dtype=np.int64)))
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
        def key(i):
            return piececache.key(f"fixed {solve_error.SPLIT_AT_SOLVE}", fx.tape, repr((fx.in_bits, sorted(fx.temp_bits.items()), fx.out_bits, fx.instrs,
                                                          fx.in_error, sorted(fx.temp_error.items()), tight)),
                                  *piececache.ranges_parts(vec.take(np.arange(vec.n_boxes)[parts[i]])))
        done = parallel.run(one, len(parts), vec.n_boxes * len(fx.instrs), key)
        if failed is not None:
            failed.extend(x for _, f in done for x in f)
        return np.vstack([E for E, _ in done])
    _, plan = plan_errors(fx, vec)
    E = np.stack(plan, 1) if plan else np.zeros((vec.n_boxes, 0))
    if tight and E.shape[1]:
        cut = find_cut(fx.tape) if solve_error.SPLIT_AT_SOLVE else None
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

    vec, E = refine_for_solve(tape, vec, bounds, replan) if tight and solve_error.SPLIT_AT_SOLVE else (vec, bounds(vec)[0])
    fx = state["fx"]
    can_split = len(boxes) > 1 and all(isinstance(r, BoxView) for r in boxes) and budget > 1
    if can_split:
        E = _split_worst_boxes(tape, fx, vec, E, tight, int(budget * vec.n_boxes))
    fx.out_error = [float(x) for x in E.max(0)] if E.shape[0] else []
    return fx


def _split_worst_boxes(tape: Tape, fx: FixedProgram, vec, E, tight: bool, cap: int):
    """Bisect the boxes holding an output's largest bound E along their widest input
    (relative to the domain), for up to SPLIT_ROUNDS rounds and `cap` boxes, keeping a
    split only where no output's bound gets worse; returns the bounds per final box."""
    span = vec.in_hi.max(0) - vec.in_lo.min(0)
    for _ in range(SPLIT_ROUNDS):
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
        E = _with_halves(E, set(take), Es)
    return E


def _with_halves(E, split: set, Es):
    """The rows of E with each split box's row replaced by its halves' two rows of Es."""
    rows, j = [], 0
    for b in range(E.shape[0]):
        if b in split:
            rows += [Es[2 * j], Es[2 * j + 1]]
            j += 1
        else:
            rows.append(E[b])
    return np.array(rows)
