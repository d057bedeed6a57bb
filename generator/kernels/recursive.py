"""Recursive dynamics of open trees in relative coordinates, in O(N) operations.

    inverse-dynamics-rnea  q, qd, qdd, t -> u    recursive Newton-Euler (two passes)
    forward-dynamics-aba   q, qd, t, u -> qdd    articulated-body algorithm (three passes)
    mass-matrix-crba       q -> M                composite-rigid-body algorithm
    frame-kinematics       q -> p, R, J          a named frame's placement and Jacobian

The M(q)-based kernels (dynamics.py) expand the mass matrix and factor it: their atoms
grow as N^2 to N^3 along a chain. These kernels run Featherstone's recursions over the
links instead, written out as atoms (straight-line, interned, constants folded), so each
link adds a bounded number of operations whatever its depth.

Each link moves through one Joint: a turn about any axis (revolute) or a slide along it
(prismatic); the recursions ask it for the link's placement, its motion subspace and the
force component it transmits. The tree is the model's explicit joint tree when it has one
(Model.joint_tree: from_urdf, revolute and prismatic joints), else it is read off the
model's relative trees (model.relative.Relative), revolute joints only:
* a link is a base turned by exactly one coordinate (its angle is the coordinate's
  symbol); bases at a constant angle and fixed bases are constant placements, folded
  into the link above them;
* a point's vector must be constant (no prismatic joints yet); a point is rigidly carried
  by the link of the base its vector is given in, when its parent point is carried by
  that same link; when its parent point is carried by the link's parent, that parent
  point is on the link's joint axis (the joint point, the link frame's origin);
* a body (base c, point P) belongs to the link of c; P is carried by that link or is its
  joint point. Bodies on the ground are ignored (they do not move).
The model must have no constraints. Gravity enters the recursions (as an acceleration of
the ground); force elements (springs, dampers, applied forces and torques) enter as
their generalized forces by virtual power, as in Model.equations (their own cost, O(N)
per element for a force deep in a chain); each actuator acts on one coordinate with a
constant coefficient (inverse dynamics needs one
actuator per coordinate, or none: then it returns the generalized forces tau). Anything
else raises KernelError naming what does not fit, and the M(q)-based kernels serve it.

Invariants: the kernels compute the same values as forward-dynamics / inverse-dynamics
of the same model (tests/test_kernels_recursive.py checks 1e-10 at random states); the
links are visited in a fixed order (parents first, ties by coordinate order), so the
same model gives the same atoms; inputs carry the model's declared ranges.
"""
from __future__ import annotations

import numpy as np

from ..ir import ONE, ZERO, Atom, ExpressionError, Sparse, add, as_atom, cos, div, mul, neg, sin, sub, symbol
from ..model.frames import axis_rotation
from .common import KernelError, names
from .kernel import InPort, Kernel, OutPort

__all__ = ["Joint", "Link", "OpenTree", "open_tree", "rnea_kernel", "aba_kernel", "mass_matrix_crba_kernel",
           "frame_kinematics_kernel"]


# ---- small algebra over atoms (3-vectors, 3x3 lists of rows); zeros fold as built --------------
def _c(x: float) -> Atom:
    x = float(x)
    return ZERO if abs(x) < 1e-15 else as_atom(x)


def _vadd(a, b):
    return [add(x, y) for x, y in zip(a, b)]


def _vsub(a, b):
    return [sub(x, y) for x, y in zip(a, b)]


def _scale(s, a):
    return [mul(s, x) for x in a]


def _dot(a, b):
    s = ZERO
    for x, y in zip(a, b):
        s = add(s, mul(x, y))
    return s


def _cross(a, b):
    return [sub(mul(a[1], b[2]), mul(a[2], b[1])),
            sub(mul(a[2], b[0]), mul(a[0], b[2])),
            sub(mul(a[0], b[1]), mul(a[1], b[0]))]


def _mv(A, v):
    return [_dot(r, v) for r in A]


def _mtv(A, v):
    return [_dot([A[0][j], A[1][j], A[2][j]], v) for j in range(3)]


def _is_zero(v) -> bool:
    return all(x is ZERO for x in v)


