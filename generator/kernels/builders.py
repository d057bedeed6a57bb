"""Kernel builders: from a model's Equations to the Kernels a device runs.

    equations         Phi, Phi_q, Phi_t, gamma (and M, Q = delta, B when the model has them)
    kinematics        q, t -> qd, qdd (and Phi): Phi_q qd = beta, Phi_q qdd = gamma
    forward-dynamics  q, qd, t, u -> qdd, lambda: [M A^T; A 0] [qdd; lambda] = [Q + B u; gamma]
    inverse-dynamics  q, qd, qdd, t -> u, lambda: [A^T, -B] [lambda; u] = Q - M qdd

Sign conventions are those of Equations: M qdd + Phi_q^T lambda = Q + B u, with Q (the
"delta" of the principle of virtual power) holding gravity, applied forces and the
velocity-dependent inertia terms. In the dynamics kernels A holds the kinematic rows
(driving constraints left out: the actuators u take their place) and the non-holonomic
rows; an inverse-dynamics kernel of a model without actuators keeps every row, so the
multipliers of the driving constraints are the efforts that drive the motion.

Invariants of every kernel built here:
* every input symbol has a declared range (the model's; for an actuator input without a
  declared range, the envelope of the inverse-dynamics forces along the driven motion,
  widened, and the kernel's `extra["derived_ranges"]` says so);
* linear solves are straight-line atoms (mbforge.passes.solve) with pivots fixed at
  generation time, checked at consistent configurations (kernels.samples); one
  factorization serves every right-hand side of a kernel; `extra["solves"]` holds the
  factor objects, `extra["report"]` their reports (pivots, fill, op counts) and
  `extra["divisor_ranges"]` [(divisor atom, min, max)] over those configurations (a
  fixed-point range analysis over the declared box alone sees divisors through zero);
* `motion` holds input vectors along the driven motion (None when there is none).
"""
from __future__ import annotations

import numpy as np

from ..ir import ZERO, Atom, Evaluator, ExpressionError, Sparse, add, neg, op_counts, sub, subs, symbol
from ..model import Equations, Kinematics, ModelError
from ..passes.solve import SingularPivotError, factor_ldlt, factor_lu
from . import InPort, Kernel, OutPort, covers, tube
from .samples import kernel_samples

MOTION_POINTS = 48
DIV_WEIGHT = 8  # a division costs about eight multiplications (14 vs 1-2 cycles on a Cortex-M4F)


def weighted_cost(atoms) -> int:
    """Operations to compute `atoms`, a division counting DIV_WEIGHT (to choose between
    factorizations of one system)."""
    c = op_counts(atoms)
    return c["total"] + (DIV_WEIGHT - 1) * c.get("div", 0)


class KernelError(ModelError):
    """A kernel that the model cannot provide (names the model and what is missing)."""


def _port(name: str, eqs: Equations, syms) -> InPort:
    missing = [s.value.name for s in syms if s not in eqs.ranges]
    if missing:
        raise KernelError(f"{eqs.model}: input {name}: no declared range for {', '.join(missing)}")
    return InPort(name, list(syms), [eqs.ranges[s] for s in syms])


def _names(syms) -> list[str]:
    return [s.value.name for s in syms]


def _nh(eqs):
    """(C, nh_beta, nh_gamma, names) of the non-holonomic rows (empty if none)."""
    nh = getattr(eqs, "nh", None) or []
    if not nh:
        return Sparse((0, len(eqs.q))), [], [], []
    return eqs.nh_qd, list(eqs.nh_beta), list(eqs.nh_gamma), list(eqs.nh_names)


def _driving(eqs) -> list[bool]:
    d = getattr(eqs, "driving", None)
    return list(d) if d is not None else [False] * len(eqs.phi)


def _actuators(eqs) -> tuple[list[str], Sparse]:
    names = list(getattr(eqs, "actuator_names", None) or [])
    B = getattr(eqs, "B", None)
    if B is None:
        B = Sparse((len(eqs.q), len(names)))
    if B.shape != (len(eqs.q), len(names)):
        raise KernelError(f"{eqs.model}: B is {B.shape[0]} x {B.shape[1]} for {len(eqs.q)} coordinates and "
                          f"{len(names)} actuators")
    return names, B


def _stack_rows(parts, n: int) -> Sparse:
    """The rows of several sparse matrices with n columns, one under the other."""
    entries, off = {}, 0
    for S in parts:
        for (i, j), a in S.entries.items():
            entries[(off + i, j)] = a
        off += S.shape[0]
    return Sparse((off, n), entries)


