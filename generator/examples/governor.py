"""A rigid flyball governor (Watt's): the spatial closed-loop problem that stands in for the
IFToMM benchmark's stiff flyball governor (A05), whose initial state and reference curves are
not available here. Its bodies follow A05's table where it has one (rods of 1 m, 0.01 x 0.01
m at 3000 kg/m^3: 0.3 kg; a slider cube of 0.1 m: 3 kg; balls of 5 kg; the couplers hinged
at s = 0.5 m along the arms; arms at alpha = 30 degrees from the shaft); the couplers are
rigid rods here (A05's are stiff spring-dampers), so the motion is the rigid limit.

A vertical shaft (a rod of 1 m) turns freely about z (angle psi). Two arms hang
from the shaft's top T = (0, 0, H) on hinges perpendicular to the plane they turn in (both
in the shaft's xz plane, one each side), a ball at each arm's end. A coupler of length S
joins each arm's midpoint C_k to the slider P, which rides on the shaft (turning with it).
Gravity 9.81 along -z.

Relative coordinates: psi; a1, a2 the arms' angles from the shaft (outwards); b1, b2 the
couplers' angles relative to their arms. The couplers' far ends coincide (2 equations, in
the shaft's x and z) and lie on the shaft's axis (1 equation): 5 coordinates, 3 equations,
two degrees of freedom (the spin psi and the arms' common angle). The spin's angular
momentum is conserved; the arms swing between gravity and the centrifugal pull.

`--set envelope=True`: the model also declares where it operates (off by default, so its
other kernels stay as they are): the spin psi over its range at 2 to 6.5 rad/s and the
first arm's angle a1 over 0.45 .. 0.9 rad (26 to 52 degrees: the motion's 30 to 47 with
a margin) at up to 2 rad/s, each in 32 cells (psi needs its own: the mass matrix's
expressions carry sin and cos of psi, which cancel only in exact arithmetic), so that the
fixed-point step (rk4 --penalty 0 --solve kkt, c-fixed) is analysed over its cover.

    build(envelope=False) -> Model   coordinates psi, a1, a2, b1, b2
"""
from __future__ import annotations

import math

from ..model import Model

G, H, L, S = 9.81, 1.0, 1.0, 0.5  # gravity, hinge height, arm length, coupler length = arm point
M_ROD, M_SLIDER, M_BALL = 0.3, 3.0, 5.0  # kg (the shaft is a rod too)
WIDTH = 0.01  # the rods' square section [m]
ALPHA0, SPIN0 = math.radians(30.0), 6.0  # the arms' initial angle [rad] and the shaft's spin [rad/s]
T_END = 2.0
SLIDER_SIDE = 0.1


def _rod(tree, name, base, point, mass, length):
    """A thin rod hanging along -z of its base from `point`: m L^2 / 12 about x and y."""
    b = tree.body(name, base, point)
    rod = mass * length ** 2 / 12.0
    b.set_inertia(mass, com=(0.0, 0.0, -length / 2), inertia=(rod, rod, 0.0))
    return b


def build(envelope: bool = False) -> Model:
    m = Model("governor")
    # ranges: the motion from the initial state over 2 s (arms 30 to 47 degrees, spin 6 to 2.8
    # rad/s, psi to 8.1 rad) with margin
    psi = m.coordinate("psi", range=(-0.5, 10.0), vrange=(-1.0, 8.0), arange=(-25.0, 25.0))
    t = m.relative()
    shaft = t.base("shaft", t.world, (0.0, 0.0, 1.0), psi)
    across = M_ROD * (H ** 2 + WIDTH ** 2) / 12.0
    t.body("shaft", shaft, t.origin).set_inertia(M_ROD, com=(0.0, 0.0, H / 2),
                                                 inertia=(across, across, M_ROD * WIDTH ** 2 / 6.0))
    top = t.point("T", t.origin, (0.0, 0.0, H), shaft)
    ends, arms = [], []
    for k, side in ((1, 1.0), (2, -1.0)):
        a = m.coordinate(f"a{k}", guess=ALPHA0, range=(0.3, 1.0), vrange=(-2.0, 2.0), arange=(-20.0, 20.0))
        arms.append(a)
        b = m.coordinate(f"b{k}", guess=-2 * ALPHA0, range=(-2.0, -0.8), vrange=(-4.0, 4.0),
                         arange=(-40.0, 40.0))
        # the arm turns outwards (towards +x for arm 1, -x for arm 2) about the shaft's -y / +y
        arm = t.base(f"arm{k}", shaft, (0.0, -side, 0.0), a)
        _rod(t, f"arm{k}", arm, top, M_ROD, L)
        ball = t.body(f"ball{k}", arm, t.point(f"B{k}", top, (0.0, 0.0, -L), arm))
        ball.set_inertia(M_BALL, com=(0.0, 0.0, 0.0), inertia=(0.0, 0.0, 0.0))
        mid = t.point(f"C{k}", top, (0.0, 0.0, -S), arm)
        coupler = t.base(f"coupler{k}", arm, (0.0, -side, 0.0), b)
        _rod(t, f"coupler{k}", coupler, mid, M_ROD * S / L, S)
        ends.append(t.point(f"P{k}", mid, (0.0, 0.0, -S), coupler))
    t.loop(ends[0], ends[1], shaft, "slider", components=(0, 2))
    t.loop(top, ends[0], shaft, "axis", components=(0,))
    slider = t.body("slider", shaft, ends[0])
    cube = M_SLIDER * SLIDER_SIDE ** 2 / 6.0
    slider.set_inertia(M_SLIDER, com=(0.0, 0.0, 0.0), inertia=(cube, cube, cube))
    m.gravity((0.0, 0.0, -G))
    m.initial(q={"psi": 0.0, "a1": ALPHA0}, qd={"psi": SPIN0, "a1": 0.0})
    m.time_range(0.0, T_END)
    if envelope:
        m.operate(psi, range=(-0.5, 10.0), rate=(2.0, 6.5), accel=(-25.0, 25.0), cells=32)
        m.operate(arms[0], range=(0.45, 0.9), rate=(-2.0, 2.0), accel=(-20.0, 20.0), cells=32)
    m.output("slider_z", slider.point((0.0, 0.0, 0.0))[2])
    return m
