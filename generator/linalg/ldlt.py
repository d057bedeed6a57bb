"""Symmetric straight-line factorization P A P^T = L D L^T over atoms (factor_ldlt).

LDL^T, symmetric positive definite (a mass matrix, an augmented-Lagrangian matrix):
exact minimum degree on the elimination graph (the criterion AMD approximates; exact
degrees are cheap at the sizes of multibody systems), then the numeric factorization in
that order, checking that every pivot stays positive over the samples. No square roots
(Cholesky would need n of them). `definite=False` chooses the symmetric order during
the elimination instead: by the size of the clique each elimination creates, among the
diagonals that pass the numeric test and the 2 x 2 blocks (an index whose diagonal
does not, with a neighbour) whose determinant does. That factors saddle-point systems
such as the KKT matrix [M A^T; A 0], whose constraint diagonal is structurally zero and
whose M may be singular (Euler parameters) along a normalization constraint.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import ONE, ZERO, Atom, Sparse, add, div_kept, mul, mul_kept, sub
from ..ir.graph import gc_paused
from .sparse import (_NUM, _SYM, DEFAULT_THRESHOLD, MIN_RELATIVE, PivotStats, Samples, SingularPivotError,
                     SolveError, _block_inverse, _evaluate, _Factor, _names, _quality, _rhs, _stats, _symbolic,
                     minimum_degree)


@dataclass
class LDLStep:
    """One step of a symmetric elimination: the pivot index (or two, for a 2 x 2 block),
    the pivot (the diagonal entry, or the block's determinant) and its reciprocal, the
    inverse of the pivot block inv[m][k] (symmetric), and the multipliers lower = {index
    i: (L[i, idx[k]] for each pivot index)} of the indices eliminated later. divided (a 1 x
    1 pivot): the multipliers and the solve's y_k / D_k are quotients by the pivot, and
    the reciprocal is not used (factor_ldlt's `divide`)."""

    idx: tuple[int, ...]
    pivot: Atom
    recip: Atom
    inv: tuple[tuple[Atom, ...], ...]
    lower: dict[int, tuple[Atom, ...]]
    divided: bool = False


@dataclass
class LDLFactor(_Factor):
    """P A P^T = L D L^T, D block diagonal (1 x 1 pivots; 2 x 2 blocks where a
    quasi-definite system needs them), in `steps` (see LDLStep)."""

    label: str
    n: int
    A: Sparse
    steps: list[LDLStep]
    stats: list[PivotStats]
    samples: Samples
    fill: int
    predicted_fill: int
    row_names: list[str]
    col_names: list[str]
    kind: str = "LDL^T"
    kept: bool = False  # products as mul_kept builds them (factor_ldlt's `kept`)

    @property
    def product(self):
        return mul_kept if self.kept else mul

    @property
    def order(self) -> list[int]:
        return [k for st in self.steps for k in st.idx]

    @property
    def pivots(self) -> list[Atom]:
        return [st.pivot for st in self.steps]

    @property
    def recips(self) -> list[Atom]:
        return [st.recip for st in self.steps]

    @property
    def blocks(self) -> int:
        return sum(1 for st in self.steps if len(st.idx) == 2)

    def scaled(self, st: LDLStep, v: Atom) -> Atom:
        """v / D of a 1 x 1 step as the solve computes it: v r, or v / D for a divided step."""
        return div_kept(v, st.pivot) if st.divided else self.product(st.inv[0][0], v)

    def factor_atoms(self) -> list[Atom]:
        out = []
        for st in self.steps:
            out += [a for r in st.inv for a in r] if not st.divided else []
            out += [a for v in st.lower.values() for a in v]
        return [a for a in out if a.args]

    def solve(self, b) -> list[Atom]:
        """x with A x = b (atoms): L y = P b, z = D^-1 y, then x = P^T L^-T z."""
        y = _rhs(b, self.n, self.label)
        mul = self.product
        for st in self.steps:
            yb = [y[k] for k in st.idx]
            for i, ls in st.lower.items():
                acc = y[i]
                for l, v in zip(ls, yb):
                    acc = sub(acc, mul(l, v))
                y[i] = acc
        x = [ZERO] * self.n
        for st in reversed(self.steps):
            yb = [y[k] for k in st.idx]
            for m, k in enumerate(st.idx):
                if len(st.idx) == 1:  # y_k / D_k
                    acc = self.scaled(st, yb[0])
                else:
                    acc = ZERO
                    for j, v in enumerate(yb):
                        acc = add(acc, mul(st.inv[m][j], v))
                for i, ls in st.lower.items():
                    acc = sub(acc, mul(ls[m], x[i]))
                x[k] = acc
        return x


def factor_ldlt(A: Sparse, samples: Samples | None = None, names=None, label: str = "A",
                definite: bool = True, threshold: float = DEFAULT_THRESHOLD,
                min_relative: float = MIN_RELATIVE, order: list[int] | None = None, kept: bool = False,
                divide=()) -> LDLFactor:
    """Symmetric factorization P A P^T = L D L^T of a sparse matrix of atoms.

    A's pattern must be symmetric; the lower triangle's atoms are used (an upper entry
    that is a different atom must agree numerically at the samples). definite=True: A is
    positive definite over the samples (minimum-degree order; every pivot must stay > 0).
    definite=False: symmetric pivots chosen during the elimination, the minimum-degree
    index whose diagonal passes the worst-case threshold test, else a 2 x 2 block of two
    coupled indices whose determinant does (quasi-definite and saddle-point systems, e.g.
    a KKT matrix whose mass matrix is singular along a normalization constraint).
    `order` (definite only): the elimination order instead of minimum degree (an open
    tree's leaves first: its pivots have proven floors, analysis.bodyfloors). `kept`: every
    product of the factor and the solve reads its two operands as they are (ir.mul_kept),
    the form analysis.ldlback's backward error replays. `divide`: the indices whose 1 x 1
    steps divide by the pivot (multipliers E_i / D, the solve's y / D) instead of multiplying
    by its reciprocal, when the step has multipliers: where the pivot ranges over decades, a
    fixed-point reciprocal's absolute rounding, times |E_i|, is sqrt(max D / min D) times a
    quotient's own rounding."""
    with gc_paused():
        return _factor_ldlt(A, samples, names, label, definite, threshold, min_relative, order, kept, set(divide))


def _factor_ldlt(A, samples, names, label, definite, threshold, min_relative, order=None, kept=False, divide=()):
    n, m = A.shape
    if n != m:
        raise SolveError(f"{label}: LDL^T needs a square matrix, got {n} x {m}")
    names = _names(names, n, "index ")
    vals, samples = _evaluate(A, samples, label)
    for (i, j), a in A.entries.items():
        if i < j:
            b = A.entries.get((j, i))
            if b is None or (b is not a and not np.allclose(vals[(i, j)], vals[(j, i)], rtol=1e-9, atol=1e-12)):
                raise SolveError(f"{label}: not symmetric: entry ({names[i]}, {names[j]}) is {a} but "
                                 f"({names[j]}, {names[i]}) is {b if b is not None else 0}")
    for (i, j) in A.entries:
        if i > j and (j, i) not in A.entries:
            raise SolveError(f"{label}: not symmetric: entry ({names[i]}, {names[j]}) is stored, "
                             f"({names[j]}, {names[i]}) is not")
    S = len(samples)
    zero = np.zeros(S)
    diag = {i: A[(i, i)] for i in range(n)}
    dval = {i: vals.get((i, i), zero) for i in range(n)}
    off = [dict() for _ in range(n)]  # off[i][j] = off[j][i] = atom of entry (max, min)
    oval = [dict() for _ in range(n)]
    for (i, j), a in A.entries.items():
        if i > j:
            off[i][j] = off[j][i] = a
            oval[i][j] = oval[j][i] = vals[(i, j)]
    scale = {}
    for j in range(n):
        scale[j] = np.max(np.vstack([np.abs(dval[j])] + [np.abs(v) for v in oval[j].values()]), axis=0)
    state = (diag, dval, off, oval)

    if order is not None and (not definite or sorted(order) != list(range(n))):
        raise SolveError(f"{label}: LDL^T order {order} is not a definite factor's permutation of 0..{n - 1}")
    static = (list(order) if order is not None else minimum_degree(A.pattern, n)) if definite else None
    alive = set(range(n))
    steps, stats = [], []
    fill = 0
    while alive:
        if static is not None:
            k = static[len(steps)]
            v = dval[k]
            st = _stats(len(steps), (k,), (k,), v, scale[k], _sym_ratio(v, oval[k]))
            if diag[k] is ZERO or not (v > 0).all() or st.min_rel < min_relative:
                raise SingularPivotError(
                    f"{label}: LDL^T pivot {len(steps)} ({names[k]!r}) does not stay positive over the samples: "
                    f"min {float(v.min()):.3g} (|d| / column scale {st.min_rel:.3g}) at {samples.describe(st.worst)}. "
                    "The matrix is not positive definite within the sampled ranges; use definite=False for a "
                    "quasi-definite system, or LU", k, k, st.min_abs, st.min_rel)
            idx = (k,)
        else:
            idx, st = _pick_symmetric(alive, state, scale, threshold, min_relative, len(steps), names, label,
                                      samples)
        stats.append(st)
        step, created = _eliminate_symmetric(state, idx, zero, mul_kept if kept else mul,
                                             len(idx) == 1 and idx[0] in divide and diag[idx[0]].args)
        fill += created
        steps.append(step)
        alive -= set(idx)
    _, predicted = _symbolic(A.pattern, n, [st.idx if len(st.idx) == 2 else st.idx[0] for st in steps])
    return LDLFactor(label, n, A, steps, stats, samples, fill, predicted, names, names, kept=kept)


def _eliminate_symmetric(state, idx, zero, mul=mul, divided=False):
    """Eliminate the pivot index (or 2 x 2 block) idx from the active matrix, atoms and
    sample values side by side; returns the step and how many new entries it created.
    divided: the multipliers are quotients by the pivot (LDLStep.divided)."""
    diag, dval, off, oval = state
    k = len(idx)
    if k == 1:
        B = [[diag[idx[0]]]]
        Bv = [[dval[idx[0]]]]
    else:
        p, q = idx
        e, ev = off[p].get(q, ZERO), oval[p].get(q, zero)
        B = [[diag[p], e], [e, diag[q]]]
        Bv = [[dval[p], ev], [ev, dval[q]]]
    pivot, recip, inv = _block_inverse(B, k, ZERO, ONE, **_SYM)
    _, _, invv = _block_inverse(Bv, k, zero, 1.0, **_NUM)
    nb = sorted(set().union(*(off[i] for i in idx)) - set(idx))
    divided = divided and bool(nb)  # without multipliers only the solve's y / D would change: keep y r
    E = {i: [off[i].get(c, ZERO) for c in idx] for i in nb}  # unscaled columns: E_i = L_i D
    Ev = {i: [oval[i].get(c, zero) for c in idx] for i in nb}
    lower, lv = {}, {}
    for i in nb:
        ls, vs = [], []
        for mm in range(k):
            acc, accv = ZERO, zero
            for j in range(k):
                acc = add(acc, div_kept(E[i][j], pivot) if divided else mul(E[i][j], inv[j][mm]))
                accv = accv + Ev[i][j] * invv[j][mm]
            ls.append(acc)
            vs.append(accv)
        lower[i] = tuple(ls)
        lv[i] = vs
    for i in nb:
        for c in idx:
            off[i].pop(c, None)
            oval[i].pop(c, None)
    for c in idx:
        off[c], oval[c] = {}, {}
    created = _schur_symmetric(state, nb, (lower, lv), (E, Ev), k, zero, mul)
    return LDLStep(tuple(idx), pivot, recip, inv, lower, bool(divided)), created


def _schur_symmetric(state, nb, L, E, k, zero, mul=mul) -> int:
    """Schur complement on the neighbours nb: a_ij -= L_i . E_j, atoms and values (a
    clique: this is the fill); returns how many new entries it created."""
    diag, dval, off, oval = state
    (lower, lv), (E, Ev) = L, E
    created = 0
    for a_, i in enumerate(nb):
        d = diag[i]
        dv = dval[i]
        for mm in range(k):
            d = sub(d, mul(lower[i][mm], E[i][mm]))
            dv = dv - lv[i][mm] * Ev[i][mm]
        diag[i], dval[i] = d, dv
        for j in nb[a_ + 1:]:
            old = off[i].get(j)
            new = old if old is not None else ZERO
            nv = oval[i].get(j, zero)
            for mm in range(k):
                new = sub(new, mul(lower[i][mm], E[j][mm]))
                nv = nv - lv[i][mm] * Ev[j][mm]
            if new is ZERO:
                if old is not None:
                    del off[i][j], off[j][i], oval[i][j], oval[j][i]
                continue
            if old is None:
                created += 1
            off[i][j] = off[j][i] = new
            oval[i][j] = oval[j][i] = nv
    return created


def _sym_ratio(v, ovals: dict) -> float:
    return _quality(v, _colmax_sym(v, ovals))


def _colmax_sym(dv, ovals: dict):
    colmax = np.abs(dv)
    for w in ovals.values():
        colmax = np.maximum(colmax, np.abs(w))
    return colmax


def _pick_symmetric(alive, state, scale, threshold, min_relative, step, names, label, samples):
    """The pivot of the next step, by the size of the clique its elimination creates
    (minimum degree), among the diagonals that pass the threshold test and the 2 x 2
    blocks, of an index whose diagonal does not with a neighbour, whose determinant
    passes it (the symmetric counterpart of LU's off-diagonal pivots: in a KKT matrix,
    a coordinate with the constraint that pins it down). Ties go to single pivots, then
    to the lowest indices. Failing those, the best sign-definite candidate of either kind
    that clears min_relative; else an error."""
    dval = state[1]
    weak = []
    best1, bad = _single_pivots(alive, state, scale, threshold, weak)
    blocks = _block_pivots(bad, state, scale, threshold, best1, weak)
    if blocks:
        (_, _, i, j), q, det = min(blocks, key=lambda b: b[0])
        return (i, j), _stats(step, (i, j), (i, j), det, scale[i] * scale[j], q)
    if best1 is not None:
        _, k, q = best1
        return (k,), _stats(step, (k,), (k,), dval[k], scale[k], q)
    for q, idx, v, sc in sorted(weak, key=lambda w: (-w[0], w[1])):
        st = _stats(step, idx, idx, v, sc, q, relaxed=True)
        if st.min_rel >= min_relative:
            return idx, st
        break
    raise _no_symmetric_pivot(alive, state, scale, step, names, label, samples)


def _single_pivots(alive, state, scale, threshold, weak):
    """The best diagonal pivot passing the threshold as (degree, index, quality) or None,
    and the indices whose diagonals fail it; sign-definite failures go to `weak`."""
    diag, dval, off, oval = state
    bad = []
    best1 = None
    for k in sorted(alive, key=lambda v: (len(oval[v]), v)):
        if best1 is not None and len(oval[k]) > best1[0]:
            bad.extend(v for v in alive if v not in bad and len(oval[v]) > best1[0] and
                       (diag[v] is ZERO or _sym_ratio(dval[v], oval[v]) < threshold))
            break
        q = 0.0 if diag[k] is ZERO else _sym_ratio(dval[k], oval[k])
        if q >= threshold:
            if best1 is None:
                best1 = (len(oval[k]), k, q)
            continue
        bad.append(k)
        if q > 0:
            weak.append((q, (k,), dval[k], scale[k]))
    return best1, bad


def _block_pivots(bad, state, scale, threshold, best1, weak):
    """The 2 x 2 blocks pairing a bad index with a neighbour that pass the threshold and
    make a smaller clique than best1, with their sort keys; sign-definite failures go to
    `weak`."""
    diag, dval, off, oval = state
    blocks = []
    seen = set()
    for l in sorted(bad):
        for k in sorted(off[l]):
            pair = (min(k, l), max(k, l))
            if pair in seen:
                continue
            seen.add(pair)
            cost = len((set(off[k]) | set(off[l])) - {k, l})
            if best1 is not None and cost >= best1[0]:
                continue
            i, j = pair
            e = oval[i][j]
            det = dval[i] * dval[j] - e * e
            q = _quality(det, _colmax_sym(dval[i], oval[i]) * _colmax_sym(dval[j], oval[j]))
            if q >= threshold:
                blocks.append(((cost, 0 if q >= 0.5 else 1, i, j), q, det))
            elif q > 0:
                weak.append((q, pair, det, scale[i] * scale[j]))
    return blocks


def _no_symmetric_pivot(alive, state, scale, step, names, label, samples) -> SingularPivotError:
    """The error when no pivot qualifies, naming the best diagonal and where it fails."""
    diag, dval = state[0], state[1]
    detail = ""
    cands = [k for k in sorted(alive) if diag[k] is not ZERO]
    if cands:
        k = max(cands, key=lambda v: float(np.abs(dval[v]).min()))
        st = _stats(step, (k,), (k,), dval[k], scale[k], 0.0)
        chg = "" if ((dval[k] > 0).all() or (dval[k] < 0).all()) else " and changes sign"
        detail = (f"; the best diagonal, {names[k]!r}, reaches |d| = {st.min_abs:.3g} (relative {st.min_rel:.3g})"
                  f"{chg} at {samples.describe(st.worst)}")
    return SingularPivotError(f"{label}: no symmetric pivot (nor 2 x 2 block) stays away from zero at step {step} "
                              f"(left: {', '.join(names[i] for i in sorted(alive))}){detail}; use LU")
