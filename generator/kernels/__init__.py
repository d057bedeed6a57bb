"""Kernels: what a device computes, as named input and output ports over atoms.

A kernel builder takes a model's Equations and returns a Kernel whose inputs are symbols
(with declared ranges) and whose outputs are atoms. Where it runs (boxes, verification
vectors, envelope) it asks of the domain stage (mbforge.domain), as a Domain value.
Everything after this stage (lower, analysis, backends, firmware, harness) sees only the
Kernel and, later, its manifest.

    kernel.py      Kernel, InPort, OutPort; KernelInfo (solves, report, derived ranges)
    builders.py    BUILDERS by name and build_kernel (mbforge.kernels.builders)
    options.py     the builders' typed options (the --method, --dt, ... flags of generate)
    equations.py, kinematics.py, dynamics.py (forward, inverse), reduced.py, linearized.py:
                   one formulation each; common.py what they share (ports, rows, KernelError)
    recursive.py   the O(N) recursive algorithms (RNEA, ABA) for open trees
    cost.py        weighted_cost, the choice between formulations and factorizations
    rewrite.py     share_reciprocals (one reciprocal per denominator)
"""
from .kernel import InPort, Kernel, KernelInfo, OutPort

__all__ = ["InPort", "Kernel", "KernelInfo", "OutPort"]