def _rot_sym(R, S):
    """R S R^T for symmetric S (upper triangle computed, mirrored)."""
    RS = [[_dot(R[i], [S[0][j], S[1][j], S[2][j]]) for j in range(3)] for i in range(3)]
    out = [[ZERO] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(i, 3):
            out[i][j] = out[j][i] = _dot(RS[i], R[j])
    return out


def _rot_gen(R, S):
    """R S R^T."""
    RS = [[_dot(R[i], [S[0][j], S[1][j], S[2][j]]) for j in range(3)] for i in range(3)]
    return [[_dot(RS[i], R[j]) for j in range(3)] for i in range(3)]


class _Turn:
    """R = Rot(e_k, q) with no fixed placement: a rotation in the plane (i, j) of the two
    other axes (v_i' = c v_i - s v_j, v_j' = s v_i + c v_j). Congruences R S R^T then use
    the double angle (C2 = c^2 - s^2, S2 = 2 s c, shared by the link's three blocks): the
    trace of the plane block is invariant, its antisymmetric part too."""

    def __init__(self, k: int, q):
        self.k, self.i, self.j = k, (k + 1) % 3, (k + 2) % 3
        self.c, self.s = cos(q), sin(q)
        self._double = None

    def double(self):
        if self._double is None:
            c, s = self.c, self.s
            self._double = (sub(mul(c, c), mul(s, s)), mul(as_atom(2.0), mul(s, c)))
        return self._double

    def vec(self, x, y):
        c, s = self.c, self.s
        return sub(mul(c, x), mul(s, y)), add(mul(s, x), mul(c, y))

    def _plane(self, a, b, d):
        C2, S2 = self.double()
        half = as_atom(0.5)
        sm = add(a, d)
        hd = mul(half, sub(a, d))
        ai = add(mul(half, sm), sub(mul(hd, C2), mul(b, S2)))
        return ai, add(mul(hd, S2), mul(b, C2)), sub(sm, ai)

    def sym(self, S):
        i, j, k = self.i, self.j, self.k
        out = [[ZERO] * 3 for _ in range(3)]
        out[k][k] = S[k][k]
        out[i][i], out[i][j], out[j][j] = self._plane(S[i][i], S[i][j], S[j][j])
        out[j][i] = out[i][j]
        out[i][k], out[j][k] = self.vec(S[i][k], S[j][k])
        out[k][i], out[k][j] = out[i][k], out[j][k]
        return out

    def gen(self, S):
        i, j, k = self.i, self.j, self.k
        out = [[ZERO] * 3 for _ in range(3)]
        out[k][k] = S[k][k]
        half = as_atom(0.5)
        ai, b, dj = self._plane(S[i][i], mul(half, add(S[i][j], S[j][i])), S[j][j])
        t = mul(half, sub(S[i][j], S[j][i]))
        out[i][i], out[j][j], out[i][j], out[j][i] = ai, dj, add(b, t), sub(b, t)
        out[i][k], out[j][k] = self.vec(S[i][k], S[j][k])
        out[k][i], out[k][j] = self.vec(S[k][i], S[k][j])
        return out


def _turn(L: "Link", q):
    """A _Turn when the link's rotation is about a principal axis with no fixed placement."""
    if not L.joint.revolute or not np.allclose(L.fixed, np.eye(3), atol=1e-15):
        return None
    for k in range(3):
        if np.allclose(L.axis, np.eye(3)[k], atol=1e-15):
            return _Turn(k, q)
    return None


def _hat(r):
    x, y, z = r
    return [[ZERO, neg(z), y], [z, ZERO, neg(x)], [neg(y), x, ZERO]]


def _mm(A, B):
    return [[_dot(A[i], [B[0][j], B[1][j], B[2][j]]) for j in range(3)] for i in range(3)]


def _const_v(v):
    return [_c(x) for x in v]


def _const_m(M):
    return [[_c(x) for x in row] for row in M]


# ---- the tree -----------------------------------------------------------------------------------
class Joint:
    """The one degree of freedom between a link and its parent, in link axes: a turn about
    the unit `axis` (revolute, any axis) or a slide along it (prismatic). Motion subspace S, as an
    (angular, linear) pair: (axis, 0) or (0, axis); its constant (no c_J term)."""

    def __init__(self, kind: str, axis):
        if kind not in ("revolute", "prismatic"):
            raise KernelError(f"recursive dynamics: no joint kind {kind!r} (revolute, prismatic)")
        self.kind, self.revolute, self.axis = kind, kind == "revolute", np.asarray(axis, dtype=float)

    def rotation(self, fixed, q) -> list[list[Atom]]:
        """R with v_parent = R v_link (fixed @ Rot(axis, q), or the constant fixed)."""
        if not self.revolute:
            return _const_m(fixed)
        Rq = axis_rotation(self.axis, q)
        if np.allclose(fixed, np.eye(3), atol=1e-15):
            return Rq
        return _mm(_const_m(fixed), Rq)

    def offset(self, r, fixed, q) -> list[Atom]:
        """The link origin in the parent link's frame (r, or r + fixed axis q)."""
        if self.revolute:
            return _const_v(r)
        return _vadd(_const_v(r), _scale(q, _const_v(np.asarray(fixed) @ self.axis)))

    def motion(self, s):
        """S s as (angular, linear)."""
        a = _scale(s, _const_v(self.axis))
        return (a, [ZERO] * 3) if self.revolute else ([ZERO] * 3, a)

    def project(self, n, f) -> Atom:
        """S^T (n, f): the component of a force pair the joint transmits as tau."""
        return _dot(_const_v(self.axis), n if self.revolute else f)

    def subspace_force(self, A, B, C):
        """U = I S of a spatial inertia [[A, B], [B^T, C]], as (n, f)."""
        a = _const_v(self.axis)
        return (_mv(A, a), _mtv(B, a)) if self.revolute else (_mv(B, a), _mv(C, a))


class Link:
    """One joint and what it carries. Frame: the joint's axes at the joint point.

    v_parent = R v_link with R = fixed @ Rot(axis, q) (revolute) or fixed (prismatic); the
    link origin is `r` in the parent link's frame (the ground's: world axes from the
    origin), plus fixed @ axis q for a prismatic joint; mass m, first moment h = m c and
    inertia I about the link origin, all in link axes (numbers)."""

    def __init__(self, j: int, parent: "Link | None", joint: Joint, fixed, base=None, depth=0):
        self.j, self.parent, self.joint, self.fixed, self.base = j, parent, joint, fixed, base
        self.axis = joint.axis
        self.depth = depth if base is None else base.depth
        self.r = None
        self.m = 0.0
        self.h = np.zeros(3)
        self.I = np.zeros((3, 3))
        self.children: list[Link] = []
        self.frames: tuple = ()  # (name, R, p) of named frames it carries (TreeJoint.frames)


class OpenTree:
    def __init__(self, model, links: list[Link], gravity, act: dict[int, tuple[int, float]], act_names, applied):
        self.model, self.links, self.gravity, self.act, self.act_names = model, links, gravity, act, act_names
        self.applied = applied  # generalized forces of the force elements (one atom per coordinate)


def _numeric_R(base) -> np.ndarray:
    """v_parent = R v_base of a base whose rotation is constant."""
    R = np.array([[x.value for x in row] for row in base.R], dtype=float)
    return R


def open_tree(model) -> OpenTree:
    """The links of a model's explicit joint tree (from_urdf), or else of its relative trees
    (KernelError when it is not an open tree of revolute joints, naming the first thing
    that does not fit)."""
    from ..model.model import Model, _Context

    if not isinstance(model, Model):
        raise KernelError(f"recursive dynamics needs a Model, got {type(model).__name__}")
    name = model.name
    tree = model._relative
    if tree is None:
        raise KernelError(f"{name}: recursive dynamics needs a model in relative coordinates (model.relative())")
    if model.phi or model.nh:
        eq = (model.phi_names + model.nh_names)[0]
        raise KernelError(f"{name}: recursive dynamics needs an open tree without constraints; equation {eq!r} "
                          "closes a loop or drives a coordinate (use forward-dynamics / inverse-dynamics)")
    if model.joint_tree is not None:
        depth_order = _explicit_links(model)
    else:
        depth_order = _relative_links(model, tree)
    ctx = _Context(model)
    act = {}
    for k, a in enumerate(model.actuators):
        d = a.direction(ctx)
        if len(d) != 1 or not next(iter(d.values())).is_const:
            raise KernelError(f"{name}: actuator {a.name!r} does not act on one coordinate with a constant "
                              "coefficient")
        (j, c), = d.items()
        act[k] = (j, float(c.value))
    g = np.zeros(3) if model._gravity is None else np.asarray(model._gravity, dtype=float)
    applied = [ZERO] * len(model.q)
    for f in model.forces:  # springs, dampers, applied forces: by virtual power, as Model.equations
        for j, a in f.terms(ctx)[0].items():
            applied[j] = add(applied[j], a)
    return OpenTree(model, depth_order, g, act, [a.name for a in model.actuators], applied)


def _relative_links(model, tree) -> list[Link]:
    """The links read off the relative trees (revolute joints only), parents first."""
    from ..model.relative import RelBody

    name = model.name
    index = {s: j for j, s in enumerate(model.q)}
    bodies = [b for b in model.bodies if b.has_inertia]
    for b in bodies:
        if not (isinstance(b, RelBody) and b.tree is tree):
            raise KernelError(f"{name}: body {b.name!r} is not a body of the model's relative trees")

    links: dict = {}  # joint base -> Link
    link_of_memo: dict = {}

    def link_of(base):
        """(link or None for the ground, R with v_link = R v_base, numbers)."""
        if base in link_of_memo:
            return link_of_memo[base]
        if base.parent is None:
            out = (None, np.eye(3))
        elif base.angle is not None and base.angle.is_symbol and base.angle in index:
            out = (joint(base), np.eye(3))
        elif base.angle is not None and not base.angle.is_const:
            raise KernelError(f"{name}: base {base.name!r} turns by {base.angle}, not by one coordinate: "
                              "not an open tree of revolute joints")
        else:
            L, R = link_of(base.parent)
            out = (L, R @ _numeric_R(base))
        link_of_memo[base] = out
        return out

    def joint(base) -> Link:
        L = links.get(base)
        if L is None:
            j = index[base.angle]
            if any(o.j == j for o in links.values()):
                raise KernelError(f"{name}: coordinate {model.q[j].value.name!r} turns two bases")
            P, R = link_of(base.parent)
            L = Link(j, P, Joint("revolute", base.axis), R, base)
            links[base] = L
        return L

    point_memo: dict = {}
    joint_point: dict = {}  # link -> (point, position in the parent link)

    def claim(L: Link, p, where) -> None:
        old = joint_point.get(L)
        if old is None:
            joint_point[L] = (p, where)
        elif old[0] is not p and not np.allclose(old[1], where, atol=1e-12):
            raise KernelError(f"{name}: the axis of {model.q[L.j].value.name!r} would pass through both "
                              f"{old[0].name!r} and {p.name!r}: not an open tree of revolute joints")

    def descend(p, Lp, op, L, what):
        """Position in link L of point p, carried by Lp (an ancestor of L, or L) at op: p is
        then on the axis of every joint from Lp down to L (the joint point of each)."""
        path = []
        X = L
        while X is not Lp:
            if X is None:
                raise KernelError(f"{name}: {what} the joints above it do not carry: not an open tree of "
                                  "revolute joints")
            path.append(X)
            X = X.parent
        for X in reversed(path):
            claim(X, p, op)
            op = np.zeros(3)
        return op

    def resolve(p):
        """(link carrying point p, its position in that link's frame)."""
        if p in point_memo:
            return point_memo[p]
        if p.parent is None:
            out = (None, np.zeros(3))
        else:
            if not all(isinstance(x, Atom) and x.is_const for x in p.vector):
                raise KernelError(f"{name}: point {p.name!r} moves along a coordinate: the recursive kernels "
                                  "handle revolute joints only")
            e = np.array([x.value for x in p.vector], dtype=float)
            Lp, op = resolve(p.parent)
            Lc, R = link_of(p.base)
            o = descend(p.parent, Lp, op, Lc, f"point {p.name!r} hangs from {p.parent.name!r}, which")
            out = (Lc, o + R @ e)
        point_memo[p] = out
        return out

    placed = []
    for b in bodies:
        L, R = link_of(b.base)
        Lp, op = resolve(b.origin)
        if L is None:
            continue
        o = descend(b.origin, Lp, op, L, f"body {b.name!r} is placed at {b.origin.name!r}, which")
        placed.append((L, R, o, b))
    for L, R, o, b in placed:  # inertia about the joint point, link axes
        com = o + R @ np.asarray(b.com, dtype=float)
        Ic = R @ np.asarray(b.inertia, dtype=float) @ R.T
        L.m += b.mass
        L.h += b.mass * com
        L.I += Ic + b.mass * (float(com @ com) * np.eye(3) - np.outer(com, com))
    # every ancestor of a link is a link too (link_of walks up), so this is the whole tree
    for L in list(links.values()):
        if L not in joint_point:
            raise KernelError(f"{name}: coordinate {model.q[L.j].value.name!r} moves no body")
        L.r = np.asarray(joint_point[L][1], dtype=float)
    used = {L.j for L in links.values()}
    missing = [model.q[j].value.name for j in range(len(model.q)) if j not in used]
    if missing:
        raise KernelError(f"{name}: coordinate(s) {', '.join(missing)} turn no base of the relative trees")
    order = sorted(links.values(), key=lambda L: (L.depth, L.j))
    depth_order = []
    seen = set()
    while len(depth_order) < len(order):  # parents before children
        for L in order:
            if L not in seen and (L.parent is None or L.parent in seen):
                seen.add(L)
                depth_order.append(L)
    for L in depth_order:
        if L.parent is not None:
            L.parent.children.append(L)
    return depth_order


def _explicit_links(model) -> list[Link]:
    """The links of the model's explicit joint tree (Model.joint_tree, from_urdf), parents
    first; the model's bodies with inertia must be exactly the tree's."""
    jt = model.joint_tree
    have = sorted(b.name for b in model.bodies if b.has_inertia)
    if have != sorted(j.body for j in jt if j.mass > 0 or np.any(j.I)):
        raise KernelError(f"{model.name}: bodies were added to or changed in the joint tree "
                          f"({', '.join(have)}): the recursive kernels read the tree as built")
    index = {s: j for j, s in enumerate(model.q)}
    if sorted(index[j.q] for j in jt) != list(range(len(model.q))):
        raise KernelError(f"{model.name}: the joint tree does not turn each coordinate once")
    links: list[Link] = []
    for tj in jt:
        P = None if tj.parent is None else links[tj.parent]
        L = Link(index[tj.q], P, Joint(tj.kind, tj.axis), np.asarray(tj.R, dtype=float),
                 depth=0 if P is None else P.depth + 1)
        L.r, L.m, L.h, L.I = np.asarray(tj.r, dtype=float), float(tj.mass), np.asarray(tj.h, dtype=float), \
            np.asarray(tj.I, dtype=float)
        L.frames = tj.frames
        if P is not None:
            P.children.append(L)
        links.append(L)
    return links


# ---- kernels --------------------------------------------------------------------------------------
def _model(src):
    """The Model behind a builder's argument (a Model, or Equations that know theirs)."""
    m = getattr(src, "source", None)
    if m is not None:
        return m
    if hasattr(src, "relative") and hasattr(src, "bodies"):
        return src
    raise KernelError(f"{getattr(src, 'model', src)}: recursive dynamics needs the model itself "
                      "(these equations do not name theirs)")


def _port(name, model, syms) -> InPort:
    missing = [s.value.name for s in syms if s not in model.ranges]
    if missing:
        raise KernelError(f"{model.name}: input {name}: no declared range for {', '.join(missing)}")
    return InPort(name, list(syms), [model.ranges[s] for s in syms])


def _axis(L: Link):
    return _const_v(L.axis)


def _placements(tree: OpenTree, q):
    """(R, r) per link: v_parent = R v_link, the link origin r in the parent's frame."""
    R, r = {}, {}
    for L in tree.links:
        R[L] = L.joint.rotation(L.fixed, q[L.j])
        r[L] = L.joint.offset(L.r, L.fixed, q[L.j])
    return R, r


def rnea(tree: OpenTree, q, qd, qdd) -> list[Atom]:
    """tau (one atom per coordinate): the generalized forces that give qdd at q, qd,
    against inertia and gravity (= M qdd - Q). acc is the classical acceleration of the
    link origin (gravity as an upward acceleration of the ground)."""
    n = len(tree.model.q)
    R, rq = {}, {}
    w, al, acc, f, nm = {}, {}, {}, {}, {}
    zero3 = [ZERO] * 3
    for L in tree.links:
        J = L.joint
        R[L] = Rl = J.rotation(L.fixed, q[L.j])
        a = _axis(L)
        if L.parent is None:
            wp, alp, ap = zero3, zero3, _const_v(-tree.gravity)
        else:
            P = L.parent
            wp, alp, ap = w[P], al[P], acc[P]
        rq[L] = r = J.offset(L.r, L.fixed, q[L.j])
        if not _is_zero(r):  # acceleration of the joint point, parent axes
            ap = _vadd(ap, _vadd(_cross(alp, r), _cross(wp, _cross(wp, r))))
        acc[L] = _mtv(Rl, ap)
        wpl = _mtv(Rl, wp)
        aqd = _scale(qd[L.j], a)
        if J.revolute:
            w[L] = _vadd(wpl, aqd)
            al[L] = _vadd(_vadd(_mtv(Rl, alp), _scale(qdd[L.j], a)), _cross(wpl, aqd))
        else:  # the origin slides: Coriolis 2 w x (a qd) and a qdd
            w[L], al[L] = wpl, _mtv(Rl, alp)
            acc[L] = _vadd(acc[L], _vadd(_scale(as_atom(2.0), _cross(wpl, aqd)), _scale(qdd[L.j], a)))
        h, I, m = _const_v(L.h), _const_m(L.I), _c(L.m)
        W, A = w[L], al[L]
        f[L] = _vadd(_vadd(_scale(m, acc[L]), _cross(A, h)), _cross(W, _cross(W, h)))
        nm[L] = _vadd(_vadd(_mv(I, A), _cross(W, _mv(I, W))), _cross(h, acc[L]))
    tau = [ZERO] * n
    for L in reversed(tree.links):
        tau[L.j] = L.joint.project(nm[L], f[L])
        P = L.parent
        if P is None:
            continue
        np_, fp = _force_to_parent(R[L], rq[L], nm[L], f[L])
        f[P] = _vadd(f[P], fp)
        nm[P] = _vadd(nm[P], np_)
    return tau


def _force_to_parent(Rl, r, n, f):
    """A force pair (moment at the link origin, force) in the parent's frame and origin."""
    fp = _mv(Rl, f)
    np_ = _mv(Rl, n)
    if not _is_zero(r):
        np_ = _vadd(np_, _cross(r, fp))
    return np_, fp


def _inertia_to_parent(L: Link, q, Rl, r, A, B, C, n=None, f=None):
    """A spatial inertia [[A, B], [B^T, C]] (and a force pair n, f, when given) of link L
    in its parent's frame and origin: rotate, then move the reference point by r."""
    T = _turn(L, q[L.j])
    if T is not None:
        A1, B1, C1 = T.sym(A), T.gen(B), T.sym(C)
    else:
        A1, B1, C1 = _rot_sym(Rl, A), _rot_gen(Rl, B), _rot_sym(Rl, C)
    if n is not None:
        fn, ff = _mv(Rl, n), _mv(Rl, f)
    if not _is_zero(r):
        H = _hat(r)
        K = _mm(H, [[B1[k][i] for k in range(3)] for i in range(3)])  # hat(r) B1^T
        HC = _mm(H, C1)
        HCH = _mm(HC, H)
        A2 = [[ZERO] * 3 for _ in range(3)]
        for i in range(3):
            for k in range(i, 3):
                A2[i][k] = A2[k][i] = sub(add(A1[i][k], add(K[i][k], K[k][i])), HCH[i][k])
        B2 = [[add(B1[i][k], HC[i][k]) for k in range(3)] for i in range(3)]
        A1, B1 = A2, B2
        if n is not None:
            fn = _vadd(fn, _cross(r, ff))
    if n is None:
        return A1, B1, C1
    return A1, B1, C1, fn, ff


def _add_inertia(P, X):
    return [[[add(P[b][i][k], X[b][i][k]) for k in range(3)] for i in range(3)] for b in range(3)]


def _link_inertia(L: Link):
    """[A, B, C]: the link's spatial inertia at its origin, [n; f] = [[A, B], [B^T, C]] [w; v]."""
    m, h, I = _c(L.m), _const_v(L.h), _const_m(L.I)
    return [I, _hat(h), [[m if i == k else ZERO for k in range(3)] for i in range(3)]]


def aba(tree: OpenTree, q, qd, tau) -> list[Atom]:
    """qdd (one atom per coordinate) under the generalized forces tau, inertia and gravity.

    Spatial vectors as pairs of 3-vectors in link axes at the link origin: motion (w, v),
    force (n, f); an articulated inertia as blocks [n; f] = [[A, B], [B^T, C]] [w; v]."""
    n = len(tree.model.q)
    zero3 = [ZERO] * 3
    R, rq, w, v, cw, cv, IA, pA = {}, {}, {}, {}, {}, {}, {}, {}
    for L in tree.links:  # pass 1: velocities, velocity-product accelerations, bias forces
        J = L.joint
        R[L] = Rl = J.rotation(L.fixed, q[L.j])
        a = _axis(L)
        rq[L] = r = J.offset(L.r, L.fixed, q[L.j])
        if L.parent is None:
            wp, vp = zero3, zero3
        else:
            wp, vp = w[L.parent], v[L.parent]
            if not _is_zero(r):
                vp = _vadd(vp, _cross(wp, r))
        wpl = _mtv(Rl, wp)
        v[L] = _mtv(Rl, vp)
        aqd = _scale(qd[L.j], a)
        if J.revolute:
            w[L] = _vadd(wpl, aqd)
            cw[L] = _cross(wpl, aqd)
            cv[L] = _cross(v[L], aqd)
        else:  # c = v x (0, a qd) = (0, w x a qd)
            w[L], v[L] = wpl, _vadd(v[L], aqd)
            cw[L], cv[L] = zero3, _cross(wpl, aqd)
        m, h, I = _c(L.m), _const_v(L.h), _const_m(L.I)
        IA[L] = _link_inertia(L)
        W, V = w[L], v[L]
        n0 = _vadd(_mv(I, W), _cross(h, V))
        f0 = _vadd(_scale(m, V), _cross(W, h))
        pA[L] = [_vadd(_cross(W, n0), _cross(V, f0)), _cross(W, f0)]
    U, invD, uu = {}, {}, {}
    for L in reversed(tree.links):  # pass 2: articulated inertias and bias forces
        J = L.joint
        A, Bm, C = IA[L]
        pn, pf = pA[L]
        Un, Uf = J.subspace_force(A, Bm, C)
        D = J.project(Un, Uf)
        iD = div(ONE, D)
        U[L], invD[L] = (Un, Uf), iD
        uu[L] = sub(tau[L.j], J.project(pn, pf))
        P = L.parent
        if P is None:
            continue
        Us_n, Us_f = _scale(iD, Un), _scale(iD, Uf)
        Aa = [[ZERO] * 3 for _ in range(3)]
        Ca = [[ZERO] * 3 for _ in range(3)]
        for i in range(3):
            for k in range(i, 3):
                Aa[i][k] = Aa[k][i] = sub(A[i][k], mul(Us_n[i], Un[k]))
                Ca[i][k] = Ca[k][i] = sub(C[i][k], mul(Us_f[i], Uf[k]))
        Ba = [[sub(Bm[i][k], mul(Us_n[i], Uf[k])) for k in range(3)] for i in range(3)]
        # pa = p + Ia c + U D^-1 u
        c_w, c_v = cw[L], cv[L]
        s = mul(iD, uu[L])
        pan = _vadd(_vadd(pn, _vadd(_mv(Aa, c_w), _mv(Ba, c_v))), _scale(s, Un))
        paf = _vadd(_vadd(pf, _vadd(_mtv(Ba, c_w), _mv(Ca, c_v))), _scale(s, Uf))
        A1, B1, C1, fn, ff = _inertia_to_parent(L, q, R[L], rq[L], Aa, Ba, Ca, pan, paf)
        IA[P] = _add_inertia(IA[P], (A1, B1, C1))
        pA[P] = [_vadd(pA[P][0], fn), _vadd(pA[P][1], ff)]
    qdd = [ZERO] * n
    an, av = {}, {}
    for L in tree.links:  # pass 3: accelerations
        Rl = R[L]
        if L.parent is None:
            apn, apv = zero3, _const_v(-tree.gravity)
        else:
            apn, apv = an[L.parent], av[L.parent]
            r = rq[L]
            if not _is_zero(r):
                apv = _vadd(apv, _cross(apn, r))
        a1n = _vadd(_mtv(Rl, apn), cw[L]) if L.parent is not None else _mtv(Rl, apn)
        a1v = _vadd(_mtv(Rl, apv), cv[L]) if L.parent is not None else _mtv(Rl, apv)
        Un, Uf = U[L]
        x = mul(invD[L], sub(uu[L], add(_dot(Un, a1n), _dot(Uf, a1v))))
        qdd[L.j] = x
        if L.joint.revolute:
            an[L], av[L] = _vadd(a1n, _scale(x, _axis(L))), a1v
        else:
            an[L], av[L] = a1n, _vadd(a1v, _scale(x, _axis(L)))
    return qdd


def crba(tree: OpenTree, q) -> dict[tuple[int, int], Atom]:
    """The mass matrix M(q) by the composite-rigid-body algorithm: composite inertias from
    the leaves up, then each joint's S^T Ic S and its force carried up to the ancestors.
    Entries (i, j) and (j, i) of every coordinate pair on one branch (others are zero)."""
    R, rq = _placements(tree, q)
    Ic = {L: _link_inertia(L) for L in tree.links}
    for L in reversed(tree.links):
        if L.parent is not None:
            Ic[L.parent] = _add_inertia(Ic[L.parent], _inertia_to_parent(L, q, R[L], rq[L], *Ic[L]))
    M = {}
    for L in tree.links:
        Fn, Ff = L.joint.subspace_force(*Ic[L])
        M[(L.j, L.j)] = L.joint.project(Fn, Ff)
        X = L
        while X.parent is not None:
            Fn, Ff = _force_to_parent(R[X], rq[X], Fn, Ff)
            X = X.parent
            M[(L.j, X.j)] = M[(X.j, L.j)] = X.joint.project(Fn, Ff)
    return M


def _actuated_tau(tree: OpenTree, u) -> list[Atom]:
    tau = [ZERO] * len(tree.model.q)
    for k, (j, c) in tree.act.items():
        tau[j] = add(tau[j], mul(_c(c), u[k]))
    return tau


def _u_ranges(model, u, act_names):
    """Each actuator input's declared range (Model.operate_input; from_urdf: the effort
    limits), else (-1, 1)."""
    return [model.ranges.get(s, tuple(model.envelope.inputs.get(a, (-1.0, 1.0)))) for s, a in zip(u, act_names)]


def _joints(tree: OpenTree) -> str:
    """'6 revolute joints', or '9 joints (7 revolute, 2 prismatic)'."""
    kinds = [L.joint.kind for L in tree.links]
    if all(k == "revolute" for k in kinds):
        return f"{len(kinds)} revolute joints"
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in ("revolute", "prismatic") if k in kinds)
    return f"{len(kinds)} joints ({counts})"


