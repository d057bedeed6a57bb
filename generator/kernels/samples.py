"""Consistent configurations of a model, for choosing and checking the pivots of a kernel's
linear solves at generation time.

A kernel that solves with Phi_q (kinematics) or with a matrix built from M(q) and the
constraint Jacobian (dynamics) is only meant to run at configurations that satisfy the
constraints. Inside the declared box of q these matrices are singular in many places
that no assembled mechanism ever reaches (a four-bar's Phi_q wherever the crank point
lies along the driver's direction), so the pivots are checked where the kernel runs:

* `motion_configurations`: (q, t) along the driven motion, over the model's time range;
* `manifold_configurations`: points of the manifold of a subset of the constraints (the
  kinematic ones, for dynamics: the drivers are replaced by actuators), reached by
  Newton-Raphson with minimum-norm corrections from random perturbations of the motion
  (or of the initial guess) and kept if they stay inside the declared ranges.

Everything is deterministic: fixed time grids, seeded random perturbations; batches are
evaluated by the numpy reference (`Evaluator`) and corrected with batched pseudoinverses.
"""
from __future__ import annotations

import numpy as np

from ..ir import Evaluator, Sparse
from ..linalg import Samples

SAMPLE_TIMES = 160  # points of the driven motion at which pivots are checked
NEWTON_TOL = 1e-10
NEWTON_ITER = 30
HALVINGS = 5  # retries with half the perturbation for points that leave the ranges


def _inputs(eqs) -> list:
    return list(eqs.q) + [eqs.t]


def _params(eqs) -> tuple[list, list[float]]:
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
    the model is not fully driven (fewer equations than coordinates)."""
    if len(eqs.phi) + len(getattr(eqs, "nh", []) or []) < len(eqs.q):
        return None
    from ..model import Kinematics

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
    ps, pv = _params(eqs)
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
    ps, pv = _params(eqs)
    motion = motion_configurations(eqs)
    parts, desc = [], []
    if motion is not None:
        parts.append(motion)
        desc.append(f"{len(motion)} points of the driven motion")
    if rows is not None and len(rows) < len(eqs.q):
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
