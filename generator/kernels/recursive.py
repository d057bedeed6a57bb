"""Recursive dynamics of open trees in relative coordinates, in O(N) operations.

    inverse-dynamics-rnea  q, qd, qdd, t -> u    recursive Newton-Euler (two passes)
    forward-dynamics-aba   q, qd, t, u -> qdd    articulated-body algorithm (three passes)
    mass-matrix-crba       q -> M                composite-rigid-body algorithm
    frame-kinematics       q -> p, R, J          a named frame's placement and Jacobian

The M(q)-based kernels (dynamics.py) expand the mass matrix and factor it: their atoms
grow as N^2 to N^3 along a chain. These kernels run Featherstone's recursions over the
links instead, written out as atoms (straight-line, interned, constants folded), so each
link adds a bounded number of operations whatever its depth.

Each link moves through one single-coordinate joint kind (model.joint_kinds): a turn
about any axis (Revolute) or a slide along it (Prismatic); the recursions ask it for the
link's placement, its motion subspace and the force component it transmits. A joint of
several coordinates is its steps in series (Spherical: three turns about one point, the
first two links massless), so every recursion stays one coordinate per link. The tree is
the model's explicit joint tree when it has one (Model.joint_tree: from_urdf,
model.tree.JointTree; revolute, prismatic and spherical joints; with from_urdf(floating=
True) on a floating base, Model.floating_base: the root the links without parent hang
from, a joint_kinds.FreeFlyer whose 7 configuration numbers, 6 velocities and their rates
lead the inputs, whose wrench leads RNEA's output and whose 6 velocities lead the rows and
columns of M and J; ABA solves its 6 x 6 articulated inertia by L D L^T), else it is read
off the model's relative trees (Model.relative_trees), revolute and prismatic joints:
* a revolute link is a base turned by exactly one coordinate (its angle is the
  coordinate's symbol); bases at a constant angle and fixed bases are constant
  placements, folded into the link above them;
* a prismatic link is a point whose vector is a unit axis times one coordinate (what
  tree.joint(Prismatic(axis), ...) makes): it keeps its parent link's axes, its origin is
  the slide point;
* every other point's vector is constant; a point is carried by the deeper of the link
  of its base and the link carrying its parent point: the latter when it keeps the
  former's axes (it is the same link, or slides from it), else its parent point is on
  the axis of every joint between them (the joint point, the link frame's origin). A
  turn whose joint point a slide carries hangs from that slide (a pendulum on a cart);
* a body (base c, point P) belongs to the link that carries its point by the same rule.
  Bodies on the ground are ignored (they do not move).
The model must have no constraints. Gravity enters the recursions (as an acceleration of
the ground); force elements (springs, dampers, applied forces and torques) enter as
their generalized forces by virtual power, as in Model.equations (their own cost, O(N)
per element for a force deep in a chain). On a floating base the point forces and
torques (world components, as on a fixed base) enter instead as Featherstone's external
spatial forces f_ext on their link (a body at the tree's root frame: the base), turned
into its axes by the base's quaternion and the chain's rotations: RNEA takes them off the
link's net force, ABA off its bias force, so the base's wrench rows see them; the scalar
elements keep their generalized forces on the joint rows (_floating_forces); each actuator acts on one coordinate with a
constant coefficient (inverse dynamics needs one
actuator per coordinate, or none: then it returns the generalized forces tau). Anything
else raises KernelError naming what does not fit, and the M(q)-based kernels serve it.

Invariants: the kernels compute the same values as forward-dynamics / inverse-dynamics
of the same model (tests/test_kernels_recursive.py checks 1e-10 at random states); the
links are visited in a fixed order (parents first, ties by coordinate order), so the
same model gives the same atoms; inputs carry the model's declared ranges.
"""
from __future__ import annotations

import copy
import functools

import numpy as np

from ..ir import ONE, ZERO, Atom, ExpressionError, Sparse, add, congruence, cross, diff, div, div_kept, dot, folded, \
    folded_mat, folded_vec, is_zero, matmul, matvec, mtv, mul, mul_kept, skew, sub, symbol, vadd, vconst, vscale, vsub
from ..model.joint_kinds import Prismatic, Revolute, kind_names
from .common import KernelError, names
from .kernel import InPort, Kernel, KernelInfo, OutPort

__all__ = ["Link", "OpenTree", "open_tree", "rnea_kernel", "aba_kernel", "mass_matrix_crba_kernel",
           "frame_kinematics_kernel"]


# ---- the tree -----------------------------------------------------------------------------------
class Link:
    """One joint and what it carries. Frame: the joint's axes at the joint point.

    `joint`: a single-coordinate joint kind (model.joint_kinds: Revolute, Prismatic; a
    spherical joint is three links, its turns in series). v_parent = R v_link with
    R = fixed @ Rot(axis, q) (revolute) or fixed (prismatic); the link origin is `r` in the
    parent link's frame (the ground's: world axes from the origin), plus fixed @ axis q for
    a prismatic joint; mass m, first moment h = m c and inertia I about the link origin, all
    in link axes (numbers)."""

    def __init__(self, j: int, parent: "Link | None", joint, fixed, base=None, depth=0):
        self.j, self.parent, self.joint, self.fixed, self.base = j, parent, joint, fixed, base
        self.axis = joint.axis
        self.depth = depth if base is None else base.depth
        self.r = None
        self.m = 0.0
        self.h = np.zeros(3)
        self.I = np.zeros((3, 3))
        self.children: list[Link] = []
        self.frames: tuple = ()  # (name, R, p) of named frames it carries (TreeJoint.frames)
        # a prismatic link's largest |q| over its declared range (open_tree; inf without one):
        # how far it can carry its subtree from its parent (analysis.bodyfloors)
        self.slide = 0.0 if joint.revolute else np.inf


class OpenTree:
    def __init__(self, model, links: list[Link], gravity, act: dict[int, tuple[int, float]], act_names, applied,
                 external=()):
        self.model, self.links, self.gravity, self.act, self.act_names = model, links, gravity, act, act_names
        self.applied = applied  # generalized forces of the force elements (one atom per coordinate)
        # the free-flying root the links without parent hang from (Model.floating_base), or None
        self.base = model.floating_base if model.joint_tree is not None else None
        # on a floating base, the point forces and torques: (link or None, point, F, n) (_floating_forces)
        self.external = list(external)


def _numeric_R(base) -> np.ndarray:
    """v_parent = R v_base of a base whose rotation is constant."""
    R = np.array([[x.value for x in row] for row in base.R], dtype=float)
    return R


def open_tree(model, mimic: bool = False) -> OpenTree:
    """The links of a model's explicit joint tree (from_urdf), or else of its relative trees
    (KernelError when it is not an open tree of revolute and prismatic joints, naming the
    first thing that does not fit). mimic: the constraints of mimic joints (Model.mimic) are accepted,
    for kernels that substitute them (_reduction)."""
    from ..model.model import Model

    if not isinstance(model, Model):
        raise KernelError(f"recursive dynamics needs a Model, got {type(model).__name__}")
    name = model.name
    tree = model.relative_trees
    if tree is None:
        raise KernelError(f"{name}: recursive dynamics needs a model in relative coordinates (model.relative())")
    held = {f"mimic_{q.value.name}" for q in model.mimic} if mimic else set()
    others = [e for e in model.phi_names + model.nh_names if e not in held]
    if others and model.mimic and others[0].startswith("mimic_"):
        raise KernelError(f"{name}: mimic joints couple the tree's branches: the articulated-body algorithm takes "
                          f"none ({others[0]!r}); inverse-dynamics-rnea, mass-matrix-crba and frame-kinematics "
                          "substitute them, forward-dynamics solves their constraints")
    if others:
        raise KernelError(f"{name}: recursive dynamics needs an open tree without constraints; equation {others[0]!r} "
                          "closes a loop or drives a coordinate (use forward-dynamics / inverse-dynamics)")
    if model.joint_tree is not None:
        depth_order = _explicit_links(model)
    else:
        depth_order = _relative_links(model, tree)
    ctx = model.context()
    act = {}
    for k, a in enumerate(model.actuators):
        d = a.direction(ctx)
        if len(d) != 1 or not next(iter(d.values())).is_const:
            raise KernelError(f"{name}: actuator {a.name!r} does not act on one coordinate with a constant "
                              "coefficient")
        (j, c), = d.items()
        act[k] = (j, float(c.value))
    g = np.zeros(3) if model.gravity_vector is None else np.asarray(model.gravity_vector, dtype=float)
    applied = [ZERO] * len(model.q)
    forces, external = model.forces, []
    if model.floating_base is not None:  # point forces and torques act on their link instead
        forces, external = _floating_forces(model, depth_order, ctx)
    for f in forces:  # springs, dampers, applied forces: by virtual power, as Model.equations
        for j, a in f.terms(ctx)[0].items():
            applied[j] = add(applied[j], a)
    for L in depth_order:
        if not L.joint.revolute and model.q[L.j] in model.ranges:
            lo, hi = model.ranges[model.q[L.j]]
            L.slide = max(abs(lo), abs(hi))
    return OpenTree(model, depth_order, g, act, [a.name for a in model.actuators], applied, external)


