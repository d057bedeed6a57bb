"""Range analysis over a tape: a sound enclosure of every value for inputs in their
declared ranges.

Two analyses run side by side and the tighter bound wins, value by value:
* interval arithmetic, exact for each operation but blind to correlations (x - x is
  [-2r, 2r]);
* affine arithmetic: each value is c + sum_i a_i e_i with e_i in [-1, 1], one noise symbol
  per input plus one per nonlinear operation, so linear correlations cancel (x - x is 0)
  and products of correlated values stay tight.
Floating-point rounding inside the analysis is covered by rounding every bound outwards.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.atom import ExpressionError
from ..lower.tape import Tape

_TINY = 1e-300
MAX_TERMS = 64  # affine forms keep this many noise terms; the rest are merged into one


def _down(x: float) -> float:
    return math.nextafter(x, -math.inf)


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


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


def _iv(lo, hi) -> Interval:
    return Interval(_down(lo), _up(hi))


def i_add(a, b):
    return _iv(a.lo + b.lo, a.hi + b.hi)


def i_sub(a, b):
    return _iv(a.lo - b.hi, a.hi - b.lo)


def i_mul(a, b):
    p = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
    return _iv(min(p), max(p))


def i_div(a, b, where):
    if b.contains_zero():
        raise ExpressionError(f"{where}: the divisor's range [{b.lo:.6g}, {b.hi:.6g}] contains 0 "
                              "for inputs in their declared ranges")
    return i_mul(a, _iv(1.0 / b.hi, 1.0 / b.lo))


def i_sqrt(a, where):
    if a.hi < 0:
        raise ExpressionError(f"{where}: sqrt of a value in [{a.lo:.6g}, {a.hi:.6g}] (always negative)")
    return _iv(math.sqrt(max(a.lo, 0.0)), math.sqrt(a.hi))


def i_trig(a, fn):
    """sin or cos over an interval: extremes at the ends or at the peaks inside."""
    if a.hi - a.lo >= 2 * math.pi:
        return Interval(-1.0, 1.0)
    f = math.sin if fn == "sin" else math.cos
    vals = [f(a.lo), f(a.hi)]
    shift = math.pi / 2 if fn == "sin" else 0.0  # peaks of sin at pi/2 + k pi; of cos at k pi
    k0 = math.ceil((a.lo - shift) / math.pi)
    k1 = math.floor((a.hi - shift) / math.pi)
    for k in range(k0, k1 + 1):
        vals.append(f(shift + k * math.pi))
    return Interval(max(-1.0, _down(min(vals))), min(1.0, _up(max(vals))))


class Affine:
    """c + sum(terms[i] * e_i) + [-err, err], e_i in [-1, 1].

    `err` gathers what correlates with nothing (rounding in the analysis itself)."""

    __slots__ = ("c", "terms", "err")

    def __init__(self, c: float, terms: dict[int, float], err: float = 0.0):
        self.c = c
        self.terms = terms
        self.err = err

    def radius(self) -> float:
        return _up((sum(abs(v) for v in self.terms.values()) + self.err) * (1 + 4e-16))

    def interval(self) -> Interval:
        r = self.radius()
        return _iv(self.c - r, self.c + r)


class _Noise:
    def __init__(self):
        self.n = 0

    def fresh(self) -> int:
        self.n += 1
        return -self.n  # inputs use 0..n_in-1; fresh symbols are negative


def _condense(t: dict[int, float], err: float) -> tuple[dict[int, float], float]:
    """At most MAX_TERMS noise terms: the smallest ones move into err."""
    if len(t) <= MAX_TERMS:
        return t, err
    items = sorted(t.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
    return dict(items[:MAX_TERMS]), _up(err + sum(abs(v) for _, v in items[MAX_TERMS:]))


def _rnd(c: float, t: dict[int, float]) -> float:
    """Bound of the rounding committed while computing c and the coefficients t."""
    return (abs(c) + sum(abs(v) for v in t.values())) * 2.3e-16 + _TINY


def a_lin(a: Affine, b: Affine, sb: float, noise: _Noise) -> Affine:
    """a + sb * b (sb = +-1)."""
    t = dict(a.terms)
    for k, v in b.terms.items():
        t[k] = t.get(k, 0.0) + sb * v
    c = a.c + sb * b.c
    t, err = _condense(t, a.err + b.err + _rnd(c, t))
    return Affine(c, t, err)


def a_scale(a: Affine, s: float, noise: _Noise) -> Affine:
    t = {k: s * v for k, v in a.terms.items()}
    c = s * a.c
    t, err = _condense(t, abs(s) * a.err + _rnd(c, t))
    return Affine(c, t, err)


def a_mul(a: Affine, b: Affine, noise: _Noise) -> Affine:
    t: dict[int, float] = {}
    for k, v in a.terms.items():
        t[k] = b.c * v
    for k, v in b.terms.items():
        t[k] = t.get(k, 0.0) + a.c * v
    c = a.c * b.c
    # the product of the two deviations is nonlinear: a fresh noise symbol
    t[noise.fresh()] = _up(a.radius() * b.radius())
    t, err = _condense(t, abs(b.c) * a.err + abs(a.c) * b.err + _rnd(c, t))
    return Affine(c, t, err)


def a_sqr(a: Affine, noise: _Noise) -> Affine:
    """x*x: the square of the deviation lies in [0, r^2], so it is centred at r^2/2."""
    r = a.radius()
    c = a.c * a.c + r * r / 2
    t = {k: 2 * a.c * v for k, v in a.terms.items()}
    t[noise.fresh()] = _up(r * r / 2)
    t, err = _condense(t, 2 * abs(a.c) * a.err + _rnd(c, t))
    return Affine(c, t, err)


def i_sqr(a: Interval) -> Interval:
    if a.lo >= 0:
        return _iv(a.lo * a.lo, a.hi * a.hi)
    if a.hi <= 0:
        return _iv(a.hi * a.hi, a.lo * a.lo)
    return Interval(0.0, _up(max(a.lo * a.lo, a.hi * a.hi)))


def _linear(a: Affine, alpha: float, zeta: float, delta: float, noise: _Noise) -> Affine:
    """alpha * a + zeta + [-delta, delta] (delta: a fresh noise symbol)"""
    t = {k: alpha * v for k, v in a.terms.items()}
    c = alpha * a.c + zeta
    if delta > 0:
        t[noise.fresh()] = _up(delta * (1 + 1e-12) + _rnd(c, {}))
    t, err = _condense(t, abs(alpha) * a.err + _rnd(c, t))
    return Affine(c, t, err)


def _chebyshev(f, df_inv, lo: float, hi: float):
    """(alpha, zeta, delta) of the secant-slope approximation f(y) ~ alpha y + zeta, with
    |f - (alpha y + zeta)| <= delta on [lo, hi]; df_inv(alpha) lists the points of
    [lo, hi] where f' = alpha (the extremes of f - alpha y are there or at the ends)."""
    alpha = (f(hi) - f(lo)) / (hi - lo)
    pts = [lo, hi] + [y for y in df_inv(alpha) if lo < y < hi]
    g = [f(y) - alpha * y for y in pts]
    return alpha, (max(g) + min(g)) / 2, (max(g) - min(g)) / 2


