"""The coordinate families, joints and forces of the modelling layer, each checked against a
closed form or against the same mechanism written in another family."""
import math

import numpy as np
import pytest
import sympy as sp

from mbforge.examples import load
from mbforge.ir import ZERO, atan2, cos, jacobian, sin
from mbforge.model import Model
from mbforge.reference import Dynamics, Kinematics
from mbforge.model.frames import quat_from_matrix, rotation_np
from mbforge.model.natural import NaturalBody2D, NaturalBody3D, Point, point, point_on_line2d, unit_vector
from mbforge.reference.numeric import Compiled

G = 9.81


# ---- a planar physical pendulum in the three families: theta'' = -(3 g / 2 L) cos(theta) -------
L = 0.8
MASS = 1.5


def _pendulum_natural(theta):
    m = Model("pend2_nat")
    B = point(m, "pn2B", (L * math.cos(theta), L * math.sin(theta)), range=(-1, 1), vrange=(-9, 9), arange=(-99, 99))
    bar = NaturalBody2D(m, "bar", (0.0, 0.0), B, length=L)
    bar.set_inertia(MASS, com=(L / 2, 0.0), inertia=MASS * L * L / 12)
    m.gravity((0.0, -G))
    return m


def _pendulum_refpoint(theta):
    m = Model("pend2_ref")
    x = m.coordinate("pr2x", guess=0.0, range=(-1, 1), vrange=(-9, 9), arange=(-99, 99))
    y = m.coordinate("pr2y", guess=0.0, range=(-1, 1), vrange=(-9, 9), arange=(-99, 99))
    th = m.coordinate("pr2th", guess=theta, range=(-4, 4), vrange=(-9, 9), arange=(-99, 99))
    bar = m.body2d("bar", x, y, th, mass=MASS, com=(L / 2, 0.0), inertia=MASS * L * L / 3, at=(0.0, 0.0))
    m.revolute2d(m.ground(dim=2), (0.0, 0.0), bar, (0.0, 0.0), "pin")
    m.gravity((0.0, -G))
    return m


def _pendulum_relative(theta):
    m = Model("pend2_rel")
    th = m.coordinate("prel2th", guess=theta, range=(-4, 4), vrange=(-9, 9), arange=(-99, 99))
    tree = m.relative()
    b = tree.base("bar_axes", tree.world, (0, 0, 1), th)
    tree.body("bar", b, tree.origin).set_inertia(MASS, com=(L / 2, 0, 0), inertia=(0, 1, MASS * L * L / 12))
    m.gravity((0.0, -G, 0.0))
    return m


@pytest.mark.parametrize("theta", [-1.2, 0.3, 2.0])
def test_planar_pendulum_three_families_closed_form(theta):
    w = 1.7
    expect = -(3 * G / (2 * L)) * math.cos(theta)
    # natural: theta'' = (x y'' - y x'') / L^2
    d = Dynamics(_pendulum_natural(theta).equations())
    q = np.array([L * math.cos(theta), L * math.sin(theta)])
    qd = w * np.array([-q[1], q[0]])
    qdd, _ = d.accelerations(0.0, q, qd)
    assert (q[0] * qdd[1] - q[1] * qdd[0]) / L ** 2 == pytest.approx(expect, rel=1e-12)
    # the natural body's mass matrix is constant: no velocity terms
    assert all(a.is_const for a in d.eqs.M.values())
    d = Dynamics(_pendulum_refpoint(theta).equations())
    qdd, _ = d.accelerations(0.0, np.array([0.0, 0.0, theta]), np.array([0.0, 0.0, w]))
    assert qdd[2] == pytest.approx(expect, rel=1e-12)
    d = Dynamics(_pendulum_relative(theta).equations())
    qdd, _ = d.accelerations(0.0, np.array([theta]), np.array([w]))
    assert qdd[0] == pytest.approx(expect, rel=1e-12)


# ---- a spatial physical pendulum (spherical joint) in the three families -------------------------
R0 = rotation_np([0.3, -0.5, 0.8], 0.7)
W0 = np.array([1.1, -0.4, 2.0])  # body-frame angular velocity at t = 0
INERTIA = (0.30, 0.20, 0.12)
PIVOT = np.array([0.05, 0.02, 0.5])  # body coordinates of the pivot (the body origin is its centre of mass)


