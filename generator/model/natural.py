"""Natural coordinates (the 1985 natural-coordinates paper): bodies described by the
Cartesian coordinates of basic points and, in 3-D, of unit vectors.

A body's points and vectors are shared with its neighbours to make joints (a shared point
is a spherical joint in 3-D and a revolute joint in 2-D; a shared point and unit vector is a
revolute joint in 3-D), so joints often add no equation at all. Rigid-body equations are
constant distances and constant dot products between the body's basis vectors.

Any point of a body is a fixed linear combination of its basis: r(x) = r0 + X K (x - x0)
with X = [v1 .. vk] (point differences and unit vectors; in 2-D v2 is v1 turned by 90
degrees) and K = pinv(Xbar) from their body-frame coordinates. Positions are linear in the
coordinates, so the mass matrix M = integral of C^T C dm is constant and there is no
velocity-dependent inertia term.
"""
from __future__ import annotations

import numpy as np

from ..ir import ZERO, add, as_atom, dot, matmul, mul, neg, sub, time_derivative, transpose, vconst, vec
from .bodies import Body, BodyError
from .errors import check_name
from .frames import cross2, perp2, vee


class Point:
    """A basic point: its coordinates (atoms; numbers for a fixed point)."""

    def __init__(self, name: str, coords):
        self.name = name
        self.r = vconst(coords)

    def __iter__(self):
        return iter(self.r)

    def __len__(self):
        return len(self.r)

    def __getitem__(self, k):
        return self.r[k]


class Unit(Point):
    """A unit vector (3-D)."""


def point(model, name: str, guess, range=None, vrange=None, arange=None, fixed: bool = False) -> Point:
    """A basic point with coordinates name_x, name_y (, name_z); `fixed` gives a ground point.
    range/vrange/arange: one (lo, hi) per component or one for all."""
    check_name(model, "point", name)
    if fixed:
        return Point(name, [float(g) for g in guess])
    coords = []
    for k, g in enumerate(guess):
        coords.append(model.coordinate(f"{name}_{'xyz'[k]}", guess=g, range=_pick(range, k, (g - 1, g + 1)),
                                       vrange=_pick(vrange, k, (-1, 1)), arange=_pick(arange, k, (-1, 1))))
    return Point(name, coords)


def unit_vector(model, name: str, guess, vrange=None, arange=None, fixed: bool = False) -> Unit:
    """A unit vector with coordinates name_x, name_y, name_z and its normalisation `name_norm`."""
    check_name(model, "unit vector", name)
    g = np.asarray(guess, dtype=float)
    g = g / np.linalg.norm(g)
    if fixed:
        return Unit(name, g.tolist())
    coords = [model.coordinate(f"{name}_{'xyz'[k]}", guess=g[k], range=(-1.05, 1.05),
                               vrange=_pick(vrange, k, (-2, 2)), arange=_pick(arange, k, (-5, 5))) for k in range(3)]
    u = Unit(name, coords)
    model.constraint(sub(dot(u.r, u.r), as_atom(1.0)), f"{name}_norm")
    return u


def _pick(r, k, default):
    if r is None:
        return default
    if len(r) == 2 and not isinstance(r[0], (tuple, list)):
        return r
    return r[k]


