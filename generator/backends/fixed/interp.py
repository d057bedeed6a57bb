"""The fixed-point interpreter on a FixedProgram: a thin wrapper over the one interpreter of
the op set (backends.fixed.ops.run), bit-exact with the c-fixed C (tests compare the two),
without a C compiler: useful where compiling a big kernel takes minutes, and to look at
every intermediate value.
"""
from __future__ import annotations

import numpy as np

from ...analysis.fixedpoint import FixedProgram
from .ops import lower_hw, run


def simulate(fx: FixedProgram, X, keep: bool = False):
    """Run the program on int32 inputs X [N, n_in]. Returns (Y [N, n_out] int32 values as
    int64, status [N] (1 where something saturated)) and, with keep, {temp: values}."""
    hp = lower_hw(fx)
    Y, status, val = run(hp, np.asarray(X, dtype=np.int64), keep=True)
    if not keep:
        return Y, status
    return Y, status, {t: val[ref] for t, ref in hp.temps.items()}
