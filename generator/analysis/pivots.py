"""Proof that a straight-line LU's pivots, fixed at generation time from samples, stay away
from zero over every box of an operating envelope's cover (corners included), not only at
the samples.

Each pivot (an atom of the matrix's inputs) is enclosed by interval arithmetic
(analysis.intervals) over each cell; a cell where some pivot's enclosure contains 0 is
bisected along its widest input (relative to the cover's span) up to PIVOT_SPLITS times.
A box still unproved at that depth is checked at its centre and two corners: a pivot of the
other sign than elsewhere, or 0, is a real crossing (no bound or order can save it), else the
proof is only inconclusive (interval overestimation; range analysis may still prove the
division).

    prove_pivots(F, cover) -> PivotProof          proof over the cover's cells
    enclose_bisected(ev, lo, hi, dims)             bisected enclosures (range analysis hints)
    shrunk(cover, quantities, f)                   the cells of the envelope shrunk to f of its ranges
    grid_samples(samples, cover, points)           a grid over each cell, corners included
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir import ExpressionError
from ..linalg import Samples
from .intervals import IntervalEvaluator

__all__ = ["PIVOT_SPLITS", "PivotProof", "enclose_bisected", "grid_samples", "prove_pivots",
           "shrunk", "Cells"]

PIVOT_SPLITS = 12  # bisections of a cell before a pivot's enclosure is given up on
MAX_BOXES = 1 << 13  # boxes a proof keeps at once (a bound on its work)
CHUNK = 512  # boxes per interval evaluation (every atom's bounds are held: memory)
FRACTIONS = (0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)  # shrunk envelopes tried


@dataclass
class PivotProof:
    """Per LU step: its name (row, column), the smallest |pivot| proved over the cells
    (None where some box was not proved), and for an unproved step the state where it
    failed ({symbol name: value}), its value there and whether it crosses zero there."""

    names: list[str]
    least: list[float | None]
    where: dict[int, dict[str, float]] = field(default_factory=dict)
    value: dict[int, float] = field(default_factory=dict)
    crossing: set[int] = field(default_factory=set)
    cells: int = 0
    splits: int = PIVOT_SPLITS
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.note and not self.where

    def first_failure(self) -> int | None:
        return min(self.where, key=lambda k: (k not in self.crossing, k)) if self.where else None

    def state(self, k: int) -> str:
        return ", ".join(f"{n}={v:.4g}" for n, v in self.where[k].items())

    def report(self) -> str:
        head = f"  pivots over the envelope's {self.cells} cells (interval arithmetic, up to {self.splits} bisections): "
        if self.note:
            return head + self.note
        if self.ok:
            return head + f"proved, min |pivot| >= {min(self.least):.3g}"
        lines = [head + f"{len(self.where)} of {len(self.names)} not proved"]
        for k in sorted(self.where):
            kind = "crosses 0" if k in self.crossing else "enclosure contains 0"
            lines.append(f"    step {k + 1} ({self.names[k]}): {kind} near {self.state(k)} (value {self.value[k]:.3g})")
        return "\n".join(lines)


def _evaluate(ev: IntervalEvaluator, lo, hi):
    """ev over the boxes, CHUNK at a time."""
    if len(lo) <= CHUNK:
        return ev(lo, hi)
    parts = [ev(lo[j:j + CHUNK], hi[j:j + CHUNK]) for j in range(0, len(lo), CHUNK)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _step_names(F) -> list[str]:
    """Each step's pivot rows and columns by name (an LDL^T step's one index set is both)."""
    out = []
    for s in F.steps:
        rows, cols = (s.rows, s.cols) if hasattr(s, "rows") else (s.idx, s.idx)
        out.append(", ".join(f"row {F.row_names[r]!r}" for r in rows) + ", "
                   + ", ".join(f"column {F.col_names[c]!r}" for c in cols))
    return out


def prove_pivots(F, cover, lo=None, hi=None, splits: int = PIVOT_SPLITS) -> PivotProof:
    """Enclose every pivot of the LU `F` over each cell of `cover` (domain.krawczyk.Cover),
    or over the boxes lo, hi [cells, symbols] in the cover's symbols, bisecting failing
    boxes up to `splits` times (see the module doc)."""
    names = _step_names(F)
    lo = cover.lo if lo is None else lo
    hi = cover.hi if hi is None else hi
    proof = PivotProof(names, [np.inf] * len(names), cells=len(lo), splits=splits)
    try:
        ev = IntervalEvaluator(F.pivots, cover.symbols)
    except ExpressionError as e:  # a pivot of t or a parameter the cover does not bound
        proof.note = f"not attempted ({e})"
        return proof
    used = set(ev.order)
    dims = [k for k, s in enumerate(cover.symbols) if s in used]
    span = np.maximum(hi.max(axis=0) - lo.min(axis=0), 1e-300)
    least = np.full(len(names), np.inf)
    for depth in range(splits + 1):
        L, H = _evaluate(ev, lo, hi)
        good = np.isfinite(L) & np.isfinite(H) & ((L > 0) | (H < 0))
        least = np.minimum(least, np.where(good, np.where(L > 0, L, -H), np.inf).min(axis=0))
        bad = ~good.all(axis=1)
        if not bad.any():
            break
        lo, hi = lo[bad], hi[bad]
        if depth == splits or 2 * len(lo) > MAX_BOXES or not dims:
            _failures(proof, ev, lo, hi, good[bad], cover.symbols, dims)
            break
        lo, hi = _bisect(lo, hi, dims, span)
    proof.least = [None if k in proof.where else float(v) for k, v in enumerate(least)]
    return proof


def _bisect(lo, hi, dims, span):
    """Each box halved along its widest input of `dims` (width relative to `span`, one
    row for all boxes or one per box)."""
    w = (hi[:, dims] - lo[:, dims]) / span[..., dims]
    axis = np.array(dims)[np.argmax(w, axis=1)]
    rows = np.arange(len(lo))
    mid = 0.5 * (lo[rows, axis] + hi[rows, axis])
    lo2, hi1 = lo.copy(), hi.copy()
    hi1[rows, axis], lo2[rows, axis] = mid, mid
    return np.concatenate([lo, lo2]), np.concatenate([hi1, hi])


def enclose_bisected(ev: IntervalEvaluator, lo, hi, dims, splits: int = PIVOT_SPLITS):
    """(L, H) [boxes, outputs]: enclosures of ev's outputs over each box, the hull of their
    enclosures over sub-boxes where a box's enclosure of some output contains 0 (bisected
    along `dims` up to `splits` times); sound (the sub-boxes partition the box), tight
    where bisection proves the outputs away from 0. Unbounded where none is."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    origin = np.arange(len(lo))
    w0 = np.maximum(hi - lo, 1e-300)
    n = len(ev.outputs)
    LH, HH = np.full((len(lo), n), np.inf), np.full((len(lo), n), -np.inf)
    for depth in range(splits + 1):
        L, H = _evaluate(ev, lo, hi)
        L, H = np.where(np.isnan(L), -np.inf, L), np.where(np.isnan(H), np.inf, H)
        proved = (np.isfinite(L) & np.isfinite(H) & ((L > 0) | (H < 0))).all(axis=1)
        last = depth == splits or 2 * len(lo) > MAX_BOXES or not dims
        done = proved | last
        np.minimum.at(LH, origin[done], L[done])
        np.maximum.at(HH, origin[done], H[done])
        if done.all():
            break
        lo, hi, origin = lo[~done], hi[~done], origin[~done]
        lo, hi = _bisect(lo, hi, dims, w0[origin])
        origin = np.concatenate([origin, origin])
    return LH, HH


