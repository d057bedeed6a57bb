"""Actuator forces a kernel's inputs must take (numeric, double): the inverse-dynamics
forces along the driven motion (`inverse_forces`, also forward dynamics' verification
vectors), and from them a range for each actuator input without a declared one
(`actuator_ranges`); `dynamics_domain` the Domain of forward dynamics along the motion.
"""
from __future__ import annotations

import numpy as np

from ..ir import Evaluator, Sparse
from ..model.equations import Equations
from .base import Domain


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


def dynamics_domain(eqs: Equations, A_kin, B, motion, actuated: bool) -> Domain:
    """The Domain of a kernel over (q, qd, t[, u]) (forward and linearized dynamics) along
    the driven motion (motion_states, or None: an empty Domain): vectors of its states and
    the actuator forces that drive it (inverse_forces); no boxes."""
    if motion is None:
        return Domain()
    times, Q, QD, QDD = motion
    U = inverse_forces(eqs, A_kin, B, times, Q, QD, QDD) if actuated else np.zeros((len(times), 0))
    return Domain(motion=[[float(v) for v in (*Q[i], *QD[i], times[i], *U[i])] for i in range(len(times))])
