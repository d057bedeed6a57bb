"""The kernel builders by name: from a model's Equations to the Kernels a device runs.

    equations                 equations.py   Phi, Phi_q, Phi_t, gamma [, M, Q, B]
    kinematics                kinematics.py  q, t -> qd, qdd (and Phi)
    forward-dynamics          dynamics.py    q, qd, t, u -> qdd, lambda
    inverse-dynamics          dynamics.py    q, qd, qdd, t -> u, lambda
    inverse-dynamics-reduced  reduced.py     z, zd, zdd -> u over independent coordinates
    linearized-dynamics       linearized.py  q, qd, t, u -> A, B [, C] in independent coordinates
    inverse-dynamics-rnea     recursive.py   q, qd, qdd, t -> u, open trees of revolute/prismatic joints, O(N)
    forward-dynamics-aba      recursive.py   q, qd, t, u -> qdd, open trees of revolute/prismatic joints, O(N)
    mass-matrix-crba          recursive.py   q -> M (sparse), open trees of revolute/prismatic joints
    frame-kinematics          recursive.py   q -> p, R, J of a named frame (option frame=; URDF models)
    step                      step.py        state (q, qd [, qdd, lambda] [, t]), u -> the next state

The options a builder takes are typed in options.py (the flags of `mbforge generate`):
build_kernel resolves them (`options`) before the builder runs; arguments no flag gives
(`samples`) pass as keywords.

Invariants of every kernel built here:
* every input symbol has a declared range (the model's; for an actuator input without a
  declared range, the envelope of the inverse-dynamics forces along the driven motion,
  widened, and `info.derived_ranges` names it);
* linear solves are straight-line atoms (mbforge.linalg) with pivots fixed at generation
  time, checked at consistent configurations (domain.sampling); one factorization serves
  every right-hand side of a kernel; `info.solves` holds the factors and `info.report`
  their reports (pivots, fill, op counts);
* no input port is one that no output depends on (t of a time-independent model:
  Kernel.without_unused_inputs; the step kernel takes t exactly when its step depends on it);
* `motion` holds input vectors along the driven motion (None when there is none), and
  `domain` the tube of boxes around them where the kernel has a driven motion and solves.
"""
from __future__ import annotations

from ..model.equations import Equations
from .common import KernelError
from .dynamics import forward_dynamics_kernel, inverse_dynamics_kernel
from .equations import equations_kernel
from .kernel import Kernel
from .kinematics import kinematics_kernel
from .linearized import linearized_dynamics_kernel
from .options import KernelOptions, resolve
from .recursive import aba_kernel, frame_kinematics_kernel, mass_matrix_crba_kernel, rnea_kernel
from .reduced import reduced_inverse_dynamics_kernel
from .step import step_kernel

BUILDERS = {
    "equations": equations_kernel,
    "kinematics": kinematics_kernel,
    "forward-dynamics": forward_dynamics_kernel,
    "inverse-dynamics": inverse_dynamics_kernel,
    "inverse-dynamics-reduced": reduced_inverse_dynamics_kernel,
    "linearized-dynamics": linearized_dynamics_kernel,
    "inverse-dynamics-rnea": rnea_kernel,
    "forward-dynamics-aba": aba_kernel,
    "mass-matrix-crba": mass_matrix_crba_kernel,
    "frame-kinematics": frame_kinematics_kernel,
    "step": step_kernel,
}

__all__ = ["BUILDERS", "KernelError", "build_kernel"]


def build_kernel(eqs: Equations, name: str, options: dict | KernelOptions | None = None, **args) -> Kernel:
    """The kernel `name` of eqs. options: the builder's typed options (kernels.options, a
    dict or its KernelOptions; defaults applied, KernelOptionError naming a bad one);
    args: the builder's own keywords, given as they are (they win over options)."""
    try:
        builder = BUILDERS[name]
    except KeyError:
        raise ValueError(f"no kernel called {name!r}; known: {', '.join(sorted(BUILDERS))}") from None
    typed = resolve(name, options).builder_args() if options is not None else {}
    k = builder(eqs, **{**typed, **args})
    return k if name == "step" else k.without_unused_inputs()  # step.py has its own rule for t
