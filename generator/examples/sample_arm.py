"""The 6-revolute sample manipulator of Pinocchio (`pinocchio.buildSampleModelManipulator`,
pin 4.1) in relative coordinates, for the side-by-side benchmark of recursive dynamics.

Joints, parents first: shoulder1 about x, shoulder2 about y, shoulder3 about z (all at the
origin), elbow about y one unit up along the shoulder3 z axis, wrist1 about x one more
unit up, wrist2 about y at the wrist1 point. No placement turns the axes. Bodies: "joint"
bodies of 0.1 kg with inertia 0.01 I at the joint point (shoulder1, shoulder2, wrist1) and
"arm" bodies of 1 kg, centre of mass 0.5 up the link's z axis, inertia I about it
(shoulder3, elbow, wrist2). Gravity (0, 0, -9.81). One torque actuator per joint.
tests/test_kernels_recursive.py compares these numbers with pinocchio's model when pin
is installed.

Each Pinocchio joint frame is its parent's frame moved by the placement and turned by the
joint; here the joint's base turns from its parent's base by the coordinate, and its
point is the parent's point plus the placement translation, given in the parent's base.
"""
from __future__ import annotations

from ..model import Model

G = 9.81
# (name, axis, placement translation in the parent joint's axes, (mass, com, inertia about com))
JOINT_BODY = (0.1, (0.0, 0.0, 0.0), (0.01, 0.01, 0.01))
ARM_BODY = (1.0, (0.0, 0.0, 0.5), (1.0, 1.0, 1.0))
X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
JOINTS = (
    ("shoulder1", X, (0.0, 0.0, 0.0), JOINT_BODY),
    ("shoulder2", Y, (0.0, 0.0, 0.0), JOINT_BODY),
    ("shoulder3", Z, (0.0, 0.0, 0.0), ARM_BODY),
    ("elbow", Y, (0.0, 0.0, 1.0), ARM_BODY),
    ("wrist1", X, (0.0, 0.0, 1.0), JOINT_BODY),
    ("wrist2", Y, (0.0, 0.0, 0.0), ARM_BODY),
)
Q_LIMIT, QD_LIMIT, QDD_LIMIT = 3.14, 10.0, 100.0


def build() -> Model:
    m = Model("sample_arm")
    tree = m.relative()
    base, point = tree.world, tree.origin
    for name, axis, placement, (mass, com, inertia) in JOINTS:
        q = m.coordinate(name, range=(-Q_LIMIT, Q_LIMIT), vrange=(-QD_LIMIT, QD_LIMIT),
                         arange=(-QDD_LIMIT, QDD_LIMIT))
        point = tree.point(f"{name}_point", point, placement, base) if any(placement) else point
        base = tree.base(f"{name}_axes", base, axis, q)
        tree.body(name, base, point).set_inertia(mass, com=com, inertia=inertia)
        m.actuator(f"tau_{name}", q)
    m.gravity((0.0, 0.0, -G))
    return m