def rnea_kernel(src) -> Kernel:
    """u from q, qd, qdd, t by the recursive Newton-Euler algorithm (tau when the model has
    no actuators). `src`: the Model, or its Equations."""
    model = _model(src)
    tree = open_tree(model)
    n = len(model.q)
    tau = [sub(x, y) for x, y in zip(rnea(tree, model.q, model.qd, model.qdd), tree.applied)]
    if tree.act:
        cols = {}
        for k, (j, c) in tree.act.items():
            cols.setdefault(j, []).append((k, c))
        if len(tree.act) != n or any(len(v) != 1 for v in cols.values()):
            raise KernelError(f"{model.name}: inverse-dynamics-rnea needs one actuator per coordinate "
                              f"({len(tree.act)} actuators for {n} coordinates)")
        out = [ZERO] * n
        for j, ((k, c),) in cols.items():
            out[k] = tau[j] if c == 1.0 else div(tau[j], _c(c))
        port = OutPort.vector("u", out, [f"u_{a}" for a in tree.act_names])
    else:
        port = OutPort.vector("tau", tau, [f"tau_{s}" for s in names(model.q)])
    return Kernel(
        model=model.name, name="inverse-dynamics-rnea",
        description="actuator forces from the prescribed motion q, qd, qdd, t (recursive Newton-Euler over "
                    f"{_joints(tree)}, O(N) straight-line code)",
        inputs=[_port("q", model, model.q), _port("qd", model, model.qd), _port("qdd", model, model.qdd),
                _port("t", model, [model.t])],
        outputs=[port])


