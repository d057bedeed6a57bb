"""Straight-line sparse linear solves over atoms: LDL^T and LU with pivots fixed at
generation time.

A device that runs a kinematics or dynamics kernel solves small sparse linear systems
(Phi_q qd = beta, the KKT system of forward dynamics, the reactions of inverse dynamics)
at every call. Here those solves are unrolled into atoms, so every target (double C,
float32, fixed point, RTL) gets them through the ordinary pipeline: no loops, no branches,
no index arrays, no pivot search at run time.

    F = factor_lu(A, samples, row_names=..., col_names=...)   # or factor_ldlt(A, samples)
    x1 = F.solve(b1); x2 = F.solve(b2)                         # share the factor's atoms
    print(F.report(x1, x2))                                    # pivots, fill, op counts

Invariants:
* Only structural nonzeros exist. The elimination visits the stored entries of A and the
  fill that elimination creates from them; an update that folds to ZERO (exact
  cancellation) is dropped. No atom is ever built for a structural zero, and a zero entry
  of a right-hand side costs nothing (the constructors fold `0*x` and `y - 0`).
* One division per pivot. The reciprocal r_k = 1/pivot_k is an atom; multipliers and
  back substitution multiply by it (division costs 14+ cycles on a Cortex-M4F and a long
  iterative routine in fixed point, a multiplication one cycle).
* Every choice is made at generation time and is deterministic: orderings break ties by
  the lowest index, numeric pivot choices depend only on the matrix and the (seeded)
  sample points, so the same inputs give the same atoms and byte-identical C.
* A pivot is accepted only if, at every sample point, it keeps one sign and stays a
  fraction `threshold` of the largest entry of its column in the active submatrix
  (threshold partial pivoting, applied to the worst case). A pivot is a continuous
  function of the inputs wherever the earlier pivots do not vanish, so a sign change
  between two samples of a connected domain proves that it vanishes in between: that is
  reported as an error naming the rows and columns, never accepted. The test is only as
  good as the samples: a pivot could touch zero between samples without changing sign.
  The samples are the caller's (kernels use consistent configurations of the mechanism:
  see kernels.samples); `Samples.box` draws them from declared ranges.
* The atoms fix the order of every sum (the order of the elimination steps), so the
  reduced-precision renderings of a solve are reproducible.

Orderings and pivots:
* LDL^T, symmetric positive definite (a mass matrix, an augmented-Lagrangian matrix):
  exact minimum degree on the elimination graph (the criterion AMD approximates; exact
  degrees are cheap at the sizes of multibody systems), then the numeric factorization in
  that order, checking that every pivot stays positive over the samples. No square roots
  (Cholesky would need n of them). `definite=False` chooses the symmetric order during
  the elimination instead: by the size of the clique each elimination creates, among the
  diagonals that pass the numeric test and the 2 x 2 blocks (an index whose diagonal
  does not, with a neighbour) whose determinant does. That factors saddle-point systems
  such as the KKT matrix [M A^T; A 0], whose constraint diagonal is structurally zero and
  whose M may be singular (Euler parameters) along a normalization constraint.
* LU, general square (Phi_q, KKT, inverse-dynamics matrices): Markowitz pivoting, the
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

import math
from dataclasses import dataclass

import numpy as np

from ..ir import ONE, ZERO, Atom, Evaluator, ExpressionError, Sparse, add, as_atom, div, mul, sub

from ..lower import op_counts
from ..ir.graph import gc_paused

DEFAULT_THRESHOLD = 0.1  # worst-case |pivot| / max |entry| of its active column
MIN_RELATIVE = 1e-8  # below this (relative to the column scale) a pivot counts as vanishing
BACKTRACK_BUDGET = 2000  # pivot trials an LU search may spend after a dead end


class SolveError(ExpressionError):
    """A linear system that cannot be factored as asked (names rows and columns)."""


class SingularPivotError(SolveError):
    """A pivot vanishes (or changes sign) somewhere within the sampled input ranges."""

    def __init__(self, message: str, row: int | None = None, col: int | None = None,
                 min_abs: float | None = None, min_rel: float | None = None):
        super().__init__(message)
        self.row, self.col, self.min_abs, self.min_rel = row, col, min_abs, min_rel


# ---- sample points -----------------------------------------------------------------------
@dataclass
class Samples:
    """Points at which pivots are chosen and checked: `points[s, k]` is the value of
    `inputs[k]` at sample s, row 0 the nominal point; `what` says where they come from
    (reports quote it)."""

    inputs: list[Atom]
    points: np.ndarray
    what: str = ""

    def __post_init__(self):
        self.inputs = list(self.inputs)
        pts = np.asarray(self.points, dtype=np.float64)
        if pts.ndim == 1:
            pts = pts.reshape(1, -1) if self.inputs else pts.reshape(-1, 0)
        if pts.ndim != 2 or pts.shape[1] != len(self.inputs):
            raise SolveError(f"samples: points of shape {pts.shape} for {len(self.inputs)} inputs")
        self.points = pts
        for s in self.inputs:
            if not s.is_symbol:
                raise SolveError(f"samples: input {s} is not a symbol")

    @classmethod
    def box(cls, inputs, ranges, n: int = 64, seed: int = 0, nominal=None) -> "Samples":
        """The nominal point ({symbol: value}; the middle of each range where not given)
        and n uniform random points of the box `ranges` ({symbol: (lo, hi)})."""
        inputs = list(inputs)
        missing = [s.value.name for s in inputs if s not in ranges]
        if missing:
            raise SolveError(f"samples: no declared range for {', '.join(missing)}")
        lo = np.array([float(ranges[s][0]) for s in inputs])
        hi = np.array([float(ranges[s][1]) for s in inputs])
        nominal = nominal or {}
        mid = np.array([float(nominal.get(s, (a + b) / 2)) for s, a, b in zip(inputs, lo, hi)])
        rng = np.random.default_rng(seed)
        pts = np.vstack([mid[None, :], lo + (hi - lo) * rng.random((n, len(inputs)))])
        return cls(inputs, pts, f"the nominal point and {n} uniform random points of the declared ranges")

    def __add__(self, other: "Samples") -> "Samples":
        if len(self.inputs) != len(other.inputs) or any(a is not b for a, b in zip(self.inputs, other.inputs)):
            raise SolveError("samples: cannot join samples over different inputs")
        return Samples(self.inputs, np.vstack([self.points, other.points]), f"{self.what}; {other.what}")

    def __len__(self) -> int:
        return self.points.shape[0]

    def describe(self, s: int, limit: int = 10) -> str:
        vals = ", ".join(f"{x.value.name}={v:.6g}" for x, v in zip(self.inputs[:limit], self.points[s]))
        return f"sample {s} ({vals}{', ...' if len(self.inputs) > limit else ''})"


def _evaluate(A: Sparse, samples: Samples | None, label: str):
    """Values of A's stored entries at the samples, {(i, j): array [S]}, and the samples
    kept (points where some entry is undefined are dropped and said so)."""
    atoms = A.values()
    if samples is None:
        free = 0
        for a in atoms:
            free |= a.mask
        if free:
            from ..ir import topo

            names = sorted({x.value.name for x in topo(atoms) if x.is_symbol})
            raise SolveError(f"{label}: entries depend on {', '.join(names[:8])}; pivots are chosen "
                             "numerically, so sample points (Samples) are needed")
        samples = Samples([], np.zeros((1, 0)), "constant matrix")
    Y = np.atleast_2d(Evaluator(atoms, samples.inputs)(samples.points)) if atoms else np.zeros((len(samples), 0))
    keep = np.all(np.isfinite(Y), axis=1)
    if not keep.any():
        raise SolveError(f"{label}: the matrix is not finite at any of the {len(samples)} sample points")
    if not keep.all():
        samples = Samples(samples.inputs, samples.points[keep],
                          f"{samples.what} ({int((~keep).sum())} points where the matrix is undefined dropped)")
        Y = Y[keep]
    return {ij: Y[:, k] for k, ij in enumerate(A.pattern)}, samples


def _names(names, n: int, default: str) -> list[str]:
    if names is None:
        return [f"{default}{i}" for i in range(n)]
    names = list(names)
    if len(names) != n:
        raise SolveError(f"{len(names)} names given for {n} {default.strip()}s")
    return names


def _rhs(b, n: int, label: str) -> list[Atom]:
    b = [as_atom(x) for x in b]
    if len(b) != n:
        raise SolveError(f"{label}: right-hand side of {len(b)} entries for a {n} x {n} system")
    return b


def _quality(v: np.ndarray, colmax: np.ndarray) -> float:
    """Worst case over the samples of |v| / colmax; 0 if v changes sign (or vanishes)."""
    if not ((v > 0).all() or (v < 0).all()):
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(colmax > 0, np.abs(v) / np.where(colmax > 0, colmax, 1.0), 0.0)
    return float(r.min())


@dataclass
class PivotStats:
    """One pivot (or 2 x 2 pivot block): where it sits and how far from zero it stays over
    the samples. For a block, the figures are those of its determinant."""

    step: int
    rows: tuple[int, ...]
    cols: tuple[int, ...]
    min_abs: float  # min over samples of |pivot|
    min_rel: float  # min over samples of |pivot| / scale of its original columns
    ratio: float  # min over samples of |pivot| / max |active column| (the threshold test)
    worst: int  # sample where min_rel is reached
    relaxed: bool = False  # taken below the threshold: nothing better was left

    @property
    def row(self) -> int:
        return self.rows[0]

    @property
    def col(self) -> int:
        return self.cols[0]


def _stats(step, rows, cols, v, scale, ratio, relaxed=False) -> PivotStats:
    """Statistics of a pivot with sample values v; scale: the samples' column scale (for a
    block, the product of its columns' scales)."""
    av = np.abs(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(scale > 0, av / np.where(scale > 0, scale, 1.0), 0.0)
    w = int(np.argmin(rel))
    return PivotStats(step, tuple(rows), tuple(cols), float(av.min()), float(rel[w]), float(ratio), w, relaxed)


class _Factor:
    """What LU and LDL^T factors share: pivot statistics, op counts and the report."""

    kind = ""

    @property
    def min_pivot(self) -> float:
        """Smallest |pivot| over all pivots and samples."""
        return min((s.min_abs for s in self.stats), default=math.inf)

    @property
    def min_relative_pivot(self) -> float:
        """Smallest |pivot| / max |entry of its original column| over pivots and samples."""
        return min((s.min_rel for s in self.stats), default=math.inf)

    @property
    def divisions(self) -> int:
        return len({r for r in self.recips if r.args})

    def factor_atoms(self) -> list[Atom]:
        """The atoms of the factorization (pivot-block inverses, multipliers, U rows)."""
        raise NotImplementedError

    def ops(self, *solutions) -> dict[str, dict[str, int]]:
        """Operation counts of computing `solutions` (or, without any, the factors), on the
        same lowering the C renderers print, split by what each instruction computes: an
        entry of the matrix, a part of the factorization, or a part of the solves (which
        includes right-hand sides built in between, such as gamma from the solved
        velocities). Helper values of the lowering count with the latest of their operands."""
        from collections import Counter

        from ..ir import topo

        from ..lower import lower

        mat = [a for a in self.A.values() if a.args]
        fac = self.factor_atoms()
        roots = [a for x in solutions for a in x] if solutions else mat + fac
        level = {a: 0 for a in topo(mat)}
        for a in topo(fac):
            level.setdefault(a, 1)
        for a in topo(roots):
            level.setdefault(a, 2)
        tape = lower(roots, None)
        lv: dict[int, int] = {}
        counts = [Counter(), Counter(), Counter()]
        for ins in tape.instrs:
            k = level.get(tape.atoms[ins.dst[0]])
            if k is None:  # a helper of the lowering (x**2 for x**4, c*x for c*(x*y))
                k = max([lv[o[1]] for o in ins.args if o[0] == "t"] + [0])
            for d in ins.dst:
                lv[d] = k
            counts[k][ins.op] += 1
        out = {}
        for name, c in zip(("matrix", "factor", "solve"), counts):
            if name == "solve" and not solutions:
                continue
            out[name] = dict(sorted(c.items()), total=sum(c.values()))
        out["total"] = tape.counts()
        return out

    def report(self, *solutions) -> str:
        lines = [f"{self.kind} of {self.label}: {self.n} x {self.n}, {self.A.nnz} stored entries, "
                 f"fill {self.fill}, {self.divisions} divisions"]
        lines.append(f"  pivots checked at {len(self.samples)} points: {self.samples.what or 'given samples'}")
        lines.append(f"  min |pivot| {self.min_pivot:.3g}; min |pivot| / column scale {self.min_relative_pivot:.3g}")
        for s in sorted(self.stats, key=lambda s: (s.min_rel, s.step))[:3]:
            flag = " (below the threshold: the best left)" if s.relaxed else ""
            where = (f"row {self.row_names[s.row]!r}, column {self.col_names[s.col]!r}" if len(s.rows) == 1 else
                     f"2x2 block, rows {', '.join(repr(self.row_names[i]) for i in s.rows)}, columns "
                     f"{', '.join(repr(self.col_names[j]) for j in s.cols)} (determinant)")
            lines.append(f"    step {s.step}: {where}: min |p| {s.min_abs:.3g}, relative {s.min_rel:.3g}, "
                         f"column ratio {s.ratio:.3g}{flag}")
        ops = self.ops(*solutions)
        for part in ("matrix", "factor", "solve", "total"):
            if part in ops:
                c = ops[part]
                detail = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k != "total")
                lines.append(f"  ops {part}: {c.get('total', 0)}" + (f" ({detail})" if detail else ""))
        return "\n".join(lines)

    def divisor_ranges(self) -> list[tuple[Atom, float, float]]:
        """(divisor, min, max) over the samples for every division the factorization
        performs (the x of each 1/x its reciprocals fold to): where the pivots live on the
        kernel's domain, which a range analysis over the whole declared input box cannot
        know (a four-bar's pivots vanish at inconsistent points of its box). Sampled, not
        sound: points between the samples may lie slightly outside."""
        from ..ir import topo

        divs = []
        for a in topo([r for r in self.recips if r.args]):
            if a.op == "div" and a.args[0] is ONE and a not in divs:
                divs.append(a)
        if not divs:
            return []
        Y = np.atleast_2d(Evaluator([d.args[1] for d in divs], self.samples.inputs)(self.samples.points))
        return [(d.args[1], float(Y[:, k].min()), float(Y[:, k].max())) for k, d in enumerate(divs)]

    def pivot_values(self, points) -> np.ndarray:
        """The pivots in elimination order at `points` (over the samples' inputs): for
        checking a kernel at points other than the samples."""
        return np.atleast_2d(Evaluator(self.pivots, self.samples.inputs)(np.atleast_2d(points)))


