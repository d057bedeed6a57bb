"""Rigid bodies: where their points are, how they turn, and what inertia they carry.

Every body, whatever coordinates describe it, answers the same questions with atoms:
`point(local)` (world position of a body-fixed point), `vector(local)` (world direction of
a body-fixed vector), `rotation()` (world-from-body matrix) and `omega()` (angular velocity
in the body frame, linear in the velocities). Joints and forces are written once against
these; the coordinate families only differ in how they answer.

Inertia enters through `inertia_terms(ctx)`, which returns the body's share of the mass
matrix and of the generalized forces by the principle of virtual power:
    delta P = sum over bodies of  delta v_G . (F - m a_G) + delta w . (n - I alpha - w x I w)
with v_G = J_G qd and w = W qd, so M += m J_G^T J_G + W^T I W and
Q += J_G^T (F - m dJ_G qd) + W^T (n - I dW qd - w x I w).
The generic rule here serves reference-point bodies (2-D and Euler parameters) and bodies
of relative coordinates; bodies of natural coordinates override it (their mass matrix is
constant and has no velocity terms).
"""
from __future__ import annotations

import numpy as np

from ..ir import ZERO, Atom, add, as_atom, cross, dot, matvec, mtv, mul, neg, sub, time_derivative, vconst, vec
from .frames import euler_L, euler_rotation, rot2


class BodyError(ValueError):
    pass


def inertia_about_com(dim: int, mass: float, com, inertia, at) -> np.ndarray | float:
    """Inertia about the centre of mass in body axes, from an inertia given at body point `at`
    (parallel-axis theorem). 3-D: 3 numbers (principal) or a 3x3 matrix; 2-D: a number."""
    com = np.asarray(com, dtype=float)
    if dim == 2:
        I = float(inertia or 0.0)
        if at is not None:
            d = com - np.asarray(at, dtype=float)
            I = I - mass * float(d @ d)
        return I
    if inertia is None:
        I = np.zeros((3, 3))
    else:
        I = np.asarray(inertia, dtype=float)
        if I.shape == (3,):
            I = np.diag(I)
        if I.shape != (3, 3):
            raise BodyError(f"inertia must be 3 numbers or a 3x3 matrix, got shape {I.shape}")
    if at is not None:
        d = com - np.asarray(at, dtype=float)
        I = I - mass * (float(d @ d) * np.eye(3) - np.outer(d, d))
    return I