def _failures(proof, ev, lo, hi, good, symbols, dims) -> None:
    """Record, per unproved pivot, the state where it is smallest in magnitude, or of the
    other sign than most (a crossing), among the unproved boxes' centres and corners."""
    pts = np.concatenate([0.5 * (lo + hi), lo, hi])
    V, _ = _evaluate(ev, pts, pts)
    for k in range(good.shape[1]):
        rows = np.flatnonzero(np.tile(~good[:, k], 3))
        if not len(rows):
            continue
        v = V[rows, k]
        other = np.flatnonzero((np.sign(v) != np.sign(np.median(V[:, k]))) | (v == 0))
        i = rows[other[0]] if len(other) else rows[np.argmin(np.abs(v))]
        if len(other):
            proof.crossing.add(k)
        proof.where[k] = {symbols[d].value.name: float(pts[i, d]) for d in dims}
        proof.value[k] = float(V[i, k])


@dataclass
class Cells:
    """Boxes over `symbols` (lo, hi: [cells, symbols]): a cover's cells, or them clipped."""

    symbols: list
    lo: np.ndarray
    hi: np.ndarray

    def __len__(self) -> int:
        return len(self.lo)


def shrunk(cover, quantities, f: float) -> tuple[Cells, str]:
    """The cover's cells clipped to the envelope shrunk to fraction f of each quantity's
    range about its centre (the quantity's own symbol and the coordinate it is declared
    on), and the shrunk ranges as text."""
    lo, hi = cover.lo.copy(), cover.hi.copy()
    text = []
    for q in quantities:
        c, h = 0.5 * (q.range[0] + q.range[1]), 0.5 * f * (q.range[1] - q.range[0])
        text.append(f"{q.name} in [{c - h:.4g}, {c + h:.4g}]")
        for k, s in enumerate(cover.symbols):
            if s is q.theta or s.value.name == q.name:
                lo[:, k], hi[:, k] = np.maximum(lo[:, k], c - h), np.minimum(hi[:, k], c + h)
    keep = (lo <= hi).all(axis=1)
    return Cells(list(cover.symbols), lo[keep], hi[keep]), ", ".join(text)


def grid_samples(samples: Samples, cover, points: int = 5) -> Samples:
    """The samples plus a grid of `points` per input over each cell's box (corners
    included) in the samples' inputs the cover bounds; other inputs (t) keep the nominal
    sample's value. Consistent states only where the inputs are independent (no
    constraint among them): the caller's concern."""
    idx = {s: k for k, s in enumerate(cover.symbols)}
    moving = [j for j, s in enumerate(samples.inputs) if s in idx]
    axes = np.linspace(0.0, 1.0, points)
    frac = np.stack(np.meshgrid(*([axes] * len(moving)), indexing="ij"), axis=-1).reshape(-1, len(moving))
    rows = []
    for c in range(len(cover)):
        P = np.repeat(samples.points[:1], len(frac), axis=0)
        for m, j in enumerate(moving):
            k = idx[samples.inputs[j]]
            P[:, j] = cover.lo[c, k] + frac[:, m] * (cover.hi[c, k] - cover.lo[c, k])
        rows.append(P)
    extra = np.concatenate(rows)
    return samples + Samples(samples.inputs, extra,
                             f"a grid of {points} points per coordinate over each of the {len(cover)} cells "
                             f"of the envelope (corners included)")