# ---- minimum degree ----------------------------------------------------------------------
def _symmetric_adjacency(pattern, n: int) -> list[set[int]]:
    adj = [set() for _ in range(n)]
    for i, j in pattern:
        if i != j:
            adj[i].add(j)
            adj[j].add(i)
    return adj


def minimum_degree(pattern, n: int) -> list[int]:
    """A fill-reducing symmetric order for the pattern [(i, j)] of an n x n matrix (taken
    as the pattern of A + A^T): exact minimum degree on the elimination graph, ties broken
    by the lowest index."""
    adj = _symmetric_adjacency(pattern, n)
    alive = set(range(n))
    order = []
    while alive:
        k = min(alive, key=lambda v: (len(adj[v]), v))
        order.append(k)
        nb = adj[k]
        for i in nb:
            adj[i].discard(k)
            adj[i] |= nb - {i}
        adj[k] = set()
        alive.discard(k)
    return order


def symbolic_ldlt(pattern, n: int, steps) -> dict:
    """The structure of L for a symmetric elimination order: {step: rows of its columns
    below the pivot} (original indices), from the elimination graph. A step is an index,
    or a tuple of two for a 2 x 2 pivot block."""
    return _symbolic(pattern, n, steps)[0]


def _symbolic(pattern, n: int, steps):
    """(structure as in symbolic_ldlt, fill): fill counts the entries of the lower
    triangle that elimination creates where A has none."""
    adj = _symmetric_adjacency(pattern, n)
    out = {}
    fill = 0
    for st in steps:
        idx = st if isinstance(st, tuple) else (st,)
        nb = set().union(*(adj[k] for k in idx)) - set(idx)
        out[st] = sorted(nb)
        for i in nb:
            for k in idx:
                adj[i].discard(k)
            new = nb - {i} - adj[i]
            fill += len(new)
            adj[i] |= new
        for k in idx:
            adj[k] = set()
    return out, fill // 2


