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

`--set envelope=True`: the model also declares where it operates, th1 over the motion's
sweep [0, pi] with a margin (from rest at the cube, th1 = th3 = th5 swing between 0 and pi,
th2 = th4 = th6 between -pi/6 and 0), so kernels with exact multipliers (step --integrator
rk4 --penalty 0, c-fixed) are analysed over its cover. Off by default: the envelope's cover
needs independent constraints, and the kernels that take the model's rows whole (e.g.
forward-dynamics) would refuse the redundant one instead of serving the declared box.

    build(envelope=False) -> Model   coordinates th1 .. th6, one free degree of freedom
"""
from __future__ import annotations

import math

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
# th1's rate and acceleration over the envelope, 5 % above their largest along the motion from
# rest: by energy, th1'^2 = 2 (V(0) - V(th1)) / m(th1), m(th1) = t^T M t with t the loop's
# tangent scaled to t_1 = 1 (m from 1.83 to 5.69 kg m^2); on a grid of 3,201 configurations of
# th1 in [-0.06, pi + 0.06]: |th1'| <= 2.2286 rad/s (at th1 = pi/2), and
# |th1''| = |V'(th1) + m'(th1) th1'^2 / 2| / m(th1) <= 2.2144 rad/s^2 (tests/test_bricard.py)
RATE, ACCEL, MARGIN, CELLS = 2.2286 * 1.05, 2.2144 * 1.05, 0.05, 512


def _rod_inertia(direction) -> tuple[float, float, float]:
    """Principal moments of a thin rod along a body axis: m L^2 / 12 about the two others."""
    rod = MASS * LENGTH ** 2 / 12.0
    return tuple(0.0 if d else rod for d in direction)


def build(envelope: bool = False) -> Model:
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
    if envelope:
        th1 = m.q[0]
        m.operate(th1, range=(-MARGIN, math.pi + MARGIN), rate=(-RATE, RATE), accel=(-ACCEL, ACCEL), cells=CELLS)
    return m
