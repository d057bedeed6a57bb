"""The benchmark mechanisms written once, over any algebra with + - * / and sin/cos/sqrt.

Each builder takes a backend `B` (B.sym(name), B.sin, B.cos, B.sqrt, B.zero(e)) and
returns the same equations for mbforge atoms, CasADi SX and SymPy: coordinates q, their
velocities qd, time t, constraints phi(q, t), mass matrix entries {(i, j): e} and the
generalized forces Q(q, qd). Each backend then differentiates with its own tools.
"""
from __future__ import annotations

import math

G = 9.81
MODELS = ("fourbar", "slidercrank", "stewart")  # the joint functions the benches take (--models)


# ---- small generic linear algebra over Python lists ---------------------------------------
def dot(a, b):
    s = a[0] * b[0]
    for x, y in zip(a[1:], b[1:]):
        s = s + x * y
    return s


def add(a, b):
    return [x + y for x, y in zip(a, b)]


def sub(a, b):
    return [x - y for x, y in zip(a, b)]


def scale(c, a):
    return [c * x for x in a]


def matvec(A, v):
    return [dot(row, v) for row in A]


def tmatvec(A, v):
    return [dot([A[i][j] for i in range(len(A))], v) for j in range(len(A[0]))]


def matmul(A, B):
    cols = list(zip(*B))
    return [[dot(r, list(c)) for c in cols] for r in A]


def cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def _num_cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def _clean(x):
    return 0.0 if abs(x) < 1e-14 else x


def _unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


class Equations:
    def __init__(self, name, q, qd, t, phi, M, Q):
        self.name, self.q, self.qd, self.t, self.phi, self.M, self.Q = name, q, qd, t, phi, M, Q


def _coords(B, names):
    q = [B.sym(n, "q") for n in names]
    qd = [B.sym(n + "_d", "qd") for n in names]
    return q, qd


def _sparse_add(M, i, j, e, B):
    if B.zero(e):
        return
    M[(i, j)] = M[(i, j)] + e if (i, j) in M else e


# ---- four-bar, natural coordinates -------------------------------------------------------------
def fourbar(B):
    """The walking-skeleton four-bar with uniform bars of 1 kg/m under gravity."""
    q, qd = _coords(B, ["xB", "yB", "xC", "yC"])
    t = B.sym("t", "t")
    xB, yB, xC, yC = q
    w = 10.0 * 2.0 * math.pi / 60.0
    phi = [
        xB * xB + yB * yB - 1.0,
        (xC - xB) * (xC - xB) + (yC - yB) * (yC - yB) - 3.5 * 3.5,
        (4.0 - xC) * (4.0 - xC) + yC * yC - 2.5 * 2.5,
        xB * B.sin(w * t) - yB * B.cos(w * t),
    ]
    # uniform bar between points i and j of mass m: m/6 [[2, 1], [1, 2]] per axis;
    # a fixed end contributes only its diagonal block
    M = {}
    bars = [(None, 0, 1.0), (0, 1, 3.5), (1, None, 2.5)]  # point indices of B=0, C=1
    for i, j, m in bars:
        for a, b, c in ((i, i, 2.0), (j, j, 2.0), (i, j, 1.0), (j, i, 1.0)):
            if a is None or b is None:
                continue
            for ax in (0, 1):
                _sparse_add(M, 2 * a + ax, 2 * b + ax, B.const(m * c / 6.0), B)
    Q = [B.const(0.0), B.const(-G * (1.0 + 3.5) / 2.0), B.const(0.0), B.const(-G * (3.5 + 2.5) / 2.0)]
    return Equations("fourbar", q, qd, t, phi, M, Q)


