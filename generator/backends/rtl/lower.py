"""Hardware operations: the RTL's view of the fixed-point op set.

    FixedProgram (analysis.fixedpoint) -> HwProgram (backends.fixed.ops.lower_hw)
                                       -> constant products as shifts (shift_constants)

The op set, its semantics, the lowering and the interpreter live in backends.fixed.ops;
this module keeps the names the RTL back end and its tests use, and the RTL's one rewrite:
a product by a literal of one or two signed power-of-two digits becomes a sum of shifted
copies of its operand (an `add` op), with the same value bit for bit (see shift_constants).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..fixed.ops import (INT32_MAX, INT32_MIN, ONE_Q30, HwOp, HwProgram, lower_hw, rsh_int, run,  # noqa: F401
                         trig_bounds, trig_constants)

# const_products: how a product by a literal is built. multiply: a multiplier (as c-fixed
# writes it); shift: +-2^k as a shift; shift-add: also two signed digits, +-2^p +-2^q, as a
# shift-add (one adder instead of a 32 x 32 multiplier); auto: shift-add in the pipelined
# variant, multiply in the shared one, where the products move to the adder units and their
# shift multiplexers grew more LUTs than the cycles saved are worth (four-bar kinematics,
# synth_ice40 -dsp: 1 multiplier 3,943 LUT4 multiplying, 4,007 with shift-add, 2 cycles fewer;
# 4 multipliers 6,082 and 6,465, 1 cycle fewer; bench/rtl.py --table)
CONST_PRODUCTS = ("auto", "shift-add", "shift", "multiply")


def const_products(mode: str, variant: str) -> str:
    """The const_products mode a variant is built with (auto resolved)."""
    return ("shift-add" if variant == "pipelined" else "multiply") if mode == "auto" else mode


def evaluate(hp: HwProgram, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw int32 inputs [N, n_in] -> (raw int32 outputs [N, n_out], status [N])."""
    Y, status = run(hp, X)
    return Y.astype(np.int32), status


def signed_digits(c: int) -> list[tuple[int, int]]:
    """c as a sum of sign * 2^k, the non-adjacent form (fewest nonzero digits): [(k, sign)]."""
    out, k = [], 0
    while c:
        if c & 1:
            d = 2 - (c & 3)  # +1 or -1: leaves c - d divisible by 4
            out.append((k, d))
            c -= d
        c >>= 1
        k += 1
    return out


def shift_constants(hp: HwProgram, mode: str = "shift-add") -> tuple[HwProgram, int]:
    """(hp with products by literals of few signed digits as add ops, how many were rewritten).

    mul(a, lit, s) is sat(rsh(a * lit, s)); with lit = sum sign_i 2^k_i, a * lit is
    sum sign_i (a << k_i) exactly in int64 (|a * lit| <= 2^62; two terms of one sign sum to
    at most |a * lit|), which is add's sat(rsh(lit 0 + sum sign_i align(a, k_i), s)): the
    same rounding, saturation and flag, so the RTL stays bit-exact with c-fixed."""
    if mode not in CONST_PRODUCTS[1:]:
        raise ValueError(f"const_products={mode!r}: must be one of {', '.join(CONST_PRODUCTS)}")
    most = {"shift-add": 2, "shift": 1, "multiply": 0}[mode]
    ops, n = [], 0
    for op in hp.ops:
        d = signed_digits(op.p["lit"]) if op.kind == "mul" and "lit" in op.p else []
        if 0 < len(d) <= most:
            # a common factor 2^m of the terms and of the rounding shift cancels exactly:
            # rsh(2^m y, s) = rsh(y, s - m) for m <= s (narrower adders, no shift there and back)
            m = min([op.p["s"]] + [k for k, _ in d])
            op = replace(op, kind="add", srcs=(op.srcs[0],) * len(d),
                         p={"sh": [k - m for k, _ in d], "sign": [g for _, g in d], "lit": 0, "s": op.p["s"] - m,
                            "form": "mul", "mul_lit": op.p["lit"],
                            **({"of": op.p["of"]} if "of" in op.p else {})})
            n += 1
        ops.append(op)
    return replace(hp, ops=ops), n
