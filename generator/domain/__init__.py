"""The domain stage: where a kernel runs, between the reference (mbforge.reference) and
the kernels (mbforge.kernels). A kernel builder asks it for a Domain (base.py) and builds
its Kernel with it (Kernel.with_domain); nothing here imports mbforge.kernels.

    base.py            Domain (boxes, verification vectors, input ranges, envelope record),
                       DomainError
    krawczyk.py        verified covers: Newton continuation, Krawczyk tests, cell splits
    explicit_cover.py  covers from the closed forms of Model.explicit coordinates
    cover.py           covers of the operating envelope or the time range, and their Domain
    motion.py          the driven motion, the tube of boxes around it, and its Domain
                       (MOTION_POINTS, DOMAIN_STEPS)
    states.py          boxes of the near-consistent states (q, qd[, qdd]) within the declared
                       ranges, by branch and prune: a step kernel's domain
    sampling.py        consistent configurations for pivots (motion, manifold, independent
                       box, envelope)
    forces.py          inverse-dynamics forces along the motion, actuator input ranges

Numeric, on the double reference; deterministic (fixed grids and paths, seeded samples).
"""
from .base import Domain, DomainError

__all__ = ["Domain", "DomainError"]
