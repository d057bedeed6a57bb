"""An N-body spatial serial chain in relative coordinates, the scaling benchmark of the
dynamics kernels (issue 14): joint k turns about z, y, x in turn (k mod 3), each link a
uniform rod of 1 kg and 0.3 m along its own x axis, the next joint at its end; gravity
(0, 0, -9.81); one torque actuator per joint.

    build(n=6) -> Model   coordinates th0 .. th{n-1}
"""
from __future__ import annotations

from ..model import Model
from ..model.errors import ModelError

LENGTH, MASS = 0.3, 1.0
AXES = ((0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0))


def build(n: int = 6) -> Model:
    n = int(n)
    if n < 1:
        raise ModelError(f"spatial_chain: n must be at least 1, got {n}")
    m = Model("spatial_chain")
    tree = m.relative()
    base, point = tree.world, tree.origin
    rod = MASS * LENGTH ** 2 / 12.0
    for k in range(n):
        q = m.coordinate(f"th{k}", range=(-3.2, 3.2), vrange=(-5.0, 5.0), arange=(-50.0, 50.0))
        if k:
            point = tree.point(f"P{k}", point, (LENGTH, 0.0, 0.0), base)
        base = tree.base(f"link{k}_axes", base, AXES[k % 3], q)
        tree.body(f"link{k}", base, point).set_inertia(MASS, com=(LENGTH / 2, 0.0, 0.0),
                                                       inertia=(1e-4, rod, rod))
        m.actuator(f"tau{k}", q)
    m.gravity((0.0, 0.0, -9.81))
    return m