def _floating_forces(model, links: list[Link], ctx):
    """(scalar elements, external forces) of a floating-base model. The point forces and
    torques become (link or None for the base, local point or None, F, n): world components,
    turned into the link's axes by the kernels (Featherstone's f_ext). The scalar elements
    (springs, dampers on measures of the joint coordinates) keep their generalized forces on
    the joint rows and add nothing to the base's: internal to the robot, they do no work
    under a rigid motion of the whole of it; one whose terms need the base's own numbers is
    refused."""
    from ..model.forces import BodyTorque, PointForce

    b, tree = model.floating_base, model.relative_trees
    base_mask = 0
    for s in b.q + b.v + b.a:
        base_mask |= s.mask
    carrier = {}  # body name -> the last link of its tree joint
    by_j = {L.j: L for L in links}
    index = {s: j for j, s in enumerate(model.q)}
    for tj in model.joint_tree:
        carrier[tj.body] = by_j[index[tj.q[-1]]]
    scalar, external = [], []
    for f in model.forces:
        if isinstance(f, (PointForce, BodyTorque)):
            body = f.body
            on_base = getattr(body, "base", None) is tree.world and getattr(body, "origin", None) is tree.origin
            if not on_base and (body.name not in carrier or body not in model.bodies):
                raise KernelError(f"{model.name}: force element {f.name!r} acts on body {body.name!r}, which is no "
                                  "link of the joint tree nor the floating base (a body at the tree's root frame)")
            key = None if on_base else carrier[body.name]
            if isinstance(f, PointForce):
                external.append((key, vconst(f.local), list(f.force), None))
            else:
                external.append((key, None, None, list(f.torque)))
            continue
        terms = f.terms(ctx)[0]
        if getattr(f, "measure", ZERO).mask & base_mask or any(a.mask & base_mask for a in terms.values()):
            raise KernelError(f"{model.name}: force element {f.name!r} depends on the floating base's coordinates or "
                              "velocities: only point forces and torques may (as forces on their link)")
        scalar.append(f)
    return scalar, external


def _external(tree: OpenTree, R) -> dict:
    """{link, or None for the floating base: (n, f)}: the external forces on each, in its
    axes, n about its origin. F and n are in world components: turned by the base's
    rotation (its quaternion) and then by each link's rotation down the chain."""
    b = tree.base
    if not tree.external:
        return {}
    Rb = b.joint.rotation(b.q)
    out: dict = {}
    for key, p, F, n in tree.external:
        path = []
        L = key
        while L is not None:
            path.append(L)
            L = L.parent

        def local(v):
            v = mtv(Rb, v)
            for L in reversed(path):
                v = mtv(R[L], v)
            return v

        n0, f0 = out.get(key, ([ZERO] * 3, [ZERO] * 3))
        if F is not None:
            Fl = local(F)
            out[key] = (vadd(n0, cross(p, Fl)), vadd(f0, Fl))
        else:
            out[key] = (vadd(n0, local(n)), f0)
    return out


class _RelativeReader:
    """Reads links off a model's relative trees: which link carries each base and point, and
    each link's joint point (memoized; KernelError for what is not an open tree of revolute
    and prismatic joints). A base turned by one coordinate is a revolute link; a point whose
    vector is a unit axis times one coordinate (tree.joint(Prismatic(axis), ...)) is a
    prismatic link, with its parent's axes (fixed = I) and the slide point as its origin."""

    def __init__(self, model):
        self.model, self.name = model, model.name
        self.index = {s: j for j, s in enumerate(model.q)}
        self.links: dict = {}  # joint base (revolute) or slide point (prismatic) -> Link
        self.joint_point: dict = {}  # link -> (point, position in the parent link)
        self._bases: dict = {}
        self._points: dict = {}

    def link_of(self, base):
        """(link or None for the ground, R with v_link = R v_base, numbers)."""
        if base in self._bases:
            return self._bases[base]
        if base.parent is None:
            out = (None, np.eye(3))
        elif base.angle is not None and base.angle.is_symbol and base.angle in self.index:
            out = (self.joint(base), np.eye(3))
        elif base.angle is not None and not base.angle.is_const:
            raise KernelError(f"{self.name}: base {base.name!r} turns by {base.angle}, not by one coordinate: "
                              "not an open tree of revolute and prismatic joints")
        else:
            L, R = self.link_of(base.parent)
            out = (L, R @ _numeric_R(base))
        self._bases[base] = out
        return out

    def _new_link(self, key, j, parent, joint, fixed, base=None):
        if any(o.j == j for o in self.links.values()):
            raise KernelError(f"{self.name}: coordinate {self.model.q[j].value.name!r} moves two joints")
        L = Link(j, parent, joint, fixed, base, depth=0 if parent is None else parent.depth + 1)
        self.links[key] = L
        return L

    def joint(self, base) -> Link:
        """The link a base turned by one coordinate is the joint of."""
        L = self.links.get(base)
        if L is None:
            P, R = self.link_of(base.parent)
            L = self._new_link(base, self.index[base.angle], P, Revolute(base.axis), R, base)
        return L

    def claim(self, L: Link, p, where) -> None:
        """Point p (at `where` in the parent link) is on the axis of L: its joint point."""
        old = self.joint_point.get(L)
        if old is None:
            self.joint_point[L] = (p, where)
        elif old[0] is not p and not np.allclose(old[1], where, atol=1e-12):
            raise KernelError(f"{self.name}: the axis of {self.model.q[L.j].value.name!r} would pass through both "
                              f"{old[0].name!r} and {p.name!r}: not an open tree of revolute joints")

    @staticmethod
    def _slides_to(L, A) -> bool:
        """A is above L, reached through prismatic links only: L keeps A's axes."""
        while L is not None and not L.joint.revolute:
            L = L.parent
            if L is A:
                return True
        return False

    def descend(self, p, Lp, op, L, what):
        """Position in link L of point p, carried by Lp (an ancestor of L, or L) at op: p is
        then on the axis of every joint from Lp down to L (the joint point of each). A
        revolute link whose parent's axes Lp keeps (Lp slides from it) and whose joint point
        is not yet known hangs from Lp: a turn on a slide (a pendulum on a cart)."""
        path = []
        X = L
        while X is not Lp:
            if X is None:
                raise KernelError(f"{self.name}: {what} the joints above it do not carry: not an open tree of "
                                  "revolute and prismatic joints")
            if not X.joint.revolute:
                raise KernelError(f"{self.name}: {what} the slide {self.model.q[X.j].value.name!r} moves away "
                                  "from: not an open tree of revolute and prismatic joints")
            if X not in self.joint_point and self._slides_to(Lp, X.parent):
                X.parent = Lp
            path.append(X)
            X = X.parent
        for X in reversed(path):
            self.claim(X, p, op)
            op = np.zeros(3)
        return op

    def carry(self, p, Lp, op, Lc, d, what):
        """(link, position in it) of the point at op in Lp (point p's position) plus d in
        Lc's axes: Lp when it keeps Lc's axes (Lc is Lp or Lp slides from it), else Lc, p
        then on the axes of the joints from Lp down to Lc."""
        if Lc is Lp or self._slides_to(Lp, Lc):
            return Lp, op + d
        return Lc, self.descend(p, Lp, op, Lc, what) + d

    def _slide(self, p):
        """(coordinate index, unit axis in p.base's axes) of a point whose vector is a unit
        axis times one coordinate; None for a constant vector; KernelError otherwise."""
        v = p.vector
        if all(isinstance(x, Atom) and x.is_const for x in v):
            return None
        moved = [j for j, s in enumerate(self.model.q) if any(diff(x, s) is not ZERO for x in v)]
        if len(moved) == 1:
            s = self.model.q[moved[0]]
            a = [diff(x, s) for x in v]
            if all(c.is_const for c in a) and all(sub(x, mul(c, s)) is ZERO for x, c in zip(v, a)):
                axis = np.array([c.value for c in a], dtype=float)
                if abs(np.linalg.norm(axis) - 1.0) < 1e-12:
                    return moved[0], axis
        raise KernelError(f"{self.name}: point {p.name!r} moves by {', '.join(str(x) for x in v)}, not by one "
                          "coordinate along a unit axis: not an open tree of revolute and prismatic joints")

    def resolve(self, p):
        """(link carrying point p, its position in that link's frame)."""
        if p in self._points:
            return self._points[p]
        if p.parent is None:
            out = (None, np.zeros(3))
        else:
            Lp, op = self.resolve(p.parent)
            Lc, R = self.link_of(p.base)
            slide = self._slide(p)
            what = f"point {p.name!r} hangs from {p.parent.name!r}, which"
            if slide is None:
                e = np.array([x.value for x in p.vector], dtype=float)
                out = self.carry(p.parent, Lp, op, Lc, R @ e, what)
            else:
                P, o = self.carry(p.parent, Lp, op, Lc, np.zeros(3), what)
                S = self._new_link(p, slide[0], P, Prismatic(R @ slide[1]), np.eye(3))
                self.joint_point[S] = (p.parent, o)
                out = (S, np.zeros(3))
        self._points[p] = out
        return out


