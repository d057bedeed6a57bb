"""Double-precision kinematics on the numpy reference: position by Newton-Raphson with
the pseudoinverse (minimum-norm corrections, as in the thesis), then velocity and
acceleration from the linear problems Phi_q qd = beta and Phi_q qdd = gamma."""
from __future__ import annotations

import numpy as np

from ..ir import Evaluator
from .equations import Equations


class AssemblyError(RuntimeError):
    """The position problem does not close: names the equations left with a residual."""


class Kinematics:
    def __init__(self, eqs: Equations):
        self.eqs = eqs
        n = len(eqs.q)
        self.n = n
        pat = eqs.phi_q.pattern
        self._rows = np.array([i for i, _ in pat], dtype=int)
        self._cols = np.array([j for _, j in pat], dtype=int)
        pos_in = eqs.q + [eqs.t]
        self._pos = Evaluator(eqs.phi + eqs.phi_q.values() + eqs.beta, pos_in)
        self._acc = Evaluator(eqs.gamma, eqs.q + eqs.qd + [eqs.t])
        self.m = len(eqs.phi)

    def _eval_pos(self, q, t):
        y = self._pos(np.concatenate([q, [t]]))
        m = self.m
        phi = y[:m]
        J = np.zeros((m, self.n))
        J[self._rows, self._cols] = y[m:m + len(self._rows)]
        beta = y[m + len(self._rows):]
        return phi, J, beta

    def position(self, t: float, q0, tol: float = 1e-12, max_iter: int = 50) -> np.ndarray:
        q = np.array(q0, dtype=float)
        for _ in range(max_iter):
            phi, J, _ = self._eval_pos(q, t)
            if np.max(np.abs(phi)) < tol:
                return q
            q = q - np.linalg.pinv(J) @ phi
        phi, _, _ = self._eval_pos(q, t)
        bad = [f"{self.eqs.phi_names[i]} ({phi[i]:.3g})" for i in np.argsort(-np.abs(phi))[:5] if abs(phi[i]) >= tol]
        raise AssemblyError(f"{self.eqs.model}: position problem at t={t} did not close after "
                            f"{max_iter} iterations; residual {np.max(np.abs(phi)):.3g} in {', '.join(bad)}")

    def velocity(self, t: float, q) -> np.ndarray:
        _, J, beta = self._eval_pos(q, t)
        return np.linalg.lstsq(J, beta, rcond=None)[0]

    def acceleration(self, t: float, q, qd) -> np.ndarray:
        _, J, _ = self._eval_pos(q, t)
        gamma = self._acc(np.concatenate([q, qd, [t]]))
        return np.linalg.lstsq(J, gamma, rcond=None)[0]

    def motion(self, times) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Q, QD, QDD) along the driven motion, continuing each solution from the last."""
        q = np.array([self.eqs.guess.get(s, 0.0) for s in self.eqs.q])
        Q, QD, QDD = [], [], []
        for t in times:
            q = self.position(float(t), q)
            qd = self.velocity(float(t), q)
            Q.append(q)
            QD.append(qd)
            QDD.append(self.acceleration(float(t), q, qd))
        return np.array(Q), np.array(QD), np.array(QDD)
