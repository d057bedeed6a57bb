"""The simple pendulum of the multibody benchmark, in 2-D natural coordinates: a point mass
of 1 kg on a massless rod of 1 m hinged at the origin, q = (x, y), one equation
x^2 + y^2 = 1; gravity 9.81 along -y; released from rest with the rod horizontal
(x = 1, y = 0). Its motion has a closed form in the angle (an elliptic function); tests
integrate the 1-DOF equation theta'' = -(g / L) cos(theta) independently and compare.
"""
from __future__ import annotations

from ..ir import atan2
from ..model import Model
from ..model.natural import NaturalBody2D

G = 9.81
L = 1.0
MASS = 1.0


def build() -> Model:
    m = Model("pendulum")
    w = (2 * G / L) ** 0.5 * 1.05  # the fastest swing: at the bottom, from horizontal at rest
    x = m.coordinate("x", guess=L, range=(-1.05, 1.05), vrange=(-w, w), arange=(-3 * G, 3 * G))
    y = m.coordinate("y", guess=0.0, range=(-1.05, 0.05), vrange=(-w, w), arange=(-3 * G, 3 * G))
    m.time_range(0.0, 10.0)
    rod = NaturalBody2D(m, "rod", (0.0, 0.0), (x, y), length=L, constraint_name="rod_len")
    rod.set_inertia(MASS, com=(L, 0.0), inertia=0.0)
    m.gravity((0.0, -G))
    m.output("angle", atan2(y, x))
    return m
