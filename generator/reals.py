"""The real kinds a kernel computes in, one record each: everything the stages need to know
about a kernel's element type (`Manifest.real` names it, `Manifest.real_kind` is its record).
Every stage reads a kind's facts from its fields, never by comparing its name:

    manifest.py         the kinds a manifest may name; `fixed`: words with frac_bits
    backends/           each Backend's `real` is one of these records (C type, numpy dtype
                        of the envelope's outward rounding)
    firmware/budget.py  whether a core computes the kind in hardware (`fpu`)
    firmware/project.py the C type and literals, the device protocol's number and size
    hil/, verify/       the numpy dtype of the raw format and its rounding, the default
                        tolerance and rule of a comparison, whether the host build is
                        bit-exact, the digits a report prints

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
    tolerance: float  # default relative tolerance of a comparison with the double reference
    fixed: bool  # words with a Q format (frac_bits) per element
    # the FPU a core needs to compute the kind in hardware (firmware.budget.fpu_kind): None (integer),
    # "sp" (single precision) or "dp" (double precision); otherwise libgcc's soft-float routines
    fpu: str | None
    # how verify.compare judges an output group against the double reference when no tolerance
    # is given: "relative" (to the group's scale), "relative_or_bound" (or within each element's
    # manifest error bound), "error_bound" (each element within its bound, where the manifest has them)
    judged: str
    # whether a host build of the kernel reproduces the device bit for bit (double: the libm's
    # sin/cos/atan2 differ in the last bit between newlib and glibc; verify.compare's host rule)
    host_bit_exact: bool
    c_suffix: str = ""  # of a C floating literal of the kind ("f": single precision)
    digits: int = 9  # significant decimal digits a report prints of one value


REALS: dict[str, Real] = {r.name: r for r in (
    Real("double", "double", "<f8", 8, 0, 1e-12, False, "dp", judged="relative", host_bit_exact=False,
         digits=17),
    Real("float", "float", "<f4", 4, 1, 1e-5, False, "sp", judged="relative_or_bound", host_bit_exact=True,
         c_suffix="f"),
    Real("int32", "int32_t", "<i4", 4, 2, 1e-5, True, None, judged="error_bound", host_bit_exact=True),
)}
REAL_KINDS: tuple[str, ...] = tuple(REALS)
REFERENCE = REALS["double"]  # the kind of the reference kernel every other is compared with
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


__all__ = ["REALS", "REAL_KINDS", "REFERENCE", "Real", "real", "soft_float"]
