"""Kernel builders: from a model's Equations to the Kernel a device runs."""
from __future__ import annotations

import numpy as np

from ..model import Equations, Kinematics
from . import InPort, Kernel, OutPort

MOTION_POINTS = 48


def _port(name: str, eqs: Equations, syms) -> InPort:
    return InPort(name, list(syms), [eqs.ranges[s] for s in syms])


def equations_kernel(eqs: Equations) -> Kernel:
    """Phi, Phi_q, Phi_t and gamma as they are, from q, qd and t."""
    k = Kernel(
        model=eqs.model,
        name="equations",
        description="constraints Phi, Jacobian Phi_q (sparse), Phi_t and gamma from q, qd, t",
        inputs=[_port("q", eqs, eqs.q), _port("qd", eqs, eqs.qd), _port("t", eqs, [eqs.t])],
        outputs=[
            OutPort.vector("Phi", eqs.phi),
            OutPort.sparse("Phi_q", eqs.phi_q),
            OutPort.vector("Phi_t", eqs.phi_t),
            OutPort.vector("gamma", eqs.gamma),
        ],
    )
    k.motion = _motion(eqs, lambda q, qd, qdd, t: [*q, *qd, t])
    return k


def _motion(eqs: Equations, row) -> list[list[float]] | None:
    """Input vectors along the driven motion over the model's time range (None if the
    model is not fully driven, i.e. has fewer equations than coordinates)."""
    if len(eqs.phi) < len(eqs.q):
        return None
    lo, hi = eqs.ranges[eqs.t]
    times = np.linspace(lo, hi, MOTION_POINTS)
    Q, QD, QDD = Kinematics(eqs).motion(times)
    return [[float(v) for v in row(Q[i], QD[i], QDD[i], float(times[i]))] for i in range(len(times))]


BUILDERS = {
    "equations": equations_kernel,
}


def build_kernel(eqs: Equations, name: str) -> Kernel:
    try:
        builder = BUILDERS[name]
    except KeyError:
        raise ValueError(f"no kernel called {name!r}; known: {', '.join(sorted(BUILDERS))}") from None
    return builder(eqs)