# ---- LDL^T -------------------------------------------------------------------------------
@dataclass
class LDLStep:
    """One step of a symmetric elimination: the pivot index (or two, for a 2 x 2 block),
    the pivot (the diagonal entry, or the block's determinant) and its reciprocal, the
    inverse of the pivot block inv[m][k] (symmetric), and the multipliers lower = {index
    i: (L[i, idx[k]] for each pivot index)} of the indices eliminated later."""

    idx: tuple[int, ...]
    pivot: Atom
    recip: Atom
    inv: tuple[tuple[Atom, ...], ...]
    lower: dict[int, tuple[Atom, ...]]


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

    def factor_atoms(self) -> list[Atom]:
        out = []
        for st in self.steps:
            out += [a for r in st.inv for a in r]
            out += [a for v in st.lower.values() for a in v]
        return [a for a in out if a.args]

    def solve(self, b) -> list[Atom]:
        """x with A x = b (atoms): L y = P b, z = D^-1 y, then x = P^T L^-T z."""
        y = _rhs(b, self.n, self.label)
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
                acc = ZERO
                for j, v in enumerate(yb):
                    acc = add(acc, mul(st.inv[m][j], v))
                for i, ls in st.lower.items():
                    acc = sub(acc, mul(ls[m], x[i]))
                x[k] = acc
        return x


