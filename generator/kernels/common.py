"""What the formulations share: the kernel error, input ports with declared ranges, the
rows and actuators of a model's equations, and the linear system a kernel solves.

Invariants: an input port exists only with a declared range for every symbol (KernelError
naming the missing ones otherwise); row selections keep the model's row order, so the
same model gives the same matrices and names.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import ZERO, Atom, ExpressionError, Sparse, subs, symbol
from ..model.equations import Equations
from ..model.model import ModelError
from .kernel import InPort


class KernelError(ModelError):
    """A kernel that the model cannot provide (names the model and what is missing)."""


@dataclass
class LinearSystem:
    """matrix x = rhs, square, with a name for each row and unknown; `forces` indexes
    the unknowns that are actuator forces (the rest are multipliers). What a kernel
    factors and solves, and what a comparison with another solver starts from."""

    matrix: Sparse
    rhs: list[Atom]
    row_names: list[str]
    col_names: list[str]
    forces: list[int]


def port(name: str, eqs: Equations, syms) -> InPort:
    missing = [s.value.name for s in syms if s not in eqs.ranges]
    if missing:
        raise KernelError(f"{eqs.model}: input {name}: no declared range for {', '.join(missing)}")
    return InPort(name, list(syms), [eqs.ranges[s] for s in syms])


def names(syms) -> list[str]:
    return [s.value.name for s in syms]


def nh_rows(eqs):
    """(C, nh_beta, nh_gamma, names) of the non-holonomic rows (empty if none)."""
    nh = getattr(eqs, "nh", None) or []
    if not nh:
        return Sparse((0, len(eqs.q))), [], [], []
    return eqs.nh_qd, list(eqs.nh_beta), list(eqs.nh_gamma), list(eqs.nh_names)


def driving(eqs) -> list[bool]:
    d = getattr(eqs, "driving", None)
    return list(d) if d is not None else [False] * len(eqs.phi)


def actuators(eqs) -> tuple[list[str], Sparse]:
    """(actuator names, B): the model's actuator directions, n x (number of actuators)."""
    act = list(getattr(eqs, "actuator_names", None) or [])
    B = getattr(eqs, "B", None)
    if B is None:
        B = Sparse((len(eqs.q), len(act)))
    if B.shape != (len(eqs.q), len(act)):
        raise KernelError(f"{eqs.model}: B is {B.shape[0]} x {B.shape[1]} for {len(eqs.q)} coordinates and "
                          f"{len(act)} actuators")
    return act, B


def actuator_symbols(eqs: Equations, act: list[str]) -> list[Atom]:
    """The input symbol u_<name> of each actuator (kind "input")."""
    try:
        return [symbol(f"u_{a}", "input") for a in act]
    except ExpressionError as e:
        raise KernelError(f"{eqs.model}: actuator input: {e}") from None


def stack_rows(parts, n: int) -> Sparse:
    """The rows of several sparse matrices with n columns, one under the other."""
    entries, off = {}, 0
    for S in parts:
        for (i, j), a in S.entries.items():
            entries[(off + i, j)] = a
        off += S.shape[0]
    return Sparse((off, n), entries)


def select_rows(S: Sparse, rows: list[int]) -> Sparse:
    idx = {i: k for k, i in enumerate(rows)}
    return Sparse((len(rows), S.shape[1]), {(idx[i], j): a for (i, j), a in S.entries.items() if i in idx})


def subs_sparse(S: Sparse, mapping) -> Sparse:
    vals = subs(S.values(), mapping)
    return Sparse(S.shape, {ij: a for ij, a in zip(S.pattern, vals) if a is not ZERO})


def independent_equations(eqs: Equations, reduced: bool, kernel: str) -> Equations:
    """The equations a kernel is built on: `eqs`, or with reduced over the independent
    coordinates of its closed forms (model.reduce: the rows those satisfy identically, and
    their singular positions, are gone; equations already reduced as they are); KernelError
    in one line where it has none."""
    if not reduced or eqs.reduced_from is not None:
        return eqs
    from ..model.errors import ModelError
    from ..model.reduce import reduced_equations

    try:
        return reduced_equations(eqs)
    except ModelError as e:
        raise KernelError(f"{kernel}: --reduced: {e}") from None


def need_inertia(eqs: Equations, kernel: str) -> None:
    if eqs.M is None or eqs.Q is None:
        raise KernelError(f"{eqs.model}: the {kernel} kernel needs the mass matrix M and generalized forces Q; "
                          "the model has no inertia (give its bodies mass)")


def constraint_rows(eqs: Equations, kinematic_only: bool):
    """(A, gamma, names, phi rows) of the constraints a dynamics kernel keeps: the
    kinematic (non-driving) holonomic rows, or all of them, then the non-holonomic rows."""
    n = len(eqs.q)
    drv = driving(eqs)
    rows = [i for i in range(len(eqs.phi)) if not (kinematic_only and drv[i])]
    C, _, nh_gamma, nh_names = nh_rows(eqs)
    A = stack_rows([select_rows(eqs.phi_q, rows), C], n)
    gamma = [eqs.gamma[i] for i in rows] + nh_gamma
    row_names = [eqs.phi_names[i] for i in rows] + nh_names
    return A, gamma, row_names, rows
