"""The linearized-dynamics kernel: A, B (and C) of the forward dynamics about the state it
is given, on the device.

    linearized-dynamics  q, qd, t, u -> A, B [, C]     dx/dt = A dx + B du,  dy = C dx

The state x = (z, w) is in independent coordinates, as mbforge.linearize gives it: z are
n - rank(Phi_q) of the coordinates, w n - rank([Phi_q; C_nh]) of the velocities (rates of
independent coordinates). They are chosen at generation time, at the model's assembled
guess, the way linearize() chooses them (QR with column pivoting), or by name with the
options `coordinates=[...]`, `velocities=[...]`; the kernel's description and
`info.report` name them, rows and columns of A are in that order.

Inputs: the full consistent state (q, qd), t and the actuator inputs u, not (z, w): the
dependent coordinates follow from Phi(q, t) = 0, a Newton iteration that has no fixed
number of steps and cannot be straight-lined, and a controller that linearizes about a
state it estimates holds the full state anyway (the forward-dynamics kernel takes the
same inputs). The kernel does not check consistency: at an inconsistent state it returns
the formulas' values there.

Derivation (the same as linearize(), in atoms): with F(q, qd, u; qdd, lambda) =
[M qdd + A^T lambda - Q - B u; A qdd - gamma] = 0 and K = [M A^T; A 0],
    f_q = -K^-1 dF/dq,  f_qd = -K^-1 dF/dqd,  f_u = K^-1 [B; 0]      (rows of qdd),
the position map dq/dz = Tq (Tq[z] = I, Tq[dep] = -Phi_q[:, dep]^-1 Phi_q[:, z]), the velocity
map dqd/dw = V (V[w] = I, V[dep] = -A[:, dep]^-1 A[:, w]) and dqd/dz at fixed w,
G[dep] = A[:, dep]^-1 d(b - A qd)/dq Tq (A qd = b), so that
    A = [[G[z], V[z]], [(f_q Tq + f_qd G)[w], (f_qd V)[w]]],  B = [[0], [f_u[w]]],
    C = [dh/dq Tq + dh/dqd G, dh/dqd V]      (D = 0: outputs depend on q, qd, t only).

Invariants: the derivatives are mbforge.ir jacobians of the atomized equations (no finite
differences); every solve is straight-line (mbforge.linalg), the KKT matrix factored once
for all right-hand sides, Phi_q[:, dep] and A[:, dep] once each, pivots fixed at
generation time and checked at consistent configurations (domain.sampling), as the
forward-dynamics kernel does. Driving constraints are left out when the model has
actuators and kept otherwise (linearize's drivers="auto"); `drivers=` overrides. Its domain
is, as the forward dynamics', the consistent states of the model's operating envelope when
it declares one (domain.cover), else the declared ranges about the driven motion.
Outputs are sparse matrices ("A", "B", "C") whose pattern leaves out the structural zeros.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..domain.cover import envelope_cover, envelope_domain
from ..domain.forces import actuator_ranges, dynamics_domain
from ..domain.motion import motion_states
from ..domain.sampling import kernel_samples, with_envelope_samples
from ..ir import ONE, ZERO, Sparse, add, jacobian, mul, neg, subs, symbol
from ..linalg import SingularPivotError, factor_lu
from ..model.equations import Equations
from .common import (KernelError, actuator_symbols, actuators, constraint_rows, independent_equations, names,
                     need_inertia, nh_rows, port)
from .dynamics import kkt_matrix
from .kernel import InPort, Kernel, KernelInfo, OutPort


def _dense(S: Sparse) -> list[list]:
    X = [[ZERO] * S.shape[1] for _ in range(S.shape[0])]
    for (i, j), a in S.entries.items():
        X[i][j] = a
    return X


def _matmul(X, Y, inner: int, cols: int) -> list[list]:
    """X (rows x inner) times Y (inner x cols), lists of atoms, structural zeros skipped."""
    out = []
    for row in X:
        r = []
        for c in range(cols):
            acc = ZERO
            for k in range(inner):
                if row[k] is not ZERO and Y[k][c] is not ZERO:
                    acc = add(acc, mul(row[k], Y[k][c]))
            r.append(acc)
        out.append(r)
    return out


def _solve_columns(F, R) -> list[list]:
    """F^-1 R column by column (R a dense list of rows), as a dense list of rows."""
    if not R or not R[0]:
        return [[] for _ in range(F.n)] if R else []
    cols = [F.solve([row[c] for row in R]) for c in range(len(R[0]))]
    return [[col[i] for col in cols] for i in range(len(cols[0]))]


def _negated(X) -> list[list]:
    return [[neg(a) if a is not ZERO else ZERO for a in row] for row in X]


def _sparse_out(name: str, X, rows: int, cols: int) -> OutPort:
    return OutPort.sparse(name, Sparse((rows, cols), {(i, j): X[i][j] for i in range(rows) for j in range(cols)
                                                      if X[i][j] is not ZERO}))


def _factor_map(S, samples, rows, cols, label, independent, option):
    """factor_lu of the dependent columns; a choice of independent coordinates that does not
    serve over the samples (a natural coordinate of a crank that turns through a full circle
    has no complement regular everywhere) is one KernelError naming the option to change."""
    try:
        return factor_lu(S, samples, row_names=rows, col_names=cols, label=label)
    except SingularPivotError as e:
        raise KernelError(f"linearized-dynamics: with {', '.join(independent)} independent the others are not "
                          f"determined everywhere the kernel runs: {e} Choose other independent {option} "
                          f"(the kernel option {option}=...)") from None


def _choice(eqs: Equations, drivers: str, coordinates, velocities):
    """(drop drivers?, independent coordinate indices, independent velocity indices) chosen
    by mbforge.linearize at the model's assembled guess (or checked there, when named)."""
    from ..reference.linearize import LinearizationError, Linearizer

    try:
        L = Linearizer(eqs, drivers=drivers)
        lo, _ = eqs.ranges.get(eqs.t, (0.0, 0.0))
        lin = L.at(t=float(lo), coordinates=coordinates, velocities=velocities)
    except LinearizationError as e:
        raise KernelError(f"linearized-dynamics: {e}") from None
    qn = names(eqs.q)
    return (L.drivers == "drop", [qn.index(c) for c in lin.coordinates],
            [qn.index(v[:-2]) for v in lin.velocities])