def _relative_links(model, tree) -> list[Link]:
    """The links read off the relative trees (revolute and prismatic joints), parents first."""
    from ..model.relative import RelBody

    name = model.name
    bodies = [b for b in model.bodies if b.has_inertia]
    for b in bodies:
        if not (isinstance(b, RelBody) and b.tree is tree):
            raise KernelError(f"{name}: body {b.name!r} is not a body of the model's relative trees")
    rd = _RelativeReader(model)
    placed = []
    for b in bodies:
        Lb, R = rd.link_of(b.base)
        Lp, op = rd.resolve(b.origin)
        L, o = rd.carry(b.origin, Lp, op, Lb, np.zeros(3), f"body {b.name!r} is placed at {b.origin.name!r}, which")
        if L is not None:
            placed.append((L, R, o, b))
    for L, R, o, b in placed:  # inertia about the joint point, link axes
        com = o + R @ np.asarray(b.com, dtype=float)
        Ic = R @ np.asarray(b.inertia, dtype=float) @ R.T
        L.m += b.mass
        L.h += b.mass * com
        L.I += Ic + b.mass * (float(com @ com) * np.eye(3) - np.outer(com, com))
    # every ancestor of a link is a link too (link_of walks up), so this is the whole tree
    for L in list(rd.links.values()):
        if L not in rd.joint_point:
            raise KernelError(f"{name}: coordinate {model.q[L.j].value.name!r} moves no body")
        L.r = np.asarray(rd.joint_point[L][1], dtype=float)
    used = {L.j for L in rd.links.values()}
    missing = [model.q[j].value.name for j in range(len(model.q)) if j not in used]
    if missing:
        raise KernelError(f"{name}: coordinate(s) {', '.join(missing)} turn no base and slide no point of the "
                          "relative trees")
    return _parents_first(list(rd.links.values()))


def _parents_first(links: list[Link]) -> list[Link]:
    """The links ordered parents before children (by depth, ties by coordinate), each
    entered in its parent's children."""
    order = sorted(links, key=lambda L: (L.depth, L.j))
    depth_order = []
    seen = set()
    while len(depth_order) < len(order):
        for L in order:
            if L not in seen and (L.parent is None or L.parent in seen):
                seen.add(L)
                depth_order.append(L)
    for L in depth_order:
        if L.parent is not None:
            L.parent.children.append(L)
    return depth_order


def _explicit_links(model) -> list[Link]:
    """The links of the model's explicit joint tree (Model.joint_tree), parents first, one
    per step of each joint's kind; the model's bodies with inertia must be exactly the
    tree's."""
    jt = model.joint_tree
    have = sorted(b.name for b in model.bodies if b.has_inertia)
    if have != sorted(j.body for j in jt if j.mass > 0 or np.any(j.I)):
        raise KernelError(f"{model.name}: bodies were added to or changed in the joint tree "
                          f"({', '.join(have)}): the recursive kernels read the tree as built")
    index = {s: j for j, s in enumerate(model.q)}
    if sorted(index[x] for j in jt for x in j.q) != list(range(len(model.q))):
        raise KernelError(f"{model.name}: the joint tree does not turn each coordinate once")
    links: list[Link] = []
    last: list[Link] = []  # per tree joint: its last link, what carries its body and frames
    for tj in jt:
        P = None if tj.parent is None else last[tj.parent]
        fixed, r = np.asarray(tj.R, dtype=float), np.asarray(tj.r, dtype=float)
        for step, x in zip(tj.joint.steps(), tj.q):  # the later steps of a joint turn about its point
            L = Link(index[x], P, step, fixed, depth=0 if P is None else P.depth + 1)
            L.r = r
            if P is not None:
                P.children.append(L)
            links.append(L)
            P, fixed, r = L, np.eye(3), np.zeros(3)
        L.m, L.h, L.I = float(tj.mass), np.asarray(tj.h, dtype=float), np.asarray(tj.I, dtype=float)
        L.frames = tj.frames
        last.append(L)
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
    return folded_vec(L.axis)


def _placements(tree: OpenTree, q):
    """(R, r) per link: v_parent = R v_link, the link origin r in the parent's frame."""
    R, r = {}, {}
    for L in tree.links:
        R[L] = L.joint.placed_rotation(L.fixed, q[L.j])
        r[L] = L.joint.offset(L.r, L.fixed, q[L.j])
    return R, r


def rnea(tree: OpenTree, q, qd, qdd, norms: list | None = None, rates=None) -> list[Atom]:
    """tau (one atom per coordinate): the generalized forces that give qdd at q, qd,
    against inertia and gravity (= M qdd - Q). acc is the classical acceleration of the
    link origin (gravity as an upward acceleration of the ground).

    norms (a list) gets [(atom, lo, hi)]: range-analysis hints of the recursion's vectors
    from their norms (rnea_norms), given rates = (max |qd_j|, max |qdd_j|) per coordinate
    over the kernel's inputs; nothing for a tree they do not cover."""
    n = len(tree.model.q)
    R, rq = {}, {}
    w, al, acc, f, nm = {}, {}, {}, {}, {}
    root = _root_motion(tree)
    for L in tree.links:
        J = L.joint
        R[L] = Rl = J.placed_rotation(L.fixed, q[L.j])
        a = _axis(L)
        if L.parent is None:
            wp, alp, ap = root
        else:
            P = L.parent
            wp, alp, ap = w[P], al[P], acc[P]
        rq[L] = r = J.offset(L.r, L.fixed, q[L.j])
        if not is_zero(r):  # acceleration of the joint point, parent axes
            ap = vadd(ap, vadd(cross(alp, r), cross(wp, cross(wp, r))))
        acc[L] = mtv(Rl, ap)
        wpl = mtv(Rl, wp)
        aqd = vscale(qd[L.j], a)
        w[L], al[L], acc[L] = J.link_acceleration(wpl, Rl, alp, acc[L], aqd, qdd[L.j])
        f[L], nm[L] = _body_force(L.m, L.h, L.I, w[L], al[L], acc[L])
    b = tree.base
    if b is not None:  # the base's own inertial force, its links' handed to it below
        fb, nb = _body_force(b.mass, b.h, b.I, *root)
    for L, (n_, f_) in _external(tree, R).items():  # Featherstone's f_ext, taken off the net force
        if L is None:
            fb, nb = vsub(fb, f_), vsub(nb, n_)
        else:
            f[L], nm[L] = vsub(f[L], f_), vsub(nm[L], n_)
    tau = [ZERO] * n
    for L in reversed(tree.links):
        tau[L.j] = L.joint.project(nm[L], f[L])
        P = L.parent
        if P is None and b is None:
            continue
        np_, fp = _force_to_parent(R[L], rq[L], nm[L], f[L])
        if P is None:
            fb, nb = vadd(fb, fp), vadd(nb, np_)
            continue
        f[P] = vadd(f[P], fp)
        nm[P] = vadd(nm[P], np_)
    if norms is not None and rates is not None:
        norms += rnea_norms(tree, (w, al, acc, f, nm), tau, *rates)
    return tau if b is None else fb + nb + tau


def rnea_norms(tree: OpenTree, vectors, tau, qd_max, qdd_max) -> list:
    """[(atom, -N, N)] for each component of RNEA's link vectors and each tau, N a bound of
    the vector's norm: rotations keep norms, so interval arithmetic's growth through each
    link's rotation (a box turned is enclosed in a wider box) does not reach them. With
    W, AL, ACC the norms of the parent's angular velocity, angular acceleration and origin
    acceleration, a revolute link at offset r: W' = W + qd, AL' = AL + qdd + W qd, ACC' =
    ACC + AL |r| + W^2 |r|; the body's force m ACC' + AL' |h| + W'^2 |h| and moment
    ||I|| AL' + ||I|| W'^2 + |h| ACC'; each child's force adds its own and its moment its
    own plus |r_c| times its force; |tau_j| <= the moment's norm (a unit axis). Sound
    over inputs with |qd_j| <= qd_max[j], |qdd_j| <= qdd_max[j] (the declared ranges).
    Revolute trees on a fixed base without external forces only; otherwise []."""
    if not _norms_apply(tree):
        return []
    w, al, acc, f, nm = vectors
    Wn, An, Cn = _link_norms(tree, qd_max, qdd_max)
    Fn, Nn = {}, {}
    for L in tree.links:
        hn = float(np.linalg.norm(np.asarray(L.h, dtype=float)))
        In = float(np.abs(np.linalg.eigvalsh(np.asarray(L.I, dtype=float))).max()) if np.any(L.I) else 0.0
        Fn[L] = float(L.m) * Cn[L] + An[L] * hn + Wn[L] ** 2 * hn
        Nn[L] = In * An[L] + In * Wn[L] ** 2 + hn * Cn[L]
    for L in reversed(tree.links):  # leaves first: the children's forces and moments added
        for c in L.children:
            Fn[L] += Fn[c]
            Nn[L] += Nn[c] + float(np.linalg.norm(np.asarray(c.r, dtype=float))) * Fn[c]
    out = []

    def put(vec, bound):
        b = float(np.nextafter(bound * (1 + 1e-9), np.inf))
        out.extend((a, -b, b) for a in vec if a.args)

    for L in tree.links:
        for vec, bound in ((w[L], Wn[L]), (al[L], An[L]), (acc[L], Cn[L]), (f[L], Fn[L]), (nm[L], Nn[L])):
            put(vec, bound)
        put([tau[L.j]], Nn[L])
    return out