def _select_rows(S: Sparse, rows: list[int]) -> Sparse:
    idx = {i: k for k, i in enumerate(rows)}
    return Sparse((len(rows), S.shape[1]), {(idx[i], j): a for (i, j), a in S.entries.items() if i in idx})


def _motion_states(eqs: Equations, n: int = MOTION_POINTS):
    """(times, Q, QD, QDD) along the driven motion, or None if the model is not fully driven."""
    if len(eqs.phi) + len(getattr(eqs, "nh", None) or []) < len(eqs.q):
        return None
    lo, hi = eqs.ranges[eqs.t]
    times = np.linspace(lo, hi, n)
    Q, QD, QDD = Kinematics(eqs).motion(times)
    return times, Q, QD, QDD


def _motion(eqs: Equations, row) -> list[list[float]] | None:
    """Input vectors along the driven motion over the model's time range (None if the
    model is not fully driven, i.e. has fewer equations than coordinates)."""
    m = _motion_states(eqs)
    if m is None:
        return None
    times, Q, QD, QDD = m
    return [[float(v) for v in row(Q[i], QD[i], QDD[i], float(times[i]))] for i in range(len(times))]


DOMAIN_STEPS = 96  # boxes in the tube around a driven motion


def _domain(eqs: Equations, row):
    """The kernel's input domain for a driven motion: a tube of boxes around the inputs
    along the motion (see kernels.tube), checked to cover the motion half-way between its
    samples. Range analysis (fixed-point formats, error bounds) and test vectors then work
    where the mechanism runs, not over the whole box of declared ranges, where the
    Jacobians are singular in many places. None when the model is not fully driven."""
    lo, hi = eqs.ranges[eqs.t]
    if _motion_states(eqs, 2) is None:
        return None
    times = np.linspace(lo, hi, DOMAIN_STEPS + 1)
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


# ---- equations -----------------------------------------------------------------------------
def equations_kernel(eqs: Equations) -> Kernel:
    """Phi, Phi_q, Phi_t and gamma as they are, from q, qd and t; with M (sparse), Q (delta:
    the generalized forces of the virtual-power principle) and B (sparse) when the model
    has inertia and actuators."""
    outputs = [
        OutPort.vector("Phi", eqs.phi),
        OutPort.sparse("Phi_q", eqs.phi_q),
        OutPort.vector("Phi_t", eqs.phi_t),
        OutPort.vector("gamma", eqs.gamma),
    ]
    desc = "constraints Phi, Jacobian Phi_q (sparse), Phi_t and gamma"
    if eqs.M is not None and eqs.Q is not None:
        outputs += [OutPort.sparse("M", eqs.M), OutPort.vector("Q", eqs.Q)]
        desc += ", mass matrix M (sparse) and generalized forces Q (delta)"
        names, B = _actuators(eqs)
        if names:
            outputs.append(OutPort.sparse("B", B))
            desc += ", actuator directions B (sparse)"
    k = Kernel(
        model=eqs.model,
        name="equations",
        description=desc + " from q, qd, t",
        inputs=[_port("q", eqs, eqs.q), _port("qd", eqs, eqs.qd), _port("t", eqs, [eqs.t])],
        outputs=outputs,
    )
    k.motion = _motion(eqs, lambda q, qd, qdd, t: [*q, *qd, t])
    return k


# ---- kinematics ----------------------------------------------------------------------------
def kinematics_kernel(eqs: Equations, samples=None) -> Kernel:
    """qd and qdd of a fully driven model from q and t: A qd = b and A qdd = g with
    A = [Phi_q; C] square (holonomic rows, driving ones included, then non-holonomic
    rows), one LU (pivots fixed at generation time) shared by both solves; the position
    residual Phi is an output too, for monitoring."""
    n = len(eqs.q)
    C, nh_beta, nh_gamma, nh_names = _nh(eqs)
    A = _stack_rows([eqs.phi_q, C], n)
    row_names = list(eqs.phi_names) + nh_names
    if A.shape[0] != n:
        raise KernelError(f"{eqs.model}: the kinematics kernel needs a fully driven model (as many equations as "
                          f"coordinates): it has {A.shape[0]} equations ({', '.join(row_names)}) for {n} "
                          f"coordinates ({', '.join(_names(eqs.q))})")
    if samples is None:
        samples = kernel_samples(eqs, None, "constraint")
    F = factor_lu(A, samples, row_names=row_names, col_names=_names(eqs.q), label=f"{eqs.model} Phi_q")
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
        inputs=[_port("q", eqs, eqs.q), _port("t", eqs, [eqs.t])],
        outputs=[OutPort.vector("qd", qd), OutPort.vector("qdd", qdd), OutPort.vector("Phi", eqs.phi)],
    )
    k.motion = _motion(eqs, lambda q, qd_, qdd_, t: [*q, t])
    k.domain = _domain(eqs, lambda q, qd_, qdd_, t: [*q, t])
    k.extra.update(solves={"Phi_q": F}, report=F.report(qd, qdd), divisor_ranges=F.divisor_ranges())
    return k


