"""The double-precision reference solvers (numpy / scipy) over a model's Equations.

* Kinematics: the position problem by Newton-Raphson with the pseudoinverse (minimum-norm
  corrections, as in the thesis), optionally with user-fixed coordinates; then velocity and
  acceleration from the linear problems A qd = b and A qdd = g, A = [Phi_q; C] (holonomic
  and non-holonomic rows). Redundant equations are handled by the pseudoinverse and
  reported once (RedundantConstraintsWarning, `Kinematics.redundant`; for a position solved
  with fixed coordinates, once per set of fixed coordinates, over the holonomic rows only,
  without changing the model's finding); a Jacobian that
  leaves velocities undetermined raises SingularJacobianError naming the coordinates that
  the lost rank lets move.
* Dynamics (a Kinematics): inverse dynamics [Phi_kin_q^T, C^T, -B] [lambda; mu; u] =
  Q - M qdd (actuator forces and Lagrange multipliers); forward dynamics
  [M A^T; A 0] [qdd; lambda] = [Q + B u; g] integrated with scipy's solve_ivp, the state
  projected onto the position and velocity constraints at every output time (the dt grid
  and t_end); and the energy T + V along a trajectory, as a balance against the work of the
  non-conservative forces, actuators and drivers when there is any.

The equations are evaluated by `numeric.Compiled` (straight-line Python over floats, the
same operations as the numpy reference evaluator of mbforge.ir, faster at one point),
compiled on first use. `Kinematics.motion` (the verification vectors of every generated
kernel) solves all its times at once with `_Batched` (the same operations over numpy
batches, grouped by depth) and batched LU, and answers only what the per-point
continuation (`motion_sequential`) would: the same solutions to about 1e-15, else it
falls back to it.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .. import cache
from ..ir import OPS, Atom, flatten
from ..ir.evaluate import evaluation_order
from ..model.equations import Equations
from .numeric import Compiled, EvaluationError



class AssemblyError(RuntimeError):
    """The position problem does not close: names the equations left with a residual."""


class SingularJacobianError(AssemblyError):
    """The constraint Jacobian leaves some velocities undetermined: names the coordinates."""


class DynamicsError(RuntimeError):
    """Inverse or forward dynamics cannot be solved (names the coordinates or actuators)."""


class RedundantConstraintsWarning(UserWarning):
    pass


RANK_TOL = 1e-9  # singular values below RANK_TOL * largest count as zero


def _rank(s: np.ndarray, tol: float = RANK_TOL) -> int:
    if s.size == 0 or s[0] == 0:
        return 0
    return int(np.sum(s > tol * s[0]))


@dataclass(frozen=True)
class Mobility:
    """How many velocities a model's equations leave free: n - rank [Phi_q; C] (the
    holonomic rows judged, then every non-holonomic row) at a consistent state, the rank by
    SVD with singular values below RANK_TOL x the largest counted as zero. `rank` is None
    when there are fewer equations than coordinates (no rank can reach n: nothing to judge)."""

    model: str
    n: int
    equations: int
    rank: int | None
    t: float | None  # where the rank was judged

    @property
    def driven(self) -> bool:
        """Fully driven: the equations fix every velocity (a prescribed motion)."""
        return self.rank == self.n

    @property
    def redundant(self) -> int:
        """How many equations depend on the others there."""
        return 0 if self.rank is None else self.equations - self.rank

    def describe(self) -> str:
        """What was judged, without the model's name (callers say what needs it)."""
        if self.rank is None:
            return f"fewer equations than coordinates: at least {self.n - self.equations} free degree(s) of freedom"
        return (f"rank {self.rank} of its {self.equations} equations at the consistent state of t={self.t:g} (SVD, "
                f"singular values below {RANK_TOL:g} x the largest count as zero): {self.n - self.rank} free "
                f"degree(s) of freedom, {self.redundant} redundant equation(s)")


def mobility(eqs: Equations, rows=None) -> Mobility:
    """The one definition of "fully driven" (`Mobility.driven`): by rank, not by counting
    equations. `rows`: the holonomic rows to judge (default all; the kinematic rows alone for
    a model whose drivers actuators replace). The state: the model's guesses assembled by
    Newton at the start of its time range; remembered on `eqs` per row set."""
    n = len(eqs.q)
    rows = list(range(len(eqs.phi))) if rows is None else sorted(rows)
    m = len(rows) + len(eqs.nh)
    if m < n:
        return Mobility(eqs.model, n, m, None, None)
    key = tuple(rows)
    memo = eqs._mobility
    if key not in memo:
        kin = Kinematics(eqs)
        t0 = float(eqs.ranges[eqs.t][0])
        with warnings.catch_warnings():  # the solver that runs the model reports redundancy itself
            warnings.simplefilter("ignore", RedundantConstraintsWarning)
            q = kin.position(t0, kin._start(None))
        A = kin.jacobian(t0, q)[rows + list(range(kin.m, kin.m + kin.m_nh))]
        memo[key] = Mobility(eqs.model, n, m, _rank(np.linalg.svd(A, compute_uv=False)), t0)
    return memo[key]


class _Factor:
    """LU of a square matrix with a cheap reciprocal-condition estimate (LAPACK gecon);
    `ok` is False when the matrix is not square or is numerically singular, and then the
    callers fall back to the SVD, which also says what is singular."""

    def __init__(self, A: np.ndarray):
        from scipy.linalg import lapack, lu_factor  # scipy only when solving, not to build equations

        self.ok = False
        if A.shape[0] != A.shape[1] or A.shape[0] == 0:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lu, piv = lu_factor(A, check_finite=False)
        anorm = np.max(np.sum(np.abs(A), axis=0))
        rcond, info = lapack.dgecon(lu, anorm, norm="1")
        if info == 0 and rcond > RANK_TOL * 1e-3 and np.all(np.isfinite(lu)):
            self.ok = True
            self._lu = (lu, piv)

    def solve(self, b: np.ndarray) -> np.ndarray:
        from scipy.linalg import lu_solve

        return lu_solve(self._lu, b, check_finite=False)