def _norms_apply(tree: OpenTree) -> bool:
    """rnea_norms' recursion covers revolute trees on a fixed base without external forces."""
    return tree.base is None and not tree.external and all(L.joint.revolute for L in tree.links)


def _link_norms(tree: OpenTree, qd_max, qdd_max) -> tuple[dict, dict, dict]:
    """({link: W}, {link: AL}, {link: ACC}): bounds of the norms of each link's angular
    velocity, angular acceleration and origin acceleration (gravity as the ground's upward
    acceleration), rnea_norms' recursion; a prismatic link keeps its parent's turning, its
    origin at most its declared slide (Link.slide) further, and adds the Coriolis 2 W qd and
    qdd: ACC' = ACC + (AL + W^2) (|r| + slide) + 2 W qd + qdd. W by _turn_norm (a joint at
    right angles to its parent's adds its rate in quadrature)."""
    g = float(np.linalg.norm(np.asarray(tree.gravity, dtype=float)))
    Wn, An, Cn, turns = {}, {}, {}, {}
    for L in tree.links:  # parents first
        P = L.parent
        W, AL, C = (0.0, 0.0, g) if P is None else (Wn[P], An[P], Cn[P])
        r = float(np.linalg.norm(np.asarray(L.r, dtype=float)))
        if L.joint.revolute:
            turns[L] = (turns[P] if P is not None else []) + [L]
            Wn[L] = _turn_norm(turns[L], qd_max)
            An[L] = AL + qdd_max[L.j] + W * qd_max[L.j]
            Cn[L] = C + AL * r + W * W * r
        else:
            turns[L] = turns[P] if P is not None else []
            Wn[L], An[L] = W, AL
            Cn[L] = C + (AL + W * W) * (r + L.slide) + 2 * W * qd_max[L.j] + qdd_max[L.j]
    return Wn, An, Cn


def _turn_norm(turns: list, qd_max):
    """A bound of |sum_i a_i qd_i| over the revolute links' axes a_i from the root: the
    square root of sum_ij |qd_i| |qd_j| c_ij, c_ij = |a_i . a_j| where link j hangs from
    link i (their axes keep their angle: i's turn leaves a_i, j's leaves a_j), else 1 (at
    most sum_i |qd_i|, what the recursion added before)."""
    s = 0.0
    for x, A in enumerate(turns):
        s = s + qd_max[A.j] * qd_max[A.j]
        for B in turns[x + 1:]:
            c = 1.0
            if B.parent is A:
                a = np.asarray(A.axis, dtype=float)
                b = np.asarray(B.fixed, dtype=float) @ np.asarray(B.axis, dtype=float)
                c = min(1.0, abs(float(a @ b)) / float(np.linalg.norm(a) * np.linalg.norm(b)) + 1e-12)
            s = s + 2.0 * c * qd_max[A.j] * qd_max[B.j]
    return np.sqrt(s) * (1 + 1e-12)


GYRO_GRID = 256  # points a side on each cube face: _gyro_factor's directions (6 x 257^2)


@functools.lru_cache(maxsize=1)
def _sphere_grid(n: int) -> tuple[np.ndarray, float]:
    """(unit vectors, covering radius): a grid of n + 1 points a side on each face of the cube
    [-1, 1]^3 pushed radially onto the unit sphere. Every unit w is p / |p| for a p on a face
    within h / sqrt 2 of a grid point g (h = 2 / n), and x -> x / |x| is 1-Lipschitz off the
    open unit ball, so w is within h / sqrt 2 of g / |g|."""
    t = np.linspace(-1.0, 1.0, n + 1)
    a, b = (x.ravel() for x in np.meshgrid(t, t))
    one = np.ones_like(a)
    P = np.vstack([np.stack(v, 1) for s in (1.0, -1.0) for v in ((s * one, a, b), (a, s * one, b), (a, b, s * one))])
    return P / np.linalg.norm(P, axis=1)[:, None], (2.0 / n) / np.sqrt(2.0)


def _gyro_factor(h: np.ndarray, I: np.ndarray, P: np.ndarray, Sp: np.ndarray, mu: float, dirs=None) -> float:
    """c with ||P^T G(w)||_{Sp^-1} <= c |w|^2 for every w (every w along dirs' unit vectors
    when given), G(w) = (w x I w, w x (w x h)) the wrench a body (first moment h, inertia I
    at its origin) needs to turn at w, Sp = P^T S P (least eigenvalue mu): the largest over
    dirs, or over _sphere_grid's directions plus the Lipschitz bound over its gaps (G is
    bilinear, |G(w) - G(w')| <= 2 (||I|| + |h|) |w - w'|, and ||P^T .||_{Sp^-1} <= |.| /
    sqrt(mu), P's columns orthonormal)."""
    W, gap = (dirs, 0.0) if dirs is not None else _sphere_grid(GYRO_GRID)
    # G(w) = sum_ij w_i w_j B_ij, B_ij = (e_i x I e_j, e_i x (e_j x h)): its Sp^-1 norm is |C^T P^T B (w w^T)|
    E3 = np.eye(3)
    B = np.array([np.r_[np.cross(E3[i], I @ E3[j]), np.cross(E3[i], np.cross(E3[j], h))]
                  for i in range(3) for j in range(3)])  # 9 x 6
    Q = B @ P @ np.linalg.cholesky(np.linalg.inv(Sp))  # C C^T = Sp^-1
    Y = (W[:, :, None] * W[:, None, :]).reshape(len(W), 9) @ Q
    top = float(np.sqrt(np.max(np.einsum("nk,nk->n", Y, Y))))
    In = float(np.abs(np.linalg.eigvalsh(I)).max())
    return top * (1 + 1e-9) + 2 * (In + float(np.linalg.norm(h))) * gap / np.sqrt(mu)


def bias_energy_factors(tree: OpenTree) -> dict | None:
    """{link: (a, b, c)} of each body, what bias_energy_bound reads (revolute and prismatic
    joints with declared slides, on a fixed base, no external forces): its wrench's S^-1 norm is
    at most a |alpha| + b |acc| + c |w|^2 (S its spatial inertia at the link origin). In a
    planar tree (bodyfloors._planar) every twist lies in P = span((axis, 0), (0, e1), (0,
    e2)), e1 and e2 across the axis, so only P^T W does work and S is read as P^T S P: a
    rod's missing inertia about its own axis does not enter (and an acceleration along the
    axis gives P^T S (0; a) = 0). None otherwise, or where S (P^T S P) is not positive
    definite."""
    from ..analysis.bodyfloors import _planar, spatial_inertia
    if tree.base is not None or tree.external or not all(np.isfinite(L.slide) for L in tree.links):
        return None
    planar = _planar(tree.links)
    out = {}
    for L in tree.links:
        m, h, I = float(L.m), np.asarray(L.h, dtype=float), np.asarray(L.I, dtype=float)
        S = spatial_inertia(L)
        P, dirs = np.eye(6), None
        if planar:
            a = np.asarray(L.axis, dtype=float) / np.linalg.norm(np.asarray(L.axis, dtype=float))
            e1 = np.cross(a, np.eye(3)[int(np.argmin(np.abs(a)))])
            e1 /= np.linalg.norm(e1)
            P = np.zeros((6, 3))
            P[:3, 0], P[3:, 1], P[3:, 2] = a, e1, np.cross(a, e1)
            dirs = a[None, :]  # the angular velocity is along the axis
        Sp = P.T @ S @ P
        mu = float(np.linalg.eigvalsh(Sp)[0]) * (1 - 1e-9) - 1e-15 * float(np.abs(Sp).sum())
        if not mu > 0:
            return None
        rot = float(a @ I @ a) if planar else float(np.abs(np.linalg.eigvalsh(I)).max())
        out[L] = (float(np.sqrt(rot)), float(np.sqrt(m)), _gyro_factor(h, I, P, Sp, mu, dirs))
    return out


