"""Models built as an explicit tree of joints, one joint (and the link it moves) at a time.

    tree = JointTree(model)
    k = tree.joint(name, kind, parent=None, origin=(0, 0, 0), R=None, mass=0.0, com=(0, 0, 0),
                   inertia=None, range=(-pi, pi), vrange=(-10, 10), arange=(-20, 20), actuated=True)
    tree.finish()

Each joint's frame is its parent joint's frame (the world's for parent None) moved by
`origin` and turned by `R` (v_parent = R v, numbers), then moved by `kind`
(model.joint_kinds: Revolute, Prismatic, Spherical) through its coordinates: one per degree
of freedom, named by kind.coordinate_names(name) (a spherical joint's: name_z, name_y,
name_x), each with the given ranges and, when `actuated`, an actuator of its own name.
The link it moves has `mass`, centre of mass `com` and inertia about it `inertia` (joint
frame), and a frame of the joint's name (what frame-kinematics serves). The model gets the
relative trees every kernel reads (kind.place) and, at finish(), the explicit tree
(Model.joint_tree) the recursive kernels run over: the same tree from_urdf builds.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import ModelError
from .joint_kinds import JointKind
from .relative import TreeJoint


def about_origin(m: float, c, Ic) -> tuple[float, np.ndarray, np.ndarray]:
    """(m, h = m c, inertia about the frame origin) of a mass m at c with inertia Ic about c."""
    c = np.asarray(c, dtype=float)
    return m, m * c, np.asarray(Ic, dtype=float) + m * (float(c @ c) * np.eye(3) - np.outer(c, c))


class JointTree:
    def __init__(self, model):
        self.model = model
        self.rel = model.relative()
        self._frames: list = []  # per joint: (relative base, point) of its frame
        self._joints: list[TreeJoint] = []

    def joint(self, name: str, kind: JointKind, parent: int | None = None, origin=(0.0, 0.0, 0.0), R=None,
              mass: float = 0.0, com=(0.0, 0.0, 0.0), inertia=None, range=(-math.pi, math.pi),
              vrange=(-10.0, 10.0), arange=(-20.0, 20.0), actuated: bool = True) -> int:
        """Add a joint and its link; returns its index (the `parent` of joints below it)."""
        m = self.model
        if not isinstance(kind, JointKind):
            raise ModelError(f"{m.name}: joint {name!r}: kind must be a joint_kinds.JointKind, got {kind!r}")
        if parent is not None and not 0 <= parent < len(self._joints):
            raise ModelError(f"{m.name}: joint {name!r}: parent {parent!r} is not a joint added before it")
        base, point = (self.rel.world, self.rel.origin) if parent is None else self._frames[parent]
        origin = np.asarray(origin, dtype=float)
        R = np.eye(3) if R is None else np.asarray(R, dtype=float)
        if np.any(origin != 0):
            point = self.rel.point(f"{name}_origin", point, origin, base)
        if not np.allclose(R, np.eye(3), atol=1e-15):
            base = self.rel.fixed_base(f"{name}_placement", base, R)
        names = kind.coordinate_names(name)
        q = [m.coordinate(c, range=range, vrange=vrange, arange=arange) for c in names]
        base, point = self.rel.joint(kind, name, base, point, q)
        Ic = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=float)
        if Ic.shape == (3,):  # principal moments, as Body.set_inertia takes them
            Ic = np.diag(Ic)
        if Ic.shape != (3, 3):
            raise ModelError(f"{m.name}: joint {name!r}: inertia must be 3 numbers or a 3x3 matrix, got {inertia!r}")
        mass, h, I = about_origin(float(mass), com, Ic)
        if mass > 0 or np.any(Ic):
            self.rel.body(name, base, point).set_inertia(mass, com=com, inertia=Ic)
        if actuated:
            for c, x in zip(names, q):
                m.actuator(c, x)
        self._frames.append((base, point))
        self._joints.append(TreeJoint(name, tuple(q), parent, kind, tuple(map(tuple, R)), tuple(origin), mass,
                                      tuple(h), tuple(map(tuple, I)), name,
                                      ((name, tuple(map(tuple, np.eye(3))), (0.0, 0.0, 0.0)),)))
        return len(self._joints) - 1

    def finish(self):
        """Set the model's explicit tree (Model.joint_tree); returns the model."""
        self.model.joint_tree = tuple(self._joints)
        return self.model


__all__ = ["JointTree", "about_origin"]
