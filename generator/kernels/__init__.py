"""Kernels: what a device computes, as named input and output ports over atoms.

A kernel builder takes a model's Equations and returns a Kernel whose inputs are symbols
(with declared ranges) and whose outputs are atoms. Everything after this stage (passes,
schedule, renderers, firmware, harness) sees only the Kernel and, later, its manifest.

    builders.py  equations, kinematics, forward-dynamics, inverse-dynamics,
                 inverse-dynamics-reduced (BUILDERS)
    samples.py   consistent configurations at which the solves' pivots are chosen and checked
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Atom, ExpressionError, Sparse


@dataclass
class InPort:
    name: str
    symbols: list[Atom]
    ranges: list[tuple[float, float]]

    @property
    def shape(self) -> list[int]:
        return [len(self.symbols)]


@dataclass
class OutPort:
    name: str
    shape: list[int]
    atoms: list[Atom]
    pattern: list[tuple[int, int]] | None = None  # sparse matrices: stored entries

    @classmethod
    def vector(cls, name: str, atoms: list[Atom]) -> "OutPort":
        return cls(name, [len(atoms)], list(atoms))

    @classmethod
    def sparse(cls, name: str, m: Sparse) -> "OutPort":
        return cls(name, list(m.shape), m.values(), m.pattern)


@dataclass
class Kernel:
    model: str
    name: str
    inputs: list[InPort]
    outputs: list[OutPort]
    description: str = ""
    # input vectors along a driven motion, for verification
    motion: list[list[float]] | None = None
    # where the kernel is meant to run, when that is much smaller than the box of the
    # declared ranges: a union of boxes (each [(lo, hi)] per flat input). Range analysis
    # (fixed-point formats, error bounds, pivots) and test vectors use it; None = the box.
    domain: list[list[tuple[float, float]]] | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        seen: set[Atom] = set()
        for p in self.inputs:
            for s in p.symbols:
                if not s.is_symbol:
                    raise ExpressionError(f"kernel {self.name}: input {p.name} holds {s}, not a symbol")
                if s in seen:
                    raise ExpressionError(f"kernel {self.name}: symbol {s} appears twice among the inputs")
                seen.add(s)

        if self.domain is not None:
            n = sum(len(p.symbols) for p in self.inputs)
            for k, box in enumerate(self.domain):
                if len(box) != n:
                    raise ExpressionError(f"kernel {self.name}: domain box {k} has {len(box)} ranges for {n} inputs")

    @property
    def input_ranges(self) -> list[tuple[float, float]]:
        """The declared range of every flat input."""
        return [r for p in self.inputs for r in p.ranges]

    @property
    def input_symbols(self) -> list[Atom]:
        return [s for p in self.inputs for s in p.symbols]

    @property
    def output_atoms(self) -> list[Atom]:
        return [a for p in self.outputs for a in p.atoms]


def tube(points, margin: float = 0.5, floor: float = 1e-9) -> list[list[tuple[float, float]]]:
    """Boxes around a sampled path through input space (e.g. the configurations of a
    driven motion): one box per pair of consecutive points, their hull widened on every
    axis by `margin` x the step between them (measured in units of each axis' span over
    the path) plus `floor`. A smooth path strays from its chord by far less than the
    step, so the union covers it between samples; callers check that on a denser
    sampling (`covers`)."""
    import numpy as np

    P = np.asarray(points, dtype=float)
    span = np.maximum(P.max(axis=0) - P.min(axis=0), floor)
    boxes = []
    for a, b in zip(P[:-1], P[1:]):
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        step = float(np.max(np.abs(b - a) / span))
        w = margin * step * span + floor
        boxes.append([(float(x), float(y)) for x, y in zip(lo - w, hi + w)])
    return boxes


def covers(domain, points) -> bool:
    """Every point lies in at least one box of the domain."""
    import numpy as np

    P = np.asarray(points, dtype=float)
    inside = np.zeros(len(P), dtype=bool)
    for box in domain:
        b = np.asarray(box)
        inside |= np.all((P >= b[:, 0]) & (P <= b[:, 1]), axis=1)
    return bool(inside.all())