def bias_energy_bound(tree: OpenTree, qd_max, factors: dict):
    """A bound on sqrt(b^T M^-1 b), b = RNEA(q, qd, 0) the bias forces (gravity included),
    for every q and every |qd_j| <= qd_max[j] (numbers, or arrays over boxes); factors:
    bias_energy_factors(tree).

    b = sum_k J_k^T W_k, W_k body k's wrench at its origin with every joint acceleration
    0, so v^T b = sum_k (J_k v)^T W_k <= sqrt(v^T M v) sqrt(sum_k W_k^T S_k^-1 W_k)
    (Cauchy-Schwarz in each body's spatial inertia S_k; M = sum_k J_k^T S_k J_k). W_k =
    S_k (alpha; a) + G(w) (_body_force: alpha, a the link's angular and origin
    accelerations, w its angular velocity), so its S_k^-1 norm is at most sqrt(lambda_max(I))
    |alpha| + sqrt(m) |a| + c_k |w|^2 (_gyro_factor; bias_energy_factors, which also
    covers planar trees of rods), the norms _link_norms' at qdd = 0.
    Measured on sample_arm over its declared box: 5.4e3 against 1.3e3 for the largest
    sqrt(sum_k W_k^T S_k^-1 W_k) and 9.4e2 for the largest sqrt(b^T M^-1 b) at 20,000
    random states (the norms add the rates of joints whose axes can line up)."""
    Wn, An, Cn = _link_norms(tree, qd_max, [0.0] * len(qd_max))
    total = 0.0
    for L, (a, b, c) in factors.items():
        t = a * An[L] + b * Cn[L] + c * Wn[L] ** 2
        total = total + t * t
    return np.sqrt(total) * (1 + 1e-9)


def _body_force(m, h, I, W, A, acc):
    """(f, n): the inertial force pair of a body (mass m, first moment h, inertia I about
    its frame origin) at angular velocity W, angular acceleration A and classical
    acceleration acc of its origin, all in its axes."""
    h, I, m = folded_vec(h), folded_mat(I), folded(m)
    f = vadd(vadd(vscale(m, acc), cross(A, h)), cross(W, cross(W, h)))
    n = vadd(vadd(matvec(I, A), cross(W, matvec(I, W))), cross(h, acc))
    return f, n


def _root_motion(tree: OpenTree):
    """(angular velocity, angular acceleration, classical acceleration of the origin) of the
    frame the root links hang from, in its axes, gravity as an upward acceleration of the
    ground: the world's, or the floating base's (FreeFlyer: velocity (v, w) and its rates
    in base axes, so the origin accelerates by dv/dt + w x v)."""
    g = folded_vec(-tree.gravity)
    b = tree.base
    if b is None:
        return [ZERO] * 3, [ZERO] * 3, g
    v0, w0 = list(b.v[:3]), list(b.v[3:])
    acc = vadd(vadd(list(b.a[:3]), cross(w0, v0)), mtv(b.joint.rotation(b.q), g))
    return w0, list(b.a[3:]), acc


def _force_to_parent(Rl, r, n, f):
    """A force pair (moment at the link origin, force) in the parent's frame and origin."""
    fp = matvec(Rl, f)
    np_ = matvec(Rl, n)
    if not is_zero(r):
        np_ = vadd(np_, cross(r, fp))
    return np_, fp


def _inertia_to_parent(L: Link, q, Rl, r, A, B, C, n=None, f=None):
    """A spatial inertia [[A, B], [B^T, C]] (and a force pair n, f, when given) of link L
    in its parent's frame and origin: rotate, then move the reference point by r."""
    T = L.joint.turn(L.fixed, q[L.j])
    if T is not None:
        A1, B1, C1 = T.sym(A), T.gen(B), T.sym(C)
    else:
        A1, B1, C1 = congruence(Rl, A, symmetric=True), congruence(Rl, B), congruence(Rl, C, symmetric=True)
    if n is not None:
        fn, ff = matvec(Rl, n), matvec(Rl, f)
    if not is_zero(r):
        H = skew(r)
        K = matmul(H, [[B1[k][i] for k in range(3)] for i in range(3)])  # hat(r) B1^T
        HC = matmul(H, C1)
        HCH = matmul(HC, H)
        A2 = [[ZERO] * 3 for _ in range(3)]
        for i in range(3):
            for k in range(i, 3):
                A2[i][k] = A2[k][i] = sub(add(A1[i][k], add(K[i][k], K[k][i])), HCH[i][k])
        B2 = [[add(B1[i][k], HC[i][k]) for k in range(3)] for i in range(3)]
        A1, B1 = A2, B2
        if n is not None:
            fn = vadd(fn, cross(r, ff))
    if n is None:
        return A1, B1, C1
    return A1, B1, C1, fn, ff


def _add_inertia(P, X):
    return [[[add(P[b][i][k], X[b][i][k]) for k in range(3)] for i in range(3)] for b in range(3)]


def _link_inertia(L: Link):
    """[A, B, C]: the link's spatial inertia at its origin, [n; f] = [[A, B], [B^T, C]] [w; v]."""
    return _spatial_inertia(L.m, L.h, L.I)


def _spatial_inertia(m, h, I):
    """[A, B, C] of mass m, first moment h and inertia I about the frame origin (numbers)."""
    m, h, I = folded(m), folded_vec(h), folded_mat(I)
    return [I, skew(h), [[m if i == k else ZERO for k in range(3)] for i in range(3)]]


def aba(tree: OpenTree, q, qd, tau, pivots: dict | None = None, floors=None) -> list[Atom]:
    """qdd (one atom per coordinate) under the generalized forces tau, inertia and gravity;
    `pivots` (a dict) gets {link: (D, 1 / D)} (analysis.bodyfloors floors them); floors:
    (rotational ceilings, masses, M's eigenvalue floor) of a fixed-base tree (_aba_floors_of),
    for the pivots proven over a wide range, or None.

    Spatial vectors as pairs of 3-vectors in link axes at the link origin: motion (w, v),
    force (n, f); an articulated inertia as blocks [n; f] = [[A, B], [B^T, C]] [w; v]."""
    R, rq, cw, cv, IA, pA = _aba_velocities(tree, q, qd)
    for L, (n_, f_) in _external(tree, R).items():  # Featherstone's f_ext, taken off the bias force
        pA[L] = [vsub(pA[L][0], n_), vsub(pA[L][1], f_)]
    U, invD, uu = _aba_articulated(tree, q, tau, R, rq, cw, cv, IA, pA, pivots, floors)
    base = _aba_base(tree, IA, pA) if tree.base is not None else None
    return _aba_accelerations(tree, R, rq, cw, cv, U, invD, uu, base)


def _aba_base(tree: OpenTree, IA, pA):
    """The floating base's spatial acceleration (w, v) in its axes, less gravity's (the
    ground falls at g, as in the other passes): the base is free, IA a + pA = 0."""
    (A, B, C), (pn, pf) = IA[None], pA[None]
    K = [A[i] + B[i] for i in range(3)] + [[B[k][i] for k in range(3)] + C[i] for i in range(3)]
    return _solve_spd(K, [sub(ZERO, x) for x in pn + pf])


def _solve_spd(K, rhs) -> list[Atom]:
    """x with K x = rhs, K symmetric positive definite (an articulated inertia): L D L^T
    without pivoting, which such a K never needs."""
    n = len(rhs)
    L = [[ZERO] * n for _ in range(n)]
    D = [ZERO] * n
    for j in range(n):
        D[j] = K[j][j]
        for k in range(j):
            D[j] = sub(D[j], mul(mul(L[j][k], L[j][k]), D[k]))
        inv = div(ONE, D[j])
        for i in range(j + 1, n):
            x = K[i][j]
            for k in range(j):
                x = sub(x, mul(mul(L[i][k], L[j][k]), D[k]))
            L[i][j] = mul(x, inv)
    y = list(rhs)
    for i in range(n):  # L y = rhs, then D L^T x = y
        for k in range(i):
            y[i] = sub(y[i], mul(L[i][k], y[k]))
    x = [div(y[i], D[i]) for i in range(n)]
    for i in reversed(range(n)):
        for k in range(i + 1, n):
            x[i] = sub(x[i], mul(L[k][i], x[k]))
    return x


