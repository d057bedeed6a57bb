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
"""
from __future__ import annotations

import math

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


def build(n: int = 4) -> Model:
    n = int(n)
    if not 1 <= n <= 200:
        from ..model.errors import ModelError

        raise ModelError(f"nfourbar: n must be 1 to 200 parallelograms, got {n}")
    m = Model("nfourbar")
    inertia = (n + 1) / 3 + n
    c = G * ((n + 1) / 2 + n)
    # theta'^2 <= V0^2 + 4 c / I at the bottom (E0 at the top: I V0^2 / 2 + c); a point's
    # acceleration is at most theta'^2 + |theta''| with |theta''| <= c / I
    w = math.sqrt(V0 ** 2 + 4 * c / inertia) * 1.05
    a = w * w + c / inertia * 1.05
    P = []
    for i in range(n + 1):
        x = m.coordinate(f"x{i}", guess=float(i), range=(i - 1.05, i + 1.05), vrange=(-w, w),
                         arange=(-a, a))
        y = m.coordinate(f"y{i}", guess=1.0, range=(-1.05, 1.05), vrange=(-w, w), arange=(-a, a))
        P.append((x, y))
    m.time_range(0.0, 10.0)
    for i in range(n + 1):
        _rod(m, f"crank{i}", (float(i), 0.0), P[i], f"crank{i}_len")
    for i in range(n):
        _rod(m, f"coupler{i}", P[i], P[i + 1], f"coupler{i}_len")
    m.gravity((0.0, -G))
    # x0 = 0 and x0' = V0 held, the rest solved: every point at (i, 1) moving at V0 along +x
    m.initial(q={"x0": 0.0}, qd={"x0": V0})
    m.output("x0", P[0][0])
    m.output("y0", P[0][1])
    return m
