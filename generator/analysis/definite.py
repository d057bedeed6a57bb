"""Proven floors of a positive definite matrix's LDL^T pivots over input boxes (range
analysis hints).

Interval arithmetic on the straight-line LDL^T of a mass matrix M(q) loses the correlation
between a Schur complement's terms: over a chain's declared box its second pivot is
enclosed in [-40, 40] although M is positive definite everywhere. What is known instead:
with the elimination order fixed, pivot k is the Schur complement of the leading k x k
block A_k of P M P^T, 1 / (A_k^-1)_kk, so pivot_k >= lambda_min(A_k) (and <= its diagonal
entry). lambda_min(A_k) is floored over a cell of inputs by Weyl's inequality: its value
at the cell's centre matrix C (eigvalsh, less a margin for its rounding) minus a bound of
||A_k(x) - C||_2 <= ||R||_F, R the entrywise radius of the entries' interval enclosures
over the cell about C (C's entries themselves enclosed by range analysis of the point
box). Cells whose floor is not positive, or less than half the centre's eigenvalue, are
bisected (a budget of rounds and cells). With the floors, the multipliers are bounded too:
L_ik = S_ik / S_kk with |S_ik| <= sqrt(S_ii S_kk) (S positive definite) and S_ii <= a_ii,
so |L_ik| <= sqrt(max a_ii / floor_k).

An input that reaches M's entries only through sums, differences and negations of inputs
and constants that then meet sin or cos (a joint angle) leaves M 2 pi-periodic in it, so
its range is reduced to one period: a chain's angles need no narrow declared range.

`DefiniteEnclosure(F, stages, rewrite).bind(tape)` maps a kernel's pivots (F's, with the
positions of each stage substituted: an RK4 step factors M at four positions) to its
tape; the floors of a stage read the range analysis' own enclosures of that stage's
positions (lazy hints: analysis.ranges calls them when the pivot's pass reaches them).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Atom, subs
from ..lower.tape import TapeHints
from .linear import _locate
from .ranges import analyse_boxes

TWO_PI = 2 * np.pi
CELLS = 8  # initial cells per dimension M's entries read (capped at START_CELLS per box)
START_CELLS = 512
START_WIDTH = 0.5  # ... and no narrower than this (an angle's radians: M's entries are trigonometric)
ROUNDS = 6  # rounds of bisection of the cells whose floor is not yet good enough
MAX_CELLS = 20000  # cells per pass over all boxes
GOOD = 0.5  # a cell's floor is good enough at this fraction of its centre's eigenvalue
MAX_DIMS = 2  # hints only for matrices of at most this many inputs: the cells grow as 8^dims per box
EIG_MARGIN = 1e-12  # relative rounding of eigvalsh (LAPACK: a small multiple of n eps ||C||)

__all__ = ["DefiniteEnclosure", "periodic_inputs", "pivot_floors"]


def periodic_inputs(tape) -> list[bool]:
    """Per input of `tape`: True if every value computed from it is 2 pi-periodic in it,
    i.e. it meets only add, sub, neg (of it, constants and values not depending on it)
    before sin or cos, and no output holds such a sum."""
    out = []
    for k in range(len(tape.inputs)):
        lin: set = set()  # temps = integer multiple of input k plus a value free of it
        ok = True
        for ins in tape.instrs:
            hit = [a for a in ins.args if a == ("in", k) or (a[0] == "t" and a[1] in lin)]
            if not hit:
                continue
            if ins.op in ("add", "sub", "neg"):
                lin.update(ins.dst)
            elif ins.op not in ("sin", "cos", "sincos"):
                ok = False
                break
        held = any(o == ("in", k) or (o[0] == "t" and o[1] in lin) for o in tape.outputs)
        out.append(ok and not held)
    return out


def _one_period(lo, hi, periodic):
    """Boxes (B, m) with each periodic input's range moved by whole periods into one that
    starts in [-pi, pi), or [-pi, pi] when it spans a period (or is not finite)."""
    lo, hi = lo.copy(), hi.copy()
    for k in np.flatnonzero(periodic):
        full = ~(hi[:, k] - lo[:, k] < TWO_PI)
        m = np.where(full, 0.0, np.floor((lo[:, k] + np.pi) / TWO_PI))
        slack = 1e-12 * (1 + np.abs(m))  # the rounding of the moved ends
        lo[:, k] = np.where(full, -np.pi, lo[:, k] - m * TWO_PI - slack)
        hi[:, k] = np.where(full, np.pi, hi[:, k] - m * TWO_PI + slack)
    return lo, hi


def _entries(sub, lo, hi):
    """(C, n_out) enclosures of the sub-tape's outputs over the cells."""
    vec = analyse_boxes(sub, lo, hi, strict=False)
    got = [vec.operand(o) for o in sub.outputs]
    return np.stack([g[0] for g in got], 1), np.stack([g[1] for g in got], 1)


