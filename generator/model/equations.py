"""The equations of a mechanism, all atomized: what the kernel builders consume.

Invariants:
* q, qd, qdd are symbols of kind q/qd/qdd in the same order; `ranges` has an interval for
  every q, qd, qdd and t.
* phi[i] = 0 are the holonomic constraints, kinematic and driving (names in phi_names,
  `driving[i]` True for the driving ones); phi_q = d phi / d q (sparse); Phi_q qd = beta
  with beta = -phi_t; Phi_q qdd = gamma.
* nh[i] = 0 are non-holonomic velocity constraints, linear in qd: nh = C(q, t) qd + c(q, t);
  nh_qd = C, nh_beta = -c and C qdd = nh_gamma.
* M (n x n, sparse, symmetric) and Q (n atoms) come from the principle of virtual power:
      M qdd + Phi_q^T lambda (+ C^T mu) = Q + B u
  Q holds gravity, applied forces and the velocity-dependent inertia terms; B (n x n_act,
  sparse) the generalized direction of each actuator force u (names in actuator_names).
  Inverse dynamics of a driven motion solves [Phi_kin_q^T, -B] [lambda; u] = Q - M qdd
  over the kinematic (non-driving) rows. M, Q are None for a model without inertia.
* T and V are the kinetic and potential energy (atoms); `conservative` tells whether
  T + V is a first integral when no actuator acts and nothing is driven.
* outputs are named atoms in q, qd, t that a simulation reports (e.g. leg lengths).
Structural zeros are never stored: M, phi_q, B keep only entries that are not ZERO.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import ONE, ZERO, Atom, Sparse, jacobian, neg, subs, time_derivative


@dataclass
class Equations:
    model: str
    q: list[Atom]
    qd: list[Atom]
    qdd: list[Atom]
    t: Atom
    phi: list[Atom]
    phi_names: list[str]
    ranges: dict[Atom, tuple[float, float]]
    params: list[Atom] = field(default_factory=list)
    M: Sparse | None = None
    Q: list[Atom] | None = None
    guess: dict[Atom, float] = field(default_factory=dict)
    driving: list[bool] | None = None
    nh: list[Atom] = field(default_factory=list)
    nh_names: list[str] = field(default_factory=list)
    actuator_names: list[str] = field(default_factory=list)
    B: Sparse | None = None
    T: Atom | None = None
    V: Atom | None = None
    conservative: bool = True
    outputs: dict[str, Atom] = field(default_factory=dict)
    # lazily built
    _phi_q: Sparse | None = None
    _phi_t: list[Atom] | None = None
    _gamma: list[Atom] | None = None
    _nh: tuple | None = None

    def __post_init__(self):
        if self.driving is None:
            self.driving = [False] * len(self.phi)
        if len(self.driving) != len(self.phi):
            raise ValueError(f"{self.model}: {len(self.driving)} driving flags for {len(self.phi)} equations")
        if self.B is None:
            self.B = Sparse((len(self.q), len(self.actuator_names)))

    @property
    def n(self) -> int:
        return len(self.q)

    @property
    def phi_q(self) -> Sparse:
        if self._phi_q is None:
            self._phi_q = jacobian(self.phi, self.q)
        return self._phi_q

    @property
    def phi_t(self) -> list[Atom]:
        if self._phi_t is None:
            self._phi_t = time_derivative(self.phi, {self.t: ONE})
        return self._phi_t

    @property
    def beta(self) -> list[Atom]:
        return [neg(x) for x in self.phi_t]

    @property
    def gamma(self) -> list[Atom]:
        """Phi_q qdd = gamma = -(d/dt (Phi_q qd + Phi_t)) at qdd = 0."""
        if self._gamma is None:
            q_to_qd = dict(zip(self.q, self.qd))
            phidot = time_derivative(self.phi, {**q_to_qd, self.t: ONE})
            # qd is held constant: its derivative (qdd) belongs to the left-hand side
            self._gamma = [neg(x) for x in time_derivative(phidot, {**q_to_qd, self.t: ONE})]
        return self._gamma

    # ---- kinematic (non-driving) rows, for inverse dynamics -------------------------------
    @property
    def kinematic_rows(self) -> list[int]:
        return [i for i, d in enumerate(self.driving) if not d]

    @property
    def phi_kin_q(self) -> Sparse:
        """Rows of phi_q that are not driving constraints (renumbered 0..)."""
        rows = {i: k for k, i in enumerate(self.kinematic_rows)}
        return Sparse((len(rows), self.n), {(rows[i], j): a for (i, j), a in self.phi_q.entries.items() if i in rows})

    # ---- non-holonomic rows ----------------------------------------------------------------
    def _nh_parts(self):
        if self._nh is None:
            C = jacobian(self.nh, self.qd)
            c = subs(self.nh, {v: ZERO for v in self.qd}) if self.nh else []
            tang = {**dict(zip(self.q, self.qd)), self.t: ONE}
            g = [neg(x) for x in time_derivative(self.nh, tang)] if self.nh else []
            self._nh = (C, [neg(x) for x in c], g)
        return self._nh

    @property
    def nh_qd(self) -> Sparse:
        return self._nh_parts()[0]

    @property
    def nh_beta(self) -> list[Atom]:
        return self._nh_parts()[1]

    @property
    def nh_gamma(self) -> list[Atom]:
        return self._nh_parts()[2]

    # ---- parameters -----------------------------------------------------------------------
    def nominal(self) -> "Equations":
        """These equations with every parameter replaced by its value (the numerics of the
        reference solvers run on this)."""
        if not self.params:
            return self
        vals = {p: p.value.default for p in self.params}

        def s(x):
            return None if x is None else subs(x, vals)

        def sm(S):
            return None if S is None else Sparse(S.shape, {k: subs(a, vals) for k, a in S.entries.items()})

        return Equations(model=self.model, q=self.q, qd=self.qd, qdd=self.qdd, t=self.t,
                         phi=s(self.phi), phi_names=self.phi_names,
                         ranges={k: v for k, v in self.ranges.items() if k not in vals}, params=[],
                         M=sm(self.M), Q=s(self.Q), guess=self.guess, driving=self.driving,
                         nh=s(self.nh), nh_names=self.nh_names, actuator_names=self.actuator_names,
                         B=sm(self.B), T=s(self.T), V=s(self.V), conservative=self.conservative,
                         outputs={k: subs(v, vals) for k, v in self.outputs.items()})
