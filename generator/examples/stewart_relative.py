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
coordinates. The legs' coordinates are also given in closed form (Model.explicit) from
the platform's: with d the leg vector P_k - B_k in the leg's fixed base F0, alpha =
atan2(-d_y, d_z), beta = atan2(d_x, sqrt(d_y^2 + d_z^2)) - gamma0 and L = |d| (the
reduced inverse dynamics and the envelope's cover use them).

Operating envelope (Model.operate, declared by default; build(envelope=False) or `--set
envelope=False` gives kernels over the driven motion's tube): the Stewart model's
(stewart.py) in these coordinates, every combination of the four motions at their
amplitudes plus surge and sway: x, y within +-SURGE, z within HEIGHT +- HEAVE, each angle
within +-ANGLE (all with POS_MARGIN), rates and accelerations those of the motions at
OMEGA (with ENV_MARGIN); the angles in 4 cells each (64 cells, covered in 0.13 s from the
closed forms). Actuator forces in stewart.FORCE_RANGE. Over it the reduced inverse
dynamics generates in 4-6 s in c-fixed and c-float32 (bounds 3e-3 .. 4e-3 N and 0.22 ..
0.37 N); as for the 98-coordinate model, float32 inverse dynamics gets no bound and
c-fixed inverse dynamics is refused there. The actuator f_k acts on the leg length L_k (the sliding of the cylindrical
joint), so B's column is the unit vector of leg<k>_L. Same bodies, inertia, gravity,
motions and outputs as the 98-coordinate model (stewart.py).
"""
from __future__ import annotations

from ..ir import atan2, sin, sqrt
from ..model import Model
from . import _stewart as S
from .stewart import FORCE_RANGE, MOTIONS, new_model

__all__ = ["MOTIONS", "PLATFORM", "build", "platform_law"]

PLATFORM = ("plat_x", "plat_y", "plat_z", "plat_yaw", "plat_pitch", "plat_roll")


def platform_law(motion: str, t):
    """(x, y, z, yaw, pitch, roll) of the platform: numbers or atoms in t."""
    if motion == "heave":
        return [0.0, 0.0, S.HEAVE * sin(S.OMEGA * t) + S.HEIGHT, 0.0, 0.0, 0.0]
    law = [0.0, 0.0, S.HEIGHT, 0.0, 0.0, 0.0]
    law[3 + {"yaw": 0, "pitch": 1, "roll": 2}[motion]] = sin(S.OMEGA * t) * S.ANGLE
    return law


def build(motion: str = "heave", massless_legs: bool = False, envelope: bool = True) -> Model:
    """envelope=True (default) declares the operating envelope (see the module's doc);
    with envelope=False kernels serve the driven motion's tube."""
    m = new_model("stewart_relative", motion, envelope)
    rng = S.ranges("24")
    guess = S.coords_24(motion, [0.0])[0]
    names = list(PLATFORM) + [f"leg{k + 1}_{p}" for k in range(6) for p in ("a", "b", "L")]
    q = []
    for j, name in enumerate(names):
        r, v, a = rng[j]
        q.append(m.coordinate(name, guess=float(guess[j]), range=r, vrange=v, arange=a))
    m.time_range(0.0, S.T_END)
    plat, legs_d = _tree(m, q, massless_legs)
    for qk, lk, name in zip(q[:6], platform_law(motion, m.t), PLATFORM):
        m.drive(qk - lk, f"drive_{name}")
    m.gravity((0.0, 0.0, -S.G))
    for k in range(6):
        m.actuator(f"f{k + 1}", q[8 + 3 * k])

    S.add_outputs(m, q[0:3], plat.rotation(), [q[8 + 3 * k] for k in range(6)])
    _explicit_legs(m, q, legs_d)
    if envelope:
        for qk, (r, v, a, cells) in zip(q[:6], operating_envelope()):
            m.operate(qk, range=r, rate=v, accel=a, cells=cells)
        for k in range(6):
            m.operate_input(f"f{k + 1}", FORCE_RANGE)
    return m


_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


def _tree(m: Model, q: list, massless_legs: bool):
    """The relative tree: the platform on its yaw, pitch, roll axes and position, each leg
    on its Cardan's two angles and length, closed by a loop at the platform anchor. Returns
    the platform's body and the leg vectors in their base frames (for the closed forms)."""
    tree = m.relative()
    W, O = tree.world, tree.origin
    pz = tree.base("plat_z_axis", W, _Z, q[3])
    py = tree.base("plat_y_axis", pz, _Y, q[4])
    plat_base = tree.base("plat_axes", py, _X, q[5])
    C = tree.point("C", O, q[0:3], W)
    plat = tree.body("plat", plat_base, C).set_inertia(S.DISC_MASS, inertia=S.DISC_INERTIA)
    mass = (0.0, (0.0, 0.0, 0.0)) if massless_legs else (S.ROD_MASS, S.ROD_INERTIA)
    legs_d = [_leg(tree, k, leg, q[6 + 3 * k: 9 + 3 * k], plat_base, C, mass) for k, leg in enumerate(S.legs())]
    return plat, legs_d


def _leg(tree, k: int, leg, abL: list, plat_base, C, mass: tuple):
    """Leg k's cylinder and piston bodies and its loop; its leg vector in its base frame."""
    W, O = tree.world, tree.origin
    a, b, L = abL
    F0 = tree.fixed_base(f"F0_{k + 1}", W, leg.F0)
    cross = tree.base(f"cross{k + 1}", F0, _X, a)
    cyl_base = tree.base(f"cyl{k + 1}_axes", cross, _Y, b + leg.gamma0)
    # the platform's arm in cylinder axes fixes the piston's spin (see _stewart.py)
    w = tree.express(list(map(float, leg.tpbar)), plat_base, cyl_base)
    cx, cy = float(leg.abar_p[0]), float(leg.abar_p[1])
    P = w[0] * cx + w[1] * cy
    Sg = w[1] * cx - w[0] * cy
    psi = atan2(-leg.sigma * P, leg.sigma * Sg)
    pis_base = tree.base(f"pis{k + 1}_axes", cyl_base, _Z, psi)
    Bk = tree.point(f"B{k + 1}", O, leg.b, W)
    Gc = tree.point(f"Gc{k + 1}", Bk, (0.0, 0.0, S.HALF), cyl_base)
    Ek = tree.point(f"E{k + 1}", Bk, [0.0, 0.0, L], cyl_base)
    Gp = tree.point(f"Gp{k + 1}", Bk, [0.0, 0.0, L - S.HALF], cyl_base)
    Pk = tree.point(f"P{k + 1}", C, leg.pbar, plat_base)
    tree.body(f"cyl{k + 1}", cyl_base, Gc).set_inertia(mass[0], inertia=mass[1])
    tree.body(f"pis{k + 1}", pis_base, Gp).set_inertia(mass[0], inertia=mass[1])
    tree.loop(Ek, Pk, W, f"loop{k + 1}")
    return tree.position(Bk, Pk, F0)


def operating_envelope() -> list[tuple]:
    """(range, rate, accel, cells) of x, y, z, yaw, pitch, roll (see the module's doc)."""
    out = []
    for amp, centre, cells in ((S.SURGE, 0.0, 1), (S.SURGE, 0.0, 1), (S.HEAVE, S.HEIGHT, 1),
                               (S.ANGLE, 0.0, 4), (S.ANGLE, 0.0, 4), (S.ANGLE, 0.0, 4)):
        r, v, a = amp * S.POS_MARGIN, S.OMEGA * amp * S.ENV_MARGIN, S.OMEGA ** 2 * amp * S.ENV_MARGIN
        out.append(((centre - r, centre + r), (-v, v), (-a, a), cells))
    return out


def _explicit_legs(m: Model, q, legs_d) -> None:
    """Each leg's alpha, beta and L in closed form from its vector d in F0 (module doc)."""
    for k, (leg, d) in enumerate(zip(S.legs(), legs_d)):
        a, b, L = q[6 + 3 * k: 9 + 3 * k]
        m.explicit(a, atan2(-d[1], d[2]))
        m.explicit(b, atan2(d[0], sqrt(d[1] * d[1] + d[2] * d[2])) - leg.gamma0)
        m.explicit(L, sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]))
