"""The equations of motion in a model's independent coordinates (`reduced_equations`): the
dependent coordinates of Model.explicit replaced by their closed forms, so that a kernel
integrates z alone and the dependent q follow.

With q = q(z) (the closed forms, and z itself), qd = R zd and qdd = R zdd + c, where
R = dq/dz and c = dR/dt zd (both from Equations.explicit_rates, the chain rule):

    M_z = R^T M R,   Q_z = R^T (Q - M c),   B_z = R^T B,

and the constraints are the rows among z alone (the Stewart platform's Euler
normalisation, a crank's length). Why: the closed forms pick one assembly branch, so the
rows they satisfy identically are gone, and with them the singular positions where those
rows lose rank (the N-four-bar's couplers on the ground line): its step over z has one
distance equation whose gradient never vanishes, which range analysis proves over a full
turn where the exact multipliers of all 2N + 1 rows do not exist.

Invariants: the result has no explicit coordinates (explicit = {}) and keeps `reduced_from`,
the full equations, whose closed forms `expand` evaluates; names, ranges, the operating
envelope (its equations with the closed forms substituted), the initial values and the
outputs are the independent coordinates' own.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..ir import ZERO, Evaluator, jacobian, sub, subs
from ..ir.linalg import Sparse
from .equations import Equations
from .errors import ModelError


def reduced_equations(eqs: Equations) -> Equations:
    """`eqs` over its independent coordinates (see the module docstring)."""
    if not eqs.explicit:
        raise ModelError(f"{eqs.model}: equations in the independent coordinates need explicit (closed-form) "
                         "dependent coordinates (Model.explicit); the model has none")
    if eqs.M is None or eqs.Q is None:
        raise ModelError(f"{eqs.model}: equations in the independent coordinates need the mass matrix "
                         "(give the bodies mass)")
    if eqs.nh:
        raise ModelError(f"{eqs.model}: equations in the independent coordinates do not handle non-holonomic "
                         f"constraints ({', '.join(eqs.nh_names)})")
    z, zd, zdd = list(eqs.independent), eqs.independent_qd, eqs.independent_qdd
    smap = eqs.explicit_map(2)
    pos_map = eqs.explicit_map(0)
    vel_map = eqs.explicit_map(1)
    # qdd over every coordinate in z, zd, zdd: R = d qdd / d zdd, c = qdd at zdd = 0
    qdd_all = [smap.get(a, a) for a in eqs.qdd]
    R = jacobian(qdd_all, zdd)
    c = subs(qdd_all, {a: ZERO for a in zdd})
    M = Sparse(eqs.M.shape, {ij: subs(a, pos_map) for ij, a in eqs.M.entries.items()})
    Q = subs(list(eqs.Q), vel_map)
    # R^T (M R) column by column, each entry once (the upper triangle mirrored: M_z symmetric
    # atom for atom); R^T (Q - M c); R^T B
    nz = len(z)
    Mz = {}
    for b in sorted({k for _, k in R.entries}):
        col = M.matvec([R[(j, b)] for j in range(eqs.n)])
        for a, s in enumerate(R.rmatvec(col)[:b + 1]):
            if s is not ZERO:
                Mz[(a, b)] = Mz[(b, a)] = s
    Qz = R.rmatvec([sub(qj, mc) for qj, mc in zip(Q, M.matvec(c))])
    B = Sparse(eqs.B.shape, {ij: subs(a, pos_map) for ij, a in eqs.B.entries.items()})
    Bz = {(k, u): s for u in range(B.shape[1])
          for k, s in enumerate(R.rmatvec([B[(i, u)] for i in range(eqs.n)])) if s is not ZERO}
    rows, _ = eqs.independent_rows(range(len(eqs.phi)))
    keep = set(z) | {eqs.t} | set(zd) | set(zdd) | set(eqs.params or [])
    env = eqs.envelope
    if env:
        env = replace(env, quantities=tuple(replace(qn, equation=subs(qn.equation, pos_map))
                                            for qn in env.quantities))
    names = {s.value.name for s in z}
    return Equations(model=eqs.model, q=z, qd=zd, qdd=zdd, t=eqs.t,
                     phi=[eqs.phi[i] for i in rows], phi_names=[eqs.phi_names[i] for i in rows],
                     ranges={k: v for k, v in eqs.ranges.items() if k in keep},
                     params=list(eqs.params or []), M=Sparse((nz, nz), Mz), Q=Qz,
                     guess={k: v for k, v in eqs.guess.items() if k in keep},
                     driving=[eqs.driving[i] for i in rows], actuator_names=list(eqs.actuator_names),
                     B=Sparse((nz, eqs.B.shape[1]), Bz),
                     T=None if eqs.T is None else subs(eqs.T, vel_map),
                     V=None if eqs.V is None else subs(eqs.V, pos_map), conservative=eqs.conservative,
                     outputs={k: subs(v, vel_map) for k, v in eqs.outputs.items()},
                     envelope=env, initial_q={k: v for k, v in eqs.initial_q.items() if k in names},
                     initial_qd={k: v for k, v in eqs.initial_qd.items() if k in names},
                     source=eqs.source, reduced_from=eqs)


def expand(reduced: Equations, t: np.ndarray, Z: np.ndarray, ZD: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Q, QD) over every coordinate of the full equations at rows of the independent
    coordinates' positions Z and rates ZD (and times t): the closed forms evaluated."""
    full = reduced.reduced_from
    vel_map = full.explicit_map(1)
    pos = [vel_map.get(a, a) for a in full.q]
    vel = [vel_map.get(a, a) for a in full.qd]
    inputs = list(reduced.q) + list(reduced.qd) + [reduced.t]
    X = np.column_stack([np.atleast_2d(Z), np.atleast_2d(ZD), np.asarray(t, float).reshape(-1)])
    out = np.atleast_2d(Evaluator(pos + vel, inputs)(X))
    n = full.n
    return out[:, :n], out[:, n:2 * n]
