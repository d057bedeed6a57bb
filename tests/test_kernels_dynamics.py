"""The `forward-dynamics` and `inverse-dynamics` kernels (and the M, Q, B outputs of
`equations`), against numpy.linalg.solve on the evaluated matrices, against closed forms
for a pendulum, against each other (forward dynamics under the inverse-dynamics forces
reproduces the prescribed accelerations), and compiled from generated C.

The models are built inline: a pendulum and a full-turn slider-crank in Cartesian
coordinates with hand-made M, Q and B (so the tests depend only on the Equations
interface), and a pendulum built from bodies when the model layer provides them."""
import dataclasses
import math

import numpy as np
import pytest

from mbforge.ir import ZERO, Evaluator, Sparse, const, cos, sin
from mbforge.kernels.builders import BUILDERS, KernelError, build_kernel
from mbforge.kernels.cost import weighted_cost
from mbforge.model import Model
from mbforge.linalg import Samples
from mbforge.pipeline import generate

G = 9.81


def pendulum():
    """Point mass m on a massless rod of length 1 (x, y), swung by a motor torque along
    theta = theta0 sin(w t) (the drive the actuator replaces)."""
    m = Model("dpend")
    x = m.coordinate("dp_x", guess=0.0, range=(-1.1, 1.1), vrange=(-4, 4), arange=(-20, 20))
    y = m.coordinate("dp_y", guess=-1.0, range=(-1.1, 1.1), vrange=(-4, 4), arange=(-20, 20))
    m.time_range(0.0, 3.0)
    m.constraint(x ** 2 + y ** 2 - 1.0, "rod")
    th = 0.9 * sin(2.0 * m.t)
    m.drive(x * cos(th) + y * sin(th), "swing")
    eqs = m.equations()
    mass = 1.5
    return dataclasses.replace(
        eqs, M=Sparse((2, 2), {(0, 0): mass, (1, 1): mass}), Q=[ZERO, const(-mass * G)],
        B=Sparse((2, 1), {(0, 0): -y, (1, 0): x}),  # d theta / dq on the unit circle
        actuator_names=["motor"], driving=[False, True])


def slider_crank():
    """Crank point B on a circle of radius r, slider C on the x axis, coupler of length l;
    masses lumped at B and C, gravity on B, a spring-damper on the slider; the crank turns
    a full revolution per second under a motor torque."""
    r, l = 0.5, 1.5
    m = Model("dslider")
    xB = m.coordinate("ds_xB", guess=0.5, range=(-0.6, 0.6), vrange=(-4, 4), arange=(-30, 30))
    yB = m.coordinate("ds_yB", guess=0.0, range=(-0.6, 0.6), vrange=(-4, 4), arange=(-30, 30))
    xC = m.coordinate("ds_xC", guess=2.0, range=(0.8, 2.2), vrange=(-4, 4), arange=(-30, 30))
    m.time_range(0.0, 1.0)
    m.constraint(xB ** 2 + yB ** 2 - r ** 2, "crank")
    m.constraint((xC - xB) ** 2 + yB ** 2 - l ** 2, "coupler")
    w = 2 * math.pi
    m.drive(xB * sin(w * m.t) - yB * cos(w * m.t), "crank_angle")
    eqs = m.equations()
    mB, mC, k, c = 2.0, 1.0, 20.0, 0.5
    Q = [ZERO, const(-mB * G), -k * (xC - 2.0) - c * eqs.qd[2]]
    return dataclasses.replace(
        eqs, M=Sparse((3, 3), {(0, 0): mB, (1, 1): mB, (2, 2): mC}), Q=Q,
        B=Sparse((3, 1), {(0, 0): -yB / r ** 2, (1, 0): xB / r ** 2}), actuator_names=["motor"],
        driving=[False, False, True])


MODELS = {"pendulum": pendulum, "slider_crank": slider_crank}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    eqs = MODELS[request.param]()
    return eqs, built(eqs, "forward-dynamics"), built(eqs, "inverse-dynamics")


def built(eqs, name: str, **options):
    """The builder's own kernel, t among its inputs: these tests read the motion's time
    (build_kernel drops t where no output depends on it: test_kernel_interface)."""
    return BUILDERS[name](eqs, **options)


