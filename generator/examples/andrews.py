"""Andrews' squeezing mechanism, the seven-body benchmark of multibody codes (Hairer and
Wanner, Solving ODEs II, sec. VII.7; problem "andrews" of the Bari IVP test set, Mazzia and
Magherini, whose data and reference solution at t = 0.03 s this model reproduces): a planar
mechanism of seven bodies and three loops, driven by a constant torque mom = 0.033 N m on the
crank and held back by a spring (c0 = 4530 N/m, rest length l0 = 0.07785 m); no gravity.

Relative coordinates, the benchmark's own seven angles, so that the published state compares
angle for angle and the model keeps the test set's 6 equations (natural coordinates would
carry the joints' points instead, 2 per point, and the angles only through atan2). The
angles (absolute angle of each body in brackets): beta (crank K1), theta (K2 on K1: beta + theta), gamma (K3 about B), phi (K4 on
K5: phi + delta), delta (K5 about A), omega (K6 on K7: omega + epsilon), epsilon (K7 about A).
The three branches K3, K4-K5 and K6-K7 meet K1-K2 at its end E: 6 loop equations (x, y of E
per branch), one degree of freedom. Positions in metres in the ground frame (O the crank's
pivot):

    F = rr e(beta)               E = F - d e(beta + theta)      e(a) = (cos a, sin a)
    E = B + ss n(gamma)          D = B + sd e(gamma) + sc n(gamma)   n(a) = (sin a, -cos a)
    E = A + zt e(delta) + e n(phi + delta)
    E = A + u n(epsilon) + zf e(omega + epsilon)

the spring between D (on K3) and the ground point C. The centres of mass sit where the test
set's mass matrix puts them (ra, da, ... from the pivots); a body turning about a ground
pivot has its centre in any direction at its distance (nothing else depends on it here).

The crank turns about 2.5 times in the 0.03 s horizon (beta from -0.062 to 15.8 rad) while
the spring pulls the rest back and forth: rates reach 1.4e3 rad/s and accelerations 6e5
rad/s^2, so the ranges below are wide and the step must be short (docs/kernels.md, step).

`--set envelope=True`: the model also declares where it operates (off by default, so its
other kernels stay as they are): the crank angle beta over the horizon's 2.6 turns
(-0.1 .. 16.5 rad) at any rate and acceleration of the ranges below, in 512 cells, so that
the fixed-point step (rk4 --penalty 0 --solve kkt, c-fixed) is analysed over the cover of
its near-consistent states (each loop row allowed 1e-3 of its gradient's norm: its links
are millimetres).

    build(envelope=False) -> Model   coordinates beta, theta, gamma, phi, delta, omega, epsilon
"""
from __future__ import annotations

from ..model import Model

# the test set's parameters (SI units)
MASS = dict(m1=.04325, m2=.00365, m3=.02373, m4=.00706, m5=.07050, m6=.00706, m7=.05498)
INERTIA = dict(i1=2.194e-6, i2=4.410e-7, i3=5.255e-6, i4=5.667e-7, i5=1.169e-5, i6=5.667e-7, i7=1.912e-5)
XA, YA, XB, YB, XC, YC = -.06934, -.00227, -.03635, .03273, .014, .072
C0, L0, MOM = 4530.0, .07785, .033
D, DA, E, EA, RR, RA = 28e-3, 115e-4, 2e-2, 1421e-5, 7e-3, 92e-5
SS, SA, SB, SC, SD = 35e-3, 1874e-5, 1043e-5, 18e-3, 2e-2
TA, TB, U, UA, UB, ZF, ZT, FA = 2308e-5, 916e-5, 4e-2, 1228e-5, 449e-5, 2e-2, 4e-2, 1421e-5
T_END = 0.03  # the test set's horizon
# the test set's consistent initial angles (theta = 0 is held, the others solved from these)
Q0 = dict(beta=-0.0617138900142764496358948458001, theta=0.0, gamma=0.455279819163070380255912382449,
          phi=0.222668390165885884674473185609, delta=0.487364979543842550225598953530,
          omega=-0.222668390165885884674473185609, epsilon=1.23054744454982119249735015568)