# ---- slider-crank, 2-D reference-point coordinates -------------------------------------------------
def slidercrank(B):
    names = [f"{c}{k}" for k in range(4) for c in ("x", "y", "th")]
    q, qd = _coords(B, names)
    t = B.sym("t", "t")
    w = 10.0 * 2.0 * math.pi / 60.0
    r = [(q[3 * k], q[3 * k + 1]) for k in range(4)]
    th = [q[3 * k + 2] for k in range(4)]
    c = [B.cos(a) for a in th]
    s = [B.sin(a) for a in th]

    def point(k, u):  # r_k + A_k u
        return (r[k][0] + c[k] * u[0] - s[k] * u[1], r[k][1] + s[k] * u[0] + c[k] * u[1])

    def rev(i, ui, j, uj):
        pi, pj = point(i, ui), point(j, uj)
        return [pi[0] - pj[0], pi[1] - pj[1]]

    phi = [r[0][0], r[0][1], th[0]]
    phi += rev(0, (0.0, 0.0), 1, (0.0, 0.0))
    phi += rev(1, (1.0, 0.0), 2, (0.0, 0.0))
    phi += rev(2, (2.0, 0.0), 3, (0.0, 0.0))
    # prismatic ground-slider along the ground x axis: h = (0, 1) is its normal
    h = (-s[0], c[0])
    d = (r[0][0] - r[3][0], r[0][1] - r[3][1])
    phi += [th[0] - th[3], h[0] * d[0] + h[1] * d[1]]
    phi += [th[1] - w * t]
    # inertia: (mass, centre of mass in body frame, inertia about the centre)
    inertia = {1: (1.0, (0.5, 0.0), 1.0 / 12.0), 2: (2.0, (1.0, 0.0), 2.0 / 3.0), 3: (1.0, (0.0, 0.0), 0.01)}
    M, Q = {}, [B.const(0.0)] * 12
    for k, (m, (gx, gy), J) in inertia.items():
        i = 3 * k
        # d(A sG)/dth = B sG with B = dA/dth
        bx = -s[k] * gx - c[k] * gy
        by = c[k] * gx - s[k] * gy
        _sparse_add(M, i, i, B.const(m), B)
        _sparse_add(M, i + 1, i + 1, B.const(m), B)
        for a, e in ((0, m * bx), (1, m * by)):
            _sparse_add(M, i + a, i + 2, e, B)
            _sparse_add(M, i + 2, i + a, e, B)
        _sparse_add(M, i + 2, i + 2, B.const(J + m * (gx * gx + gy * gy)), B)
        w2 = qd[i + 2] * qd[i + 2]
        ax = c[k] * gx - s[k] * gy  # A sG
        ay = s[k] * gx + c[k] * gy
        Q[i] = Q[i] + m * w2 * ax
        Q[i + 1] = Q[i + 1] + m * w2 * ay - m * G
        Q[i + 2] = Q[i + 2] - m * G * bx
    return Equations("slidercrank", q, qd, t, phi, M, Q)


# ---- Stewart platform, 98 reference-point coordinates with Euler parameters ------------------------------
DISC_M = 106.02875205865553
DISC_J = (6.648886327011524, 6.648886327011524, 13.253594007331941)
ROD_M = 0.14313881527918496
ROD_J = (0.0010755540041837506, 0.0010755540041837506, 4.025779179727077e-06)
BASE_DEG = (-15, 15, 105, 135, 225, 255)
PLAT_DEG = (-45, 45, 75, 165, 195, 285)


def _rot_e(e):
    """A(e) = I + 2 Theta (e0 I + Theta), Theta = skew(e1, e2, e3)."""
    e0, e1, e2, e3 = e
    return [
        [1.0 - 2.0 * (e2 * e2 + e3 * e3), 2.0 * (e1 * e2 - e0 * e3), 2.0 * (e1 * e3 + e0 * e2)],
        [2.0 * (e1 * e2 + e0 * e3), 1.0 - 2.0 * (e1 * e1 + e3 * e3), 2.0 * (e2 * e3 - e0 * e1)],
        [2.0 * (e1 * e3 - e0 * e2), 2.0 * (e2 * e3 + e0 * e1), 1.0 - 2.0 * (e1 * e1 + e2 * e2)],
    ]


