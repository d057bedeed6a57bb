"""Straight-line sparse linear solves over atoms: LDL^T and LU with pivots fixed at
generation time.

A device that runs a kinematics or dynamics kernel solves small sparse linear systems
(Phi_q qd = beta, the KKT system of forward dynamics, the reactions of inverse dynamics)
at every call. Here those solves are unrolled into atoms, so every target (double C,
float32, fixed point, RTL) gets them through the ordinary pipeline: no loops, no branches,
no index arrays, no pivot search at run time.

    F = factor_lu(A, samples, row_names=..., col_names=...)   # or factor_ldlt(A, samples)
    x1 = F.solve(b1); x2 = F.solve(b2)                         # share the factor's atoms
    print(F.report(x1, x2))                                    # pivots, fill, op counts

Invariants:
* Only structural nonzeros exist. The elimination visits the stored entries of A and the
  fill that elimination creates from them; an update that folds to ZERO (exact
  cancellation) is dropped. No atom is ever built for a structural zero, and a zero entry
  of a right-hand side costs nothing (the constructors fold `0*x` and `y - 0`).
* One division per pivot. The reciprocal r_k = 1/pivot_k is an atom; multipliers and
  back substitution multiply by it (division costs 14+ cycles on a Cortex-M4F and a long
  iterative routine in fixed point, a multiplication one cycle).
* Every choice is made at generation time and is deterministic: orderings break ties by
  the lowest index, numeric pivot choices depend only on the matrix and the (seeded)
  sample points, so the same inputs give the same atoms and byte-identical C.
* A pivot is accepted only if, at every sample point, it keeps one sign and stays a
  fraction `threshold` of the largest entry of its column in the active submatrix
  (threshold partial pivoting, applied to the worst case). A pivot is a continuous
  function of the inputs wherever the earlier pivots do not vanish, so a sign change
  between two samples of a connected domain proves that it vanishes in between: that is
  reported as an error naming the rows and columns, never accepted. The test is only as
  good as the samples: a pivot could touch zero between samples without changing sign.
  The samples are the caller's (kernels use consistent configurations of the mechanism:
  see domain.sampling); `Samples.box` draws them from declared ranges.
* The atoms fix the order of every sum (the order of the elimination steps), so the
  reduced-precision renderings of a solve are reproducible.

    sparse.py  what both share: Samples, errors, pivot statistics, the factor's report
               and op counts, pivot-block inverses, minimum degree and symbolic LDL^T
    lu.py      factor_lu: Markowitz pivots (scalars or 2 x 2 blocks) chosen on the samples
    ldlt.py    factor_ldlt: minimum degree (definite) or symmetric pivots with 2 x 2 blocks
"""
from .ldlt import LDLFactor, LDLStep, factor_ldlt
from .lu import LUFactor, LUStep, factor_lu
from .sparse import (DEFAULT_THRESHOLD, MIN_RELATIVE, PivotStats, Samples, SingularPivotError, SolveError,
                     minimum_degree, symbolic_ldlt)

__all__ = ["DEFAULT_THRESHOLD", "LDLFactor", "LDLStep", "LUFactor", "LUStep", "MIN_RELATIVE", "PivotStats",
           "Samples", "SingularPivotError", "SolveError", "factor_ldlt", "factor_lu", "minimum_degree",
           "symbolic_ldlt"]
