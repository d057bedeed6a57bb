"""Linearization of the forward dynamics about a consistent operating point.

    lin = mbforge.linearize(model, q={"x": 0.0, "theta": math.pi}, u=[0.0])
    lin.A, lin.B, lin.C, lin.D          # dx/dt = A dx + B du,  dy = C dx + D du

The state is x = (z, w) in independent coordinates: z are n - rank(Phi_q) of the
coordinates (the positions the holonomic constraints leave free), w are n - rank([Phi_q; C])
of the velocities (fewer than z for a non-holonomic model: a rolling body has more free
positions than free velocities). The dependent coordinates follow from Phi(q, t) = 0 and
the dependent velocities from Phi_q qd = beta, C qd = -c, so the reduced system is
    dz/dt = qd[z](q(z), w),   dw/dt = qdd[w](q(z), qd(q(z), w), u)
with qdd from [M A^T; A 0] [qdd; lambda] = [Q + B u; gamma], A = [Phi_q; C].

Invariants:
* The derivatives come from the atomized equations: d/dq and d/dqd of M, Q, B, A = [Phi_q;
  C], gamma, beta and the outputs by mbforge.ir's `jacobian`, evaluated at the point; the
  solves are differentiated implicitly (K d[qdd; lambda] = -dF). No finite differences.
* The operating point is made consistent as Dynamics.position / velocity(fixed=...) do:
  the given coordinates (velocities) are held, the others solved for. It need not be an
  equilibrium: `xdot` is the state derivative there (the affine term of the model).
* Driving constraints are kept (then the model is linearized at the time `t`, frozen) or
  left out when the model has actuators (they take the drivers' place, as in the
  forward-dynamics kernel): `drivers=`.
* Parameters are at their values (the reference solvers' `nominal` equations).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .numeric import Compiled
from .solvers import Dynamics, _Factor, _rank


class LinearizationError(ValueError):
    """An operating point or a choice of independent coordinates that cannot be used."""


@dataclass
class Linearization:
    """The linear model dx/dt = A dx + B du, dy = C dx + D du about the operating point.

    state: names of x (the independent coordinates, then the independent velocities name_d);
    inputs: the actuator names (columns of B); outputs: the model's output names (rows of C),
    C and D are None when the model declares no outputs. q, qd, qdd, lam, u, t: the full
    consistent operating point; xdot: dx/dt there (zero at an equilibrium)."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray | None
    D: np.ndarray | None
    state: list[str]
    inputs: list[str]
    outputs: list[str]
    coordinates: list[str]
    velocities: list[str]
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    lam: np.ndarray
    u: np.ndarray
    t: float
    xdot: np.ndarray
    extra: dict = field(default_factory=dict)

    @property
    def is_equilibrium(self) -> bool:
        return bool(np.max(np.abs(self.xdot), initial=0.0) < 1e-9)


DRIVERS = ("auto", "keep", "drop")


def _without_drivers(eqs):
    """The equations with the driving constraints left out (the actuators take their
    place, as in the forward-dynamics kernel)."""
    import dataclasses

    rows = eqs.kinematic_rows
    return dataclasses.replace(eqs, phi=[eqs.phi[i] for i in rows], phi_names=[eqs.phi_names[i] for i in rows],
                               driving=[False] * len(rows), _phi_q=None, _phi_t=None, _gamma=None,
                               _explicit_rates=None)


