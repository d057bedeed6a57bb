"""Hardware operations: the RTL's view of the fixed-point op set.

    FixedProgram (analysis.fixedpoint) -> HwProgram (backends.fixed.ops.lower_hw)

The op set, its semantics, the lowering and the interpreter live in backends.fixed.ops;
this module keeps the names the RTL back end and its tests use.
"""
from __future__ import annotations

import numpy as np

from ..fixed.ops import (INT32_MAX, INT32_MIN, ONE_Q30, HwOp, HwProgram, lower_hw, rsh_int, run,  # noqa: F401
                         trig_bounds, trig_constants)


def evaluate(hp: HwProgram, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw int32 inputs [N, n_in] -> (raw int32 outputs [N, n_out], status [N])."""
    Y, status = run(hp, X)
    return Y.astype(np.int32), status