def _spatial_euler():
    m = Model("pend3_euler")
    e = quat_from_matrix(R0)
    rG = -R0 @ PIVOT
    r = [m.coordinate(f"pe3_{c}", guess=rG[k], range=(-1, 1), vrange=(-5, 5), arange=(-50, 50))
         for k, c in enumerate("xyz")]
    ee = [m.coordinate(f"pe3_e{k}", guess=e[k], range=(-1.1, 1.1), vrange=(-5, 5), arange=(-50, 50)) for k in range(4)]
    b = m.body3d("b", r, ee, mass=2.0, inertia=INERTIA)
    m.spherical(m.ground(), (0, 0, 0), b, PIVOT, "sph")
    m.gravity((0, 0, -G))
    return m, b


def _spatial_natural():
    m = Model("pend3_nat")
    O = Point("O", (0.0, 0.0, 0.0))
    us = [unit_vector(m, f"pn3_{n}", R0[:, k]) for k, n in enumerate("uvw")]
    b = NaturalBody3D(m, "b", [(O, PIVOT)], [(u, np.eye(3)[k]) for k, u in enumerate(us)])
    b.set_inertia(2.0, com=(0, 0, 0), inertia=INERTIA)
    m.gravity((0, 0, -G))
    return m, b


def _spatial_relative():
    m = Model("pend3_rel")
    yaw = math.atan2(R0[1, 0], R0[0, 0])
    pitch = math.atan2(-R0[2, 0], math.hypot(R0[0, 0], R0[1, 0]))
    roll = math.atan2(R0[2, 1], R0[2, 2])
    a = [m.coordinate(f"prel3_{n}", guess=v, range=(-4, 4), vrange=(-9, 9), arange=(-90, 90))
         for n, v in zip(("yaw", "pitch", "roll"), (yaw, pitch, roll))]
    tr = m.relative()
    bz = tr.base("bz", tr.world, (0, 0, 1), a[0])
    by = tr.base("by", bz, (0, 1, 0), a[1])
    bx = tr.base("bx", by, (1, 0, 0), a[2])
    b = tr.body("b", bx, tr.point("G", tr.origin, list(-PIVOT), bx)).set_inertia(2.0, inertia=INERTIA)
    m.gravity((0, 0, -G))
    return m, b


def _spin_up(d: Dynamics, body):
    """q0 (the guess) and the qd0 that gives body-frame angular velocity W0 and satisfies A qd = 0."""
    eqs = d.eqs
    q0 = np.array([eqs.guess[s] for s in eqs.q])
    W = Compiled(jacobian(body.omega(), eqs.qd).dense(), eqs.q + [eqs.t])(np.concatenate([q0, [0.0]]))
    A = d.jacobian(0.0, q0)
    S = np.vstack([A, W.reshape(3, -1)])
    qd0 = np.linalg.lstsq(S, np.concatenate([np.zeros(A.shape[0]), W0]), rcond=None)[0]
    return q0, qd0


def test_spatial_pendulum_three_families_agree_and_conserve_energy():
    """Euler parameters (mass matrix 4 L^T J' L and velocity term -2 L^T (w' x J' w')), natural
    coordinates (constant mass matrix) and relative coordinates (three angles): the same
    asymmetric top swinging under gravity ends in the same orientation."""
    finals = {}
    for make in (_spatial_euler, _spatial_natural, _spatial_relative):
        m, body = make()
        d = Dynamics(m.equations())
        q0, qd0 = _spin_up(d, body)
        tr = d.forward(2.0, q0, qd0, dt=0.02)
        assert tr.drift < 1e-8, make.__name__
        assert tr.residual < 1e-9 and tr.vresidual < 1e-9
        R = Compiled(body.rotation(), d.eqs.q + [d.eqs.t])(np.concatenate([tr.Q[-1], [2.0]])).reshape(3, 3)
        finals[make.__name__] = R
        assert np.abs(R - R0).max() > 0.1  # it did move
    ref = finals["_spatial_euler"]
    for name, R in finals.items():
        assert np.abs(R - ref).max() < 1e-8, name


