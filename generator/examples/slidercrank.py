"""Slider-crank (biela-manivela) in 2-D reference-point coordinates, as in the thesis
(../shared/models/slider-crank.md).

Bodies 0 ground, 1 crank (length 1), 2 connecting rod (length 2), 3 slider; (x, y, theta)
per body at its reference point, 12 coordinates. Crank and rod have their reference point
at one end of the bar, the bar along local x; the slider's at its pin. Revolute pairs
ground (0,0) - crank (0,0), crank (1,0) - rod (0,0), rod (2,0) - slider (0,0); a prismatic
pair ground - slider along the ground's x axis (theta_0 - theta_3 = 0 and
(A_0 h)^T (r_0 + A_0 u_0 - r_3 - A_3 u_3) = 0, h = (0, 1)); the ground fixed (3 equations);
the crank driven, theta_1 = w t with w = 10 rpm. 12 equations.

Inertia: crank 1 kg (1/12 kg m^2 about its centre (0.5, 0)), rod 2 kg (2/3 kg m^2 about its
centre (1, 0)), slider 1 kg (0.01 kg m^2 at its pin), ground massless; gravity 9.81 along
-y. The actuator is the crank torque (acting between ground and crank), reported over two
revolutions (12 s).
"""
from __future__ import annotations

import math

from ..model import Model

W = 10.0 * 2.0 * math.pi / 60.0  # 10 rpm
T_END = 2 * 2 * math.pi / W  # two revolutions: 12 s
G = 9.81

# (name, guess at t = 0, range, velocity range, acceleration range); the ranges cover the
# two revolutions (rod angle |theta_2| <= asin(1/2), slider x in [1, 3]) with a margin.
_COORDS = [
    ("x0", 0.0, (-0.01, 0.01), (-0.01, 0.01), (-0.01, 0.01)),
    ("y0", 0.0, (-0.01, 0.01), (-0.01, 0.01), (-0.01, 0.01)),
    ("th0", 0.0, (-0.01, 0.01), (-0.01, 0.01), (-0.01, 0.01)),
    ("x1", 0.0, (-0.01, 0.01), (-0.01, 0.01), (-0.01, 0.01)),
    ("y1", 0.0, (-0.01, 0.01), (-0.01, 0.01), (-0.01, 0.01)),
    ("th1", 0.0, (-0.1, 4 * math.pi + 0.1), (W - 0.01, W + 0.01), (-0.01, 0.01)),
    ("x2", 1.0, (-1.1, 1.1), (-1.2, 1.2), (-1.2, 1.2)),
    ("y2", 0.0, (-1.1, 1.1), (-1.2, 1.2), (-1.2, 1.2)),
    ("th2", 0.0, (-0.6, 0.6), (-0.6, 0.6), (-0.7, 0.7)),
    ("x3", 3.0, (0.9, 3.1), (-1.3, 1.3), (-1.9, 1.9)),
    ("y3", 0.0, (-0.01, 0.01), (-0.01, 0.01), (-0.01, 0.01)),
    ("th3", 0.0, (-0.01, 0.01), (-0.01, 0.01), (-0.01, 0.01)),
]


def build() -> Model:
    m = Model("slidercrank")
    c = {}
    for name, guess, r, v, a in _COORDS:
        c[name] = m.coordinate(name, guess=guess, range=r, vrange=v, arange=a)
    m.time_range(0.0, T_END)
    ground = m.body2d("ground", c["x0"], c["y0"], c["th0"])
    crank = m.body2d("crank", c["x1"], c["y1"], c["th1"], mass=1.0, com=(0.5, 0.0), inertia=1 / 12)
    rod = m.body2d("rod", c["x2"], c["y2"], c["th2"], mass=2.0, com=(1.0, 0.0), inertia=2 / 3)
    slider = m.body2d("slider", c["x3"], c["y3"], c["th3"], mass=1.0, inertia=0.01)
    m.constraint(c["x0"], "ground_x")
    m.constraint(c["y0"], "ground_y")
    m.constraint(c["th0"], "ground_th")
    m.revolute2d(ground, (0.0, 0.0), crank, (0.0, 0.0), "rev_01")
    m.revolute2d(crank, (1.0, 0.0), rod, (0.0, 0.0), "rev_12")
    m.revolute2d(rod, (2.0, 0.0), slider, (0.0, 0.0), "rev_23")
    m.prismatic2d(ground, (0.0, 0.0), slider, (0.0, 0.0), (0.0, 1.0), "pri_03")
    m.drive(c["th1"] - W * m.t, "crank_angle")
    m.gravity((0.0, -G))
    m.actuator("crank_torque", c["th1"] - c["th0"])
    # where a controller runs it: a full crank turn at 5..60 rpm, accelerating at up to
    # 5 rad/s^2 either way, against a crank torque within +-60 N m
    m.operate(c["th1"], range=(0.0, 2 * math.pi), rate=(0.5, 2 * math.pi), accel=(-5.0, 5.0), cells=32)
    m.operate_input("crank_torque", (-60.0, 60.0))
    m.output("slider_x", c["x3"])
    m.output("slider_v", m.rate(c["x3"]))
    m.output("rod_angle", c["th2"])
    return m