class Linearizer:
    """The derivative atoms of one model's equations, compiled once; `at(...)` linearizes
    about an operating point."""

    def __init__(self, model_or_equations, drivers: str = "auto"):
        eqs = model_or_equations.equations() if hasattr(model_or_equations, "equations") else model_or_equations
        if drivers not in DRIVERS:
            raise LinearizationError(f"{eqs.model}: drivers={drivers!r}: must be one of {', '.join(DRIVERS)}")
        if drivers == "auto":
            drivers = "drop" if eqs.actuator_names else "keep"
        self.drivers = drivers
        if drivers == "drop" and any(eqs.driving):
            eqs = _without_drivers(eqs)
        self.dyn = dyn = Dynamics(eqs)  # raises for a model without inertia
        eqs = dyn.eqs  # nominal
        self.eqs = eqs
        from ..ir import jacobian

        q, qd = eqs.q, eqs.qd
        self.n, self.m, self.m_nh, self.n_act = dyn.n, dyn.m, dyn.m_nh, dyn.n_act
        A_vals = eqs.phi_q.values() + (eqs.nh_qd.values() if eqs.nh else [])
        self._A_pat = list(eqs.phi_q.pattern) + ([(self.m + i, j) for i, j in eqs.nh_qd.pattern] if eqs.nh else [])
        g = list(eqs.gamma) + (list(eqs.nh_gamma) if eqs.nh else [])
        b = list(eqs.beta) + (list(eqs.nh_beta) if eqs.nh else [])
        self.outputs = list(eqs.outputs)
        h = list(eqs.outputs.values())
        # every derivative the implicit differentiation needs, as sparse Jacobians of atoms
        jacs = {
            "dM": jacobian(eqs.M.values(), q),
            "dA": jacobian(A_vals, q),
            "dB": jacobian(eqs.B.values(), q),
            "dBd": jacobian(eqs.B.values(), qd),
            "dQ": jacobian(eqs.Q, q),
            "dQd": jacobian(eqs.Q, qd),
            "dg": jacobian(g, q),
            "dgd": jacobian(g, qd),
            "db": jacobian(b, q),
            "dh": jacobian(h, q),
            "dhd": jacobian(h, qd),
        }
        self._layout = {}
        atoms = []
        for k, S in jacs.items():
            self._layout[k] = (len(atoms), list(S.pattern))
            atoms += S.values()
        self._f = Compiled(atoms, q + qd + [eqs.t])
        self._M_pat = list(eqs.M.pattern)
        self._B_pat = list(eqs.B.pattern)
        self._n_g = len(g)
        self._n_h = len(h)

    def _sparse(self, y, key, rows, cols):
        """The Jacobian `key` evaluated (y) as a dense (rows x cols) array."""
        o, pat = self._layout[key]
        X = np.zeros((rows, cols))
        for k, (i, j) in enumerate(pat):
            X[i, j] = y[o + k]
        return X

    def _tensor(self, y, key, pattern, shape):
        """d(matrix)/dq as a dense (rows, cols, n) array from the Jacobian of its pattern values."""
        o, pat = self._layout[key]
        X = np.zeros(shape + (self.n,))
        for k, (e, j) in enumerate(pat):
            r, c = pattern[e]
            X[r, c, j] = y[o + k]
        return X

    # ---- choice of independent coordinates ------------------------------------------------------
    def _names_to_index(self, names, what) -> list[int]:
        out = []
        for k in names:
            try:
                from .solvers import _index_of

                out.append(_index_of(self.eqs, k))
            except KeyError as e:
                msg = str(e.args[0]).removeprefix(f"{self.eqs.model}: ")
                raise LinearizationError(f"{self.eqs.model}: {what}: {msg}") from None
        if len(set(out)) != len(out):
            raise LinearizationError(f"{self.eqs.model}: {what} names a coordinate twice")
        return out

    def _split(self, J: np.ndarray, cols: list[int], given, what: str) -> tuple[list[int], list[int]]:
        """(independent, dependent) among `cols` for the rows J: the dependent ones a regular
        (best-conditioned, by QR with column pivoting) set of rank(J) columns."""
        from scipy.linalg import qr

        names = [self.dyn.names[j] for j in cols]
        if J.shape[0] == 0 or not cols:
            r, piv = 0, np.arange(len(cols))
        else:
            _, R, piv = qr(J[:, cols], pivoting=True, mode="economic")
            s = np.abs(np.diag(R))
            r = int(np.sum(s > 1e-9 * s[0])) if s.size and s[0] > 0 else 0
        need = len(cols) - r
        if given is None:
            dep = sorted(cols[p] for p in piv[:r])
            return [j for j in cols if j not in dep], dep
        ind = self._names_to_index(given, what)
        outside = [self.dyn.names[j] for j in ind if j not in cols]
        if outside:
            raise LinearizationError(f"{self.eqs.model}: {what}: {', '.join(outside)} cannot be chosen here "
                                     f"(choose among {', '.join(names)})")
        if len(ind) != need:
            raise LinearizationError(f"{self.eqs.model}: {what}: the model has {need} here, "
                                     f"{len(ind)} given ({', '.join(self.dyn.names[j] for j in ind)})")
        dep = [j for j in cols if j not in ind]
        if dep and _rank(np.linalg.svd(J[:, dep], compute_uv=False)) < len(dep):
            raise LinearizationError(f"{self.eqs.model}: {what}: with {', '.join(self.dyn.names[j] for j in ind)} "
                                     "independent the others are not determined at this point (the constraint "
                                     "Jacobian of the others is singular): choose other coordinates")
        return [j for j in cols if j in ind], dep

    # ---- the operating point ---------------------------------------------------------------------
    def _vector(self, v, names, what) -> np.ndarray:
        if isinstance(v, dict):
            x = np.zeros(len(names))
            for k, val in v.items():
                if k not in names:
                    raise LinearizationError(f"{self.eqs.model}: no {what} called {k!r} (the model's: "
                                             f"{', '.join(names) or 'none'})")
                x[names.index(k)] = float(val)
            return x
        x = np.broadcast_to(np.asarray(v, float), (len(names),)) if np.ndim(v) == 0 else np.asarray(v, float)
        if x.shape != (len(names),):
            raise LinearizationError(f"{self.eqs.model}: {what}: {len(names)} values expected, got {x.size}")
        return np.array(x, float)

    def at(self, q=None, qd=None, u=None, t: float = 0.0, coordinates=None, velocities=None) -> Linearization:
        """The Linearization about the operating point (see linearize for the arguments)."""
        dyn, eqs, n = self.dyn, self.eqs, self.n
        t = float(t)
        for what, given in (("q", q), ("qd", qd)):
            if isinstance(given, dict):
                self._names_to_index(list(given), what)  # one clear error for an unknown name
        qpos = self._positions(q, t)
        _, Afull, bvec = dyn._eval_pos(qpos, t)
        ip, Tq, iv, dv = self._independent(Afull, coordinates, velocities)
        qdv = self._velocities(qd, t, qpos, iv, Afull, bvec)
        uv = np.zeros(self.n_act) if u is None else self._vector(u, list(eqs.actuator_names), "actuator")
        qdd, lam = dyn.accelerations(t, qpos, qdv, uv)

        # ---- derivatives at the point --------------------------------------------------------
        y = self._f(np.concatenate([qpos, qdv, [t]]))
        dA = self._tensor(y, "dA", self._A_pat, (Afull.shape[0], n))
        f_q, f_qd, f_u = self._responses(y, dA, t, qpos, qdv, qdd, lam, uv, Afull)
        # the velocity map qd(q, w): A qd = b with qd[iv] = w
        V = np.zeros((n, len(iv)))
        V[iv, np.arange(len(iv))] = 1.0
        G = np.zeros((n, len(ip)))  # d qd / d z at fixed w
        if dv:
            V[dv] = np.linalg.lstsq(Afull[:, dv], -Afull[:, iv], rcond=1e-12)[0]
            Dq = self._sparse(y, "db", Afull.shape[0], n) - np.einsum("rcj,c->rj", dA, qdv)
            G[dv] = np.linalg.lstsq(Afull[:, dv], Dq @ Tq, rcond=1e-12)[0]
        A, B, C, D = self._matrices(y, ip, iv, Tq, V, G, f_q, f_qd, f_u)
        names = dyn.names
        return Linearization(
            A=A, B=B, C=C, D=D, state=[names[j] for j in ip] + [names[j] + "_d" for j in iv],
            inputs=list(eqs.actuator_names), outputs=list(self.outputs),
            coordinates=[names[j] for j in ip], velocities=[names[j] + "_d" for j in iv],
            q=qpos, qd=qdv, qdd=qdd, lam=lam, u=uv, t=t,
            xdot=np.concatenate([qdv[ip], qdd[iv]]),
            extra={"position_map": Tq, "velocity_map": V})

    def _positions(self, q, t: float) -> np.ndarray:
        """Consistent coordinates: a mapping holds the given coordinates (the others from the
        model's guess), a full vector is a starting point projected onto the constraints."""
        dyn, eqs = self.dyn, self.eqs
        q0 = np.array([eqs.guess.get(s, 0.0) for s in eqs.q])
        if isinstance(q, dict):
            return dyn.position(t, q0, fixed={k: float(v) for k, v in q.items()})
        return dyn.position(t, q0 if q is None else self._vector(q, dyn.names, "q"))

    def _independent(self, Afull: np.ndarray, coordinates, velocities):
        """(ip, Tq = dq/dz, iv, dv): the independent coordinates, the position map, the independent
        and dependent velocities (rates of independent coordinates unless named)."""
        n, m, dyn = self.n, self.m, self.dyn
        Phi_q, Cnh = Afull[:m], Afull[m:]
        ip, dp = self._split(Phi_q, list(range(n)), coordinates, "independent coordinates")
        Tq = np.zeros((n, len(ip)))
        Tq[ip, np.arange(len(ip))] = 1.0
        if dp:
            Tq[dp] = np.linalg.lstsq(Phi_q[:, dp], -Phi_q[:, ip], rcond=1e-12)[0]
        # velocities: the non-holonomic rows in the rates of the independent coordinates
        iv, _ = self._split(Cnh @ Tq, list(range(len(ip))), None, "independent velocities")
        iv = [ip[k] for k in iv]
        if velocities is not None:
            iv_given = self._names_to_index([v[:-2] if isinstance(v, str) and v.endswith("_d") and v not in dyn.names
                                             else v for v in velocities], "independent velocities")
            iv, _ = self._split(Afull, list(range(n)), [dyn.names[j] for j in iv_given], "independent velocities")
        dv = [j for j in range(n) if j not in iv]
        return ip, Tq, iv, dv

    def _velocities(self, qd, t: float, qpos, iv, Afull: np.ndarray, bvec) -> np.ndarray:
        """Consistent velocities: a mapping holds the given ones, None is rest in the independent
        velocities (drivers still move), a full vector is replaced by the nearest consistent one."""
        dyn = self.dyn
        if isinstance(qd, dict):
            return dyn.velocity(t, qpos, fixed={k: float(v) for k, v in qd.items()})
        if qd is None:
            return dyn.velocity(t, qpos, fixed={dyn.names[j]: 0.0 for j in iv})
        qdv = self._vector(qd, dyn.names, "qd")
        if Afull.shape[0]:
            qdv = qdv - np.linalg.lstsq(Afull, Afull @ qdv - bvec, rcond=1e-12)[0]
        return qdv

    def _responses(self, y, dA, t: float, qpos, qdv, qdd, lam, uv, Afull: np.ndarray):
        """(f_q, f_qd, f_u): the derivatives of qdd by implicit differentiation of
        F(q, qd, u; qdd, lambda) = [M qdd + A^T lambda - Q - B u; A qdd - gamma] = 0."""
        n, nA = self.n, Afull.shape[0]
        M, _, Bm = self.dyn._eval_dyn(t, qpos, qdv)
        dM = self._tensor(y, "dM", self._M_pat, (n, n))
        dB = self._tensor(y, "dB", self._B_pat, (n, self.n_act))
        dBd = self._tensor(y, "dBd", self._B_pat, (n, self.n_act))
        dQ = self._sparse(y, "dQ", n, n)
        dQd = self._sparse(y, "dQd", n, n)
        dg = self._sparse(y, "dg", nA, n)
        dgd = self._sparse(y, "dgd", nA, n)
        Fq = np.vstack([np.einsum("ilj,l->ij", dM, qdd) + np.einsum("rij,r->ij", dA, lam) - dQ
                        - np.einsum("iaj,a->ij", dB, uv),
                        np.einsum("rcj,c->rj", dA, qdd) - dg])
        Fqd = np.vstack([-dQd - np.einsum("iaj,a->ij", dBd, uv), -dgd])
        Fu = np.vstack([-Bm, np.zeros((nA, self.n_act))])
        K = np.zeros((n + nA, n + nA))
        K[:n, :n], K[:n, n:], K[n:, :n] = M, Afull.T, Afull
        rhs = -np.hstack([Fq, Fqd, Fu])
        fk = _Factor(K)
        X = fk.solve(rhs) if fk.ok else np.linalg.lstsq(K, rhs, rcond=1e-12)[0]
        return X[:n, :n], X[:n, n:2 * n], X[:n, 2 * n:]

    def _matrices(self, y, ip, iv, Tq, V, G, f_q, f_qd, f_u):
        """(A, B, C, D) in the state (z, w); C, D None when the model has no outputs."""
        n, nz, nw = self.n, len(ip), len(iv)
        A = np.zeros((nz + nw, nz + nw))
        A[:nz, :nz] = G[ip]
        A[:nz, nz:] = V[ip]
        A[nz:, :nz] = (f_q @ Tq + f_qd @ G)[iv]
        A[nz:, nz:] = (f_qd @ V)[iv]
        B = np.zeros((nz + nw, self.n_act))
        B[nz:] = f_u[iv]
        C = D = None
        if self._n_h:
            dh = self._sparse(y, "dh", self._n_h, n)
            dhd = self._sparse(y, "dhd", self._n_h, n)
            C = np.hstack([dh @ Tq + dhd @ G, dhd @ V])
            D = np.zeros((self._n_h, self.n_act))
        return A, B, C, D


