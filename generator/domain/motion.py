"""Where a kernel runs, worked out numerically on the double reference: the driven motion,
the tube of boxes around it, consistent configurations for choosing and checking pivots,
and the force envelopes that give actuator inputs a range.

A kernel that solves with Phi_q (kinematics) or with a matrix built from M(q) and the
constraint Jacobian (dynamics) is only meant to run at configurations that satisfy the
constraints. Inside the declared box of q these matrices are singular in many places
that no assembled mechanism ever reaches (a four-bar's Phi_q wherever the crank point
lies along the driver's direction), so pivots, ranges and test vectors are worked out
where the kernel runs:

* `motion_states`, `motion_inputs`: the driven motion over the model's time range, and a
  kernel's input vectors along it (for verification);
* `tube`, `covers`, `motion_domain`: a union of boxes around the inputs along the motion
  (Kernel.domain), checked to cover the motion between its samples;
* `motion_configurations`, `manifold_configurations`, `kernel_samples`,
  `independent_box_samples`: (q, t[, params]) on the motion, on the manifold of a subset
  of the constraints (the kinematic ones, for dynamics: the drivers are replaced by
  actuators) reached by Newton-Raphson with minimum-norm corrections from random
  perturbations, or in the declared box of independent coordinates;
* `inverse_forces`, `actuator_ranges`: the inverse-dynamics forces along the motion, and
  from them a range for each actuator input without a declared one.

Everything is deterministic: fixed time grids, seeded random perturbations; batches are
evaluated by the numpy reference (`Evaluator`) and corrected with batched pseudoinverses.
Nothing here builds atoms that reach a kernel's outputs.
"""
from __future__ import annotations

import numpy as np

from ..ir import Evaluator, Sparse, jacobian
from ..linalg import Samples
from ..model.equations import Equations
from ..reference.solvers import Kinematics, mobility
from .common import KernelError

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
    raise KernelError(f"{eqs.model}: the tube around the driven motion does not cover it between samples")


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


def motion_in_domain(kernel, points) -> list[list[float]] | None:
    """The motion's points inside the kernel's domain (an envelope narrowed by --envelope
    holds part of the example's motion; the rest would be refused, status 2, as test
    vectors); None when none is."""
    if points is None:
        return None
    kept = [p for p, ok in zip(points, inside(kernel.domain, points)) if ok]
    return kept or None


# ---- consistent configurations, for pivots --------------------------------------------------
SAMPLE_TIMES = 160  # points of the driven motion at which pivots are checked
NEWTON_TOL = 1e-10
NEWTON_ITER = 30
HALVINGS = 5  # retries with half the perturbation for points that leave the ranges


def _inputs(eqs) -> list:
    return list(eqs.q) + [eqs.t]


def parameters(eqs) -> tuple[list, list[float]]:
    """Parameters that stay symbols, at their default values (the nominal model)."""
    ps = list(getattr(eqs, "params", []) or [])
    vals = []
    for p in ps:
        d = p.value.default
        if d is None:
            raise ValueError(f"{eqs.model}: parameter {p.value.name} has no value to sample the model at")
        vals.append(d)
    return ps, vals


def motion_configurations(eqs, n: int = SAMPLE_TIMES) -> np.ndarray | None:
    """[(q, t)] along the driven motion at n times over the model's time range, or None if
    the model is not fully driven (by rank: `reference.solvers.mobility`)."""
    if not mobility(eqs).driven:
        return None
    lo, hi = eqs.ranges[eqs.t]
    times = np.linspace(lo, hi, n)
    Q, _, _ = Kinematics(eqs).motion(times)
    return np.column_stack([Q, times])


