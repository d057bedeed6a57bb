"""Kernel builders: from a model's Equations to the Kernels a device runs.

    equations         Phi, Phi_q, Phi_t, gamma (and M, Q = delta, B when the model has them)
    kinematics        q, t -> qd, qdd (and Phi): Phi_q qd = beta, Phi_q qdd = gamma
    forward-dynamics  q, qd, t, u -> qdd, lambda: [M A^T; A 0] [qdd; lambda] = [Q + B u; gamma]
    inverse-dynamics  q, qd, qdd, t -> u, lambda: [A^T, -B] [lambda; u] = Q - M qdd
    inverse-dynamics-reduced  z, zd, zdd -> u: the same from the independent coordinates z
                      of a model with explicit (closed-form) dependent coordinates, e.g.
                      the Stewart platform's 7 platform coordinates; by default the
                      equations of motion projected on z, [R^T B, -Psi_z^T] [u; mu] =
                      R^T (M qdd - Q) with R = dq/dz (see reduced_inverse_dynamics_kernel)

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
* linear solves are straight-line atoms (mbforge.linalg) with pivots fixed at
  generation time, checked at consistent configurations (kernels.samples); one
  factorization serves every right-hand side of a kernel; `extra["solves"]` holds the
  factor objects, `extra["report"]` their reports (pivots, fill, op counts) and
  `extra["divisor_ranges"]` [(divisor atom, min, max)] over those configurations (a
  fixed-point range analysis over the declared box alone sees divisors through zero);
* `motion` holds input vectors along the driven motion (None when there is none).
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import ZERO, Atom, Evaluator, ExpressionError, Sparse, add, as_atom, diff, jacobian, mul, neg, sub, subs, symbol

from ..lower import op_counts
from ..model import Equations, Kinematics, ModelError
from ..linalg import Samples, SingularPivotError, factor_ldlt, factor_lu
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


def _domain(eqs: Equations, row, steps: int = DOMAIN_STEPS):
    """The kernel's input domain for a driven motion: a tube of boxes around the inputs
    along the motion (see kernels.tube), checked to cover the motion half-way between its
    samples. Range analysis (fixed-point formats, error bounds) and test vectors then work
    where the mechanism runs, not over the whole box of declared ranges, where the
    Jacobians are singular in many places. None when the model is not fully driven."""
    lo, hi = eqs.ranges[eqs.t]
    if _motion_states(eqs, 2) is None:
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
    rhs = [sub(q_, m) for q_, m in zip(eqs.Q, Mqdd)]
    x = F.solve(rhs)
    F.rhs, F.u_index = rhs, list(range(r, n))  # the system itself, for comparisons (bench/idyn.py)
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


# ---- inverse dynamics over the independent coordinates ----------------------------------------
REDUCED_METHODS = ("auto", "projected", "full")
EXPLICIT_TOL = 1e-8  # largest |constraint| accepted at the samples, through the closed forms


def _reduced_parts(eqs: Equations, samples):
    """What both reduced formulations share: the substitution of the dependent coordinates,
    the independent symbols, the constraints among the independent coordinates alone (psi
    rows), and samples over the independent coordinates (checked to satisfy every
    kinematic constraint through the closed forms)."""
    _need_inertia(eqs, "inverse-dynamics-reduced")
    explicit = getattr(eqs, "explicit", None) or {}
    if not explicit:
        raise KernelError(f"{eqs.model}: the inverse-dynamics-reduced kernel needs explicit (closed-form) "
                          "dependent coordinates (Model.explicit); the model has none")
    if getattr(eqs, "nh", None):
        raise KernelError(f"{eqs.model}: inverse-dynamics-reduced does not handle non-holonomic constraints "
                          f"({', '.join(eqs.nh_names)}); use inverse-dynamics")
    act_names, B = _actuators(eqs)
    if not act_names:
        raise KernelError(f"{eqs.model}: inverse-dynamics-reduced needs actuators (their forces are the output)")
    z = list(eqs.independent)
    zd, zdd = eqs.independent_qd, eqs.independent_qdd
    smap = eqs.explicit_map(2)
    ps = list(getattr(eqs, "params", []) or [])
    free = eqs.t.mask
    for s in z + ps:
        free |= s.mask
    kin = eqs.kinematic_rows
    psi = [i for i in kin if not eqs.phi[i].mask & ~free]
    others = [i for i in kin if i not in set(psi)]
    if samples is None:
        full = kernel_samples(eqs, kin, "kinematic constraint")
        pos = {s: k for k, s in enumerate(full.inputs)}
        cols = [pos[s] for s in z + [eqs.t] + ps]
        samples = Samples(z + [eqs.t] + ps, full.points[:, cols],
                          full.what + " (their independent coordinates)")
        extra = _independent_box_samples(eqs, z, psi, ps)
        if len(extra):
            samples = samples + Samples(samples.inputs, extra,
                                        f"{len(extra)} random points of the declared ranges of the independent "
                                        "coordinates" + (" projected on their constraints" if psi else ""))
    phi_x = eqs.explicit_phi()
    if others:
        atoms = [phi_x[i] for i in others]
        res = np.atleast_2d(Evaluator(atoms, samples.inputs)(samples.points))
        worst = np.max(np.abs(res), axis=0)
        bad = [(eqs.phi_names[i], float(w)) for i, w in zip(others, worst) if not w <= EXPLICIT_TOL]
        if bad:
            raise KernelError(f"{eqs.model}: the explicit coordinates do not satisfy "
                              + ", ".join(f"{n} (|residual| up to {w:.3g})" for n, w in bad[:6])
                              + f" at the {len(samples)} sample configurations")
    return act_names, B, z, zd, zdd, smap, psi, samples


BOX_SAMPLES = 256  # random independent configurations at which pivots and closed forms are checked


def _independent_box_samples(eqs: Equations, z, psi, ps, count: int = BOX_SAMPLES, seed: int = 0) -> np.ndarray:
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


def _subs_sparse(S: Sparse, mapping) -> Sparse:
    vals = subs(S.values(), mapping)
    return Sparse(S.shape, {ij: a for ij, a in zip(S.pattern, vals) if a is not ZERO})


def _pow2(c: float) -> bool:
    m, _ = math.frexp(abs(c))
    return c != 0 and m == 0.5


def share_reciprocals(roots: list[Atom]) -> list[Atom]:
    """`roots` with every division a / b rewritten as a * r_b, r_b = 1 / b one atom per
    distinct denominator (a denominator c * y with c a power of two, as in the derivative
    of a square root, shares y's: r_(c y) = (1/c) r_y, exact in binary). The chain rule
    gives each derivative of a quotient or a square root its own division by the same
    denominator; a division costs 14 cycles on a Cortex-M4F (a long routine in fixed
    point), a multiplication one."""
    from ..ir import ONE, topo
    from ..ir.atom import apply

    new: dict[Atom, Atom] = {}
    recip: dict[Atom, Atom] = {}

    def r_of(b: Atom) -> Atom:
        got = recip.get(b)
        if got is None:
            if b.op == "mul" and b.args[0].is_const and _pow2(b.args[0].value):
                got = mul(as_atom(1.0 / b.args[0].value), r_of(b.args[1]))
            else:
                got = apply("div", (ONE, b))
            recip[b] = got
        return got

    for a in topo(roots):
        if not a.args:
            continue
        args = tuple(new.get(x, x) for x in a.args)
        if a.op == "div":
            num, den = args
            r = r_of(den)
            new[a] = r if num is ONE else mul(num, r)
        else:
            new[a] = apply(a.op, args, a.value)
    return [new.get(a, a) for a in roots]


def _transposed_jacobian_products(exprs, xs, weights_list) -> list[list[Atom]]:
    """[J^T w for w in weights_list], J = d exprs / d xs, by one reverse sweep over
    sum_i w_i exprs_i with placeholder weights (linear in them), then the weights
    substituted: the virtual power of the dependent coordinates' forces along each
    independent coordinate, without forming J."""
    from ..ir.derive import adjoints

    mask = 0
    for x in xs:
        mask |= x.mask
    terms = [(i, e) for i, e in enumerate(exprs) if e.mask & mask]
    place = [symbol(f"mbf_reduced_w{i}", "input") for i, _ in terms]
    s = ZERO
    for w, (_, e) in zip(place, terms):
        s = add(s, mul(w, e))
    adj = adjoints(s, mask) if s is not ZERO else {}
    g = [adj.get(x, ZERO) for x in xs]
    out = []
    for weights in weights_list:
        out.append(subs(g, {w: weights[i] for w, (i, _) in zip(place, terms)}))
    return out


def reduced_inverse_dynamics_kernel(eqs: Equations, samples=None, method: str = "auto",
                                    multipliers: bool = False, domain_steps: int = DOMAIN_STEPS) -> Kernel:
    """Actuator forces u from the independent coordinates z of a model whose other
    coordinates are explicit (Model.explicit), and their rates zd, zdd: the dependent q,
    qd, qdd are substituted from the closed forms and their chain-rule derivatives.

    method "projected": the equations of motion M qdd + Phi^T lambda = Q + B u projected
    on the independent coordinates through the velocity transformation qd = R zd,
    R = dq/dz (never formed: R^T v comes from one reverse sweep over the closed forms):
        [R^T B, -Psi_z^T] [u; mu] = R^T (M qdd - Q),
    Psi the constraints among the independent coordinates alone (the Stewart platform's
    Euler normalisation), mu their multipliers combined with those of the constraints the
    closed forms satisfy only where Psi = 0 (equal to Psi's own when they satisfy them
    everywhere). The other multipliers drop out: R spans the motions the constraints
    allow. A system of n_z = n_act + n_psi rows (7 for the Stewart platform).
    method "full": [Phi_kin_q^T, -B] [lambda; u] = Q - M qdd over every coordinate, as
    the inverse-dynamics kernel, with q, qd, qdd substituted (all multipliers available).
    "auto" (default): both, keeping the one whose kernel costs less (weighted_cost).
    Both solve with a straight-line LU, pivots fixed at generation time on consistent
    samples over (z, t, params): the driven motion, configurations of the kinematic
    manifold near it, and random points of the independent coordinates' declared ranges
    projected on Psi (the closed forms are checked to satisfy every other kinematic
    constraint at all of them). Every division by one denominator becomes a product with
    one shared reciprocal (share_reciprocals). multipliers=True adds the multipliers
    output (mu or lambda). domain_steps: boxes of the tube around the driven motion
    (`domain`, where range analysis, fixed-point formats and error bounds apply); fewer
    boxes generate faster and give looser bounds, the same C for float targets."""
    if method not in REDUCED_METHODS:
        raise KernelError(f"inverse-dynamics-reduced: method {method!r} is not one of {', '.join(REDUCED_METHODS)}")
    act_names, B, z, zd, zdd, smap, psi, samples = _reduced_parts(eqs, samples)
    nz, na = len(z), len(act_names)
    u_names = [f"u_{a}" for a in act_names]
    f_full = getattr(eqs, "inertial", None)  # M qdd - Q, body by body in Newton-Euler form where possible
    if f_full is None:
        f_full = [sub(m, q_) for m, q_ in zip(eqs.M.matvec(eqs.qdd), eqs.Q)]
    tried = {}
    if method in ("auto", "projected"):
        if nz != na + len(psi):
            if method == "projected":
                raise KernelError(
                    f"{eqs.model}: the projected inverse dynamics needs as many independent coordinates as "
                    f"actuators plus constraints among them: {nz} ({', '.join(_names(z))}) for {na} actuators "
                    f"and {len(psi)} constraints ({', '.join(eqs.phi_names[i] for i in psi) or 'none'})")
        else:
            tried["projected"] = _projected(eqs, z, smap, psi, act_names, B, f_full, samples, u_names)
    if method in ("auto", "full"):
        try:
            tried["full"] = _full_reduced(eqs, smap, act_names, B, f_full, samples, u_names)
        except KernelError:
            if method == "full" or not tried:
                raise
    if not tried:
        raise KernelError(f"{eqs.model}: no reduced inverse-dynamics formulation applies")
    cost, shared = {}, {}
    for key, (F, x, _, _) in tried.items():
        keep = x if multipliers else x[:na]
        shared[key] = share_reciprocals(keep)
        cost[key] = weighted_cost(shared[key])
    chosen = min(cost, key=lambda k: (cost[k], k != "projected"))
    F, x, mult_names, what = tried[chosen]
    uu, mult = shared[chosen][:na], shared[chosen][na:]
    outputs = [OutPort.vector("u", uu)]
    if multipliers:
        outputs.append(OutPort.vector("mu" if chosen == "projected" else "lambda", mult))
    t_needed = any(a.mask & eqs.t.mask for p in outputs for a in p.atoms)
    inputs = [_port("q", eqs, z), _port("qd", eqs, zd), _port("qdd", eqs, zdd)]
    if t_needed:
        inputs.append(_port("t", eqs, [eqs.t]))
    k = Kernel(
        model=eqs.model,
        name="inverse-dynamics-reduced",
        description=f"actuator forces u{' and multipliers' if multipliers else ''} from the independent "
                    f"coordinates {', '.join(_names(z))}, their rates and accelerations (dependent coordinates "
                    f"in closed form; {what}; straight-line LU, pivots fixed at generation time)",
        inputs=inputs,
        outputs=outputs,
    )
    zi = [eqs.q.index(s) for s in z]

    def row(q, qd, qdd, t):
        return [*(q[j] for j in zi), *(qd[j] for j in zi), *(qdd[j] for j in zi)] + ([t] if t_needed else [])

    k.motion = _motion(eqs, row)
    k.domain = _domain(eqs, row, domain_steps)
    ops = op_counts(k.output_atoms)
    report = (F.report(x if multipliers else x[:na])
              + f"\n  kernel ({chosen}, divisions by one denominator shared): {ops['total']} operations ("
              + ", ".join(f"{a} {b}" for a, b in sorted(ops.items()) if a != "total") + ")"
              + "".join(f"\n  weighted cost {key}: {c}" for key, c in sorted(cost.items())))
    k.extra.update(solves={"G": F}, report=report, divisor_ranges=F.divisor_ranges(),
                   multipliers=mult_names if multipliers else [], actuators=act_names, method=chosen, costs=cost)
    return k


def _projected(eqs, z, smap, psi, act_names, B, f_full, samples, u_names):
    n = len(eqs.q)
    na = len(act_names)
    idx = {s: j for j, s in enumerate(eqs.q)}
    dep = eqs.dependent
    pos = [eqs.explicit[s] for s in dep]
    f = subs(f_full, smap)
    Bs = _subs_sparse(B, smap)
    cols = [[ZERO] * n for _ in range(na)]
    for (i, k), a in Bs.entries.items():
        cols[k][i] = a
    weights = [[f[idx[s]] for s in dep]] + [[c[idx[s]] for s in dep] for c in cols]
    prods = _transposed_jacobian_products(pos, z, weights)
    rhs = [add(f[idx[s]], g) for s, g in zip(z, prods[0])]
    entries = {}
    for k in range(na):
        for j, s in enumerate(z):
            a = add(cols[k][idx[s]], prods[1 + k][j])
            if a is not ZERO:
                entries[(j, k)] = a
    for l, i in enumerate(psi):
        for j, s in enumerate(z):
            d = diff(eqs.phi[i], s)
            if d is not ZERO:
                entries[(j, na + l)] = neg(d)
    G = Sparse((len(z), na + len(psi)), entries)
    mu_names = [f"mu_{eqs.phi_names[i]}" for i in psi]
    F = factor_lu(G, samples, row_names=[f"virtual power along {s}" for s in _names(z)],
                  col_names=u_names + mu_names, label=f"{eqs.model} [R^T B, -Psi_z^T]")
    x = F.solve(rhs)
    F.rhs, F.u_index = rhs, list(range(na))  # the system itself, for comparisons (bench/idyn.py)
    return F, x, mu_names, f"equations of motion projected on them (R^T, {len(z)} x {len(z)})"


def _full_reduced(eqs, smap, act_names, B, f_full, samples, u_names):
    n = len(eqs.q)
    A, _, cnames, rows = _constraint_rows(eqs, kinematic_only=True)
    r = A.shape[0]
    if r + len(act_names) != n:
        raise KernelError(f"{eqs.model}: inverse dynamics needs as many unknowns as coordinates: {r} multipliers "
                          f"and {len(act_names)} actuators for {n} coordinates")
    As, Bs = _subs_sparse(A, smap), _subs_sparse(B, smap)
    entries = {(j, i): a for (i, j), a in As.entries.items()}
    for (i, k), a in Bs.entries.items():
        entries[(i, r + k)] = neg(a)
    G = Sparse((n, n), entries)
    lam_names = [f"lambda_{c}" for c in cnames]
    F = factor_lu(G, samples, row_names=[f"motion of {q}" for q in _names(eqs.q)],
                  col_names=lam_names + u_names, label=f"{eqs.model} [Phi_kin_q^T, -B] (explicit coordinates)")
    rhs = [neg(a) for a in subs(f_full, smap)]
    x = F.solve(rhs)
    F.rhs, F.u_index = rhs, list(range(r, r + len(act_names)))
    # the solve's unknowns are [lambda; u]: reorder to [u; lambda]
    return F, x[r:] + x[:r], lam_names, f"every coordinate's equation of motion ({n} x {n})"


BUILDERS["inverse-dynamics-reduced"] = reduced_inverse_dynamics_kernel