def test_euler_parameter_mass_matrix_is_the_thesis_form():
    m, b = _spatial_euler()
    eqs = m.equations()
    q0 = np.array([eqs.guess[s] for s in eqs.q])
    d = Dynamics(eqs)
    M, _, _ = d.mass_matrix(0.0, q0)
    e = q0[3:]
    Lm = np.column_stack([-e[1:], -np.array([[0, -e[3], e[2]], [e[3], 0, -e[1]], [-e[2], e[1], 0]]) + e[0] * np.eye(3)])
    assert np.allclose(M[:3, :3], 2.0 * np.eye(3), atol=1e-15)
    assert np.allclose(M[3:, 3:], 4 * Lm.T @ np.diag(INERTIA) @ Lm, atol=1e-14)
    assert not np.any(M[:3, 3:])
    assert "b_norm" in eqs.phi_names


# ---- joints: degrees of freedom left by each one -----------------------------------------------
@pytest.mark.parametrize("joint,dof", [("spherical", 3), ("cardan", 2), ("revolute", 1), ("cylindrical", 2),
                                       ("prismatic", 1)])
def test_spatial_joints_leave_the_right_freedom(joint, dof):
    m = Model(f"joint_{joint}")
    e = quat_from_matrix(rotation_np((0.2, -0.7, 0.4), 0.4))
    r = [m.coordinate(f"j_{joint}_{c}", guess=0.0, range=(-2, 2)) for c in "xyz"]
    ee = [m.coordinate(f"j_{joint}_e{k}", guess=e[k], range=(-1.1, 1.1)) for k in range(4)]
    b = m.body3d("b", r, ee, mass=1.0, inertia=(1, 2, 3))
    g = m.ground()
    axis = (0.0, 0.0, 1.0)
    if joint == "spherical":
        m.spherical(g, (0.1, 0.2, 0.3), b, (0, 0, 0), "j")
    elif joint == "cardan":
        m.cardan(g, (0.1, 0.2, 0.3), (1, 0, 0), b, (0, 0, 0), (0, 1, 0), "j")
    elif joint == "revolute":
        m.revolute(g, (0.1, 0.2, 0.3), axis, b, (0, 0, 0), axis, "j")
    else:
        getattr(m, joint)(g, (0.1, 0.2, 0.3), axis, b, (0, 0, 0), axis, "j")
    eqs = m.equations()
    kin = Kinematics(eqs)
    q0 = np.array([eqs.guess[s] for s in eqs.q])
    # start from an orientation the joint allows (the position problem then moves the point)
    if joint == "cardan":
        q0[3:] = quat_from_matrix(rotation_np((1, 0, 0), 0.3) @ rotation_np((0, 1, 0), -0.2))
    elif joint != "spherical":
        q0[3:] = quat_from_matrix(rotation_np(axis, 0.0 if joint == "prismatic" else 0.5))
    q = kin.position(0.0, q0)
    J = kin.jacobian(0.0, q)
    assert len(eqs.q) - np.linalg.matrix_rank(J, tol=1e-9) == dof
    assert kin.redundant == []


# ---- natural coordinates: rigid-body equations and a body with an off-axis point -------------------
def test_natural_body_2d_offaxis_point_and_counts():
    m = Model("tri2d")
    A = point(m, "triA", (0.0, 0.0), range=(-2, 2))
    Bp = point(m, "triB", (1.0, 0.0), range=(-2, 2))
    tri = NaturalBody2D(m, "tri", A, Bp, length=1.0)
    apex = tri.point((0.5, 0.6))
    vals = Compiled(apex, m.q + [m.t])(np.array([0.0, 0.0, 0.0, 1.0, 0.0]))  # rotated 90 degrees: B at (0, 1)
    assert np.allclose(vals, [-0.6, 0.5], atol=1e-15)
    assert m.phi_names == ["tri"]


def test_natural_body_3d_rigid_body_equations():
    m = Model("nat3")
    P = point(m, "n3P", (0.0, 0.0, 0.0), range=(-2, 2))
    Qp = point(m, "n3Q", (1.0, 0.0, 0.0), range=(-2, 2))
    u = unit_vector(m, "n3u", (0.0, 0.0, 1.0))
    v = unit_vector(m, "n3v", (0.0, 1.0, 0.0))
    NaturalBody3D(m, "link", [(P, (0, 0, 0)), (Qp, (1, 0, 0))], [(u, (0, 0, 1)), (v, (0, 1, 0))])
    # 2 points + 2 unit vectors = 12 coordinates; 2 norms + length + 3 dot products = 6 equations
    assert len(m.q) == 12
    assert sorted(m.phi_names) == sorted(["n3u_norm", "n3v_norm", "link_len_n3Q", "link_dot_n3Q_n3u",
                                          "link_dot_n3Q_n3v", "link_dot_n3u_n3v"])
    kin = Kinematics(m.equations())
    q0 = np.array([m.guess[s] for s in m.q])
    assert len(m.q) - np.linalg.matrix_rank(kin.jacobian(0.0, q0)) == 6


