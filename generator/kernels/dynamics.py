"""The dynamics kernels: forward dynamics (accelerations from forces) and inverse dynamics
(forces from a prescribed motion).

    forward-dynamics  q, qd, t, u -> qdd, lambda:  [M A^T; A 0] [qdd; lambda] = [Q + B u; gamma]
    inverse-dynamics  q, qd, qdd, t -> u, lambda:  [A^T, -B] [lambda; u] = Q - M qdd

Sign conventions are those of Equations: M qdd + Phi_q^T lambda = Q + B u, with Q (the
"delta" of the principle of virtual power) holding gravity, applied forces and the
velocity-dependent inertia terms. A holds the kinematic rows (driving constraints left
out: the actuators u take their place) and the non-holonomic rows; an inverse-dynamics
kernel of a model without actuators keeps every row, so the multipliers of the driving
constraints are the efforts that drive the motion.

Invariants: every input has a declared range (an actuator input without one gets the
envelope of the inverse-dynamics forces along the driven motion, widened, and
`info.derived_ranges` names it); each kernel factors one matrix once, pivots fixed at
generation time and checked at consistent configurations (domain.sampling).
"""
from __future__ import annotations

from ..domain.cover import envelope_cover, envelope_domain
from ..domain.forces import actuator_ranges, dynamics_domain
from ..domain.motion import driven_domain, motion_states
from ..domain.sampling import kernel_samples, with_envelope_samples
from ..ir import ZERO, Sparse, add, neg, sub
from ..linalg import SingularPivotError, factor_ldlt, factor_lu
from ..model.equations import Equations
from .common import (KernelError, LinearSystem, actuator_symbols, actuators, constraint_rows, names, need_inertia,
                     port)
from .cost import weighted_cost
from .kernel import InPort, Kernel, KernelInfo, OutPort

FORWARD_METHODS = ("auto", "ldlt", "lu")


def kkt_matrix(M: Sparse, A: Sparse) -> Sparse:
    """K = [M A^T; A 0], the matrix of [qdd; lambda] in the forward dynamics."""
    n = M.shape[0]
    entries = dict(M.entries)
    for (i, j), a in A.entries.items():
        entries[(n + i, j)] = a
        entries[(j, n + i)] = a
    return Sparse((n + A.shape[0], n + A.shape[0]), entries)


def _forward_factor(K: Sparse, rhs, samples, method: str, row_names, col_names, label):
    """(factor, solution) of K x = rhs by `method`; with "auto" the cheaper of LDL^T and LU
    (divisions weighted), LDL^T on a tie."""
    tried = {}
    if method in ("auto", "ldlt"):
        try:
            F = factor_ldlt(K, samples, names=col_names, label=label, definite=False)
            tried["ldlt"] = (F, F.solve(rhs))
        except SingularPivotError:
            if method == "ldlt":
                raise
    if method in ("auto", "lu"):
        F = factor_lu(K, samples, row_names=row_names, col_names=col_names, label=label)
        tried["lu"] = (F, F.solve(rhs))
    if len(tried) == 2:
        cost = {k: weighted_cost(x_) for k, (_, x_) in tried.items()}
        return tried["ldlt"] if cost["ldlt"] <= cost["lu"] else tried["lu"]
    return next(iter(tried.values()))


def forward_dynamics_kernel(eqs: Equations, samples=None, method: str = "auto") -> Kernel:
    """qdd and the multipliers lambda from q, qd, t and the actuator inputs u:
    [M A^T; A 0] [qdd; lambda] = [Q + B u; gamma], A the kinematic and non-holonomic rows.

    method "ldlt": symmetric LDL^T with pivots (1 x 1, or 2 x 2 blocks where M is
    singular, as with Euler parameters) chosen at generation time; "lu": LU with fixed
    pivots; "auto" (default): both, keeping the one whose kernel costs less by
    `weighted_cost`. LU usually wins on these matrices: its Markowitz pivots on sparse
    constraint rows eliminate a coordinate through the constraint that fixes it, which a
    symmetric order can only do as a 2 x 2 block with all the coordinate's inertia
    couplings; LDL^T wins on denser mass matrices (relative coordinates)."""
    need_inertia(eqs, "forward-dynamics")
    if method not in FORWARD_METHODS:
        raise KernelError(f"forward-dynamics: method {method!r} is not auto, ldlt or lu")
    n = len(eqs.q)
    A, gamma, cnames, rows = constraint_rows(eqs, kinematic_only=True)
    act_names, B = actuators(eqs)
    u = actuator_symbols(eqs, act_names)
    K = kkt_matrix(eqs.M, A)
    qnames = names(eqs.q)
    lam_names = [f"lambda_{c}" for c in cnames]
    row_names = [f"motion of {q}" for q in qnames] + cnames
    col_names = [f"{q}_dd" for q in qnames] + lam_names
    cover = envelope_cover(eqs, rows=rows)
    if samples is None:
        samples = with_envelope_samples(kernel_samples(eqs, rows, "kinematic constraint"), cover)
    Bu = B.matvec(u) if u else [ZERO] * n
    rhs = [add(q_, f) for q_, f in zip(eqs.Q, Bu)] + list(gamma)
    F, x = _forward_factor(K, rhs, samples, method, row_names, col_names, f"{eqs.model} KKT [M A^T; A 0]")
    qdd, lam = x[:n], x[n:]
    motion = motion_states(eqs)
    uranges, derived = actuator_ranges(eqs, u, A, B, motion)
    inputs = [port("q", eqs, eqs.q), port("qd", eqs, eqs.qd), port("t", eqs, [eqs.t])]
    if u:
        inputs.append(InPort("u", u, [uranges[s] for s in u]))
    k = Kernel(
        model=eqs.model,
        name="forward-dynamics",
        description="accelerations qdd and multipliers lambda from q, qd, t"
                    + (" and actuator inputs u" if u else "")
                    + f" (straight-line {F.kind} of the KKT matrix, pivots fixed at generation time)",
        inputs=inputs,
        outputs=[OutPort.vector("qdd", qdd, names(eqs.qdd)), OutPort.vector("lambda", lam, lam_names)],
        info=KernelInfo(solves={"KKT": F}, report=F.report(x), derived_ranges=derived, multipliers=lam_names),
    )
    return k.with_domain(envelope_domain(eqs, inputs, cover) if cover is not None
                         else dynamics_domain(eqs, A, B, motion, bool(u)))


