"""The cost model that chooses between formulations and factorizations of one system.

weighted_cost counts the operations of the lowered tape (the instructions every backend
prints, mbforge.lower.op_counts), a division weighing DIV_WEIGHT. Only the comparison of
two candidates for one kernel uses it; the figures reported in manifests are the plain
op counts.
"""
from __future__ import annotations

from ..lower import op_counts

DIV_WEIGHT = 8  # a division costs about eight multiplications (14 vs 1-2 cycles on a Cortex-M4F)


def weighted_cost(atoms) -> int:
    """Operations to compute `atoms`, a division counting DIV_WEIGHT (to choose between
    factorizations of one system)."""
    c = op_counts(atoms)
    return c["total"] + (DIV_WEIGHT - 1) * c.get("div", 0)
