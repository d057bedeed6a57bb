"""The Stewart platform (6-UCU) of ../shared/models/stewart-platform.md in the thesis's
formulation: reference-point coordinates with Euler parameters, 7 per body at its centre of
mass, 14 bodies, 98 coordinates.

Bodies: base, cylinders cyl1..6, pistons pis1..6, platform plat (coordinates
<body>_x, _y, _z, _e0 .. _e3). 98 equations:
  base fixed (7); base-cylinder Cardans ub1..6 (spherical + perpendicular arms, 4 each);
  cylinder-piston cylindrical joints cj1..6 (4 each, the thesis's form); piston-platform
  Cardans up1..6 (4 each); Euler normalisations of the 12 leg bodies and of the platform
  (13); 6 driving equations (platform x, y, z, e1, e2, e3).
The thesis drives all 7 platform coordinates and leaves the platform's normalisation out;
here the platform's normalisation is a kinematic equation and e0 follows from it, so that
the kinematic equations alone (without the drives) describe the mechanism and inverse
dynamics can replace the drives by the six actuators. The motion is the same.

Actuator f_k acts along leg k's axis (the cylinder's z) between cylinder and piston,
positive when it pushes the platform away from the base. Motions: heave, yaw, roll,
pitch over t in [0, 1.25] (see _stewart.py for the frames and the closed forms).

Explicit coordinates (Model.explicit): every coordinate but the platform's 7 is given in
closed form in the platform pose, with + - * / sqrt only (every target runs them), so that
kernels over the platform coordinates alone (inverse-dynamics-reduced) can substitute the
legs' coordinates, velocities and accelerations. Base: constants. Leg k, from the platform
anchor p = r + A(e) p' and the base anchor b: d = p - b, L = |d|, u = d / L;
  cylinder: centre b + 0.15 u; axes z = u, y = (d x t_b) / |d x t_b| (its Cardan arm,
            perpendicular to the base's arm t_b and to the leg), x = y x z;
  piston:   centre p - 0.15 u; axes z = u, its Cardan arm a = (d x w) / |d x w| with
            w = A(e) t_p' the platform's arm, and x, y such that a = cx x + cy y for the
            arm's fixed body components (cx, cy, 0);
then Euler parameters of each leg body's axes by Shepperd's method with the branch (the
component divided by) fixed at model-building time: the largest component at the nominal
pose, its sign such that e0 >= 0 there (the convention of the models' guesses), checked
over the four motions and over poses in the operating envelope (SHEPPERD_MIN).

Operating envelope (Model.operate, numbers in _stewart.envelope): x, y within +-20.5 mm
(surge and sway of 20 mm), z within 0.5 +- 0.041 (heave), e1, e2, e3 within +-0.1 (any
composition of roll, pitch and yaw of up to 10 degrees each: at most 0.0948), with rates
and accelerations 1.25 times the peaks of every combination of the motions at OMEGA; e0
follows from the platform's normalisation. The actuator forces' range is FORCE_RANGE.
The declared coordinate ranges stay the motions' (tight, test_examples_stewart).

The envelope is declared by default (build(envelope=False), `--set envelope=False`, gives
kernels over the driven motion's tube instead). Kernels on all 98 coordinates
(inverse-dynamics, forward-dynamics, equations) get their domain from the cover of
domain.explicit_cover: Krawczyk on the 7 platform coordinates (64 cells), the legs'
positions, velocities and accelerations enclosed from their closed forms, every Shepperd
pivot proven >= SHEPPERD_MIN over each cell (Model.explicit_guard). Range analysis cannot
yet prove the 98 x 98 straight-line LU's pivots away from 0 over those boxes (not even
over 32,768 of them): c-fixed inverse-dynamics is refused over the envelope (use
envelope=False) and float32 inverse-dynamics gets no error bound. The reduced inverse
dynamics takes the leg lengths as its actuators' measures (Model.explicit_measure) and
the solve's values enclosed from its matrix alone, over halves of each cell too
(analysis.linear): in c-fixed it generates over the envelope, with bounds of 4 .. 454 N
over the 64 cells (11 s) and 0.05 .. 2.6 N with x, y and z halved (512 cells, 40 s:
`--envelope` with "cells": 2 for plat_x, plat_y, plat_z), about 1e4 times the errors seen.
See bench/stewart_envelope.py.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir import Evaluator, as_atom, cos, cross, dot, sin, sqrt
from ..model import Model, ModelError
from . import _stewart as S

MOTIONS = S.MOTIONS
COORDS = ("x", "y", "z", "e0", "e1", "e2", "e3")


def platform_law(motion: str, t):
    """(x, y, z, e0, e1, e2, e3) of the platform: numbers or atoms in t."""
    if motion == "heave":
        return [0.0, 0.0, S.HEAVE * sin(S.OMEGA * t) + S.HEIGHT, 1.0, 0.0, 0.0, 0.0]
    half = sin(S.OMEGA * t) * (S.ANGLE / 2)
    e = [0.0, 0.0, 0.0]
    e[S.AXIS[motion]] = sin(half)
    return [0.0, 0.0, S.HEIGHT, cos(half)] + e


# cells of the envelope's first subdivision per quantity (cover.build_cover splits further
# where its test fails)
ENV_CELLS = {"x": 1, "y": 1, "z": 1, "e1": 4, "e2": 4, "e3": 4}
# actuator forces over the envelope (N): inverse dynamics over 1e5 consistent states of
# the envelope (cover.sample, seed 7) spans -54.0 .. 448.1 (every leg); declared with 25 %
# margin on the half span about its centre
FORCE_RANGE = (-120.0, 520.0)


def new_model(model: str, motion: str, envelope) -> Model:
    """The empty Model of a Stewart example (this one, stewart_relative), its build()
    arguments checked: a motion of MOTIONS, envelope True or False."""
    if motion not in MOTIONS:
        raise ModelError(f"{model}: no motion {motion!r}; known: {', '.join(MOTIONS)}")
    if not isinstance(envelope, bool):
        raise ModelError(f"{model}: envelope must be True or False, got {envelope!r}")
    return Model(model)


def build(motion: str = "heave", massless_legs: bool = False, envelope: bool = True) -> Model:
    """envelope=True (default) declares the operating envelope (see the module's doc);
    with envelope=False kernels serve the driven motion's tube."""
    m = new_model("stewart", motion, envelope)
    law = platform_law(motion, m.t)
    c = _coordinates(m, motion)
    m.time_range(0.0, S.T_END)
    base, cyl, pis, plat = _bodies(m, c, massless_legs)
    _joints(m, c, base, cyl, pis, plat)
    for k, name in enumerate(COORDS):
        if name != "e0":
            m.drive(c["plat"][k] - law[k], f"drive_{name}")
    m.gravity((0.0, 0.0, -S.G))
    _actuators(m, cyl, pis, plat)
    if envelope:
        _operate(m, c)
    _outputs(m, plat, cyl, pis)
    _explicit(m, c, plat)
    return m


def _coordinates(m: Model, motion: str) -> dict[str, list]:
    """Each body's 7 coordinates (COORDS) with the motions' ranges, guessed at t = 0."""
    rng = S.ranges("98")
    guess = S.coords_98(motion, [0.0])[0]
    c: dict[str, list] = {}
    for ib, body in enumerate(S.BODIES_98):
        c[body] = []
        for ic, name in enumerate(COORDS):
            j = 7 * ib + ic
            r, v, a = rng[j]
            c[body].append(m.coordinate(f"{body}_{name}", guess=float(guess[j]), range=r, vrange=v, arange=a))
    return c


def _bodies(m: Model, c: dict[str, list], massless_legs: bool):
    """base, the cylinders, the pistons and the platform."""
    leg_mass = 0.0 if massless_legs else S.ROD_MASS
    leg_inertia = (0.0, 0.0, 0.0) if massless_legs else S.ROD_INERTIA

    def body(name, mass, inertia):
        return m.body3d(name, c[name][:3], c[name][3:], mass=mass, inertia=inertia, normalize=False)

    base = body("base", S.DISC_MASS, S.DISC_INERTIA)
    cyl = [body(f"cyl{k + 1}", leg_mass, leg_inertia) for k in range(6)]
    pis = [body(f"pis{k + 1}", leg_mass, leg_inertia) for k in range(6)]
    return base, cyl, pis, body("plat", S.DISC_MASS, S.DISC_INERTIA)


def _joints(m: Model, c: dict[str, list], base, cyl, pis, plat) -> None:
    """The base fixed, the legs' Cardans and cylindrical joints, the Euler normalisations."""
    for x, value, name in zip(c["base"], (0, 0, 0, 1, 0, 0, 0), COORDS):
        m.constraint(x - value, f"base_fix_{name}")
    z, y = (0.0, 0.0, 1.0), (0.0, 1.0, 0.0)
    for k, leg in enumerate(S.legs()):
        m.cardan(base, leg.b, leg.tb, cyl[k], (0.0, 0.0, -S.HALF), y, f"ub{k + 1}")
    for k in range(6):
        m.cylindrical(cyl[k], (0.0, 0.0, 0.0), z, pis[k], (0.0, 0.0, 0.0), z, f"cj{k + 1}",
                      normals=((1.0, 0.0, 0.0), y))
    for k, leg in enumerate(S.legs()):
        m.cardan(pis[k], (0.0, 0.0, S.HALF), leg.abar_p, plat, leg.pbar, leg.tpbar, f"up{k + 1}")
    for b in cyl + pis + [plat]:
        e = c[b.name][3:]
        m.constraint(sum((x * x for x in e[1:]), e[0] * e[0]) - 1.0, f"{b.name}_norm")


def _actuators(m: Model, cyl, pis, plat) -> None:
    """f1 .. f6 along the legs; each one's measure is its leg's length in the platform pose."""
    for k in range(6):
        m.actuator_pair(f"f{k + 1}", cyl[k], (0.0, 0.0, 0.0), pis[k], (0.0, 0.0, 0.0), cyl[k].vector((0.0, 0.0, 1.0)))
        # its power is f dL/dt, L the leg's length between its Cardan centres, in the platform pose
        b = [float(v) for v in S.legs()[k].b]
        d = [p - v for p, v in zip(plat.point(S.legs()[k].pbar), b)]
        m.explicit_measure(f"f{k + 1}", sqrt(dot(d, d)))


def _operate(m: Model, c: dict[str, list]) -> None:
    """Where a controller runs it (see _stewart.envelope): the platform's x, y, z, e1, e2, e3,
    and the actuator forces' range."""
    env = S.envelope()
    for k, name in enumerate(COORDS):
        if name in env:
            r, v, a = env[name]
            m.operate(c["plat"][k], range=r, rate=v, accel=a, cells=ENV_CELLS[name])
    for k in range(6):
        m.operate_input(f"f{k + 1}", FORCE_RANGE)


# ---- explicit (closed-form) coordinates of the base and the legs ------------------------------------
SHEPPERD_MIN = 0.2  # smallest accepted pivot component (half the square root Shepperd divides by)
CHECK_TIMES = 201  # points per motion at which the Shepperd branches are checked
CHECK_RANDOM = 256  # random poses in the operating envelope, besides its corners


def _unit(v):
    inv = 1.0 / sqrt(dot(v, v))
    return [x * inv for x in v]


def leg_frames(plat, leg: S.Leg):
    """(cylinder centre, cylinder axes, piston centre, piston axes) of a leg as atoms in
    the platform's coordinates; axes as (x, y, z) columns. With d = p - b, u = d / |d|:
    cylinder y = (d x t_b) / |d x t_b| (t_b horizontal and unit: |d x t_b|^2 =
    d_z^2 + (d_x t_by - d_y t_bx)^2), x = y x u; piston arm a = (d x w) / |d x w|,
    v = u x a, x = cx a - cy v, y = cy a + cx v."""
    p = plat.point(leg.pbar)
    d = [x - float(b) for x, b in zip(p, leg.b)]
    inv = 1.0 / sqrt(dot(d, d))
    u = [x * inv for x in d]
    rc = [float(b) + S.HALF * x for b, x in zip(leg.b, u)]
    rp = [x - S.HALF * y for x, y in zip(p, u)]
    tx, ty = float(leg.tb[0]), float(leg.tb[1])
    s = d[0] * ty - d[1] * tx
    n_inv = 1.0 / sqrt(d[2] * d[2] + s * s)
    g = d[2] * n_inv
    yc = [g * -ty, g * tx, s * n_inv]
    xc = cross(yc, u)
    c = cross(d, plat.vector(leg.tpbar))
    m_inv = 1.0 / sqrt(dot(c, c))
    a = [x * m_inv for x in c]
    v = cross(u, a)
    cx, cy = float(leg.abar_p[0]), float(leg.abar_p[1])
    xp = [cx * x - cy * y for x, y in zip(a, v)]
    yp = [cy * x + cx * y for x, y in zip(a, v)]
    return rc, (xc, yc, u), rp, (xp, yp, u)


def shepperd_branch(R: np.ndarray) -> tuple[int, float]:
    """(branch, sign) for a rotation matrix: pivot on the largest of e0 (branch 0) or
    e1..e3 (branches 1..3), the sign that makes e0 >= 0."""
    k = int(np.argmax([np.trace(R), R[0, 0], R[1, 1], R[2, 2]]))
    if k == 0:
        return 0, 1.0
    i = k - 1
    j, m = (i + 1) % 3, (i + 2) % 3
    return k, 1.0 if R[m, j] - R[j, m] >= 0 else -1.0


def shepperd(axes, branch: int, sign: float):
    """(Euler parameters, pivot component) of the rotation whose columns are `axes`, by
    Shepperd's method on a fixed branch: one square root, one division."""
    R = [[axes[j][i] for j in range(3)] for i in range(3)]
    e = [None] * 4
    if branch == 0:
        h = sqrt(1.0 + R[0][0] + R[1][1] + R[2][2])
        r = (0.5 * sign) / h
        e = [(0.5 * sign) * h, (R[2][1] - R[1][2]) * r, (R[0][2] - R[2][0]) * r, (R[1][0] - R[0][1]) * r]
    else:
        i = branch - 1
        j, m = (i + 1) % 3, (i + 2) % 3
        h = sqrt(1.0 + R[i][i] - R[j][j] - R[m][m])
        r = (0.5 * sign) / h
        e[1 + i] = (0.5 * sign) * h
        e[0] = (R[m][j] - R[j][m]) * r
        e[1 + j] = (R[j][i] + R[i][j]) * r
        e[1 + m] = (R[m][i] + R[i][m]) * r
    return e, 0.5 * h


def check_poses(seed: int = 0) -> np.ndarray:
    """Platform coordinates (x, y, z, e0..e3) where the explicit coordinates must hold: the
    four motions, the corners of the operating envelope's x, y, z, e1, e2, e3 (_stewart.envelope)
    and random poses in it (e0 from the normalisation)."""
    t = np.linspace(0.0, S.T_END, CHECK_TIMES)
    poses = [S.coords_98(motion, t)[:, -7:] for motion in MOTIONS]
    env = S.envelope()
    lo = np.array([env[k][0][0] for k in ("x", "y", "z", "e1", "e2", "e3")])
    hi = np.array([env[k][0][1] for k in ("x", "y", "z", "e1", "e2", "e3")])
    corners = np.array(list(itertools.product(*zip(lo, hi))))
    rand = lo + (hi - lo) * np.random.default_rng(seed).random((CHECK_RANDOM, 6))
    for P in (corners, rand):
        ev = P[:, 3:]
        e0 = np.sqrt(np.clip(1.0 - np.sum(ev * ev, axis=1), 0.0, None))
        poses.append(np.column_stack([P[:, :3], e0, ev]))
    return np.vstack(poses)


def check_branches(platform, pivots: dict, poses: np.ndarray, minimum: float = SHEPPERD_MIN) -> dict:
    """{body: smallest pivot component over `poses`}; raises ModelError naming the body, its
    branch and the pose if a pivot component falls below `minimum` (the branch's division
    would approach 0: a branch fixed at building time cannot serve those poses)."""
    names = list(pivots)
    Y = np.atleast_2d(Evaluator([pivots[b][0] for b in names], list(platform))(poses))
    out = {}
    for k, b in enumerate(names):
        col = Y[:, k]
        w = int(np.nanargmin(col)) if np.isfinite(col).any() else 0
        low = float(col[w]) if np.isfinite(col).all() else float("nan")
        if not low >= minimum:
            pose = ", ".join(f"{c}={v:.4g}" for c, v in zip(COORDS, poses[w]))
            raise ModelError(f"stewart: the Euler parameters of {b} pivot on e{pivots[b][1]} (Shepperd branch fixed "
                             f"at the nominal pose), whose value falls to {low:.3g} < {minimum} at the platform pose "
                             f"{pose}: the closed form would divide by nearly 0 there; narrow the platform's "
                             "ranges or the motions")
        out[b] = low
    return out


def _explicit(m: Model, c: dict, plat) -> None:
    """Give every coordinate but the platform's in closed form (see the module's doc)."""
    for x, value in zip(c["base"], (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)):
        m.explicit(x, as_atom(value))
    pivots = {}
    for k, leg in enumerate(S.legs()):
        rc, axc, rp, axp = leg_frames(plat, leg)
        R0 = leg.Rc0  # cylinder and piston axes at the nominal pose (psi = 0)
        branch, sign = shepperd_branch(R0)
        for name, r, axes in ((f"cyl{k + 1}", rc, axc), (f"pis{k + 1}", rp, axp)):
            e, piv = shepperd(axes, branch, sign)
            pivots[name] = (piv, branch)
            m.explicit_guard(f"the Shepperd pivot of {name} (e{branch})", piv, SHEPPERD_MIN)
            for x, v in zip(c[name], list(r) + e):
                m.explicit(x, v)
    # kept on the model for inspection: {body: (pivot component atom, branch)} and the
    # smallest pivot component over check_poses()
    m.shepperd_pivots = pivots
    m.shepperd_min = check_branches(c["plat"], pivots, check_poses())


def _outputs(m: Model, plat, cyl, pis) -> None:
    lengths = []
    for k in range(6):
        a, b = cyl[k].point((0.0, 0.0, -S.HALF)), pis[k].point((0.0, 0.0, S.HALF))
        d = [q - p for p, q in zip(a, b)]
        lengths.append(sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]))
    S.add_outputs(m, plat.r, plat.rotation(), lengths)