class _Linear(Body):
    """Common part of natural-coordinate bodies: r(x) = r0 + sum_k c_k(x) v_k."""

    def _setup(self, r0, xbar0, basis, basis_local):
        self.r0 = list(r0)
        self.x0 = np.asarray(xbar0, dtype=float)
        self.basis = [list(v) for v in basis]
        # dim x k; k = 0 for a point mass (no direction: only the point itself is on the body)
        Xb = np.array(basis_local, dtype=float).reshape(len(basis_local), len(self.x0)).T
        self.Xbar = Xb
        self.K = np.linalg.pinv(Xb)
        self._span = Xb @ self.K  # projector onto the span of the basis

    def coefficients(self, local) -> np.ndarray:
        d = np.asarray(local, dtype=float) - self.x0
        if np.linalg.norm(d - self._span @ d) > 1e-9 * max(1.0, np.linalg.norm(d)):
            raise BodyError(f"body {self.name!r}: point {tuple(local)} is outside the span of its points and vectors")
        return self.K @ d

    def _point(self, local):
        c = self.coefficients(local)
        out = list(self.r0)
        for ck, v in zip(c, self.basis):
            if ck != 0.0:
                out = [add(o, mul(as_atom(float(ck)), x)) for o, x in zip(out, v)]
        return out

    def _rotation_matrix(self):
        if self.Xbar.shape[1] < self.dim:
            raise BodyError(f"body {self.name!r}: its points and vectors span fewer than {self.dim} "
                            "directions, so it has no rotation matrix")
        X = transpose(self.basis)  # dim x k, columns = basis vectors
        return matmul(X, self.K.tolist())

    def inertia_terms(self, ctx):
        """Constant mass matrix from the second moments; gravity; no velocity terms."""
        dim = self.dim
        m = self.mass
        d = self.com - self.x0
        cbar = self.coefficients(self.com)
        if dim == 2:
            S = m * np.outer(d, d) + 0.5 * float(self.inertia) * np.eye(2)
        else:
            IG = np.asarray(self.inertia)
            S = m * np.outer(d, d) + 0.5 * np.trace(IG) * np.eye(3) - IG
        if np.linalg.norm(S - self._span @ S @ self._span.T) > 1e-9 * max(1.0, np.abs(S).max()):
            raise BodyError(f"body {self.name!r}: its inertia has mass outside the span of its points and vectors; "
                            "add a point or a unit vector that spans it")
        Z = self.K @ S @ self.K.T
        k = len(self.basis)
        G = np.zeros((k + 1, k + 1))
        G[0, 0] = m
        G[0, 1:] = G[1:, 0] = m * cbar
        G[1:, 1:] = Z
        n = len(ctx.q)
        blocks = []
        for v in [self.r0] + self.basis:
            C = np.zeros((dim, n))
            for (i, j), a in ctx.jac_q(v).entries.items():
                if not a.is_const:
                    raise BodyError(f"body {self.name!r}: natural coordinates must enter linearly")
                C[i, j] = a.value
            blocks.append(C)
        B = np.stack(blocks)  # (k+1) x dim x n
        Mnum = np.einsum("ab,adi,bdj->ij", G, B, B)
        cols = np.nonzero(np.any(B != 0, axis=(0, 1)))[0]
        M = {}
        for i in cols:
            for j in cols:
                if Mnum[i, j] != 0.0:
                    M[(int(i), int(j))] = as_atom(float(Mnum[i, j]))
        Q = {}
        T = ZERO
        for (i, j), a in M.items():
            T = add(T, mul(as_atom(0.5), mul(a, mul(ctx.qd[i], ctx.qd[j]))))
        V = ZERO
        if ctx.gravity is not None and m > 0:
            JG = B[0] + np.einsum("k,kdn->dn", cbar, B[1:])
            g = np.asarray(ctx.gravity, dtype=float)
            f = m * g @ JG
            for j in np.nonzero(f)[0]:
                Q[int(j)] = as_atom(float(f[j]))
            V = neg(dot(vconst(m * g), self.point(self.com)))
        return M, Q, T, V


class NaturalBody2D(_Linear):
    """A planar body given by two basic points (body-frame coordinates `local_i`, `local_j`).
    Adds the rigid-body equation |pj - pi|^2 = L^2, named `constraint_name` (default the
    body's name), unless `constraint` is False (when other equations already hold it)."""

    dim = 2

    def __init__(self, model, name: str, pi, pj, local_i=(0.0, 0.0), local_j=None, length=None,
                 constraint: bool = True, constraint_name: str | None = None):
        if local_j is None:
            if length is None:
                raise BodyError(f"body {name!r}: give the second point's body coordinates or the length")
            local_j = (float(length), 0.0)
        ri, rj = vec(list(pi)), vec(list(pj))
        d = [sub(b, a) for a, b in zip(ri, rj)]
        dbar = np.asarray(local_j, dtype=float) - np.asarray(local_i, dtype=float)
        L2 = float(dbar @ dbar)
        if L2 == 0:
            raise BodyError(f"body {name!r}: its two points coincide")
        super().__init__(model, name)
        self._setup(ri, local_i, [d, perp2(d)], [dbar, [-dbar[1], dbar[0]]])
        self._L2 = L2
        self._d = d
        if constraint:
            model.constraint(sub(dot(d, d), as_atom(L2)), constraint_name or name)

    def _angular_velocity(self):
        dd = time_derivative(self._d, self.model._tangents())
        return [mul(as_atom(1.0 / self._L2), cross2(self._d, dd))]


