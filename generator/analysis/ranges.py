"""Range analysis over a tape: a sound enclosure of every value for inputs in their
declared ranges.

Two analyses run side by side and the tighter bound wins, value by value:
* interval arithmetic, exact for each operation but blind to correlations (x - x is
  [-2r, 2r]);
* affine arithmetic: each value is c + sum_i a_i e_i with e_i in [-1, 1], one noise symbol
  per input plus one per nonlinear operation, so linear correlations cancel (x - x is 0)
  and products of correlated values stay tight.
Floating-point rounding inside the analysis is covered by rounding every bound outwards.

`analyse_boxes` runs the rules (RANGE_RULES, through lower.tapeops.run) over many boxes at
once (numpy arrays over the boxes; one merge policy of the affine terms for all boxes), and `analyse_domain` uses it for a kernel's domain (a union of boxes): a box where
a divisor's range reaches 0 is bisected (the halves' union is the box, so the cover stays
sound and the result deterministic) until a budget of boxes, then refused with the
operation, the configuration and the input to narrow named.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..ir.atom import ExpressionError
from ..lower.tape import Tape, describe
from ..lower.tapeops import TAPE_OPS, Rules, run

_TINY = 1e-300


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float

    @property
    def mag(self) -> float:
        """max |x| over the interval"""
        return max(abs(self.lo), abs(self.hi))

    def contains_zero(self) -> bool:
        return self.lo <= 0.0 <= self.hi

    def __and__(self, o: "Interval") -> "Interval":
        lo, hi = max(self.lo, o.lo), min(self.hi, o.hi)
        if lo > hi:  # both enclosures are sound, so they overlap up to rounding
            lo = hi = (lo + hi) / 2
        return Interval(lo, hi)


class _Where:
    """`op computing <atom>`, written out only if an error message needs it (printing a
    big atom costs as much as analysing the whole tape)."""

    __slots__ = ("op", "atom")

    def __init__(self, op, atom):
        self.op, self.atom = op, atom

    def __str__(self) -> str:
        return f"{self.op} computing {self.atom!r}"[:300]

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


@dataclass
class Ranges:
    """Per tape temp: a sound enclosure of its exact value; per input: its range."""

    temps: dict[int, Interval]
    inputs: list[Interval]

    def of(self, operand: tuple) -> Interval:
        kind, v = operand
        if kind == "t":
            return self.temps[v]
        if kind == "in":
            return self.inputs[v]
        return Interval(v, v)


# ---- the analysis over many boxes at once ------------------------------------------------
# Every value carries numpy arrays over the boxes: an interval (lo, hi) and an affine form
# whose noise terms are rows of one matrix (one column per box), every bound rounded
# outwards. The merge policy of the affine forms is one for all boxes: the VEC_TERMS rows
# of largest max-over-boxes magnitude stay. Where a rule's choice depends on the box (a
# linearisation or a plain interval), it computes both and selects per column.
#
# A box where a divisor's range reaches 0 (or a radicand is always negative) is "bad":
# its values are unbounded from there on, its failure is recorded, and analyse_domain
# bisects it (the union of the halves is the box, so the cover stays sound) until the
# budget of boxes is spent.

VEC_TERMS = 96  # rows kept by the vectorised affine forms (one policy for all boxes)


def _vdown(x):
    return np.nextafter(x, -np.inf)


def _vup(x):
    return np.nextafter(x, np.inf)


def _vmap(fn, x):
    """math.fn column by column (libm, not numpy's own kernels: the same bits as the analysis always had)"""
    return np.fromiter((fn(v) for v in x.tolist()), dtype=np.float64, count=x.shape[0])


class _VAff:
    """c + ids-rows of A times e + [-err, err], columnwise (one column per box)."""

    __slots__ = ("ids", "A", "c", "err", "rad")

    def __init__(self, ids, A, c, err, absum=None):
        self.ids, self.A, self.c, self.err = ids, A, c, err
        if absum is None:
            absum = np.abs(A).sum(0) if A.shape[0] else 0.0
        self.rad = _vup((absum + err) * (1 + 4e-16))

    def radius(self):
        return self.rad


class _VNoise:
    def __init__(self, n: int):
        self.n = n  # inputs are 0..n-1; fresh symbols count up, so id arrays stay sorted

    def fresh(self) -> int:
        self.n += 1
        return self.n - 1


_EMPTY_IDS = np.zeros(0, dtype=np.int64)


def _scaled(A, s):
    return A.copy() if isinstance(s, float) and s == 1.0 else s * A


def union_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.union1d of two sorted arrays of distinct symbol ids, without its general unique
    (a few times faster at the sizes of error and affine forms; called ~300,000 times for
    the Stewart reduced kernel)."""
    c = np.concatenate((a, b))
    if not c.shape[0]:
        return c
    c.sort()
    keep = np.empty(c.shape[0], dtype=bool)
    keep[0] = True
    np.not_equal(c[1:], c[:-1], out=keep[1:])
    return c[keep]


def _union(a: _VAff, b: _VAff, sa, sb):
    """(ids, sa*A_a + sb*A_b) on the union of the rows (sa, sb scalars or column arrays)."""
    if a.ids.shape == b.ids.shape and np.array_equal(a.ids, b.ids):
        return a.ids, sa * a.A + sb * b.A
    ids = union_ids(a.ids, b.ids)
    if ids.shape[0] == a.ids.shape[0]:  # b's rows are among a's
        out = _scaled(a.A, sa)
        out[np.searchsorted(ids, b.ids)] += sb * b.A
    elif ids.shape[0] == b.ids.shape[0]:
        out = _scaled(b.A, sb)
        out[np.searchsorted(ids, a.ids)] += sa * a.A
    else:
        out = np.zeros((ids.shape[0], a.c.shape[0]))
        out[np.searchsorted(ids, a.ids)] = sa * a.A
        out[np.searchsorted(ids, b.ids)] += sb * b.A
    return ids, out


def _append(ids, A, fid, col):
    return np.append(ids, fid), np.vstack([A, col[None, :]])


def _finish(ids, A, c, err, bad, plain=None) -> _VAff:
    """err + the rounding of computing c and A (where `plain`, of c
    alone), unbounded columns blanked, at most VEC_TERMS rows: the value's form."""
    if bad is not None:
        A = np.where(bad, 0.0, A)
        c = np.where(bad, 0.0, c)
    absA = np.abs(A)
    absum = absA.sum(0)
    rnd = (np.abs(c) + absum) * 2.3e-16 + _TINY
    if plain is not None:
        rnd = np.where(plain, np.abs(c) * 2.3e-16 + _TINY, rnd)
    err = err + rnd
    if bad is not None:
        err = np.where(bad, np.inf, err)
    if ids.shape[0] > VEC_TERMS:
        order = np.lexsort((ids, -absA.max(1)))
        kept = np.sort(order[:VEC_TERMS])
        err = _vup(err + absA[order[VEC_TERMS:]].sum(0))
        ids, A, absum = ids[kept], A[kept], absA[kept].sum(0)
    return _VAff(ids, A, c, err, absum)


def _v_interval_and(lo, hi, af: _VAff):
    r = af.radius()
    alo, ahi = _vdown(af.c - r), _vup(af.c + r)
    lo2, hi2 = np.maximum(lo, alo), np.minimum(hi, ahi)
    cross = lo2 > hi2
    if cross.any():  # both sound: they overlap up to rounding
        mid = (lo2 + hi2) / 2
        lo2, hi2 = np.where(cross, mid, lo2), np.where(cross, mid, hi2)
    return lo2, hi2


def _vi_mul(alo, ahi, blo, bhi):
    p1, p2, p3, p4 = alo * blo, alo * bhi, ahi * blo, ahi * bhi
    return (_vdown(np.minimum(np.minimum(p1, p2), np.minimum(p3, p4))),
            _vup(np.maximum(np.maximum(p1, p2), np.maximum(p3, p4))))


def _vi_sqr(lo, hi):
    l2, h2 = lo * lo, hi * hi
    pos, neg = lo >= 0, hi <= 0
    out_lo = np.where(pos, _vdown(l2), np.where(neg, _vdown(h2), 0.0))
    out_hi = np.where(pos | neg, _vup(np.where(pos, h2, l2)), _vup(np.maximum(l2, h2)))
    return out_lo, out_hi


def _vi_trig(lo, hi, fn: str):
    f = math.sin if fn == "sin" else math.cos
    shift = math.pi / 2 if fn == "sin" else 0.0
    full = ~(hi - lo < 2 * math.pi)  # also where unbounded
    safe_lo = np.where(full, 0.0, lo)
    safe_hi = np.where(full, 0.0, hi)
    vmin = np.minimum(_vmap(f, safe_lo), _vmap(f, safe_hi))
    vmax = np.maximum(_vmap(f, safe_lo), _vmap(f, safe_hi))
    k0 = np.ceil((safe_lo - shift) / math.pi)
    k1 = np.floor((safe_hi - shift) / math.pi)
    for j in range(3):  # a width below 2 pi holds at most two peaks
        k = k0 + j
        inside = k <= k1
        if not inside.any():
            break
        pv = _vmap(f, shift + np.where(inside, k, k0) * math.pi)
        vmin = np.where(inside, np.minimum(vmin, pv), vmin)
        vmax = np.where(inside, np.maximum(vmax, pv), vmax)
    out_lo = np.maximum(-1.0, _vdown(vmin))
    out_hi = np.minimum(1.0, _vup(vmax))
    return np.where(full, -1.0, out_lo), np.where(full, 1.0, out_hi)


def _vlinear(a: _VAff, alpha, zeta, delta, noise: _VNoise, plain):
    """alpha*a + zeta + [-delta, delta] (a fresh symbol), and where plain = (mask, lo,
    hi) says so the interval [lo, hi] as a form of its own (a_from_interval). Returns
    the unfinished form (ids, A, c, err, mask) for _finish."""
    A = alpha * a.A
    c = alpha * a.c + zeta
    fresh = np.where(delta > 0, _vup(delta * (1 + 1e-12) + (np.abs(c) * 2.3e-16 + _TINY)), 0.0)
    mask, plo, phi = plain
    A = np.where(mask, 0.0, A)
    c = np.where(mask, (plo + phi) / 2, c)
    fresh = np.where(mask, _vup((phi - plo) / 2), fresh)
    ids, A = _append(a.ids, A, noise.fresh(), fresh)
    return ids, A, c, np.where(mask, 0.0, np.abs(alpha) * a.err), mask


def _vcheb(f, g_pts, lo, hi):
    """Vectorised _chebyshev: f over arrays; g_pts(alpha) lists candidate critical points."""
    alpha = (f(hi) - f(lo)) / (hi - lo)
    pts = [lo, hi] + [np.where((lo < y) & (y < hi), y, lo) for y in g_pts(alpha)]
    g = [f(y) - alpha * y for y in pts]
    gmax, gmin = g[0], g[0]
    for x in g[1:]:
        gmax, gmin = np.maximum(gmax, x), np.minimum(gmin, x)
    return alpha, (gmax + gmin) / 2, (gmax - gmin) / 2


def _vrecip_plain(lo, hi):
    s = lo > 0
    L, H = np.where(s, lo, -hi), np.where(s, hi, -lo)
    with np.errstate(all="ignore"):
        return (H - L <= 1e-300) | (H / L > 1e6) | ~(L > 0)


def _vrecip(a: _VAff, lo, hi, noise):
    s = np.where(lo > 0, 1.0, -1.0)
    L, H = np.where(s > 0, lo, -hi), np.where(s > 0, hi, -lo)
    with np.errstate(all="ignore"):
        plain = (H - L <= 1e-300) | (H / L > 1e6) | ~(L > 0)
        Ls, Hs = np.where(plain, 1.0, L), np.where(plain, 2.0, H)
        alpha, zeta, delta = _vcheb(lambda y: 1.0 / y, lambda al: [np.sqrt(-1.0 / al)], Ls, Hs)
        plo, phi = _vdown(1.0 / hi), _vup(1.0 / lo)
    return _vlinear(a, alpha, s * zeta, delta + np.abs(zeta) * 1e-15, noise, (plain, plo, phi))


_PI_UP = float(np.nextafter(math.pi, np.inf))  # math.pi is below pi


def _vi_atan2(ylo, yhi, xlo, xhi):
    """(lo, hi, origin) of atan2(y, x) over boxes: `origin` where a box holds (0, 0) (no
    value there); [-pi, pi] where it reaches the branch cut from below (x < 0, y < 0 <= y,
    where the angle jumps from -pi to pi); elsewhere the angle is continuous on the box,
    which lies in a half-plane, so its extremes are at corners (np.arctan2, within an
    ulp: widened by two)."""
    origin = (ylo <= 0) & (yhi >= 0) & (xlo <= 0) & (xhi >= 0) | ~np.isfinite(ylo + yhi + xlo + xhi)
    whole = origin | ((xlo < 0) & (ylo < 0) & (yhi >= 0))
    with np.errstate(all="ignore"):
        c = np.stack([np.arctan2(y, x) for y in (ylo, yhi) for x in (xlo, xhi)])
    lo = np.where(whole, -_PI_UP, np.maximum(_vdown(_vdown(c.min(0))), -_PI_UP))
    hi = np.where(whole, _PI_UP, np.minimum(_vup(_vup(c.max(0))), _PI_UP))
    return lo, hi, origin


def _vsqrt_iv(lo, hi):
    with np.errstate(invalid="ignore"):
        return _vdown(np.sqrt(np.maximum(lo, 0.0))), _vup(np.sqrt(hi))


def _vsqrt(a: _VAff, lo, hi, noise):
    l0 = np.maximum(lo, 0.0)
    plain = (hi - l0 <= 1e-300) | (l0 <= 0.0)
    Ls, Hs = np.where(plain, 1.0, l0), np.where(plain, 2.0, hi)
    with np.errstate(all="ignore"):
        alpha, zeta, delta = _vcheb(np.sqrt, lambda al: [1.0 / (4 * al * al)], Ls, Hs)
    plo, phi = _vsqrt_iv(lo, hi)
    return _vlinear(a, alpha, zeta, delta + np.abs(zeta) * 1e-15, noise, (plain, plo, phi))


def _vtrig(a: _VAff, lo, hi, fn, noise):
    w = hi - lo
    plain = (w <= 1e-300) | (w > math.pi) | ~np.isfinite(w)
    Ls, Hs = np.where(plain, 0.0, lo), np.where(plain, 1.0, hi)
    f = math.sin if fn == "sin" else math.cos

    def fv(y):
        return _vmap(f, y)

    def crit(al):
        al = np.clip(al, -1.0, 1.0)
        if fn == "sin":
            base = [np.arccos(al), -np.arccos(al)]
        else:
            base = [-np.arcsin(al), math.pi + np.arcsin(al)]
        k0 = np.floor((Ls - math.pi) / (2 * math.pi)) - 1
        return [b + 2 * math.pi * (k0 + j) for b in base for j in range(4)]

    alpha, zeta, delta = _vcheb(fv, crit, Ls, Hs)
    plo, phi = _vi_trig(lo, hi, fn)
    return _vlinear(a, alpha, zeta, delta + 1e-15, noise, (plain, plo, phi))


@dataclass
class BoxRanges:
    """Enclosures over B boxes: per temp, arrays lo/hi of shape (B,); per input likewise.
    `fail[b]` is the index of the first instruction where box b became unbounded (a
    divisor reaching 0, a radicand always negative; -1: none), `fail_dim[b]` the input
    that contributes most to that operand in the box (the direction to bisect), `soft[b]`
    the first sqrt whose radicand reaches 0 (tight enough to be sound, loose in error)."""

    tape: Tape
    in_lo: np.ndarray  # (B, n)
    in_hi: np.ndarray
    lo: dict
    hi: dict
    fail: np.ndarray
    fail_dim: np.ndarray
    fail_range: np.ndarray  # (B, 2): the failing operand's range
    strict: bool
    span: np.ndarray | None = None  # the domain's width per input (see analyse_boxes)
    # affine forms (ids, A, c, err) of the temps asked for (analyse_boxes keep=...)
    affine: dict = field(default_factory=dict)

    @property
    def n_boxes(self) -> int:
        return self.in_lo.shape[0]

    def operand(self, o: tuple) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) over the boxes of a tape operand: a temp, an input or a constant."""
        kind, v = o
        if kind == "t":
            return self.lo[v], self.hi[v]
        if kind == "in":
            return self.in_lo[:, v], self.in_hi[:, v]
        c = np.full(self.n_boxes, float(v))
        return c, c

    def magnitude(self, o: tuple) -> np.ndarray:
        """max |value| over each box of a tape operand."""
        lo, hi = self.operand(o)
        return np.maximum(np.abs(lo), np.abs(hi))

    def box(self, b: int) -> "BoxView":
        return BoxView(self, b)

    def hull(self) -> Ranges:
        temps = {t: Interval(float(self.lo[t].min()), float(self.hi[t].max())) for t in self.lo}
        ins = [Interval(float(self.in_lo[:, k].min()), float(self.in_hi[:, k].max()))
               for k in range(self.in_lo.shape[1])]
        return Ranges(temps, ins)

    def take(self, idx) -> "BoxRanges":
        idx = np.asarray(idx, dtype=np.int64)
        return BoxRanges(self.tape, self.in_lo[idx], self.in_hi[idx], {t: v[idx] for t, v in self.lo.items()},
                         {t: v[idx] for t, v in self.hi.items()}, self.fail[idx], self.fail_dim[idx],
                         self.fail_range[idx], self.strict, self.span)

    @staticmethod
    def concat(parts: list) -> "BoxRanges":
        p0 = parts[0]
        if len(parts) == 1:
            return p0
        cat = np.concatenate
        return BoxRanges(p0.tape, cat([p.in_lo for p in parts]), cat([p.in_hi for p in parts]),
                         {t: cat([p.lo[t] for p in parts]) for t in p0.lo},
                         {t: cat([p.hi[t] for p in parts]) for t in p0.hi},
                         cat([p.fail for p in parts]), cat([p.fail_dim for p in parts]),
                         cat([p.fail_range for p in parts]), p0.strict, p0.span)

    @staticmethod
    def from_list(tape: Tape, ranges: list) -> "BoxRanges":
        """Stacked from per-box Ranges (each a sound enclosure over its own box)."""
        views = [r for r in ranges if isinstance(r, BoxView)]
        if len(views) == len(ranges) and ranges and all(v.vec is views[0].vec for v in views):
            idx = [v.index for v in views]
            return views[0].vec if idx == list(range(views[0].vec.n_boxes)) else views[0].vec.take(idx)
        B = len(ranges)
        in_lo = np.array([[iv.lo for iv in r.inputs] for r in ranges]).reshape(B, len(tape.inputs))
        in_hi = np.array([[iv.hi for iv in r.inputs] for r in ranges]).reshape(B, len(tape.inputs))
        temps = list(ranges[0].temps)
        lo = {t: np.array([r.temps[t].lo for r in ranges]) for t in temps}
        hi = {t: np.array([r.temps[t].hi for r in ranges]) for t in temps}
        return BoxRanges(tape, in_lo, in_hi, lo, hi, np.full(B, -1), np.zeros(B, dtype=np.int64),
                         np.zeros((B, 2)), True)


class _Column:
    """The temps of one box of a BoxRanges, as a read-only mapping to Intervals."""

    __slots__ = ("lo", "hi", "b")

    def __init__(self, lo, hi, b):
        self.lo, self.hi, self.b = lo, hi, b

    def __getitem__(self, t):
        return Interval(float(self.lo[t][self.b]), float(self.hi[t][self.b]))

    def __iter__(self):
        return iter(self.lo)

    def __len__(self):
        return len(self.lo)

    def __contains__(self, t):
        return t in self.lo

    def keys(self):
        return self.lo.keys()

    def items(self):
        return ((t, self[t]) for t in self.lo)

    def values(self):
        return (self[t] for t in self.lo)


class BoxView(Ranges):
    """Box b of a BoxRanges, read as a Ranges (what analyse_domain's per_box holds)."""

    def __init__(self, vec: BoxRanges, b: int):
        self.vec, self.index = vec, b
        self.temps = _Column(vec.lo, vec.hi, b)
        self.inputs = [Interval(float(vec.in_lo[b, k]), float(vec.in_hi[b, k])) for k in range(vec.in_lo.shape[1])]


def _input_deps(tape: Tape) -> dict[int, int]:
    """Per temp, the inputs it depends on as a bit mask (bit k: input k)."""
    out: dict[int, int] = {}
    for ins_ in tape.instrs:
        m = 0
        for kind, v in ins_.args:
            m |= out[v] if kind == "t" else (1 << v if kind == "in" else 0)
        for d in ins_.dst:
            out[d] = m
    return out


class _Pass:
    """What RANGE_RULES read and write: per temp (lo, hi) (B,), its affine form and the
    boxes where it is unbounded (bad: a mask, or None for none); the failures recorded."""

    def __init__(self, tape: Tape, in_lo, in_hi, span_, keep):
        B, n = in_lo.shape
        self.tape, self.in_lo, self.in_hi, self.span_, self.keep = tape, in_lo, in_hi, span_, keep
        self.B, self.n = B, n
        self.noise = _VNoise(n)
        self.fail = np.full(B, -1, dtype=np.int64)
        self.fail_dim = np.zeros(B, dtype=np.int64)
        self.fail_range = np.zeros((B, 2))
        self.lo_: dict = {}
        self.hi_: dict = {}
        self.af_: dict = {}
        self.bad_: dict = {}
        self.kept: dict = {}
        self.in_af = []
        for k in range(n):
            c = (in_lo[:, k] + in_hi[:, k]) / 2
            # the midpoint is rounded: the radius reaches both ends from it (rounded up)
            r = _vup(np.maximum(in_hi[:, k] - c, c - in_lo[:, k]))
            self.in_af.append(_VAff(np.array([k], dtype=np.int64), r[None, :], c, np.zeros(B)))
        self.zeros = np.zeros(B)
        self.deps: dict | None = None  # per temp, the inputs it depends on, built at the first failure
        self.position: dict | None = None  # per instruction (its dst), its index, likewise
        self.hints = tape.hints(in_lo, in_hi) if tape.hints is not None else {}

    def get(self, o):
        kind, v = o
        if kind == "t":
            return self.lo_[v], self.hi_[v], self.af_[v], self.bad_[v]
        if kind == "in":
            return self.in_lo[:, v], self.in_hi[:, v], self.in_af[v], None
        cv = np.full(self.B, float(v))
        return cv, cv, _VAff(_EMPTY_IDS, np.zeros((0, self.B)), cv, self.zeros), None

    def args(self, ins):
        """the operands' (lo, hi, form, bad) and the boxes where any is unbounded"""
        args = [self.get(o) for o in ins.args]
        bad = None
        for x in args:
            if x[3] is not None:
                bad = x[3] if bad is None else (bad | x[3])
        return args, bad

    def failing(self, ins, bad, now, lo, hi, af, operand):
        """bad | now, the boxes of now not yet bad recorded as failing at ins"""
        if not now.any():
            return bad
        self.mark(ins, now if bad is None else now & ~bad, lo, hi, af, operand)
        return now if bad is None else bad | now

    def mark(self, ins, newbad, lo, hi, af, operand) -> None:
        """record the first failure of the boxes in newbad, with the input to split"""
        first = newbad & (self.fail < 0)
        if not first.any():
            return
        if self.position is None:
            self.position = {x.dst: i for i, x in enumerate(self.tape.instrs)}
            self.deps = _input_deps(self.tape)
        n = self.n
        self.fail[first] = self.position[ins.dst]
        self.fail_range[first, 0], self.fail_range[first, 1] = lo[first], hi[first]
        inputs = af.ids < n
        if inputs.any():
            coef = np.abs(af.A[inputs])[:, first]  # (n_in_rows, m)
            has = coef.max(0) > 0
            dims = af.ids[inputs][np.argmax(coef, 0)]
        else:
            has = np.zeros(first.sum(), dtype=bool)
            dims = np.zeros(first.sum(), dtype=np.int64)
        # no linear dependence seen: of the inputs the operand depends on, the widest
        # relative to the whole domain
        kind, v = operand
        mask = self.deps.get(v, 0) if kind == "t" else (1 << v if kind == "in" else 0)
        uses = np.array([(mask >> k) & 1 for k in range(n)], dtype=bool) if mask else np.ones(n, dtype=bool)
        w = self.in_hi[first] - self.in_lo[first]
        span_ = self.span_
        rel = np.where(uses & (span_ > 0), w / np.where(span_ > 0, span_, 1.0), -1.0)
        self.fail_dim[first] = np.where(has, dims, np.argmax(rel, 1))

    def store(self, ins, bad, res) -> None:
        """res: per destination (lo, hi, ids, A, c, err, plain), the interval and the
        uncondensed affine form; kept as the tighter of the two, unbounded where bad."""
        if bad is not None and not bad.any():
            bad = None
        for d, (lo, hi, ids, A, c, err, plain) in zip(ins.dst, res):
            af = _finish(ids, A, c, err, bad, plain)
            if bad is None:
                lo, hi = _v_interval_and(lo, hi, af)
            else:
                l2, h2 = _v_interval_and(np.where(bad, 0.0, lo), np.where(bad, 0.0, hi), af)
                lo, hi = np.where(bad, -np.inf, l2), np.where(bad, np.inf, h2)
            if d in self.hints:
                h = self.hints[d]
                h = h(self) if callable(h) else h  # a lazy hint reads the enclosures so far (analysis.definite)
                lo, hi, af = _hinted(lo, hi, af, *h, self.noise, self.tape.atoms.get(d))
            self.lo_[d], self.hi_[d], self.af_[d], self.bad_[d] = lo, hi, af, bad

    def release(self, t) -> None:  # affine forms are the memory: (terms x boxes) each
        if self.keep and t in self.keep:
            self.kept[t] = self.af_[t]
        del self.af_[t]


def _g_add(s: _Pass, ins) -> None:  # add, sub
    ((alo, ahi, aa, _), (blo, bhi, ab, _)), bad = s.args(ins)
    sb = 1.0 if ins.op == "add" else -1.0
    if ins.op == "add":
        lo, hi = _vdown(alo + blo), _vup(ahi + bhi)
    else:
        lo, hi = _vdown(alo - bhi), _vup(ahi - blo)
    ids, A = _union(aa, ab, 1.0, sb)
    s.store(ins, bad, [(lo, hi, ids, A, aa.c + sb * ab.c, aa.err + ab.err, None)])


def _g_neg(s: _Pass, ins) -> None:
    ((alo, ahi, aa, _),), bad = s.args(ins)
    s.store(ins, bad, [(-ahi, -alo, aa.ids, -aa.A, -aa.c, aa.err, None)])


def _g_mul(s: _Pass, ins) -> None:
    args, bad = s.args(ins)
    if ins.args[0] == ins.args[1]:  # a square
        (alo, ahi, aa, _), _ = args
        lo, hi = _vi_sqr(alo, ahi)
        r = aa.radius()
        c = aa.c * aa.c + r * r / 2
        ids, A = _append(aa.ids, 2 * aa.c * aa.A, s.noise.fresh(), _vup(r * r / 2))
        s.store(ins, bad, [(lo, hi, ids, A, c, 2 * np.abs(aa.c) * aa.err, None)])
        return
    (alo, ahi, aa, _), (blo, bhi, ab, _) = args
    lo, hi = _vi_mul(alo, ahi, blo, bhi)
    if ins.args[0][0] == "c" or ins.args[1][0] == "c":
        k, x = (ins.args[0][1], ab) if ins.args[0][0] == "c" else (ins.args[1][1], aa)
        s.store(ins, bad, [(lo, hi, x.ids, k * x.A, k * x.c, abs(k) * x.err, None)])
        return
    ids, A = _union(aa, ab, ab.c, aa.c)
    c = aa.c * ab.c
    ids, A = _append(ids, A, s.noise.fresh(), _vup(aa.radius() * ab.radius()))
    s.store(ins, bad, [(lo, hi, ids, A, c, np.abs(ab.c) * aa.err + np.abs(aa.c) * ab.err, None)])


def _g_div(s: _Pass, ins) -> None:
    ((alo, ahi, aa, _), (blo, bhi, ab, _)), bad = s.args(ins)
    zero = ((blo <= 0.0) & (0.0 <= bhi)) | ~np.isfinite(blo) | ~np.isfinite(bhi)
    bad = s.failing(ins, bad, zero, blo, bhi, ab, ins.args[1])
    rlo, rhi = _vdown(1.0 / bhi), _vup(1.0 / blo)
    lo, hi = _vi_mul(alo, ahi, rlo, rhi)
    rec = _finish(*_vrecip(ab, blo, bhi, s.noise)[:4], bad, _vrecip_plain(blo, bhi))
    ids, A = _union(aa, rec, rec.c, aa.c)
    c = aa.c * rec.c
    ids, A = _append(ids, A, s.noise.fresh(), _vup(aa.radius() * rec.radius()))
    s.store(ins, bad, [(lo, hi, ids, A, c, np.abs(rec.c) * aa.err + np.abs(aa.c) * rec.err, None)])


def _g_sqrt(s: _Pass, ins) -> None:
    ((alo, ahi, aa, _),), bad = s.args(ins)
    bad = s.failing(ins, bad, ahi < 0, alo, ahi, aa, ins.args[0])
    lo, hi = _vsqrt_iv(alo, ahi)
    s.store(ins, bad, [(lo, hi, *_vsqrt(aa, alo, ahi, s.noise))])


def _g_trig(s: _Pass, ins) -> None:  # sin, cos, sincos
    ((alo, ahi, aa, _),), bad = s.args(ins)
    res = []
    for fn in TAPE_OPS[ins.op].results:
        lo, hi = _vi_trig(alo, ahi, fn)
        res.append((lo, hi, *_vtrig(aa, alo, ahi, fn, s.noise)))
    s.store(ins, bad, res)


def _g_atan2(s: _Pass, ins) -> None:  # an interval, its form a fresh symbol
    ((ylo, yhi, ay, _), (xlo, xhi, ax, _)), bad = s.args(ins)
    lo, hi, origin = _vi_atan2(ylo, yhi, xlo, xhi)
    bad = s.failing(ins, bad, origin, xlo, xhi, ax, ins.args[1])
    ids, A = _append(np.zeros(0, dtype=np.int64), np.zeros((0, len(lo))), s.noise.fresh(), _vup((hi - lo) / 2))
    s.store(ins, bad, [(lo, hi, ids, A, (lo + hi) / 2, np.zeros(len(lo)), None)])


RANGE_RULES = Rules({"add": _g_add, "sub": _g_add, "neg": _g_neg, "mul": _g_mul, "div": _g_div, "sqrt": _g_sqrt,
                     "sin": _g_trig, "cos": _g_trig, "sincos": _g_trig, "atan2": _g_atan2},
                    lambda tape, ins: f"range analysis has no rule for {ins.op!r} "
                                      f"({_Where(ins.op, tape.atoms[ins.dst[0]])})")


def analyse_boxes(tape: Tape, in_lo: np.ndarray, in_hi: np.ndarray, strict: bool = True,
                  span: np.ndarray | None = None, keep: set | None = None) -> BoxRanges:
    """One pass over the tape for all boxes (rows of in_lo/in_hi). Never raises for a
    divisor reaching 0: the box is marked (BoxRanges.fail) and unbounded from there.
    `span`: the widths of the whole domain per input (default: of these boxes), what
    "relatively widest" means when choosing the input to bisect. `keep`: temps whose
    affine forms are returned (BoxRanges.affine: {temp: (ids, A, c, err)}; input noise
    symbols are the inputs' indices, the others shared by the temps of this pass)."""
    in_lo = np.ascontiguousarray(in_lo, dtype=np.float64)
    in_hi = np.ascontiguousarray(in_hi, dtype=np.float64)
    span_ = in_hi.max(0) - in_lo.min(0) if span is None else span
    s = _Pass(tape, in_lo, in_hi, span_, keep)
    with np.errstate(all="ignore"):
        run(tape, RANGE_RULES, s, release=s.release)
    s.kept.update({t: s.af_[t] for t in (keep or ()) if t in s.af_})
    return BoxRanges(tape, in_lo, in_hi, s.lo_, s.hi_, s.fail, s.fail_dim, s.fail_range, strict, span_,
                     {t: (f.ids, f.A, f.c, f.err) for t, f in s.kept.items()})


def _hinted(lo, hi, af: _VAff, hlo, hhi, noise: _VNoise, atom):
    """lo, hi and the affine form of a temp intersected with a hint (both sound). Where the
    hint is less than half as wide, the form restarts from it on a fresh noise symbol:
    correlations are lost there, but the form was the looser one."""
    nlo, nhi = np.maximum(lo, hlo), np.minimum(hi, hhi)
    if (nlo > nhi).any():
        b = int(np.argmax(nlo > nhi))
        raise ExpressionError(f"range analysis: the enclosures of {atom} disagree in box {b} "
                              f"([{lo[b]:.6g}, {hi[b]:.6g}] and the hint [{hlo[b]:.6g}, {hhi[b]:.6g}]); "
                              "one of them is unsound (a bug: please report it)")
    tighter = (nhi - nlo) < 0.5 * (hi - lo)
    if not tighter.any():
        return nlo, nhi, af
    mid = np.where(tighter, (nlo + nhi) / 2, af.c)
    rad = np.where(tighter, _vup(np.maximum(nhi - mid, mid - nlo)), 0.0)
    ids, A = _append(af.ids, np.where(tighter, 0.0, af.A), noise.fresh(), rad)
    return nlo, nhi, _VAff(ids, A, mid, np.where(tighter, 0.0, af.err))


SPLIT_BUDGET = 4  # analyse_domain may grow the domain to this many times its boxes,
MIN_SPLITS = 64  # plus this many (a domain of one box gets room to bisect)


CHUNK = 1024  # boxes per pass: bounds the memory of the live affine forms


def analyse_chunked(tape: Tape, in_lo, in_hi, strict: bool = True, span=None) -> BoxRanges:
    """analyse_boxes, CHUNK boxes at a time, the pieces of each on the cores (analysis.parallel)."""
    from . import parallel, piececache

    B = in_lo.shape[0]
    span = in_hi.max(0) - in_lo.min(0) if span is None else span
    parts = [slice(j + p.start, j + p.stop) for j in range(0, B, CHUNK)
             for p in parallel.pieces(min(CHUNK, B - j))]
    enclosed = None if tape.hints is None else tape.hints.enclosed

    def one(i):
        lo, hi = in_lo[parts[i]], in_hi[parts[i]]
        got = analyse_boxes(tape, lo, hi, strict, span)
        # a child's additions to the hints' per-box enclosures go back with its ranges
        keys = [lo[b].tobytes() + hi[b].tobytes() for b in range(lo.shape[0])] if enclosed is not None else []
        return replace(got, tape=None), {k: enclosed[k] for k in keys if k in enclosed}

    def key(i):
        return piececache.key("ranges", tape, in_lo[parts[i]], in_hi[parts[i]], str(strict), np.asarray(span))

    done = parallel.run(one, len(parts), B * len(tape.instrs), key)
    for _, enc in done:
        if enclosed is not None:
            enclosed.update(enc)
    return BoxRanges.concat([replace(got, tape=tape) for got, _ in done])


def split_box(lo: np.ndarray, hi: np.ndarray, dim: int):
    """The two halves of a box along input dim (their union is the box)."""
    mid = (lo[dim] + hi[dim]) / 2
    l1, h1, l2, h2 = lo.copy(), hi.copy(), lo.copy(), hi.copy()
    h1[dim], l2[dim] = mid, mid
    return (l1, h1), (l2, h2)


def refine(vec: BoxRanges, which, dims, analyse=None) -> BoxRanges:
    """vec with each box b of `which` (ascending) replaced in place by its two halves
    along dims[b], the halves analysed anew (enclosures over a half never need the
    parent's: each is sound on its own)."""
    which = list(which)
    if not which:
        return vec
    sub_lo, sub_hi = [], []
    for b in which:
        for l, h in split_box(vec.in_lo[b], vec.in_hi[b], int(dims[b])):
            sub_lo.append(l)
            sub_hi.append(h)
    sub = (analyse or (lambda lo, hi: analyse_chunked(vec.tape, lo, hi, vec.strict, vec.span)))(
        np.array(sub_lo), np.array(sub_hi))
    # order: each parent's halves where the parent was
    both = BoxRanges.concat([vec, sub])
    order, split = [], {b: j for j, b in enumerate(which)}
    B = vec.n_boxes
    for b in range(B):
        if b in split:
            j = split[b]
            order += [B + 2 * j, B + 2 * j + 1]
        else:
            order.append(b)
    return both.take(order)


def _config(tape: Tape, lo, hi) -> str:
    mid = (np.asarray(lo) + np.asarray(hi)) / 2
    return ", ".join(f"{a.value.name}={m:.6g}" for a, m in zip(tape.inputs, mid))


def domain_error(first: BoxRanges, vec: BoxRanges, b: int, splits: int) -> ExpressionError:
    """The one error line for box b of vec, whose failure survived `splits` rounds of
    bisection: the operation, its range over the first box that held it (of `first`,
    the domain as given), the midpoint of b (near the configuration where it vanishes)
    and the input that drives it most."""
    tape = vec.tape
    i = int(vec.fail[b])
    ins_ = tape.instrs[i]
    where = describe(tape, ins_)
    mid = (vec.in_lo[b] + vec.in_hi[b]) / 2
    inside = np.flatnonzero((first.fail == i) & (first.in_lo <= mid).all(1) & (mid <= first.in_hi).all(1))
    lo, hi = first.fail_range[inside[0]] if inside.size else vec.fail_range[b]
    what = (f"the divisor's range [{lo:.6g}, {hi:.6g}] contains 0" if ins_.op == "div"
            else f"sqrt of a value in [{lo:.6g}, {hi:.6g}] (always negative)")
    name = tape.inputs[int(vec.fail_dim[b])].value.name
    return ExpressionError(f"{where}: {what} for inputs in the domain, still after {splits} rounds of "
                           f"bisection near {_config(tape, vec.in_lo[b], vec.in_hi[b])}; narrow the envelope "
                           f"of {name} to avoid this configuration, or cut the envelope into more cells (a "
                           "quantity's \"cells\" in `mbforge generate --envelope FILE.json`)")


def analyse_domain(tape: Tape, boxes, strict: bool = True, per_box: list | None = None,
                   budget: float = SPLIT_BUDGET) -> Ranges:
    """Range analysis over a union of input boxes, all boxes in one vectorised pass (small
    boxes keep intervals and affine forms tight), the enclosures joined. A box where a
    divisor's range reaches 0 (or a radicand is always negative) is bisected along the
    input that drives that operand most, until the domain holds `budget` times its boxes
    (plus MIN_SPLITS; budget 1: no bisection);
    then strict: one error naming the operation, the box's midpoint and the input to
    narrow; not strict: that box's values downstream are unbounded. With `per_box` (a
    list), each final box's own Ranges (views of one BoxRanges) are appended to it."""
    boxes = [list(b) for b in boxes]
    if not boxes:
        raise ExpressionError("range analysis over an empty domain")
    n = len(tape.inputs)
    for box in boxes:
        if len(box) != n:
            raise ExpressionError(f"range analysis: {len(box)} ranges for {n} inputs")
    arr = np.array([[(float(lo), float(hi)) for lo, hi in box] for box in boxes]).reshape(len(boxes), n, 2)
    in_lo, in_hi = arr[:, :, 0], arr[:, :, 1]
    for k in range(n):
        bad = ~(in_lo[:, k] <= in_hi[:, k])
        if bad.any():
            b = int(np.argmax(bad))
            raise ExpressionError(f"input {tape.inputs[k].value.name}: empty range [{in_lo[b, k]}, {in_hi[b, k]}]")
    vec = first = analyse_chunked(tape, in_lo, in_hi, strict)
    cap = max(len(boxes), int(budget * len(boxes))) + (MIN_SPLITS if budget > 1 else 0)
    splits = 0
    while True:
        failing = np.flatnonzero(vec.fail >= 0)
        room = cap - vec.n_boxes
        if failing.size == 0 or room <= 0:
            break
        take = failing[:room]
        vec = refine(vec, take, vec.fail_dim)
        splits += 1
    failing = np.flatnonzero(vec.fail >= 0)
    negative = [b for b in failing if vec.tape.instrs[int(vec.fail[b])].op == "sqrt"]
    if failing.size and (strict or negative):  # a radicand always negative: refused as before
        pick = failing if strict else np.array(negative)
        b = int(pick[np.argmin(vec.fail[pick])])  # the first operation in tape order, as before
        raise domain_error(first, vec, b, splits)
    if per_box is not None:
        per_box.extend(vec.box(b) for b in range(vec.n_boxes))
    return vec.hull()
