"""A planar N-link pendulum chain in relative coordinates (n=2: the double pendulum), the
open-chain problem of the step-kernel benchmark against MuJoCo (issue 27): link k a
uniform rod of 1 kg and 1 m turning about z by th{k} relative to link k-1 (th0 from +x),
the next joint at its end; gravity 9.81 along -y; released from rest with every link
horizontal. No constraints, so the explicit integrators (RK4, Euler) apply.

    build(n=2) -> Model   coordinates th0 .. th{n-1}; outputs tip_x, tip_y (the last link's end)
"""
from __future__ import annotations

import math

from ..model import Model
from ..model.errors import ModelError

G = 9.81
LENGTH, MASS = 1.0, 1.0


def build(n: int = 2) -> Model:
    n = int(n)
    if not 1 <= n <= 50:
        raise ModelError(f"chain: n must be 1 to 50 links, got {n}")
    m = Model("chain")
    tree = m.relative()
    base, point = tree.world, tree.origin
    # the rates of a run from rest, horizontal, stay well inside this (over 10 s: n = 2 reaches
    # 22 rad/s against 35, n = 5 reaches 53 against 140)
    w = 4.0 * n * math.sqrt(G * n / LENGTH)
    rod = MASS * LENGTH ** 2 / 12.0
    for k in range(n):
        # the relative angles wind as the chain tumbles (n = 2: 15 rad in 10 s, n = 5: 46)
        q = m.coordinate(f"th{k}", range=(-100.0, 100.0), vrange=(-w, w), arange=(-w * w, w * w))
        if k:
            point = tree.point(f"P{k}", point, (LENGTH, 0.0, 0.0), base)
        base = tree.base(f"link{k}_axes", base, (0.0, 0.0, 1.0), q)
        tree.body(f"link{k}", base, point).set_inertia(MASS, com=(LENGTH / 2, 0.0, 0.0), inertia=(0.0, rod, rod))
    m.gravity((0.0, -G, 0.0))
    m.time_range(0.0, 10.0)
    tip = tree.position(tree.origin, tree.point("tip", point, (LENGTH, 0.0, 0.0), base), tree.world)
    m.output("tip_x", tip[0])
    m.output("tip_y", tip[1])
    return m