@dataclass
class _Setup:
    """What every step of the kernel reads: the constraint rows kept, the actuators and the
    split of coordinates (ip, dp) and velocities (iv, dv) into independent and dependent."""
    eqs: Equations
    A: Sparse
    gamma: list
    cnames: list[str]
    m: int  # holonomic rows (the first m of A)
    beta: list
    act_names: list[str]
    Bs: Sparse
    u: list
    ip: list[int]
    iv: list[int]
    dp: list[int]
    dv: list[int]
    samples: object
    cover: object = None  # the operating envelope's cover of consistent states (domain.cover), if declared

    @property
    def n(self) -> int:
        return len(self.eqs.q)

    @property
    def qn(self) -> list[str]:
        return names(self.eqs.q)


def _setup(eqs: Equations, drop: bool, ip, iv, samples) -> _Setup:
    """The constraint rows (kinematic only when the drivers are dropped), the actuators and the
    dependent coordinates and velocities; KernelError when the constraints are redundant."""
    n = len(eqs.q)
    A, gamma, cnames, rows = constraint_rows(eqs, kinematic_only=drop)
    nA, m = A.shape[0], len(rows)
    beta = [eqs.beta[i] for i in rows] + nh_rows(eqs)[1]
    act_names, Bs = actuators(eqs)
    u = actuator_symbols(eqs, act_names)
    dp = [j for j in range(n) if j not in ip]
    dv = [j for j in range(n) if j not in iv]
    if len(dp) != m or len(dv) != nA:
        raise KernelError(f"{eqs.model}: linearized-dynamics: {m} holonomic and {nA - m} non-holonomic rows "
                          f"for {len(dp)} dependent coordinates and {len(dv)} dependent velocities: "
                          "the constraints are redundant (leave the redundant ones out of the model)")
    cover = envelope_cover(eqs, rows=constraint_rows(eqs, kinematic_only=True)[3])  # as forward dynamics
    if samples is None:
        samples = with_envelope_samples(kernel_samples(eqs, rows, "kinematic constraint" if drop else "constraint"),
                                        cover)
    return _Setup(eqs, A, gamma, cnames, m, beta, act_names, Bs, u, ip, iv, dp, dv, samples, cover)