def _cell_floors(sub, where, n, lo, hi):
    """(floors, centre eigenvalues, diagonal upper bounds), each (C, n): per cell and k,
    a proven lower bound of lambda_min of the leading k+1 block of the permuted matrix."""
    elo, ehi = _entries(sub, lo, hi)
    mid = (lo + hi) / 2
    clo, chi = _entries(sub, mid, mid)
    C = (clo + chi) / 2
    R = np.maximum(ehi - C, C - elo)
    Cm, Rm = np.zeros((len(lo), n, n)), np.zeros((len(lo), n, n))
    for e, (i, j) in enumerate(where):
        Cm[:, i, j] = Cm[:, j, i] = C[:, e]
        Rm[:, i, j] = Rm[:, j, i] = R[:, e]
    Dhi = np.zeros((len(lo), n))
    for e, (i, j) in enumerate(where):
        if i == j:
            Dhi[:, i] = ehi[:, e]
    floors, eig = np.empty((len(lo), n)), np.empty((len(lo), n))
    for k in range(n):
        lam = np.linalg.eigvalsh(Cm[:, :k + 1, :k + 1])[:, 0]
        size = np.sqrt((Cm[:, :k + 1, :k + 1] ** 2).sum((1, 2)))
        rad = np.sqrt((Rm[:, :k + 1, :k + 1] ** 2).sum((1, 2)))
        floors[:, k] = lam - (rad * (1 + 1e-12) + EIG_MARGIN * (k + 1) * size + 1e-300)
        eig[:, k] = lam
    floors[~np.isfinite(floors)] = -np.inf
    return floors, eig, Dhi


