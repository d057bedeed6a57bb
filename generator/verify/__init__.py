"""Verification of a generated kernel, whatever runs it: the part the HIL harness
(mbforge.hil, over the serial link) and the RTL benches (mbforge.hdl.sim, in cocotb)
share. Nothing here talks to a device.

    device     the Device protocol: eval(raw inputs) -> outputs, status, work
    vectors    the one vector source (domain boxes / ranges, motion, the robustness set)
               and raw <-> real
    compare    the one comparison: error per output group against the double reference,
               error bounds, statuses by class, bit-exactness against a host model
    hostlib    a kernel compiled on the host, called over a batch through ctypes (a Device:
               the host model and the double reference)

Import rule: verify reads only generated kernel folders through mbforge.manifest; it never
imports mbforge.hil or mbforge.hdl (both import it) nor the model layer (model, kernels,
pipeline, backends).
"""
