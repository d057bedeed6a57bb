"""The real kinds a kernel computes in, one record each: everything the stages need to know
about a kernel's element type (`Manifest.real` names it).

    manifest.py         the kinds a manifest may name, the C type of in[] and out[]
    backends/           each Backend's `real` is one of these records
    firmware/budget.py  whether a core computes the kind in hardware (its FPU)
    firmware/project.py the C type, the device protocol's number and size of the kind
    hil/ (verify)       the numpy dtype of the raw format, the default tolerance of compare

A new real kind is one record here (and a printer that computes in it).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Real:
    name: str  # as Manifest.real spells it
    c_type: str  # element type of in[] and out[] in the generated C
    dtype: str  # numpy dtype of one element in the raw format and on the link (little-endian)
    size: int  # bytes of one element
    code: int  # the device protocol's number for the kind (HELLO)
    tolerance: float  # default relative tolerance of a comparison with the double kernel
    fixed: bool  # words with a Q format (frac_bits) per element
    # the FPU a core needs to compute the kind in hardware (firmware.budget.fpu_kind): None (integer),
    # "sp" (single precision) or "dp" (double precision); otherwise libgcc's soft-float routines
    fpu: str | None


REALS: dict[str, Real] = {r.name: r for r in (
    Real("double", "double", "<f8", 8, 0, 1e-12, False, "dp"),
    Real("float", "float", "<f4", 4, 1, 1e-5, False, "sp"),
    Real("int32", "int32_t", "<i4", 4, 2, 1e-5, True, None),
)}
REAL_KINDS: tuple[str, ...] = tuple(REALS)
# the FPU kinds that compute each FPU requirement (a double-precision FPU does single too)
_FPU_COVERS = {"sp": ("sp", "dp"), "dp": ("dp",)}


def real(name: str) -> Real:
    """The record of a real kind; KeyError naming the known kinds."""
    try:
        return REALS[name]
    except KeyError:
        raise KeyError(f"real kind {name!r} is not one of {', '.join(REAL_KINDS)}") from None


def soft_float(r: Real, fpu: str | None) -> bool:
    """Whether a core with FPU kind `fpu` (None, "sp", "dp") computes kind r in software."""
    return r.fpu is not None and fpu not in _FPU_COVERS[r.fpu]


__all__ = ["REALS", "REAL_KINDS", "Real", "real", "soft_float"]
