"""Relative coordinates (the thesis's kinematic operators): a tree of bases and a tree of points.

A base is a set of axes obtained from its parent base by a rotation about an axis (given in
the parent, and equal in the child) by an angle: a coordinate, a constant or any expression
of the coordinates. A point is its parent point plus a vector whose components are given
in some base. From these the operators below build every kinematic quantity, each
expressed in the base the caller chooses:

    rotation(a, b)                 R with v_b = R v_a
    position(p, r, base)           vector from point p to point r
    angular_velocity(b, rel, base) angular velocity of base b relative to base rel
    velocity(r, p, frame, base)    velocity of r relative to the frame (point p, base frame)

Each vector is rotated only along the tree path that joins its own base to the requested
one, and rotations are built once per pair of bases, so choosing the base in which a
vector is short keeps the expressions short (as the thesis does).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import ZERO, Atom, add, as_atom, identity, matmul, matvec, mul, sub, time_derivative, transpose, vconst
from .bodies import Body
from .errors import ModelError, check_name
from .frames import axis_rotation, vee
from .joint_kinds import JointKind


class Base:
    def __init__(self, name: str, parent: "Base | None", R, axis=None, angle: Atom | None = None):
        self.name = name
        self.parent = parent
        self.R = R  # v_parent = R v_self
        self.axis = None if axis is None else np.asarray(axis, dtype=float) / np.linalg.norm(axis)
        self.angle = angle
        self.depth = 0 if parent is None else parent.depth + 1

    def __repr__(self):
        return f"Base({self.name})"


class RPoint:
    def __init__(self, name: str, parent: "RPoint | None", vector, base: Base | None):
        self.name = name
        self.parent = parent
        self.vector = vector
        self.base = base
        self.depth = 0 if parent is None else parent.depth + 1

    def __repr__(self):
        return f"Point({self.name})"


def _path(a, b):
    """(nodes from a up to the common ancestor, excluded; nodes from b up, excluded; ancestor)."""
    up_a, up_b = [], []
    while a.depth > b.depth:
        up_a.append(a)
        a = a.parent
    while b.depth > a.depth:
        up_b.append(b)
        b = b.parent
    while a is not b:
        up_a.append(a)
        up_b.append(b)
        a, b = a.parent, b.parent
    return up_a, up_b, a


class Relative:
    """The trees of one model. `world` is the ground base, `origin` the ground origin."""

    def __init__(self, model, world: str = "world", origin: str = "O"):
        self.model = model
        self.world = Base(world, None, identity(3))
        self.origin = RPoint(origin, None, None, None)
        self._names: set[str] = {world, origin}
        self._up: dict = {}
        self._rot: dict = {}
        self._pos: dict = {}

    def _name(self, name: str) -> str:
        check_name(self.model, "relative base or point", name)
        if name in self._names:
            raise ModelError(f"{self.model.name}: relative base or point {name!r} is defined twice")
        self._names.add(name)
        return name

    # ---- building the trees -----------------------------------------------------------------
    def base(self, name: str, parent: Base, axis, angle) -> Base:
        """A base turned from `parent` by `angle` about `axis` (components in the parent)."""
        angle = as_atom(angle)
        return Base(self._name(name), parent, axis_rotation(axis, angle), axis, angle)

    def joint(self, kind: JointKind, name: str, base: Base, point: RPoint, q) -> tuple[Base, RPoint]:
        """The frame a joint of `kind` moves by its coordinates q from (base, point): the
        bases and points it needs, named after `name` (joint_kinds.JointKind.place)."""
        return kind.place(self, name, base, point, list(q))

    def fixed_base(self, name: str, parent: Base, R) -> Base:
        """A base at a constant orientation: v_parent = R v_base (R a rotation matrix)."""
        R = np.asarray(R, dtype=float)
        if not np.allclose(R @ R.T, np.eye(3), atol=1e-12):
            raise ModelError(f"{self.model.name}: fixed base {name!r}: the matrix is not a rotation")
        return Base(self._name(name), parent, [vconst(r) for r in R])

    def point(self, name: str, parent: RPoint, vector, base: Base) -> RPoint:
        """parent + vector, the vector's components given in `base`."""
        return RPoint(self._name(name), parent, vconst(vector), base)

    # ---- operators --------------------------------------------------------------------------
    def _to_ancestor(self, b: Base, anc: Base):
        """R with v_anc = R v_b."""
        if b is anc:
            return None  # identity
        key = (b, anc)
        R = self._up.get(key)
        if R is None:
            above = self._to_ancestor(b.parent, anc)
            R = b.R if above is None else matmul(above, b.R)
            self._up[key] = R
        return R

    def rotation(self, a: Base, b: Base):
        """R such that v_b = R v_a."""
        key = (a, b)
        R = self._rot.get(key)
        if R is None:
            _, _, anc = _path(a, b)
            Ra = self._to_ancestor(a, anc)
            Rb = self._to_ancestor(b, anc)
            if Rb is None:
                R = Ra if Ra is not None else identity(3)
            elif Ra is None:
                R = transpose(Rb)
            else:
                R = matmul(transpose(Rb), Ra)
            self._rot[key] = R
        return R

    def express(self, v, a: Base, b: Base):
        """Components in base b of a vector given in base a."""
        if a is b:
            return list(v)
        return matvec(self.rotation(a, b), v)

    def position(self, p: RPoint, r: RPoint, base: Base):
        """The vector from p to r, in `base`."""
        key = (p, r, base)
        out = self._pos.get(key)
        if out is None:
            up_p, up_r, _ = _path(p, r)
            out = [ZERO, ZERO, ZERO]
            for node in up_r:
                out = [add(x, y) for x, y in zip(out, self.express(node.vector, node.base, base))]
            for node in up_p:
                out = [sub(x, y) for x, y in zip(out, self.express(node.vector, node.base, base))]
            self._pos[key] = out
        return out

    def angular_velocity(self, b: Base, rel: Base | None = None, base: Base | None = None):
        """Angular velocity of base b relative to base rel (default world), in `base` (default b)."""
        rel = rel or self.world
        base = base or b
        up_b, up_rel, _ = _path(b, rel)
        tang = self.model._tangents()
        w = [ZERO, ZERO, ZERO]
        for sign, nodes in ((1.0, up_b), (-1.0, up_rel)):
            for node in nodes:
                if node.angle is None:
                    continue
                rate = time_derivative(node.angle, tang)
                if rate is ZERO:
                    continue
                contrib = self.express([mul(as_atom(sign * float(k)), rate) for k in node.axis], node, base)
                w = [add(x, y) for x, y in zip(w, contrib)]
        return w

    def velocity(self, r: RPoint, p: RPoint | None = None, frame: Base | None = None, base: Base | None = None):
        """Velocity of point r relative to the frame (point p, base `frame`), in `base`.

        The components of position(p, r, frame) differentiated in time are the velocity
        relative to that frame, in its axes; then they are turned into `base`."""
        p = p or self.origin
        frame = frame or self.world
        base = base or frame
        v = time_derivative(self.position(p, r, frame), self.model._tangents())
        return self.express(v, frame, base)

    # ---- bodies and loops -------------------------------------------------------------------
    def body(self, name: str, base: Base, point: RPoint) -> "RelBody":
        """A body whose axes are `base` and whose body-frame origin is `point`."""
        return RelBody(self, name, base, point)

    def loop(self, p: RPoint, r: RPoint, base: Base, name: str, components=None) -> list[str]:
        """Loop closure: the points p and r (reached along two branches) coincide. One equation
        per component in `base` (components that vanish identically are skipped)."""
        check_name(self.model, "loop", name)
        v = self.position(p, r, base)
        names = []
        for k in (components if components is not None else range(3)):
            e = v[k]
            if e.is_const:
                if abs(e.value) > 1e-12:
                    raise ModelError(f"{self.model.name}: loop {name!r}: component {'xyz'[k]} is the constant "
                                     f"{e.value!r}, so the loop cannot close")
                continue
            nm = f"{name}_{'xyz'[k]}"
            self.model.constraint(e, nm)
            names.append(nm)
        return names

    def loop_orientation(self, a: Base, b: Base, name: str, R0=None) -> list[str]:
        """Orientation loop: rotation(a, b) equals R0 (default identity): 3 equations from the
        antisymmetric part of R R0^T (valid near the closed configuration)."""
        check_name(self.model, "orientation loop", name)
        R = self.rotation(a, b)
        if R0 is not None:
            R = matmul(R, np.asarray(R0, dtype=float).T.tolist())
        names = []
        for k, e in enumerate(vee(R)):
            if e.is_const:
                continue
            nm = f"{name}_r{'xyz'[k]}"
            self.model.constraint(e, nm)
            names.append(nm)
        return names