def linearize(model, q=None, qd=None, u=None, t: float = 0.0, coordinates=None, velocities=None,
              drivers: str = "auto") -> Linearization:
    """A, B (and C, D for the model's outputs) of the forward dynamics of `model` (a Model or
    its Equations) about the operating point.

    q: {coordinate: value} held while the others are solved from the model's guesses (as
       Dynamics.position(fixed=...)), or a full vector projected onto the constraints;
       default: the model's guesses, assembled.
    qd: {coordinate: velocity} held while the others are solved (Dynamics.velocity(fixed=...)),
       or a full vector (the nearest consistent one is used); default: the independent
       velocities at zero.
    u: actuator forces (a sequence in the order of the actuators, or {name: value}); default 0.
    t: the time (drivers and time-dependent forces are frozen there).
    coordinates, velocities: the independent coordinates and velocities (names) of the state;
       default: chosen at the point by QR with column pivoting of Phi_q and of the
       non-holonomic rows (the best-conditioned choice); velocities are always rates of
       independent coordinates unless given.
    drivers: "keep" the driving constraints (a frozen-time linearization of the driven
       system, as Dynamics.forward integrates it), "drop" them (the actuators take their
       place, as in the forward-dynamics kernel), or "auto" (default): drop them when the
       model has actuators, keep them otherwise.
    """
    return Linearizer(model, drivers=drivers).at(q=q, qd=qd, u=u, t=t, coordinates=coordinates, velocities=velocities)
