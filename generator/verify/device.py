"""What the verification code asks of a device: evaluate raw input vectors.

    ev = device.eval(X)        # X: [N, n_in] of the kernel's raw type (vectors.to_raw)
    ev.outputs, ev.status, ev.work

Implementations, each a small adapter over the code that talks to the device:
    hostlib.HostKernel   the kernel's C compiled on the host, called through ctypes
                         (work None)
    link.LinkDevice      a board or QEMU behind the serial link, HELLO/EVAL (work:
                         instructions with a calibrated SysTick, cycles with DWT)
    hdl.sim.RtlDevice    the RTL in a cocotb simulation (work: cycles from ap_start to
                         ap_done per vector)

Invariants: `outputs` is [N, n_out] of the kernel's raw type (float64, float32 or int32)
so results of two devices compare bit for bit; `status` is [N] int32, the kernel's
return value; `work` is [N] int64 in `work_unit`, -1 for a call the device could not
count (its counter wrapped), or None when the device measures nothing. Rows are in the
order of X.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np


class Evaluation(NamedTuple):
    outputs: np.ndarray
    status: np.ndarray
    work: np.ndarray | None


@runtime_checkable
class Device(Protocol):
    name: str  # for reports: which device
    work_unit: str | None  # "instructions", "cycles", "ticks" or None (no work measured)

    def eval(self, raw_inputs: np.ndarray) -> Evaluation: ...