def _L(e):
    """L(e) = [-e_vec, -skew(e_vec) + e0 I] (3 x 4): body angular velocity w' = 2 L(e) e_dot."""
    e0, e1, e2, e3 = e
    return [[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]]


def stewart_geometry():
    """Numbers of the 6-UCU platform (shared/models/stewart-platform.md), nominal pose."""
    R = 0.5
    base = [(R * math.cos(math.radians(a)), R * math.sin(math.radians(a)), 0.0) for a in BASE_DEG]
    plat = [(R * math.cos(math.radians(a)), R * math.sin(math.radians(a)), 0.0) for a in PLAT_DEG]
    btan = [(-math.sin(math.radians(a)), math.cos(math.radians(a)), 0.0) for a in BASE_DEG]
    ptan = [(-math.sin(math.radians(a)), math.cos(math.radians(a)), 0.0) for a in PLAT_DEG]
    return base, plat, btan, ptan


def _frame_quat(z):
    """Euler parameters of a rotation whose third column is the unit vector z."""
    x = _unit(_num_cross([0.0, 1.0, 0.0], z)) if abs(z[1]) < 0.9 else _unit(_num_cross(z, [1.0, 0.0, 0.0]))
    y = _num_cross(z, x)
    m = [[x[0], y[0], z[0]], [x[1], y[1], z[1]], [x[2], y[2], z[2]]]
    tr = m[0][0] + m[1][1] + m[2][2]
    e0 = math.sqrt(max(0.0, 1.0 + tr)) / 2.0
    return (e0, (m[2][1] - m[1][2]) / (4 * e0), (m[0][2] - m[2][0]) / (4 * e0), (m[1][0] - m[0][1]) / (4 * e0)), m


def stewart(B, motion: str = "heave"):
    names = [f"{c}{k}" for k in range(14) for c in ("x", "y", "z", "e0", "e1", "e2", "e3")]
    q, qd = _coords(B, names)
    t = B.sym("t", "t")
    phi = _stewart_phi(B, q, t, motion)
    M, Q = _stewart_inertia(B, q, qd)
    return Equations("stewart", q, qd, t, phi, M, Q)


def _stewart_phi(B, q, t, motion: str) -> list:
    """The 98 equations: base fixed, per leg its Cardans and cylindrical joint, the leg
    bodies' Euler normalisations, the platform's 7 coordinates driven."""
    base, plat, btan, ptan = stewart_geometry()
    r = [q[7 * k:7 * k + 3] for k in range(14)]
    e = [q[7 * k + 3:7 * k + 7] for k in range(14)]
    A = [_rot_e(ek) for ek in e]
    phi = []
    phi += r[0] + [e[0][0] - 1.0, e[0][1], e[0][2], e[0][3]]  # base fixed
    h = 0.15
    for k in range(6):
        cyl, pis = 1 + k, 7 + k
        pk = [plat[k][0], plat[k][1], 0.5]
        u = _unit([pk[i] - base[k][i] for i in range(3)])
        _, m = _frame_quat(u)
        # body-frame vectors; rounding noise (1e-17 for a true 0) would cost operations
        loc = lambda v: [_clean(sum(m[i][j] * v[i] for i in range(3))) for j in range(3)]  # noqa: E731
        c_arm = loc(_unit(_num_cross(u, btan[k])))
        p_arm = loc(_unit(_num_cross(u, ptan[k])))
        # Cardan base - cylinder: spherical + perpendicular cross arms
        pb = add(r[0], matvec(A[0], list(base[k])))
        pc = add(r[cyl], matvec(A[cyl], [0.0, 0.0, -h]))
        phi += sub(pb, pc)
        phi += [dot(matvec(A[0], list(btan[k])), matvec(A[cyl], c_arm))]
        # cylindrical cylinder - piston along the leg axis (local z of both)
        xc, yc = [row[0] for row in A[cyl]], [row[1] for row in A[cyl]]
        zp = [row[2] for row in A[pis]]
        d = sub(r[pis], r[cyl])
        phi += [dot(xc, zp), dot(yc, zp), dot(xc, d), dot(yc, d)]
        # Cardan piston - platform
        pp = add(r[13], matvec(A[13], list(plat[k])))
        pq = add(r[pis], matvec(A[pis], [0.0, 0.0, h]))
        phi += sub(pp, pq)
        phi += [dot(matvec(A[13], list(ptan[k])), matvec(A[pis], p_arm))]
    for k in range(1, 13):  # Euler normalisation of the leg bodies
        phi.append(dot(e[k], e[k]) - 1.0)
    # platform driving
    amp = 0.04 * B.sin(5.0 * t)
    ang = (math.pi / 36.0) * B.sin(5.0 * t)
    drive_r = [B.const(0.0), B.const(0.0), 0.5 + (amp if motion == "heave" else B.const(0.0))]
    if motion == "heave":
        drive_e = [B.const(1.0), B.const(0.0), B.const(0.0), B.const(0.0)]
    else:
        axis = {"roll": 1, "pitch": 2, "yaw": 3}[motion]
        drive_e = [B.cos(ang)] + [B.sin(ang) if i == axis else B.const(0.0) for i in (1, 2, 3)]
    phi += [r[13][i] - drive_r[i] for i in range(3)] + [e[13][i] - drive_e[i] for i in range(4)]
    return phi


