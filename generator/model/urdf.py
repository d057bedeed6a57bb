"""Robots as their users describe them: a URDF file to a Model in relative coordinates.

    from_urdf(path, /, floating=False, gravity=(0, 0, -9.81), acceleration=20.0, velocity=10.0) -> Model

The file is read with yourdfpy (after a strict XML parse, so a syntax error names its
line instead of being recovered from). One coordinate and one actuator per moving joint,
named after it (characters other than letters, digits and _ become _); the coordinate is the joint's angle (revolute, continuous) or its slide
(prismatic) from the joint's origin, as in the URDF and in Pinocchio. Fixed joints merge
their child link into the moving link above it (mass, centre of mass and inertia
combined), so each moving joint carries one body: the child link's, in the child link's
frame. Ranges: position and velocity from <limit> (continuous joints: (-pi, pi); no
velocity limit: `velocity`), accelerations +-`acceleration` (a URDF has none), actuator
inputs +-effort (Model.operate_input). Mimic joints are read as independent joints (as
Pinocchio does by default). floating=True: the root link flies free (Model.floating_base,
a joint_kinds.FreeFlyer of coordinates base_x .. base_qw, velocities base_vx .. base_wz,
Pinocchio's convention), which only the recursive kernels take.

Besides the bases and points every kernel reads, the model carries the explicit joint
tree (Model.joint_tree) the recursive kernels (kernels/recursive.py) run over: the
URDF already says which link each joint moves, so nothing is guessed back from the
trees. Anything the model cannot take (a planar or floating joint inside the tree, two
roots, a link with two parents, a joint that moves no inertia, limits that make no
sense) raises URDFError: one line naming the file and the joint or link.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..ir import add, as_atom, mul, sub
from .errors import ModelError
from .model import Model
from .joint_kinds import FreeFlyer, Prismatic, Revolute
from .relative import FloatingBase, TreeJoint
from .tree import about_origin

# the joint kind (model.joint_kinds) of each moving URDF joint type, built from its <axis>
KIND_OF_TYPE = {"revolute": Revolute, "continuous": Revolute, "prismatic": Prismatic}
MOVING = tuple(KIND_OF_TYPE)


class URDFError(ModelError):
    """A URDF file that cannot become a Model (one line: the file, the joint or link, why)."""


def _read(path: Path):
    """The yourdfpy robot of a file: XML errors with their line, yourdfpy's own as one line."""
    from lxml import etree
    import yourdfpy

    if not path.is_file():
        raise URDFError(f"URDF file {path} does not exist")
    try:
        etree.parse(str(path), etree.XMLParser(remove_blank_text=True))
    except etree.XMLSyntaxError as e:
        raise URDFError(f"URDF file {path}: does not parse at line {e.lineno}: {e.msg}") from None
    try:
        urdf = yourdfpy.URDF.load(str(path), build_scene_graph=False, build_collision_scene_graph=False,
                                  load_meshes=False, load_collision_meshes=False)
    except Exception as e:  # yourdfpy's KeyError/AttributeError on a missing attribute or element
        raise URDFError(f"URDF file {path}: not a URDF robot ({type(e).__name__}: {e})") from None
    if urdf.robot is None:
        raise URDFError(f"URDF file {path}: no <robot> element")
    return urdf.robot


def _tree(path: Path, robot):
    """(root link name, {link: [joints whose parent it is]}), refusing what is not one tree."""
    links = {ln.name: ln for ln in robot.links}
    if not links:
        raise URDFError(f"URDF file {path}: no <link>")
    children: dict[str, list] = {name: [] for name in links}
    parent_of: dict[str, str] = {}
    for j in robot.joints:
        for end in (j.parent, j.child):
            if end not in links:
                raise URDFError(f"URDF file {path}: joint {j.name!r} names link {end!r}, which is not defined")
        if j.child in parent_of:
            raise URDFError(f"URDF file {path}: link {j.child!r} is the child of joints {parent_of[j.child]!r} "
                            f"and {j.name!r}: a closed kinematic graph (only trees are read)")
        parent_of[j.child] = j.name
        children[j.parent].append(j)
    roots = [name for name in links if name not in parent_of]
    if len(roots) != 1:
        raise URDFError(f"URDF file {path}: {'no root link (the joints form a loop)' if not roots else 'several root links: ' + ', '.join(roots)}")
    reached, todo = set(), [roots[0]]
    while todo:
        name = todo.pop()
        reached.add(name)
        todo += [j.child for j in children[name]]
    if len(reached) != len(links):
        loose = sorted(set(links) - reached)
        raise URDFError(f"URDF file {path}: link(s) {', '.join(loose)} form a loop apart from the root")
    return roots[0], children, links