def a_recip(a: Affine, iv: Interval, noise: _Noise) -> Affine:
    """1/a for a of one sign: a linear approximation keeps the correlation with a (a
    fresh symbol per division would forget it, and elimination then blows up)."""
    lo, hi = iv.lo, iv.hi
    if lo > 0 or hi < 0:
        s = 1.0 if lo > 0 else -1.0
        L, H = (lo, hi) if s > 0 else (-hi, -lo)
        if H - L <= 1e-300 or H / L > 1e6:
            return a_from_interval(_iv(1.0 / hi, 1.0 / lo), noise)
        alpha, zeta, delta = _chebyshev(lambda y: 1.0 / y, lambda al: [math.sqrt(-1.0 / al)], L, H)
        # for a < 0: 1/a = -1/(-a) = alpha a - zeta
        return _linear(a, alpha, s * zeta, delta + abs(zeta) * 1e-15, noise)
    raise ExpressionError("reciprocal of a range containing 0")


def a_sqrt(a: Affine, iv: Interval, noise: _Noise) -> Affine:
    lo, hi = max(iv.lo, 0.0), iv.hi
    if hi - lo <= 1e-300 or lo <= 0.0:
        return a_from_interval(i_sqrt(iv, "sqrt"), noise)
    alpha, zeta, delta = _chebyshev(math.sqrt, lambda al: [1.0 / (4 * al * al)], lo, hi)
    return _linear(a, alpha, zeta, delta + abs(zeta) * 1e-15, noise)