def _aba_velocities(tree: OpenTree, q, qd):
    """ABA pass 1, root to leaves: per link its placement (R, r), the velocity-product
    acceleration c = (cw, cv), its spatial inertia IA and bias force pA."""
    zero3 = [ZERO] * 3
    R, rq, w, v, cw, cv, IA, pA = {}, {}, {}, {}, {}, {}, {}, {}
    b = tree.base
    if b is not None:  # the floating base: the key None (its velocity is an input)
        w[None], v[None] = list(b.v[3:]), list(b.v[:3])
        IA[None], pA[None] = _inertia_and_bias(b.mass, b.h, b.I, w[None], v[None])
    for L in tree.links:
        J = L.joint
        R[L] = Rl = J.placed_rotation(L.fixed, q[L.j])
        a = _axis(L)
        rq[L] = r = J.offset(L.r, L.fixed, q[L.j])
        if L.parent is None and b is None:
            wp, vp = zero3, zero3
        else:
            wp, vp = w[L.parent], v[L.parent]
            if not is_zero(r):
                vp = vadd(vp, cross(wp, r))
        wpl = mtv(Rl, wp)
        v[L] = mtv(Rl, vp)
        aqd = vscale(qd[L.j], a)
        w[L], v[L], cw[L], cv[L] = J.link_velocity(wpl, v[L], aqd)
        IA[L], pA[L] = _inertia_and_bias(L.m, L.h, L.I, w[L], v[L])
    return R, rq, cw, cv, IA, pA


def _inertia_and_bias(m, h, I, W, V):
    """A body's spatial inertia [A, B, C] at its frame origin and its velocity-product
    bias force v x* I v (n, f), at angular velocity W and origin velocity V (its axes)."""
    S = _spatial_inertia(m, h, I)
    m, h, I = folded(m), folded_vec(h), folded_mat(I)
    n0 = vadd(matvec(I, W), cross(h, V))
    f0 = vadd(vscale(m, V), cross(W, h))
    return S, [vadd(cross(W, n0), cross(V, f0)), cross(W, f0)]


def _aba_articulated(tree: OpenTree, q, tau, R, rq, cw, cv, IA, pA, pivots=None, floors=None):
    """ABA pass 2, leaves to root: articulated inertias and bias forces, each link's handed
    to its parent (IA, pA updated in place); per link U = IA S, 1 / D and u. The
    multipliers U / D and the projection's products read their operands as computed
    (ir.mul_kept), the form analysis.ababack replays; a pivot proven over a wide range
    divides (bodyfloors.divides: a fixed-point reciprocal's format would span it) where
    that argument applies (floors: M has an eigenvalue floor)."""
    from ..analysis.bodyfloors import divides
    rot, mass, lam = floors if floors is not None else ({}, {}, 0.0)
    backward = lam > 0  # else no use dividing: analysis.ababack
    U, invD, uu = {}, {}, {}
    for L in reversed(tree.links):
        J = L.joint
        A, Bm, C = IA[L]
        pn, pf = pA[L]
        Un, Uf = J.subspace_force(A, Bm, C)
        D = J.project(Un, Uf)
        iD = div(ONE, D)
        U[L], invD[L] = (Un, Uf), iD
        if pivots is not None:  # what analysis.bodyfloors bounds: the pivot, the inertias, U and U / D
            pivots[L] = {"D": D, "iD": iD, "IA": (A, Bm, C), "U": (Un, Uf)}
        uu[L] = sub(tau[L.j], J.project(pn, pf))
        P = L.parent
        if P is None and tree.base is None:
            continue
        wide = backward and divides(L, rot[L.j] if J.revolute else mass[L.j])
        Us_n, Us_f = ([div_kept(u, D) if wide else mul_kept(iD, u) for u in V] for V in (Un, Uf))
        PA, PC, Aa, Ca = ([[ZERO] * 3 for _ in range(3)] for _ in range(4))
        for i in range(3):
            for k in range(i, 3):
                PA[i][k] = PA[k][i] = mul_kept(Us_n[i], Un[k])
                PC[i][k] = PC[k][i] = mul_kept(Us_f[i], Uf[k])
                Aa[i][k] = Aa[k][i] = sub(A[i][k], PA[i][k])
                Ca[i][k] = Ca[k][i] = sub(C[i][k], PC[i][k])
        PB = [[mul_kept(Us_n[i], Uf[k]) for k in range(3)] for i in range(3)]
        Ba = [[sub(Bm[i][k], PB[i][k]) for k in range(3)] for i in range(3)]
        # pa = p + Ia c + U D^-1 u
        c_w, c_v = cw[L], cv[L]
        s = mul(iD, uu[L])
        pan = vadd(vadd(pn, vadd(matvec(Aa, c_w), matvec(Ba, c_v))), vscale(s, Un))
        paf = vadd(vadd(pf, vadd(mtv(Ba, c_w), matvec(Ca, c_v))), vscale(s, Uf))
        A1, B1, C1, fn, ff = _inertia_to_parent(L, q, R[L], rq[L], Aa, Ba, Ca, pan, paf)
        if pivots is not None:
            pivots[L].update(proj=(Aa, Ba, Ca), Us=(Us_n, Us_f), moved=(A1, B1, C1), prod=(PA, PB, PC), divided=wide)
        IA[P] = _add_inertia(IA[P], (A1, B1, C1))
        pA[P] = [vadd(pA[P][0], fn), vadd(pA[P][1], ff)]
    return U, invD, uu


def _aba_accelerations(tree: OpenTree, R, rq, cw, cv, U, invD, uu, base=None) -> list[Atom]:
    """ABA pass 3, root to leaves: each coordinate's acceleration, then its link's; with a
    floating base (its acceleration `base`, less gravity's, from _aba_base), first the
    base's rates (v, w) then the coordinates'."""
    zero3 = [ZERO] * 3
    qdd = [ZERO] * len(tree.model.q)
    an, av = {}, {}
    if base is not None:
        an[None], av[None] = base[:3], base[3:]
    for L in tree.links:
        Rl = R[L]
        if L.parent is None and base is None:
            apn, apv = zero3, folded_vec(-tree.gravity)
        else:
            apn, apv = an[L.parent], av[L.parent]
            r = rq[L]
            if not is_zero(r):
                apv = vadd(apv, cross(apn, r))
        moving = L.parent is not None or base is not None  # a parent that moves: c is not 0
        a1n = vadd(mtv(Rl, apn), cw[L]) if moving else mtv(Rl, apn)
        a1v = vadd(mtv(Rl, apv), cv[L]) if moving else mtv(Rl, apv)
        Un, Uf = U[L]
        x = mul(invD[L], sub(uu[L], add(dot(Un, a1n), dot(Uf, a1v))))
        qdd[L.j] = x
        an[L], av[L] = L.joint.accelerate(a1n, a1v, x)
    if base is None:
        return qdd
    b = tree.base  # the true acceleration: add gravity's back, (0, R^T g) in base axes
    g = mtv(b.joint.rotation(b.q), folded_vec(tree.gravity))
    return vadd(base[3:], g) + base[:3] + qdd


def crba(tree: OpenTree, q, composite: dict | None = None) -> dict[tuple[int, int], Atom]:
    """The mass matrix M(q) by the composite-rigid-body algorithm: composite inertias from
    the leaves up, then each joint's S^T Ic S and its force carried up to the ancestors.
    Entries (i, j) and (j, i) of every coordinate pair on one branch (others are zero).
    composite (a dict) gets {link: its composite inertia [A, B, C]} (analysis.ldlback's
    bodies)."""
    R, rq = _placements(tree, q)
    b = tree.base
    Ic = {L: _link_inertia(L) for L in tree.links}
    if b is not None:  # the floating base: the key None
        Ic[None] = _spatial_inertia(b.mass, b.h, b.I)
    for L in reversed(tree.links):
        if L.parent is not None or b is not None:
            Ic[L.parent] = _add_inertia(Ic[L.parent], _inertia_to_parent(L, q, R[L], rq[L], *Ic[L]))
    if composite is not None:
        composite.update({L: Ic[L] for L in tree.links})
    o = 0 if b is None else 6  # a floating base's 6 velocities come first
    M = {}
    for L in tree.links:
        Fn, Ff = L.joint.subspace_force(*Ic[L])
        M[(o + L.j, o + L.j)] = L.joint.project(Fn, Ff)
        X = L
        while X.parent is not None:
            Fn, Ff = _force_to_parent(R[X], rq[X], Fn, Ff)
            X = X.parent
            M[(o + L.j, o + X.j)] = M[(o + X.j, o + L.j)] = X.joint.project(Fn, Ff)
        if b is not None:  # the base's rows: the force at its origin, (f, n) in its axes
            Fn, Ff = _force_to_parent(R[X], rq[X], Fn, Ff)
            for i, x in enumerate(Ff + Fn):
                M[(i, o + L.j)] = M[(o + L.j, i)] = x
    if b is not None:  # the base's block: its composite inertia, velocities (v, w)
        A, B, C = Ic[None]
        for i in range(3):
            for k in range(3):
                M[(i, k)], M[(3 + i, 3 + k)] = C[i][k], A[i][k]
                M[(3 + i, k)] = M[(k, 3 + i)] = B[i][k]
    return M


