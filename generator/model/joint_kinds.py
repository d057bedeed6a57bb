"""Joint kinds: how a joint's coordinates move its frame against its parent's.

    Revolute(axis)      1 coordinate: a turn by q about the unit axis
    Prismatic(axis)     1 coordinate: a slide by q along it
    Spherical(axes)     3 coordinates: three successive turns about the frame's own axes
                        (default "zyx": R = Rz(q0) Ry(q1) Rx(q2), Pinocchio's
                        JointModelSphericalZYX; singular where q1 = +-pi/2)
    FreeFlyer()         a floating base, Pinocchio's JointModelFreeFlyer: 7 configuration
                        numbers (x, y, z, qx, qy, qz, qw) and 6 velocities (vx, vy, vz,
                        wx, wy, wz); only at the root of a tree (Model.floating_base)

Each kind gives, from its coordinates (atoms), the rotation R (v_parent = R v_joint) and
the translation of its frame, and its motion subspace S(q) (columns (angular, linear), joint
axes). One definition serves every user: relative coordinates build their bases and points
from it (`place`), explicit trees store it (relative.TreeJoint, tree.py, urdf.py), and the
recursive kernels run over its one-coordinate `steps`: a spherical joint is its three turns
in series about one point, so the O(N) recursions never see more than one coordinate per
link. The single-coordinate kinds also give what those recursions ask of a link (its
placement after a constant one, the force component it transmits, I S, its outward
velocity and acceleration steps, its Jacobian column), each answered in the kind's own
class: a new kind of one coordinate is one class, and kind_names() lists it.
"""
from __future__ import annotations

import numpy as np

from ..ir import ZERO, Atom, Turn, add, as_atom, cross, dot, folded_mat, folded_vec, matmul, matvec, mtv, mul, sub, vadd, \
    vscale, vsub
from .errors import ModelError
from .frames import axis_rotation

_AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}


def _unit(axis, what: str) -> np.ndarray:
    a = np.asarray(axis, dtype=float)
    if a.shape != (3,) or not np.all(np.isfinite(a)) or not np.linalg.norm(a) > 0:
        raise ModelError(f"{what} axis must be 3 finite numbers, not all zero; got {axis!r}")
    n = np.linalg.norm(a)
    # an axis already unit (a base's) is kept as it is: dividing again can move its last bits
    return a if abs(n - 1.0) <= 4e-16 else a / n


_KINDS: list[type] = []  # the named kinds in the order they are defined (JointKind.__init_subclass__)


def kind_names() -> list[str]:
    """The names of the joint kinds, in the order they were defined (revolute first): the
    order a kernel's description counts them in."""
    return [k.name for k in _KINDS]


class JointKind:
    """The interface: `name`, `dof`, `steps()`, `rotation(q)`, `translation(q)`, `subspace(q)`,
    `place(rel, name, base, point, q)`. q: the joint's coordinates (atoms), `dof` of them."""

    name = ""
    dof = 0

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.__dict__.get("name"):  # a kind of its own name: known to kind_names()
            _KINDS.append(cls)

    def steps(self) -> list["JointKind"]:
        """Single-coordinate kinds whose series is this joint (one per coordinate, in order)."""
        return [self]

    def rotation(self, q) -> list[list[Atom]]:
        R = None
        for s, x in zip(self.steps(), q):
            Rs = s.rotation([x])
            R = Rs if R is None else matmul(R, Rs)
        return R

    def translation(self, q) -> list[Atom]:
        return [ZERO] * 3

    def subspace(self, q) -> list[tuple[list[Atom], list[Atom]]]:
        """S(q): joint-frame velocity (angular, linear) per unit rate of each coordinate."""
        cols = []
        for k, (s, x) in enumerate(zip(self.steps(), q)):
            w, v = s.motion(as_atom(1.0))
            for s2, x2 in zip(self.steps()[k + 1:], q[k + 1:]):  # into the later steps' axes
                Rs = s2.rotation([x2])
                w, v = mtv(Rs, w), mtv(Rs, v)
            cols.append((w, v))
        return cols

    def place(self, rel, name: str, base, point, q):
        """(base, point) of the joint frame in relative coordinates, from the parent's."""
        for s, x, nm in zip(self.steps(), q, self.coordinate_names(name)):
            base, point = s.place(rel, nm, base, point, [x])
        return base, point

    def coordinate_names(self, name: str) -> list[str]:
        """The names of a joint's coordinates (its own name for a single one)."""
        return [name]


