"""The equations of a mechanism, all atomized: what the kernel builders consume.

Invariants: q, qd, qdd are symbols of kind q/qd/qdd in the same order; phi[i] = 0 are the
holonomic and driving constraints (names in phi_names); phi_q = d phi / d q (sparse);
Phi_q qd = beta with beta = -phi_t; Phi_q qdd = gamma. M and Q are the mass matrix and
the generalized forces (the "delta" of the virtual-power principle), None when the model
has no inertia.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import ONE, Atom, Sparse, jacobian, neg, time_derivative


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
    # lazily built
    _phi_q: Sparse | None = None
    _phi_t: list[Atom] | None = None
    _gamma: list[Atom] | None = None

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