def _stewart_inertia(B, q, qd):
    """M = blockdiag(m I3, 4 L^T J' L) per body (sparse) and Q: gravity and the velocity
    term -8 L(e_dot)^T J' L(e) e_dot."""
    e = [q[7 * k + 3:7 * k + 7] for k in range(14)]
    M, Q = {}, []
    for k in range(14):
        m, J = (DISC_M, DISC_J) if k in (0, 13) else (ROD_M, ROD_J)
        i = 7 * k
        for a in range(3):
            _sparse_add(M, i + a, i + a, B.const(m), B)
        L = _L(e[k])
        JL = [[J[a] * L[a][c] for c in range(4)] for a in range(3)]
        for a in range(4):
            for b in range(a, 4):
                v = 4.0 * (L[0][a] * JL[0][b] + L[1][a] * JL[1][b] + L[2][a] * JL[2][b])
                _sparse_add(M, i + 3 + a, i + 3 + b, v, B)
                if b != a:
                    _sparse_add(M, i + 3 + b, i + 3 + a, v, B)
        ed = qd[i + 3:i + 7]
        w = matvec(L, ed)  # half the body angular velocity
        Jw = [J[a] * w[a] for a in range(3)]
        Ld = _L(ed)
        Qe = scale(-8.0, tmatvec(Ld, Jw))
        Q += [B.const(0.0), B.const(0.0), B.const(-m * G)] + Qe
    return M, Q


# ---- serial chain in relative coordinates (derivative scaling) -------------------------------
def chain_tip(B, n: int):
    """Tip position of an n-body spatial chain, joints alternating about z, y, x."""
    th = [B.sym(f"th{k}", "q") for k in range(n)]
    R = None
    p = [B.const(0.0)] * 3
    for k in range(n):
        c, s = B.cos(th[k]), B.sin(th[k])
        one, zero = B.const(1.0), B.const(0.0)
        ax = k % 3
        if ax == 0:
            Rk = [[c, -s, zero], [s, c, zero], [zero, zero, one]]
        elif ax == 1:
            Rk = [[c, zero, s], [zero, one, zero], [-s, zero, c]]
        else:
            Rk = [[one, zero, zero], [zero, c, -s], [zero, s, c]]
        R = Rk if R is None else matmul(R, Rk)
        p = add(p, [R[i][0] * 0.3 for i in range(3)])  # link of 0.3 along local x
    return th, p