class NaturalBody3D(_Linear):
    """A spatial body given by points and unit vectors, each with its body-frame coordinates.

    points: [(Point, local xyz)], the first is the origin; vectors: [(Unit, local direction)].
    Up to three independent elements form the basis (point differences from the origin,
    then unit vectors); the body adds constant lengths and constant dot products between
    them, and expresses every further element as a fixed combination of the basis.
    A single point and no vector is a point mass (`set_inertia(mass)`, no rotational
    inertia: a platform that only translates, a lumped load); it has no rotation.
    """

    def __init__(self, model, name: str, points, vectors=()):
        points = list(points)
        vectors = list(vectors)
        if not points:
            raise BodyError(f"body {name!r}: needs at least one point")
        super().__init__(model, name)
        (p0, x0), rest = points[0], points[1:]
        x0 = np.asarray(x0, dtype=float)
        elems = [(f"{p.name}", [sub(a, b) for a, b in zip(p.r, p0.r)], np.asarray(x, float) - x0, "point", p)
                 for p, x in rest]
        elems += [(f"{u.name}", list(u.r), np.asarray(x, float) / np.linalg.norm(x), "unit", u) for u, x in vectors]
        basis, extra = [], []
        for e in elems:
            trial = np.array([b[2] for b in basis] + [e[2]])
            if len(basis) < 3 and np.linalg.matrix_rank(trial, tol=1e-9) == len(basis) + 1:
                basis.append(e)
            else:
                extra.append(e)
        if not basis and elems:
            raise BodyError(f"body {name!r}: its points and vectors span no direction")
        self._setup(list(p0.r), x0, [b[1] for b in basis], [b[2] for b in basis])
        self.dim = 3
        for i, (ni, vi, xi, ki, _) in enumerate(basis):
            if ki == "point":
                model.constraint(sub(dot(vi, vi), as_atom(float(xi @ xi))), f"{name}_len_{ni}")
            for nj, vj, xj, _, _ in basis[i + 1:]:
                model.constraint(sub(dot(vi, vj), as_atom(float(xi @ xj))), f"{name}_dot_{ni}_{nj}")
        for ne, ve, xe, _, _ in extra:
            c = self.K @ xe
            comb = [ZERO] * 3
            for ck, b in zip(c, basis):
                comb = [add(s, mul(as_atom(float(ck)), x)) for s, x in zip(comb, b[1])]
            for k in range(3):
                r = sub(ve[k], comb[k])
                if not r.is_const:
                    model.constraint(r, f"{name}_on_{ne}_{'xyz'[k]}")

    def _angular_velocity(self):
        R = self.rotation()
        Rd = time_derivative(R, self.model._tangents())
        return vee(matmul(transpose(R), Rd))


# ---- joints that are not a shared point or vector ------------------------------------------
def perpendicular(model, u, v, name: str) -> None:
    """u . v = 0 (e.g. the cross of a universal joint between two bodies' unit vectors)."""
    model.constraint(dot(list(u), list(v)), name)


def constant_dot(model, u, v, value: float, name: str) -> None:
    model.constraint(sub(dot(list(u), list(v)), as_atom(float(value))), name)


def point_on_line(model, p, a, u, s, name: str) -> None:
    """p = a + s u (3-D, with the distance s a coordinate): a cylindrical or prismatic pair."""
    for k in range(3):
        model.constraint(sub(sub(as_atom(p[k]), as_atom(a[k])), mul(as_atom(s), as_atom(u[k]))), f"{name}_{'xyz'[k]}")


def point_on_line2d(model, p, a, b, name: str) -> None:
    """p on the line through a and b (2-D): (b - a) x (p - a) = 0."""
    model.constraint(cross2([sub(as_atom(y), as_atom(x)) for x, y in zip(a, b)],
                            [sub(as_atom(y), as_atom(x)) for x, y in zip(a, p)]), name)


def constant_angle2d(model, d1, d2, name: str, value: float) -> None:
    """d1 x d2 = value (two bodies' directions at a fixed angle, e.g. a 2-D prismatic pair)."""
    model.constraint(sub(cross2(list(d1), list(d2)), as_atom(float(value))), name)


__all__ = ["Point", "Unit", "point", "unit_vector", "NaturalBody2D", "NaturalBody3D", "perpendicular",
           "constant_dot", "point_on_line", "point_on_line2d", "constant_angle2d"]
