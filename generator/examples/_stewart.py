"""The Stewart platform's numbers (../shared/models/stewart-platform.md) and its closed-form
kinematics, shared by the two Stewart models (98 reference-point coordinates and 24 relative
coordinates).

Frames. World = base frame (z up, origin at the base disc centre). Leg k joins base anchor
b_k to platform anchor p_k. Its base-side Cardan has the base's arm t_b (tangent to the
base circle at b_k) and the cylinder's arm a = (u0 x t_b)/|u0 x t_b| (u0 the nominal leg
axis; the sign makes the frames below right-handed with no half turns). With
F0 = [t_b, a, t_b x a] the cylinder's axes are Rc = F0 Rx(alpha) Ry(gamma): alpha about the
base's arm, gamma about the cylinder's arm, the cylinder's z along the leg. The piston's
axes are Rp = Rc Rz(psi): it spins about the common axis by psi, which the platform-side
Cardan (platform arm t_p, piston arm a_p = (u0 x t_p)/|..|, fixed in the piston) sets in
closed form: with w = Rc^T R t_p and a_p = (cx, cy, 0) in piston axes,
    w . Rz(psi) a_p = 0  ->  psi = atan2(-s P, s S), P = wx cx + wy cy, S = wy cx - wx cy,
s = sign(S) at the nominal pose (so psi = 0 there). At the nominal pose all of them, alpha,
gamma - gamma0 and psi, are zero, and cylinder and piston share the nominal axes Rc0.

`closed_form(motion, t)` gives every body's position and axes along a prescribed motion
(vectorised over t); the models use it for their starting guesses and declared ranges,
and the tests as an independent check of the solvers.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..ir import atan2, sqrt
from ..model.frames import quats_from_matrices

RADIUS = 0.5
BASE_DEG = (-15.0, 15.0, 105.0, 135.0, 225.0, 255.0)
PLAT_DEG = (-45.0, 45.0, 75.0, 165.0, 195.0, 285.0)
HEIGHT = 0.5
DISC_MASS = 106.02875205865553
DISC_INERTIA = (6.648886327011524, 6.648886327011524, 13.253594007331941)
ROD_MASS = 0.14313881527918496
ROD_INERTIA = (0.0010755540041837506, 0.0010755540041837506, 4.025779179727077e-06)
HALF = 0.15  # leg part's centre of mass to its Cardan centre
G = 9.81
OMEGA = 5.0
HEAVE = 0.04
ANGLE = math.pi / 18
T_END = 1.25
MOTIONS = ("heave", "yaw", "roll", "pitch")
AXIS = {"roll": 0, "pitch": 1, "yaw": 2}
NOMINAL_LEG = 0.563016250305247

# ---- the operating envelope (Model.operate): every combination of the four motions at their
# amplitudes and any phases, plus surge and sway of SURGE, all at OMEGA. Positions get
# POS_MARGIN, rates and accelerations ENV_MARGIN over the peaks of those combinations.
SURGE = 0.02
POS_MARGIN = 1.025
ENV_MARGIN = 1.25
# |e_i| of Rz(a) Ry(b) Rx(c) with |a|, |b|, |c| <= ANGLE is at most s + s^2, s = sin(ANGLE / 2)
# (0.0948; the combinations reach 0.0940): declared 0.1
E_MAX = 0.1
# peaks of e_i' and e_i'' over 400 combinations (random phases, every order of the three
# rotations, central differences on 2001 points per period): 0.4727 and 2.585, i.e.
# OMEGA ANGLE / 2 = 0.436 and OMEGA^2 ANGLE / 2 = 2.18 plus the coupling of the rotations
E_RATE, E_ACCEL = 0.6, 3.25  # 0.4727 * 1.25 = 0.591, 2.585 * 1.25 = 3.23


def envelope() -> dict:
    """{platform coordinate: (range, rate, accel)} of the operating envelope (x, y, z, e1,
    e2, e3; e0 follows from the normalisation)."""
    sx = SURGE * POS_MARGIN
    sz = HEAVE * POS_MARGIN
    rx, ax = OMEGA * SURGE * ENV_MARGIN, OMEGA ** 2 * SURGE * ENV_MARGIN
    rz, az = OMEGA * HEAVE * ENV_MARGIN, OMEGA ** 2 * HEAVE * ENV_MARGIN
    out = {"x": ((-sx, sx), (-rx, rx), (-ax, ax)), "y": ((-sx, sx), (-rx, rx), (-ax, ax)),
           "z": ((HEIGHT - sz, HEIGHT + sz), (-rz, rz), (-az, az))}
    for e in ("e1", "e2", "e3"):
        out[e] = ((-E_MAX, E_MAX), (-E_RATE, E_RATE), (-E_ACCEL, E_ACCEL))
    return out


def platform_states(motion: str, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(z, zd, zdd) [N, 7] of the platform's coordinates (x, y, z, e0, e1, e2, e3) along a
    motion, in closed form (e0 >= 0): the inputs of the reduced inverse dynamics."""
    if motion not in MOTIONS:
        raise ValueError(f"no Stewart motion {motion!r}; known: {', '.join(MOTIONS)}")
    t = np.atleast_1d(np.asarray(t, dtype=float))
    s, c = np.sin(OMEGA * t), np.cos(OMEGA * t)
    Z, ZD, ZDD = (np.zeros((len(t), 7)) for _ in range(3))
    Z[:, 2] = HEIGHT
    Z[:, 3] = 1.0
    if motion == "heave":
        Z[:, 2] += HEAVE * s
        ZD[:, 2] = HEAVE * OMEGA * c
        ZDD[:, 2] = -HEAVE * OMEGA ** 2 * s
        return Z, ZD, ZDD
    h, hd, hdd = ANGLE / 2 * s, ANGLE / 2 * OMEGA * c, -ANGLE / 2 * OMEGA ** 2 * s  # half the angle
    i = 4 + AXIS[motion]
    Z[:, 3], Z[:, i] = np.cos(h), np.sin(h)
    ZD[:, 3], ZD[:, i] = -np.sin(h) * hd, np.cos(h) * hd
    ZDD[:, 3] = -np.cos(h) * hd ** 2 - np.sin(h) * hdd
    ZDD[:, i] = -np.sin(h) * hd ** 2 + np.cos(h) * hdd
    return Z, ZD, ZDD


