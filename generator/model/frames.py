"""Rotations over atoms shared by the coordinate families and the joint kinds, and the
numeric (numpy) helpers that set models up.

Matrices are lists of rows of atoms, vectors lists of atoms; the algebra on them is
mbforge.ir.linalg's (the one vector algebra: vconst, matvec, mtv, matmul, ...).
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import ONE, TWO, ZERO, Atom, add, as_atom, cos, mul, neg, sin, skew, sub, vconst, vec


def axis_rotation(axis, angle) -> list[list[Atom]]:
    """Rodrigues: rotation by `angle` (atom) about the constant unit `axis` (3 numbers).

    v_parent = R v_child. For a principal axis the zeros fold, giving the short matrices.
    """
    k = np.asarray(axis, dtype=float)
    nk = np.linalg.norm(k)
    if not nk > 0:
        raise ValueError(f"rotation axis {axis!r} is zero")
    k = k / nk
    c, s = cos(as_atom(angle)), sin(as_atom(angle))
    one_c = sub(ONE, c)
    K = skew(vconst(k))
    R = []
    for i in range(3):
        row = []
        for j in range(3):
            if i == j:  # k_i^2 + (1 - k_i^2) c: folds to 1 or c on a principal axis
                e = add(as_atom(float(k[i] ** 2)), mul(as_atom(float(1.0 - k[i] ** 2)), c))
            else:
                e = add(mul(one_c, as_atom(float(k[i] * k[j]))), mul(s, K[i][j]))
            row.append(e)
        R.append(row)
    return R


def rot2(theta) -> list[list[Atom]]:
    c, s = cos(as_atom(theta)), sin(as_atom(theta))
    return [[c, neg(s)], [s, c]]


def euler_rotation(e) -> list[list[Atom]]:
    """A(e) = I + 2 Theta (e0 I + Theta), Theta = skew(e1, e2, e3) (the thesis's form),
    written out so each entry is built once: A = I + 2 e0 Theta + 2 (ev ev^T - |ev|^2 I)."""
    e0, e1, e2, e3 = vec(e)
    ev = [e1, e2, e3]
    sq = [mul(x, x) for x in ev]
    A = []
    for i in range(3):
        row = []
        for j in range(3):
            if i == j:
                others = [sq[k] for k in range(3) if k != i]
                row.append(sub(ONE, mul(TWO, add(others[0], others[1]))))
            else:
                th = skew(ev)[i][j]  # +-e_k
                row.append(mul(TWO, add(mul(e0, th), mul(ev[i], ev[j]))))
        A.append(row)
    return A


def euler_L(e) -> list[list[Atom]]:
    """L(e) = [-ev, -skew(ev) + e0 I] (3 x 4): body-frame angular velocity w' = 2 L(e) e_dot."""
    e0, e1, e2, e3 = vec(e)
    ev = [e1, e2, e3]
    S = skew(ev)
    return [[neg(ev[i])] + [sub(e0 if i == j else ZERO, S[i][j]) for j in range(3)] for i in range(3)]


def perp2(v) -> list[Atom]:
    """The 2-D vector turned by +90 degrees."""
    return [neg(as_atom(v[1])), as_atom(v[0])]


def cross2(a, b) -> Atom:
    return sub(mul(as_atom(a[0]), as_atom(b[1])), mul(as_atom(a[1]), as_atom(b[0])))


def vee(S) -> list[Atom]:
    """The vector of a (numerically) skew matrix, from its antisymmetric part."""
    half = as_atom(0.5)
    return [mul(half, sub(S[2][1], S[1][2])), mul(half, sub(S[0][2], S[2][0])), mul(half, sub(S[1][0], S[0][1]))]


# ---- numeric helpers (numpy) used to set models up -------------------------------------------
def quat_from_matrix(R) -> np.ndarray:
    """Euler parameters (e0, e1, e2, e3), e0 >= 0, of a rotation matrix (Shepperd's method)."""
    return quats_from_matrices(np.asarray(R, dtype=float)[None])[0]


def quats_from_matrices(R) -> np.ndarray:
    """Euler parameters of rotation matrices R (N, 3, 3), e0 >= 0 (Shepperd's method, each
    row pivoting on the largest of 1 + tr R and 1 + 2 R_ii - tr R)."""
    R = np.asarray(R, dtype=float)
    tr = np.trace(R, axis1=1, axis2=2)
    pick = np.argmax(np.stack([tr, R[:, 0, 0], R[:, 1, 1], R[:, 2, 2]], axis=1), axis=1)
    e = np.empty((len(R), 4))
    for k in range(4):
        sel = pick == k
        if not np.any(sel):
            continue
        A = R[sel]
        t = tr[sel]
        if k == 0:
            e0 = 0.5 * np.sqrt(1.0 + t)
            e[sel] = np.column_stack([e0, (A[:, 2, 1] - A[:, 1, 2]) / (4 * e0), (A[:, 0, 2] - A[:, 2, 0]) / (4 * e0),
                                      (A[:, 1, 0] - A[:, 0, 1]) / (4 * e0)])
            continue
        i = k - 1
        j, m = (i + 1) % 3, (i + 2) % 3
        ei = 0.5 * np.sqrt(1.0 + 2 * A[:, i, i] - t)
        out = np.empty((len(A), 4))
        out[:, 1 + i] = ei
        out[:, 0] = (A[:, m, j] - A[:, j, m]) / (4 * ei)
        out[:, 1 + j] = (A[:, j, i] + A[:, i, j]) / (4 * ei)
        out[:, 1 + m] = (A[:, m, i] + A[:, i, m]) / (4 * ei)
        e[sel] = out
    return np.where(e[:, :1] < 0, -e, e)


def rotation_np(axis, angle) -> np.ndarray:
    k = np.asarray(axis, dtype=float)
    k = k / np.linalg.norm(k)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K


def perpendiculars(a) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors that make (b, c, a/|a|) a right-handed orthonormal set."""
    a = np.asarray(a, dtype=float)
    a = a / np.linalg.norm(a)
    trial = np.eye(3)[int(np.argmin(np.abs(a)))]
    b = np.cross(a, trial)
    b /= np.linalg.norm(b)
    c = np.cross(a, b)
    return b, c


__all__ = ["axis_rotation", "rot2", "euler_rotation",
           "euler_L", "perp2", "cross2", "vee", "quat_from_matrix", "quats_from_matrices", "rotation_np",
           "perpendiculars"]
