"""The domain stage's value and error: `Domain`, what a kernel reads of where it runs, and
`DomainError`.

A kernel builder asks the domain stage (mbforge.domain) for a Domain and builds its Kernel
with it (Kernel.with_domain); the stage never sees a Kernel, only the kernel's input ports
(objects with `symbols` and `ranges`), so mbforge.domain imports nothing of mbforge.kernels.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model.model import ModelError


class DomainError(ModelError):
    """A domain the model cannot give (an envelope not verified, a tube that does not
    cover its motion, closed forms not proven defined): one line naming the model."""


@dataclass(frozen=True)
class Domain:
    """Where a kernel runs, as the kernel reads it. `boxes` and `motion` may be zero-argument
    callables, evaluated once on first use by the kernel (work only range analysis or
    verification needs).

    boxes:    a union of boxes, each [(lo, hi)] per flat input (Kernel.domain); None: the
              box of the declared ranges
    motion:   input vectors for verification (Kernel.motion): along the driven motion, or
              consistent states drawn over the envelope; None: none
    ranges:   per flat input, the range the kernel's analysis takes instead of the declared
              one (the hull of a verified cover's boxes); None: the declared ranges stay
    envelope: the manifest's record of the operating envelope the boxes cover, or None
    """

    boxes: object = None
    motion: object = None
    ranges: tuple | None = None
    envelope: dict | None = None