def numeric(eqs, Q, QD, T):
    """M, Q, B, A_kin (kinematic rows), gamma_kin at the points, by the numpy reference."""
    kin = [i for i, d in enumerate(eqs.driving) if not d]
    A = Sparse((len(kin), len(eqs.q)), {(kin.index(i), j): a for (i, j), a in eqs.phi_q.entries.items() if i in kin})
    atoms = eqs.M.values() + list(eqs.Q) + eqs.B.values() + A.values() + [eqs.gamma[i] for i in kin]
    Y = Evaluator(atoms, eqs.q + eqs.qd + [eqs.t])(np.column_stack([Q, QD, T]))
    out = []
    for y in Y:
        o = 0
        mats = []
        for S in (eqs.M, None, eqs.B, A):
            if S is None:
                mats.append(y[o:o + len(eqs.q)])
                o += len(eqs.q)
                continue
            D = np.zeros(S.shape)
            for (i, j) in S.pattern:
                D[i, j] = y[o]
                o += 1
            mats.append(D)
        mats.append(y[o:])
        out.append(mats)
    return out


def box_points(k, n, seed):
    syms = k.input_symbols
    return Samples.box(syms, dict(zip(syms, [r for p in k.inputs for r in p.ranges])), n=n, seed=seed).points[1:]


def test_ports(model):
    eqs, fwd, inv = model
    assert [p.name for p in fwd.inputs] == ["q", "qd", "t", "u"]
    assert [p.name for p in fwd.outputs] == ["qdd", "lambda"]
    assert [p.name for p in inv.inputs] == ["q", "qd", "qdd", "t"]
    assert [p.name for p in inv.outputs] == ["u", "lambda"]
    # the actuator input has a range: derived from the forces along the motion
    assert fwd.info.derived_ranges == ["u_motor"]
    lo, hi = fwd.inputs[3].ranges[0]
    assert lo < 0 < hi
    for k in (fwd, inv):
        assert k.motion and all(len(v) == len(k.input_symbols) for v in k.motion)
        F = next(iter(k.info.solves.values()))
        assert F.min_pivot > 0.1 and F.min_relative_pivot > 0.05


def test_forward_dynamics_matches_numpy(model):
    eqs, fwd, _ = model
    n = len(eqs.q)
    X = np.vstack([np.array(fwd.motion), box_points(fwd, 150, 1)])
    Y = Evaluator(fwd.output_atoms, fwd.input_symbols)(X)
    parts = numeric(eqs, X[:, :n], X[:, n:2 * n], X[:, 2 * n])
    for s, (M, Qv, B, A, g) in enumerate(parts):
        r = A.shape[0]
        K = np.block([[M, A.T], [A, np.zeros((r, r))]])
        ref = np.linalg.solve(K, np.concatenate([Qv + B @ X[s, 2 * n + 1:], g]))
        cond = np.linalg.cond(K)
        np.testing.assert_allclose(Y[s], ref, rtol=0, atol=1e-14 * cond * max(1.0, np.abs(ref).max()))


def test_inverse_dynamics_matches_numpy(model):
    eqs, _, inv = model
    n = len(eqs.q)
    X = np.vstack([np.array(inv.motion), box_points(inv, 150, 2)])
    Y = Evaluator(inv.output_atoms, inv.input_symbols)(X)
    parts = numeric(eqs, X[:, :n], X[:, n:2 * n], X[:, 3 * n])
    na = len(eqs.actuator_names)
    for s, (M, Qv, B, A, _) in enumerate(parts):
        Gm = np.hstack([A.T, -B])
        ref = np.linalg.solve(Gm, Qv - M @ X[s, 2 * n:3 * n])
        cond = np.linalg.cond(Gm)
        tol = 1e-14 * cond * max(1.0, np.abs(ref).max())
        np.testing.assert_allclose(Y[s, :na], ref[A.shape[0]:], rtol=0, atol=tol)
        np.testing.assert_allclose(Y[s, na:], ref[:A.shape[0]], rtol=0, atol=tol)


def test_forward_dynamics_under_inverse_forces_reproduces_the_motion(model):
    eqs, fwd, inv = model
    n = len(eqs.q)
    Xi = np.array(inv.motion)
    U = Evaluator(inv.output_atoms, inv.input_symbols)(Xi)
    na = len(eqs.actuator_names)
    Xf = np.column_stack([Xi[:, :2 * n], Xi[:, 3 * n], U[:, :na]])
    Yf = Evaluator(fwd.output_atoms, fwd.input_symbols)(Xf)
    np.testing.assert_allclose(Yf[:, :n], Xi[:, 2 * n:3 * n], atol=1e-9)  # qdd
    np.testing.assert_allclose(Yf[:, n:], U[:, na:], atol=1e-8)  # the same reactions
    # and the motion vectors of forward dynamics carry exactly those forces
    np.testing.assert_allclose(np.array(fwd.motion), Xf, atol=1e-9)