def _origin(j) -> np.ndarray:
    return np.eye(4) if j.origin is None else np.asarray(j.origin, dtype=float)


def _inertial(path: Path, link):
    """(mass, com, inertia about the com) of a link in its own frame (zeros: no <inertial>)."""
    i = link.inertial
    if i is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    T = np.eye(4) if i.origin is None else np.asarray(i.origin, dtype=float)
    m = float(i.mass or 0.0)
    I = np.zeros((3, 3)) if i.inertia is None else np.asarray(i.inertia, dtype=float)
    if m < 0 or not np.all(np.isfinite(I)) or np.min(np.linalg.eigvalsh(I)) < -1e-12 * max(1.0, np.abs(I).max()):
        raise URDFError(f"URDF file {path}: link {link.name!r}: negative mass or an inertia that is not "
                        "positive semidefinite")
    R = T[:3, :3]
    return m, T[:3, 3].copy(), R @ I @ R.T


def _limits(path: Path, j, velocity: float):
    """(range, velocity range, effort or None) of a moving joint."""
    lim = j.limit
    lo, hi = (lim.lower, lim.upper) if lim is not None else (None, None)
    if j.type == "continuous":
        rng = (-math.pi, math.pi)
    elif lo is None or hi is None:
        raise URDFError(f"URDF file {path}: joint {j.name!r} ({j.type}) has no lower/upper <limit>")
    elif not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise URDFError(f"URDF file {path}: joint {j.name!r}: limits lower={lo} upper={hi} make no range")
    else:
        rng = (float(lo), float(hi))
    v = lim.velocity if lim is not None and lim.velocity else velocity
    e = lim.effort if lim is not None and lim.effort else None
    if not (math.isfinite(v) and v > 0) or (e is not None and not (math.isfinite(e) and e > 0)):
        raise URDFError(f"URDF file {path}: joint {j.name!r}: velocity {v} and effort {e} limits must be positive")
    return rng, (-float(v), float(v)), e


def _ident(name: str) -> str:
    """A URDF name as an identifier (it reaches the generated C): other characters become _."""
    name = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in name)
    return name if name and not name[0].isdigit() else f"urdf_{name}"


def from_urdf(path, /, floating: bool = False, gravity=(0.0, 0.0, -9.81), acceleration: float = 20.0,
              velocity: float = 10.0, mimic: bool = False) -> Model:
    """The Model of the robot in a URDF file, fixed to the world at its root link.

    gravity: world components (the URDF's root-link axes); acceleration: the range +-a of
    every coordinate's acceleration; velocity: the velocity limit of joints that give none.
    floating=True: the root link flies free (Model.floating_base, joint_kinds.FreeFlyer:
    Pinocchio's JointModelFreeFlyer convention); only the recursive kernels take it.
    mimic=True: each <mimic> joint is held by a constraint q = multiplier q_source + offset
    and has no actuator (the M(q)-based kernels serve the model, and RNEA, CRBA and frame
    kinematics over the independent joints, also on a floating base); False: an
    independent joint."""
    path = Path(path)
    g = _options(path, floating, gravity, acceleration, velocity)
    robot = _read(path)
    root, children, links = _tree(path, robot)
    m = Model(_ident(robot.name or path.stem))
    t = m.relative()
    joints: list[dict] = []  # moving joints, parents first: their frames and what they carry
    # per link: (relative base, point) of its frame, (index of the moving joint carrying it or
    # None for the world, 4x4 transform from that joint's frame to the link frame)
    frame = {root: (t.world, t.origin)}
    carrier = {root: (None, np.eye(4))}
    order = [root]
    for name in order:  # breadth first: parents before children, the file's order among siblings
        for j in children[name]:
            if j.type not in MOVING + ("fixed",):
                raise URDFError(f"URDF file {path}: joint {j.name!r} is {j.type}: only revolute, continuous, "
                                "prismatic and fixed joints are read")
            _place(path, m, t, j, frame, carrier, joints, acceleration, velocity)
            order.append(j.child)
    carried = _carried(path, order, carrier, links, len(joints))
    _check_inertia(path, joints, carried)
    frames = _frames(order, carrier, len(joints))
    mimics = _mimics(path, robot, joints) if mimic else {}
    _add_joints(m, t, joints, carried, frames[:-1], mimics)
    if floating:
        m.floating_base = _floating_base(path, m, order, carrier, links, frames[-1], acceleration, velocity)
    m.gravity(tuple(float(x) for x in g))
    return m


BASE_RANGE = 10.0  # +- metres of each coordinate of a floating base's origin (a URDF gives none)


