"""The Stewart platform of ../shared/models/stewart-platform.md in relative coordinates:
the platform's position and three angles, and per leg two Cardan angles and a length,
24 coordinates.

Coordinates: plat_x, plat_y, plat_z and plat_yaw, plat_pitch, plat_roll (platform axes
Rz(yaw) Ry(pitch) Rx(roll)); leg<k>_a (about the base's arm), leg<k>_b (about the
cylinder's arm, zero at the nominal pose) and leg<k>_L (distance between the leg's
Cardan centres). Trees (relative.py): world -> platform bases (z, y, x); world -> leg
k's fixed base F0 -> cross (x, by a) -> cylinder (y, by b + gamma0) -> piston (z, by psi).
The piston's spin psi is not a coordinate: the platform-side Cardan fixes it in closed
form as a function of the coordinates (see _stewart.py), so it enters the piston's
angular velocity through its time derivative. Points: base anchor B_k, cylinder centre
B_k + 0.15 z_cyl, leg end E_k = B_k + L z_cyl, piston centre B_k + (L - 0.15) z_cyl,
platform anchor P_k = C + R p_k.

Equations: 18 loop closures E_k = P_k (in world components) and 6 drives of the platform
coordinates. The actuator f_k acts on the leg length L_k (the sliding of the cylindrical
joint), so B's column is the unit vector of leg<k>_L. Same bodies, inertia, gravity,
motions and outputs as the 98-coordinate model (stewart.py).
"""
from __future__ import annotations

from ..ir import atan2, sin
from ..model import Model
from . import _stewart as S
from .stewart import MOTIONS, check_motion

__all__ = ["MOTIONS", "PLATFORM", "build", "platform_law"]

PLATFORM = ("plat_x", "plat_y", "plat_z", "plat_yaw", "plat_pitch", "plat_roll")


def platform_law(motion: str, t):
    """(x, y, z, yaw, pitch, roll) of the platform: numbers or atoms in t."""
    if motion == "heave":
        return [0.0, 0.0, S.HEAVE * sin(S.OMEGA * t) + S.HEIGHT, 0.0, 0.0, 0.0]
    law = [0.0, 0.0, S.HEIGHT, 0.0, 0.0, 0.0]
    law[3 + {"yaw": 0, "pitch": 1, "roll": 2}[motion]] = sin(S.OMEGA * t) * S.ANGLE
    return law


def build(motion: str = "heave", massless_legs: bool = False) -> Model:
    check_motion("stewart_relative", motion)
    m = Model("stewart_relative")
    rng = S.ranges("24")
    guess = S.coords_24(motion, [0.0])[0]
    names = list(PLATFORM) + [f"leg{k + 1}_{p}" for k in range(6) for p in ("a", "b", "L")]
    q = []
    for j, name in enumerate(names):
        r, v, a = rng[j]
        q.append(m.coordinate(name, guess=float(guess[j]), range=r, vrange=v, arange=a))
    m.time_range(0.0, S.T_END)
    leg_mass = 0.0 if massless_legs else S.ROD_MASS
    leg_inertia = (0.0, 0.0, 0.0) if massless_legs else S.ROD_INERTIA

    tree = m.relative()
    W, O = tree.world, tree.origin
    x, y, z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
    pz = tree.base("plat_z_axis", W, z, q[3])
    py = tree.base("plat_y_axis", pz, y, q[4])
    plat_base = tree.base("plat_axes", py, x, q[5])
    C = tree.point("C", O, q[0:3], W)
    plat = tree.body("plat", plat_base, C).set_inertia(S.DISC_MASS, inertia=S.DISC_INERTIA)

    for k, leg in enumerate(S.legs()):
        a, b, L = q[6 + 3 * k: 9 + 3 * k]
        F0 = tree.fixed_base(f"F0_{k + 1}", W, leg.F0)
        cross = tree.base(f"cross{k + 1}", F0, x, a)
        cyl_base = tree.base(f"cyl{k + 1}_axes", cross, y, b + leg.gamma0)
        # the platform's arm in cylinder axes fixes the piston's spin (see _stewart.py)
        w = tree.express(list(map(float, leg.tpbar)), plat_base, cyl_base)
        cx, cy = float(leg.abar_p[0]), float(leg.abar_p[1])
        P = w[0] * cx + w[1] * cy
        Sg = w[1] * cx - w[0] * cy
        psi = atan2(-leg.sigma * P, leg.sigma * Sg)
        pis_base = tree.base(f"pis{k + 1}_axes", cyl_base, z, psi)
        Bk = tree.point(f"B{k + 1}", O, leg.b, W)
        Gc = tree.point(f"Gc{k + 1}", Bk, (0.0, 0.0, S.HALF), cyl_base)
        Ek = tree.point(f"E{k + 1}", Bk, [0.0, 0.0, L], cyl_base)
        Gp = tree.point(f"Gp{k + 1}", Bk, [0.0, 0.0, L - S.HALF], cyl_base)
        Pk = tree.point(f"P{k + 1}", C, leg.pbar, plat_base)
        tree.body(f"cyl{k + 1}", cyl_base, Gc).set_inertia(leg_mass, inertia=leg_inertia)
        tree.body(f"pis{k + 1}", pis_base, Gp).set_inertia(leg_mass, inertia=leg_inertia)
        tree.loop(Ek, Pk, W, f"loop{k + 1}")

    for qk, lk, name in zip(q[:6], platform_law(motion, m.t), PLATFORM):
        m.drive(qk - lk, f"drive_{name}")
    m.gravity((0.0, 0.0, -S.G))
    for k in range(6):
        m.actuator(f"f{k + 1}", q[8 + 3 * k])

    S.add_outputs(m, q[0:3], plat.rotation(), [q[8 + 3 * k] for k in range(6)])
    return m