def test_pendulum_torque_has_the_closed_form():
    eqs = pendulum()
    inv = built(eqs, "inverse-dynamics")
    X = np.array(inv.motion)
    u = Evaluator(inv.outputs[0].atoms, inv.input_symbols)(X)[:, 0]
    t = X[:, -1]
    th = 0.9 * np.sin(2 * t)
    thdd = -3.6 * np.sin(2 * t)
    np.testing.assert_allclose(u, 1.5 * thdd + 1.5 * G * np.sin(th), atol=1e-9)


def test_symmetric_and_lu_kkt_agree_and_the_cheaper_is_kept():
    eqs = slider_crank()
    a = build_kernel(eqs, "forward-dynamics", method="ldlt")
    b = build_kernel(eqs, "forward-dynamics", method="lu")
    c = build_kernel(eqs, "forward-dynamics")
    assert a.info.solves["KKT"].kind == "LDL^T" and b.info.solves["KKT"].kind == "LU"
    X = box_points(a, 100, 5)
    ya = Evaluator(a.output_atoms, a.input_symbols)(X)
    yb = Evaluator(b.output_atoms, b.input_symbols)(X)
    np.testing.assert_allclose(ya, yb, rtol=1e-9, atol=1e-9)
    costs = sorted([weighted_cost(a.output_atoms), weighted_cost(b.output_atoms)])
    assert weighted_cost(c.output_atoms) == costs[0]
    with pytest.raises(KernelError, match="method"):
        build_kernel(eqs, "forward-dynamics", method="qr")


@pytest.mark.host
@pytest.mark.parametrize("kernel", ["forward-dynamics", "inverse-dynamics", "equations"])
def test_generated_c_matches_the_reference(kernel, tmp_path):
    from mbforge.verify.hostlib import load_kernel

    eqs = slider_crank()
    # over the declared box: without the domain, the kernel's envelope is that box
    k = dataclasses.replace(build_kernel(eqs, kernel), domain=None)
    plan = generate(k, "c-double")
    hk = load_kernel(plan.write(tmp_path / kernel))
    X = np.vstack([np.array(k.motion), box_points(k, 200, 3)])
    Y, status = hk(X)
    assert not status.any()
    R = Evaluator(k.output_atoms, k.input_symbols)(X)
    np.testing.assert_allclose(Y, R, rtol=1e-11, atol=1e-11)


def test_equations_kernel_exports_mass_matrix_forces_and_directions():
    eqs = slider_crank()
    k = build_kernel(eqs, "equations")
    names = [p.name for p in k.outputs]
    assert names == ["Phi", "Phi_q", "Phi_t", "gamma", "M", "Q", "B"]
    M = k.outputs[4]
    assert M.pattern == eqs.M.pattern and M.shape == [3, 3]
    assert all(a is b for a, b in zip(k.outputs[5].atoms, eqs.Q))
    assert [a for a in k.outputs[6].atoms] and k.outputs[6].pattern == eqs.B.pattern
    # a model without inertia keeps the four constraint outputs only
    bare = Model("dbare")
    x = bare.coordinate("db_x")
    bare.drive(x - bare.t, "go")
    assert [p.name for p in build_kernel(bare.equations(), "equations").outputs] == ["Phi", "Phi_q", "Phi_t", "gamma"]


def test_errors_name_what_is_missing():
    bare = Model("dnomass")
    x = bare.coordinate("dn_x")
    bare.drive(x - bare.t, "go")
    for kernel in ("forward-dynamics", "inverse-dynamics"):
        with pytest.raises(KernelError, match=f"dnomass: the {kernel} kernel needs the mass matrix"):
            build_kernel(bare.equations(), kernel)
    # two actuators for one driving constraint: not square
    eqs = pendulum()
    two = dataclasses.replace(eqs, B=Sparse((2, 2), {(0, 0): eqs.q[1], (1, 1): eqs.q[0], (0, 1): 1.0}),
                              actuator_names=["m1", "m2"])
    with pytest.raises(KernelError, match=r"1 multipliers \(rod\) and 2 actuators \(m1, m2\) for 2 coordinates"):
        build_kernel(two, "inverse-dynamics")


