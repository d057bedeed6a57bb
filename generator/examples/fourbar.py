"""Four-bar linkage in 2-D natural coordinates (the 1985 natural-coordinates paper).

Fixed points A = (0, 0) and D = (4, 0); basic points B and C move, q = (xB, yB, xC, yC).
Rigid bars |B - A| = 1 (crank), |C - B| = 3.5 (coupler), |D - C| = 2.5 (rocker); the crank
is driven at 10 rpm by xB sin(w t) - yB cos(w t) = 0. A crank-rocker (Grashof: 1 + 4 < 3.5
+ 2.5), so the crank turns fully; one revolution takes 6 s.

`build()` is the kinematic model (no inertia), as the demo and the kernels use it.
`build(inertia=True)` adds uniform bars of 1 kg/m (crank 1 kg, coupler 3.5 kg, rocker
2.5 kg), gravity 9.81 along -y and the crank torque (about A) as the actuator, for inverse
dynamics. `build(driven=False)` is the same linkage with that inertia left free under
gravity ("fourbar_free", released from rest with the crank horizontal), for forward dynamics.
"""
from __future__ import annotations

import math

from ..ir import atan2, cos, sin
from ..model import Model
from ..model.natural import NaturalBody2D

W = 10.0 * 2.0 * math.pi / 60.0  # 10 rpm in rad/s
DENSITY = 1.0  # kg per metre of bar
G = 9.81


def _bar(m, name, p, r, length, cname, inertia):
    b = NaturalBody2D(m, name, p, r, length=length, constraint_name=cname)
    if inertia:
        mass = DENSITY * length
        b.set_inertia(mass, com=(length / 2, 0.0), inertia=mass * length ** 2 / 12)
    return b


def build(driven: bool = True, inertia: bool = False) -> Model:
    inertia = inertia or not driven
    m = Model("fourbar" if driven else "fourbar_free")
    xA, yA, xD, yD = 0.0, 0.0, 4.0, 0.0
    if driven:
        (vB, aB), (vC, aC) = ((-1.5, 1.5), (-2.0, 2.0)), ((-2.0, 2.0), (-3.0, 3.0))
    else:  # swinging under gravity from rest: |B'| < 6.0, |B''| < 48.3, |C'| < 2.7, |C''| < 28.8
        (vB, aB), (vC, aC) = ((-6.5, 6.5), (-55.0, 55.0)), ((-3.0, 3.0), (-35.0, 35.0))
    xB = m.coordinate("xB", guess=1.0, range=(-1.2, 1.2), vrange=vB, arange=aB)
    yB = m.coordinate("yB", guess=0.0, range=(-1.2, 1.2), vrange=vB, arange=aB)
    xC = m.coordinate("xC", guess=3.0, range=(1.0, 6.5), vrange=vC, arange=aC)
    yC = m.coordinate("yC", guess=2.5, range=(-3.0, 3.0), vrange=vC, arange=aC)
    m.time_range(0.0, 6.0 if driven else 10.0)
    A, B, C, D = (xA, yA), (xB, yB), (xC, yC), (xD, yD)
    # constant-distance constraints: quadratic in the coordinates
    _bar(m, "crank", A, B, 1.0, "bar_AB", inertia)
    _bar(m, "coupler", B, C, 3.5, "bar_BC", inertia)
    _bar(m, "rocker", D, C, 2.5, "bar_CD", inertia)
    crank = atan2(yB, xB)
    if inertia:
        m.gravity((0.0, -G))
        m.actuator("crank_torque", crank)
    m.output("crank_angle", crank)
    m.output("rocker_angle", atan2(yC, xC - xD))
    # where a controller runs it: the crank turning fully either way, driven at up to
    # 2 rad/s (its motor runs it at 10 rpm, 1.05 rad/s), or swinging free at up to 6.5
    rate, accel = ((-2.0, 2.0), (-5.0, 5.0)) if driven else ((-6.5, 6.5), (-55.0, 55.0))
    m.operate("crank", range=(-math.pi, math.pi), rate=rate, accel=accel, cells=32,
              equation=lambda th: xB * sin(th) - yB * cos(th))
    if inertia:
        m.operate_input("crank_torque", (-40.0, 40.0))
    if driven:
        wt = W * m.t
        m.drive(xB * sin(wt) - yB * cos(wt), "crank_angle")
    return m