def aba_kernel(src) -> Kernel:
    """qdd from q, qd, t and the actuator inputs u by the articulated-body algorithm.
    `src`: the Model, or its Equations."""
    model = _model(src)
    tree = open_tree(model)
    n = len(model.q)
    inputs = [_port("q", model, model.q), _port("qd", model, model.qd), _port("t", model, [model.t])]
    if tree.act:
        try:
            u = [symbol(f"u_{a}", "input") for a in tree.act_names]
        except ExpressionError as e:
            raise KernelError(f"{model.name}: actuator input: {e}") from None
        inputs.append(InPort("u", u, _u_ranges(model, u, tree.act_names)))
        tau = _actuated_tau(tree, u)
    else:
        tau = [ZERO] * n
    qdd = aba(tree, model.q, model.qd, [add(x, y) for x, y in zip(tau, tree.applied)])
    return Kernel(
        model=model.name, name="forward-dynamics-aba",
        description="accelerations qdd from q, qd, t" + (" and actuator inputs u" if tree.act else "")
                    + f" (articulated-body algorithm over {_joints(tree)}, O(N) straight-line code)",
        inputs=inputs,
        outputs=[OutPort.vector("qdd", qdd, names(model.qdd))])


def mass_matrix_crba_kernel(src) -> Kernel:
    """The mass matrix M from q by the composite-rigid-body algorithm (sparse: the entries
    of coordinate pairs on one branch of the tree). `src`: the Model, or its Equations."""
    model = _model(src)
    tree = open_tree(model)
    qs = names(model.q)
    M = Sparse((len(qs), len(qs)), crba(tree, model.q))
    return Kernel(
        model=model.name, name="mass-matrix-crba",
        description=f"mass matrix M from q (composite-rigid-body algorithm over {_joints(tree)}, "
                    "straight-line code)",
        inputs=[_port("q", model, model.q)],
        outputs=[OutPort.sparse("M", M, qs, qs)])