def _names_in(vectors: np.ndarray, names: list[str], limit: int = 8) -> str:
    """The names with the largest weight in the columns of `vectors` (a basis of a subspace)."""
    w = np.sqrt(np.sum(vectors ** 2, axis=1))
    order = [i for i in np.argsort(-w) if w[i] > 0.05 * w.max()]
    shown = ", ".join(f"{names[i]} ({w[i]:.2f})" for i in order[:limit])
    return shown + (f" and {len(order) - limit} more" if len(order) > limit else "")


def _index_of(eqs: Equations, key) -> int:
    """Coordinate index from a q or qd symbol or a coordinate name."""
    if isinstance(key, str):
        for j, s in enumerate(eqs.q):
            if s.value.name == key:
                return j
        raise KeyError(f"{eqs.model}: no coordinate called {key!r}")
    for lst in (eqs.q, eqs.qd):
        for j, s in enumerate(lst):
            if s is key:
                return j
    raise KeyError(f"{eqs.model}: {key!r} is not a coordinate of the model")


class _Batched:
    """Atoms over a batch of points with one numpy operation per group of atoms of the same
    op and depth in the graph (about 45 for the Stewart platform's 4,000 atoms) instead of
    one per atom: the same elementwise operations as the reference `Evaluator`, so the same
    values, 10-20x faster on the batches of the motion.

    `parts`: lists of outputs sharing one table (one traversal); `self(X, p)` returns part
    p and computes only what parts 0..p need. Invariant: every row of the value table is
    written before it is read (the groups of part 0, then of part 1, ..., each by depth)."""

    def __init__(self, parts: list, inputs: list[Atom]):
        parts, inputs = [flatten(p) for p in parts], list(inputs)
        order = evaluation_order([a for p in parts for a in p], inputs)
        slot = {s: k for k, s in enumerate(inputs)}
        # the first part that needs an atom computes it (consumers before their arguments)
        last = len(parts) - 1
        part: dict[Atom, int] = {}
        for p, outs in enumerate(parts):
            for a in outs:
                part[a] = min(part.get(a, last), p)
        for a in reversed(order):
            p = part[a]
            for x in a.args:
                if part.get(x, last + 1) > p:
                    part[x] = p
        depth: dict[Atom, int] = {}
        groups: dict[tuple, list[Atom]] = {}
        consts = []
        valued = {name for name, o in OPS.items() if o.valued}
        for a in order:
            op, args = a.op, a.args
            if not args:  # sym or const
                depth[a] = 0
                if op == "const":
                    consts.append(a)
                continue
            d = 1 + max([depth[x] for x in args])
            depth[a] = d
            key = (part[a], d, op, a.value if op in valued else 0)
            g = groups.get(key)
            if g is None:
                groups[key] = [a]
            else:
                g.append(a)
        n = len(inputs)
        for a in consts:
            slot[a] = n
            n += 1
        self.n_in = len(inputs)
        self.consts = np.array([a.value for a in consts], dtype=float)
        self.steps = []  # (numpy function, first row, end row, [row index per argument], pow's exponent)
        self.ends = [0] * len(parts)  # steps that part p needs: steps[:ends[p]]
        for key in sorted(groups):
            atoms = groups[key]
            lo = n
            for a in atoms:
                slot[a] = n
                n += 1
            o = OPS[key[2]]
            args = [np.array([slot[a.args[i]] for a in atoms], dtype=np.intp) for i in range(len(atoms[0].args))]
            self.steps.append((o.np, lo, n, args, key[3] if o.valued else None))
            for p in range(key[0], len(parts)):
                self.ends[p] = len(self.steps)
        self.size = n
        self.outs = [np.array([slot[a] for a in p], dtype=np.intp) for p in parts]

    def __call__(self, X: np.ndarray, p: int = 0) -> np.ndarray:
        """X: [N, n_in]; returns part p, [N, len(part)]."""
        V = np.empty((self.size, X.shape[0]))
        V[:self.n_in] = X.T
        V[self.n_in:self.n_in + len(self.consts)] = self.consts[:, None]
        with np.errstate(all="ignore"):  # NaN/inf are judged by the caller
            for f, lo, hi, args, value in self.steps[:self.ends[p]]:
                if value is not None:
                    V[lo:hi] = f(V[args[0]], value)
                else:
                    f(*(V[i] for i in args), out=V[lo:hi])
        return V[self.outs[p]].T


