"""The user-facing description of a mechanism: coordinates, constraints, drivers.

A Model collects named coordinates (each with its velocity and acceleration symbols and
declared ranges) and named constraint equations; `equations()` hands them, atomized, to
the kernel builders. Names are checked as they are added, so a bad model fails where it
is written, with the name of the offending coordinate or constraint.
"""
from __future__ import annotations

import re

from ..ir import Atom, ExpressionError, as_atom, symbol
from .equations import Equations

_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class ModelError(ValueError):
    """A mechanism description that is inconsistent (names the part)."""


class Model:
    def __init__(self, name: str):
        if not _IDENT.match(name or ""):
            raise ModelError(f"model name {name!r} must be an identifier (it prefixes every emitted C symbol)")
        self.name = name
        self.t = symbol("t", "t")
        self.q: list[Atom] = []
        self.qd: list[Atom] = []
        self.qdd: list[Atom] = []
        self.guess: dict[Atom, float] = {}
        self.ranges: dict[Atom, tuple[float, float]] = {self.t: (0.0, 1.0)}
        self.phi: list[Atom] = []
        self.phi_names: list[str] = []
        self._names: set[str] = set()

    # ---- coordinates -------------------------------------------------------------------
    def coordinate(self, name: str, guess: float = 0.0, range=(-1.0, 1.0), vrange=(-1.0, 1.0),
                   arange=(-1.0, 1.0)) -> Atom:
        """Add a generalized coordinate; returns its symbol (velocity name_d, accel name_dd)."""
        if not _IDENT.match(name):
            raise ModelError(f"{self.name}: coordinate name {name!r} is not an identifier")
        if name in self._names:
            raise ModelError(f"{self.name}: coordinate {name!r} is defined twice")
        for r, what in ((range, "range"), (vrange, "velocity range"), (arange, "acceleration range")):
            if not (len(r) == 2 and r[0] < r[1]):
                raise ModelError(f"{self.name}: coordinate {name!r} has an empty {what} {r!r}")
        self._names.add(name)
        try:
            q = symbol(name, "q")
            qd = symbol(name + "_d", "qd")
            qdd = symbol(name + "_dd", "qdd")
        except ExpressionError as e:
            raise ModelError(f"{self.name}: coordinate {name!r}: {e}") from None
        self.q.append(q)
        self.qd.append(qd)
        self.qdd.append(qdd)
        self.guess[q] = float(guess)
        self.ranges[q] = (float(range[0]), float(range[1]))
        self.ranges[qd] = (float(vrange[0]), float(vrange[1]))
        self.ranges[qdd] = (float(arange[0]), float(arange[1]))
        return q

    def time_range(self, lo: float, hi: float) -> None:
        self.ranges[self.t] = (float(lo), float(hi))

    # ---- constraints -------------------------------------------------------------------
    def constraint(self, expr, name: str) -> None:
        """Add the equation expr = 0 (holonomic: a function of q and t)."""
        if name in self.phi_names:
            raise ModelError(f"{self.name}: constraint {name!r} is defined twice")
        try:
            e = as_atom(expr)
        except ExpressionError as err:
            raise ModelError(f"{self.name}: constraint {name!r}: {err}") from None
        allowed = 0
        for s in self.q + [self.t]:
            allowed |= s.mask
        if e.mask & ~allowed:
            from ..ir import topo

            bad = sorted(a.value.name for a in topo([e]) if a.is_symbol and not a.mask & allowed)
            raise ModelError(f"{self.name}: constraint {name!r} depends on {', '.join(bad)}, "
                             "which are not coordinates of this model (or t)")
        if e.is_const:
            raise ModelError(f"{self.name}: constraint {name!r} is the constant {e.value!r}: "
                             "it constrains nothing")
        self.phi.append(e)
        self.phi_names.append(name)

    def drive(self, expr, name: str) -> None:
        """A driving constraint expr(q, t) = 0 (same algebra as a constraint)."""
        self.constraint(expr, name)

    # ---- equations ---------------------------------------------------------------------
    def equations(self) -> Equations:
        if not self.q:
            raise ModelError(f"{self.name}: the model has no coordinates")
        return Equations(model=self.name, q=list(self.q), qd=list(self.qd), qdd=list(self.qdd),
                         t=self.t, phi=list(self.phi), phi_names=list(self.phi_names),
                         ranges=dict(self.ranges), guess=dict(self.guess))