def _reduction(model):
    """The mimic joints substituted (Model.mimic; the identity without them): (indices of the
    independent coordinates, q, qd, qdd of every coordinate as atoms of the independent
    ones, and per coordinate (its independent coordinate's position, multiplier))."""
    free = [j for j, x in enumerate(model.q) if x not in model.mimic]
    pos = {model.q[j]: i for i, j in enumerate(free)}
    q, qd, qdd, G = [], [], [], []
    for j, x in enumerate(model.q):
        src, k, c = model.mimic.get(x, (x, 1.0, 0.0))
        if src in model.mimic:
            raise KernelError(f"{model.name}: mimic joint {x.value.name!r} follows {src.value.name!r}, itself a "
                              "mimic joint: name the independent joint in the URDF")
        s = model.q.index(src)
        if x in model.mimic:
            q.append(add(mul(folded(k), src), folded(c)))
            qd.append(mul(folded(k), model.qd[s]))
            qdd.append(mul(folded(k), model.qdd[s]))
        else:
            q.append(x), qd.append(model.qd[j]), qdd.append(model.qdd[j])
        G.append((pos[src], k))
    return free, q, qd, qdd, G


def _independent(model, q, qs, free, G):
    """(q, velocity names, G) over the independent coordinates (_reduction's free and G), a
    floating base's configuration and velocities kept ahead of them (G: identity there)."""
    w, nq = len(qs) - len(model.q), len(q) - len(model.q)
    return (q[:nq] + [q[nq + j] for j in free], qs[:w] + [qs[w + j] for j in free],
            [(i, 1.0) for i in range(w)] + [(w + i, k) for i, k in G])


def _reduced(tau: list[Atom], G) -> list[Atom]:
    """Generalized forces of the independent coordinates: tau_s + sum k tau_mimic (virtual power)."""
    out = [ZERO] * (max(i for i, _ in G) + 1)
    for x, (i, k) in zip(tau, G):
        out[i] = add(out[i], x if k == 1.0 else mul(folded(k), x))
    return out


def _reduced_actuators(tree: OpenTree, G) -> OpenTree:
    """A copy of `tree` whose actuators name the independent coordinates' positions (a
    mimic joint has none: from_urdf gives it its constraint instead)."""
    out = copy.copy(tree)
    act = {}
    for k, (j, c) in tree.act.items():
        i, mult = G[j]
        if tree.model.q[j] in tree.model.mimic:
            raise KernelError(f"{tree.model.name}: actuator {tree.act_names[k]!r} drives the mimic joint "
                              f"{tree.model.q[j].value.name!r}")
        act[k] = (i, c)
    out.act = act
    return out


def _actuated_tau(tree: OpenTree, u) -> list[Atom]:
    tau = [ZERO] * len(tree.model.q)
    for k, (j, c) in tree.act.items():
        tau[j] = add(tau[j], mul(folded(c), u[k]))
    return tau


def _u_ranges(model, u, act_names):
    """Each actuator input's declared range (Model.operate_input; from_urdf: the effort
    limits), else (-1, 1)."""
    return [model.ranges.get(s, tuple(model.envelope.inputs.get(a, (-1.0, 1.0)))) for s, a in zip(u, act_names)]


def _joints(tree: OpenTree) -> str:
    """'6 revolute joints', or '9 joints (7 revolute, 2 prismatic)'."""
    jt = tree.model.joint_tree
    kinds = [j.kind for j in jt] if jt is not None else [L.joint.name for L in tree.links]
    on = " on a floating base" if tree.base is not None else ""
    if all(k == Revolute.name for k in kinds):
        return f"{len(kinds)} revolute joints{on}"
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in kind_names() if k in kinds)
    return f"{len(kinds)} joints ({counts}){on}"


def rnea_kernel(src) -> Kernel:
    """u from q, qd, qdd, t by the recursive Newton-Euler algorithm (tau when the model has
    no actuators). `src`: the Model, or its Equations."""
    model = _model(src)
    tree = open_tree(model, mimic=True)
    q, qd, qdd = _state(tree)
    from ..analysis.bodyfloors import ConstantEnclosure
    free, qf, qdf, qddf, G = _reduction(model)
    norms: list = []
    tau = rnea(tree, qf, qdf, qddf, norms, None if model.mimic else rate_bounds(model.ranges, model.qd, model.qdd))
    if model.mimic:  # the kernel takes the independent coordinates; their forces by virtual power
        w = 0 if tree.base is None else 6  # a floating base's wrench leads, kept as it is
        tau = tau[:w] + _reduced([sub(x, y) for x, y in zip(tau[w:], tree.applied)], G)
        q, qd, qdd = (v[:len(v) - len(model.q)] + [v[len(v) - len(model.q) + j] for j in free]
                      for v in (q, qd, qdd))
        tree = _reduced_actuators(tree, G)
    n = len(q)
    coords = [model.q[j] for j in free]
    if tree.base is not None:  # the base's wrench, then each coordinate's force
        if not model.mimic:  # the scalar elements' generalized forces, on the joint rows only
            tau = tau[:6] + [sub(x, y) for x, y in zip(tau[6:], tree.applied)]
        port = OutPort.vector("tau", tau, [f"tau_base_{c}" for c in ("fx", "fy", "fz", "nx", "ny", "nz")]
                              + [f"tau_{s}" for s in names(coords)])
    elif tree.act:
        tau = tau if model.mimic else [sub(x, y) for x, y in zip(tau, tree.applied)]
        cols = {}
        for k, (j, c) in tree.act.items():
            cols.setdefault(j, []).append((k, c))
        if len(tree.act) != n or any(len(v) != 1 for v in cols.values()):
            raise KernelError(f"{model.name}: inverse-dynamics-rnea needs one actuator per coordinate "
                              f"({len(tree.act)} actuators for {n} coordinates), or none: it then returns the "
                              "generalized forces tau of every coordinate")
        out = [ZERO] * n
        for j, ((k, c),) in cols.items():
            out[k] = tau[j] if c == 1.0 else div(tau[j], folded(c))
        port = OutPort.vector("u", out, [f"u_{a}" for a in tree.act_names])
    else:
        tau = tau if model.mimic else [sub(x, y) for x, y in zip(tau, tree.applied)]
        port = OutPort.vector("tau", tau, [f"tau_{s}" for s in names(coords)])
    return Kernel(
        model=model.name, name="inverse-dynamics-rnea",
        description=("generalized forces (the floating base's wrench, then the joints')" if tree.base else
                     "actuator forces") + " from the prescribed motion q, qd, qdd, t (recursive Newton-Euler over "
                    f"{_joints(tree)}, O(N) straight-line code)",
        inputs=[_port("q", model, q), _port("qd", model, qd), _port("qdd", model, qdd),
                _port("t", model, [model.t])],
        outputs=[port],
        info=KernelInfo(enclosures=[ConstantEnclosure(norms)] if norms else []))


def rate_bounds(ranges: dict, *groups) -> tuple | None:
    """Per group of symbols (the rates, the accelerations), each one's largest |value| over
    its declared range, or None when one is missing or infinite (rnea_norms' rates)."""
    top = [[max(abs(float(x)) for x in ranges.get(s, (np.inf, np.inf))) for s in g] for g in groups]
    return tuple(top) if all(np.isfinite(t).all() for t in top) else None


def _state(tree: OpenTree):
    """(q, qd, qdd) of the kernels' inputs: a floating base's configuration, velocity and
    its rates first (FreeFlyer convention), then the model's coordinates."""
    m, b = tree.model, tree.base
    if b is None:
        return list(m.q), list(m.qd), list(m.qdd)
    return list(b.q) + m.q, list(b.v) + m.qd, list(b.a) + m.qdd


def aba_kernel(src) -> Kernel:
    """qdd from q, qd, t and the actuator inputs u by the articulated-body algorithm.
    `src`: the Model, or its Equations."""
    model = _model(src)
    tree = open_tree(model)
    n = len(model.q)
    q, qd, rates = _state(tree)
    inputs = [_port("q", model, q), _port("qd", model, qd), _port("t", model, [model.t])]
    if tree.act:
        try:
            u = [symbol(f"u_{a}", "input") for a in tree.act_names]
        except ExpressionError as e:
            raise KernelError(f"{model.name}: actuator input: {e}") from None
        inputs.append(InPort("u", u, _u_ranges(model, u, tree.act_names)))
        tau = _actuated_tau(tree, u)
    else:
        tau = [ZERO] * n
    pivots: dict = {}
    floors = _aba_floors_of(tree)
    qdd = aba(tree, model.q, model.qd, [add(x, y) for x, y in zip(tau, tree.applied)], pivots, floors)
    return Kernel(
        model=model.name, name="forward-dynamics-aba",
        description="accelerations qdd from q, qd, t" + (" and actuator inputs u" if tree.act else "")
                    + (" (the floating base's first, its wrench zero)" if tree.base else "")
                    + f" (articulated-body algorithm over {_joints(tree)}, O(N) straight-line code)",
        inputs=inputs,
        outputs=[OutPort.vector("qdd", qdd, names(rates))],
        info=KernelInfo(enclosures=[_aba_floors(tree, pivots, floors)] if floors is not None else []))