# (range, rate range, acceleration range) per angle: the extremes of the motion over 0..0.03 s
# (the test's reference, sampled every 1e-5 s) with a margin of about a third
RANGES = dict(beta=((-0.5, 16.5), 1500.0, 4.5e5), theta=((-16.5, 0.5), 1900.0, 7.5e5),
              gamma=((-0.1, 0.6), 220.0, 4.5e5), phi=((-0.7, 0.4), 400.0, 7.5e5),
              delta=((0.4, 0.6), 25.0, 2.5e4), omega=((-0.4, 0.7), 400.0, 7.5e5),
              epsilon=((0.95, 1.35), 100.0, 9e4))
Z = (0.0, 0.0, 1.0)


def _body(tree, name, base, point, mass, com, inertia):
    """A planar body of the tree: turning about z only, so only its z moment counts."""
    b = tree.body(name, base, point)
    b.set_inertia(mass, com=(*com, 0.0), inertia=(inertia, inertia, inertia))
    return b


def build(envelope: bool = False) -> Model:
    m = Model("andrews")
    q = {}
    for name, (r, v, a) in RANGES.items():
        q[name] = m.coordinate(name, guess=Q0[name], range=r, vrange=(-v, v), arange=(-a, a))
    t = m.relative()
    w, o = t.world, t.origin
    A = t.point("A", o, (XA, YA, 0.0), w)
    B = t.point("B", o, (XB, YB, 0.0), w)
    # K1, K2: the crank and the rod to E
    k1 = t.base("K1", w, Z, q["beta"])
    crank = _body(t, "K1", k1, o, MASS["m1"], (RA, 0.0), INERTIA["i1"])
    F = t.point("F", o, (RR, 0.0, 0.0), k1)
    k2 = t.base("K2", k1, Z, q["theta"])
    _body(t, "K2", k2, F, MASS["m2"], (-DA, 0.0), INERTIA["i2"])
    E12 = t.point("E", F, (-D, 0.0, 0.0), k2)
    # K3 about B: E on it, and D where the spring pulls
    k3 = t.base("K3", w, Z, q["gamma"])
    spring_arm = _body(t, "K3", k3, B, MASS["m3"], (SA, SB), INERTIA["i3"])
    t.loop(t.point("E3", B, (0.0, -SS, 0.0), k3), E12, w, "loop3", components=(0, 1))
    # K5 about A, K4 on it
    k5 = t.base("K5", w, Z, q["delta"])
    _body(t, "K5", k5, A, MASS["m5"], (TA, TB), INERTIA["i5"])
    G = t.point("G", A, (ZT, 0.0, 0.0), k5)
    k4 = t.base("K4", k5, Z, q["phi"])
    _body(t, "K4", k4, G, MASS["m4"], (0.0, -(E - EA)), INERTIA["i4"])
    t.loop(t.point("E4", G, (0.0, -E, 0.0), k4), E12, w, "loop4", components=(0, 1))
    # K7 about A, K6 on it
    k7 = t.base("K7", w, Z, q["epsilon"])
    _body(t, "K7", k7, A, MASS["m7"], (UA, UB), INERTIA["i7"])
    H = t.point("H", A, (0.0, -U, 0.0), k7)
    k6 = t.base("K6", k7, Z, q["omega"])
    _body(t, "K6", k6, H, MASS["m6"], (ZF - FA, 0.0), INERTIA["i6"])
    t.loop(t.point("E6", H, (ZF, 0.0, 0.0), k6), E12, w, "loop6", components=(0, 1))

    m.torque("motor", crank, (0.0, 0.0, MOM))
    ground = m.ground()
    m.spring_damper("spring", k=C0, rest=L0, between=(spring_arm, (SD, -SC, 0.0), ground, (XC, YC, 0.0)))
    m.initial(q={"theta": 0.0})
    m.time_range(0.0, T_END)
    if envelope:
        (_, hi), v, a = RANGES["beta"]
        m.operate(q["beta"], range=(-0.1, hi), rate=(-v, v), accel=(-a, a), cells=512)
    for c, v in zip("xy", crank.point((RR, 0.0, 0.0))[:2]):
        m.output(f"F_{c}", v)
    return m
