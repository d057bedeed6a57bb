"""Four-bar linkage in 2-D natural coordinates (the 1985 natural-coordinates paper).

Fixed points A = (0, 0) and D = (4, 0); basic points B and C move, q = (xB, yB, xC, yC).
Rigid bars |B - A| = 1 (crank), |C - B| = 3.5 (coupler), |D - C| = 2.5 (rocker); the crank
is driven at 10 rpm by xB sin(w t) - yB cos(w t) = 0. A crank-rocker (Grashof: 1 + 4 < 3.5
+ 2.5), so the crank turns fully; one revolution takes 6 s.
"""
from __future__ import annotations

import math

from ..ir import cos, sin
from ..model import Model

W = 10.0 * 2.0 * math.pi / 60.0  # 10 rpm in rad/s


def build() -> Model:
    m = Model("fourbar")
    xA, yA, xD, yD = 0.0, 0.0, 4.0, 0.0
    xB = m.coordinate("xB", guess=1.0, range=(-1.2, 1.2), vrange=(-1.5, 1.5), arange=(-2.0, 2.0))
    yB = m.coordinate("yB", guess=0.0, range=(-1.2, 1.2), vrange=(-1.5, 1.5), arange=(-2.0, 2.0))
    xC = m.coordinate("xC", guess=3.0, range=(1.0, 6.5), vrange=(-2.0, 2.0), arange=(-3.0, 3.0))
    yC = m.coordinate("yC", guess=2.5, range=(-3.0, 3.0), vrange=(-2.0, 2.0), arange=(-3.0, 3.0))
    m.time_range(0.0, 6.0)
    # constant-distance constraints: quadratic in the coordinates
    m.constraint((xB - xA) ** 2 + (yB - yA) ** 2 - 1.0 ** 2, "bar_AB")
    m.constraint((xC - xB) ** 2 + (yC - yB) ** 2 - 3.5 ** 2, "bar_BC")
    m.constraint((xD - xC) ** 2 + (yD - yC) ** 2 - 2.5 ** 2, "bar_CD")
    wt = W * m.t
    m.drive(xB * sin(wt) - yB * cos(wt), "crank_angle")
    return m