def a_trig(a: Affine, iv: Interval, fn: str, noise: _Noise) -> Affine:
    lo, hi = iv.lo, iv.hi
    if hi - lo <= 1e-300 or hi - lo > math.pi:
        return a_from_interval(i_trig(iv, fn), noise)
    f = math.sin if fn == "sin" else math.cos

    def crit(al: float) -> list[float]:  # f'(y) = al
        al = max(-1.0, min(1.0, al))
        base = [math.acos(al), -math.acos(al)] if fn == "sin" else [-math.asin(al), math.pi + math.asin(al)]
        k0 = math.floor((lo - math.pi) / (2 * math.pi)) - 1
        return [b + 2 * math.pi * k for b in base for k in range(k0, k0 + 4)]

    alpha, zeta, delta = _chebyshev(f, crit, lo, hi)
    return _linear(a, alpha, zeta, delta + 1e-15, noise)


def a_from_interval(iv: Interval, noise: _Noise) -> Affine:
    c = (iv.lo + iv.hi) / 2
    return Affine(c, {noise.fresh(): _up((iv.hi - iv.lo) / 2)}, _rnd(c, {}))


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


UNBOUNDED = Interval(-math.inf, math.inf)


# ---- one rule per tape instruction: (instr, [(interval, affine) per operand], where, noise,
# strict) -> [(interval, affine) per destination], or None for "unbounded" -----------------------
def _r_add(ins_, args, where, noise, strict):
    (ia, aa), (ib, ab) = args
    return [(i_add(ia, ib), a_lin(aa, ab, 1.0, noise))]


def _r_sub(ins_, args, where, noise, strict):
    (ia, aa), (ib, ab) = args
    return [(i_sub(ia, ib), a_lin(aa, ab, -1.0, noise))]


def _r_neg(ins_, args, where, noise, strict):
    (ia, aa), = args
    return [(Interval(-ia.hi, -ia.lo), a_scale(aa, -1.0, noise))]


def _r_mul(ins_, args, where, noise, strict):
    if ins_.args[0] == ins_.args[1]:
        (ia, aa), _ = args
        return [(i_sqr(ia), a_sqr(aa, noise))]
    (ia, aa), (ib, ab) = args
    if ins_.args[0][0] == "c":
        af = a_scale(ab, ins_.args[0][1], noise)
    elif ins_.args[1][0] == "c":
        af = a_scale(aa, ins_.args[1][1], noise)
    else:
        af = a_mul(aa, ab, noise)
    return [(i_mul(ia, ib), af)]


def _r_div(ins_, args, where, noise, strict):
    (ia, aa), (ib, ab) = args
    if not strict and ib.contains_zero():
        return None
    return [(i_div(ia, ib, where), a_mul(aa, a_recip(ab, ib, noise), noise))]


def _r_sqrt(ins_, args, where, noise, strict):
    return [(i_sqrt(args[0][0], where), a_sqrt(args[0][1], args[0][0], noise))]