class Kinematics:
    def __init__(self, eqs: Equations):
        eqs = eqs.nominal()  # parameters at their values
        self.eqs = eqs
        n = len(eqs.q)
        self.n = n
        self.m = len(eqs.phi)
        self.m_nh = len(eqs.nh)
        self.names = [s.value.name for s in eqs.q]
        self.row_names = list(eqs.phi_names) + list(eqs.nh_names)
        pat = eqs.phi_q.pattern
        self._rows = np.array([i for i, _ in pat], dtype=int)
        self._cols = np.array([j for _, j in pat], dtype=int)
        npat = eqs.nh_qd.pattern if eqs.nh else []
        self._nrows = np.array([i for i, _ in npat], dtype=int)
        self._ncols = np.array([j for _, j in npat], dtype=int)
        pos_out = eqs.phi + eqs.phi_q.values() + eqs.beta
        if eqs.nh:
            pos_out = pos_out + eqs.nh_qd.values() + eqs.nh_beta
        self._pos_out = pos_out
        self._acc_out = eqs.gamma + (eqs.nh_gamma if eqs.nh else [])
        self.redundant: list[str] | None = None  # filled in at the first assembled configuration
        self.redundancy_report = ""
        self._fixed_redundant: dict[tuple[int, ...], list[str]] = {}  # the same, per set of fixed coordinates
        self._phi_name_set = set(eqs.phi_names)

    # ---- evaluation ------------------------------------------------------------------------
    # compiled on first use (about 0.1 s for a large model): the batched motion does not need them
    @cached_property
    def _pos(self) -> Compiled:
        return Compiled(self._pos_out, self.eqs.q + [self.eqs.t])

    @cached_property
    def _acc(self) -> Compiled:
        return Compiled(self._acc_out, self.eqs.q + self.eqs.qd + [self.eqs.t])

    def _eval_pos(self, q, t):
        try:
            y = self._pos(np.concatenate([q, [t]]))
        except EvaluationError as e:
            raise AssemblyError(f"{self.eqs.model}: at t={t}: {e}") from None
        m, k = self.m, len(self._rows)
        phi = y[:m]
        J = np.zeros((m + self.m_nh, self.n))
        J[self._rows, self._cols] = y[m:m + k]
        b = y[m + k:m + k + m]
        if self.m_nh:
            o = m + k + m
            kn = len(self._nrows)
            J[m + self._nrows, self._ncols] = y[o:o + kn]
            b = np.concatenate([b, y[o + kn:]])
        return phi, J, b

    def jacobian(self, t: float, q) -> np.ndarray:
        """[Phi_q; C] at (q, t) (holonomic rows, then non-holonomic rows)."""
        return self._eval_pos(np.asarray(q, float), t)[1]

    def residual(self, t: float, q) -> np.ndarray:
        return self._eval_pos(np.asarray(q, float), t)[0]

    def _free(self, fixed) -> tuple[np.ndarray, dict[int, float | None]]:
        fx: dict[int, float | None] = {}
        if fixed:
            items = fixed.items() if isinstance(fixed, dict) else ((k, None) for k in fixed)
            for k, v in items:
                fx[_index_of(self.eqs, k)] = None if v is None else float(v)
        free = np.array([j for j in range(self.n) if j not in fx], dtype=int)
        return free, fx

    # ---- position -----------------------------------------------------------------------------
    def initial(self, t0: float, q0: dict | None = None, qd0: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A consistent (q, qd) at t0 holding the named values {coordinate name: value}:
        positions by Newton from the guesses with the given coordinates fixed, then rates
        with the given ones fixed; no rates given: rest."""
        q0, qd0 = dict(q0 or {}), dict(qd0 or {})
        eqs = self.eqs
        names = [s.value.name for s in eqs.q]
        for flag, given in (("--q0", q0), ("--qd0", qd0)):
            bad = [n for n in given if n not in names]
            if bad:
                raise DynamicsError(f"{flag}: {eqs.model} has no coordinate {', '.join(bad)}; its coordinates: "
                                    f"{', '.join(names)}")
        q = np.array([q0.get(n, eqs.guess.get(s, 0.0)) for n, s in zip(names, eqs.q)], float)
        if q0:
            try:
                q = self.position(t0, q, fixed=list(q0))
            except AssemblyError as e:  # the values given are the likely cause: say so first
                given = ", ".join(f"{n}={v:g}" for n, v in q0.items())
                raise type(e)(f"--q0 {given}: no configuration on the constraints was found that holds it "
                              f"({e})") from None
        qd = self.velocity(t0, q, fixed=qd0) if qd0 else np.zeros(len(names))
        return q, qd

    def position(self, t: float, q0, fixed=None, tol: float = 1e-12, max_iter: int = 50) -> np.ndarray:
        """Solve Phi(q, t) = 0 from q0 by Newton-Raphson with minimum-norm corrections.

        `fixed`: coordinates (symbols or names) held at their q0 values, or {coordinate: value}.
        """
        q = np.array(q0, dtype=float)
        free, fx = self._free(fixed)
        for j, v in fx.items():
            if v is not None:
                q[j] = v
        if self.m == 0:
            return q
        m = self.m
        # LU once this set of free coordinates is known to have no redundant equation (the
        # first call of each set goes through the pseudoinverse, which also works far away)
        key = tuple(sorted(fx))
        known = self.redundant if not fx else self._fixed_redundant.get(key)
        if known is not None and not fx:
            known = [r for r in known if r in self._phi_name_set]
        converged = 0
        for _ in range(max_iter):
            phi, J, _ = self._eval_pos(q, t)
            if not np.all(np.isfinite(phi)):
                break
            if np.max(np.abs(phi)) < tol:
                converged += 1
                if converged == 2:  # one more step after convergence, for full precision
                    break
            Jf = J[:m][:, free]
            f = _Factor(Jf) if known == [] else None
            # the pseudoinverse is the inverse for a square, regular Jacobian: use LU then
            dq = f.solve(phi) if f is not None and f.ok else np.linalg.lstsq(Jf, phi, rcond=1e-12)[0]
            q[free] -= dq
            if converged and np.max(np.abs(dq)) < 1e-15:
                break
        phi, J, _ = self._eval_pos(q, t)
        res = np.max(np.abs(phi)) if phi.size else 0.0
        if not res < tol:
            bad = [f"{self.eqs.phi_names[i]} ({phi[i]:.3g})" for i in np.argsort(-np.abs(phi))[:6]
                   if not abs(phi[i]) < tol]
            raise AssemblyError(f"{self.eqs.model}: position problem at t={t} did not close after "
                                f"{max_iter} iterations; residual {res:.3g} in {', '.join(bad)}")
        if not fx:
            if self.redundant is None:
                self.redundant = self._check_redundancy(J, self.row_names, t)
        elif key not in self._fixed_redundant:
            # velocity constraints do not constrain positions: holonomic rows only, and the
            # finding belongs to this set of fixed coordinates, not to the model
            self._fixed_redundant[key] = self._check_redundancy(
                J[:m][:, free], self.row_names[:m], t,
                f" with {', '.join(self.names[j] for j in sorted(fx))} fixed")
        return q

    def _check_redundancy(self, A: np.ndarray, row_names: list[str], t: float, where: str = "") -> list[str]:
        """The equations that depend on the others at this configuration (warned once per
        model, or once per set of fixed coordinates: `where`)."""
        if A.shape[0] == 0:
            return []
        s = np.linalg.svd(A, compute_uv=False)
        r = _rank(s)
        if r == A.shape[0]:
            return []
        basis = np.zeros((0, A.shape[1]))
        red = []
        for i in range(A.shape[0]):
            trial = np.vstack([basis, A[i]])
            st = np.linalg.svd(trial, compute_uv=False)
            if _rank(st) > basis.shape[0]:
                basis = trial
            else:
                red.append(i)
        U = np.linalg.svd(A)[0]
        group = _names_in(U[:, r:], row_names, limit=12)
        names = [row_names[i] for i in red]
        self.redundancy_report = (
            f"{self.eqs.model}: {len(red)} redundant equation(s) at t={t}{where}: {', '.join(names)} "
            f"(rank {r} of {A.shape[0]}; the dependent set is {group}); the pseudoinverse handles them")
        warnings.warn(self.redundancy_report, RedundantConstraintsWarning, stacklevel=3)
        return names

    # ---- velocity and acceleration --------------------------------------------------------------
    def _solve(self, A: np.ndarray, b: np.ndarray, free: np.ndarray, t: float, what: str,
               factor: "_Factor | None" = None) -> np.ndarray:
        Af = A[:, free]
        if Af.shape[1] == 0:
            return np.zeros(0)
        if factor is not None and factor.ok:
            return factor.solve(b)
        U, s, Vt = np.linalg.svd(Af, full_matrices=True)
        r = _rank(s)
        if r < Af.shape[1]:
            names = [self.names[j] for j in free]
            null = Vt[r:].T
            # redundancy is judged once, at the first assembled configuration (a generic one);
            # a rank lost later with enough independent equations is a singular configuration
            if Af.shape[0] - len(self.redundant or []) >= Af.shape[1]:
                raise SingularJacobianError(
                    f"{self.eqs.model}: singular Jacobian at t={t}: rank {r} for {Af.shape[1]} {what} unknowns; "
                    f"the lost rank lets these coordinates move: {_names_in(null, names)}")
            raise SingularJacobianError(
                f"{self.eqs.model}: the {what} problem at t={t} is underdetermined: rank {r} for "
                f"{Af.shape[1]} unknowns; fix {Af.shape[1] - r} more {what}(s) among {_names_in(null, names)}")
        x = Vt[:r].T @ ((U[:, :r].T @ b) / s[:r])
        res = Af @ x - b
        if np.max(np.abs(res), initial=0.0) > 1e-8 * max(1.0, np.max(np.abs(b), initial=0.0)):
            i = int(np.argmax(np.abs(res)))
            raise AssemblyError(f"{self.eqs.model}: the {what} equations are inconsistent at t={t} "
                                f"(redundant equations that disagree): residual {res[i]:.3g} in {self.row_names[i]}")
        return x

    def velocity(self, t: float, q, fixed=None) -> np.ndarray:
        """Solve [Phi_q; C] qd = [beta; -c]; `fixed` = {coordinate: velocity} held by the user."""
        _, A, b = self._eval_pos(np.asarray(q, float), t)
        return self._with_fixed(A, b, fixed, t, "velocity")

    def acceleration(self, t: float, q, qd, fixed=None) -> np.ndarray:
        """Solve [Phi_q; C] qdd = gamma; `fixed` = {coordinate: acceleration}."""
        q = np.asarray(q, float)
        _, A, _ = self._eval_pos(q, t)
        g = self._gamma(t, q, qd)
        return self._with_fixed(A, g, fixed, t, "acceleration")

    def _gamma(self, t, q, qd):
        try:
            return self._acc(np.concatenate([q, qd, [t]]))
        except EvaluationError as e:
            raise AssemblyError(f"{self.eqs.model}: at t={t}: {e}") from None

    def _with_fixed(self, A, b, fixed, t, what, factor=None):
        """Solve A x = b for the free unknowns, the `fixed` ones given. `factor`: an LU of A,
        reused when nothing is fixed (velocity and acceleration share it)."""
        free, fx = self._free(fixed)
        x = np.zeros(self.n)
        for j, v in fx.items():
            x[j] = 0.0 if v is None else v
        rhs = b - A @ x
        if fx:
            factor = None
        elif factor is None:
            factor = _Factor(A)
        x[free] = self._solve(A, rhs, free, t, what, factor)
        return x

    def motion(self, times, q0=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Q, QD, QDD) along the driven motion: the solutions `motion_sequential` finds,
        to about 1e-15 (not bit for bit: another order of the same operations).

        All times are solved at once (`_motion_batched`) when the model is square (as many
        holonomic equations as coordinates, none non-holonomic) and well conditioned along
        the motion; each solution is then checked to be the one that continuation from its
        predecessor reaches, and anything else (a branch or a turn of an angle away, a
        singular or badly conditioned Jacobian, no convergence) falls back to the
        sequential solver, which also gives the errors their message.

        A batched answer is kept in the disk cache (mbforge.cache), keyed by the equations,
        the times and the start: every generated kernel's verification vectors come from
        here, and `mbforge generate` of a small kernel spent a tenth of its time on them."""
        times = np.asarray(times, dtype=float)
        start = self._start(q0)
        k = cache.key(cache.atoms(self._pos_out), cache.atoms(self._acc_out), repr(self.names), times, start)
        hit = cache.load("motion", k, ("Q", "QD", "QDD"))
        if hit is not None:
            if self.redundant is None:  # as the batched path leaves it: it answers only without redundancy
                self.redundant = []
            return hit["Q"], hit["QD"], hit["QDD"]
        fast = self._motion_batched(times, q0)
        if fast is None:
            return self.motion_sequential(times, q0)
        cache.store("motion", k, Q=fast[0], QD=fast[1], QDD=fast[2])
        return fast

    def _start(self, q0) -> np.ndarray:
        """Where a motion starts: q0, or the model's guess."""
        return np.array([self.eqs.guess.get(s, 0.0) for s in self.eqs.q] if q0 is None else q0, dtype=float)

    # relative to the step between consecutive solutions: a solution farther than this from
    # the continuation's prediction may be another branch (a smooth motion has O(h^3)/O(h))
    CONTINUATION_RATIO = 0.25

    # the batched path answers only where the Jacobian's 1-norm condition is below 1e6
    BATCH_RCOND = 1e-6
    # times solved together: the Jacobians of a batch are held at once (64 x 98 x 98 doubles,
    # 5 MB, for the Stewart platform), whatever the length of the motion
    BATCH = 64

    def _motion_batched(self, times: np.ndarray, q0=None):
        """(Q, QD, QDD) by Newton-Raphson over batches of times at once (grouped numpy
        evaluation, batched LU), each time from the initial guess; None when the fast path
        does not apply or its answer is not certainly the sequential one (see `motion`)."""
        N, n, m = len(times), self.n, self.m
        if N == 0 or m != n or self.m_nh or self.redundant:
            return None
        q = self._start(q0)
        if q.shape != (n,):
            return None
        parts = []
        for lo in range(0, N, self.BATCH):
            part = self._batch_solve(times[lo:lo + self.BATCH], q)
            if part is None:
                return None
            parts.append(part)
            if self.redundant is None:  # as the sequential solver: judged at the first configuration
                # cond_2 <= n cond_1: below 1 / RANK_TOL the SVD would find every row independent
                J0, rcond0 = part[3]
                self.redundant = [] if n < rcond0 / RANK_TOL else self._check_redundancy(
                    J0, self.row_names, float(times[0]))
                if self.redundant:
                    return None
        Q, QD, QDD = (np.concatenate([p[i] for p in parts]) for i in range(3))
        if N > 1:
            h = np.diff(times)[:, None]
            pred = Q[:-1] + h * QD[:-1] + 0.5 * h * h * QDD[:-1]
            err = np.max(np.abs(Q[1:] - pred), axis=1)
            step = np.max(np.abs(Q[1:] - Q[:-1]), axis=1)
            if not np.all(err <= self.CONTINUATION_RATIO * step + 1e-9):
                return None
        return Q, QD, QDD

    def _batch_solve(self, times: np.ndarray, q: np.ndarray):
        """(Q, QD, QDD, (Phi_q, its reciprocal 1-norm condition) at the first time) at `times`, every Newton iteration from q
        at once; None if some time does not converge or has a (nearly) singular Jacobian."""
        ev = self._batch_evaluators()
        N, n, m, k = len(times), self.n, self.m, len(self._rows)
        Q = np.tile(q, (N, 1))
        J = np.zeros((N, m, n))  # the pattern's entries are overwritten at every evaluation
        zero = np.zeros((N, n))  # the position outputs do not read qd

        def evaluate(Q):
            Y = ev(np.column_stack([Q, zero, times]), 0)
            J[:, self._rows, self._cols] = Y[:, m:m + k]
            return Y[:, :m], Y[:, m + k:]

        tol, converged = 1e-12, 0
        with np.errstate(all="ignore"):
            try:
                for _ in range(50):  # as `position`: one more step after convergence
                    F, b = evaluate(Q)
                    if not np.all(np.isfinite(F)):
                        return None
                    if np.max(np.abs(F)) < tol:
                        converged += 1
                        if converged == 2:
                            break
                    Q = Q - np.linalg.solve(J, F[..., None])[..., 0]
                else:
                    return None
                if not np.all(np.isfinite(J)):  # F, J, b: at the final Q
                    return None
                # well conditioned only (reciprocal 1-norm condition, exact here): near a
                # singular configuration two Newton paths stop at visibly different points
                # within the tolerance, and the sequential solver's is the answer; the
                # inverse then solves both the velocity and the acceleration problems
                Ji = np.linalg.inv(J)
                rcond = 1.0 / (np.max(np.sum(np.abs(J), axis=1), axis=1) * np.max(np.sum(np.abs(Ji), axis=1), axis=1))
                if not np.all(rcond > self.BATCH_RCOND):
                    return None
                QD = np.einsum("kij,kj->ki", Ji, b)
                QDD = np.einsum("kij,kj->ki", Ji, ev(np.column_stack([Q, QD, times]), 1))
            except np.linalg.LinAlgError:
                return None
        if not (np.all(np.isfinite(QD)) and np.all(np.isfinite(QDD))):
            return None
        return Q, QD, QDD, (J[0].copy(), float(rcond[0]))

    def _batch_evaluators(self):
        """One evaluator over batches of (q, qd, t): part 0 the position outputs (phi, the
        Jacobian's entries, beta: functions of q and t), part 1 gamma; built once."""
        if getattr(self, "_batch", None) is None:
            self._batch = _Batched([self._pos_out, self._acc_out], self.eqs.q + self.eqs.qd + [self.eqs.t])
        return self._batch

    def motion_sequential(self, times, q0=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Q, QD, QDD) along the driven motion, continuing each solution from the last
        (Newton starts from the second-order prediction q + qd dt + qdd dt^2 / 2)."""
        q = self._start(q0)
        Q, QD, QDD = [], [], []
        t_prev = None
        for t in times:
            t = float(t)
            if t_prev is not None:
                h = t - t_prev
                q = q + h * qd + 0.5 * h * h * qdd
            q = self.position(t, q)
            _, A, b = self._eval_pos(q, t)
            f = _Factor(A)
            qd = self._with_fixed(A, b, None, t, "velocity", f)
            qdd = self._with_fixed(A, self._gamma(t, q, qd), None, t, "acceleration", f)
            Q.append(q)
            QD.append(qd)
            QDD.append(qdd)
            t_prev = t
        return np.array(Q), np.array(QD), np.array(QDD)

    def residual_norms(self, T, Q, QD) -> tuple[np.ndarray, np.ndarray]:
        """Along (t, q, qd) samples: |Phi(q, t)| and |A qd - b| (2-norms; A qd - b is Phi_q qd +
        Phi_t, then the velocity constraints' C qd + c)."""
        pn, vn = [], []
        for t, q, qd in zip(T, Q, QD):
            phi, A, b = self._eval_pos(np.asarray(q, float), float(t))
            pn.append(float(np.linalg.norm(phi)))
            vn.append(float(np.linalg.norm(A @ np.asarray(qd, float) - b)) if A.shape[0] else 0.0)
        return np.array(pn), np.array(vn)

    def outputs(self, T, Q, QD) -> dict[str, np.ndarray]:
        """The model's named outputs along (t, q, qd) samples."""
        if not self.eqs.outputs:
            return {}
        f = Compiled(list(self.eqs.outputs.values()), self.eqs.q + self.eqs.qd + [self.eqs.t])
        Y = np.array([f(np.concatenate([q, qd, [t]])) for t, q, qd in zip(T, Q, QD)])
        return {k: Y[:, i] for i, k in enumerate(self.eqs.outputs)}


@dataclass
class Trajectory:
    """A forward-dynamics result. residual: max |Phi| over the output points *before* each
    projection (what the integrator alone kept); vresidual the same for A qd - b."""

    t: np.ndarray
    Q: np.ndarray
    QD: np.ndarray
    residual: float
    vresidual: float
    E: np.ndarray | None = None
    T: np.ndarray | None = None
    drift: float | None = None  # max |E - E0 - W| / max T: the error of the energy balance
    drift_abs: float | None = None  # max |E - E0 - W|
    stats: dict = field(default_factory=dict)
    # W: the work done since t0 by the non-conservative forces, the actuators and the drivers
    # (None when the run has none: then E is a first integral and drift is the plain drift)
    W: np.ndarray | None = None
    # per output time, the norms |Phi| and |A qd - b| (= |Phi_q qd + Phi_t|, with the velocity
    # constraints' rows) before that time's projection (0 at t0: the start is projected)
    phi_norm: np.ndarray | None = None
    vel_norm: np.ndarray | None = None

    @property
    def balance(self) -> bool:
        """True when the energy report is a balance (E - E0 against W), False when the plain
        drift of a conservative run."""
        return self.W is not None

    def energy_report(self) -> str:
        """One line for the energy: the plain drift of a conservative run, or the residual of
        the balance E - E0 = W of a run with work done on the system."""
        if self.drift is None:
            return ""
        if self.W is None:
            return f"energy drift {self.drift:.2e} of max T"
        dE = float(self.E[-1] - self.E[0])
        return (f"energy balance residual {self.drift:.2e} of max T (T + V changed by {dE:.6g}, the work of "
                f"non-conservative forces, actuators and drivers {float(self.W[-1]):.6g})")


def _grid(t0: float, t_end: float, dt: float, model: str) -> np.ndarray:
    """The output times of `forward`: t0 + k dt for every k with t0 + k dt <= t_end, then
    t_end itself unless it is one of them (within 1e-9 dt)."""
    if not (np.isfinite(dt) and dt > 0):
        raise DynamicsError(f"{model}: the output interval dt must be positive, got {dt}")
    if not t_end >= t0:
        raise DynamicsError(f"{model}: the end time {t_end} is before the start time {t0}")
    k = int(np.floor((t_end - t0) / dt + 1e-9))
    times = t0 + dt * np.arange(k + 1)
    if t_end - times[-1] > 1e-9 * dt:
        times = np.append(times, t_end)
    else:
        times[-1] = t_end
    return times


class Dynamics(Kinematics):
    def __init__(self, eqs: Equations):
        super().__init__(eqs)
        eqs = self.eqs
        if eqs.M is None or eqs.Q is None:
            raise DynamicsError(f"{eqs.model}: the model has no inertia (no body has mass): "
                                "dynamics needs M and Q")
        n = self.n
        self._Mpat = eqs.M.pattern
        self._Mi = np.array([i for i, _ in self._Mpat], dtype=int)
        self._Mj = np.array([j for _, j in self._Mpat], dtype=int)
        self._Bpat = eqs.B.pattern
        self._Bi = np.array([i for i, _ in self._Bpat], dtype=int)
        self._Bj = np.array([j for _, j in self._Bpat], dtype=int)
        self.n_act = len(eqs.actuator_names)
        inputs = eqs.q + eqs.qd + [eqs.t]
        self._dyn = Compiled(eqs.M.values() + list(eqs.Q) + eqs.B.values(), inputs)
        self._energy = Compiled([eqs.T, eqs.V], inputs) if eqs.T is not None else None
        self._power = None  # built when a run needs the energy balance
        # inverse dynamics: the kinematic rows when there are actuators, else every row
        self.inverse_rows = eqs.kinematic_rows if self.n_act else list(range(self.m))
        self.inverse_names = ([eqs.phi_names[i] for i in self.inverse_rows] + list(eqs.nh_names))
        self._n = n

    def _eval_dyn(self, t, q, qd):
        try:
            y = self._dyn(np.concatenate([q, qd, [t]]))
        except EvaluationError as e:
            raise DynamicsError(f"{self.eqs.model}: at t={t}: {e}") from None
        n, k = self.n, len(self._Mi)
        M = np.zeros((n, n))
        M[self._Mi, self._Mj] = y[:k]
        Q = y[k:k + n]
        B = np.zeros((n, self.n_act))
        B[self._Bi, self._Bj] = y[k + n:]
        return M, Q, B

    def mass_matrix(self, t, q, qd=None):
        return self._eval_dyn(t, np.asarray(q, float), np.zeros(self.n) if qd is None else np.asarray(qd, float))

    # ---- inverse dynamics ---------------------------------------------------------------------
    def inverse(self, t: float, q, qd, qdd) -> tuple[np.ndarray, np.ndarray]:
        """(u, lam): actuator forces and the multipliers of `inverse_rows` (then the
        non-holonomic rows) with [Phi_q^T, C^T, -B] [lam; u] = Q - M qdd."""
        q, qd, qdd = (np.asarray(x, float) for x in (q, qd, qdd))
        M, Q, B = self._eval_dyn(t, q, qd)
        _, A, _ = self._eval_pos(q, t)
        rows = list(self.inverse_rows) + list(range(self.m, self.m + self.m_nh))
        G = np.hstack([A[rows].T, -B])
        rhs = Q - M @ qdd
        f = _Factor(G)
        if f.ok:  # square and regular: every multiplier and actuator force is determined
            x = f.solve(rhs)
            return x[len(rows):], x[:len(rows)]
        U, s, Vt = np.linalg.svd(G)  # full: Vt[r:] spans the null space even when G is wide
        r = _rank(s)
        x = Vt[:r].T @ ((U[:, :r].T @ rhs) / s[:r]) if r else np.zeros(G.shape[1])
        if r < G.shape[1] and self.n_act:
            null = Vt[r:].T
            act = null[len(rows):]
            if np.max(np.abs(act), initial=0.0) > 1e-6:
                raise DynamicsError(
                    f"{self.eqs.model}: at t={t} the actuator forces are not determined: "
                    f"{_names_in(act, self.eqs.actuator_names)} can be traded against constraint reactions")
        res = G @ x - rhs
        scale = max(1.0, np.max(np.abs(rhs)), np.max(np.abs(G @ np.abs(x)), initial=0.0))
        if np.max(np.abs(res), initial=0.0) > 1e-8 * scale:
            raise DynamicsError(
                f"{self.eqs.model}: at t={t} the actuators and constraint reactions cannot produce this motion: "
                f"residual {np.max(np.abs(res)):.3g}, largest in coordinates {_names_in(res[:, None], self.names)}")
        return x[len(rows):], x[:len(rows)]

    def inverse_motion(self, times, q0=None) -> dict[str, np.ndarray]:
        """Kinematic simulation then inverse dynamics at each time: t, Q, QD, QDD, U, LAM."""
        Q, QD, QDD = self.motion(times, q0)
        U, LAM = [], []
        for t, q, qd, qdd in zip(times, Q, QD, QDD):
            u, lam = self.inverse(float(t), q, qd, qdd)
            U.append(u)
            LAM.append(lam)
        return {"t": np.asarray(times, float), "Q": Q, "QD": QD, "QDD": QDD, "U": np.array(U), "LAM": np.array(LAM)}

    # ---- forward dynamics ---------------------------------------------------------------------
    def _u(self, u, t, q, qd):
        if self.n_act == 0:
            return np.zeros(0)
        if u is None:
            return np.zeros(self.n_act)
        v = u(t, q, qd) if callable(u) else u
        return np.broadcast_to(np.asarray(v, float), (self.n_act,))

    def accelerations(self, t, q, qd, u=None) -> tuple[np.ndarray, np.ndarray]:
        """(qdd, lambda) of [M A^T; A 0] [qdd; lambda] = [Q + B u; g]."""
        M, Q, B = self._eval_dyn(t, q, qd)
        _, A, _ = self._eval_pos(q, t)
        g = self._gamma(t, q, qd)
        n, m = self.n, A.shape[0]
        K = np.zeros((n + m, n + m))
        K[:n, :n] = M
        K[:n, n:] = A.T
        K[n:, :n] = A
        rhs = np.concatenate([Q + B @ self._u(u, t, q, qd), g])
        f = _Factor(K)
        # redundant constraints make K singular (in lambda only): minimum-norm multipliers then
        x = f.solve(rhs) if f.ok else np.linalg.lstsq(K, rhs, rcond=1e-12)[0]
        return x[:n], x[n:]

    def check_inertia(self, t, q, qd) -> None:
        """Raise DynamicsError if some accelerations are determined neither by inertia nor by
        the constraints (null space of [M; A])."""
        M, _, _ = self._eval_dyn(t, q, qd)
        _, A, _ = self._eval_pos(q, t)
        sM = max(np.max(np.abs(M)), 1e-300)
        sA = max(np.max(np.abs(A), initial=0.0), 1e-300)
        S = np.vstack([M / sM, A / sA])
        _, s, Vt = np.linalg.svd(S)
        r = _rank(s)
        if r < self.n:
            raise DynamicsError(
                f"{self.eqs.model}: missing inertia: at t={t} the accelerations of "
                f"{_names_in(Vt[r:].T, self.names)} are set neither by a mass nor by a constraint; "
                "give the bodies that move them mass and inertia")

    def project(self, t: float, q, qd) -> tuple[np.ndarray, np.ndarray]:
        """The nearest consistent state: Newton onto Phi = 0, then the minimum-norm velocity
        correction onto A qd = b."""
        q = self.position(t, q)
        _, A, b = self._eval_pos(q, t)
        if A.shape[0]:
            qd = qd - np.linalg.lstsq(A, A @ qd - b, rcond=1e-12)[0]
        return q, qd

    def energy(self, t: float, q, qd) -> tuple[float, float]:
        if self._energy is None:
            raise DynamicsError(f"{self.eqs.model}: the model has no energy expressions")
        T, V = self._energy(np.concatenate([q, qd, [t]]))
        return float(T), float(V)

    def _works(self, u) -> bool:
        """Whether T + V can change along a run: non-conservative forces, actuators that act,
        drivers or anything else that depends on time."""
        eqs = self.eqs
        if self._energy is None:
            return False
        tdep = 0
        for a in list(eqs.phi) + list(eqs.nh) + list(eqs.Q) + [eqs.T, eqs.V]:
            tdep |= a.mask
        return (not eqs.conservative or (self.n_act > 0 and u is not None)
                or bool(tdep & eqs.t.mask))

    def power(self, t: float, q, qd, u=None) -> float:
        """The power of the non-conservative forces, actuators and drivers, dE/dt with
        E = T + V. From M qdd = Q + B u - A^T lambda and A qd = b:
            dE/dt = qd.(Q + B u) + E_q.qd + E_t - lambda.b
        where qd.Q + E_q.qd leaves only the non-conservative applied forces (gravity and
        springs cancel their potential, the velocity terms of Q the change of T through q)
        and -lambda.b is the power of the rheonomic constraints (drivers)."""
        eqs = self.eqs
        if self._power is None:
            from ..ir import add, diff, jacobian, mul

            E = add(eqs.T, eqs.V)
            p = diff(E, eqs.t)
            for (_, j), a in jacobian([E], eqs.q).entries.items():
                p = add(p, mul(a, eqs.qd[j]))
            for j, a in enumerate(eqs.Q):
                p = add(p, mul(a, eqs.qd[j]))
            self._power = Compiled([p], eqs.q + eqs.qd + [eqs.t])
        q, qd = np.asarray(q, float), np.asarray(qd, float)
        P = float(self._power(np.concatenate([q, qd, [t]]))[0])
        if self.n_act:
            _, _, B = self._eval_dyn(t, q, qd)
            P += float(qd @ (B @ self._u(u, t, q, qd)))
        if self.m + self.m_nh:
            _, lam = self.accelerations(t, q, qd, u)
            _, _, b = self._eval_pos(q, t)
            P -= float(lam @ b)
        return P

    def _work(self, sol, u) -> float:
        """The integral of `power` over one segment of solve_ivp, by 5-point Gauss-Legendre on
        each of its steps over the dense output (exact to the integrator's accuracy)."""
        x, w = np.polynomial.legendre.leggauss(5)
        n = self.n
        W = 0.0
        for a, b in zip(sol.t[:-1], sol.t[1:]):
            h = 0.5 * (b - a)
            for xi, wi in zip(x, w):
                tk = a + h * (xi + 1.0)
                y = sol.sol(tk)
                W += wi * h * self.power(tk, y[:n], y[n:], u)
        return W

    def forward(self, t_end: float, q0=None, qd0=None, t0: float = 0.0, u=None, dt: float = 0.02,
                rtol: float = 1e-10, atol: float = 1e-12, method: str = "DOP853", progress=None,
                stop=None) -> Trajectory:
        """Integrate from (q0, qd0) at t0 to t_end; the state is projected onto the constraints
        at every output time. The output times are t0 + k dt for every k with t0 + k dt <=
        t_end, then t_end itself when it is not one of them. u: actuator forces (array or
        callable (t, q, qd)).

        The energy: E = T + V at the output times; when work is done on the system (non-
        conservative forces, actuators with u given, drivers or time-dependent terms) W is
        the work since t0 (the integral of `power`) and `drift` is the residual of the
        balance max |E - E0 - W| / max T; otherwise `drift` is the plain max |E - E0| / max T.
        `progress`: called with the number of output intervals done (a progress bar).
        `stop(t, q, qd)`: the run ends before the first output time where it is true."""
        n = self.n
        q = self._start(q0)
        qd = np.zeros(n) if qd0 is None else np.array(qd0, float)
        q, qd = self.project(t0, q, qd)
        self.check_inertia(t0, q, qd)
        nfev = 0

        def rhs(t, y):
            nonlocal nfev
            nfev += 1
            qdd, _ = self.accelerations(t, y[:n], y[n:], u)
            return np.concatenate([y[n:], qdd])

        times = _grid(t0, t_end, dt, self.eqs.model)
        T_, Q, QD = [t0], [q], [qd]
        res = vres = 0.0
        pn, vn = self.residual_norms([t0], [q], [qd])
        pn, vn = list(pn), list(vn)
        y = np.concatenate([q, qd])
        h = None
        works = self._works(u)
        W = [0.0]
        for a, b in zip(times[:-1], times[1:]):
            sol, h = self._interval(rhs, a, b, y, h, method, rtol, atol, works)
            qe, qde = sol.y[:n, -1], sol.y[n:, -1]
            r, vr, p_norm, v_norm = self._end_residuals(b, qe, qde)
            res, vres = max(res, r), max(vres, vr)
            pn.append(p_norm)
            vn.append(v_norm)
            if works:
                W.append(W[-1] + self._work(sol, u))
            qe, qde = self.project(b, qe, qde)
            if stop is not None and stop(b, qe, qde):
                pn.pop()
                vn.pop()
                if works:
                    W.pop()
                break
            y = np.concatenate([qe, qde])
            T_.append(b)
            Q.append(qe)
            QD.append(qde)
            if progress is not None:
                progress(len(T_) - 1)
        traj = Trajectory(t=np.array(T_), Q=np.array(Q), QD=np.array(QD), residual=res, vresidual=vres,
                          stats={"nfev": nfev, "segments": len(times) - 1}, phi_norm=np.array(pn),
                          vel_norm=np.array(vn))
        if self._energy is not None:
            self._energy_balance(traj, W if works else None)
        return traj

    def _interval(self, rhs, a: float, b: float, y, h, method: str, rtol: float, atol: float, dense: bool):
        """(solve_ivp's solution from a to b starting at y with first step h, the last step
        it took, for the next interval's first); DynamicsError when it fails."""
        from scipy.integrate import solve_ivp

        sol = solve_ivp(rhs, (a, b), y, method=method, rtol=rtol, atol=atol,
                        first_step=None if h is None else min(h, b - a), dense_output=dense)
        if not sol.success:
            raise DynamicsError(f"{self.eqs.model}: integration failed at t={sol.t[-1]}: {sol.message}")
        if len(sol.t) > 1:
            h = (sol.t[-1] - sol.t[-2]) or None
        return sol, h

    def _end_residuals(self, t: float, q, qd) -> tuple[float, float, float, float]:
        """(max |Phi|, max |A qd - b|, |Phi|, |A qd - b|) at the end of an interval, before
        it is projected (0 for the velocity terms without velocity constraints)."""
        phi, A, bb = self._eval_pos(q, t)
        res = float(np.max(np.abs(phi), initial=0.0))
        vres = float(np.max(np.abs(A @ qd - bb))) if A.shape[0] else 0.0
        vn = float(np.linalg.norm(A @ qd - bb)) if A.shape[0] else 0.0
        return res, vres, float(np.linalg.norm(phi)), vn

    def _energy_balance(self, traj: Trajectory, W) -> None:
        """traj's T, E, W and drift: the residual of the balance E - E0 = W when work is done
        (W the work at the output times), else the plain drift of E."""
        ev = np.array([self.energy(t, q_, qd_) for t, q_, qd_ in zip(traj.t, traj.Q, traj.QD)])
        traj.T = ev[:, 0]
        traj.E = ev[:, 0] + ev[:, 1]
        traj.W = None if W is None else np.array(W)
        traj.drift_abs = float(np.max(np.abs(traj.E - traj.E[0] - (traj.W if W is not None else 0.0))))
        scale = float(np.max(traj.T))
        traj.drift = traj.drift_abs / scale if scale > 0 else traj.drift_abs
