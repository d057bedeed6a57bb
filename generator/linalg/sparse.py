"""What the LU and LDL^T factorizations share: the errors, the sample points at which
pivots are chosen and checked (Samples), the matrix's values there, pivot statistics, the
factor's report and op counts (on the same lowering the C renderers print), the inverse
of a 1 x 1 or 2 x 2 pivot block over atoms or sample arrays alike, and the symmetric
orderings (minimum degree, symbolic elimination).

Invariants: Samples hold one row per point over symbol inputs, row 0 the nominal point;
a point where some entry of the matrix is not finite is dropped (and said so), never
used; the block inverse builds the same expression over atoms and over sample arrays, so
the numeric pivot tests see the values the atoms compute.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir import ONE, ZERO, Atom, Evaluator, ExpressionError, Sparse, as_atom, div, mul, sub

DEFAULT_THRESHOLD = 0.1  # worst-case |pivot| / max |entry| of its active column
MIN_RELATIVE = 1e-8  # below this (relative to the column scale) a pivot counts as vanishing


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