def _trig(fn):
    return lambda ins_, args, where, noise, strict: [(i_trig(args[0][0], fn), a_trig(args[0][1], args[0][0], fn, noise))]


def _r_sincos(ins_, args, where, noise, strict):
    return [(i_trig(args[0][0], fn), a_trig(args[0][1], args[0][0], fn, noise)) for fn in ("sin", "cos")]


_RULES = {"add": _r_add, "sub": _r_sub, "neg": _r_neg, "mul": _r_mul, "div": _r_div, "sqrt": _r_sqrt,
          "sin": _trig("sin"), "cos": _trig("cos"), "sincos": _r_sincos}


def analyse(tape: Tape, input_ranges: list[tuple[float, float]], strict: bool = True) -> Ranges:
    """Enclosures of every temp. strict: a divisor (or radicand) whose range reaches 0
    (or is negative) is an error naming the atom; otherwise the result is unbounded, and
    so is everything computed from it."""
    if len(input_ranges) != len(tape.inputs):
        raise ExpressionError(f"range analysis: {len(input_ranges)} ranges for {len(tape.inputs)} inputs")
    noise = _Noise()
    ins = [Interval(float(lo), float(hi)) for lo, hi in input_ranges]
    for k, iv in enumerate(ins):
        if not iv.lo <= iv.hi:
            raise ExpressionError(f"input {tape.inputs[k].value.name}: empty range [{iv.lo}, {iv.hi}]")
    a_in = [Affine((iv.lo + iv.hi) / 2, {k: _up((iv.hi - iv.lo) / 2)}) for k, iv in enumerate(ins)]
    ivs: dict[int, Interval] = {}
    afs: dict[int, Affine] = {}

    def get(o):
        kind, v = o
        if kind == "t":
            return ivs[v], afs[v]
        if kind == "in":
            return ins[v], a_in[v]
        return Interval(v, v), Affine(v, {}, 0.0)

    for ins_ in tape.instrs:
        op = ins_.op
        where = _Where(op, tape.atoms[ins_.dst[0]])  # printed only in an error message
        args = [get(o) for o in ins_.args]
        if not strict and any(not math.isfinite(iv.mag) for iv, _ in args):
            for d in ins_.dst:
                ivs[d], afs[d] = UNBOUNDED, Affine(0.0, {}, math.inf)
            continue
        rule = _RULES.get(op)
        if rule is None:
            raise ExpressionError(f"range analysis has no rule for {op!r} ({where})")
        res = rule(ins_, args, where, noise, strict)
        if res is None:  # a divisor reaching 0 (not strict): unbounded from here on
            for d in ins_.dst:
                ivs[d], afs[d] = UNBOUNDED, Affine(0.0, {}, math.inf)
            continue
        for d, (iv, af) in zip(ins_.dst, res):
            # keep the tighter of the two, and let the affine form know it
            ivs[d] = iv & af.interval()
            afs[d] = af
    return Ranges(ivs, ins)


def analyse_domain(tape: Tape, boxes, strict: bool = True, per_box: list | None = None) -> Ranges:
    """Range analysis over a union of input boxes: each box analysed on its own (small
    boxes keep intervals and affine forms tight), the enclosures joined. With `per_box`
    (a list), each box's own Ranges are appended to it."""
    out: Ranges | None = None
    for box in boxes:
        r = analyse(tape, box, strict=strict)
        if per_box is not None:
            per_box.append(r)
        if out is None:
            out = r
            continue
        out = Ranges({k: _hull(out.temps[k], r.temps[k]) for k in out.temps},
                     [_hull(a, b) for a, b in zip(out.inputs, r.inputs)])
    if out is None:
        raise ExpressionError("range analysis over an empty domain")
    return out


def _hull(a: Interval, b: Interval) -> Interval:
    return Interval(min(a.lo, b.lo), max(a.hi, b.hi))