# ---- forces -----------------------------------------------------------------------------------
def _slider_mass(k, c=0.0):
    m = Model(f"oscillator_{int(c * 10)}")
    x = m.coordinate(f"osc{int(c * 10)}_x", guess=0.1, range=(-0.2, 0.2), vrange=(-2, 2), arange=(-20, 20))
    b = m.body2d("mass", x, 0.0, 0.0, mass=2.0)
    m.spring_damper("spring", between=(m.ground(dim=2), (-1.0, 0.0), b, (0.0, 0.0)), k=k, c=c, rest=1.0)
    return m


def test_spring_mass_oscillates_at_its_natural_frequency():
    k = 50.0
    d = Dynamics(_slider_mass(k).equations())
    assert d.eqs.conservative
    tr = d.forward(2.0, [0.1], [0.0], dt=0.05)
    w = math.sqrt(k / 2.0)
    assert np.allclose(tr.Q[:, 0], 0.1 * np.cos(w * tr.t), atol=1e-9)
    assert tr.drift < 1e-8


def test_damper_dissipates_and_is_not_conservative():
    d = Dynamics(_slider_mass(50.0, c=2.0).equations())
    assert not d.eqs.conservative
    tr = d.forward(1.0, [0.1], [0.0], dt=0.05)
    assert np.all(np.diff(tr.E) <= 1e-12) and tr.E[-1] < 0.5 * tr.E[0]


def test_applied_force_and_torque():
    m = Model("pushed")
    x = m.coordinate("push_x", range=(-1, 1))
    y = m.coordinate("push_y", range=(-1, 1))
    th = m.coordinate("push_th", range=(-1, 1))
    b = m.body2d("b", x, y, th, mass=2.0, inertia=0.5)
    m.force("F", b, (0.0, 0.3), (3.0, 0.0))  # (3, 0) applied 0.3 above the centre: a torque of -0.9
    m.torque("T", b, [0.4])
    d = Dynamics(m.equations())
    qdd, _ = d.accelerations(0.0, np.zeros(3), np.zeros(3))
    assert np.allclose(qdd, [1.5, 0.0, (-0.9 + 0.4) / 0.5], atol=1e-15)


# ---- non-holonomic: a knife edge runs on a circle of radius v / w --------------------------------
def test_knife_edge_velocity_constraint():
    m = Model("knife")
    x = m.coordinate("kn_x", range=(-3, 3), vrange=(-2, 2), arange=(-5, 5))
    y = m.coordinate("kn_y", range=(-3, 3), vrange=(-2, 2), arange=(-5, 5))
    th = m.coordinate("kn_th", range=(-9, 9), vrange=(-2, 2), arange=(-5, 5))
    m.body2d("sled", x, y, th, mass=1.0, inertia=0.1)
    xd, yd, _ = m.qd
    m.velocity_constraint(-sin(th) * xd + cos(th) * yd, "no_slip")
    eqs = m.equations()
    assert eqs.nh_names == ["no_slip"] and eqs.phi == []
    d = Dynamics(eqs)
    v, w = 1.0, 0.5
    tr = d.forward(4.0, [0.0, 0.0, 0.0], [v, 0.0, w], dt=0.05)
    assert tr.vresidual < 1e-9 and tr.drift < 1e-9
    r = np.hypot(tr.Q[:, 0], tr.Q[:, 1] - v / w)
    assert np.allclose(r, v / w, atol=1e-8)


def test_drive_written_in_sympy_is_the_engine_expression():
    m = Model("sympy_drive")
    q = m.coordinate("spd_q", range=(-2, 2))
    t = sp.Symbol("t")
    m.drive(sp.Symbol("spd_q") - sp.sin(2 * t) / 2, "law")
    assert m.phi[0] is q - sin(2 * m.t) * 0.5
    assert m.driving == [True]
    kin = Kinematics(m.equations())
    Q, QD, QDD = kin.motion([0.3])
    assert np.allclose([Q[0, 0], QD[0, 0], QDD[0, 0]], [0.5 * math.sin(0.6), math.cos(0.6), -2 * math.sin(0.6)])


