"""One record per real kind (mbforge.reals): what the manifest, the backends, the firmware
generator and budget read of a kernel's element type."""
import numpy as np
import pytest

from mbforge.backends import backend_names, get_backend
from mbforge.manifest import REAL_KINDS
from mbforge.reals import REALS, soft_float


@pytest.mark.parametrize("kind, fpu, soft", [
    ("int32", None, False), ("int32", "sp", False),
    ("float", None, True), ("float", "sp", False), ("float", "dp", False),
    ("double", None, True), ("double", "sp", True), ("double", "dp", False)])
def test_a_core_computes_a_real_kind_in_hardware_when_its_fpu_covers_it(kind, fpu, soft):
    assert soft_float(REALS[kind], fpu) is soft


def test_every_backend_and_manifest_reads_the_record():
    assert REAL_KINDS == tuple(REALS)
    for n in backend_names():
        assert get_backend(n).real is REALS[get_backend(n).real.name]
    for r in REALS.values():
        assert np.dtype(r.dtype).itemsize == r.size and (np.dtype(r.dtype).kind == "i") == r.fixed


def test_the_device_protocol_carries_each_kind_by_its_record():
    # HELLO names the kind by the record's code, and the host reads it back to the same kind
    from mbforge.hil import protocol as P

    for n, r in REALS.items():
        h = P.Hello(P.PROTOCOL_VERSION, n, 3, 2, "SysTick", 1000, 256, 512, "0" * 64, "fw")
        raw = h.pack()
        assert raw[1] == r.code and P.Hello.unpack(raw).real == n