def grid_cells(lo, hi, cuts):
    """Each box (rows of lo, hi) cut into cuts[b, k] equal parts along input k (their union
    is the box): (cell_lo, cell_hi, owner box)."""
    cuts = np.asarray(cuts, dtype=np.int64)
    count = cuts.prod(1)
    own = np.repeat(np.arange(len(lo)), count)
    local = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    cl, ch = np.empty((len(own), lo.shape[1])), np.empty((len(own), lo.shape[1]))
    stride = np.ones(len(own), dtype=np.int64)
    for k in range(lo.shape[1]):
        c = cuts[own, k]
        i = (local // stride) % c
        stride = stride * c
        l, h = lo[own, k], hi[own, k]
        cl[:, k] = np.where(i == 0, l, l + (h - l) * i / c)
        ch[:, k] = np.where(i == c - 1, h, l + (h - l) * (i + 1) / c)
    return cl, ch, own


def _start_cells(lo, hi, dims):
    """Each box cut into a grid along the dims the entries read; (cell_lo, cell_hi, owner)."""
    per = min(CELLS, max(1, int(START_CELLS ** (1 / max(1, len(dims))))))
    w = hi - lo
    read = np.isin(np.arange(lo.shape[1]), dims)[None, :] & (w > 0)
    cuts = np.where(read, np.clip(np.ceil(np.where(read, w, 0) / START_WIDTH), 1, per), 1)
    return grid_cells(lo, hi, cuts)


def pivot_floors(sub, where, n, lo, hi, periodic):
    """Per box (rows of lo, hi over sub's inputs): (floors (B, n), diagonal bounds (B, n)),
    floors[b, k] a proven lower bound of pivot k (the leading k+1 block's lambda_min, in
    the order `where` permutes to); nan where no positive floor was found."""
    lo, hi = _one_period(np.asarray(lo, float), np.asarray(hi, float), np.asarray(periodic))
    finite = np.isfinite(lo).all(1) & np.isfinite(hi).all(1)
    B = len(lo)
    out, dhi = np.full((B, n), np.nan), np.full((B, n), np.nan)
    if not finite.any():
        return out, dhi
    dims = sorted({v for ins in sub.instrs for kind, v in ins.args if kind == "in"})
    box = np.flatnonzero(finite)
    cl, ch, own = _start_cells(lo[box], hi[box], dims)
    done_f, done_d, done_o = [], [], []
    for r in range(ROUNDS + 1):
        f, eig, d = _cell_floors(sub, where, n, cl, ch)
        weak = ((f <= 0) | (f < GOOD * eig)).any(1)
        if r == ROUNDS or not weak.any() or len(cl) + weak.sum() > MAX_CELLS:
            break
        done_f.append(f[~weak]), done_d.append(d[~weak]), done_o.append(own[~weak])
        w = np.where(np.isin(np.arange(lo.shape[1]), dims), ch - cl, -1.0)[weak]
        dim = np.argmax(w, 1)
        l1, h1, o = cl[weak], ch[weak].copy(), own[weak]
        r = np.arange(len(l1))
        midp = (l1[r, dim] + h1[r, dim]) / 2
        l2 = l1.copy()
        h1[r, dim], l2[r, dim] = midp, midp
        cl, ch, own = np.concatenate([l1, l2]), np.concatenate([h1, ch[weak]]), np.concatenate([o, o])
    done_f.append(f), done_d.append(d), done_o.append(own)
    f, d, o = np.concatenate(done_f), np.concatenate(done_d), np.concatenate(done_o)
    fb, db = np.full((len(box), n), np.inf), np.full((len(box), n), -np.inf)
    np.minimum.at(fb, o, f)
    np.maximum.at(db, o, d)
    out[box] = np.where(fb > 0, fb, np.nan)
    dhi[box] = db
    return out, dhi


@dataclass
class DefiniteEnclosure:
    """The hints of one symmetric positive definite LDL^T factor F (linalg.ldlt), factored
    at each stage's positions: stages = [[position atom per coordinate of F's matrix]],
    coords = the symbols F's matrix is written in; rewrite: applied to the kernel's
    atoms after it was built (kernels.step: the shifted positions), or None."""

    F: object
    coords: list
    stages: list
    rewrite: object = None

    def _atoms(self, atoms: list[Atom], mapping: dict) -> list[Atom]:
        got = subs(atoms, mapping) if mapping else list(atoms)
        return self.rewrite(got) if self.rewrite is not None else got

    def keep(self) -> list:
        """Atoms the lowering must leave whole (none: these hints bind to whatever holds them)."""
        return []

    def bind(self, tape):
        """The hints of `tape`, or None when the factor has 2 x 2 blocks, its entries read
        symbols other than the coordinates, or no stage's values are found in the tape."""
        from ..lower import lower
        F = self.F
        if any(len(st.idx) != 1 for st in F.steps):
            return None
        pos = {k: p for p, k in enumerate(F.order)}
        entries = sorted((i, j) for i, j in F.A.entries if i >= j)
        try:
            sub = lower([F.A.entries[ij] for ij in entries], list(self.coords))
        except Exception:  # an entry reads more than the coordinates: no hints
            return None
        if len({v for ins in sub.instrs for kind, v in ins.args if kind == "in"}) > MAX_DIMS:
            return None
        where = [(pos[i], pos[j]) for i, j in entries]
        located = _locate(tape)
        stages = []
        for qs in self.stages:
            mapping = {c: a for c, a in zip(self.coords, qs) if c is not a}
            ops = [_operand(located, a) for a in self._atoms(list(qs), {})]
            if any(o is None for o in ops):
                continue
            targets = []
            for k, st in enumerate(F.steps):
                piv, rec = self._atoms([st.pivot, st.recip], mapping)
                targets += [(t, sg, "S", k, None) for t, sg in _temps(located, piv)]
                targets += [(t, sg, "R", k, None) for t, sg in _temps(located, rec)]
                for i, (l,) in st.lower.items():
                    (la,) = self._atoms([l], mapping)
                    targets += [(t, sg, "L", k, pos[i]) for t, sg in _temps(located, la)]
            if targets:
                stages.append((tuple(ops), tuple(targets)))
        if not stages:
            return None
        return _DefiniteHints(sub, tuple(where), F.n, tuple(periodic_inputs(sub)), tuple(stages))


def _operand(located, a):
    """(operand, sign, c): the tape holds a as sign * operand + c (c a constant shift:
    kernels.step's shifted positions; sign -1: lowering folded a negation); None if not."""
    if a.is_const:
        return (("c", float(a.value)), 1.0, 0.0)
    c = 0.0
    if a.op == "add" and a.args[0].is_const:  # a shifted position: c + d
        c, a = float(a.args[0].value), a.args[1]
    for x, flip in ((a, 1.0), (a.args[0] if a.op == "neg" else None, -1.0)):
        for o, sg in located.get(x, []) if x is not None else []:
            return (o, sg * flip, c)
    return None


def _temps(located, a):
    """[(temp, sign)] of the temps holding a (or -a: lowering folds negations)."""
    found = [(o[1], sg) for o, sg in located.get(a, []) if o[0] == "t"]
    if not found and a.op == "neg":
        found = [(o[1], -sg) for o, sg in located.get(a.args[0], []) if o[0] == "t"]
    return found


@dataclass(frozen=True)
class DefiniteKey:
    """What the hints compute from beyond the tape (analysis.piececache)."""
    n: int
    where: tuple
    periodic: tuple
    stages: tuple
    tape: tuple


class _DefiniteHints(TapeHints):
    def __init__(self, sub, where, n, periodic, stages):
        self.sub, self.where, self.n, self.periodic, self.stages = sub, where, n, periodic, stages

    def key(self) -> tuple:
        text = tuple(f"{i.op} {i.dst} {i.args}" for i in self.sub.instrs) + (repr(self.sub.outputs),)
        return (DefiniteKey(self.n, self.where, self.periodic, self.stages, text),)

    def __call__(self, in_lo, in_hi) -> dict:
        out = {}
        for ops, targets in self.stages:
            memo = _StageFloors(self, ops)
            for t, sg, kind, k, i in targets:
                out[t] = _Lazy(memo, sg, kind, k, i)
        return out


class _StageFloors:
    """One stage's floors over the boxes of one pass, worked out on first use."""

    def __init__(self, hints: _DefiniteHints, ops):
        self.hints, self.ops, self.got = hints, ops, None

    def floors(self, s):
        if self.got is None:
            lo, hi = [], []
            for (kind, v), sign, c in self.ops:  # the pass keeps every temp's interval (not its form)
                a, b = (s.lo_[v], s.hi_[v]) if kind == "t" else s.get((kind, v))[:2]
                a, b = (a, b) if sign > 0 else (-b, -a)
                lo.append(a + c)
                hi.append(b + c)
            h = self.hints
            self.got = pivot_floors(h.sub, h.where, h.n, np.stack(lo, 1), np.stack(hi, 1), h.periodic)
        return self.got


class _Lazy:
    """A hint that reads the pass's enclosures so far (analysis.ranges: _Pass.store calls it)."""

    def __init__(self, memo: _StageFloors, sign, kind, k, i):
        self.memo, self.sign, self.kind, self.k, self.i = memo, sign, kind, k, i

    def __call__(self, s):
        floors, dhi = self.memo.floors(s)
        f = floors[:, self.k]
        inf = np.full(len(f), np.inf)
        if self.kind == "S":
            lo, hi = np.where(np.isnan(f), -inf, f), np.where(np.isnan(f) | ~np.isfinite(dhi[:, self.k]), inf,
                                                               dhi[:, self.k])
        elif self.kind == "R":
            lo = np.where(np.isnan(f), -inf, 0.0)
            hi = np.where(np.isnan(f), inf, np.nextafter(1.0 / f, np.inf))
        else:
            m = np.nextafter(np.sqrt(dhi[:, self.i] / f), np.inf) * (1 + 1e-12)
            m = np.where(np.isnan(m), inf, m)
            lo, hi = -m, m
        return (lo, hi) if self.sign > 0 else (-hi, -lo)
