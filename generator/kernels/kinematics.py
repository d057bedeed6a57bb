"""The kinematics kernel of a fully driven model.

    q, t -> qd, qdd, Phi:   A qd = b,  A qdd = g,  A = [Phi_q; C]

A square (holonomic rows, driving ones included, then non-holonomic rows) and regular: the
model fully driven by rank (`reference.solvers.mobility`) with no redundant row. Invariants:
one LU (pivots fixed at generation time on consistent configurations along the driven
motion) serves both solves; qdd is a function of (q, t) alone (gamma's velocities are the
solved ones); the position residual Phi is an output, for monitoring.
"""
from __future__ import annotations

from ..domain.cover import time_domain
from ..domain.motion import driven_domain
from ..domain.sampling import kernel_samples
from ..ir import subs
from ..linalg import factor_lu
from ..model.equations import Equations
from ..reference.solvers import mobility
from .common import KernelError, names, nh_rows, port, stack_rows
from .kernel import Kernel, KernelInfo, OutPort


def kinematics_kernel(eqs: Equations, samples=None) -> Kernel:
    """qd and qdd of a fully driven model from q and t: A qd = b and A qdd = g with
    A = [Phi_q; C] square (holonomic rows, driving ones included, then non-holonomic
    rows), one LU (pivots fixed at generation time) shared by both solves; the position
    residual Phi is an output too, for monitoring."""
    n = len(eqs.q)
    C, nh_beta, nh_gamma, nh_names = nh_rows(eqs)
    A = stack_rows([eqs.phi_q, C], n)
    row_names = list(eqs.phi_names) + nh_names
    mob = mobility(eqs)
    what = (f"{A.shape[0]} equations ({', '.join(row_names)}) for {n} coordinates ({', '.join(names(eqs.q))}), "
            f"{mob.describe()}")
    if not mob.driven:
        raise KernelError(f"{eqs.model}: the kinematics kernel needs a fully driven model (its equations fixing "
                          f"every velocity): {what}")
    if A.shape[0] != n:  # driven, with redundant equations: the LU below takes exactly n of them
        raise KernelError(f"{eqs.model}: the kinematics kernel solves with an LU of a square Phi_q: {what}; "
                          "leave the redundant ones out")
    if samples is None:
        samples = kernel_samples(eqs, None, "constraint")
    F = factor_lu(A, samples, row_names=row_names, col_names=names(eqs.q), label=f"{eqs.model} Phi_q")
    qd = F.solve(list(eqs.beta) + nh_beta)
    # gamma depends on the velocities: substitute the solved ones, so qdd is a function of
    # (q, t) alone and shares the factorization and the velocity atoms
    g = subs(list(eqs.gamma) + nh_gamma, dict(zip(eqs.qd, qd)))
    qdd = F.solve(g)
    k = Kernel(
        model=eqs.model,
        name="kinematics",
        description="velocities qd and accelerations qdd of the driven motion from q, t "
                    "(straight-line sparse LU of Phi_q, pivots fixed at generation time); position residual Phi",
        inputs=[port("q", eqs, eqs.q), port("t", eqs, [eqs.t])],
        outputs=[OutPort.vector("qd", qd, names(eqs.qd)), OutPort.vector("qdd", qdd, names(eqs.qdd)),
                 OutPort.vector("Phi", eqs.phi, eqs.phi_names)],
        info=KernelInfo(solves={"Phi_q": F}, report=F.report(qd, qdd)),
    )

    def row(q, qd_, qdd_, t):
        return [*q, t]

    # velocity constraints do not fix positions: the sampled tube around the motion; else a
    # verified cover of the driven configurations over the time range
    return k.with_domain(driven_domain(eqs, row) if nh_names else time_domain(eqs, k.inputs, row))