class _Single(JointKind):
    """One coordinate along a unit axis; what the recursions ask of a link's joint. Each
    single-coordinate kind (Revolute, Prismatic) answers every question below in its own
    class: the O(N) kernels never ask which kind a link is."""

    dof = 1
    revolute = False  # a turn (joints.of_kind reads it: the constraint pair a step becomes)

    def __init__(self, axis):
        self.axis = _unit(axis, f"{self.name} joint")

    def __repr__(self):
        return f"{type(self).__name__}({tuple(float(x) for x in self.axis)})"

    def placed_rotation(self, fixed, q) -> list[list[Atom]]:
        """R with v_parent = R v_link: fixed @ Rot(axis, q), or the constant fixed."""
        raise NotImplementedError

    def offset(self, r, fixed, q) -> list[Atom]:
        """The link origin in the parent link's frame: r, or r + fixed axis q."""
        raise NotImplementedError

    def turn(self, fixed, q):
        """A Turn (ir.Turn) when the link's rotation is about a principal axis with no fixed
        placement, else None: congruences by it are cheaper than by its matrix."""
        return None

    def motion(self, s):
        """S s as (angular, linear)."""
        raise NotImplementedError

    def project(self, n, f) -> Atom:
        """S^T (n, f): the component of a force pair the joint transmits as its tau."""
        raise NotImplementedError

    def subspace_force(self, A, B, C):
        """U = I S of a spatial inertia [[A, B], [B^T, C]], as (n, f)."""
        raise NotImplementedError

    def link_acceleration(self, wpl, Rl, alp, acc, aqd, qdd):
        """RNEA's outward step: (angular velocity, angular acceleration, classical
        acceleration of the origin) of the link, its axes, from the parent's angular velocity
        wpl (link axes), angular acceleration alp (parent axes), the joint point's
        acceleration acc (link axes), aqd = axis qd and the coordinate's acceleration qdd."""
        raise NotImplementedError

    def link_velocity(self, wpl, vl, aqd):
        """ABA's outward step: (w, v, cw, cv), the link's spatial velocity and its
        velocity-product acceleration c = v x S qd, from the parent's motion in link axes
        (wpl; vl of the joint point) and aqd = axis qd."""
        raise NotImplementedError

    def accelerate(self, a1n, a1v, x):
        """ABA's last step: the link's spatial acceleration, the parent's (a1n, a1v, in link
        axes, with c) plus S x."""
        raise NotImplementedError

    def jacobian(self, a, p, c):
        """(linear, angular) Jacobian column of a point p for this joint, its axis a and its
        point c in the world."""
        raise NotImplementedError


class Revolute(_Single):
    name = "revolute"
    revolute = True

    def rotation(self, q) -> list[list[Atom]]:
        return axis_rotation(self.axis, q[0])

    def place(self, rel, name, base, point, q):
        return rel.base(f"{name}_axes", base, self.axis, q[0]), point

    def placed_rotation(self, fixed, q) -> list[list[Atom]]:
        Rq = axis_rotation(self.axis, q)
        if np.allclose(fixed, np.eye(3), atol=1e-15):
            return Rq
        return matmul(folded_mat(fixed), Rq)

    def offset(self, r, fixed, q) -> list[Atom]:
        return folded_vec(r)

    def turn(self, fixed, q):
        if not np.allclose(fixed, np.eye(3), atol=1e-15):
            return None
        for k in range(3):
            if np.allclose(self.axis, np.eye(3)[k], atol=1e-15):
                return Turn(k, q)
        return None

    def motion(self, s):
        return vscale(s, folded_vec(self.axis)), [ZERO] * 3

    def project(self, n, f) -> Atom:
        return dot(folded_vec(self.axis), n)

    def subspace_force(self, A, B, C):
        a = folded_vec(self.axis)
        return matvec(A, a), mtv(B, a)

    def link_acceleration(self, wpl, Rl, alp, acc, aqd, qdd):
        a = folded_vec(self.axis)
        return vadd(wpl, aqd), vadd(vadd(mtv(Rl, alp), vscale(qdd, a)), cross(wpl, aqd)), acc

    def link_velocity(self, wpl, vl, aqd):
        return vadd(wpl, aqd), vl, cross(wpl, aqd), cross(vl, aqd)

    def accelerate(self, a1n, a1v, x):
        return vadd(a1n, vscale(x, folded_vec(self.axis))), a1v

    def jacobian(self, a, p, c):
        return cross(a, vsub(p, c)), a