def _floating_base(path: Path, m: Model, order, carrier, links, frames, acceleration, velocity) -> FloatingBase:
    """The free-flying root (FreeFlyer convention, symbols base_x .. base_qw, base_vx ..
    base_wz and their rates base_vx_d ..): the root link and the links fixed to it are its
    body, their frames its frames."""
    kind = FreeFlyer()
    cn, vn = kind.coordinate_names("base"), kind.velocity_names("base")
    for n in cn + vn + [f"{v}_d" for v in vn]:
        if n in m.scope:
            raise URDFError(f"URDF file {path}: a floating base names its coordinates {cn[0]} .. {vn[-1]}_d; "
                            f"joint {n!r} takes one of those names")
    q = tuple(m.scope.new(n, "q") for n in cn)
    v = tuple(m.scope.new(n, "qd") for n in vn)
    a = tuple(m.scope.new(f"{n}_d", "qdd") for n in vn)
    for s, c in zip(q, kind.CONFIGURATION):
        m.ranges[s] = (-BASE_RANGE, BASE_RANGE) if c in ("x", "y", "z") else (-1.0, 1.0)
    for s, d in zip(v, a):
        m.ranges[s], m.ranges[d] = (-float(velocity), float(velocity)), (-float(acceleration), float(acceleration))
    mass, h, I = 0.0, np.zeros(3), np.zeros((3, 3))
    for name in order:
        if carrier[name][0] is None:
            lm, c, Ic = _inertial(path, links[name])
            T = carrier[name][1]
            lm, dh, dI = about_origin(lm, T[:3, :3] @ c + T[:3, 3], T[:3, :3] @ Ic @ T[:3, :3].T)
            mass, h, I = mass + lm, h + dh, I + dI
    if not mass > 0:
        raise URDFError(f"URDF file {path}: a floating base needs a root link {order[0]!r} with mass "
                        "(it and the links fixed to it have no <inertial> mass)")
    return FloatingBase("base", kind, q, v, a, float(mass), tuple(h), tuple(map(tuple, I)), tuple(frames))


def _options(path: Path, floating: bool, gravity, acceleration, velocity) -> np.ndarray:
    """The gravity vector, once from_urdf's options are checked (URDFError otherwise)."""
    if not isinstance(floating, bool):
        raise URDFError(f"URDF file {path}: floating must be True or False, got {floating!r}")
    g = np.asarray(gravity, dtype=float) if np.ndim(gravity) == 1 and len(gravity) == 3 else None
    if g is None or not np.all(np.isfinite(g)):
        raise URDFError(f"URDF file {path}: gravity must be 3 numbers, got {gravity!r}")
    if not (float(acceleration) > 0 and float(velocity) > 0):
        raise URDFError(f"URDF file {path}: acceleration and velocity must be positive")
    return g


def _carried(path: Path, order, carrier, links, n: int) -> list[list]:
    """[mass, first moment, inertia about the joint origin] per moving joint, in its frame:
    every link's inertia added into the moving joint that carries it."""
    carried = [[0.0, np.zeros(3), np.zeros((3, 3))] for _ in range(n)]
    for name in order:
        k, T = carrier[name]
        lm, c, Ic = _inertial(path, links[name])
        if k is None or lm == 0 and not np.any(Ic):
            continue
        R, p = T[:3, :3], T[:3, 3]
        _, h, I = about_origin(lm, R @ c + p, R @ Ic @ R.T)
        acc = carried[k]
        acc[0] += lm
        acc[1] += h
        acc[2] += I
    return carried


def _frames(order, carrier, n: int) -> list[list]:
    """The links' frames (name, R, p), each on the moving joint carrying it; last, the
    frames of the links fixed to the root."""
    frames: list[list] = [[] for _ in range(n + 1)]
    for name in order:
        k, T = carrier[name]
        frames[n if k is None else k].append((_ident(name), tuple(map(tuple, T[:3, :3])), tuple(T[:3, 3])))
    return frames


def _mimics(path: Path, robot, joints) -> dict:
    """{mimic joint's name: (its source's coordinate, multiplier, offset)} of the moving
    joints with a <mimic> (the source a moving joint too)."""
    q = {jd["name"]: jd["q"] for jd in joints}
    out = {}
    for j in robot.joints:
        if j.mimic is None or _ident(j.name) not in q:
            continue
        src = _ident(j.mimic.joint)
        if src not in q or src == _ident(j.name):
            raise URDFError(f"URDF file {path}: joint {j.name!r} mimics {j.mimic.joint!r}, which is no other "
                            "revolute, continuous or prismatic joint")
        k = 1.0 if j.mimic.multiplier is None else float(j.mimic.multiplier)
        c = 0.0 if j.mimic.offset is None else float(j.mimic.offset)
        if not (math.isfinite(k) and math.isfinite(c)):
            raise URDFError(f"URDF file {path}: joint {j.name!r}: mimic multiplier {k} and offset {c} must be finite")
        out[_ident(j.name)] = (q[src], k, c)
    return out


