"""The N-four-bar mechanism of the multibody benchmark (IFToMM library), in 2-D natural
coordinates: N parallelograms in a row, every link a uniform rod of 1 m and 1 kg.

Ground points G_i = (i, 0), i = 0..N; moving points P_i = (x_i, y_i) start at (i, 1): N + 1
vertical rods G_i P_i (cranks) and N horizontal couplers P_i P_{i+1}. 2N + 2 coordinates,
2N + 1 constant-distance equations, one degree of freedom. Gravity 9.81 along -y; from
the vertical position every point starts at 1 m/s along +x, so the cranks turn fully and
the mechanism passes through singular positions (every point on the ground line, where
Phi_q loses rank and the couplers could turn either way) twice per turn.

Every crank turns by the same angle theta (from +x) and the couplers translate, so the
motion has a closed form in one coordinate: with
    I = (N + 1)/3 + N     (cranks about their pivots, couplers moving as points)
    V = 9.81 ((N + 1)/2 + N) sin(theta)
the energy I theta'^2 / 2 + V is constant; tests integrate that 1-DOF equation
independently and compare the points' positions.

`--set swing=A` (0 < A <= 1.3 rad): instead, every point starts at rest with the cranks A
from hanging straight down (theta = -pi/2 + A), so the mechanism swings within
theta in -pi/2 +- A, and the model declares that swing (with a margin) as its operating
envelope: away from the ground line's singular positions, so kernels with exact
multipliers (step --integrator rk4 --penalty 0) are analysed over its cover.

`--set envelope=True` (full turns): the couplers' closed forms x_i = i + x0, y_i = y0
(Model.explicit: the parallelogram branch the benchmark follows through its singular
positions) and the full turn of the first crank as operating envelope (rate and
acceleration 5 % over their energy bounds), so the step over the independent coordinates
(`--reduced`: x0, y0 and one distance equation, model.reduce) is analysed
over every crank angle, singular positions included.
"""
from __future__ import annotations

import math

from ..ir import cos, sin
from ..model import Model
from ..model.natural import NaturalBody2D

G = 9.81
L = 1.0
MASS = 1.0
V0 = 1.0  # initial speed of every moving point along +x [m/s]


def _rod(m, name, p, r, cname):
    b = NaturalBody2D(m, name, p, r, length=L, constraint_name=cname)
    b.set_inertia(MASS, com=(L / 2, 0.0), inertia=MASS * L ** 2 / 12)
    return b


SWING_MARGIN = 0.05  # rad beyond the swing the envelope holds (theta's rate and acceleration 5 %)


def build(n: int = 4, swing: float = 0.0, envelope: bool = False) -> Model:
    n, swing = int(n), float(swing)
    if not 1 <= n <= 200 or not 0 <= swing <= 1.3:
        from ..model.errors import ModelError

        raise ModelError(f"nfourbar: n must be 1 to 200 parallelograms and swing 0 (full turns) or up to 1.3 rad "
                         f"(kept away from the ground line's singular positions), got n={n}, swing={swing}")
    m = Model("nfourbar")
    inertia = (n + 1) / 3 + n
    c = G * ((n + 1) / 2 + n)
    # theta'^2 <= V0^2 + 4 c / I at the bottom (E0 at the top: I V0^2 / 2 + c); a point's
    # acceleration is at most theta'^2 + |theta''| with |theta''| <= c / I
    w = math.sqrt(V0 ** 2 + 4 * c / inertia) * 1.05
    a = w * w + c / inertia * 1.05
    P = []
    for i in range(n + 1):
        gx, gy = (i + math.sin(swing), -math.cos(swing)) if swing else (float(i), 1.0)  # at theta0
        x = m.coordinate(f"x{i}", guess=gx, range=(i - 1.05, i + 1.05), vrange=(-w, w),
                         arange=(-a, a))
        y = m.coordinate(f"y{i}", guess=gy, range=(-1.05, 1.05), vrange=(-w, w), arange=(-a, a))
        P.append((x, y))
    m.time_range(0.0, 10.0)
    for i in range(n + 1):
        _rod(m, f"crank{i}", (float(i), 0.0), P[i], f"crank{i}_len")
    for i in range(n):
        _rod(m, f"coupler{i}", P[i], P[i + 1], f"coupler{i}_len")
    m.gravity((0.0, -G))
    if envelope and not swing:
        _full_turns(m, P, w, c / inertia)
    if swing:
        _swing(m, P[0], swing, c / inertia)
    else:  # x0 = 0 and x0' = V0 held, the rest solved: every point at (i, 1) moving at V0 along +x
        m.initial(q={"x0": 0.0}, qd={"x0": V0})
    m.output("x0", P[0][0])
    m.output("y0", P[0][1])
    return m


def _full_turns(m: Model, P, w: float, k: float) -> None:
    """Every point i >= 1 in closed form from the first crank's tip, and the full turn of
    that crank's angle declared (theta'' = -k cos(theta), |theta'| <= w)."""
    x0, y0 = P[0]
    for i, (x, y) in enumerate(P[1:], start=1):
        m.explicit(x, x0 + float(i))
        m.explicit(y, y0)
    m.operate("crank", range=(-math.pi, math.pi), rate=(-w, w), accel=(-k * 1.05, k * 1.05),
              cells=64, equation=lambda th: x0 * sin(th) - y0 * cos(th))


def _swing(m: Model, p0, swing: float, k: float) -> None:
    """From rest at theta0 = -pi/2 + swing; theta'' = -k cos(theta), so by energy
    theta'^2 = 2 k (sin theta0 - sin theta) <= 2 k (1 - cos swing) and |theta''| <= k."""
    th0 = -math.pi / 2 + swing
    m.initial(q={"x0": math.cos(th0)}, qd={"x0": 0.0})
    w = math.sqrt(2 * k * (1 - math.cos(swing))) * 1.05
    half = swing + SWING_MARGIN
    m.operate("crank", range=(-math.pi / 2 - half, -math.pi / 2 + half), rate=(-w, w), accel=(-k * 1.05, k * 1.05),
              cells=128, equation=lambda th: p0[0] * sin(th) - p0[1] * cos(th))
