"""The equations kernel: the model's equations as they are (no solve).

    q, qd, t -> Phi, Phi_q (sparse), Phi_t, gamma [, M (sparse), Q (delta), B (sparse)]

Invariant: the outputs are the Equations' own atoms, in the model's row order.
"""
from __future__ import annotations

from ..domain.cover import equations_domain
from ..model.equations import Equations
from .common import actuators, port
from .kernel import Kernel, OutPort


def equations_kernel(eqs: Equations) -> Kernel:
    """Phi, Phi_q, Phi_t and gamma as they are, from q, qd and t; with M (sparse), Q (delta:
    the generalized forces of the virtual-power principle) and B (sparse) when the model
    has inertia and actuators."""
    rows, qs = list(eqs.phi_names), [s.value.name for s in eqs.q]
    outputs = [
        OutPort.vector("Phi", eqs.phi, rows),
        OutPort.sparse("Phi_q", eqs.phi_q, rows, qs),
        OutPort.vector("Phi_t", eqs.phi_t, rows),
        OutPort.vector("gamma", eqs.gamma, rows),
    ]
    desc = "constraints Phi, Jacobian Phi_q (sparse), Phi_t and gamma"
    if eqs.M is not None and eqs.Q is not None:
        outputs += [OutPort.sparse("M", eqs.M, qs, qs), OutPort.vector("Q", eqs.Q, qs)]
        desc += ", mass matrix M (sparse) and generalized forces Q (delta)"
        names, B = actuators(eqs)
        if names:
            outputs.append(OutPort.sparse("B", B, qs, names))
            desc += ", actuator directions B (sparse)"
    inputs = [port("q", eqs, eqs.q), port("qd", eqs, eqs.qd), port("t", eqs, [eqs.t])]
    k = Kernel(model=eqs.model, name="equations", description=desc + " from q, qd, t", inputs=inputs,
               outputs=outputs)
    return k.with_domain(equations_domain(eqs, inputs, lambda q, qd, qdd, t: [*q, *qd, t]))
