"""Enclosures over one period of the joint angles (range analysis hints of step kernels).

A chain's angles are declared over many turns ([-100, 100] rad), and over such a box
range analysis sees sin and cos only as [-1, 1]: the accelerations' terms, written in
sines and cosines of sums of angles, lose every correlation (an Euler step of the
double pendulum's accelerations enclosed in [-9e5, 9e5]). Most values of a step kernel
do not change when an angle turns by 2 pi, though: those that read the angle only
through sums, differences and negations that end in sin or cos ("free" of it here). An
angle whose every use is of that kind or a sum that reaches an output (q+ = q + dt qd+:
"linear" in it) is periodic for the analysis: each box's range of it is replaced by one
period, [-pi, pi] (or its range moved by whole periods when narrower), cut into cells,
the tape analysed over the cells (with its other hints: analysis.definite), and each
value free of every periodic angle gets the hull over the cells as its hint. Sound: such
a value takes over the box exactly the values it takes over the period. The values
linear in an angle keep the box's own analysis.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..lower.tape import TapeHints
from .definite import _one_period, grid_cells

FREE, LINEAR, OTHER = 0, 1, 2
CELL = 0.4  # rad: the width of a period's cells (2 pi: 16 cells per angle)
MAX_CELLS = 4096  # angles' cells per box (made wider beyond)
OTHER_CUTS = 4  # parts of each other input's range (fewer beyond MAX_CELLS * OTHER_CUTS^2 cells)
PASS_CELLS = 32768  # cells analysed in one pass

__all__ = ["PeriodicHints", "periodic_angles"]


def _kinds(tape, k: int) -> dict:
    """Per temp: FREE, LINEAR or OTHER in input k (see the module docstring)."""
    kind: dict = {}

    def of(o):
        if o == ("in", k):
            return LINEAR
        return kind.get(o[1], FREE) if o[0] == "t" else FREE

    for ins in tape.instrs:
        got = [of(a) for a in ins.args]
        if ins.op in ("add", "sub", "neg"):
            r = max(got)
        elif ins.op in ("sin", "cos", "sincos"):
            r = OTHER if got[0] == OTHER else FREE
        else:
            r = FREE if max(got) == FREE else OTHER
        for d in ins.dst:
            kind[d] = r
    return kind


def periodic_angles(tape) -> tuple[list[int], set]:
    """(the inputs that are periodic angles, the temps free of all of them)."""
    angles, free = [], None
    for k in range(len(tape.inputs)):
        kind = _kinds(tape, k)
        if not any(v == LINEAR for v in kind.values()) and ("in", k) not in tape.outputs:
            continue  # not an angle: it meets no sum (read only through other operations, or not at all)
        if any(v == OTHER for v in kind.values()):
            continue
        angles.append(k)
        mine = {t for t, v in kind.items() if v == FREE}
        free = mine if free is None else free & mine
    return angles, (free or set())


@dataclass(frozen=True)
class PeriodicKey:
    """What the hints compute from beyond the tape (analysis.piececache)."""
    angles: tuple
    cell: float
    max_cells: int


class PeriodicHints(TapeHints):
    """The hints of a step kernel's tape: its own (inner, e.g. analysis.definite's) and
    the periodic enclosures of the values free of its angles."""

    def __init__(self, tape, inner: TapeHints | None, angles: list[int], free: set):
        self.inner, self.angles = inner, tuple(angles)
        self.free = sorted(free)
        self.cut = None if inner is None else inner.cut
        self.enclosed = None
        self._tape = replace(tape, hints=inner)  # the cells' analysis: the inner hints only

    def key(self) -> tuple:
        return (() if self.inner is None else self.inner.key()) + (PeriodicKey(self.angles, CELL, MAX_CELLS),)

    def __call__(self, in_lo, in_hi) -> dict:
        from .ranges import analyse_boxes
        out = {} if self.inner is None else dict(self.inner(in_lo, in_hi))
        B = len(in_lo)
        lo_, hi_ = {t: np.full(B, np.inf) for t in self.free}, {t: np.full(B, -np.inf) for t in self.free}
        cl, ch, own = _cells(np.asarray(in_lo, float), np.asarray(in_hi, float), self.angles)
        for a in range(0, len(cl), PASS_CELLS):  # the cells' affine forms are the memory
            part = slice(a, a + PASS_CELLS)
            vec = analyse_boxes(self._tape, cl[part], ch[part], strict=False)
            for t in self.free:
                if t in vec.lo:
                    np.minimum.at(lo_[t], own[part], vec.lo[t])
                    np.maximum.at(hi_[t], own[part], vec.hi[t])
        for t in self.free:
            lo, hi = lo_[t], hi_[t]
            if t not in out:
                out[t] = (lo, hi)
            elif callable(out[t]):
                out[t] = _Both(out[t], lo, hi)
            else:  # an inner constant enclosure (analysis.bodyfloors): both sound
                out[t] = (np.maximum(out[t][0], lo), np.minimum(out[t][1], hi))
        return out


class _Both:
    """An inner lazy hint and the periodic one, intersected (both sound)."""

    def __init__(self, lazy, lo, hi):
        self.lazy, self.lo, self.hi = lazy, lo, hi

    def __call__(self, s):
        lo, hi = self.lazy(s)
        return np.maximum(lo, self.lo), np.minimum(hi, self.hi)


def _cells(lo, hi, angles):
    """Each box with its angles' ranges moved into one period and cut into cells of about
    CELL (at most MAX_CELLS per box): (cell_lo, cell_hi, owner box)."""
    periodic = np.zeros(lo.shape[1], dtype=bool)
    periodic[list(angles)] = True
    lo, hi = _one_period(lo, hi, periodic)
    per_dim = max(1, int(MAX_CELLS ** (1 / max(1, len(angles)))))
    w = hi - lo
    angle = periodic[None, :] & (w > 0)
    cuts = np.where(angle, np.clip(np.ceil(np.where(angle, w, 0) / CELL), 1, per_dim), 1)
    # the rates: products of rates are tight over narrower parts, while the cells stay few
    others = (~periodic[None, :] & (w > 0)).sum(1, keepdims=True)
    room = np.floor((MAX_CELLS * OTHER_CUTS ** 2 / cuts.prod(1, keepdims=True)) ** (1 / np.maximum(others, 1)))
    cuts = np.where(~periodic[None, :] & (w > 0), np.clip(room, 1, OTHER_CUTS), cuts)
    return grid_cells(lo, hi, cuts)