def _aba_floors_of(tree: OpenTree):
    """(rotational ceilings, masses, M's eigenvalue floor) of a fixed-base tree, once for the
    pass (its wide pivots) and its hints; None on a floating base."""
    from ..analysis.bodyfloors import composite_bounds, eigen_floor
    return (*composite_bounds(tree.links), eigen_floor(tree.links)) if tree.base is None else None


def _aba_floors(tree: OpenTree, pivots: dict, floors):
    """The hints of the articulated-body pass (analysis.bodyfloors): D_k = S^T I^A_k S at
    least the joint's own body's (I^A_k >= I_k), at most M_kk's ceiling; I^A_k, its
    projection and its move to the parent's origin are positive semidefinite and at most
    the subtree's composite inertia there (rotational diagonal <= the ceiling of any
    axis through the origin, translational <= the subtree's mass, |X_ij| <= sqrt(X_ii X_jj)),
    so |U_i| = |(I^A S)_i| <= sqrt(X_ii D) and |U_i / D| <= sqrt(X_ii / D). A slide's D is
    a translational diagonal entry: at most the subtree's mass."""
    from ..analysis.ababack import aba_roles
    from ..analysis.bodyfloors import ConstantEnclosure, link_floor
    top, mass, _ = floors
    hints, labels = [], []
    for L, got in pivots.items():
        f, name, j = link_floor(L), tree.model.q[L.j].value.name, L.j
        what = f"1/(the articulated inertia's pivot D of joint {name}"
        if not f > 0:
            labels.append((got["iD"], what + ": no floor proved, its body has no inertia about its axis)"))
            continue
        # D = S^T I^A S: a rotational diagonal entry for a turn, a translational one (at most
        # the subtree's mass) for a slide
        ceil = top[j] if L.joint.revolute else mass[j]
        hints += [(got["D"], f, ceil), (got["iD"], 1.0 / ceil, np.nextafter(1.0 / f, np.inf))]
        labels.append((got["iD"], what + f", proven in [{f:.3g}, {ceil:.3g}])"))
        diag = [top[j]] * 3 + [mass[j]] * 3
        hints += _block_bounds(got["IA"], diag) + _block_bounds(got.get("proj"), diag)
        if L.parent is not None:
            p = L.parent.j
            hints += _block_bounds(got.get("moved"), [top[p]] * 3 + [mass[p]] * 3)
        for k, a in enumerate([*got["U"][0], *got["U"][1]]):
            hints.append((a, -_up(np.sqrt(diag[k] * ceil)), _up(np.sqrt(diag[k] * ceil))))
        for k, a in enumerate([*got.get("Us", ([], []))[0], *got.get("Us", ([], []))[1]]):
            hints.append((a, -_up(np.sqrt(diag[k] / f)), _up(np.sqrt(diag[k] / f))))
        if "prod" in got:  # U_i U_k / D: the rank-one part of I^A, |.| <= sqrt(X_ii X_kk) as I^A's entries
            hints += _block_bounds(got["prod"], diag, signed=True)
    roles = aba_roles(tree, pivots, floors) if len(labels) == len(pivots) else None
    return ConstantEnclosure(hints, labels=labels, roles=roles)


def _up(x) -> float:
    return float(np.nextafter(x, np.inf) * (1 + 1e-12))


def _block_bounds(blocks, diag, signed: bool = False) -> list:
    """[(atom, lo, hi)] of a positive semidefinite [[A, B], [B^T, C]] whose diagonal is at
    most diag (6 numbers): 0 <= X_ii <= diag_i, |X_ij| <= sqrt(diag_i diag_j) (signed: the
    diagonal is only bounded in size too)."""
    if blocks is None:
        return []
    A, B, C = blocks
    out = []
    for i in range(3):
        for k in range(3):
            for a, di, dk in ((A[i][k], diag[i], diag[k]), (B[i][k], diag[i], diag[3 + k]),
                              (C[i][k], diag[3 + i], diag[3 + k])):
                if a.args:
                    c = _up(np.sqrt(di * dk))
                    out.append((a, 0.0 if not signed and (a is A[i][i] or a is C[i][i]) else -c, c))
    return out


def mass_matrix_crba_kernel(src) -> Kernel:
    """The mass matrix M from q by the composite-rigid-body algorithm (sparse: the entries
    of coordinate pairs on one branch of the tree). `src`: the Model, or its Equations."""
    model = _model(src)
    tree = open_tree(model, mimic=True)
    q, qd, _ = _state(tree)
    qs = names(qd)[:len(qd) - len(model.q)] + names(model.q)  # a floating base's velocities, the coordinates
    free, qf, _, _, G = _reduction(model)
    entries = crba(tree, qf)
    if model.mimic:  # G^T M G over the independent coordinates
        q, qs, G = _independent(model, q, qs, free, G)
        reduced: dict = {}
        for (i, j), v in entries.items():
            (a, ka), (b, kb) = G[i], G[j]
            reduced[(a, b)] = add(reduced.get((a, b), ZERO), v if ka * kb == 1.0 else mul(folded(ka * kb), v))
        entries = reduced
    M = Sparse((len(qs), len(qs)), entries)
    return Kernel(
        model=model.name, name="mass-matrix-crba",
        description=f"mass matrix M from q (composite-rigid-body algorithm over {_joints(tree)}, "
                    "straight-line code)",
        inputs=[_port("q", model, q)],
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
    b = tree.base
    Rw, pw = (folded_mat(np.eye(3)), [ZERO] * 3) if b is None else (b.joint.rotation(b.q), list(b.q[:3]))
    joints = []  # (link, its axis and its origin in the world)
    for X in reversed(path):
        pw = vadd(pw, matvec(Rw, X.joint.offset(X.r, X.fixed, q[X.j])))
        Rw = matmul(Rw, X.joint.placed_rotation(X.fixed, q[X.j]))
        joints.append((X, matvec(Rw, _axis(X)), pw))
    p = vadd(pw, matvec(Rw, folded_vec(pf)))
    J = {}
    o = 0 if b is None else 6  # a floating base's 6 velocities come first
    for X, a, c in joints:
        cols = X.joint.jacobian(a, p, c)
        for row, x in enumerate(cols[0] + cols[1]):
            J[(row, o + X.j)] = x
    if b is not None:  # base axis k: v moves p along it, w turns p about the base origin
        R0, r = b.joint.rotation(b.q), vsub(p, list(b.q[:3]))
        for k in range(3):
            e = [R0[i][k] for i in range(3)]
            for row, x in enumerate(e + [ZERO] * 3 + cross(e, r) + e):
                J[(row % 6, k + 3 * (row // 6))] = x
    return p, matmul(Rw, folded_mat(Rf)), J


def frame_kinematics_kernel(src, frame: str | None = None) -> Kernel:
    """Position, orientation and Jacobian of the named frame from q (a URDF link's frame:
    Model.joint_tree). `src`: the Model, or its Equations."""
    model = _model(src)
    tree = open_tree(model, mimic=True)
    q, qd, _ = _state(tree)
    where = {f[0]: (L, f) for L in tree.links for f in L.frames}
    if tree.base is not None:  # the links fixed to a floating root move too
        where.update({f[0]: (None, f) for f in tree.base.frames})
    if frame not in where:
        known = ", ".join(where) or "none (only models read from a URDF name their frames)"
        raise KernelError(f"{model.name}: frame-kinematics needs a frame that moves (--frame NAME), got "
                          f"{frame!r}; the model's: {known}")
    L, (name, Rf, pf) = where[frame]
    free, qf, _, _, G = _reduction(model)
    p, R, J = frame_kinematics(tree, qf, L, np.asarray(Rf, dtype=float), np.asarray(pf, dtype=float))
    qs = names(qd)[:len(qd) - len(model.q)] + names(model.q)
    if model.mimic:  # J G: a mimic joint's column k times into its source's
        q, qs, G = _independent(model, q, qs, free, G)
        reduced: dict = {}
        for (row, c), x in J.items():
            i, k = G[c]
            reduced[(row, i)] = add(reduced.get((row, i), ZERO), x if k == 1.0 else mul(folded(k), x))
        J = reduced
    return Kernel(
        model=model.name, name="frame-kinematics",
        description=f"placement of frame {name} from q: origin p and axes R (world; v_world = R v_frame, row "
                    "major) and the Jacobian J (rows: velocity of the origin, angular velocity; world axes)",
        inputs=[_port("q", model, q)],
        outputs=[OutPort.vector("p", p, [f"p_{c}" for c in "xyz"]),
                 OutPort.vector("R", [x for row in R for x in row], [f"R_{i}{j}" for i in "xyz" for j in "xyz"]),
                 OutPort.sparse("J", Sparse((6, len(qs)), J), ["vx", "vy", "vz", "wx", "wy", "wz"], qs)])