def _forward_solve(s: _Setup):
    """(factor of K, [qdd; lambda], multiplier names, B u) of K [qdd; lambda] = [Q + B u; gamma]."""
    eqs, n, qn = s.eqs, s.n, s.qn
    K = kkt_matrix(eqs.M, s.A)
    lam_names = [f"lambda_{c}" for c in s.cnames]
    Bu = s.Bs.matvec(s.u) if s.u else [ZERO] * n
    FK = factor_lu(K, s.samples, row_names=[f"motion of {x}" for x in qn] + s.cnames,
                   col_names=[f"{x}_dd" for x in qn] + lam_names, label=f"{eqs.model} KKT [M A^T; A 0]")
    x = FK.solve([add(a, b) for a, b in zip(eqs.Q, Bu)] + list(s.gamma))
    return FK, x, lam_names, Bu


def _residual_jacobian(s: _Setup, Bu, x, MQ=None):
    """jac(fs, xs): dense d fs / d xs with the solution x put in for qdd and lambda, and the
    residual F with placeholders for qdd and lambda, whose jacobians f_q, f_qd derive from.
    MQ: (M, Q) in other forms than the model's (kernels.dynamics.tree_forms)."""
    eqs, n, A, nA = s.eqs, s.n, s.A, s.A.shape[0]
    M, Q = MQ if MQ is not None else (eqs.M, eqs.Q)
    lam_s = [symbol(f"linearized_lambda_{k}", "input") for k in range(nA)]
    qdd_s = list(eqs.qdd)
    Mq = M.matvec(qdd_s)
    At_l = [ZERO] * n
    for (i, j), a in A.entries.items():
        At_l[j] = add(At_l[j], mul(a, lam_s[i]))
    Aq = A.matvec(qdd_s)
    resid = ([add(add(Mq[i], At_l[i]), neg(add(Q[i], Bu[i]))) for i in range(n)]
             + [add(Aq[r], neg(s.gamma[r])) for r in range(nA)])
    put = dict(zip(qdd_s + lam_s, x))

    def jac(fs, xs):
        J = jacobian(fs, xs)
        vals = subs(J.values(), put)
        return _dense(Sparse(J.shape, dict(zip(J.pattern, vals))))

    return jac, resid


def _negated_columns(Ad, rows: int, cols) -> list[list]:
    """-A[:rows, cols] as a dense list of rows."""
    return [[neg(Ad[i][j]) if Ad[i][j] is not ZERO else ZERO for j in cols] for i in range(rows)]


def _position_map(s: _Setup, Ad):
    """(Tq = dq/dz, factor of Phi_q[:, dependent] or None): Tq[dep] = -Phi_q[:, dep]^-1 Phi_q[:, z]."""
    n, m, qn, ip, dp = s.n, s.m, s.qn, s.ip, s.dp
    Tq = [[ZERO] * len(ip) for _ in range(n)]
    for k, j in enumerate(ip):
        Tq[j][k] = ONE
    if not dp:
        return Tq, None
    P = Sparse((m, m), {(i, k): Ad[i][j] for i in range(m) for k, j in enumerate(dp) if Ad[i][j] is not ZERO})
    FP = _factor_map(P, s.samples, s.cnames[:m], [qn[j] for j in dp], f"{s.eqs.model} Phi_q[:, dependent]",
                     [qn[j] for j in ip], "coordinates")
    S = _solve_columns(FP, _negated_columns(Ad, m, ip))
    for k, j in enumerate(dp):
        Tq[j] = S[k]
    return Tq, FP


def _velocity_maps(s: _Setup, Ad, Tq, jac):
    """(V = dqd/dw, G = dqd/dz at fixed w, factor of A[:, dependent velocities] or None)."""
    eqs, n, nA, qn, iv, dv = s.eqs, s.n, s.A.shape[0], s.qn, s.iv, s.dv
    nz, nw = len(s.ip), len(iv)
    V = [[ZERO] * nw for _ in range(n)]
    for k, j in enumerate(iv):
        V[j][k] = ONE
    G = [[ZERO] * nz for _ in range(n)]
    if not dv:
        return V, G, None
    Av = Sparse((nA, nA), {(i, k): Ad[i][j] for i in range(nA) for k, j in enumerate(dv) if Ad[i][j] is not ZERO})
    FV = _factor_map(Av, s.samples, s.cnames, [f"{qn[j]}_d" for j in dv],
                     f"{eqs.model} A[:, dependent velocities]", [f"{qn[j]}_d" for j in iv], "velocities")
    S = _solve_columns(FV, _negated_columns(Ad, nA, iv))
    Aqd = s.A.matvec(list(eqs.qd))
    Dq = jac([add(b, neg(a)) for b, a in zip(s.beta, Aqd)], list(eqs.q))
    S2 = _solve_columns(FV, _matmul(Dq, Tq, n, nz))
    for k, j in enumerate(dv):
        V[j] = S[k]
        G[j] = S2[k]
    return V, G, FV