# ---- dynamics ------------------------------------------------------------------------------
def _need_inertia(eqs: Equations, kernel: str) -> None:
    if eqs.M is None or eqs.Q is None:
        raise KernelError(f"{eqs.model}: the {kernel} kernel needs the mass matrix M and generalized forces Q; "
                          "the model has no inertia (give its bodies mass)")


def _constraint_rows(eqs: Equations, kinematic_only: bool):
    """(A, gamma, names, phi rows) of the constraints a dynamics kernel keeps: the
    kinematic (non-driving) holonomic rows, or all of them, then the non-holonomic rows."""
    n = len(eqs.q)
    driving = _driving(eqs)
    rows = [i for i in range(len(eqs.phi)) if not (kinematic_only and driving[i])]
    C, _, nh_gamma, nh_names = _nh(eqs)
    A = _stack_rows([_select_rows(eqs.phi_q, rows), C], n)
    gamma = [eqs.gamma[i] for i in rows] + nh_gamma
    names = [eqs.phi_names[i] for i in rows] + nh_names
    return A, gamma, names, rows


def _actuator_symbols(eqs: Equations, names: list[str]) -> list[Atom]:
    """The input symbol u_<name> of each actuator (kind "input")."""
    try:
        return [symbol(f"u_{a}", "input") for a in names]
    except ExpressionError as e:
        raise KernelError(f"{eqs.model}: actuator input: {e}") from None


def _numeric_inverse(eqs: Equations, A: Sparse, B: Sparse, times, Q, QD, QDD) -> np.ndarray:
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


def _actuator_ranges(eqs: Equations, syms, names, A_kin, B, motion) -> tuple[dict, list[str]]:
    """Declared ranges of the actuator inputs: the model's (eqs.ranges by symbol, or
    eqs.actuator_ranges by actuator name) where it has them, else the envelope of the
    inverse-dynamics forces along the motion, +-(1.5 x peak), at least +-1."""
    declared = dict(getattr(eqs, "ranges", {}))
    by_name = getattr(eqs, "actuator_ranges", None) or {}
    for s, a in zip(syms, names):
        if s not in declared and a in by_name:
            declared[s] = tuple(by_name[a])
    ranges, derived = {}, []
    U = None
    if any(s not in declared for s in syms) and motion is not None:
        times, Q, QD, QDD = motion
        try:
            U = _numeric_inverse(eqs, A_kin, B, times, Q, QD, QDD)
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
    _need_inertia(eqs, "forward-dynamics")
    if method not in ("auto", "ldlt", "lu"):
        raise KernelError(f"forward-dynamics: method {method!r} is not auto, ldlt or lu")
    n = len(eqs.q)
    A, gamma, cnames, rows = _constraint_rows(eqs, kinematic_only=True)
    r = A.shape[0]
    act_names, B = _actuators(eqs)
    u = _actuator_symbols(eqs, act_names)
    entries = dict(eqs.M.entries)
    for (i, j), a in A.entries.items():
        entries[(n + i, j)] = a
        entries[(j, n + i)] = a
    K = Sparse((n + r, n + r), entries)
    qnames = _names(eqs.q)
    lam_names = [f"lambda_{c}" for c in cnames]
    row_names = [f"motion of {q}" for q in qnames] + cnames
    col_names = [f"{q}_dd" for q in qnames] + lam_names
    if samples is None:
        samples = kernel_samples(eqs, rows, "kinematic constraint")
    label = f"{eqs.model} KKT [M A^T; A 0]"
    Bu = B.matvec(u) if u else [ZERO] * n
    rhs = [add(q_, f) for q_, f in zip(eqs.Q, Bu)] + list(gamma)
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
    if len(tried) == 2:  # the cheaper (divisions weighted), LDL^T on a tie
        cost = {k: weighted_cost(x_) for k, (_, x_) in tried.items()}
        F, x = tried["ldlt"] if cost["ldlt"] <= cost["lu"] else tried["lu"]
    else:
        F, x = next(iter(tried.values()))
    qdd, lam = x[:n], x[n:]
    motion = _motion_states(eqs)
    uranges, derived = _actuator_ranges(eqs, u, act_names, A, B, motion)
    inputs = [_port("q", eqs, eqs.q), _port("qd", eqs, eqs.qd), _port("t", eqs, [eqs.t])]
    if u:
        inputs.append(InPort("u", u, [uranges[s] for s in u]))
    k = Kernel(
        model=eqs.model,
        name="forward-dynamics",
        description="accelerations qdd and multipliers lambda from q, qd, t"
                    + (" and actuator inputs u" if u else "")
                    + f" (straight-line {F.kind} of the KKT matrix, pivots fixed at generation time)",
        inputs=inputs,
        outputs=[OutPort.vector("qdd", qdd), OutPort.vector("lambda", lam)],
    )
    if motion is not None:
        times, Q, QD, QDD = motion
        U = _numeric_inverse(eqs, A, B, times, Q, QD, QDD) if u else np.zeros((len(times), 0))
        k.motion = [[float(v) for v in (*Q[i], *QD[i], times[i], *U[i])] for i in range(len(times))]
    k.extra.update(solves={"KKT": F}, report=F.report(x), derived_ranges=derived, divisor_ranges=F.divisor_ranges(),
                   multipliers=lam_names, actuators=act_names)
    return k


