"""A pendulum hanging from a block that slides on a horizontal guide, in 2-D reference-point
coordinates: (x, y, theta) for the block (at its centre) and for the pendulum (at its
pivot, the bar along local x), 6 coordinates.

Equations: the block's prismatic pair with the ground along x (theta_b = 0, y_b = 0, as in
the thesis's prismatic pair), the revolute pair block (0, 0) - pendulum (0, 0): 4
equations, 2 degrees of freedom. Block 2 kg (0.05 kg m^2), pendulum a uniform bar of 1 kg
and 1 m (1/12 kg m^2 about its centre); gravity 9.81 along -y. Released from rest with
the pendulum 60 degrees from the vertical; no drive: a forward-dynamics example (the block
is free, so T + V and the horizontal momentum are conserved).
"""
from __future__ import annotations

import math

from ..model import Model

G = 9.81
L = 1.0
THETA0 = -math.pi / 2 + math.radians(60.0)  # bar angle from +x; -pi/2 hangs straight down


def build() -> Model:
    m = Model("pendulum_block")
    # ranges cover the free swing over 10 s (0 <= x_b < 0.29, |x_b'| < 0.74, |x_b''| < 2.7,
    # the pendulum within 60 degrees of the vertical, |theta_p'| < 4.43, |theta_p''| < 13.6)
    xb = m.coordinate("xb", guess=0.0, range=(-0.4, 0.4), vrange=(-1.0, 1.0), arange=(-6.0, 6.0))
    yb = m.coordinate("yb", guess=0.0, range=(-0.01, 0.01), vrange=(-0.01, 0.01), arange=(-0.01, 0.01))
    thb = m.coordinate("thb", guess=0.0, range=(-0.01, 0.01), vrange=(-0.01, 0.01), arange=(-0.01, 0.01))
    xp = m.coordinate("xp", guess=0.0, range=(-0.4, 0.4), vrange=(-1.0, 1.0), arange=(-6.0, 6.0))
    yp = m.coordinate("yp", guess=0.0, range=(-0.01, 0.01), vrange=(-0.01, 0.01), arange=(-0.01, 0.01))
    thp = m.coordinate("thp", guess=THETA0, range=(-2.7, -0.4), vrange=(-4.8, 4.8), arange=(-16.0, 16.0))
    m.time_range(0.0, 10.0)
    ground = m.ground(dim=2)
    block = m.body2d("block", xb, yb, thb, mass=2.0, inertia=0.05)
    pend = m.body2d("pendulum", xp, yp, thp, mass=1.0, com=(L / 2, 0.0), inertia=L ** 2 / 12)
    m.prismatic2d(ground, (0.0, 0.0), block, (0.0, 0.0), (0.0, 1.0), "guide")
    m.revolute2d(block, (0.0, 0.0), pend, (0.0, 0.0), "pivot")
    m.gravity((0.0, -G))
    m.output("swing_angle", thp + math.pi / 2)
    m.output("bob_x", pend.point((L, 0.0))[0])
    m.output("bob_y", pend.point((L, 0.0))[1])
    return m
