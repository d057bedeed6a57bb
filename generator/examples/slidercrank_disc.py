"""A slider-crank driving a disc, in relative coordinates (trees of bases and points).

The slider-crank of slidercrank.py (crank 1, rod 2, same masses, crank driven at 10 rpm)
whose slider is a rack meshing with a pinion disc: a disc of radius 0.25 (2 kg, uniform)
turning about a fixed axle at (2, 0.25); rolling without slip makes x_s - r phi_3 constant.

Coordinates (4): crank angle phi1 (about z, from world), rod angle phi2 (relative to the
crank), slider position xs, disc angle phi3. Equations: the loop closure rod end = slider
pin (x and y components in world axes), the rack-and-pinion x_s - r phi_3 = 3, the crank
drive phi_1 = w t: 4 equations. Gravity 9.81 along -y; the actuator is the crank torque.
One crank revolution, 6 s.

Its operating envelope (where a controller runs it): a full crank turn at the drive's rate
(within the declared rate and acceleration ranges of phi1), so the kernels that solve with
the constraints (forward and linearized dynamics, inverse dynamics with the torque) are
analysed over the consistent states of that turn, where the mechanism is nowhere singular
(the rod is twice the crank), not over the declared box of the four coordinates, which
holds states off the loop where their pivots vanish. `envelope=False` (`--set
envelope=False`): the model without it, its kernels pinned to the driven motion.
"""
from __future__ import annotations

import math

from ..model import Model

W = 10.0 * 2.0 * math.pi / 60.0
R_DISC = 0.25
M_DISC = 2.0
G = 9.81
T_END = 2 * math.pi / W


def build(envelope: bool = True) -> Model:
    m = Model("slidercrank_disc")
    # ranges: rod angle relative to the crank phi2 = theta2 - phi1 with |theta2| <= asin(1/2)
    # = 0.5236, slider in [1, 3], disc angle (xs - 3) / r in [-8, 0]; rates and accelerations
    # from the same closed forms (|theta2'| <= w/2 ...), with a margin
    p1 = m.coordinate("phi1", guess=0.0, range=(-0.1, 2 * math.pi + 0.1), vrange=(W - 0.01, W + 0.01),
                      arange=(-0.01, 0.01))
    p2 = m.coordinate("phi2", guess=0.0, range=(-2 * math.pi - 0.7, 0.7), vrange=(-1.7, -0.4), arange=(-0.7, 0.7))
    xs = m.coordinate("xs", guess=3.0, range=(0.9, 3.1), vrange=(-1.3, 1.3), arange=(-1.9, 1.9))
    p3 = m.coordinate("phi3", guess=0.0, range=(-8.5, 0.5), vrange=(-5.2, 5.2), arange=(-7.6, 7.6))
    m.time_range(0.0, T_END)
    tree = m.relative()
    Wb, O = tree.world, tree.origin
    z = (0.0, 0.0, 1.0)
    crank_b = tree.base("crank_axes", Wb, z, p1)
    rod_b = tree.base("rod_axes", crank_b, z, p2)
    disc_b = tree.base("disc_axes", Wb, z, p3)
    B = tree.point("B", O, (1.0, 0.0, 0.0), crank_b)
    C = tree.point("C", B, (2.0, 0.0, 0.0), rod_b)
    S = tree.point("S", O, [xs, 0.0, 0.0], Wb)
    D = tree.point("D", O, (2.0, R_DISC, 0.0), Wb)
    tree.body("crank", crank_b, O).set_inertia(1.0, com=(0.5, 0, 0), inertia=(0.0, 1 / 12, 1 / 12))
    tree.body("rod", rod_b, B).set_inertia(2.0, com=(1.0, 0, 0), inertia=(0.0, 2 / 3, 2 / 3))
    tree.body("slider", Wb, S).set_inertia(1.0, inertia=(0.01, 0.01, 0.01))
    disc_i = M_DISC * R_DISC ** 2
    tree.body("disc", disc_b, D).set_inertia(M_DISC, inertia=(disc_i / 4, disc_i / 4, disc_i / 2))
    tree.loop(C, S, Wb, "loop")
    m.constraint(xs - R_DISC * p3 - 3.0, "rack_pinion")
    m.drive(p1 - W * m.t, "crank_angle")
    m.gravity((0.0, -G, 0.0))
    m.actuator("crank_torque", p1)
    if envelope:
        m.operate(p1, range=(-0.1, 2 * math.pi + 0.1), rate=(W - 0.01, W + 0.01), accel=(-0.01, 0.01), cells=32)
    m.output("slider_x", xs)
    m.output("disc_angle", p3)
    m.output("disc_rate", m.rate(p3))
    m.output("rod_angle", p1 + p2)
    return m