def test_pendulum_from_bodies_against_the_model_reference():
    m = Model("bodpend")
    x = m.coordinate("bpd_x", guess=0.0, range=(-1.2, 1.2), vrange=(-5, 5), arange=(-50, 50))
    y = m.coordinate("bpd_y", guess=-1.0, range=(-1.2, 1.2), vrange=(-5, 5), arange=(-50, 50))
    th = m.coordinate("bpd_th", guess=0.0, range=(-2, 2), vrange=(-5, 5), arange=(-50, 50))
    b = m.body2d("bar", x, y, th, mass=2.0, inertia=0.1)
    m.revolute2d(m.ground(dim=2), (0, 0), b, (0, 1.0), "pin")
    m.gravity((0, -G))
    m.actuator("motor", th)
    m.drive_coordinate(th, 0.8 * sin(2 * m.t), "swing")
    eqs = m.equations()
    inv = built(eqs, "inverse-dynamics")
    fwd = built(eqs, "forward-dynamics")
    X = np.array(inv.motion)
    Y = Evaluator(inv.output_atoms, inv.input_symbols)(X)
    t = X[:, -1]
    # a bar of mass 2 hanging from a pin 1 below its centre: I_pin = 0.1 + 2
    thv, thdd = 0.8 * np.sin(2 * t), -3.2 * np.sin(2 * t)
    np.testing.assert_allclose(Y[:, 0], 2.1 * thdd + 2.0 * G * np.sin(thv), atol=1e-9)
    from mbforge.reference import Dynamics

    D = Dynamics(eqs)
    n = len(eqs.q)
    for xrow, yrow in zip(X[::8], Y[::8]):
        u, _ = D.inverse(xrow[-1], xrow[:n], xrow[n:2 * n], xrow[2 * n:3 * n])
        np.testing.assert_allclose(yrow[:1], u, atol=1e-9)
    Yf = Evaluator(fwd.output_atoms, fwd.input_symbols)(np.array(fwd.motion))
    np.testing.assert_allclose(Yf[:, :3], X[:, 6:9], atol=1e-9)


def test_non_holonomic_rows_join_the_solves():
    """A knife edge (x, y, heading th) whose velocity must point along the heading: the
    kinematics kernel solves [Phi_q; C] (two drivers and the velocity constraint), the
    forward-dynamics kernel keeps C as a constraint row."""
    m = Model("dskate")
    x = m.coordinate("dk_x", guess=0.0, range=(-1, 4), vrange=(-3, 3), arange=(-3, 3))
    y = m.coordinate("dk_y", guess=0.0, range=(-2, 2), vrange=(-3, 3), arange=(-3, 3))
    th = m.coordinate("dk_th", guess=0.0, range=(-1, 1), vrange=(-3, 3), arange=(-3, 3))
    m.time_range(0.0, 3.0)
    xd, yd = m.qd[0], m.qd[1]
    m.velocity_constraint(-sin(th) * xd + cos(th) * yd, "blade")
    m.drive(th - 0.5 * sin(m.t), "steer")
    m.drive(x - m.t, "advance")
    eqs = m.equations()
    kin = build_kernel(eqs, "kinematics")
    X = np.array(kin.motion)
    Y = Evaluator(kin.output_atoms, kin.input_symbols)(X)
    t = X[:, 3]
    thv, thd = 0.5 * np.sin(t), 0.5 * np.cos(t)
    np.testing.assert_allclose(Y[:, 0:3], np.column_stack([np.ones_like(t), np.tan(thv), thd]), atol=1e-12)
    # yd = tan(th) xd: ydd = thd / cos^2(th) (xdd = 0)
    np.testing.assert_allclose(Y[:, 4], thd / np.cos(thv) ** 2, atol=1e-12)
    dyn = dataclasses.replace(eqs, M=Sparse((3, 3), {(0, 0): 2.0, (1, 1): 2.0, (2, 2): 0.3}),
                              Q=[const(0.4), ZERO, -0.2 * eqs.qd[2]], driving=[True, True])
    fwd = build_kernel(dyn, "forward-dynamics")
    assert fwd.info.multipliers == ["lambda_blade"]
    P = box_points(fwd, 60, 9)
    Yf = Evaluator(fwd.output_atoms, fwd.input_symbols)(P)
    for p, yrow in zip(P, Yf):
        q, qd = p[:3], p[3:6]
        C = np.array([[-np.sin(q[2]), np.cos(q[2]), 0.0]])
        g = -(-np.cos(q[2]) * qd[2] * qd[0] - np.sin(q[2]) * qd[2] * qd[1])
        K = np.block([[np.diag([2.0, 2.0, 0.3]), C.T], [C, np.zeros((1, 1))]])
        ref = np.linalg.solve(K, [0.4, 0.0, -0.2 * qd[2], g])
        np.testing.assert_allclose(yrow, ref, atol=1e-12)