class Body:
    """Base class. Subclasses implement point, vector, rotation, omega."""

    dim = 3

    def __init__(self, model, name: str):
        self.model = model
        self.name = name
        self.mass = 0.0
        self.com = np.zeros(self.dim)
        self.inertia = 0.0 if self.dim == 2 else np.zeros((3, 3))
        self._points: dict[tuple, list[Atom]] = {}
        self._rotation = None
        self._omega = None
        if model is not None:
            model._add_body(self)

    # ---- inertia --------------------------------------------------------------------------
    def set_inertia(self, mass: float, com=None, inertia=None, at=None) -> "Body":
        """Mass, centre of mass (body frame) and inertia (about `at`, default the centre of mass)."""
        if mass < 0:
            raise BodyError(f"body {self.name!r}: negative mass {mass}")
        self.mass = float(mass)
        self.com = np.zeros(self.dim) if com is None else np.asarray(com, dtype=float)
        if self.com.shape != (self.dim,):
            raise BodyError(f"body {self.name!r}: centre of mass needs {self.dim} numbers, got {com!r}")
        self.inertia = inertia_about_com(self.dim, self.mass, self.com, inertia, at)
        if self.dim == 3 and np.min(np.linalg.eigvalsh(self.inertia)) < -1e-12 * max(1.0, np.abs(self.inertia).max()):
            raise BodyError(f"body {self.name!r}: inertia about the centre of mass is not positive semidefinite")
        return self

    @property
    def has_inertia(self) -> bool:
        return self.mass > 0 or bool(np.any(np.asarray(self.inertia) != 0))

    # ---- kinematics (atoms) -----------------------------------------------------------------
    def point(self, local) -> list[Atom]:
        key = tuple(float(x) for x in local) if not any(isinstance(x, Atom) for x in local) else None
        if key is not None and key in self._points:
            return self._points[key]
        p = self._point(local)
        if key is not None:
            self._points[key] = p
        return p

    def vector(self, local) -> list[Atom]:
        return matvec(self.rotation(), local)

    def rotation(self):
        if self._rotation is None:
            self._rotation = self._rotation_matrix()
        return self._rotation

    def omega(self) -> list[Atom]:
        """Angular velocity in body axes ([w] in 2-D)."""
        if self._omega is None:
            self._omega = self._angular_velocity()
        return self._omega

    def angular_bias(self, ctx) -> list[Atom]:
        """The part of the body-frame angular acceleration without qdd: d/dt (W qd) at qdd = 0."""
        return time_derivative(self.omega(), ctx.tangents)

    def _point(self, local):
        raise NotImplementedError

    def _rotation_matrix(self):
        raise NotImplementedError

    def _angular_velocity(self):
        raise NotImplementedError

    # ---- virtual power ----------------------------------------------------------------------
    def inertia_terms(self, ctx):
        """(M entries {(i, j): atom}, Q entries {i: atom}, kinetic energy, potential energy)."""
        M: dict = {}
        Q: dict = {}
        m = self.mass
        T = ZERO
        V = ZERO
        if m > 0:
            rG = self.point(self.com)
            vG = time_derivative(rG, ctx.tangents)
            aG0 = time_derivative(vG, ctx.tangents)  # qd held: the part of a_G without qdd
            JG = ctx.jac_q(rG)
            cm = as_atom(m)
            _add_gram(M, JG, JG, lambda k, l: cm if k == l else None)
            F = [mul(cm, as_atom(g)) for g in ctx.gravity] if ctx.gravity is not None else [ZERO] * self.dim
            _add_jtv(Q, JG, [sub(F[k], mul(cm, aG0[k])) for k in range(self.dim)])
            T = mul(as_atom(0.5 * m), dot(vG, vG))
            if ctx.gravity is not None:
                V = neg(dot(F, rG))
        I = self.inertia
        if np.any(np.asarray(I) != 0):
            w = self.omega()
            W = ctx.jac_qd(w)
            a0 = self.angular_bias(ctx)
            if self.dim == 2:
                cI = as_atom(float(I))
                _add_gram(M, W, W, lambda k, l: cI)
                _add_jtv(Q, W, [neg(mul(cI, a0[0]))])
                T = add(T, mul(as_atom(0.5 * float(I)), mul(w[0], w[0])))
            else:
                Ic = [[as_atom(float(x)) for x in r] for r in I]
                _add_gram(M, W, W, lambda k, l: Ic[k][l] if Ic[k][l] is not ZERO else None)
                Iw = matvec(Ic, w)
                rhs = [neg(add(x, y)) for x, y in zip(matvec(Ic, a0), cross(w, Iw))]
                _add_jtv(Q, W, rhs)
                T = add(T, mul(as_atom(0.5), dot(w, Iw)))
        return M, Q, T, V

    def inertial_force(self, ctx, M: dict, Q: dict) -> dict[int, Atom]:
        """This body's share of M qdd - Q ({coordinate index: atom}) from its inertia terms
        (M, Q as inertia_terms returns them). Bodies with a cheaper closed form override it."""
        out: dict[int, Atom] = {}
        for (i, j), a in M.items():
            out[i] = add(out.get(i, ZERO), mul(a, ctx.qdd[j]))
        for i, a in Q.items():
            out[i] = sub(out.get(i, ZERO), a)
        return out


def _columns(S) -> dict[int, dict[int, Atom]]:
    cols: dict[int, dict[int, Atom]] = {}
    for (i, j), a in S.entries.items():
        cols.setdefault(j, {})[i] = a
    return cols


def _add_gram(M: dict, A, B, weight) -> None:
    """M[a, b] += sum_kl A[k, a] w_kl B[l, b] over the structurally nonzero columns (symmetric)."""
    ca = _columns(A)
    cb = ca if A is B else _columns(B)
    keys = sorted(ca)
    for ia, a in enumerate(keys):
        for b in keys[ia:]:
            s = ZERO
            for k, x in ca[a].items():
                for l, y in cb[b].items():
                    wkl = weight(k, l)
                    if wkl is None:
                        continue
                    s = add(s, mul(wkl, mul(x, y)))
            if s is ZERO:
                continue
            M[(a, b)] = add(M.get((a, b), ZERO), s)
            if a != b:
                M[(b, a)] = M[(a, b)]


def _add_jtv(Q: dict, J, v) -> None:
    """Q += J^T v."""
    for (i, j), a in J.entries.items():
        if v[i] is ZERO:
            continue
        Q[j] = add(Q.get(j, ZERO), mul(a, v[i]))