def combined_pose(t, phases, amplitudes=(SURGE, SURGE, HEAVE, ANGLE, ANGLE, ANGLE)):
    """(centre (N, 3), axes (N, 3, 3)) of the platform moving in surge, sway, heave, roll,
    pitch and yaw at once, each amplitude * sin(OMEGA t + phase), axes Rz(yaw) Ry(pitch)
    Rx(roll): the states the envelope contains."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    w = [a * np.sin(OMEGA * t + p) for a, p in zip(amplitudes, phases)]
    c = np.column_stack([w[0], w[1], HEIGHT + w[2]])
    return c, rot(2, w[5]) @ rot(1, w[4]) @ rot(0, w[3])


def _circle(deg: float) -> np.ndarray:
    a = math.radians(deg)
    return np.array([RADIUS * math.cos(a), RADIUS * math.sin(a), 0.0])


def _tangent(deg: float) -> np.ndarray:
    a = math.radians(deg)
    return np.array([-math.sin(a), math.cos(a), 0.0])


def _unit(v):
    return v / np.linalg.norm(v)


def rot(axis: int, angle):
    """Rotation matrices about a principal axis, vectorised over `angle`."""
    angle = np.asarray(angle, dtype=float)
    c, s = np.cos(angle), np.sin(angle)
    R = np.zeros(angle.shape + (3, 3))
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    R[..., axis, axis] = 1.0
    R[..., i, i] = c
    R[..., j, j] = c
    R[..., i, j] = -s
    R[..., j, i] = s
    return R


class Leg:
    def __init__(self, k: int):
        self.k = k
        self.b = _circle(BASE_DEG[k])
        self.pbar = _circle(PLAT_DEG[k])
        self.tb = _tangent(BASE_DEG[k])
        self.tpbar = _tangent(PLAT_DEG[k])
        p0 = np.array([0.0, 0.0, HEIGHT]) + self.pbar
        d = p0 - self.b
        self.L0 = float(np.linalg.norm(d))
        self.u0 = d / self.L0
        self.a_c = _unit(np.cross(self.u0, self.tb))
        self.F0 = np.column_stack([self.tb, self.a_c, np.cross(self.tb, self.a_c)])
        self.gamma0 = math.asin(float(self.u0 @ self.tb))
        self.Rc0 = self.F0 @ rot(1, self.gamma0)
        a_p = _unit(np.cross(self.u0, self.tpbar))  # the platform is not rotated at the nominal pose
        self.abar_p = self.Rc0.T @ a_p  # piston arm in piston axes (z component 0)
        w = self.Rc0.T @ self.tpbar
        cx, cy = self.abar_p[0], self.abar_p[1]
        self.sigma = 1.0 if w[1] * cx - w[0] * cy > 0 else -1.0


@functools.lru_cache(maxsize=None)
def legs() -> tuple[Leg, ...]:
    return tuple(Leg(k) for k in range(6))


def pose(motion: str, t):
    """(centre (N, 3), axes (N, 3, 3), angle (N,)) of the platform along a motion."""
    if motion not in MOTIONS:
        raise ValueError(f"no Stewart motion {motion!r}; known: {', '.join(MOTIONS)}")
    t = np.atleast_1d(np.asarray(t, dtype=float))
    c = np.zeros(t.shape + (3,))
    c[:, 2] = HEIGHT
    if motion == "heave":
        c[:, 2] += HEAVE * np.sin(OMEGA * t)
        return c, np.broadcast_to(np.eye(3), t.shape + (3, 3)).copy(), np.zeros_like(t)
    ang = ANGLE * np.sin(OMEGA * t)
    return c, rot(AXIS[motion], ang), ang


def leg_state(leg: Leg, c, R) -> dict:
    p = c + R @ leg.pbar
    d = p - leg.b
    L = np.linalg.norm(d, axis=-1)
    u = d / L[:, None]
    uf = u @ leg.F0  # components in F0
    gamma = np.arcsin(uf[:, 0])
    alpha = np.arctan2(-uf[:, 1], uf[:, 2])
    Rc = leg.F0 @ rot(0, alpha) @ rot(1, gamma)
    w = np.einsum("nji,nj->ni", Rc, R @ leg.tpbar)
    cx, cy = leg.abar_p[0], leg.abar_p[1]
    P = w[:, 0] * cx + w[:, 1] * cy
    S = w[:, 1] * cx - w[:, 0] * cy
    psi = np.arctan2(-leg.sigma * P, leg.sigma * S)
    Rp = Rc @ rot(2, psi)
    return {"p": p, "L": L, "u": u, "alpha": alpha, "beta": gamma - leg.gamma0, "psi": psi, "Rc": Rc, "Rp": Rp,
            "rc": leg.b + HALF * u, "rp": p - HALF * u}


def closed_form(motion: str, t) -> dict:
    c, R, ang = pose(motion, t)
    return {"c": c, "R": R, "angle": ang, "legs": [leg_state(leg, c, R) for leg in legs()]}


def _quats(Rs) -> np.ndarray:
    """Euler parameters along a path of rotations (N, 3, 3), the sign kept continuous."""
    out = quats_from_matrices(Rs)
    step = np.ones(len(out))
    step[1:] = np.where(np.einsum("ij,ij->i", out[1:], out[:-1]) < 0, -1.0, 1.0)
    return out * np.cumprod(step)[:, None]


BODIES_98 = ["base"] + [f"cyl{k + 1}" for k in range(6)] + [f"pis{k + 1}" for k in range(6)] + ["plat"]


def coords_98(motion: str, t) -> np.ndarray:
    """The 98 reference-point coordinates (x, y, z, e0..e3 of each body in BODIES_98)."""
    cf = closed_form(motion, t)
    n = len(cf["c"])
    cols = [np.tile([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0], (n, 1))]
    for key_r, key_R in (("rc", "Rc"), ("rp", "Rp")):
        for s in cf["legs"]:
            cols.append(np.hstack([s[key_r], _quats(s[key_R])]))
    cols.append(np.hstack([cf["c"], _quats(cf["R"])]))
    return np.hstack(cols)


def coords_24(motion: str, t) -> np.ndarray:
    """(x, y, z, yaw, pitch, roll) of the platform, then (alpha, beta, L) of each leg."""
    cf = closed_form(motion, t)
    n = len(cf["c"])
    ang = np.zeros((n, 3))
    if motion != "heave":
        ang[:, {"yaw": 0, "pitch": 1, "roll": 2}[motion]] = cf["angle"]
    cols = [cf["c"], ang] + [np.column_stack([s["alpha"], s["beta"], s["L"]]) for s in cf["legs"]]
    return np.hstack(cols)


@functools.lru_cache(maxsize=None)
def ranges(which: str) -> tuple:
    """Declared (range, vrange, arange) per coordinate: the union over the four motions of
    the closed-form values, rates and accelerations (central differences on a fine grid),
    widened by 10 % of their span plus 1e-3."""
    fn = coords_98 if which == "98" else coords_24
    t = np.linspace(0.0, T_END, 1001)
    h = t[1] - t[0]
    lo = [None] * 3
    hi = [None] * 3
    for motion in MOTIONS:
        X = fn(motion, t)
        V = np.gradient(X, h, axis=0, edge_order=2)
        A = np.gradient(V, h, axis=0, edge_order=2)
        for i, Y in enumerate((X, V, A)):
            lo[i] = Y.min(0) if lo[i] is None else np.minimum(lo[i], Y.min(0))
            hi[i] = Y.max(0) if hi[i] is None else np.maximum(hi[i], Y.max(0))
    out = []
    for j in range(len(lo[0])):
        per = []
        for i in range(3):
            a, b = float(lo[i][j]), float(hi[i][j])
            pad = 0.1 * (b - a) + 1e-3
            per.append((a - pad, b + pad))
        out.append(tuple(per))
    return tuple(out)



def add_outputs(m, position, R, lengths) -> None:
    """The outputs both models report: platform x, y, z, roll, pitch, yaw (R = Rz Ry Rx),
    leg lengths L1..L6 and their rates L1_d..L6_d."""
    for name, x in zip(("x", "y", "z"), position):
        m.output(name, x)
    m.output("roll", atan2(R[2][1], R[2][2]))
    m.output("pitch", atan2(-R[2][0], sqrt(R[0][0] * R[0][0] + R[1][0] * R[1][0])))
    m.output("yaw", atan2(R[1][0], R[0][0]))
    for k, L in enumerate(lengths):
        m.output(f"L{k + 1}", L)
    for k, L in enumerate(lengths):
        m.output(f"L{k + 1}_d", m.rate(L))