def inverse_dynamics_system(eqs: Equations) -> tuple[LinearSystem, list[int]]:
    """([A^T, -B] [lambda; u] = Q - M qdd, the phi rows A keeps): A the kinematic and
    non-holonomic rows, or every row when the model has no actuators."""
    need_inertia(eqs, "inverse-dynamics")
    n = len(eqs.q)
    act_names, B = actuators(eqs)
    A, _, cnames, rows = constraint_rows(eqs, kinematic_only=bool(act_names))
    r = A.shape[0]
    if r + len(act_names) >= n:  # by rank: redundant rows leave their multipliers undetermined
        from ..reference.solvers import mobility

        mob = mobility(eqs, rows)
        if mob.redundant:
            raise KernelError(f"{eqs.model}: the inverse-dynamics kernel solves a square [A^T, -B] by LU: the rows "
                              f"it keeps have {mob.describe()}; leave the redundant ones out")
    if r + len(act_names) != n:
        raise KernelError(
            f"{eqs.model}: inverse dynamics needs as many unknowns as coordinates: {r} multipliers "
            f"({', '.join(cnames)}) and {len(act_names)} actuators ({', '.join(act_names) or 'none'}) "
            f"for {n} coordinates; the actuators should replace the driving constraints one for one")
    entries = {(j, i): a for (i, j), a in A.entries.items()}
    for (i, k), a in B.entries.items():
        entries[(i, r + k)] = neg(a)
    G = Sparse((n, n), entries)
    Mqdd = eqs.M.matvec(eqs.qdd)
    rhs = [sub(q_, m) for q_, m in zip(eqs.Q, Mqdd)]
    return LinearSystem(G, rhs, [f"motion of {q}" for q in names(eqs.q)],
                        [f"lambda_{c}" for c in cnames] + [f"u_{a}" for a in act_names], list(range(r, n))), rows


def inverse_dynamics_kernel(eqs: Equations, samples=None) -> Kernel:
    """Actuator forces u and multipliers lambda from a prescribed motion (q, qd, qdd, t):
    [A^T, -B] [lambda; u] = Q - M qdd, A the kinematic and non-holonomic rows (all rows
    when the model has no actuators: the driving multipliers are then the efforts). Square
    when the actuators replace the driving constraints one for one."""
    system, rows = inverse_dynamics_system(eqs)
    r = system.forces[0] if system.forces else system.matrix.shape[0]
    lam_names = system.col_names[:r]
    cover = envelope_cover(eqs, rows=rows) if system.forces else None
    if samples is None:
        samples = with_envelope_samples(kernel_samples(eqs, rows if system.forces else None, "kinematic constraint"),
                                        cover)
    F = factor_lu(system.matrix, samples, row_names=system.row_names, col_names=system.col_names,
                  label=f"{eqs.model} [A^T, -B]")
    x = F.solve(system.rhs)
    lam, uu = x[:r], x[r:]
    k = Kernel(
        model=eqs.model,
        name="inverse-dynamics",
        description="actuator forces u and multipliers lambda from the prescribed motion q, qd, qdd, t "
                    "(straight-line LU of [Phi_q^T, -B], pivots fixed at generation time)",
        inputs=[port("q", eqs, eqs.q), port("qd", eqs, eqs.qd), port("qdd", eqs, eqs.qdd),
                port("t", eqs, [eqs.t])],
        outputs=[OutPort.vector("u", uu, system.col_names[r:]), OutPort.vector("lambda", lam, lam_names)],
        info=KernelInfo(solves={"G": F}, report=F.report(x), multipliers=lam_names),
    )
    return k.with_domain(envelope_domain(eqs, k.inputs, cover) if cover is not None
                         else driven_domain(eqs, lambda q, qd, qdd, t: [*q, *qd, *qdd, t]))