def _state_matrices(s: _Setup, FK, Fq, Fqd, Tq, V, G) -> list[OutPort]:
    """A and B (when there are actuators): f_q Tq + f_qd G, f_qd V, f_u, one KKT solve per column."""
    n, nA, ip, iv, u = s.n, s.A.shape[0], s.ip, s.iv, s.u
    nz, nw = len(ip), len(iv)
    Rz = [[add(a, b) for a, b in zip(r1, r2)] for r1, r2 in zip(_matmul(Fq, Tq, n, nz), _matmul(Fqd, G, n, nz))]
    Xz = _solve_columns(FK, _negated(Rz))
    Xw = _solve_columns(FK, _negated(_matmul(Fqd, V, n, nw)))
    Bd = _dense(s.Bs)
    Xu = _solve_columns(FK, [Bd[i] for i in range(n)] + [[ZERO] * len(u) for _ in range(nA)]) if u else None
    Am = [[G[j][c] for c in range(nz)] + [V[j][c] for c in range(nw)] for j in ip]
    Am += [[Xz[j][c] for c in range(nz)] + [Xw[j][c] for c in range(nw)] for j in iv]
    outputs = [_sparse_out("A", Am, nz + nw, nz + nw)]
    if u:
        Bm = [[ZERO] * len(u) for _ in ip] + [Xu[j] for j in iv]
        outputs.append(_sparse_out("B", Bm, nz + nw, len(u)))
    return outputs


def _output_matrix(s: _Setup, Tq, V, G) -> OutPort:
    """C = [dh/dq Tq + dh/dqd G, dh/dqd V] of the model's outputs h."""
    eqs, n, nz, nw = s.eqs, s.n, len(s.ip), len(s.iv)
    h = list(eqs.outputs.values())
    dh, dhd = jacobian(h, list(eqs.q)), jacobian(h, list(eqs.qd))
    dh, dhd = _dense(dh), _dense(dhd)
    Cz = [[add(a, b) for a, b in zip(r1, r2)] for r1, r2 in zip(_matmul(dh, Tq, n, nz), _matmul(dhd, G, n, nz))]
    Cw = _matmul(dhd, V, n, nw)
    return _sparse_out("C", [a + b for a, b in zip(Cz, Cw)], len(h), nz + nw)


def _kernel(s: _Setup, outputs, out_names, solves, lam_names, enclosures=(), how=None) -> Kernel:
    """The kernel around its outputs: ports with the actuators' ranges, report, domain."""
    eqs, u, qn = s.eqs, s.u, s.qn
    state = [qn[j] for j in s.ip] + [f"{qn[j]}_d" for j in s.iv]
    motion = motion_states(eqs)
    A_kin = constraint_rows(eqs, kinematic_only=True)[0]
    uranges, derived = actuator_ranges(eqs, u, A_kin, s.Bs, motion)
    inputs = [port("q", eqs, list(eqs.q)), port("qd", eqs, list(eqs.qd)), port("t", eqs, [eqs.t])]
    if u:
        inputs.append(InPort("u", u, [uranges[x] for x in u]))
    report = (f"state x = ({', '.join(state)}); inputs du = ({', '.join(s.act_names) or 'none'})"
              + (f"; outputs ({', '.join(out_names)})" if out_names else "") + "\n"
              + "\n".join(F.report() for F in solves.values()))
    k = Kernel(
        model=eqs.model,
        name="linearized-dynamics",
        description=f"A, B{', C' if out_names else ''} of the forward dynamics in the state "
                    f"({', '.join(state)}) from the consistent q, qd, t" + (" and actuator inputs u" if u else "")
                    + (how or " (implicit derivatives of the KKT system, straight-line LU, pivots fixed at generation time)"),
        inputs=inputs,
        outputs=outputs,
        info=KernelInfo(solves=solves, report=report, derived_ranges=derived, multipliers=lam_names,
                        enclosures=list(enclosures)),
    )
    # as forward dynamics: the envelope's consistent states where the model declares one
    return k.with_domain(envelope_domain(eqs, inputs, s.cover) if s.cover is not None
                         else dynamics_domain(eqs, A_kin, s.Bs, motion, bool(u)))


