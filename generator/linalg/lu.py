"""General straight-line factorization P A Q = L U over atoms (factor_lu).

LU, general square (Phi_q, KKT, inverse-dynamics matrices): Markowitz pivoting, the
column and the row of each pivot chosen together among the numerically acceptable
entries by the least (row count - 1) x (column count - 1). A column order computed
beforehand (COLAMD on A^T A) must assume any row may pivot; here the pivot rows are
known at generation time, so choosing both at once costs nothing at run time and fills
in less. Where no single entry passes, a 2 x 2 block of two rows and two columns whose
determinant does: over a full turn of a crank every entry of its [x y; sin -cos] rows
changes sign, the determinant does not. If the search still runs into a dead end, it
backtracks over the alternatives of earlier steps within a fixed budget, then accepts
the best pivots below the threshold (flagged in the report), then gives up with an
error that names what is left.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import ONE, ZERO, Atom, Sparse, add, mul, sub
from ..ir.graph import gc_paused
from .sparse import (_NUM, _SYM, DEFAULT_THRESHOLD, MIN_RELATIVE, PivotStats, Samples, SingularPivotError,
                     SolveError, _block_inverse, _evaluate, _Factor, _names, _quality, _rhs, _stats)

BACKTRACK_BUDGET = 2000  # pivot trials an LU search may spend after a dead end


@dataclass
class LUStep:
    """One elimination step: pivot rows and columns (one each, or two for a 2 x 2 block),
    the pivot (the entry, or the block's determinant) and its reciprocal, the inverse of
    the pivot block inv[m][k] (column m, pivot row k), the multipliers lower = {row i:
    (l_i per pivot row)} of the rows eliminated later and the pivot rows' entries upper =
    {column j: (entry per pivot row)} in the columns eliminated later."""

    rows: tuple[int, ...]
    cols: tuple[int, ...]
    pivot: Atom
    recip: Atom
    inv: tuple[tuple[Atom, ...], ...]
    lower: dict[int, tuple[Atom, ...]]
    upper: dict[int, tuple[Atom, ...]]


@dataclass
class LUFactor(_Factor):
    """P A Q = L U with every pivot fixed at generation time (see LUStep)."""

    label: str
    n: int
    A: Sparse
    steps: list[LUStep]
    stats: list[PivotStats]
    samples: Samples
    fill: int
    row_names: list[str]
    col_names: list[str]
    backtracks: int = 0
    kind: str = "LU"

    @property
    def pivots(self) -> list[Atom]:
        return [s.pivot for s in self.steps]

    @property
    def recips(self) -> list[Atom]:
        return [s.recip for s in self.steps]

    @property
    def blocks(self) -> int:
        """How many steps pivot on a 2 x 2 block."""
        return sum(1 for s in self.steps if len(s.rows) == 2)

    def factor_atoms(self) -> list[Atom]:
        out = []
        for s in self.steps:
            out += [a for r in s.inv for a in r]
            out += [a for v in s.lower.values() for a in v]
            out += [a for v in s.upper.values() for a in v]
        return [a for a in out if a.args]

    def solve(self, b) -> list[Atom]:
        """x with A x = b (atoms): forward elimination of b, then back substitution."""
        y = _rhs(b, self.n, self.label)
        for st in self.steps:
            yp = [y[p] for p in st.rows]
            for i, ls in st.lower.items():
                acc = y[i]
                for l, v in zip(ls, yp):
                    acc = sub(acc, mul(l, v))
                y[i] = acc
        x = [ZERO] * self.n
        for st in reversed(self.steps):
            acc = [y[p] for p in st.rows]
            for j, us in st.upper.items():
                for k, u in enumerate(us):
                    acc[k] = sub(acc[k], mul(u, x[j]))
            for m, c in enumerate(st.cols):
                v = ZERO
                for k, a in enumerate(acc):
                    v = add(v, mul(st.inv[m][k], a))
                x[c] = v
        return x

    def solve_transposed(self, b) -> list[Atom]:
        """x with A^T x = b from the same factors: U^T w = Q^T b, L^T v = w, x = P^T v."""
        acc = _rhs(b, self.n, self.label)  # indexed by the columns of A (rows of A^T)
        ws = []
        for st in self.steps:
            w = []
            for k in range(len(st.rows)):
                v = ZERO
                for m, c in enumerate(st.cols):
                    v = add(v, mul(st.inv[m][k], acc[c]))
                w.append(v)
            for j, us in st.upper.items():
                for k, u in enumerate(us):
                    acc[j] = sub(acc[j], mul(u, w[k]))
            ws.append(w)
        x = [ZERO] * self.n
        for st, w in zip(reversed(self.steps), reversed(ws)):
            for k, p in enumerate(st.rows):
                v = w[k]
                for i, ls in st.lower.items():
                    v = sub(v, mul(ls[k], x[i]))
                x[p] = v
        return x


def factor_lu(A: Sparse, samples: Samples | None = None, row_names=None, col_names=None, label: str = "A",
              threshold: float = DEFAULT_THRESHOLD, min_relative: float = MIN_RELATIVE,
              budget: int = BACKTRACK_BUDGET) -> LUFactor:
    """LU of a square sparse matrix of atoms with every pivot chosen at generation time
    (Markowitz order among the candidates that pass the worst-case threshold test over the
    samples; see the module doc). Raises SingularPivotError naming the rows and columns
    (`row_names`, `col_names`: e.g. constraint and coordinate names) when no sequence of
    pivots stays away from zero over the samples."""
    with gc_paused():
        return _factor_lu(A, samples, row_names, col_names, label, threshold, min_relative, budget)


def _factor_lu(A, samples, row_names, col_names, label, threshold, min_relative, budget):
    n, m = A.shape
    if n != m:
        raise SolveError(f"{label}: LU needs a square matrix, got {n} x {m}")
    rn = _names(row_names, n, "row ")
    cn = _names(col_names, n, "column ")
    used_r = {i for i, _ in A.entries}
    used_c = {j for _, j in A.entries}
    empty = ([f"row {rn[i]!r}" for i in range(n) if i not in used_r]
             + [f"column {cn[j]!r}" for j in range(n) if j not in used_c])
    if empty:
        raise SingularPivotError(f"{label}: structurally singular: {', '.join(empty)} "
                                 f"{'has' if len(empty) == 1 else 'have'} no entries")
    vals, samples = _evaluate(A, samples, label)
    scale = np.zeros((n, len(samples)))
    for (i, j), v in vals.items():
        scale[j] = np.maximum(scale[j], np.abs(v))
    search = _PivotSearch(vals, n, len(samples), scale, threshold, min_relative)
    seq, backtracks = search.run(budget, strict=True)
    if seq is None:  # no sequence passes the threshold everywhere: allow the best left
        seq, more = search.run(budget, strict=False)
        backtracks += more
    if seq is None:
        search.fail(rn, cn, label, samples)
    return _lu_atoms(A, vals, scale, seq, samples, rn, cn, label, backtracks)


class _PivotSearch:
    """The pivot sequence of an LU, searched on the sample values alone (the atoms are
    built once it is fixed, so abandoned branches leave no atoms behind). Depth first: at
    each step the acceptable candidates, best first; a step with none backtracks."""

    MAX_BLOCK_TRIALS = 20000  # 2 x 2 candidates examined per step at most

    def __init__(self, vals, n, S, scale, threshold, min_relative):
        self.n, self.S, self.scale = n, S, scale
        self.threshold, self.min_relative = threshold, min_relative
        self.zero = np.zeros(S)
        rows = [dict() for _ in range(n)]
        cols = [dict() for _ in range(n)]
        for (i, j), v in vals.items():
            rows[i][j] = v
            cols[j][i] = None
        self.start = (rows, cols, {})
        self.dead_end = None

    def _colmax(self, state, j):
        rows, cols, _ = state
        return np.max(np.vstack([np.abs(rows[i][j]) for i in cols[j]]), axis=0)

    def _scalars(self, state, strict: bool):
        """Single-entry pivots: those passing the threshold in Markowitz order (cost, then
        a band of the ratio, then indices); not strict: the sign-definite ones clearing
        min_relative, best ratio first."""
        rows, cols, qcache = state
        out = []
        for j in range(self.n):
            cj = cols[j]
            if not cj:
                continue
            qs = qcache.get(j)
            if qs is None:  # a column's ratios change only when the column is updated
                colmax = self._colmax(state, j)
                qs = qcache[j] = [(i, _quality(rows[i][j], colmax)) for i in cj]
            for i, q in qs:
                if strict and q >= self.threshold:
                    cost = (len(rows[i]) - 1) * (len(cj) - 1)
                    # the band keeps an ulp of difference between machines from flipping a choice
                    out.append(((cost, 0 if q >= 0.5 else 1, j, i), (i,), (j,), q, False))
                elif not strict and 0 < q < self.threshold:
                    if _stats(0, (i,), (j,), rows[i][j], self.scale[j], q).min_rel >= self.min_relative:
                        out.append(((-q, j, i), (i,), (j,), q, True))
        out.sort(key=lambda c: c[0])
        return [c[1:] for c in out]

    def _blocks(self, state, strict: bool):
        """2 x 2 pivot blocks on two rows that both have entries in both columns (a block
        with a structural zero only multiplies two scalar pivots). Needed where every
        single entry changes sign over the samples but a determinant does not, e.g. the
        [x, y; sin, -cos] block of a crank turning through a full revolution."""
        rows, cols, _ = state
        alive = [j for j in range(self.n) if cols[j]]
        colmax = {j: self._colmax(state, j) for j in alive}
        out = []
        tried = 0
        for a_, c1 in enumerate(alive):
            for c2 in alive[a_ + 1:]:
                common = [i for i in cols[c1] if i in cols[c2]]
                common.sort()
                for x_, p1 in enumerate(common):
                    for p2 in common[x_ + 1:]:
                        tried += 1
                        if tried > self.MAX_BLOCK_TRIALS:
                            break
                        det = rows[p1][c1] * rows[p2][c2] - rows[p1][c2] * rows[p2][c1]
                        sc = colmax[c1] * colmax[c2]
                        q = _quality(det, sc)
                        if strict and q >= self.threshold:
                            cost = ((len(set(rows[p1]) | set(rows[p2])) - 2)
                                    * (len(set(cols[c1]) | set(cols[c2])) - 2))
                            out.append(((cost, 0 if q >= 0.5 else 1, c1, c2, p1, p2), (p1, p2), (c1, c2), q, False))
                        elif not strict and 0 < q < self.threshold:
                            st = _stats(0, (p1, p2), (c1, c2), det, self.scale[c1] * self.scale[c2], q)
                            if st.min_rel >= self.min_relative:
                                out.append(((-q, c1, c2, p1, p2), (p1, p2), (c1, c2), q, True))
        out.sort(key=lambda c: c[0])
        return [c[1:] for c in out]

    def _phase(self, state, phase: int, strict: bool):
        if phase == 0:
            return self._scalars(state, True)
        if phase == 1:
            return self._blocks(state, True)
        if phase == 2 and not strict:  # below the threshold, scalars and blocks by ratio
            return sorted(self._scalars(state, False) + self._blocks(state, False), key=lambda c: -c[2])
        return None

    def _eliminate(self, state, R, C):
        rows, cols, qcache = list(state[0]), list(state[1]), dict(state[2])
        k = len(R)
        zero = self.zero
        B = [[rows[p].get(c, zero) for c in C] for p in R]
        _, _, inv = _block_inverse(B, k, zero, 1.0, **_NUM)
        # which multipliers exist structurally (an inverse entry of a 2 x 2 block comes
        # from one entry of the block: inv[0][0] from d, inv[0][1] from b, ...)
        present = [[c in rows[p] for c in C] for p in R]
        inv_p = ((True,),) if k == 1 else ((present[1][1], present[0][1]), (present[1][0], present[0][0]))
        prow: dict[int, list] = {}
        for kk, p in enumerate(R):
            for j, v in rows[p].items():
                if j not in C:
                    prow.setdefault(j, [None] * k)[kk] = v
        affected = sorted({i for c in C for i in cols[c]} - set(R))
        for j in prow:
            cols[j] = {i: None for i in cols[j] if i not in R}
            qcache.pop(j, None)
        for i in affected:
            ri = dict(rows[i])
            ai = [ri.pop(c, None) for c in C]
            ls = []
            for kk in range(k):
                terms = [ai[m] * inv[m][kk] for m in range(k) if ai[m] is not None and inv_p[m][kk]]
                ls.append(sum(terms[1:], terms[0]) if terms else None)
            for j, us in prow.items():
                terms = [ls[kk] * us[kk] for kk in range(k) if ls[kk] is not None and us[kk] is not None]
                if terms:
                    old = ri.get(j)
                    upd = sum(terms[1:], terms[0])
                    ri[j] = -upd if old is None else old - upd
                    cols[j][i] = None
            rows[i] = ri
        for p in R:
            rows[p] = {}
        for c in C:
            cols[c] = {}
            qcache.pop(c, None)
        return rows, cols, qcache

    def run(self, budget: int, strict: bool):
        """([(rows, cols, ratio, relaxed)] or None, number of backtracks)."""
        levels = []  # [state before the step, phase, candidates, next to try]
        seq = []
        state = self.start
        trials = backtracks = 0
        left = self.n
        while left > 0:
            lvl = [state, 0, self._phase(state, 0, strict), 0]
            levels.append(lvl)
            while True:  # the next untried candidate, at this level or by backtracking
                lvl = levels[-1]
                if lvl[3] < len(lvl[2]):
                    break
                nxt = self._phase(lvl[0], lvl[1] + 1, strict)
                if nxt is not None:
                    lvl[1] += 1
                    lvl[2], lvl[3] = nxt, 0
                    continue
                depth = len(seq)
                if self.dead_end is None or depth > self.dead_end[0]:
                    self.dead_end = (depth, lvl[0])
                levels.pop()
                if not levels:
                    return None, backtracks
                R, _, _, _ = seq.pop()
                left += len(R)
                backtracks += 1
            trials += 1
            if trials > self.n + budget:
                return None, backtracks
            R, C, q, relaxed = lvl[2][lvl[3]]
            lvl[3] += 1
            seq.append((R, C, q, relaxed))
            left -= len(R)
            state = self._eliminate(lvl[0], R, C)
        return seq, backtracks

    def fail(self, rn, cn, label, samples):
        step, (rows, cols, _) = self.dead_end
        n = self.n
        left_r = [i for i in range(n) if rows[i]]
        left_c = [j for j in range(n) if cols[j]]
        msg = (f"{label}: no pivot stays away from zero over the {len(samples)} sample points after "
               f"{n - len(left_r)} of {n} eliminations (rows left: {', '.join(repr(rn[i]) for i in left_r)}; "
               f"columns left: {', '.join(repr(cn[j]) for j in left_c)})")
        best = None
        for j in left_c:
            for i in cols[j]:
                v = rows[i][j]
                if best is None or np.abs(v).min() > np.abs(best[2]).min():
                    best = (i, j, v)
        row = col = mn = mr = None
        if best is None:
            msg += ": what is left is structurally zero (the matrix is structurally singular)"
        else:
            i, j, v = best
            st = _stats(step, (i,), (j,), v, self.scale[j], 0.0)
            row, col, mn, mr = i, j, st.min_abs, st.min_rel
            chg = "" if ((v > 0).all() or (v < 0).all()) else " and changes sign"
            msg += (f"; the best candidate, row {rn[i]!r} column {cn[j]!r}, comes down to |pivot| = "
                    f"{st.min_abs:.3g} (relative {st.min_rel:.3g} of the column scale){chg} at "
                    f"{samples.describe(st.worst)}")
        msg += ". The matrix is singular, or nearly so, somewhere within the sampled input ranges."
        raise SingularPivotError(msg, row, col, mn, mr)


def _lu_atoms(A, vals, scale, seq, samples, rn, cn, label, backtracks) -> LUFactor:
    """The atoms of the elimination along a fixed pivot sequence, and its statistics
    (recomputed on the atoms' own structure: entries that cancel to ZERO are gone)."""
    n = A.shape[0]
    zero = np.zeros(len(samples))
    active = _lu_active(A, vals, n)
    rows, rv, cols = active
    steps, stats = [], []
    fill = 0
    for s, (R, C, _q, relaxed) in enumerate(seq):
        k = len(R)
        B = [[rows[p].get(c, ZERO) for c in C] for p in R]
        Bv = [[rv[p].get(c, zero) for c in C] for p in R]
        pivot, recip, inv = _block_inverse(B, k, ZERO, ONE, **_SYM)
        pv, _, invv = _block_inverse(Bv, k, zero, 1.0, **_NUM)
        if pivot is ZERO:  # the numeric search saw a value where the atoms cancel exactly
            raise SingularPivotError(f"{label}: pivot on rows {[rn[p] for p in R]}, columns {[cn[c] for c in C]} "
                                     "cancels to zero exactly", R[0], C[0], 0.0, 0.0)
        cm = [np.max(np.vstack([np.abs(rv[i][c]) for i in cols[c]]), axis=0) for c in C]
        sc = scale[C[0]] if k == 1 else scale[C[0]] * scale[C[1]]
        stats.append(_stats(s, R, C, pv, sc, _quality(pv, cm[0] if k == 1 else cm[0] * cm[1]), relaxed))
        lower, upper, created = _lu_eliminate(active, R, C, (inv, invv), zero)
        fill += created
        steps.append(LUStep(tuple(R), tuple(C), pivot, recip, inv, lower, upper))
    return LUFactor(label, n, A, steps, stats, samples, fill, rn, cn, backtracks)


def _lu_active(A, vals, n):
    """The active matrix by rows (atoms, sample values) and its column pattern."""
    rows = [dict() for _ in range(n)]
    rv = [dict() for _ in range(n)]
    cols = [dict() for _ in range(n)]
    for (i, j), a in A.entries.items():
        rows[i][j] = a
        rv[i][j] = vals[(i, j)]
        cols[j][i] = None
    return rows, rv, cols


def _lu_eliminate(active, R, C, invs, zero):
    """Eliminate pivot rows R and columns C from the active matrix, atoms and sample values
    side by side; returns the step's lower and upper parts and how many entries it filled."""
    rows, rv, cols = active
    inv, invv = invs
    k = len(R)
    fill = 0
    upper: dict[int, list] = {}
    for kk, p in enumerate(R):
        for j in sorted(rows[p]):
            if j not in C:
                upper.setdefault(j, [ZERO] * k)[kk] = rows[p][j]
    upper = {j: tuple(upper[j]) for j in sorted(upper)}
    upv = {j: [rv[p].get(j, zero) for p in R] for j in upper}
    lower = {}
    for i in sorted({i for c in C for i in cols[c]} - set(R)):
        ai = [rows[i].pop(c, ZERO) for c in C]
        av = [rv[i].pop(c, zero) for c in C]
        ls, lv = [], []
        for kk in range(k):
            acc, accv = ZERO, zero
            for m in range(k):
                acc = add(acc, mul(ai[m], inv[m][kk]))
                accv = accv + av[m] * invv[m][kk]
            ls.append(acc)
            lv.append(accv)
        lower[i] = tuple(ls)
        for j, us in upper.items():
            old = rows[i].get(j)
            new = old if old is not None else ZERO
            nv = rv[i].get(j, zero)
            for kk in range(k):
                new = sub(new, mul(ls[kk], us[kk]))
                nv = nv - lv[kk] * upv[j][kk]
            if new is ZERO:
                if old is not None:
                    del rows[i][j], rv[i][j], cols[j][i]
                continue
            if old is None:
                fill += 1
            rows[i][j] = new
            rv[i][j] = nv
            cols[j][i] = None
    for p in R:
        for j in rows[p]:
            cols[j].pop(p, None)
        rows[p], rv[p] = {}, {}
    for c in C:
        cols[c] = {}
    return lower, upper, fill