def factor_ldlt(A: Sparse, samples: Samples | None = None, names=None, label: str = "A",
                definite: bool = True, threshold: float = DEFAULT_THRESHOLD,
                min_relative: float = MIN_RELATIVE) -> LDLFactor:
    """Symmetric factorization P A P^T = L D L^T of a sparse matrix of atoms.

    A's pattern must be symmetric; the lower triangle's atoms are used (an upper entry
    that is a different atom must agree numerically at the samples). definite=True: A is
    positive definite over the samples (minimum-degree order; every pivot must stay > 0).
    definite=False: symmetric pivots chosen during the elimination, the minimum-degree
    index whose diagonal passes the worst-case threshold test, else a 2 x 2 block of two
    coupled indices whose determinant does (quasi-definite and saddle-point systems, e.g.
    a KKT matrix whose mass matrix is singular along a normalization constraint)."""
    with gc_paused():
        return _factor_ldlt(A, samples, names, label, definite, threshold, min_relative)


def _factor_ldlt(A, samples, names, label, definite, threshold, min_relative):
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

    static = minimum_degree(A.pattern, n) if definite else None
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
        step, created = _eliminate_symmetric(state, idx, zero)
        fill += created
        steps.append(step)
        alive -= set(idx)
    _, predicted = _symbolic(A.pattern, n, [st.idx if len(st.idx) == 2 else st.idx[0] for st in steps])
    return LDLFactor(label, n, A, steps, stats, samples, fill, predicted, names, names)