def inverse_dynamics_kernel(eqs: Equations, samples=None) -> Kernel:
    """Actuator forces u and multipliers lambda from a prescribed motion (q, qd, qdd, t):
    [A^T, -B] [lambda; u] = Q - M qdd, A the kinematic and non-holonomic rows (all rows
    when the model has no actuators: the driving multipliers are then the efforts). Square
    when the actuators replace the driving constraints one for one."""
    _need_inertia(eqs, "inverse-dynamics")
    n = len(eqs.q)
    act_names, B = _actuators(eqs)
    A, _, cnames, rows = _constraint_rows(eqs, kinematic_only=bool(act_names))
    r = A.shape[0]
    if r + len(act_names) != n:
        raise KernelError(
            f"{eqs.model}: inverse dynamics needs as many unknowns as coordinates: {r} multipliers "
            f"({', '.join(cnames)}) and {len(act_names)} actuators ({', '.join(act_names) or 'none'}) "
            f"for {n} coordinates; the actuators should replace the driving constraints one for one")
    entries = {(j, i): a for (i, j), a in A.entries.items()}
    for (i, k), a in B.entries.items():
        entries[(i, r + k)] = neg(a)
    G = Sparse((n, n), entries)
    lam_names = [f"lambda_{c}" for c in cnames]
    if samples is None:
        samples = kernel_samples(eqs, rows if act_names else None, "kinematic constraint")
    F = factor_lu(G, samples, row_names=[f"motion of {q}" for q in _names(eqs.q)],
                  col_names=lam_names + [f"u_{a}" for a in act_names], label=f"{eqs.model} [A^T, -B]")
    Mqdd = eqs.M.matvec(eqs.qdd)
    x = F.solve([sub(q_, m) for q_, m in zip(eqs.Q, Mqdd)])
    lam, uu = x[:r], x[r:]
    k = Kernel(
        model=eqs.model,
        name="inverse-dynamics",
        description="actuator forces u and multipliers lambda from the prescribed motion q, qd, qdd, t "
                    "(straight-line LU of [Phi_q^T, -B], pivots fixed at generation time)",
        inputs=[_port("q", eqs, eqs.q), _port("qd", eqs, eqs.qd), _port("qdd", eqs, eqs.qdd),
                _port("t", eqs, [eqs.t])],
        outputs=[OutPort.vector("u", uu), OutPort.vector("lambda", lam)],
    )
    k.motion = _motion(eqs, lambda q, qd, qdd, t: [*q, *qd, *qdd, t])
    k.domain = _domain(eqs, lambda q, qd, qdd, t: [*q, *qd, *qdd, t])
    k.extra.update(solves={"G": F}, report=F.report(x), divisor_ranges=F.divisor_ranges(), multipliers=lam_names,
                   actuators=act_names)
    return k


BUILDERS = {
    "equations": equations_kernel,
    "kinematics": kinematics_kernel,
    "forward-dynamics": forward_dynamics_kernel,
    "inverse-dynamics": inverse_dynamics_kernel,
}


def build_kernel(eqs: Equations, name: str, **options) -> Kernel:
    try:
        builder = BUILDERS[name]
    except KeyError:
        raise ValueError(f"no kernel called {name!r}; known: {', '.join(sorted(BUILDERS))}") from None
    return builder(eqs, **options)