def _hold_mimic(m: Model, q, source, k: float, c: float, name: str) -> None:
    """The constraint q = k source + c, named mimic_<name>; the guess put on it when it fits."""
    m.constraint(sub(q, add(mul(as_atom(k), source), as_atom(c))), f"mimic_{name}")
    m.mimic[q] = (source, k, c)
    guess = k * m.guess[source] + c
    if m.ranges[q][0] <= guess <= m.ranges[q][1]:
        m.guess[q] = guess


def _add_joints(m: Model, t, joints, carried, frames, mimics) -> None:
    """Per moving joint: the body of what it carries, its TreeJoint and its actuator (with the
    URDF's effort limit as the input's range) or, for a mimic joint, its constraint;
    m.joint_tree the joints in order."""
    tree = []
    for k, jd in enumerate(joints):
        lm, h, I = carried[k]
        base, point = jd["frame"]
        if lm > 0 or np.any(I):
            c = h / lm if lm > 0 else np.zeros(3)
            t.body(jd["link"], base, point).set_inertia(lm, com=c, inertia=I, at=(0.0, 0.0, 0.0))
        tree.append(TreeJoint(jd["name"], (jd["q"],), jd["parent"], jd["joint"], tuple(map(tuple, jd["R"])),
                              tuple(jd["r"]), float(lm), tuple(h), tuple(map(tuple, I)), jd["link"],
                              tuple(frames[k])))
        if jd["name"] in mimics:  # held by its constraint, not driven
            _hold_mimic(m, jd["q"], *mimics[jd["name"]], jd["name"])
            continue
        m.actuator(jd["name"], jd["q"])
        if jd["effort"] is not None:
            m.operate_input(jd["name"], (-jd["effort"], jd["effort"]))
    m.joint_tree = tuple(tree)


def _place(path, m, t, j, frame, carrier, joints, acceleration, velocity) -> None:
    """The child link's frame (relative bases and points) and, for a moving joint, its
    coordinate and its entry of the joint tree."""
    base, point = frame[j.parent]
    k, T = carrier[j.parent]
    O = _origin(j)
    xyz, R0 = O[:3, 3], O[:3, :3]
    if np.any(xyz != 0):
        point = t.point(f"{_ident(j.name)}_origin", point, xyz, base)
    if not np.allclose(R0, np.eye(3), atol=1e-15):
        base = t.fixed_base(f"{_ident(j.name)}_placement", base, R0)
    if j.type == "fixed":
        frame[j.child] = (base, point)
        carrier[j.child] = (k, T @ O)
        return
    axis = np.array([1.0, 0.0, 0.0]) if j.axis is None else np.asarray(j.axis, dtype=float)
    if not (np.all(np.isfinite(axis)) and np.linalg.norm(axis) > 0):
        raise URDFError(f"URDF file {path}: joint {j.name!r} has a zero axis")
    kind = KIND_OF_TYPE[j.type](axis)
    rng, vrng, effort = _limits(path, j, velocity)
    q = m.coordinate(_ident(j.name), guess=0.0 if rng[0] <= 0.0 <= rng[1] else 0.5 * (rng[0] + rng[1]),
                     range=rng, vrange=vrng, arange=(-float(acceleration), float(acceleration)))
    base, point = t.joint(kind, _ident(j.name), base, point, [q])
    P = T @ O
    joints.append(dict(name=_ident(j.name), q=q, parent=k, joint=kind, R=P[:3, :3], r=P[:3, 3], link=_ident(j.child),
                       frame=(base, point), effort=effort))
    frame[j.child] = (base, point)
    carrier[j.child] = (len(joints) - 1, np.eye(4))


def _check_inertia(path, joints, carried) -> None:
    """Each moving joint must move some inertia (its own link or one below): else M is
    singular and the forward dynamics has no answer."""
    moved = [carried[k][0] > 0 or bool(np.any(carried[k][2])) for k in range(len(joints))]
    for k in reversed(range(len(joints))):
        p = joints[k]["parent"]
        if p is not None and moved[k]:
            moved[p] = True
    for k, jd in enumerate(joints):
        if not moved[k]:
            raise URDFError(f"URDF file {path}: joint {jd['name']!r} moves no inertia: link {jd['link']!r} "
                            "and the links below it have no <inertial>")


__all__ = ["URDFError", "from_urdf"]