class Ground(Body):
    """The fixed frame (no coordinates). `dim` 2 or 3."""

    def __init__(self, model=None, name: str = "ground", dim: int = 3):
        self.dim = dim
        super().__init__(model, name)

    def _point(self, local):
        return vconst(local)

    def _rotation_matrix(self):
        return [[as_atom(1.0 if i == j else 0.0) for j in range(self.dim)] for i in range(self.dim)]

    def _angular_velocity(self):
        return [ZERO] * (1 if self.dim == 2 else 3)


class Body2D(Body):
    """Planar reference-point coordinates (x, y, theta) of a body-fixed reference point."""

    dim = 2

    def __init__(self, model, name: str, x, y, theta):
        self.r = vec(x, y)
        self.theta = as_atom(theta)
        super().__init__(model, name)

    def _rotation_matrix(self):
        return rot2(self.theta)

    def _point(self, local):
        A = self.rotation()
        return [add(self.r[k], x) for k, x in enumerate(matvec(A, local))]

    def _angular_velocity(self):
        return [time_derivative(self.theta, self.model._tangents())]


class Body3D(Body):
    """Spatial reference-point coordinates: position (x, y, z) of a body point (normally the
    centre of mass) and Euler parameters (e0, e1, e2, e3) of its axes, as in the thesis.

    A(e) = I + 2 Theta (e0 I + Theta); body-frame angular velocity w' = 2 L(e) e_dot. The
    normalisation e.e = 1 is added as a constraint named `<name>_norm` unless `normalize` is
    False (e.g. when every parameter is fixed by other equations).
    """

    def __init__(self, model, name: str, r, e, normalize: bool = True):
        self.r = vec(r)
        self.e = vec(e)
        if len(self.r) != 3 or len(self.e) != 4:
            raise BodyError(f"body {name!r}: needs 3 position and 4 Euler-parameter atoms")
        super().__init__(model, name)
        if normalize and model is not None and any(x.is_symbol for x in self.e):
            model.constraint(sub(dot(self.e, self.e), as_atom(1.0)), f"{name}_norm")

    def _rotation_matrix(self):
        return euler_rotation(self.e)

    def _point(self, local):
        return [add(self.r[k], x) for k, x in enumerate(matvec(self.rotation(), local))]

    def _angular_velocity(self):
        ed = time_derivative(self.e, self.model._tangents())
        L = euler_L(self.e)
        return [mul(as_atom(2.0), x) for x in matvec(L, ed)]

    def inertial_force(self, ctx, M: dict, Q: dict) -> dict[int, Atom]:
        """M qdd - Q of this body in Newton-Euler form when its coordinates are its own
        (r and e symbols of the model) and r is the centre of mass: m (r'' - g) on r and
        2 L(e)^T (J a' + w' x J w') on e, with w' = 2 L(e) e', a' = 2 L(e) e''; the same
        values as the expanded 4 L^T J L e'' - Q (inertia_terms), in fewer operations."""
        coords = list(self.r) + list(self.e)
        idx = getattr(ctx, "index", None)
        if idx is None or np.any(self.com != 0) or not all(x.is_symbol and x in idx for x in coords) \
                or len({idx[x] for x in coords}) != 7:
            return super().inertial_force(ctx, M, Q)
        j = [idx[x] for x in coords]
        out: dict[int, Atom] = {}
        if self.mass > 0:
            cm = as_atom(self.mass)
            g = ctx.gravity if ctx.gravity is not None else [0.0, 0.0, 0.0]
            for k in range(3):
                out[j[k]] = mul(cm, sub(ctx.qdd[j[k]], as_atom(float(g[k]))))
        I = np.asarray(self.inertia, dtype=float)
        if np.any(I != 0):
            L = euler_L(self.e)
            two = as_atom(2.0)
            w = [mul(two, x) for x in matvec(L, [ctx.qd[i] for i in j[3:]])]
            al = [mul(two, x) for x in matvec(L, [ctx.qdd[i] for i in j[3:]])]
            Ic = [[as_atom(float(x)) for x in r] for r in I]
            tau = [add(x, y) for x, y in zip(matvec(Ic, al), cross(w, matvec(Ic, w)))]
            for k, x in enumerate(mtv(L, tau)):
                if x is not ZERO:
                    out[j[3 + k]] = mul(two, x)
        return out

    def angular_bias(self, ctx) -> list[Atom]:
        """d/dt (2 L(e) e') = 2 L(e) e'' + 2 L(e') e', and L(e') e' = 0 identically (L(v) v = 0
        for any v), so the angular acceleration has no velocity-dependent part. Said here
        because the engine does not reassociate sums and would keep that zero as atoms."""
        return [ZERO, ZERO, ZERO]


__all__ = ["Body", "Body2D", "Body3D", "BodyError", "Ground", "inertia_about_com"]