def _eliminate_symmetric(state, idx, zero):
    """Eliminate the pivot index (or 2 x 2 block) idx from the active matrix, atoms and
    sample values side by side; returns the step and how many new entries it created."""
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
    E = {i: [off[i].get(c, ZERO) for c in idx] for i in nb}  # unscaled columns: E_i = L_i D
    Ev = {i: [oval[i].get(c, zero) for c in idx] for i in nb}
    lower, lv = {}, {}
    for i in nb:
        ls, vs = [], []
        for mm in range(k):
            acc, accv = ZERO, zero
            for j in range(k):
                acc = add(acc, mul(E[i][j], inv[j][mm]))
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
    created = 0
    # Schur complement on the neighbours: a_ij -= L_i . E_j (a clique: this is the fill)
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
    return LDLStep(tuple(idx), pivot, recip, inv, lower), created


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
    diag, dval, off, oval = state
    weak, bad = [], []
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
    detail = ""
    cands = [k for k in sorted(alive) if diag[k] is not ZERO]
    if cands:
        k = max(cands, key=lambda v: float(np.abs(dval[v]).min()))
        st = _stats(step, (k,), (k,), dval[k], scale[k], 0.0)
        chg = "" if ((dval[k] > 0).all() or (dval[k] < 0).all()) else " and changes sign"
        detail = (f"; the best diagonal, {names[k]!r}, reaches |d| = {st.min_abs:.3g} (relative {st.min_rel:.3g})"
                  f"{chg} at {samples.describe(st.worst)}")
    raise SingularPivotError(f"{label}: no symmetric pivot (nor 2 x 2 block) stays away from zero at step {step} "
                             f"(left: {', '.join(names[i] for i in sorted(alive))}){detail}; use LU")


# ---- LU ----------------------------------------------------------------------------------
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


def _block_inverse(B, k, zero, one, div_, mul_, sub_, neg_):
    """(pivot, recip, inv) of a 1 x 1 or 2 x 2 block B[row][col], over atoms or arrays
    (missing entries are `zero`): inv[m][k] is column m, pivot row k of B^-1."""
    if k == 1:
        r = div_(one, B[0][0])
        return B[0][0], r, ((r,),)
    (a, b), (c, d) = B
    det = sub_(mul_(a, d), mul_(b, c))
    r = div_(one, det)
    return det, r, ((mul_(d, r), neg_(mul_(b, r))), (neg_(mul_(c, r)), mul_(a, r)))


_NUM = dict(div_=np.divide, mul_=np.multiply, sub_=np.subtract, neg_=np.negative)
_SYM = dict(div_=div, mul_=mul, sub_=sub, neg_=lambda a: sub(ZERO, a))


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
    rows = [dict() for _ in range(n)]
    rv = [dict() for _ in range(n)]
    cols = [dict() for _ in range(n)]
    for (i, j), a in A.entries.items():
        rows[i][j] = a
        rv[i][j] = vals[(i, j)]
        cols[j][i] = None
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
        steps.append(LUStep(tuple(R), tuple(C), pivot, recip, inv, lower, upper))
    return LUFactor(label, n, A, steps, stats, samples, fill, rn, cn, backtracks)
