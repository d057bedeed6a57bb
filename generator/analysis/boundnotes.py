"""Whether a kernel's proved error bounds say anything: the one judgement behind the
header's note, the warning `mbforge generate` prints and its `--require-bounds` refusal.

An output's bound is *missing* when the analysis proved none (a divisor's enclosure, or
its error bound, reaches 0 somewhere in the domain: None or inf), and
*useless* when it is at least the output's largest magnitude (its largest |value| at the
kernel's test vectors where it has them, else over the range analysis' enclosure): such
a bound allows any result from 0 to twice the true value. An output that is 0 up to
double rounding at every test vector (a constraint's residual, a coordinate the
constraints hold still: at most ZERO times the kernel's largest output) is not judged:
its bound is small against the terms it is the difference of, which is what it is for.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

SHOWN = 3  # labels named per kind of failure; the count says how many more there are
ZERO = 1e-9


@dataclass(frozen=True)
class Weak:
    label: str
    bound: float | None  # None: missing
    magnitude: float | None  # what the bound is judged against (None: nothing)


def weak_bounds(labels, bounds, magnitudes) -> tuple[list[Weak], list[Weak]]:
    """(missing, useless) among the outputs; both empty when there are no bounds (c-double)
    or every bound is below its output's magnitude. magnitudes None: only missing ones."""
    if bounds is None:
        return [], []
    mags = magnitudes if magnitudes is not None else [None] * len(bounds)
    floor = ZERO * max((m for m in mags if m is not None and math.isfinite(m)), default=0.0)
    missing, useless = [], []
    for label, b, m in zip(labels, bounds, mags):
        if b is None or not math.isfinite(b):
            missing.append(Weak(label, None, m))
        elif m is not None and math.isfinite(m) and floor < m <= b:
            useless.append(Weak(label, b, m))
    return missing, useless


def _names(items: list[Weak], show) -> str:
    shown = ", ".join(show(w) for w in items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def bound_summary(labels, bounds, magnitudes) -> str | None:
    """One line naming the outputs without a useful error bound and why (None: all useful)."""
    missing, useless = weak_bounds(labels, bounds, magnitudes)
    n = len(bounds or ())
    parts = []
    if missing:
        parts.append(f"{len(missing)} of {n} outputs have no error bound (a divisor's enclosure, or its "
                     f"error bound, reaches 0 over the domain): {_names(missing, lambda w: w.label)}")
    if useless:
        parts.append(f"{len(useless)} of {n} outputs have a bound at least their largest magnitude "
                     f"(useless): {_names(useless, lambda w: f'{w.label} +-{w.bound:.3g} (|value| up to {w.magnitude:.3g})')}")
    return "; ".join(parts) or None
