"""Kernels: what a device computes, as named input and output ports over atoms.

A kernel builder takes a model's Equations and returns a Kernel whose inputs are symbols
(with declared ranges) and whose outputs are atoms. Everything after this stage (passes,
schedule, renderers, firmware, harness) sees only the Kernel and, later, its manifest.
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

    @property
    def input_symbols(self) -> list[Atom]:
        return [s for p in self.inputs for s in p.symbols]

    @property
    def output_atoms(self) -> list[Atom]:
        return [a for p in self.outputs for a in p.atoms]