class _Recorded:
    """A factor whose solves are recorded as (rhs, x): the columns' backward bounds need them."""

    def __init__(self, F):
        self.F, self.n, self.pairs = F, F.n, []

    def solve(self, b):
        x = self.F.solve(b)
        self.pairs.append((list(b), x))
        return x


def _tree_kernel(s: _Setup):
    """The kernel of an unconstrained open tree (every coordinate independent), or None when
    the model is not one: M by CRBA and the bias forces by RNEA (kernels.dynamics.tree_forms),
    one LDL^T factor leaves first for the accelerations and every column of A and B, all
    their errors bounded backward (analysis.ldlback) with the factor's constant floors."""
    from .dynamics import _tree_factor
    eqs, n = s.eqs, s.n
    Bu = s.Bs.matvec(s.u) if s.u else [ZERO] * n
    got = {}

    def columns(M, Q, F, x):
        jac, resid = _residual_jacobian(s, Bu, x, (M, Q))
        Fq, Fqd = jac(resid, list(eqs.q)), jac(resid, list(eqs.qd))
        Tq, _ = _position_map(s, None)
        V, G, _ = _velocity_maps(s, None, Tq, jac)
        rec = _Recorded(F)
        got["outputs"] = _state_matrices(s, rec, Fq, Fqd, Tq, V, G)
        got["maps"] = Tq, V, G
        return rec.pairs

    qn = s.qn
    tree = _tree_factor(eqs, Bu, s.samples, [f"{x}_dd" for x in qn], f"{eqs.model} M", more=columns,
                        act=(s.Bs, s.u))
    if tree is None:
        return None
    F, _, enc = tree
    out_names = list(getattr(eqs, "outputs", None) or {})
    if out_names:
        got["outputs"].append(_output_matrix(s, *got["maps"]))
    return _kernel(s, got["outputs"], out_names, {"M": F}, [], [enc],
                   " (M by the composite-rigid-body algorithm and the bias forces by RNEA, their implicit "
                   "derivatives, one straight-line LDL^T leaves first for every column)")


def linearized_dynamics_kernel(eqs: Equations, samples=None, coordinates=None, velocities=None,
                               drivers: str = "auto", reduced: bool = False) -> Kernel:
    """A, B (and C for the model's outputs) of the forward dynamics in independent
    coordinates (chosen at generation time, or named by `coordinates` / `velocities`) from
    the full consistent state q, qd, t and the actuator inputs u. reduced: the equations
    over the independent coordinates of Model.explicit (model.reduce) instead."""
    eqs = independent_equations(eqs, reduced, "linearized-dynamics")
    need_inertia(eqs, "linearized-dynamics")
    if isinstance(coordinates, str):
        coordinates = [c for c in coordinates.split(",") if c]
    if isinstance(velocities, str):
        velocities = [v for v in velocities.split(",") if v]
    drop, ip, iv = _choice(eqs, drivers, coordinates, velocities)
    s = _setup(eqs, drop, ip, iv, samples)
    tree = _tree_kernel(s) if s.A.shape[0] == 0 else None
    if tree is not None:
        return tree
    FK, x, lam_names, Bu = _forward_solve(s)
    jac, resid = _residual_jacobian(s, Bu, x)
    Fq, Fqd = jac(resid, list(eqs.q)), jac(resid, list(eqs.qd))
    Ad = _dense(s.A)
    Tq, FP = _position_map(s, Ad)
    V, G, FV = _velocity_maps(s, Ad, Tq, jac)
    solves = {"KKT": FK}
    if FV is not None:
        solves["velocities"] = FV
    if FP is not None:
        solves["positions"] = FP
    outputs = _state_matrices(s, FK, Fq, Fqd, Tq, V, G)
    out_names = list(getattr(eqs, "outputs", None) or {})
    if out_names:
        outputs.append(_output_matrix(s, Tq, V, G))
    return _kernel(s, outputs, out_names, solves, lam_names)