def test_structural_zeros_never_stored():
    eqs = load("slidercrank").equations()
    for S in (eqs.M, eqs.phi_q, eqs.B):
        assert all(a is not ZERO for a in S.values())
    M = eqs.M
    assert all(M[(j, i)] is a for (i, j), a in M.entries.items())  # symmetric, shared atoms


# ---- relative coordinates: the kinematic operators against finite differences -------------------
def _operators_model():
    m = Model("operators")
    a = m.coordinate("op_a", guess=0.3, range=(-4, 4))
    b = m.coordinate("op_b", guess=-0.5, range=(-4, 4))
    c = m.coordinate("op_c", guess=0.2, range=(-1, 1))
    tree = m.relative()
    b1 = tree.base("b1", tree.world, (0, 0, 1), a)
    b2 = tree.base("b2", b1, (1, 0, 0), b)
    P1 = tree.point("P1", tree.origin, (1.0, 0.0, 0.0), b1)
    P2 = tree.point("P2", P1, [0.0, 0.5, c], b2)
    return m, tree, (b1, b2), (P1, P2)


def test_relative_operators_match_finite_differences():
    m, tree, (b1, b2), (P1, P2) = _operators_model()
    inputs = m.q + m.qd + [m.t]
    q0, v = np.array([0.3, -0.5, 0.2]), np.array([0.7, -1.1, 0.4])
    at = lambda f, t: Compiled(f, inputs)(np.concatenate([q0 + v * t, v, [0.0]]))  # noqa: E731
    h = 1e-6

    def fd(f):
        return (at(f, h) - at(f, -h)) / (2 * h)

    # velocity of P2 in the world, in world axes and in b2 axes
    assert np.allclose(at(tree.velocity(P2), 0.0), fd(tree.position(tree.origin, P2, tree.world)), atol=1e-8)
    R2w = np.array(at(tree.rotation(b2, tree.world), 0.0)).reshape(3, 3)
    assert np.allclose(at(tree.velocity(P2, base=b2), 0.0), R2w.T @ fd(tree.position(tree.origin, P2, tree.world)),
                       atol=1e-8)
    # velocity of P2 relative to the frame (P1, b1), in b1 axes: the derivative of its b1 components
    assert np.allclose(at(tree.velocity(P2, P1, b1), 0.0), fd(tree.position(P1, P2, b1)), atol=1e-8)
    # angular velocities: skew(w) = R^T R' in the body's axes; relative ones subtract
    Rd = fd(tree.rotation(b2, tree.world)).reshape(3, 3)
    S = R2w.T @ Rd
    assert np.allclose(at(tree.angular_velocity(b2), 0.0), [S[2, 1], S[0, 2], S[1, 0]], atol=1e-8)
    w21 = at(tree.angular_velocity(b2, b1, tree.world), 0.0)
    assert np.allclose(w21, R2w @ [v[1], 0.0, 0.0], atol=1e-12)
    # rotation(a, b) and rotation(b, a) are transposes
    R12 = np.array(at(tree.rotation(b1, b2), 0.0)).reshape(3, 3)
    R21 = np.array(at(tree.rotation(b2, b1), 0.0)).reshape(3, 3)
    assert np.allclose(R12 @ R21, np.eye(3), atol=1e-15)


def test_orientation_loop():
    m, tree, (b1, _), _ = _operators_model()
    d = m.coordinate("op_d", guess=0.3, range=(-4, 4))
    b3 = tree.base("b3", tree.world, (0, 0, 1), d)
    names = tree.loop_orientation(b1, b3, "same_axes")
    assert names == ["same_axes_rz"]  # only the z rotation can differ
    kin = Kinematics(m.equations())
    q = kin.position(0.0, [0.3, -0.5, 0.2, 0.25], fixed=["op_a", "op_b", "op_c"])
    assert q[3] == pytest.approx(0.3, abs=1e-13)


def test_inertia_given_at_another_body_point():
    m = Model("inertia_at")
    x = m.coordinate("ia_x", range=(-1, 1))
    b = m.body3d("b", [x, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], mass=2.0, com=(0.0, 0.0, 0.5),
                 inertia=np.diag([1.0, 1.0, 0.3]), at=(0.0, 0.0, 0.0))
    assert np.allclose(b.inertia, np.diag([1.0 - 2.0 * 0.25, 1.0 - 2.0 * 0.25, 0.3]))


