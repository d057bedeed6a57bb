"""Bricard's linkage, the over-constrained mechanism of the IFToMM multibody benchmark
(problem A04): five bars of 1 m and 1 kg joined in a closed loop with the ground by six
revolute joints, under gravity (0, -9.81, 0).

Grübler's count gives no degree of freedom (6 joint angles, 6 loop equations); the joints'
orientation leaves one: the loop's 6 equations have rank 5 at every configuration of the
motion, one of them redundant. The mechanism starts at rest in the benchmark's initial
position, the joint points on the corners of a unit cube (every angle zero):

    P1 = (0, 0, 0)  P2 = (1, 0, 0)  P3 = (1, -1, 0)  P4 = (1, -1, 1)  P5 = (0, -1, 1)  P6 = (0, 0, 1)

bar k from P_k to P_k+1, the ground from P6 back to P1; the joint at P_k turns about the axis
perpendicular to both bars that meet there (y, z, x, y, z, x for k = 1..6), so bar 2 hangs
from P2 and swings down under gravity. The bars are thin rods (m L^2 / 12 about their
transverse axes, none about their own). Outputs: P3_x, P3_y, P3_z, the end of the second bar,
the point the benchmark reports over its 10 s (as the benchmark's OpenSim implementation
does).

Relative coordinates: th1 .. th6, the joint angles from the ground along the loop; the loop
closes at P6 (the point: 3 equations `close_x/y/z`; the orientation of the axes after the
sixth joint with the ground's: 3 equations `close_rx/ry/rz`).

    build() -> Model   coordinates th1 .. th6, one free degree of freedom
"""
from __future__ import annotations

from ..model import Model

LENGTH, MASS, G = 1.0, 1.0, 9.81
# (joint axis, the bar that follows it as a vector from its joint), in loop order from P1
LOOP = (((0.0, 1.0, 0.0), (1.0, 0.0, 0.0)),
        ((0.0, 0.0, 1.0), (0.0, -1.0, 0.0)),
        ((1.0, 0.0, 0.0), (0.0, 0.0, 1.0)),
        ((0.0, 1.0, 0.0), (-1.0, 0.0, 0.0)),
        ((0.0, 0.0, 1.0), (0.0, 1.0, 0.0)),
        ((1.0, 0.0, 0.0), None))  # the sixth joint, at P6, turns the ground back onto itself
T_END = 10.0  # the benchmark's horizon


def _rod_inertia(direction) -> tuple[float, float, float]:
    """Principal moments of a thin rod along a body axis: m L^2 / 12 about the two others."""
    rod = MASS * LENGTH ** 2 / 12.0
    return tuple(0.0 if d else rod for d in direction)


def build() -> Model:
    m = Model("bricard")
    tree = m.relative()
    base, point = tree.world, tree.origin
    bars = []
    for k, (axis, bar) in enumerate(LOOP, start=1):
        q = m.coordinate(f"th{k}", range=(-3.2, 3.2), vrange=(-20.0, 20.0), arange=(-400.0, 400.0))
        base = tree.base(f"joint{k}_axes", base, axis, q)
        if bar is None:
            break
        body = tree.body(f"bar{k}", base, point)
        body.set_inertia(MASS, com=tuple(0.5 * LENGTH * c for c in bar),
                         inertia=_rod_inertia([abs(c) for c in bar]))
        bars.append(body)
        point = tree.point(f"P{k + 1}", point, tuple(LENGTH * c for c in bar), base)
    ground_end = tree.point("P6_ground", tree.origin, (0.0, 0.0, LENGTH), tree.world)
    tree.loop(point, ground_end, tree.world, "close")
    tree.loop_orientation(base, tree.world, "close")
    m.gravity((0.0, -G, 0.0))
    p3 = bars[1].point((0.0, -LENGTH, 0.0))
    for c, v in zip("xyz", p3):
        m.output(f"P3_{c}", v)
    m.time_range(0.0, T_END)
    return m
