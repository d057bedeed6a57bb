"""Joints between bodies of any coordinate family, written against the Body interface
(`point`, `vector`): the equations are the thesis's (coincident points, perpendicular
vectors, a point on a line). Each function adds named constraints to the model and returns
their names. Local points and axes are body-frame numbers. `of_kind` closes a joint of a
tree's kind (model.joint_kinds, the JointKind interface) between two bodies with these.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import as_atom, dot, sub
from .bodies import Body, Body2D
from .errors import ModelError, check_name
from .frames import cross2, perpendiculars


def _eqs(model, exprs, name: str, suffixes) -> list[str]:
    check_name(model, "joint", name)  # before its equations' names are made from it
    names = []
    for e, s in zip(exprs, suffixes):
        e = as_atom(e)
        if e.is_const:
            if abs(e.value) > 1e-12:
                raise ModelError(f"{model.name}: joint {name!r}: equation {s} is the constant {e.value!r}")
            continue
        nm = f"{name}_{s}" if s else name
        model.constraint(e, nm)
        names.append(nm)
    return names


def revolute2d(model, b1: Body, p1, b2: Body, p2, name: str) -> list[str]:
    """Planar revolute pair: body point p1 of b1 coincides with p2 of b2 (2 equations)."""
    r1, r2 = b1.point(p1), b2.point(p2)
    return _eqs(model, [sub(x, y) for x, y in zip(r1, r2)], name, "xy")


def prismatic2d(model, b1: Body, p1, b2: Body, p2, normal, name: str, angle: float = 0.0) -> list[str]:
    """Planar prismatic pair, as in the thesis: the relative angle is constant and the point p2
    of b2 stays on the line through p1 of b1 whose normal is `normal` (in b1's frame):
    theta_1 - theta_2 = angle and (A1 h)^T (r1 + A1 u1 - r2 - A2 u2) = 0."""
    if isinstance(b1, Body2D) and isinstance(b2, Body2D):
        e_angle = sub(sub(b1.theta, b2.theta), as_atom(float(angle)))
    else:  # generic: the sine of the relative angle of the two x axes
        e_angle = sub(cross2(b2.vector([1.0, 0.0]), b1.vector([1.0, 0.0])), as_atom(math.sin(angle)))
    h = b1.vector(normal)
    d = [sub(x, y) for x, y in zip(b1.point(p1), b2.point(p2))]
    return _eqs(model, [e_angle, dot(h, d)], name, ["angle", "normal"])


def spherical(model, b1: Body, p1, b2: Body, p2, name: str) -> list[str]:
    r1, r2 = b1.point(p1), b2.point(p2)
    return _eqs(model, [sub(x, y) for x, y in zip(r1, r2)], name, "xyz")


def perpendicular(model, b1: Body, a1, b2: Body, a2, name: str) -> list[str]:
    """(A1 a1) . (A2 a2) = 0."""
    return _eqs(model, [dot(b1.vector(a1), b2.vector(a2))], name, [""])


def cardan(model, b1: Body, p1, a1, b2: Body, p2, a2, name: str) -> list[str]:
    """Cardan (universal) joint: a shared centre and perpendicular cross arms a1 (fixed in
    b1) and a2 (fixed in b2): 4 equations."""
    return spherical(model, b1, p1, b2, p2, name) + _eqs(model, [dot(b1.vector(a1), b2.vector(a2))], name, ["cross"])


def revolute(model, b1: Body, p1, a1, b2: Body, p2, a2, name: str) -> list[str]:
    """Spatial revolute pair: shared point and parallel axes a1, a2 (5 equations)."""
    u, v = perpendiculars(a2)
    w1 = b1.vector(a1)
    return spherical(model, b1, p1, b2, p2, name) + _eqs(
        model, [dot(w1, b2.vector(u)), dot(w1, b2.vector(v))], name, ["axis1", "axis2"])


def cylindrical(model, b1: Body, p1, a1, b2: Body, p2, a2, name: str, normals=None) -> list[str]:
    """Cylindrical pair (4 equations, as in the thesis): with x1, y1 perpendicular to the axis
    a1 of b1 (`normals`, body-frame, default any pair), the axis a2 of b2 is perpendicular to
    both, and so is d = P2 - P1 between the two bodies' axis points."""
    x1, y1 = normals if normals is not None else perpendiculars(a1)
    X, Y = b1.vector(x1), b1.vector(y1)
    z2 = b2.vector(a2)
    d = [sub(q, p) for p, q in zip(b1.point(p1), b2.point(p2))]
    return _eqs(model, [dot(X, z2), dot(Y, z2), dot(X, d), dot(Y, d)], name, ["par1", "par2", "line1", "line2"])


def prismatic(model, b1: Body, p1, a1, b2: Body, p2, a2, name: str, normals=None, lock=None) -> list[str]:
    """Spatial prismatic pair: a cylindrical pair whose spin is locked (5 equations): b1's
    vector lock[0] stays perpendicular to b2's vector lock[1] (default: normals[0] of b1 and
    normals[1] taken in b2, right when the two bodies' axes are aligned at assembly)."""
    x1, y1 = normals if normals is not None else perpendiculars(a1)
    names = cylindrical(model, b1, p1, a1, b2, p2, a2, name, (x1, y1))
    v1, v2 = lock if lock is not None else (x1, y1)
    return names + _eqs(model, [dot(b1.vector(v1), b2.vector(v2))], name, ["spin"])


def of_kind(model, kind, b1: Body, p1, b2: Body, p2, name: str, axis1=None) -> list[str]:
    """A joint of a tree's kind (a JointKind: its one-coordinate `steps`) as constraints
    between two bodies of any family: b2's point p2 moves against b1's p1 as the kind lets
    it, its axis the step's in b2's frame and `axis1` (default the same numbers) in b1's.
    One turn is a revolute pair (5 equations), one slide a prismatic pair (5), three turns
    (about one point) with no two in a row about parallel axes, Euler angles of any turn,
    a spherical pair (3)."""
    steps = kind.steps()
    turns = [s for s in steps if s.revolute]
    if len(steps) == 1:
        a2 = steps[0].axis
        pair = revolute if turns else prismatic
        return pair(model, b1, p1, a2 if axis1 is None else axis1, b2, p2, a2, name)
    if len(turns) == len(steps) == 3 and all(np.linalg.norm(np.cross(u.axis, v.axis)) > 1e-9
                                              for u, v in zip(steps, steps[1:])):
        return spherical(model, b1, p1, b2, p2, name)
    raise ModelError(f"{model.name}: joint {name!r}: a {kind!r} has no constraint form between two bodies "
                     f"(one turn, one slide or three turns, no two in a row about parallel axes)")


__all__ = ["of_kind", "revolute2d", "prismatic2d", "spherical", "perpendicular", "cardan", "revolute", "cylindrical",
           "prismatic"]
