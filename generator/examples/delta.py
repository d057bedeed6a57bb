"""A delta robot (issue 33), in natural coordinates: the recommended family for a spatial
closed loop, since shared points make the spherical joints and the mass matrix is constant.

Three upper arms of 0.3 m and 0.3 kg (uniform rods) hinged on a base of radius 0.2 m at
0, 120 and 240 degrees, each turning about the tangent of the base circle; forearms as
uniform rods of 0.8 m and 0.1 kg with spherical joints at both ends; a translating
platform of radius 0.05 m, 0.2 kg plus a 0.5 kg load, as a point mass (its attachment
points are expressions of its centre: it does not turn). Gravity -z.

Coordinates: the platform centre P (P_x, P_y, P_z) and the elbows E1..E3 (E1_x, ...): 12
coordinates, 9 constraints (per arm: its length and its hinge, |E - A| = 0.3 and
(E - A).t = 0; per forearm: |B - E| = 0.8), 3 degrees of freedom. Each motor's measure is
its arm's angle below the base plane, atan2(-(E - A)_z, (E - A).u) (u: the arm's outward
radial direction). The operating envelope is the platform's box: by default the workspace
declared in issue 33 (x, y within +-0.3 m, z from -0.9 to -0.6 m), with the elbows also in
closed form of the platform (Model.explicit: the reduced inverse dynamics applies) and each
motor as the force t x (E - A) / L^2 at its elbow (its torque about the hinge, with no
denominator to prove); speeds up to 2 m/s, accelerations up to 20 m/s^2 per axis.
build(workspace="first") is the first shipped model, unchanged (x, y within +-0.2 m, z from
-0.85 to -0.65 m, natural coordinates only, motors along the arm angles).
build(workspace="cylinder") is the default model over the cylinder x^2 + y^2 <= 0.3^2 of the
same heights (Model.operate_region, 8 x 8 cells in x and y).

    build(workspace="full" | "first" | "cylinder") -> Model
"""
from __future__ import annotations

import math

import numpy as np

from mbforge.ir import atan2, sqrt
from mbforge.model import Model, ModelError
from mbforge.model.natural import NaturalBody3D, Point, point, unit_vector

BASE_R, PLATFORM_R = 0.2, 0.05
UPPER_L, UPPER_M = 0.3, 0.3
FORE_L, FORE_M = 0.8, 0.1
PLATFORM_M = 0.2 + 0.5
HOME = (0.0, 0.0, -0.75)
# the workspace the user declared (issue 33) and the one of the first shipped model
WORKSPACES = {"full": {"px": (-0.3, 0.3), "py": (-0.3, 0.3), "pz": (-0.9, -0.6)},
              "first": {"px": (-0.2, 0.2), "py": (-0.2, 0.2), "pz": (-0.85, -0.65)},
              "cylinder": {"px": (-0.3, 0.3), "py": (-0.3, 0.3), "pz": (-0.9, -0.6)}}
CYLINDER_R, CYLINDER_CELLS = 0.3, 8  # the cylinder workspace: x^2 + y^2 <= R^2, cells along x and y
WORKSPACE = WORKSPACES["full"]
SPEED, ACCEL, TORQUE = 2.0, 20.0, 10.0
ANGLES = (0.0, 2 * math.pi / 3, 4 * math.pi / 3)


def arm_frame(k: int):
    """The pivot A, the outward radial direction u and the hinge axis t of arm k."""
    c, s = math.cos(ANGLES[k]), math.sin(ANGLES[k])
    return np.array([BASE_R * c, BASE_R * s, 0.0]), np.array([c, s, 0.0]), np.array([-s, c, 0.0])


def elbow_at(k: int, p) -> np.ndarray:
    """The elbow of arm k with the platform centre at p, on the outward branch (the guesses;
    over the workspace the arms turn from 17 degrees above the base plane to 60 below)."""
    A, u, _ = arm_frame(k)
    b = np.asarray(p, float) + PLATFORM_R * u - A  # attachment point relative to the pivot
    # E - A = L (cos th u - sin th z); |b - (E - A)| = FORE_L: a cos th + c sin th = d
    a, c = 2 * UPPER_L * (b @ u), -2 * UPPER_L * b[2]
    d = b @ b + UPPER_L ** 2 - FORE_L ** 2
    th = math.atan2(c, a) - math.acos(d / math.hypot(a, c))  # the elbow outward (the other root: inward)
    return A + UPPER_L * (math.cos(th) * u - math.sin(th) * np.array([0.0, 0.0, 1.0]))


