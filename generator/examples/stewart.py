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
"""
from __future__ import annotations

from ..ir import cos, sin, sqrt
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


def check_motion(model: str, motion: str) -> None:
    if motion not in MOTIONS:
        raise ModelError(f"{model}: no motion {motion!r}; known: {', '.join(MOTIONS)}")


def build(motion: str = "heave", massless_legs: bool = False) -> Model:
    check_motion("stewart", motion)
    m = Model("stewart")
    law = platform_law(motion, m.t)
    rng = S.ranges("98")
    guess = S.coords_98(motion, [0.0])[0]
    c: dict[str, list] = {}
    for ib, body in enumerate(S.BODIES_98):
        c[body] = []
        for ic, name in enumerate(COORDS):
            j = 7 * ib + ic
            r, v, a = rng[j]
            c[body].append(m.coordinate(f"{body}_{name}", guess=float(guess[j]), range=r, vrange=v, arange=a))
    m.time_range(0.0, S.T_END)
    leg_mass = 0.0 if massless_legs else S.ROD_MASS
    leg_inertia = (0.0, 0.0, 0.0) if massless_legs else S.ROD_INERTIA

    def body(name, mass, inertia):
        return m.body3d(name, c[name][:3], c[name][3:], mass=mass, inertia=inertia, normalize=False)

    base = body("base", S.DISC_MASS, S.DISC_INERTIA)
    cyl = [body(f"cyl{k + 1}", leg_mass, leg_inertia) for k in range(6)]
    pis = [body(f"pis{k + 1}", leg_mass, leg_inertia) for k in range(6)]
    plat = body("plat", S.DISC_MASS, S.DISC_INERTIA)

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
    for k, name in enumerate(COORDS):
        if name != "e0":
            m.drive(c["plat"][k] - law[k], f"drive_{name}")

    m.gravity((0.0, 0.0, -S.G))
    for k in range(6):
        m.actuator_pair(f"f{k + 1}", cyl[k], (0.0, 0.0, 0.0), pis[k], (0.0, 0.0, 0.0), cyl[k].vector(z))
    _outputs(m, plat, cyl, pis)
    return m


def _outputs(m: Model, plat, cyl, pis) -> None:
    lengths = []
    for k in range(6):
        a, b = cyl[k].point((0.0, 0.0, -S.HALF)), pis[k].point((0.0, 0.0, S.HALF))
        d = [q - p for p, q in zip(a, b)]
        lengths.append(sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]))
    S.add_outputs(m, plat.r, plat.rotation(), lengths)