def frame_kinematics(tree: OpenTree, q, L: Link, Rf, pf):
    """(p, R, J) of a frame carried by link L (v_L = Rf v_frame, origin pf in L's frame):
    its origin and axes in the world, and the 6 x n Jacobian {(row, coordinate): atom}
    with rows (v, w), the velocity of the origin and the angular velocity, world axes."""
    path = []
    X = L
    while X is not None:
        path.append(X)
        X = X.parent
    Rw, pw = _const_m(np.eye(3)), [ZERO] * 3
    joints = []  # (link, its axis and its origin in the world)
    for X in reversed(path):
        pw = _vadd(pw, _mv(Rw, X.joint.offset(X.r, X.fixed, q[X.j])))
        Rw = _mm(Rw, X.joint.rotation(X.fixed, q[X.j]))
        joints.append((X, _mv(Rw, _axis(X)), pw))
    p = _vadd(pw, _mv(Rw, _const_v(pf)))
    J = {}
    for X, a, o in joints:
        cols = (_cross(a, _vsub(p, o)), a) if X.joint.revolute else (a, [ZERO] * 3)
        for row, x in enumerate(cols[0] + cols[1]):
            J[(row, X.j)] = x
    return p, _mm(Rw, _const_m(Rf)), J


def frame_kinematics_kernel(src, frame: str | None = None) -> Kernel:
    """Position, orientation and Jacobian of the named frame from q (a URDF link's frame:
    Model.joint_tree). `src`: the Model, or its Equations."""
    model = _model(src)
    tree = open_tree(model)
    where = {f[0]: (L, f) for L in tree.links for f in L.frames}
    if frame not in where:
        known = ", ".join(where) or "none (only models read from a URDF name their frames)"
        raise KernelError(f"{model.name}: frame-kinematics needs a frame that moves (--frame NAME), got "
                          f"{frame!r}; the model's: {known}")
    L, (name, Rf, pf) = where[frame]
    p, R, J = frame_kinematics(tree, model.q, L, np.asarray(Rf, dtype=float), np.asarray(pf, dtype=float))
    qs = names(model.q)
    return Kernel(
        model=model.name, name="frame-kinematics",
        description=f"placement of frame {name} from q: origin p and axes R (world; v_world = R v_frame, row "
                    "major) and the Jacobian J (rows: velocity of the origin, angular velocity; world axes)",
        inputs=[_port("q", model, model.q)],
        outputs=[OutPort.vector("p", p, [f"p_{c}" for c in "xyz"]),
                 OutPort.vector("R", [x for row in R for x in row], [f"R_{i}{j}" for i in "xyz" for j in "xyz"]),
                 OutPort.sparse("J", Sparse((6, len(qs)), J), ["vx", "vy", "vz", "wx", "wy", "wz"], qs)])
