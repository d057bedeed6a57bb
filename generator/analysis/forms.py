"""First-order error forms over boxes, and the parts of their rules that do not depend on
the number format.

A form is E = sum_k c_k d_k + [-r, r] over the boxes of a BoxRanges: each d_k one rounding
(a symbol, |d_k| <= u_k), each c_k an interval per box (rows of `lo`, `hi`, shape (K, B)),
r (B,) the remainder. fixerror (fixed point: absolute roundings) and floaterror (float32:
relative ones) build them with their own rule tables; solve_error reads them at a solve.
The pieces here (scaling, merging, the linearisation of sqrt, the derivative of sin and
cos, the factors of a quotient, FormStore: a finished form truncated and stored) are what
those rule tables share, written once.
"""
from __future__ import annotations

import numpy as np

from .ranges import _vi_trig, union_ids


class VForm:
    """Error form over boxes: rows `ids` of coefficient intervals (lo, hi) (K, B), and r (B,)."""

    __slots__ = ("ids", "lo", "hi", "r")

    def __init__(self, ids, lo, hi, r):
        self.ids, self.lo, self.hi, self.r = ids, lo, hi, r

    def mag(self, w):
        """sum |c_k| u_k + r; w: the u of the rows (K,)"""
        if not self.ids.shape[0]:
            return self.r
        return (np.maximum(np.abs(self.lo), np.abs(self.hi)) * w[:, None]).sum(0) + self.r


class FormStore:
    """What both error analyses' stores of forms (fixerror._Forms, floaterror._Forms) do
    alike when a temp's form is done: keep its `terms` largest rows, join the others to the
    remainder, widen the remainder by a relative 1e-12 and 1e-300, record its magnitude
    (mags_out) or hand it over (absorb). A store sets `forms`, `mags_out`, `absorb`, `Z`
    (the zero form) and `terms`, and says by `row_sizes` what a row weighs."""

    terms = 0
    forms: dict
    mags_out: dict | None
    absorb: dict | None
    Z: VForm

    def row_sizes(self, ids, lo, hi):
        """(w, unit): each row's size per box (K, B), and the factor that turns their sum
        into the remainder's units."""
        raise NotImplementedError

    def fmag(self, f: VForm):
        raise NotImplementedError

    def store(self, d: int, ids, lo, hi, r) -> None:
        """The form of temp d, its smallest rows beyond `terms` joined to the remainder."""
        if ids.shape[0] > self.terms:
            w, unit = self.row_sizes(ids, lo, hi)
            order = np.lexsort((ids, -w.max(1)))
            kept = np.sort(order[:self.terms])
            r = r + w[order[self.terms:]].sum(0) * unit
            ids, lo, hi = ids[kept], lo[kept], hi[kept]
        self.forms[d] = VForm(ids, lo, hi, r * (1 + 1e-12) + 1e-300)
        if self.mags_out is not None and d in self.mags_out:
            self.mags_out[d] = self.fmag(self.forms[d])
        if self.absorb is not None and d in self.absorb:
            self.absorb[d], self.forms[d] = self.forms[d], self.Z


def vscale(f: VForm, a, b):
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


def vmerge(ia, la, ha, ib, lb, hb, sb=1.0):
    """(ids, lo, hi) of a + sb * b, the coefficient rows (ia, la, ha) and (ib, lb, hb)."""
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


def sqrt_form(f: VForm, xlo, xhi, ex):
    """sqrt of a value in [xlo, xhi] carrying the form f (magnitude ex), before its own
    rounding: (lo, hi, r, lin, sl). Where the radicand clears its error (lin) the form
    is linearised, 1 / (2 sqrt) times f, second order |e|^2 / (8 (a - e)^1.5) into r;
    elsewhere no linearisation near 0: r = sqrt(ex). sl: the radicand's floor (1 off lin)."""
    xl = np.maximum(xlo, 0.0)
    lin = xl > ex
    sl, sh = np.where(lin, xl, 1.0), np.where(lin, xhi, 1.0)
    lo, hi = vscale(f, 1 / (2 * np.sqrt(sh)), 1 / (2 * np.sqrt(sl)))
    lo, hi = np.where(lin, lo, 0.0), np.where(lin, hi, 0.0)
    r = np.where(lin, f.r / (2 * np.sqrt(sl)) + ex * ex / (8 * (sl - ex) ** 1.5), np.sqrt(ex))
    return lo, hi, r, lin, sl


def trig_forms(f: VForm, xlo, xhi, names):
    """Per result name (sin or cos) the coefficients of f times its derivative over
    [xlo, xhi] (d sin = cos dx, d cos = -sin dx); the second order, |dx|^2 / 2, is the
    caller's."""
    for fn in names:
        dlo, dhi = _vi_trig(xlo, xhi, "cos" if fn == "sin" else "sin")
        if fn == "cos":
            dlo, dhi = -dhi, -dlo
        yield vscale(f, dlo, dhi)


def quotient_factors(dlo, dhi, qlo, qhi):
    """q = n / d, first order: dq = dn / d - (q / d) dd. The ranges of 1 / d and of -q / d
    over the boxes: (ilo, ihi, olo, ohi)."""
    i1, i2 = 1 / dlo, 1 / dhi
    ilo, ihi = np.minimum(i1, i2), np.maximum(i1, i2)
    m1, m2, m3, m4 = -qhi * ilo, -qhi * ihi, -qlo * ilo, -qlo * ihi
    olo = np.minimum(np.minimum(m1, m2), np.minimum(m3, m4))
    ohi = np.maximum(np.maximum(m1, m2), np.maximum(m3, m4))
    return ilo, ihi, olo, ohi



