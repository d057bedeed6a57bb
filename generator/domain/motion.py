"""Where a kernel of a driven model runs (numeric, double): the driven motion over the
model's time range and a kernel's input vectors along it (`motion_states`,
`motion_inputs`, for verification), and a union of boxes around the inputs along it
(`tube`, `covers`, `motion_domain`: Kernel.domain), checked to cover the motion between its
samples; `driven_domain` gives both as a Domain.

A kernel that solves with Phi_q or with a matrix built from M(q) and the constraint
Jacobian is only meant to run at configurations that satisfy the constraints; inside the
declared box these matrices are singular in many places no assembled mechanism reaches,
so ranges and test vectors are worked out where the kernel runs. Deterministic: fixed
time grids.
"""
from __future__ import annotations

import numpy as np

from ..model.equations import Equations
from ..reference.solvers import Kinematics, mobility
from .base import Domain, DomainError

MOTION_POINTS = 48  # input vectors along the driven motion (Kernel.motion)
DOMAIN_STEPS = 96  # boxes in the tube around a driven motion


def motion_states(eqs: Equations, n: int = MOTION_POINTS):
    """(times, Q, QD, QDD) along the driven motion, or None if the model is not fully driven
    (by rank: `reference.solvers.mobility`)."""
    if not mobility(eqs).driven:
        return None
    lo, hi = eqs.ranges[eqs.t]
    times = np.linspace(lo, hi, n)
    Q, QD, QDD = Kinematics(eqs).motion(times)
    return times, Q, QD, QDD


def motion_inputs(eqs: Equations, row) -> list[list[float]] | None:
    """Input vectors along the driven motion over the model's time range (None if the
    model is not fully driven: its equations leave some velocity free)."""
    m = motion_states(eqs)
    if m is None:
        return None
    times, Q, QD, QDD = m
    return [[float(v) for v in row(Q[i], QD[i], QDD[i], float(times[i]))] for i in range(len(times))]


def motion_domain(eqs: Equations, row, steps: int = DOMAIN_STEPS):
    """The kernel's input domain for a driven motion: a tube of boxes around the inputs
    along the motion (see tube), checked to cover the motion half-way between its
    samples. Range analysis (fixed-point formats, error bounds) and test vectors then work
    where the mechanism runs, not over the whole box of declared ranges, where the
    Jacobians are singular in many places. None when the model is not fully driven."""
    lo, hi = eqs.ranges[eqs.t]
    if motion_states(eqs, 2) is None:
        return None
    times = np.linspace(lo, hi, steps + 1)
    mids = (times[:-1] + times[1:]) / 2
    kin = Kinematics(eqs)
    pts = [np.array(row(*state, t)) for state, t in zip(zip(*kin.motion(times)), times)]
    half = [np.array(row(*state, t)) for state, t in zip(zip(*kin.motion(mids)), mids)]
    margin = 0.5
    for _ in range(4):
        boxes = tube(pts, margin=margin)
        if covers(boxes, half):
            return boxes
        margin *= 2
    raise DomainError(f"{eqs.model}: the tube around the driven motion does not cover it between samples")


def tube(points, margin: float = 0.5, floor: float = 1e-9) -> list[list[tuple[float, float]]]:
    """Boxes around a sampled path through input space (e.g. the configurations of a
    driven motion): one box per pair of consecutive points, their hull widened on every
    axis by `margin` x the step between them (measured in units of each axis' span over
    the path) plus `floor`. A smooth path strays from its chord by far less than the
    step, so the union covers it between samples; callers check that on a denser
    sampling (`covers`)."""
    P = np.asarray(points, dtype=float)
    span = np.maximum(P.max(axis=0) - P.min(axis=0), floor)
    boxes = []
    for a, b in zip(P[:-1], P[1:]):
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        step = float(np.max(np.abs(b - a) / span))
        w = margin * step * span + floor
        boxes.append([(float(x), float(y)) for x, y in zip(lo - w, hi + w)])
    return boxes


def covers(domain, points) -> bool:
    """Every point lies in at least one box of the domain."""
    return bool(inside(domain, points).all())


def inside(domain, points) -> np.ndarray:
    """Per point: it lies in at least one box of the domain."""
    P = np.asarray(points, dtype=float).reshape(len(points), -1)
    mask = np.zeros(len(P), dtype=bool)
    for box in domain:
        b = np.asarray(box)
        mask |= np.all((P >= b[:, 0]) & (P <= b[:, 1]), axis=1)
    return mask


# a motion point this close to a box (relative to the box's scale) is in it, moved onto its
# edge: a closed-form motion's round-off (a coordinate the envelope pins at [0, 0] computed
# as -2e-32 along the Stewart platform's motions) must not drop the whole motion file
SLACK = 1e-12


def motion_in_domain(boxes, points) -> list[list[float]] | None:
    """The motion's points inside the boxes of a kernel's domain (an envelope narrowed by
    --envelope holds part of the example's motion; the rest would be refused, status 2, as
    test vectors), each within SLACK of a box clamped into the first such box; None when
    none is."""
    if points is None:
        return None
    P = np.asarray(points, dtype=float).reshape(len(points), -1)
    out = np.full(P.shape, np.nan)
    todo = np.ones(len(P), dtype=bool)
    for box in boxes:
        b = np.asarray(box, dtype=float)
        tol = SLACK * (1.0 + np.abs(b).max(axis=1))
        hit = todo & np.all((P >= b[:, 0] - tol) & (P <= b[:, 1] + tol), axis=1)
        out[hit] = np.clip(P[hit], b[:, 0], b[:, 1])
        todo &= ~hit
    kept = [row.tolist() for row in out[~todo]]
    return kept or None


def driven_domain(eqs: Equations, row, steps: int = DOMAIN_STEPS) -> Domain:
    """The Domain of a kernel whose input vector is row(q, qd, qdd, t): its vectors along
    the driven motion (motion_inputs) and the tube around them (motion_domain)."""
    motion = motion_inputs(eqs, row)
    return Domain(boxes=motion_domain(eqs, row, steps), motion=motion)