def _min_norm(J: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Batched minimum-norm solutions dx of J dx = F: J^T (J J^T)^-1 F, with the
    pseudoinverse where J J^T is singular (redundant constraints)."""
    with np.errstate(all="ignore"):
        try:
            y = np.linalg.solve(J @ np.swapaxes(J, 1, 2), F[..., None])[..., 0]
            if np.all(np.isfinite(y)):
                return np.einsum("kji,kj->ki", J, y)
        except np.linalg.LinAlgError:
            pass
        return np.einsum("kij,kj->ki", np.linalg.pinv(J), F)


def manifold_configurations(eqs, rows: list[int], starts: np.ndarray, seed: int = 0, count: int = 64,
                            spread: float = 0.15) -> np.ndarray:
    """Configurations (q, t) satisfying the constraints `rows` of eqs.phi, inside the
    declared ranges: Newton-Raphson (minimum-norm corrections) from `count` random
    perturbations of the rows of `starts` by `spread` x the width of each range."""
    q, t = list(eqs.q), eqs.t
    n = len(q)
    ps, pv = parameters(eqs)
    phi = [eqs.phi[i] for i in rows]
    J = Sparse((len(rows), n), {(k, j): a for k, i in enumerate(rows) for (ii, j), a in eqs.phi_q.entries.items()
                                if ii == i})
    ev = Evaluator(phi + J.values(), q + [t] + ps)
    lo = np.array([eqs.ranges[s][0] for s in q])
    hi = np.array([eqs.ranges[s][1] for s in q])
    rng = np.random.default_rng(seed)
    pick = starts[rng.integers(0, len(starts), count)]
    T = pick[:, n]
    ri = np.array([i for i, _ in J.pattern], dtype=int)
    cj = np.array([j for _, j in J.pattern], dtype=int)
    m = len(rows)

    def evaluate(X):
        Y = ev(np.column_stack([X, T, np.tile(pv, (count, 1))]) if ps else np.column_stack([X, T]))
        Jm = np.zeros((count, m, n))
        Jm[:, ri, cj] = Y[:, m:]
        return Y[:, :m], Jm

    # perturb along the manifold (the null space of the Jacobian at the start), so that
    # coordinates the constraints pin down (a fixed base) stay put, then project back;
    # where the result leaves the declared ranges (tight envelopes of a workspace), try
    # again with half the perturbation
    X0 = pick[:, :n]
    _, J0 = evaluate(X0)
    dq = spread * (hi - lo) * rng.uniform(-1.0, 1.0, (count, n))
    dq = dq - _min_norm(J0, np.einsum("kij,kj->ki", J0, dq))
    out = np.full((count, n), np.nan)
    todo = np.ones(count, dtype=bool)
    for _ in range(HALVINGS):
        X = X0 + dq
        ok = np.zeros(count, dtype=bool)
        for _ in range(NEWTON_ITER):
            F, Jm = evaluate(X)
            ok = np.all(np.abs(F) < NEWTON_TOL, axis=1)
            if ok.all():
                break
            X = X - _min_norm(Jm, F)
        good = todo & ok & np.all((X >= lo) & (X <= hi), axis=1) & np.all(np.isfinite(X), axis=1)
        out[good] = X[good]
        todo &= ~good
        if not todo.any():
            break
        dq = dq / 2
    return np.column_stack([out[~todo], T[~todo]])


def kernel_samples(eqs, rows: list[int] | None, what: str, seed: int = 0) -> Samples:
    """Samples over (q, t[, params]) for a kernel's matrices: the driven motion and, when
    `rows` leaves degrees of freedom (dynamics: kinematic rows only), configurations of
    that manifold near the motion (or near the initial guess of an undriven model)."""
    ps, pv = parameters(eqs)
    motion = motion_configurations(eqs)
    parts, desc = [], []
    if motion is not None:
        parts.append(motion)
        desc.append(f"{len(motion)} points of the driven motion")
    if rows is not None and not mobility(eqs, rows).driven:  # by rank: redundant rows leave freedom too
        if motion is not None:
            starts = motion
        else:
            q0 = np.array([eqs.guess.get(s, 0.0) for s in eqs.q])
            lo, hi = eqs.ranges[eqs.t]
            starts = np.column_stack([np.tile(q0, (8, 1)), np.linspace(lo, hi, 8)])
        extra = manifold_configurations(eqs, rows, starts, seed=seed)
        if len(extra):
            parts.append(extra)
            desc.append(f"{len(extra)} configurations of the {what} manifold near it")
    if not parts:
        raise ValueError(f"{eqs.model}: no consistent configuration to check the pivots at: the model is not "
                         "fully driven and its guess does not assemble")
    X = np.vstack(parts)
    if ps:
        X = np.column_stack([X, np.tile(pv, (len(X), 1))])
    return Samples(_inputs(eqs) + ps, X, "; ".join(desc))


BOX_SAMPLES = 256  # random independent configurations at which pivots and closed forms are checked


def independent_box_samples(eqs: Equations, z, psi, ps, count: int = BOX_SAMPLES, seed: int = 0) -> np.ndarray:
    """Points (z, t, params) with z uniform in the declared ranges of the independent
    coordinates, projected (Newton, minimum-norm corrections) on the constraints among
    them (psi rows), kept where they stay inside the ranges: the kernel serves any
    configuration there, not only the driven motion's neighbourhood."""
    rng = np.random.default_rng(seed)
    lo = np.array([eqs.ranges[s][0] for s in z])
    hi = np.array([eqs.ranges[s][1] for s in z])
    tlo, thi = eqs.ranges[eqs.t]
    pv = [p.value.default for p in ps]
    X = lo + (hi - lo) * rng.random((count, len(z)))
    T = tlo + (thi - tlo) * rng.random(count)
    tail = np.column_stack([T] + [np.full(count, v) for v in pv])
    if psi:
        phi = [eqs.phi[i] for i in psi]
        J = jacobian(phi, z)
        ev = Evaluator(phi + J.values(), list(z) + [eqs.t] + ps)
        ri = np.array([i for i, _ in J.pattern], dtype=int)
        cj = np.array([j for _, j in J.pattern], dtype=int)
        m = len(psi)
        for _ in range(30):
            Y = ev(np.column_stack([X, tail]))
            F = Y[:, :m]
            if np.all(np.abs(F) < 1e-13):
                break
            Jm = np.zeros((count, m, len(z)))
            Jm[:, ri, cj] = Y[:, m:]
            with np.errstate(all="ignore"):
                X = X - np.einsum("kij,kj->ki", np.linalg.pinv(Jm), F)
    ok = np.all((X >= lo) & (X <= hi), axis=1) & np.all(np.isfinite(X), axis=1)
    return np.column_stack([X, tail])[ok]


# ---- actuator ranges ----------------------------------------------------------------------
def inverse_forces(eqs: Equations, A: Sparse, B: Sparse, times, Q, QD, QDD) -> np.ndarray:
    """Actuator forces along the motion, numpy on the double reference (for ranges and
    motion vectors of forward dynamics): least squares of [A^T, -B] [lambda; u] = Q - M qdd."""
    n = len(eqs.q)
    inputs = list(eqs.q) + list(eqs.qd) + [eqs.t]
    ev = Evaluator(A.values() + B.values() + eqs.M.values() + list(eqs.Q), inputs)
    Y = ev(np.column_stack([Q, QD, times]))
    out = []
    r, na = A.shape[0], B.shape[1]
    for k in range(len(times)):
        y = Y[k]
        o = 0
        At = np.zeros((r, n))
        for (i, j) in A.pattern:
            At[i, j] = y[o]
            o += 1
        Bm = np.zeros((n, na))
        for (i, j) in B.pattern:
            Bm[i, j] = y[o]
            o += 1
        M = np.zeros((n, n))
        for (i, j) in eqs.M.pattern:
            M[i, j] = y[o]
            o += 1
        Qv = y[o:o + n]
        G = np.hstack([At.T, -Bm])
        x = np.linalg.lstsq(G, Qv - M @ QDD[k], rcond=None)[0]
        out.append(x[r:])
    return np.array(out)


def actuator_ranges(eqs: Equations, syms, A_kin, B, motion) -> tuple[dict, list[str]]:
    """({symbol: range}, names of the derived ones) of the actuator inputs `syms`: the
    model's declared range (eqs.ranges) where it has one, else the envelope of the
    inverse-dynamics forces along the motion, +-(1.5 x peak), at least +-1."""
    declared = eqs.ranges
    ranges, derived = {}, []
    U = None
    if any(s not in declared for s in syms) and motion is not None:
        times, Q, QD, QDD = motion
        try:
            U = inverse_forces(eqs, A_kin, B, times, Q, QD, QDD)
        except (np.linalg.LinAlgError, ValueError):
            U = None
    for k, s in enumerate(syms):
        if s in declared:
            ranges[s] = (float(declared[s][0]), float(declared[s][1]))
            continue
        peak = float(np.max(np.abs(U[:, k]))) if U is not None and U.size else 0.0
        h = max(1.0, 1.5 * peak)
        ranges[s] = (-h, h)
        derived.append(s.value.name)
    return ranges, derived