def test_natural_slider_crank_gives_the_thesis_crank_torque():
    """The slider-crank of slidercrank.py in 2-D natural coordinates (points B, C and a second
    slider point D on the guide): same crank torque as the reference-point model."""
    w = 10 * 2 * math.pi / 60
    m = Model("slidercrank_natural")
    B = point(m, "scn_B", (1.0, 0.0), range=(-1.1, 1.1), vrange=(-2, 2), arange=(-2, 2))
    C = point(m, "scn_C", (3.0, 0.0), range=(0.0, 3.5), vrange=(-2, 2), arange=(-2, 2))
    D = point(m, "scn_D", (4.0, 0.0), range=(0.0, 4.5), vrange=(-2, 2), arange=(-2, 2))
    crank = NaturalBody2D(m, "crank", (0.0, 0.0), B, length=1.0).set_inertia(1.0, com=(0.5, 0.0), inertia=1 / 12)
    NaturalBody2D(m, "rod", B, C, length=2.0).set_inertia(2.0, com=(1.0, 0.0), inertia=2 / 3)
    NaturalBody2D(m, "slider", C, D, length=1.0).set_inertia(1.0, inertia=0.01)
    point_on_line2d(m, C, (0.0, 0.0), (1.0, 0.0), "guide_C")
    point_on_line2d(m, D, (0.0, 0.0), (1.0, 0.0), "guide_D")
    m.drive(B[0] * sin(w * m.t) - B[1] * cos(w * m.t), "crank_angle")
    m.gravity((0.0, -9.81))
    m.actuator("crank_torque", atan2(B[1], B[0]))
    assert crank.rotation()[0][0] is B[0]
    t = np.linspace(0.3, 11.7, 12)
    u_nat = Dynamics(m.equations()).inverse_motion(t)["U"][:, 0]
    u_ref = Dynamics(load("slidercrank").equations()).inverse_motion(t)["U"][:, 0]
    assert np.allclose(u_nat, u_ref, rtol=1e-10, atol=1e-10)


def test_natural_cylindrical_and_universal_pairs():
    """Joints by shared vectors: a body sharing the ground's z vector and with its point on
    the z axis (p = s z) slides and spins (2 freedoms); making its u perpendicular to a
    second body's vector through a shared point is a universal joint."""
    from mbforge.model.natural import Unit, perpendicular, point_on_line

    m = Model("nat_cyl")
    z = Unit("z", (0.0, 0.0, 1.0))
    P = point(m, "nc_P", (0.0, 0.0, 0.3), range=(-1, 1))
    u = unit_vector(m, "nc_u", (1.0, 0.0, 0.0))
    v = unit_vector(m, "nc_v", (0.0, 1.0, 0.0))
    s = m.coordinate("nc_s", guess=0.3, range=(-1, 1))
    NaturalBody3D(m, "slider", [(P, (0, 0, 0))], [(u, (1, 0, 0)), (v, (0, 1, 0)), (z, (0, 0, 1))])
    point_on_line(m, P, (0.0, 0.0, 0.0), z, s, "on_axis")
    kin = Kinematics(m.equations())
    q0 = np.array([m.guess[x] for x in m.q])
    assert len(m.q) - np.linalg.matrix_rank(kin.jacobian(0.0, q0)) == 2
    # a second body hinged at P through a universal joint: its vector w2 stays perpendicular to u
    w2 = unit_vector(m, "nc_w2", (0.0, 0.0, 1.0))
    x2 = unit_vector(m, "nc_x2", (0.0, 1.0, 0.0))
    y2 = unit_vector(m, "nc_y2", (-1.0, 0.0, 0.0))
    NaturalBody3D(m, "fork", [(P, (0, 0, 0))], [(x2, (1, 0, 0)), (y2, (0, 1, 0)), (w2, (0, 0, 1))])
    perpendicular(m, u, x2, "cross")
    kin = Kinematics(m.equations())
    q0 = np.array([m.guess[x] for x in m.q])
    assert len(m.q) - np.linalg.matrix_rank(kin.jacobian(0.0, q0)) == 2 + 2
