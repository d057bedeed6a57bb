"""Time-step kernels (`--kernel step`): the state at t and the inputs in, the state at t + dt
out, as straight-line code, so a device runs a mechanism's motion one call per step.

    ali3p  index-3 augmented Lagrangian with the trapezoidal rule and mass-orthogonal
           projections of velocities and accelerations (Bayo and Ledesma 1996; Cuadrado,
           Cardenal, Morer and Bayo 2000): any model with inertia and holonomic constraints,
           closed loops, redundant constraints and singular positions included, because its
           leading matrix M + dt^2/4 alpha Phi_q^T Phi_q stays positive definite whatever the
           rank of Phi_q. State: q, qd, qdd (and t when the model depends on time).
    rk4    classic Runge-Kutta on M qdd = Q + B u for models without constraints (trees in
           relative coordinates); with constraints, on the accelerations of the augmented
           Lagrangian (M + a Phi_q^T Phi_q, refined onto Phi_q qdd = gamma), then q and qd
           projected onto the constraints (_rk4_projected: the explicit choice where the
           path is smooth; auto keeps ali3p). --penalty 0: the exact multipliers instead
           (_rk4_exact; where M is singular or a row is implied by the others, the KKT
           matrix of the independent rows, _rk4_kkt), what c-fixed bounds over a cover of
           near-consistent states. State: q, qd (and t).
    euler  semi-implicit (symplectic) Euler on the same: qd+ = qd + dt qdd(q, qd),
           q+ = q + dt qd+.

An open tree's rk4 and euler take M from the composite-rigid-body algorithm and Q from
RNEA (kernels.dynamics.tree_forms), factored LDL^T leaves first, every stage's pivots
floored by the links' own inertias (the same at any configuration: tree_hints); other
unconstrained models keep analysis.definite's cell-wise eigenvalue floors.

The outputs repeat the state's layout (out[0..n_state) is the next in[0..n_state)), so a
device's loop copies them back and calls again; the actuator inputs u follow the state
among the inputs and are held over the step.

Straight-line: ali3p's Newton iterations are unrolled, a count fixed at generation time;
each is the iteration map written once over placeholder symbols and substituted (atoms are
interned, so an iteration costs only its own operations). One symbolic LDL^T of the
leading matrix (minimum-degree order, fixed at generation time, the sparsity of natural
coordinates kept) serves every iteration and both projections. The positions are carried
as the predictor plus a correction so that no term is multiplied by 4/dt^2 before the
subtraction that cancels it (float32 would lose the accelerations).

Each step starts its multipliers from 0 (the penalty alpha Phi carries the constraint
forces; with more than one iteration, lambda += alpha Phi between them) instead of carrying
lambda from step to step as the published ALI3-P does. Measured on the N-four-bar (N = 4,
dt 1 ms, 10 s, host C against scipy at rtol 1e-11): carried multipliers drift in the null
space of Phi_q^T at every singular position, and in float32 alpha times the rounding of Phi
(about 1e-7 x alpha) is added to them every step: 0.05 m off with float32, 2 m with a
penalty ratio of 100 even in double. Started from 0, with the default ratio 1e3: 1.7e-3 m
in double and in float32 alike. Higher ratios are more accurate in double (1e4: 9.3e-4 m)
and noisier in float32 (1e4: 7.2e-3 m): --penalty chooses.

The kernel's `motion` is the state along a host reference run (scipy at rtol 1e-7: states to check at, not a reference for accuracy;
from the model's initial state, Model.initial): the harness checks single steps there, and
generation checks on it that the iterations converge (StepError names the worst state and
says what would: more iterations or a smaller dt).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis.bodyfloors import ConstantEnclosure, diagonal_ceilings
from ..analysis.definite import DefiniteEnclosure
from ..domain import Domain
from ..domain.forces import actuator_ranges
from ..domain.cover import envelope_configurations, envelope_cover, envelope_record, input_fallback
from ..domain.states import MAX_COORDS, RESIDUAL, state_cover
from ..domain.sampling import parameters
from ..ir import ZERO, Atom, Evaluator, ExpressionError, Sparse, add, const, mul, sub, subs, symbol, topo
from ..ir.subs import subs_shifted
from ..linalg import Samples, SingularPivotError, factor_ldlt
from ..model.equations import Equations
from .common import (KernelError, actuator_symbols, actuators, independent_equations, names, need_inertia,
                     port)
from .dynamics import tree_forms, tree_hints, tree_order
from .kernel import InPort, Kernel, KernelInfo, OutPort

INTEGRATORS = ("ali3p", "rk4", "euler")
# how rk4 --penalty 0 solves its exact multipliers. auto: M and Phi_q M^-1 Phi_q^T, each by
# LDL^T, where M is definite and the rows independent, else the KKT matrix [M A^T; A 0];
# kkt: the KKT matrix always (one fixed-pivot factor a stage: in fixed point its pivots are
# proved over the cover where the nested Schur complements of the other way are not: the
# flyball governor's and Andrews' c-fixed steps)
SOLVES = ("auto", "kkt")
REFERENCE_POINTS = 101  # states of the host reference run kept as the kernel's motion
# a step whose constraint residual after the iterations exceeds this (relative to the
# model's coordinate scale) at a state of the reference run has not converged
CONVERGED = 1e-6


class StepError(KernelError):
    """A step kernel that cannot be built as asked (integrator, dt, iterations)."""


@dataclass(frozen=True)
class StepOptions:
    """What a step kernel integrates with. dt: the step [s]; integrator: one of INTEGRATORS
    ("auto": ali3p with constraints, rk4 without); iterations: ali3p's Newton iterations per
    step (None: the fewest, up to 8, that converge along the reference run); penalty: ali3p's
    alpha as the ratio of dt^2/4 alpha Phi_q^T Phi_q to M on their diagonals (default 1e3,
    see the module docstring)."""

    dt: float
    integrator: str = "auto"
    iterations: int | None = None
    penalty: float = 1e3
    solve: str = "auto"  # rk4 --penalty 0: "kkt" always through [M A^T; A 0] (SOLVES)
    reduced: bool = False  # over the independent coordinates of Model.explicit (common.independent_equations)

    def check(self, eqs: Equations) -> "StepOptions":
        if not (isinstance(self.dt, (int, float)) and np.isfinite(self.dt) and self.dt > 0):
            raise StepError(f"step: --dt must be a positive number of seconds, got {self.dt}")
        lo, hi = eqs.ranges[eqs.t]
        if self.dt >= hi - lo:
            raise StepError(f"step: --dt {self.dt:g} s is not shorter than {eqs.model}'s time range "
                            f"[{lo:g}, {hi:g}] s")
        integ = self.integrator
        if integ == "auto":
            integ = "ali3p" if eqs.phi else "rk4"
        if integ not in INTEGRATORS:
            raise StepError(f"step: --integrator {integ!r} is not one of auto, {', '.join(INTEGRATORS)}")
        if integ == "euler" and eqs.phi:
            raise StepError(f"step: {eqs.model} has {len(eqs.phi)} constraint equations; --integrator euler "
                            "integrates unconstrained models only: use ali3p (index-3 augmented Lagrangian "
                            "with projections) or rk4 (on the projected accelerations, with a coordinate "
                            "projection), which hold closed loops")
        if self.iterations is not None and not (isinstance(self.iterations, int) and 1 <= self.iterations <= 50):
            raise StepError(f"step: --iterations must be 1 to 50, got {self.iterations}")
        if self.penalty == 0 and not (integ == "rk4" and eqs.phi):
            raise StepError(f"step: --penalty 0 (exact multipliers) goes with --integrator rk4 on a model with "
                            f"constraints, not {integ}{'' if eqs.phi else f' ({eqs.model} has none)'}")
        if not (np.isfinite(self.penalty) and (self.penalty == 0 or 1e-2 <= self.penalty <= 1e8)):
            raise StepError(f"step: --penalty must be 0 (rk4: exact multipliers) or within [0.01, 1e8], "
                            f"got {self.penalty}")
        if self.solve not in SOLVES:
            raise StepError(f"step: --solve {self.solve!r} is not one of {', '.join(SOLVES)}")
        if self.solve != "auto" and not (integ == "rk4" and eqs.phi and self.penalty == 0):
            raise StepError("step: --solve kkt chooses how rk4 --penalty 0 solves its exact multipliers; it goes "
                            "with --integrator rk4 --penalty 0 on a model with constraints")
        if eqs.nh:
            raise StepError(f"step: {eqs.model} has non-holonomic constraints ({', '.join(eqs.nh_names)}); the "
                            "step kernels integrate holonomic models only")
        return StepOptions(float(self.dt), integ, self.iterations, float(self.penalty), self.solve, self.reduced)


def step_kernel(eqs: Equations, dt: float | None = None, integrator: str = "auto", iterations: int | None = None,
                penalty: float = 1e3, solve: str = "auto", reduced: bool = False) -> Kernel:
    """The step kernel of `eqs` (see the module docstring); dt is required. reduced: over
    the independent coordinates of Model.explicit (common.independent_equations)."""
    need_inertia(eqs, "step")
    if dt is None:
        raise StepError("step: give the time step with --dt (seconds)")
    eqs = independent_equations(eqs, reduced, "step")
    opts = StepOptions(dt, integrator, iterations, penalty, solve).check(eqs)
    ref = _reference(eqs)
    if opts.integrator == "ali3p":
        k = _ali3p(eqs, opts, ref)
    elif eqs.phi:
        k = _rk4_exact(eqs, opts, ref) if opts.penalty == 0 else _rk4_projected(eqs, opts, ref)
    else:
        k = _explicit(eqs, opts, ref)
    if reduced:  # the manifest says which coordinates the state holds and which follow from closed forms
        full = eqs.reduced_from
        k = k.replace(step={**k.step, "coordinates": "independent",
                            "closed_forms": [s.value.name for s in full.dependent]})
    return k


# ---- the host reference run: pivots, the kernel's motion, convergence ----

@dataclass
class _Reference:
    t: np.ndarray
    Q: np.ndarray
    QD: np.ndarray
    QDD: np.ndarray


def _dynamics(eqs: Equations):
    from ..reference.solvers import Dynamics

    return Dynamics(eqs)


def initial_state(eqs: Equations, integrator: str, q0: dict | None = None, qd0: dict | None = None,
                  dyn=None) -> tuple[float, np.ndarray]:
    """(t0, the state without t) a step kernel of `integrator` starts from: q and qd from the
    named values (else the model's Model.initial, else its guesses at rest), made consistent
    with the constraints; ali3p adds qdd of the forward dynamics there."""
    dyn = dyn or _dynamics(eqs)
    t0 = float(eqs.ranges[eqs.t][0])
    if not q0 and not qd0:
        q0, qd0 = eqs.initial_q, eqs.initial_qd
    q, qd = dyn.initial(t0, q0, qd0)
    q, qd = dyn.project(t0, q, qd)
    if integrator != "ali3p":
        return t0, np.concatenate([q, qd])
    qdd, _ = dyn.accelerations(t0, q, qd)
    return t0, np.concatenate([q, qd, qdd])


def _reference(eqs: Equations) -> _Reference:
    import warnings

    from ..reference.solvers import RedundantConstraintsWarning

    with warnings.catch_warnings():  # ali3p holds redundant constraints: not news to the user here
        warnings.simplefilter("ignore", RedundantConstraintsWarning)
        return _reference_run(eqs)


def _reference_run(eqs: Equations) -> _Reference:
    from ..reference.solvers import DynamicsError

    dyn = _dynamics(eqs)
    lo, hi = eqs.ranges[eqs.t]
    _, x = initial_state(eqs, "rk4", dyn=dyn)
    n = len(eqs.q)
    run = dict(q0=x[:n], qd0=x[n:], t0=lo, dt=(hi - lo) / (REFERENCE_POINTS - 1), rtol=1e-7, atol=1e-9)
    try:
        traj = dyn.forward(hi, **run)
    except DynamicsError as e:  # e.g. a robot with its motors off falls out of its closed forms' reach
        traj = dyn.forward(hi, **run, stop=_outside(eqs))  # the run up to where it leaves the declared ranges
        if len(traj.t) < 3:
            raise StepError(f"step: {eqs.model}: the host reference run from the initial state (no actuator "
                            f"force) leaves the declared ranges at once: {e}") from None
    acc = [dyn.accelerations(float(t), a, b)[0] for t, a, b in zip(traj.t, traj.Q, traj.QD)]
    return _Reference(np.asarray(traj.t), np.asarray(traj.Q), np.asarray(traj.QD), np.array(acc))


def _outside(eqs: Equations):
    """stop(t, q, qd) for Dynamics.forward: a coordinate outside its declared range."""
    rng = np.array([eqs.ranges.get(s, (-np.inf, np.inf)) for s in eqs.q])
    return lambda t, q, qd: bool(np.any((q < rng[:, 0]) | (q > rng[:, 1])))


# ---- atoms ------------------------------------------------------------------------------------

def _c(x: float) -> Atom:
    return const(float(x))


def _gram(S: Sparse, scale: float) -> dict[tuple[int, int], Atom]:
    """scale * S^T S, entries by (j, k), each sum in row order (so (j, k) and (k, j) are the
    same atom)."""
    rows: dict[int, list[tuple[int, Atom]]] = {}
    for (i, j), a in S.entries.items():
        rows.setdefault(i, []).append((j, a))
    acc: dict[tuple[int, int], Atom] = {}
    for i in sorted(rows):
        for j, a in rows[i]:
            for k, b in rows[i]:
                acc[(j, k)] = add(acc.get((j, k), ZERO), mul(a, b))
    return {jk: mul(_c(scale), v) for jk, v in sorted(acc.items())}


def _lambda_symbols(eqs: Equations) -> list[Atom]:
    """Placeholders of the multipliers, lambda_<constraint>, in the iteration's templates
    (substituted by each iteration's estimate: never a kernel input)."""
    try:
        return [symbol(f"lambda_{c}", "input") for c in eqs.phi_names]
    except ExpressionError as e:
        raise StepError(f"step: {eqs.model}: multiplier input: {e}") from None


def _samples(eqs: Equations, ref: _Reference) -> Samples:
    """The reference run's configurations (q, t[, params]): where pivots are chosen and checked."""
    ps, pv = parameters(eqs)
    X = np.column_stack([ref.Q, ref.t])
    if ps:
        X = np.column_stack([X, np.tile(pv, (len(X), 1))])
    return Samples(list(eqs.q) + [eqs.t] + ps, X, f"{len(X)} states of the host reference run")


def _penalty_alpha(eqs: Equations, opts: StepOptions, samples) -> float:
    """alpha with dt^2/4 alpha max diag(Phi_q^T Phi_q) = penalty * max diag(M) at the samples'
    nominal point: the penalty term as stiff as asked relative to the inertia."""
    point = dict(zip(samples.inputs, samples.points[0]))
    gram = _gram(eqs.phi_q, 1.0)
    diag_g = [gram[(j, j)] for j in range(len(eqs.q)) if (j, j) in gram]
    diag_m = [eqs.M[(j, j)] for j in range(len(eqs.q))]
    ins = list(samples.inputs)
    ev = Evaluator(diag_g + diag_m, ins)(np.array([point[s] for s in ins]))
    g, m = np.abs(ev[:len(diag_g)]).max(initial=0.0), np.abs(ev[len(diag_g):]).max(initial=0.0)
    if g <= 0 or m <= 0:
        raise StepError(f"step: {eqs.model}: cannot scale the penalty (max diag of M {m:g}, of Phi_q^T Phi_q {g:g})")
    return opts.penalty * m / (g * opts.dt ** 2 / 4)


@dataclass
class _Templates:
    """The ali3p maps over placeholders (eqs.q, eqs.qd, eqs.qdd, lambda, t, u): the Newton
    correction, the projected velocities and accelerations, and the factor they share."""

    correction: list[Atom]
    velocity: list[Atom]
    acceleration: list[Atom]
    factor: object


def _templates(eqs: Equations, lam: list[Atom], u: list[Atom], B: Sparse, alpha: float, dt: float,
               samples) -> _Templates:
    n, c = len(eqs.q), dt * dt / 4
    entries = dict(eqs.M.entries)
    for jk, v in _gram(eqs.phi_q, c * alpha).items():
        entries[jk] = add(entries.get(jk, ZERO), v)
    # the leading matrix over its own placeholders, set to the predictor: factored once per
    # step for every iteration and both projections (a modified Newton; at q+ it would be a
    # second factorization, about half the step's operations, for a change of O(dt^3))
    at = _pred_symbols(eqs)
    lead = Sparse((n, n), dict(zip(entries, subs(list(entries.values()), dict(zip(eqs.q, at))))))
    fs = Samples(at + samples.inputs[len(at):], samples.points, samples.what)
    F = factor_ldlt(lead, fs, names=names(eqs.q), label=f"{eqs.model} M + dt^2/4 alpha Phi_q^T Phi_q")
    force = [add(q_, f) for q_, f in zip(eqs.Q, B.matvec(u) if u else [ZERO] * n)]
    phi_term = eqs.phi_q.rmatvec([add(mul(_c(alpha), p), lm) for p, lm in zip(eqs.phi, lam)])
    resid = [mul(_c(c), sub(add(m, p), f)) for m, p, f in zip(eqs.M.matvec(eqs.qdd), phi_term, force)]
    correction = [mul(_c(-1.0), x) for x in F.solve(resid)]
    # the projections (lead) x = M x* + c alpha Phi_q^T r written as x* less a correction
    # solved from the small residual Phi_q x* - r: float32 then loses the lead matrix's
    # conditioning (about the penalty ratio) only on that correction, not on x (the whole
    # form cost the pendulum 0.055 m over 10 s in float32, 640 times double's error)
    vel = _project(F, eqs.phi_q, c * alpha, eqs.qd, eqs.beta)
    acc = _project(F, eqs.phi_q, c * alpha, eqs.qdd, eqs.gamma)
    return _Templates(correction, vel, acc, F)


def _pred_symbols(eqs: Equations) -> list[Atom]:
    """Placeholders of the predicted positions (where the leading matrix is factored)."""
    return [symbol(f"{q.value.name}__predicted", "input") for q in eqs.q]


def _project(F, A: Sparse, scale: float, x: list[Atom], r: list[Atom]) -> list[Atom]:
    """x - F^-1 scale A^T (A x - r): the mass-orthogonal projection of x onto A x = r."""
    resid = [mul(_c(scale), sub(ax, ri)) for ax, ri in zip(A.matvec(x), r)]
    return [sub(xi, d) for xi, d in zip(x, F.solve(A.rmatvec(resid)))]


class _AtomAlgebra:
    """The step's arithmetic on atoms: what the kernel computes."""

    zero = ZERO

    def __init__(self, T: _Templates, eqs: Equations):
        self.maps = {"correction": T.correction, "velocity": T.velocity, "acceleration": T.acceleration,
                     "phi": eqs.phi}

    @staticmethod
    def lin(a: float, x, y):
        return [add(mul(_c(a), xi), yi) for xi, yi in zip(x, y)]

    @staticmethod
    def plus(x, y):
        return [add(xi, yi) for xi, yi in zip(x, y)]

    @staticmethod
    def shift(t, dt: float):
        return add(t, _c(dt))

    def apply(self, name: str, mapping: dict):
        return subs(self.maps[name], mapping)


class _NumericAlgebra(_AtomAlgebra):
    """The same arithmetic in float64 over many states at once (columns): the convergence
    check runs the step's own iteration map, not a second copy of it."""

    zero = 0.0

    def __init__(self, T: _Templates, eqs: Equations, fixed: dict):
        super().__init__(T, eqs)
        self.fixed = fixed  # values of the symbols no mapping gives (u, parameters)
        self._ev: dict = {}

    @staticmethod
    def lin(a: float, x, y):
        return [a * xi + yi for xi, yi in zip(x, y)]

    @staticmethod
    def plus(x, y):
        return [xi + yi for xi, yi in zip(x, y)]

    @staticmethod
    def shift(t, dt: float):
        return t + dt

    def apply(self, name: str, mapping: dict):
        values = {**self.fixed, **mapping}
        atoms = self.maps[name]
        if name not in self._ev:
            ins = sorted({a for a in topo(list(atoms)) if a.op == "sym"}, key=lambda a: a.value.name)
            self._ev[name] = (Evaluator(list(atoms), ins), ins)
        ev, ins = self._ev[name]
        rows = len(next(iter(mapping.values())))
        X = np.column_stack([np.broadcast_to(values[s], rows) for s in ins]) if ins else np.zeros((rows, 0))
        return list(ev(X).T)


def _ali3p_map(alg, eqs: Equations, lam: list[Atom], start, alpha: float, dt: float, iterations: int):
    """One ali3p step in `alg`'s arithmetic from start = (q, qd, qdd, t): (q+, qd+, qdd+, q
    after each iteration)."""
    q0, qd0, qdd0 = eqs.q, eqs.qd, eqs.qdd
    q, qd, qdd, t = start
    t1 = alg.shift(t, dt)
    pred = alg.lin(dt * dt / 2, qdd, alg.lin(dt, qd, q))
    vpred = alg.lin(dt, qdd, qd)
    delta = [alg.zero] * len(q0)  # q_i - pred, so that 2/dt and 4/dt^2 multiply only the correction
    lam_i = [alg.zero] * len(lam)  # each step starts its multipliers from 0 (see the module docstring)
    history = []
    at_pred = dict(zip(_pred_symbols(eqs), pred))
    for _ in range(iterations):
        state = {**at_pred, **dict(zip(q0, alg.plus(pred, delta))), **dict(zip(qd0, alg.lin(2 / dt, delta, vpred))),
                 **dict(zip(qdd0, alg.lin(4 / (dt * dt), delta, qdd))), **dict(zip(lam, lam_i)), eqs.t: t1}
        delta = alg.plus(delta, alg.apply("correction", state))
        q_i = alg.plus(pred, delta)
        lam_i = alg.lin(alpha, alg.apply("phi", {**dict(zip(q0, q_i)), eqs.t: t1}), lam_i)
        history.append(q_i)
    q1 = alg.plus(pred, delta)
    at = {**at_pred, **dict(zip(q0, q1)), eqs.t: t1}
    qd1 = alg.apply("velocity", {**at, **dict(zip(qd0, alg.lin(2 / dt, delta, vpred)))})
    qdd1 = alg.apply("acceleration", {**at, **dict(zip(qd0, qd1)),
                                      **dict(zip(qdd0, alg.lin(4 / (dt * dt), delta, qdd)))})
    return q1, qd1, qdd1, history


# ---- ali3p: iterations, kernel ---------------------------------------------------------------

AUTO_ITERATIONS = 8  # the most --iterations auto picks


def _state_rows(ref: _Reference, integrator: str, every: int = 1) -> np.ndarray:
    parts = [ref.Q, ref.QD] + ([ref.QDD] if integrator == "ali3p" else [])
    return np.column_stack(parts)[::every]


def _choose_iterations(eqs: Equations, T: _Templates, lam, u, alpha: float, opts: StepOptions,
                       ref: _Reference) -> tuple[int, float]:
    """The fewest Newton iterations (opts.iterations if given) after which q+ is within
    CONVERGED x the coordinates' scale of the fully iterated q+ at every state of the
    reference run (u = 0); (iterations, the largest remaining difference)."""
    top = (opts.iterations or AUTO_ITERATIONS) + 4
    ps, pv = parameters(eqs)
    alg = _NumericAlgebra(T, eqs, {**{s: 0.0 for s in u}, **dict(zip(ps, pv))})
    start = (list(ref.Q.T), list(ref.QD.T), list(ref.QDD.T), ref.t)
    *_, history = _ali3p_map(alg, eqs, lam, start, alpha, opts.dt, top)
    ev = np.stack([np.column_stack(q) for q in history], axis=1)  # [state, iteration, coordinate]
    scale = max(1.0, float(np.abs(ref.Q).max()))
    diff = np.abs(ev - ev[:, -1:, :]).max(axis=(0, 2)) / scale  # per iteration count

    def worst(k: int) -> float:
        return float(ref.t[int(np.abs(ev[:, k - 1] - ev[:, -1]).max(axis=1).argmax())])

    if opts.iterations is not None:
        k = opts.iterations
        if diff[k - 1] > CONVERGED:
            raise StepError(f"step: {eqs.model}: {k} ali3p iterations leave q+ {diff[k - 1]:.2g} (relative) from its "
                            f"converged value at t = {worst(k):g} s of the reference run (tolerance "
                            f"{CONVERGED:g}): give more --iterations or a smaller --dt")
        return k, float(diff[k - 1])
    for k in range(1, AUTO_ITERATIONS + 1):
        if diff[k - 1] <= CONVERGED:
            return k, float(diff[k - 1])
    k = AUTO_ITERATIONS
    raise StepError(f"step: {eqs.model}: ali3p with --dt {opts.dt:g} does not converge in {k} iterations: q+ is "
                    f"still {diff[k - 1]:.2g} (relative) from its converged value at t = {worst(k):g} s of the "
                    f"reference run (tolerance {CONVERGED:g}): use a smaller --dt (e.g. {opts.dt / 2:g}) or "
                    f"--iterations N up to 50")


def _depends_on_time(eqs: Equations, atoms) -> bool:
    return any(a is eqs.t for a in topo(list(atoms)))


def _ali3p(eqs: Equations, opts: StepOptions, ref: _Reference) -> Kernel:
    samples = _samples(eqs, ref)
    alpha = _penalty_alpha(eqs, opts, samples)
    lam = _lambda_symbols(eqs)
    act, B = actuators(eqs)
    u = actuator_symbols(eqs, act)
    T = _templates(eqs, lam, u, B, alpha, opts.dt, samples)
    iterations, left = _choose_iterations(eqs, T, lam, u, alpha, opts, ref)
    start = (list(eqs.q), list(eqs.qd), list(eqs.qdd), eqs.t)
    q1, qd1, qdd1, _ = _ali3p_map(_AtomAlgebra(T, eqs), eqs, lam, start, alpha, opts.dt, iterations)
    state = [port("q", eqs, eqs.q), port("qd", eqs, eqs.qd), port("qdd", eqs, eqs.qdd)]
    outs = [OutPort.vector("q", q1, names(eqs.q)), OutPort.vector("qd", qd1, names(eqs.qd)),
            OutPort.vector("qdd", qdd1, names(eqs.qdd))]
    record = {"integrator": "ali3p", "dt": opts.dt, "iterations": iterations, "alpha": float(alpha),
              "converged": left}
    desc = (f"one ali3p step of {opts.dt:g} s (index-3 augmented Lagrangian, trapezoidal rule, {iterations} Newton "
            f"iterations, mass-orthogonal projections of velocities and accelerations; straight-line LDL^T of "
            f"M + dt^2/4 alpha Phi_q^T Phi_q, alpha = {alpha:.6g})")
    return _assemble(eqs, "ali3p", state, outs, u, B, record, desc, ref, {"M + dt^2/4 alpha Phi_q^T Phi_q": T.factor})


# ---- explicit: rk4 and semi-implicit Euler on M qdd = Q + B u ------------------------------

def _explicit(eqs: Equations, opts: StepOptions, ref: _Reference) -> Kernel:
    samples = _samples(eqs, ref)
    act, B = actuators(eqs)
    u = actuator_symbols(eqs, act)
    got = tree_order(eqs)
    tree = got is not None  # an open tree: M and Q in recursive form, LDL^T leaves first, constant floors
    if tree:
        order, links, open_tree = got
        M, Q = tree_forms(eqs, open_tree)
        F = factor_ldlt(M, samples, names=names(eqs.q), label=f"{eqs.model} M", order=order)
    else:
        M, Q = eqs.M, eqs.Q
        F = factor_ldlt(M, samples, names=names(eqs.q), label=f"{eqs.model} M")
    force = [add(q_, f) for q_, f in zip(Q, B.matvec(u) if u else [ZERO] * len(eqs.q))]
    acc = F.solve(force)
    dt = opts.dt
    _check_stable(eqs, acc, u, opts, ref)
    stages = []  # the positions M is factored at: its pivots' floors (tree_hints, analysis.definite) read them

    at = _accelerations_at(eqs, acc)

    def f(q, v, t):
        stages.append(list(q))
        return at(q, v, t)

    lin = _AtomAlgebra.lin  # a x + y, elementwise
    q0, v0, t0 = list(eqs.q), list(eqs.qd), eqs.t
    if opts.integrator == "euler":
        v1 = lin(dt, f(q0, v0, t0), v0)
        q1 = lin(dt, v1, q0)
    else:
        q1, v1 = _rk4(f, eqs, dt)
    state = [port("q", eqs, eqs.q), port("qd", eqs, eqs.qd)]
    outs = [OutPort.vector("q", q1, names(eqs.q)), OutPort.vector("qd", v1, names(eqs.qd))]
    name = {"rk4": "classic Runge-Kutta (4 evaluations)", "euler": "semi-implicit (symplectic) Euler"}
    how = ("M by the composite-rigid-body algorithm, Q by RNEA, straight-line LDL^T leaves first" if tree else
           "straight-line LDL^T of M, pivots fixed at generation time")
    desc = f"one {name[opts.integrator]} step of {dt:g} s on M qdd = Q + B u ({how})"
    record = {"integrator": opts.integrator, "dt": dt, "iterations": 0}
    if tree:  # the floors hold at any configuration: every stage's pivots get them
        hints, missing, labels = tree_hints(F, links, eqs.q, diagonal_ceilings(list(links.values())))
        base = [a for a, *_ in hints] + [a for a, _ in labels]
        at_stages = [subs(base, dict(zip(eqs.q, st))) for st in stages]
        enc = ConstantEnclosure([(a, lo, hi) for got in at_stages for a, (_, lo, hi) in zip(got, hints)], missing,
                                labels=[(a, t) for got in at_stages for a, (_, t) in zip(got[len(hints):], labels)])
    else:
        enc = DefiniteEnclosure(F, list(eqs.q), stages)
    # over the operating envelope's cover when the model declares one (the delta's platform over
    # its cylinder, --reduced), else over the declared box
    return _assemble(eqs, opts.integrator, state, outs, u, B, record, desc, ref, {"M": F}, [enc],
                     cover=bool(eqs.envelope))


# ---- rk4 with constraints: the projected accelerations, then a coordinate projection ------

def _rk4_projected(eqs: Equations, opts: StepOptions, ref: _Reference) -> Kernel:
    """Classic RK4 on qdd(q, qd) of the constrained equations, then q and qd projected back
    onto Phi = 0 and Phi_q qd = beta. qdd from the augmented Lagrangian at the acceleration
    level: one LDL^T of M + a Phi_q^T Phi_q per stage (a = penalty x max diag M / max diag
    Phi_q^T Phi_q: positive definite whatever the rank of Phi_q, so redundant constraints and
    singular positions hold), the penalty solution refined by mass-orthogonal projections
    onto Phi_q qdd = gamma (`iterations` of them, the same factor). No constraint force is
    integrated, so nothing stiff: dt is set by accuracy and RK4's stability region alone. The
    projection at q+: one Gauss-Newton correction of the positions and one of the
    velocities, mass-orthogonal, with that stage's kind of factor at q+. Four factorizations
    per step against ali3p's one: cheaper where RK4's fourth order allows a dt several
    times larger for the accuracy asked (docs/kernels.md, step)."""
    samples = _samples(eqs, ref)
    a = _penalty_alpha(eqs, opts, samples) * opts.dt ** 2 / 4  # the same lead matrix as ali3p's
    act, B = actuators(eqs)
    u = actuator_symbols(eqs, act)
    entries = dict(eqs.M.entries)
    for jk, v in _gram(eqs.phi_q, a).items():
        entries[jk] = add(entries.get(jk, ZERO), v)
    n = len(eqs.q)
    F = factor_ldlt(Sparse((n, n), entries), samples, names=names(eqs.q),
                    label=f"{eqs.model} M + a Phi_q^T Phi_q")
    force = [add(q_, f) for q_, f in zip(eqs.Q, B.matvec(u) if u else [ZERO] * n)]
    acc = F.solve([add(f, g) for f, g in zip(force, eqs.phi_q.rmatvec([mul(_c(a), g) for g in eqs.gamma]))])
    refine = opts.iterations or _refinements(eqs, acc, F, a, u, ref)
    for _ in range(refine):
        acc = _project(F, eqs.phi_q, a, acc, eqs.gamma)
    _check_stable(eqs, acc, u, opts, ref)
    dt = opts.dt

    t1 = add(eqs.t, _c(dt))
    q1, v1 = _rk4(_accelerations_at(eqs, acc), eqs, dt)
    # the projection at q+: positions by one Gauss-Newton step, then the velocities there
    at1 = {**dict(zip(eqs.q, q1)), eqs.t: t1}
    corr = F.solve(eqs.phi_q.rmatvec([mul(_c(a), p) for p in eqs.phi]))
    q2 = [sub(x, d) for x, d in zip(q1, subs(corr, at1))]
    at2 = {**dict(zip(eqs.q, q2)), eqs.t: t1}
    v2 = subs(_project(F, eqs.phi_q, a, list(eqs.qd), eqs.beta), {**at2, **dict(zip(eqs.qd, v1))})
    state = [port("q", eqs, eqs.q), port("qd", eqs, eqs.qd)]
    outs = [OutPort.vector("q", q2, names(eqs.q)), OutPort.vector("qd", v2, names(eqs.qd))]
    desc = (f"one classic Runge-Kutta step of {dt:g} s on the constrained accelerations (straight-line LDL^T of "
            f"M + a Phi_q^T Phi_q per stage, a = {a:.6g}, {refine} refinements), then q and qd projected onto "
            "the constraints")
    record = {"integrator": "rk4", "dt": dt, "iterations": refine, "alpha": float(a)}
    return _assemble(eqs, "rk4", state, outs, u, B, record, desc, ref, {"M + a Phi_q^T Phi_q": F})


# ---- rk4 with exact multipliers (--penalty 0): no penalty, fixed point over consistent states ----

def _rk4_exact(eqs: Equations, opts: StepOptions, ref: _Reference) -> Kernel:
    """Classic RK4 on the exact constrained accelerations, then q and qd projected onto the
    constraints, as _rk4_projected but without a penalty: qdd = a0 - W lambda with a0 =
    M^-1 (Q + B u), W = M^-1 Phi_q^T and S lambda = Phi_q a0 - gamma, S = Phi_q W (the
    multipliers' matrix, positive definite while the constraints are independent); the
    projections q - W S^-1 Phi and qd - W S^-1 (Phi_q qd - beta) are one minimum-norm
    (mass-weighted) Gauss-Newton step each. Every value stays of the size of the motion's
    own (no penalty cancels against its own correction), so range and error analysis over
    the cover of near-consistent states (domain.states) bound it: the fixed-point step of a
    closed loop. Refused (StepError naming the constraints) where S is singular along the
    reference run: redundant constraints or a singular position, which the penalty holds."""
    samples = _samples(eqs, ref)
    rows = _independent_rows(eqs, ref)
    FM = None
    if len(rows) == len(eqs.phi) and opts.solve == "auto":
        try:
            FM = factor_ldlt(eqs.M, samples, names=names(eqs.q), label=f"{eqs.model} M")
        except SingularPivotError:  # a massless link: M alone is singular, the KKT matrix need not be
            pass
    if FM is None:
        return _rk4_kkt(eqs, opts, ref, rows, samples)
    act, B = actuators(eqs)
    u = actuator_symbols(eqs, act)
    n = len(eqs.q)
    W, S = _multiplier_matrices(eqs, FM)
    _check_independent(eqs, S, ref)
    FS = factor_ldlt(S, samples, names=list(eqs.phi_names), label=f"{eqs.model} Phi_q M^-1 Phi_q^T")
    force = [add(q_, f) for q_, f in zip(eqs.Q, B.matvec(u) if u else [ZERO] * n)]
    a0 = FM.solve(force)
    lam = FS.solve([sub(r, g) for r, g in zip(eqs.phi_q.matvec(a0), eqs.gamma)])
    acc = [sub(a, w) for a, w in zip(a0, W.matvec(lam))]
    _check_stable(eqs, acc, u, opts, ref)
    dt = opts.dt

    t1 = add(eqs.t, _c(dt))
    q1, v1 = _rk4(_accelerations_at(eqs, acc), eqs, dt)
    corr = W.matvec(FS.solve(list(eqs.phi)))
    q2 = [sub(x, d) for x, d in zip(q1, subs(corr, {**dict(zip(eqs.q, q1)), eqs.t: t1}))]
    vcorr = W.matvec(FS.solve([sub(r, b) for r, b in zip(eqs.phi_q.matvec(list(eqs.qd)), eqs.beta)]))
    v2 = [sub(x, d) for x, d in zip(v1, subs(vcorr, {**dict(zip(eqs.q, q2)), **dict(zip(eqs.qd, v1)), eqs.t: t1}))]
    state = [port("q", eqs, eqs.q), port("qd", eqs, eqs.qd)]
    outs = [OutPort.vector("q", q2, names(eqs.q)), OutPort.vector("qd", v2, names(eqs.qd))]
    desc = (f"one classic Runge-Kutta step of {dt:g} s on the constrained accelerations with exact multipliers "
            "(straight-line LDL^T of M and of Phi_q M^-1 Phi_q^T per stage), then q and qd projected onto the "
            "constraints")
    record = {"integrator": "rk4", "dt": dt, "iterations": 0, "alpha": 0.0}
    return _assemble(eqs, "rk4", state, outs, u, B, record, desc, ref, {"M": FM, "Phi_q M^-1 Phi_q^T": FS},
                     cover=True)


def _rk4_kkt(eqs: Equations, opts: StepOptions, ref: _Reference, rows: list[int], samples) -> Kernel:
    """_rk4_exact where M is singular (a massless link, as Bricard's last joint) or rows were
    left out (redundant constraints): with A the independent rows `rows`, the accelerations
    and multipliers from one straight-line factor of K = [M A^T; A 0] per stage (regular
    while A has full rank and M is definite on its null space, which _check_kkt checks over
    the configurations), and the projections from the same kind of factor at q+: K [dq; mu] =
    [0; Phi] gives the M-weighted minimum-norm correction (the same as W S^-1 Phi when M is
    definite, and defined when it is not). A row implied by the others is exact to leave out:
    it holds wherever they do."""
    from .dynamics import _forward_factor, kkt_matrix

    act, B = actuators(eqs)
    u = actuator_symbols(eqs, act)
    n = len(eqs.q)
    kept = [eqs.phi_names[i] for i in rows]
    dropped = [c for i, c in enumerate(eqs.phi_names) if i not in rows]
    A = _rows_of(eqs.phi_q, rows)
    _check_kkt(eqs, A, rows, ref)
    K = kkt_matrix(eqs.M, A)
    col_names = [f"{q}_dd" for q in names(eqs.q)] + [f"lambda_{c}" for c in kept]
    row_names = [f"motion of {q}" for q in names(eqs.q)] + kept
    force = [add(q_, f) for q_, f in zip(eqs.Q, B.matvec(u) if u else [ZERO] * n)]
    F, x = _forward_factor(K, force + [eqs.gamma[i] for i in rows], samples, "auto", row_names, col_names,
                           f"{eqs.model} KKT [M A^T; A 0]")
    acc = x[:n]
    _check_stable(eqs, acc, u, opts, ref)
    dt = opts.dt
    t1 = add(eqs.t, _c(dt))
    q1, v1 = _rk4(_accelerations_at(eqs, acc), eqs, dt)
    corr = F.solve([ZERO] * n + [eqs.phi[i] for i in rows])[:n]
    q2 = [sub(a, d) for a, d in zip(q1, subs(corr, {**dict(zip(eqs.q, q1)), eqs.t: t1}))]
    vres = [sub(r, eqs.beta[i]) for r, i in zip(A.matvec(list(eqs.qd)), rows)]
    vcorr = F.solve([ZERO] * n + vres)[:n]
    # the velocities projected at q1, with the positions' factor (one factorization fewer): their
    # residual at q2 is O(|q2 - q1| |qd|), the step's own truncation error times a rate; at q2
    # (as _rk4_exact) the factor's enclosure over a box carries the correction's (Bricard:
    # its last pivot no longer bounded away from 0 over 88 of its 256 cells)
    v2 = [sub(a, d) for a, d in zip(v1, subs(vcorr, {**dict(zip(eqs.q, q1)), **dict(zip(eqs.qd, v1)), eqs.t: t1}))]
    state = [port("q", eqs, eqs.q), port("qd", eqs, eqs.qd)]
    outs = [OutPort.vector("q", q2, names(eqs.q)), OutPort.vector("qd", v2, names(eqs.qd))]
    left = f"; {', '.join(dropped)} left out (implied by the other rows)" if dropped else ""
    desc = (f"one classic Runge-Kutta step of {dt:g} s on the constrained accelerations with exact multipliers "
            f"(straight-line {F.kind} of the KKT matrix [M A^T; A 0] per stage{left}), then q and qd projected "
            "onto the constraints (M-weighted minimum-norm corrections, both from the factor at the RK4 step's q)")
    record = {"integrator": "rk4", "dt": dt, "iterations": 0, "alpha": 0.0, "rows_left_out": dropped}
    return _assemble(eqs, "rk4", state, outs, u, B, record, desc, ref, {"KKT [M A^T; A 0]": F}, cover=True,
                     phi_rows=rows)


def _rows_of(J: Sparse, rows: list[int]) -> Sparse:
    """The rows `rows` of J, renumbered 0.. in that order."""
    at = {i: k for k, i in enumerate(rows)}
    return Sparse((len(rows), J.shape[1]), {(at[i], j): a for (i, j), a in J.entries.items() if i in at})


def _independent_rows(eqs: Equations, ref: _Reference) -> list[int]:
    """Every constraint row when they are independent at the model's start (mobility, by
    rank); else the rows kept in order where each raises the rank of Phi_q at the reference
    run's first state (the others are implied there: Bricard's close_rz of its six loop
    equations). _check_kkt then checks the rows kept over every configuration served."""
    from ..reference.solvers import RANK_TOL, mobility

    if not mobility(eqs).redundant:
        return list(range(len(eqs.phi)))
    J = _jacobian_at(eqs, list(range(len(eqs.phi))), ref.Q[:1], ref.t[:1])[0]
    rows: list[int] = []
    for i in range(len(eqs.phi)):
        s = np.linalg.svd(J[rows + [i]], compute_uv=False)
        if s[-1] > RANK_TOL * s[0]:
            rows.append(i)
    return rows


def _jacobian_at(eqs: Equations, rows: list[int], Q: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Phi_q's rows `rows` at configurations (Q, T), parameters at their nominal values [k, m, n]."""
    return _dense_at(eqs, _rows_of(eqs.phi_q, rows), Q, T)


def _dense_at(eqs: Equations, S: Sparse, Q: np.ndarray, T: np.ndarray) -> np.ndarray:
    """The sparse matrix S of the model's atoms at configurations (Q, T), parameters at their
    nominal values, as dense matrices [k, rows, cols]."""
    ps, pv = parameters(eqs)
    X = np.column_stack([Q, T] + ([np.tile(pv, (len(Q), 1))] if ps else []))
    vals = Evaluator(list(S.entries.values()), list(eqs.q) + [eqs.t] + ps)(X)
    out = np.zeros((len(Q), *S.shape))
    for k, (i, j) in enumerate(S.entries):
        out[:, i, j] = vals[:, k]
    return out


def _check_kkt(eqs: Equations, A: Sparse, rows: list[int], ref: _Reference) -> None:
    """StepError unless, at every configuration served (_configurations over the rows kept),
    the rows kept are independent (smallest singular value of A at least INDEPENDENT_GRID of
    its largest) and M is definite on A's null space (its smallest eigenvalue there at least
    INDEPENDENT_GRID of M's largest diagonal entry): K = [M A^T; A 0] regular."""
    X = _configurations(eqs, ref, rows)
    J = _jacobian_at(eqs, rows, X[:, :-1], X[:, -1])
    M = _dense_at(eqs, eqs.M, X[:, :-1], X[:, -1])
    _, s, Vt = np.linalg.svd(J)
    ratio = s[:, -1] / np.maximum(s[:, 0], 1e-300)
    Z = np.transpose(Vt[:, len(rows):, :], (0, 2, 1))  # null space of A [k, n, n - m]
    w = np.linalg.eigvalsh(np.einsum("kni,knm,kmj->kij", Z, M, Z))[:, 0]
    mass = w / np.maximum(np.abs(np.diagonal(M, axis1=1, axis2=2)).max(axis=1), 1e-300)
    kept = ", ".join(eqs.phi_names[i] for i in rows)
    for val, what in ((ratio, f"its constraints {kept} are nearly dependent (smallest singular value of their "
                                "Jacobian {v:.2g} of its largest)"),
                      (mass, "M is not definite on the motions the constraints allow (smallest eigenvalue there "
                             "{v:.2g} of M's largest diagonal entry)")):
        b = int(np.argmin(val))
        if val[b] <= INDEPENDENT_GRID:
            at = ", ".join(f"{q.value.name}={x:.3g}" for q, x in zip(eqs.q, X[b]))
            raise StepError(f"step: {eqs.model}: --penalty 0 solves [M A^T; A 0] exactly, but {what.format(v=val[b])} "
                            f"at the consistent configuration {at}: keep the penalty (the default) for this model")


def _multiplier_matrices(eqs: Equations, FM) -> tuple[Sparse, Sparse]:
    """(W = M^-1 Phi_q^T, S = Phi_q W), S's lower triangle mirrored (one atom per pair)."""
    m, n = len(eqs.phi), len(eqs.q)
    cols = []
    for i in range(m):
        row = [ZERO] * n
        for (r, j), a in eqs.phi_q.entries.items():
            if r == i:
                row[j] = a
        cols.append(FM.solve(row))
    W = Sparse((n, m), {(j, i): c[j] for i, c in enumerate(cols) for j in range(n) if c[j] is not ZERO})
    S: dict = {}
    for i in range(m):
        for k in range(i + 1):
            v = ZERO
            for (r, j), a in eqs.phi_q.entries.items():
                if r == i and cols[k][j] is not ZERO:
                    v = add(v, mul(a, cols[k][j]))
            if v is not ZERO:
                S[(i, k)] = S[(k, i)] = v
    return W, Sparse((m, m), S)


# smallest / largest eigenvalue of S below this at a consistent configuration: (nearly)
# dependent constraints. A singular position between the configurations checked (the
# positions' boxes of domain.states are 1/32 of each range wide) shows as about 1e-3.
INDEPENDENT = 1e-2
# over an operating envelope's grid (8 configurations per cell, 0.009 rad apart on the
# swinging N-four-bar) a singular position shows far smaller (1.3e-7 there, the smallest
# eigenvalue falling with the square of the distance), and a well-conditioned loop may sit
# below 1e-2 (the free four-bar: 8e-3 at its crank 0.49 rad), so the grid is held to this
INDEPENDENT_GRID = 1e-3


def _configurations(eqs: Equations, ref: _Reference, rows: list[int] | None = None) -> np.ndarray:
    """Consistent (q, t) where S is checked: the reference run's, and with an operating
    envelope a grid over it (8 points per cell), else the centres of the positions' boxes of
    domain.states (over the declared ranges) moved onto the constraints by minimum-norm
    Newton steps, those that stay inside the ranges. rows: the constraint rows the grid
    holds (default all; the independent ones where some were left out)."""
    X = np.column_stack([ref.Q, ref.t])
    if eqs.envelope:  # the kernel serves the envelope: a grid of its consistent configurations
        Q, t = envelope_configurations(eqs, range(len(eqs.phi)) if rows is None else rows)
        return np.vstack([X, np.column_stack([Q, np.full(len(Q), ref.t[0]) if t is None else t])])
    got = None if parameters(eqs)[0] else state_cover(eqs, False, {eqs.t: tuple(eqs.ranges[eqs.t])}, levels=["q"])
    if got is None:
        return X
    syms, lo, hi = got
    C = (lo + hi) / 2
    Q, T = C[:, [syms.index(s) for s in eqs.q]], C[:, syms.index(eqs.t)]
    J = eqs.phi_q
    ev = Evaluator(list(eqs.phi) + J.values(), list(eqs.q) + [eqs.t])
    ri, cj = np.array([i for i, _ in J.pattern], dtype=int), np.array([j for _, j in J.pattern], dtype=int)
    m = len(eqs.phi)
    with np.errstate(all="ignore"):
        for _ in range(20):
            Y = ev(np.column_stack([Q, T]))
            Jm = np.zeros((len(Q), m, len(eqs.q)))
            Jm[:, ri, cj] = Y[:, m:]
            Q = Q - np.einsum("kij,kj->ki", np.linalg.pinv(Jm), Y[:, :m])
        ok = np.all(np.abs(ev(np.column_stack([Q, T]))[:, :m]) < 1e-10, axis=1)
    rng = np.array([eqs.ranges[s] for s in eqs.q])
    ok &= np.all((Q >= rng[:, 0]) & (Q <= rng[:, 1]), axis=1)
    return np.vstack([X, np.column_stack([Q[ok], T[ok]])])


def _check_independent(eqs: Equations, S: Sparse, ref: _Reference) -> None:
    """StepError when S = Phi_q M^-1 Phi_q^T is (nearly) singular at a consistent
    configuration inside the declared ranges (_configurations): its constraints are
    dependent there (a singular position, or redundant rows), the exact multipliers
    unbounded; the message names the constraints and the configuration."""
    X = _configurations(eqs, ref)
    w, V = np.linalg.eigh(_dense_at(eqs, S, X[:, :-1], X[:, -1]))
    ratio = w[:, 0] / np.maximum(np.abs(w[:, -1]), 1e-300)
    b = int(np.argmin(ratio))
    if ratio[b] > (INDEPENDENT_GRID if eqs.envelope else INDEPENDENT):
        return
    v = np.abs(V[b, :, 0])
    rows = [eqs.phi_names[i] for i in np.argsort(-v) if v[i] > 0.1 * v.max()]
    at = ", ".join(f"{s.value.name}={x:.3g}" for s, x in zip(eqs.q, X[b]))
    where, fix = (("operating envelope", "an envelope that avoids it (--envelope), or the penalty (the default)")
                  if eqs.envelope else ("declared ranges", "keep the penalty (the default) for this model"))
    if eqs.explicit:  # closed forms given: the rows they satisfy (and their singular positions) can go
        fix += "; or --reduced (the step over the independent coordinates of the model's closed forms)"
    raise StepError(f"step: {eqs.model}: --penalty 0 needs independent constraints, but {', '.join(rows[:6])}"
                    f"{' ...' if len(rows) > 6 else ''} are {'nearly ' if ratio[b] > 0 else ''}dependent at the "
                    f"consistent configuration {at} inside the {where} (a singular position, or redundant "
                    f"constraints: Phi_q M^-1 Phi_q^T's smallest eigenvalue {ratio[b]:.2g} of its largest), where "
                    f"the exact multipliers are unbounded: {fix}")


REFINED = 1e-8  # accelerations within this (relative to their scale) of the exact ones, at 9 in 10 states
MAX_REFINEMENTS = 8


def _refinements(eqs: Equations, acc, F, a: float, u, ref: _Reference) -> int:
    """The fewest projections of the penalty accelerations onto Phi_q qdd = gamma that bring
    them within REFINED of the exact ones (the reference run's, scipy's solve) at 9 in 10
    states of the reference run; StepError when MAX_REFINEMENTS do not. Not at every state:
    next to a singular position (the N-four-bar's) the refinement converges slowly along
    the direction Phi_q loses, where the exact acceleration is ill-conditioned itself (N = 4,
    penalty 1e3: 1.4e-2 after 4 refinements at the worst state, 3.7e-9 at 9 in 10)."""
    ps, pv = parameters(eqs)
    ins = list(eqs.q) + list(eqs.qd) + [eqs.t] + list(u) + ps
    X = np.column_stack([ref.Q, ref.QD, ref.t, np.zeros((len(ref.t), len(u))),
                         np.tile(pv, (len(ref.t), 1)) if ps else np.zeros((len(ref.t), 0))])
    scale = max(1.0, float(np.abs(ref.QDD).max()))
    worst = np.inf
    for k in range(MAX_REFINEMENTS + 1):
        worst = float(np.quantile(np.abs(Evaluator(acc, ins)(X) - ref.QDD).max(axis=1), 0.9)) / scale
        if worst <= REFINED:
            return k
        acc = _project(F, eqs.phi_q, a, acc, eqs.gamma)
    raise StepError(f"step: {eqs.model}: rk4's accelerations stay {worst:.2g} (relative) from the exact ones at 1 in "
                    f"10 states of the reference run after {MAX_REFINEMENTS} refinements: use ali3p, or a larger "
                    "--penalty")


def _growth(integrator: str, z: np.ndarray) -> np.ndarray:
    """|amplification| of one step for the test equation y' = lambda y, z = lambda dt: RK4's
    polynomial. Semi-implicit Euler, a method for second-order motion, is judged on the
    oscillator x'' = -|lambda|^2 x its oscillatory modes are (the worst eigenvalue of its
    exact 2 x 2 step matrix: stable while |lambda| dt <= 2); 0 for the other modes."""
    if integrator == "rk4":
        return np.abs(1 + z + z ** 2 / 2 + z ** 3 / 6 + z ** 4 / 24)
    # v+ = v - dt w2 x, x+ = x + dt v+ (w2 = |lambda|^2): trace 2 - (|z|)^2, det 1
    w = np.where(np.abs(z.imag) >= np.abs(z.real), -np.abs(z) ** 2, -0.0)
    tr = 2 + w
    disc = np.sqrt(tr * tr - 4 + 0j)
    return np.maximum(np.abs((tr + disc) / 2), np.abs((tr - disc) / 2))


STABLE_SLACK = 1e-9  # amplification above 1 that is rounding of the test, not growth


def _check_stable(eqs: Equations, acc: list[Atom], u: list[Atom], opts: StepOptions, ref: _Reference) -> None:
    """StepError when an explicit step at opts.dt amplifies a mode that the motion does not
    grow: the eigenvalues of the linearized motion (finite differences of the step's own
    accelerations at the reference run's states) with Re lambda <= 0 must stay inside the
    integrator's stability region. The message names the eigenvalue, the state and the dt
    that holds at every state of the run."""
    n = len(eqs.q)
    ps, pv = parameters(eqs)
    ins = list(eqs.q) + list(eqs.qd) + [eqs.t] + list(u) + ps
    ev = Evaluator(acc, ins)
    base = np.column_stack([ref.Q, ref.QD, ref.t, np.zeros((len(ref.t), len(u))), np.tile(pv, (len(ref.t), 1))
                            if ps else np.zeros((len(ref.t), 0))])
    h = 1e-6 * np.maximum(1.0, np.abs(base[:, :2 * n]))
    rows = [base]
    for k in range(2 * n):
        for sign in (1, -1):
            X = base.copy()
            X[:, k] += sign * h[:, k]
            rows.append(X)
    V = ev(np.vstack(rows)).reshape(1 + 4 * n, len(ref.t), n)
    D = np.stack([(V[1 + 2 * k] - V[2 + 2 * k]) / (2 * h[:, k:k + 1]) for k in range(2 * n)], axis=2)  # [state, n, 2n]
    J = np.zeros((len(ref.t), 2 * n, 2 * n))
    J[:, :n, n:] = np.eye(n)
    J[:, n:, :] = D
    lam = np.linalg.eigvals(J)  # [state, 2n]
    if not np.all(np.isfinite(lam)):
        return
    modes = np.where(lam.real <= 1e-9 * np.abs(lam), lam, 0.0)
    g = _growth(opts.integrator, modes * opts.dt)
    if g.max() <= 1 + STABLE_SLACK:
        return
    i, j = np.unravel_index(int(np.argmax(g)), g.shape)
    lo, hi = 0.0, opts.dt  # the largest dt that holds at every state: bisection (growth rises with dt here)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _growth(opts.integrator, modes * mid).max() <= 1 + STABLE_SLACK else (lo, mid)
    name = {"rk4": "rk4", "euler": "semi-implicit Euler"}[opts.integrator]
    raise StepError(f"step: {name} at --dt {opts.dt:g} s is unstable for {eqs.model}: the linearized motion's "
                    f"eigenvalue {modes[i, j].real:.4g}{modes[i, j].imag:+.4g}i 1/s at t = {ref.t[i]:g} s of the reference "
                    f"run grows by {g[i, j]:.3g} per step; --dt {_floor2(lo):g} s or less holds at every state of the run")


def _floor2(x: float) -> float:
    """x rounded down to two significant digits (a dt to suggest that still holds)."""
    if x <= 0:
        return 0.0
    e = np.floor(np.log10(x)) - 1
    return float(np.floor(x / 10 ** e) * 10 ** e)


def _offset(lo: float, hi: float) -> float:
    """The whole number nearest the middle of a coordinate's range (0 near 0)."""
    return float(np.round((lo + hi) / 2)) + 0.0


def _shift_positions(eqs: Equations, state: list[InPort], outs: list[OutPort]):
    """The positions carried as q - c, c the middle of each coordinate's declared range
    (ir.subs_shifted: constants meet and fold before the displacements are rounded), so
    float32 keeps the digits of a displacement, not of a position 40 m from the origin.
    Measured on the N-four-bar over 10 s at dt 1 ms, the float32 step against the double
    step: 9.3e-4 m for N = 40 (1.1e-2 m unshifted), 7.3e-4 m for N = 12 (1.6e-3), 1.4e-3 m
    for N = 4 (8.3e-5: the noise of float32 through the singular positions is about 1e-3 m
    with or without, the rounding of large positions adds to it). (state, outputs, c)."""
    c = [_offset(*eqs.ranges[s]) for s in eqs.q]
    if not any(c):
        return state, outs, c
    d = [symbol(f"{s.value.name}_shifted", "input") for s in eqs.q]
    shift = {s: (ci, di) for s, ci, di in zip(eqs.q, c, d)}
    flat = [add(a, _c(-ci)) if o.name == "q" else a for o in outs
            for a, ci in zip(o.atoms, c if o.name == "q" else [0.0] * len(o.atoms))]
    done = subs_shifted(flat, shift)
    new_outs, k = [], 0
    for o in outs:
        new_outs.append(OutPort.vector(o.name, done[k:k + len(o.atoms)], o.labels))
        k += len(o.atoms)
    qp = state[0]
    q_port = InPort("q", d, [(lo - ci, hi - ci) for (lo, hi), ci in zip(qp.ranges, c)])
    return [q_port, *state[1:]], new_outs, c


class _Shifted:
    """The rewrite _shift_positions applies to a kernel's atoms (q -> q_shifted + c), for
    the hints that locate the kernel's values in its tape (analysis.definite)."""

    def __init__(self, eqs: Equations, offset: list[float]):
        self.shift = {s: (ci, symbol(f"{s.value.name}_shifted", "input")) for s, ci in zip(eqs.q, offset)}

    def __call__(self, atoms: list[Atom]) -> list[Atom]:
        return subs_shifted(list(atoms), self.shift)


def _accelerations_at(eqs: Equations, acc: list[Atom]):
    """The integrators' right-hand side f(q, qd, t): `acc` with the state's atoms substituted."""
    def f(q, v, t):
        return subs(acc, {**dict(zip(eqs.q, q)), **dict(zip(eqs.qd, v)), eqs.t: t})
    return f


def _rk4(f, eqs: Equations, dt: float) -> tuple[list[Atom], list[Atom]]:
    """(q+, qd+) of one classic Runge-Kutta step from (eqs.q, eqs.qd, eqs.t) on q'' = f(q, qd, t)."""
    lin = _AtomAlgebra.lin
    q0, v0, t0 = list(eqs.q), list(eqs.qd), eqs.t
    th = add(t0, _c(dt / 2))
    k1v, k1a = v0, f(q0, v0, t0)
    k2v = lin(dt / 2, k1a, v0)
    k2a = f(lin(dt / 2, k1v, q0), k2v, th)
    k3v = lin(dt / 2, k2a, v0)
    k3a = f(lin(dt / 2, k2v, q0), k3v, th)
    k4v = lin(dt, k3a, v0)
    k4a = f(lin(dt, k3v, q0), k4v, add(t0, _c(dt)))
    return _rk4_sum(dt, q0, k1v, k2v, k3v, k4v), _rk4_sum(dt, v0, k1a, k2a, k3a, k4a)


def _rk4_sum(dt: float, x, k1, k2, k3, k4) -> list[Atom]:
    """x + dt/6 (k1 + 2 k2 + 2 k3 + k4), elementwise."""
    return [add(xi, mul(_c(dt / 6), add(add(a, mul(_c(2.0), b)), add(mul(_c(2.0), c), d))))
            for xi, a, b, c, d in zip(x, k1, k2, k3, k4)]


def _assemble(eqs: Equations, integrator: str, state: list[InPort], outs: list[OutPort], u, B, record: dict,
              desc: str, ref: _Reference, solves: dict, enclosures: tuple = (), cover: bool = False,
              phi_rows: list[int] | None = None) -> Kernel:
    """The kernel: state ports (t among them when the step depends on time), then u; the
    outputs repeat the state; `motion` is the reference run's states (u = 0). cover: its
    domain is the cover of near-consistent states (domain.states) of the constraint rows
    `phi_rows` (default all), else the declared box."""
    state, outs, offset = _shift_positions(eqs, state, outs)
    if any(offset):
        for enc in enclosures:
            enc.rewrite = _Shifted(eqs, offset)
    timed = _depends_on_time(eqs, [a for o in outs for a in o.atoms])
    if timed:
        state.append(port("t", eqs, [eqs.t]))
        outs.append(OutPort.vector("t", [add(eqs.t, _c(record["dt"]))], [eqs.t.value.name]))
    inputs = list(state)
    if u:
        ur, derived = actuator_ranges(eqs, u, None, B, None)
        inputs.append(InPort("u", u, [ur[s] for s in u]))
    else:
        derived = []
    names_ = [p.name for p in state]
    record = {**record, "state": names_, "n_state": sum(len(p.symbols) for p in state), "time": timed,
              "inputs_held": ["u"] if u else [], "q_offset": offset}
    rows = _state_rows(ref, integrator)
    rows[:, :len(offset)] -= offset
    tail = [ref.t[:, None]] if timed else []
    motion = np.column_stack([rows, *tail, np.zeros((len(rows), len(u)))])
    k = Kernel(model=eqs.model, name="step", description=desc, inputs=inputs, outputs=outs,
               motion=[[float(v) for v in row] for row in motion],
               info=KernelInfo(solves=solves, report="\n".join(F.report() for F in solves.values()),
                               derived_ranges=derived,
                               multipliers=[], enclosures=list(enclosures)),
               step=record)
    if record.get("alpha"):  # a penalty step: its analysis runs over the declared box
        k = k.replace(analysis_note=_penalty_note(eqs, integrator))
    elif cover and eqs.phi:
        k = k.replace(analysis_note=_exact_note(eqs, record["dt"], phi_rows))
    if not cover or getattr(eqs, "params", None):
        return k
    return k.with_domain(Domain(boxes=lambda: _state_boxes(eqs, inputs, offset, integrator == "ali3p", phi_rows),
                                motion=k.motion, envelope=envelope_record(eqs) if eqs.envelope else None))


def _penalty_note(eqs: Equations, integrator: str) -> str:
    """Why the range analysis of a penalty step fails: the penalty amplifies whatever
    constraint residual a range of states holds (measured on the pendulum's ali3p step over
    boxes 0.03 wide around its consistent states: alpha Phi within +-2.9e8, qdd+ within
    +-5.6e48), and the declared box holds states far off the constraints."""
    rows = ", ".join(eqs.phi_names[:3]) + (" ..." if len(eqs.phi) > 3 else "")
    return (f"step: {eqs.model}: the {integrator} step's penalty amplifies the residual of {rows} that its declared "
            "box of states holds (states off the constraints, which the mechanism never reaches), so its values "
            "get no bound: --integrator rk4 --penalty 0 (exact multipliers) is analysed over the near-consistent "
            "states (c-fixed) where the constraints stay independent")


def _exact_note(eqs: Equations, dt: float, kept: list[int] | None = None) -> str:
    """What a refused analysis of rk4 --penalty 0 means: a pivot of M or of Phi_q M^-1
    Phi_q^T (of the KKT matrix where rows were left out, `kept`) not bounded away from 0 over
    the domain, the cover of near-consistent states, or the declared box (states off the
    constraints) where the cover is not built."""
    rows = ", ".join(eqs.phi_names[:3]) + (" ..." if len(eqs.phi) > 3 else "")
    later = (f"the later stages take q + dt/2 qd over whole velocity boxes, so a smaller --dt (e.g. {dt / 2:g}) "
             "or narrower cells may prove them")
    if kept is None:  # the nested Schur complements: the KKT factor's pivots are proved more often
        matrices = "M and of Phi_q M^-1 Phi_q^T"
        hint = ("; --solve kkt (one factor of [M A^T; A 0] a stage, whose pivots range analysis proves where these "
                f"nested ones fail: the governor, Andrews'), or: {later}")
    else:
        rows = ", ".join(eqs.phi_names[i] for i in kept[:3]) + (" ..." if len(kept) > 3 else "")
        matrices = "the KKT matrix [M A^T; A 0]"
        hint = f"; {later}"
    where = ("the boxes of near-consistent states of its operating envelope (its cover, each constraint "
             "allowed a residual)" if eqs.envelope else
             "the boxes of near-consistent states (domain.states)" if len(eqs.q) <= MAX_COORDS else
             f"the declared box of states, which holds states off the constraints (no cover of near-consistent "
             f"states for more than {MAX_COORDS} coordinates without an operating envelope: {eqs.model} has "
             f"{len(eqs.q)})")
    return (f"step: {eqs.model}: rk4 --penalty 0 divides by the pivots of {matrices} ({rows}), "
            f"not all bounded away from 0 over {where}" + (hint if eqs.envelope or len(eqs.q) <= MAX_COORDS else ""))


def _near_consistent(eqs: Equations, accelerations: bool, rows: list[int] | None = None):
    """(symbols, lo, hi): boxes holding every state within RESIDUAL of the constraints, of
    the operating envelope when the model declares one (its Krawczyk cover with each
    constraint row allowed RESIDUAL: grows with the degrees of freedom, any number of
    coordinates; t and the envelope's quantities among the symbols), else of the declared
    ranges (domain.states, up to MAX_COORDS coordinates); None where neither is built. rows:
    the constraint rows held (default all; with an envelope, the independent ones)."""
    if not eqs.envelope:
        return state_cover(eqs, accelerations, {eqs.t: tuple(eqs.ranges[eqs.t])})
    rows = list(range(len(eqs.phi))) if rows is None else list(rows)
    cover = envelope_cover(eqs, rows=rows, residual=_row_residuals(eqs)[rows])
    return cover.symbols, cover.lo, cover.hi


def _row_residuals(eqs: Equations) -> np.ndarray:
    """Per constraint row, the residual a covered state may have: RESIDUAL in the row's own
    units, and no more than RESIDUAL x the row's gradient norm at the guess (|Phi_q row|),
    i.e. about RESIDUAL in the coordinates: a mechanism of millimetre links (Andrews') would
    otherwise hold states far off its loops, where Krawczyk's test fails."""
    q0 = np.array([[eqs.guess.get(s, 0.0) for s in eqs.q]])
    J = _dense_at(eqs, eqs.phi_q, q0, np.array([eqs.ranges[eqs.t][0]]))[0]
    scale = np.linalg.norm(J, axis=1)
    return RESIDUAL * np.where((scale > 0) & np.isfinite(scale), np.minimum(1.0, scale), 1.0)


def _state_boxes(eqs: Equations, inputs: list[InPort], offset: list[float], accelerations: bool,
                 rows: list[int] | None = None):
    """The step's domain (_near_consistent): boxes over its inputs holding every
    near-consistent state (the positions shifted like the q port, rounded outward; u over
    the envelope's forces and t over the time range where the boxes do not bound them,
    domain.cover.input_fallback); None (the declared box) where no cover is built."""
    got = _near_consistent(eqs, accelerations, rows)
    if got is None:
        return None
    syms, lo, hi = got
    index = {s: k for k, s in enumerate(syms)}
    shifted = {d: (q, c) for q, c, d in zip(eqs.q, offset, inputs[0].symbols)}
    fallback = input_fallback(eqs, inputs)
    cols = []
    for p in inputs:
        for s in p.symbols:
            q, c = shifted.get(s, (s, 0.0))
            if q in index:
                k = index[q]
                cols.append((np.nextafter(lo[:, k] - c, -np.inf) if c else lo[:, k],
                             np.nextafter(hi[:, k] - c, np.inf) if c else hi[:, k]))
            else:
                a, b = fallback[s]
                cols.append((np.full(len(lo), float(a)), np.full(len(lo), float(b))))
    return [[(float(a[i]), float(b[i])) for a, b in cols] for i in range(len(lo))]
