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
* inertial (n atoms, with M and Q) = M qdd - Q, the same values written body by body in
  the cheapest form the body knows (Newton-Euler for a body in Euler parameters:
  m (r'' - g) and 2 L^T (J alpha + w x J w), instead of the expanded 4 L^T J L e'' - Q):
  for kernels that only need the residual of the equations of motion.
* T and V are the kinetic and potential energy (atoms); `conservative` tells whether
  T + V is a first integral when no actuator acts and nothing is driven.
* outputs are named atoms in q, qd, t that a simulation reports (e.g. leg lengths).
* explicit maps some coordinates (dependent) to closed forms in the others (`independent`,
  in the order of q), parameters and t; the closed forms satisfy the constraints wherever
  the independent coordinates satisfy the constraints among themselves. `explicit_map()`
  gives the dependent q, qd and qdd as atoms in the independent q, qd, qdd (chain rule),
  for kernels over the independent coordinates alone. explicit_guards (what, atom, minimum):
  quantities of the independent coordinates the closed forms need >= minimum (pivots).
Structural zeros are never stored: M, phi_q, B keep only entries that are not ZERO.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .envelope import Envelope
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
    explicit: dict[Atom, Atom] = field(default_factory=dict)
    measures: dict[str, Atom] = field(default_factory=dict)  # actuator -> measure (Model.explicit_measure)
    explicit_guards: list[tuple[str, Atom, float]] = field(default_factory=list)  # (what, atom >= minimum)
    independent: list[Atom] | None = None
    inertial: list[Atom] | None = None
    envelope: Envelope = field(default_factory=Envelope)  # where the mechanism operates (model.envelope)
    initial_q: dict[str, float] = field(default_factory=dict)  # Model.initial, by coordinate name
    initial_qd: dict[str, float] = field(default_factory=dict)
    source: object = field(default=None, compare=False, repr=False)  # the Model (recursive kernels read its trees)
    reduced_from: "Equations | None" = field(default=None, compare=False, repr=False)  # model.reduce: the full ones
    # lazily built
    _phi_q: Sparse | None = None
    _phi_t: list[Atom] | None = None
    _gamma: list[Atom] | None = None
    _nh: tuple | None = None
    _explicit_rates: tuple | None = None
    _mobility: dict = field(default_factory=dict, compare=False, repr=False)  # reference.solvers.mobility, per row set

    def __post_init__(self):
        if self.driving is None:
            self.driving = [False] * len(self.phi)
        if len(self.driving) != len(self.phi):
            raise ValueError(f"{self.model}: {len(self.driving)} driving flags for {len(self.phi)} equations")
        if self.B is None:
            self.B = Sparse((len(self.q), len(self.actuator_names)))
        coords = set(self.q)
        bad = [getattr(k.value, "name", repr(k)) for k in self.explicit if k not in coords]
        if bad:
            raise ValueError(f"{self.model}: explicit coordinates {', '.join(bad)} are not coordinates")
        if self.independent is None:
            self.independent = [s for s in self.q if s not in self.explicit]
        dep = 0
        for k in self.explicit:
            dep |= k.mask
        for k, e in self.explicit.items():
            if e.mask & dep:
                raise ValueError(f"{self.model}: the explicit expression of {k.value.name} uses dependent "
                                 "coordinates")

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

    def independent_rows(self, rows) -> tuple[list[int], list[int]]:
        """`rows` split into those among the independent coordinates, parameters and t
        alone (the Stewart platform's Euler normalisation) and the others (which the
        explicit coordinates' closed forms must satisfy)."""
        free = self.t.mask
        for s in list(self.independent) + list(self.params or []):
            free |= s.mask
        among = [i for i in rows if not self.phi[i].mask & ~free]
        return among, [i for i in rows if i not in set(among)]

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

    # ---- explicit (closed-form) dependent coordinates ---------------------------------------
    @property
    def dependent(self) -> list[Atom]:
        """The explicit coordinates, in the order of q."""
        return [s for s in self.q if s in self.explicit]

    def _column(self, syms, which: list[Atom]) -> list[Atom]:
        idx = {s: j for j, s in enumerate(self.q)}
        return [syms[idx[s]] for s in which]

    @property
    def independent_qd(self) -> list[Atom]:
        return self._column(self.qd, self.independent)

    @property
    def independent_qdd(self) -> list[Atom]:
        return self._column(self.qdd, self.independent)

    def explicit_rates(self) -> tuple[list[Atom], list[Atom], list[Atom]]:
        """(q, qd, qdd) of the dependent coordinates (in the order of `dependent`) as atoms
        in the independent q, qd, qdd (and t): the closed forms and their first and second
        time derivatives by the chain rule."""
        if self._explicit_rates is None:
            dep = self.dependent
            pos = [self.explicit[s] for s in dep]
            ind_qd, ind_qdd = self.independent_qd, self.independent_qdd
            first = {**dict(zip(self.independent, ind_qd)), self.t: ONE}
            second = {**first, **dict(zip(ind_qd, ind_qdd))}
            vel = time_derivative(pos, first)
            acc = time_derivative(vel, second)
            self._explicit_rates = (pos, vel, acc)
        return self._explicit_rates

    def explicit_map(self, order: int = 2) -> dict[Atom, Atom]:
        """{dependent q (and qd, qdd up to `order`): atom in the independent coordinates}, to
        substitute into M, Q, Phi_q, B, outputs."""
        pos, vel, acc = self.explicit_rates() if order > 0 else ([self.explicit[s] for s in self.dependent], [], [])
        dep = self.dependent
        out = dict(zip(dep, pos))
        if order >= 1:
            out.update(zip(self._column(self.qd, dep), vel))
        if order >= 2:
            out.update(zip(self._column(self.qdd, dep), acc))
        return out

    def explicit_phi(self) -> list[Atom]:
        """The constraints with the dependent coordinates substituted: functions of the
        independent coordinates that vanish wherever those satisfy their own constraints
        (a numeric check of the closed forms)."""
        return subs(list(self.phi), self.explicit_map(0))

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
                         outputs={k: subs(v, vals) for k, v in self.outputs.items()},
                         explicit={k: subs(v, vals) for k, v in self.explicit.items()},
                         explicit_guards=[(w, subs(a, vals), m) for w, a, m in self.explicit_guards],
                         inertial=s(self.inertial),
                         independent=list(self.independent))