class Prismatic(_Single):
    name = "prismatic"

    def rotation(self, q) -> list[list[Atom]]:
        return folded_mat(np.eye(3))

    def translation(self, q) -> list[Atom]:
        return [mul(q[0], as_atom(float(x))) for x in self.axis]

    def place(self, rel, name, base, point, q):
        return base, rel.point(f"{name}_slide", point, self.translation(q), base)

    def placed_rotation(self, fixed, q) -> list[list[Atom]]:
        return folded_mat(fixed)

    def offset(self, r, fixed, q) -> list[Atom]:
        return vadd(folded_vec(r), vscale(q, folded_vec(np.asarray(fixed) @ self.axis)))

    def motion(self, s):
        return [ZERO] * 3, vscale(s, folded_vec(self.axis))

    def project(self, n, f) -> Atom:
        return dot(folded_vec(self.axis), f)

    def subspace_force(self, A, B, C):
        a = folded_vec(self.axis)
        return matvec(B, a), matvec(C, a)

    def link_acceleration(self, wpl, Rl, alp, acc, aqd, qdd):
        """The origin slides: Coriolis 2 w x (a qd) and a qdd."""
        a = folded_vec(self.axis)
        return wpl, mtv(Rl, alp), vadd(acc, vadd(vscale(as_atom(2.0), cross(wpl, aqd)), vscale(qdd, a)))

    def link_velocity(self, wpl, vl, aqd):
        """c = v x (0, a qd) = (0, w x a qd)."""
        return wpl, vadd(vl, aqd), [ZERO] * 3, cross(wpl, aqd)

    def accelerate(self, a1n, a1v, x):
        return a1n, vadd(a1v, vscale(x, folded_vec(self.axis)))

    def jacobian(self, a, p, c):
        return a, [ZERO] * 3


class Spherical(JointKind):
    """Three turns in series about the joint frame's axes named by `axes` (each turn about
    the axis of the frame the previous turns left): coordinates (q0, q1, q2)."""

    name = "spherical"
    dof = 3

    def __init__(self, axes: str = "zyx"):
        if len(axes) != 3 or any(a not in _AXES for a in axes) or axes[0] == axes[1] or axes[1] == axes[2]:
            raise ModelError(f"spherical joint axes must be three of x, y, z, no two in a row alike; got {axes!r}")
        self.axes = axes
        self._steps = [Revolute(_AXES[a]) for a in axes]

    def __repr__(self):
        return f"Spherical({self.axes!r})"

    def steps(self):
        return list(self._steps)

    def coordinate_names(self, name: str) -> list[str]:
        return [f"{name}_{a}" for a in self.axes]


class FreeFlyer(JointKind):
    """A free-flying base, Pinocchio's JointModelFreeFlyer convention. Configuration (7):
    the base origin in the world (x, y, z), then the unit quaternion (qx, qy, qz, qw) of
    its axes, v_world = R v_base; velocity (6): the origin's velocity (vx, vy, vz), then
    the angular velocity (wx, wy, wz), both in base axes; acceleration: the time
    derivatives of those six components. Its velocity is not the rate of its
    configuration, so it has no `steps`: the recursive kernels take it as the root of the
    tree (Model.floating_base), the M(q)-based kernels refuse it."""

    name = "free-flyer"
    dof = 6
    nq = 7
    CONFIGURATION = ("x", "y", "z", "qx", "qy", "qz", "qw")
    VELOCITY = ("vx", "vy", "vz", "wx", "wy", "wz")

    def __repr__(self):
        return "FreeFlyer()"

    def steps(self):
        raise ModelError("a free-flyer joint is no series of one-coordinate steps (its velocity is no rate "
                         "of its quaternion); it is only a tree's floating base")

    def rotation(self, q) -> list[list[Atom]]:
        """Eigen's (and Pinocchio's) matrix of a unit quaternion, from q[3:7]."""
        x, y, z, w = q[3:7]
        two = as_atom(2.0)

        def sq(a, b):  # 1 - 2 (a^2 + b^2)
            return sub(as_atom(1.0), mul(two, add(mul(a, a), mul(b, b))))

        def pair(a, b, c, d, sign):  # 2 (a b +- c d)
            return mul(two, (add if sign > 0 else sub)(mul(a, b), mul(c, d)))

        return [[sq(y, z), pair(x, y, z, w, -1), pair(x, z, y, w, 1)],
                [pair(x, y, z, w, 1), sq(x, z), pair(y, z, x, w, -1)],
                [pair(x, z, y, w, -1), pair(y, z, x, w, 1), sq(x, y)]]

    def translation(self, q) -> list[Atom]:
        return list(q[:3])

    def subspace(self, q):
        """Identity: column k of the velocity (linear first) moves the base alone."""
        e = [[as_atom(float(i == k)) for i in range(3)] for k in range(3)]
        return [([ZERO] * 3, e[k]) for k in range(3)] + [(e[k], [ZERO] * 3) for k in range(3)]

    def place(self, rel, name, base, point, q):
        raise ModelError(f"joint {name!r}: a free-flyer is only a tree's floating base (Model.floating_base)")

    def coordinate_names(self, name: str) -> list[str]:
        return [f"{name}_{c}" for c in self.CONFIGURATION]

    def velocity_names(self, name: str) -> list[str]:
        return [f"{name}_{c}" for c in self.VELOCITY]


__all__ = ["JointKind", "Revolute", "Prismatic", "Spherical", "FreeFlyer", "kind_names"]