def elbow_closed_form(k: int, P) -> tuple[list, object]:
    """The elbow of arm k as expressions of the platform centre P (outward branch, as
    elbow_at): in the arm's plane (u, z) the elbow is where the circle of the upper arm
    meets the forearm's sphere, e = (K (s, w) + sqrt(L^2 d2 - K^2) (-w, s)) / d2 with
    (s, w) the attachment point's in-plane coordinates, d2 = s^2 + w^2 and
    K = (|b|^2 + L^2 - F^2) / 2. Returns (E as 3 expressions, the in-plane (es, ew))."""
    A, u, _ = arm_frame(k)
    b = [P[i] + float(PLATFORM_R * u[i] - A[i]) for i in range(3)]
    s, w = b[0] * float(u[0]) + b[1] * float(u[1]), b[2]
    d2 = s * s + w * w
    K = (b[0] * b[0] + b[1] * b[1] + b[2] * b[2] + (UPPER_L ** 2 - FORE_L ** 2)) * 0.5
    root = sqrt(UPPER_L ** 2 * d2 - K * K)  # 0 where arm and forearm align: the singular pose
    es, ew = (K * s - w * root) / d2, (K * w + s * root) / d2
    return [float(A[0]) + es * float(u[0]), float(A[1]) + es * float(u[1]), ew], (es, ew)


def build(workspace: str = "full") -> Model:
    """workspace "full" (default): the declared box of issue 33, x and y within +-0.3 m and z
    from -0.9 to -0.6 m, the elbows also given in closed form (Model.explicit), so the
    reduced inverse dynamics (platform in, torques out) applies; "first": the first shipped
    model (x, y within +-0.2 m, z from -0.85 to -0.65 m, natural coordinates only);
    "cylinder": "full" within x^2 + y^2 <= 0.3^2."""
    if workspace not in WORKSPACES:
        raise ModelError(f"delta: workspace must be one of {', '.join(WORKSPACES)}, got {workspace!r}")
    box = WORKSPACES[workspace]
    m = Model("delta")
    rate, acc = (-SPEED, SPEED), (-ACCEL, ACCEL)
    P = point(m, "P", HOME, range=[box[c] for c in ("px", "py", "pz")], vrange=rate, arange=acc)
    elbows = []
    for k in range(3):
        A, u, t = arm_frame(k)
        E0 = elbow_at(k, HOME)
        E = point(m, f"E{k + 1}", E0, range=[(A[i] - 0.31, A[i] + 0.31) for i in range(3)],
                  vrange=(-6.0, 6.0), arange=(-200.0, 200.0))
        elbows.append(E)
        hinge = unit_vector(m, f"hinge{k + 1}", t, fixed=True)
        pivot = Point(f"A{k + 1}", A.tolist())
        rod = UPPER_M * UPPER_L ** 2 / 12
        upper = NaturalBody3D(m, f"upper{k + 1}", [(pivot, (0, 0, 0)), (E, (UPPER_L, 0, 0))], [(hinge, (0, 1, 0))])
        upper.set_inertia(UPPER_M, com=(UPPER_L / 2, 0, 0), inertia=(0.0, rod, rod))
        B = Point(f"B{k + 1}", [P[i] + PLATFORM_R * u[i] for i in range(3)])  # on the platform
        rod = FORE_M * FORE_L ** 2 / 12
        NaturalBody3D(m, f"fore{k + 1}", [(E, (0, 0, 0)), (B, (FORE_L, 0, 0))]) \
            .set_inertia(FORE_M, com=(FORE_L / 2, 0, 0), inertia=(0.0, rod, rod))
        arm = [E[i] - float(A[i]) for i in range(3)]
        if workspace == "first":
            radial = arm[0] * float(u[0]) + arm[1] * float(u[1])
            m.actuator(f"motor{k + 1}", atan2(-arm[2], radial))
        else:  # the torque as the force t x (E - A) / L^2 at the elbow: its moment about the hinge
            # is the torque wherever |E - A| = L, and its direction has no denominator that
            # range analysis would have to prove (atan2's gradient divides by |E - A|^2)
            push = [(float(t[1]) * arm[2] - float(t[2]) * arm[1]) / UPPER_L ** 2,
                    (float(t[2]) * arm[0] - float(t[0]) * arm[2]) / UPPER_L ** 2,
                    (float(t[0]) * arm[1] - float(t[1]) * arm[0]) / UPPER_L ** 2]
            m.actuator_pair(f"motor{k + 1}", upper, (0, 0, 0), upper, (UPPER_L, 0, 0), push)
        m.operate_input(f"motor{k + 1}", (-TORQUE, TORQUE))
    NaturalBody3D(m, "platform", [(P, (0, 0, 0))]).set_inertia(PLATFORM_M)
    m.gravity((0.0, 0.0, -9.81))
    for c, q in zip(("x", "y", "z"), P):
        lo, hi = box[f"p{c}"]
        cells = CYLINDER_CELLS if workspace == "cylinder" and c != "z" else 1
        m.operate(q, range=(lo, hi), rate=rate, accel=acc, cells=cells)
    if workspace == "cylinder":  # a pick-and-place robot's usual workspace: the box's corners left out
        m.operate_region("cylinder", P[0] ** 2 + P[1] ** 2 - CYLINDER_R ** 2)
    if workspace != "first":
        for k, E in enumerate(elbows):
            closed, _ = elbow_closed_form(k, list(P))
            for q, e in zip(E, closed):
                m.explicit(q, e)
    return m