@dataclass(frozen=True)
class TreeJoint:
    """One joint of an explicit tree (Model.joint_tree): its frame is the parent joint's
    frame (the world's when `parent` is None) moved by `r` and turned by `R` (v_parent = R v,
    numbers), then moved by its `joint` (a joint_kinds.JointKind) through its coordinates
    `q` (a tuple, joint.dof atoms). `mass`, first moment `h` = mass c and inertia `I` about
    the frame origin, in its axes: all its link carries (fixed links merged), the model's
    body `body`. `frames`: (name, R, p) of the frames it carries (its link's, those of links
    fixed to it), v_joint = R v_frame, origin p in the joint frame: what frame-kinematics
    serves."""
    name: str
    q: tuple
    parent: int | None
    joint: JointKind
    R: tuple
    r: tuple
    mass: float
    h: tuple
    I: tuple
    body: str
    frames: tuple = ()

    @property
    def kind(self) -> str:
        return self.joint.name


@dataclass(frozen=True)
class FloatingBase:
    """The free-flying root of an explicit tree (Model.floating_base; from_urdf(floating=True)):
    the joints whose `parent` is None hang from its frame instead of the world's. `joint` a
    joint_kinds.FreeFlyer; `q` its 7 configuration symbols, `v` its 6 velocities, `a` their
    6 rates (the FreeFlyer convention); `mass`, `h`, `I` and `frames` of the links it
    carries, as a TreeJoint's."""
    name: str
    joint: JointKind
    q: tuple
    v: tuple
    a: tuple
    mass: float
    h: tuple
    I: tuple
    frames: tuple = ()


class RelBody(Body):
    def __init__(self, tree: Relative, name: str, base: Base, point: RPoint):
        self.tree = tree
        self.base = base
        self.origin = point
        super().__init__(tree.model, name)

    def _rotation_matrix(self):
        return self.tree.rotation(self.base, self.tree.world)

    def _point(self, local):
        o = self.tree.position(self.tree.origin, self.origin, self.tree.world)
        return [add(x, y) for x, y in zip(o, matvec(self.rotation(), local))]

    def _angular_velocity(self):
        return self.tree.angular_velocity(self.base, self.tree.world, self.base)


__all__ = ["Base", "FloatingBase", "RPoint", "Relative", "RelBody", "TreeJoint"]
