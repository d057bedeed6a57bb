"""Consistent configurations at which a kernel's pivots are chosen and checked (numeric,
double): (q, t[, params]) on the driven motion (`motion_configurations`), on the manifold
of a subset of the constraints (`manifold_configurations`: the kinematic ones, for
dynamics, whose drivers are replaced by actuators) reached by Newton-Raphson with
minimum-norm corrections from random perturbations, in the declared box of independent
coordinates (`independent_box_samples`), and over an operating envelope's verified cover
(`with_envelope_samples`); `kernel_samples` puts the first two together.

Everything is deterministic: fixed time grids, seeded random perturbations; batches are
evaluated by the numpy reference (`Evaluator`) and corrected with batched pseudoinverses.
"""
from __future__ import annotations

import numpy as np

from ..ir import Evaluator, Sparse, jacobian
from ..linalg import Samples
from ..model.equations import Equations
from ..reference.solvers import Kinematics, mobility

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


PIVOT_SAMPLES = 256  # consistent states of the envelope at which pivots are chosen and checked


def with_envelope_samples(samples, cover, seed: int = 0):
    """The pivot samples plus PIVOT_SAMPLES consistent configurations drawn over the
    envelope's cover (domain.krawczyk.Cover; their coordinates, and t where the samples
    have it): pivots fixed at generation time must serve the whole envelope, not one motion."""
    if cover is None:
        return samples
    S = cover.sample(PIVOT_SAMPLES, seed)
    n = len(next(iter(S.values())))
    cols = []
    for s in samples.inputs:
        if s in S:
            cols.append(S[s])
        else:  # t (or a parameter) the cover does not vary: the samples' own values, cycled
            k = samples.inputs.index(s)
            cols.append(np.resize(samples.points[:, k], n))
    extra = Samples(samples.inputs, np.column_stack(cols) if cols else np.zeros((n, 0)),
                    f"{n} consistent configurations of the operating envelope")
    return samples + extra
