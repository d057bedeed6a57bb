"""URDF robots through mbforge's recursive kernels against Pinocchio, the reference: UR5,
Panda (seven revolute joints and two prismatic fingers on a branch) and Solo12 (on a
floating base: from_urdf(floating=True) against Pinocchio's JointModelFreeFlyer root, unit
quaternions drawn at random) of example-robot-data, and tests/fixtures/urdf/branchy.urdf (oblique prismatic and continuous
axes, turned placements and inertials, a merged fixed link) read by both. At 24 random
states within the joint limits, the compiled c-double kernels give Pinocchio's torques
(rnea), accelerations (aba) and mass matrix (crba) to 1e-10 relative; the c-float32
kernels stay within the manifest's proved error bound (rnea, crba), and, where the
analysis proves none (aba divides by articulated inertias), within 1e-5 of the
acceleration scale. frame-kinematics gives Pinocchio's frame placements and
LOCAL_WORLD_ALIGNED frame Jacobians (c-double, 1e-10). Point forces and torques on
floating_gripper's links and base, and contact forces on Solo12's feet, give Pinocchio's
rnea / aba with fext (1e-10). Pinocchio reads the same file: nothing of mbforge's is the
reference."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import numpy as np
import pytest

from mbforge.verify import hostlib
from mbforge.ir import Evaluator
from mbforge.kernels.recursive import aba_kernel, frame_kinematics_kernel, mass_matrix_crba_kernel, rnea_kernel
from mbforge.kernels.common import KernelError
from mbforge.manifest import Manifest
from mbforge.model import from_urdf
from mbforge.pipeline import generate

from helpers import FIXTURES

SAMPLES = 24
ROBOTS = {"ur5": "ur_description/urdf/ur5_robot.urdf", "panda": "panda_description/urdf/panda.urdf",
          "solo12": "solo_description/robots/solo12.urdf"}
FLOATING = {"solo12"}  # read with floating=True, and by Pinocchio with a JointModelFreeFlyer root


def _urdf(name: str) -> Path:
    if name not in ROBOTS:
        return FIXTURES / "urdf" / f"{name}.urdf"
    try:
        return Path(distribution("example-robot-data").locate_file(
            f"cmeel.prefix/share/example-robot-data/robots/{ROBOTS[name]}"))
    except PackageNotFoundError:  # the needs mark skips (or fails under CI) before this
        pytest.fail("example-robot-data is not installed")


def _model(robot: str):
    return from_urdf(_urdf(robot), floating=robot in FLOATING)


def _states(model, rng):
    """q, qd, qdd, u inside the declared ranges (a margin keeps float32 rounding inside); a
    floating base's first (its quaternion drawn on the unit sphere)."""
    def draw(syms):
        lo, hi = np.array([model.ranges[s] for s in syms]).T
        mid, half = (lo + hi) / 2, (hi - lo) / 2 * 0.98
        return rng.uniform(mid - half, mid + half, (SAMPLES, len(syms)))

    u = np.array([model.envelope.inputs[a.name] for a in model.actuators]).T
    U = rng.uniform(0.98 * u[0], 0.98 * u[1], (SAMPLES, len(model.actuators)))
    b = model.floating_base
    if b is None:
        return draw(model.q), draw(model.qd), draw(model.qdd), U
    quat = rng.normal(size=(SAMPLES, 4))
    base = np.hstack([draw(b.q[:3]), quat / np.linalg.norm(quat, axis=1, keepdims=True)])  # unit, as Pinocchio
    return (np.hstack([base, draw(model.q)]), np.hstack([draw(b.v), draw(model.qd)]),
            np.hstack([draw(b.a), draw(model.qdd)]), U)


def _pinocchio(path: Path, model):
    """(pinocchio model, data, configuration(q), iv): Pinocchio's reading of the file (with
    a JointModelFreeFlyer root for a floating base), its configuration at mbforge's q
    (joints matched by name; an unbounded joint's q as cos, sin; a floating base's 7
    numbers as they are) and the tangent index of each of mbforge's velocities."""
    import pinocchio as pin

    floating = model.floating_base is not None
    pm = pin.buildModelFromUrdf(str(path), *([pin.JointModelFreeFlyer()] if floating else []))
    names = [q.value.name for q in model.q]
    joints = {pm.names[k]: pm.joints[k] for k in range(1 + floating, pm.njoints)}
    nb = 6 if floating else 0
    assert sorted(joints) == sorted(names) and pm.nv == len(names) + nb
    assert not floating or pm.joints[1].shortname() == "JointModelFreeFlyer" and pm.joints[1].idx_q == 0

    def configuration(q):
        x = np.zeros(pm.nq)
        x[:nb + floating] = q[:nb + floating]
        for n, v in zip(names, q[nb + floating:]):
            j = joints[n]
            x[j.idx_q:j.idx_q + j.nq] = (np.cos(v), np.sin(v)) if j.nq == 2 else v
        return x

    return pm, pm.createData(), configuration, np.array(list(range(nb)) + [joints[n].idx_v for n in names])


def _pin_reference(path: Path, model, Q, QD, QDD, U):
    """Pinocchio's tau, qdd and M at each state, in mbforge's coordinate order."""
    import pinocchio as pin

    pm, data, configuration, iv = _pinocchio(path, model)

    def tangent(v):
        x = np.zeros(pm.nv)
        x[iv] = v
        return x

    tau, qdd, M = [], [], []
    for q, qd, a, u in zip(Q, QD, QDD, U):
        x, xd = configuration(q), tangent(qd)
        tau.append(pin.rnea(pm, data, x, xd, tangent(a))[iv])
        qdd.append(pin.aba(pm, data, x, xd, tangent(np.r_[np.zeros(len(iv) - len(u)), u]))[iv])  # base free
        Mp = pin.crba(pm, data, x)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        M.append(Mp[np.ix_(iv, iv)])
    return np.array(tau), np.array(qdd), np.array(M)


def _run(kernel, target: str, out: Path, X):
    """(outputs as float64, manifest) of the compiled kernel over the rows of X."""
    generate(kernel, target).write(out)
    m = Manifest.load(out)
    Y, status = hostlib.load_kernel(out)(hostlib.to_raw(m, X, "inputs"))
    assert (status == 0).all(), f"{kernel.name} {target}: status {sorted(set(status.tolist()))}"
    return hostlib.from_raw(m, Y, "outputs"), m


def _matrix(kernel, values, n, rows=None, port=0):
    """The dense matrices of a sparse output port (one per row of values)."""
    M = np.zeros((len(values), rows or n, n))
    i, j = np.array(kernel.outputs[port].pattern).T
    M[:, i, j] = values
    return M


@pytest.mark.host
@pytest.mark.needs(modules=("pinocchio",), dists=("example-robot-data",))
@pytest.mark.parametrize("robot", ["ur5", "panda", "branchy", "solo12"])
def test_recursive_kernels_equal_pinocchio(robot, tmp_path):
    path = _urdf(robot)
    model = _model(robot)
    n = len(model.q) + 6 * (model.floating_base is not None)  # velocities
    Q, QD, QDD, U = _states(model, np.random.default_rng(28))
    tau_ref, qdd_ref, M_ref = _pin_reference(path, model, Q, QD, QDD, U)
    t = np.full((SAMPLES, 1), 0.5)
    cases = [(rnea_kernel(model), np.hstack([Q, QD, QDD, t]), tau_ref, None),
             (aba_kernel(model), np.hstack([Q, QD, t, U]), qdd_ref, 1e-5),
             (mass_matrix_crba_kernel(model), Q, M_ref, None)]
    for kernel, X, ref, unproved in cases:
        for target in ("c-double", "c-float32"):
            Y, m = _run(kernel, target, tmp_path / f"{kernel.name}-{target}", X)
            want = ref  # M: the entries outside the pattern are compared as zeros
            if kernel.name == "mass-matrix-crba":
                Y = _matrix(kernel, Y, n)
            scale = np.abs(want).max(axis=tuple(range(1, want.ndim)), keepdims=True)
            err = np.abs(Y - want)
            if target == "c-double":
                assert (err <= 1e-10 * scale).all(), f"{robot} {kernel.name}: {(err / scale).max():.3g} relative"
                continue
            bound = np.array([np.inf if b is None else b for b in m.outputs[0].error_bound])
            if unproved is not None:
                # ABA: the bodies' floors (analysis.bodyfloors) give loose bounds on some robots,
                # none on others; where given they hold, and the measured margin holds everywhere
                assert (err <= bound[None] + 1e-10 * scale).all(), f"{robot} aba float32 beyond its bound"
                assert (err <= unproved * scale).all(), f"{robot} aba float32: {(err / scale).max():.3g}"
                continue
            bound = _matrix(kernel, bound[None], n)[0] if want.ndim == 3 else bound
            assert np.isfinite(bound[want[0] != 0]).all()
            assert (err <= bound + 1e-10 * scale).all(), \
                f"{robot} {kernel.name} float32: {np.nanmax(err / np.where(bound > 0, bound, np.inf)):.3g} of the bound"


@pytest.mark.host
@pytest.mark.needs(modules=("pinocchio",), dists=("example-robot-data",))
@pytest.mark.parametrize("robot, frames", [("ur5", ("tool0",)), ("panda", ("panda_hand_tcp", "panda_leftfinger")),
                                           ("branchy", ("tool", "camera")), ("solo12", ("base_link", "HR_FOOT"))])
def test_frame_placements_and_jacobians_equal_pinocchio(robot, frames, tmp_path):
    import pinocchio as pin

    path = _urdf(robot)
    model = _model(robot)
    n = len(model.q) + 6 * (model.floating_base is not None)  # velocities
    Q = _states(model, np.random.default_rng(5))[0]
    pm, data, configuration, iv = _pinocchio(path, model)
    for frame in frames:
        k = frame_kinematics_kernel(model, frame)
        Y, _ = _run(k, "c-double", tmp_path / frame, Q)
        fid = pm.getFrameId(frame)
        for q, y in zip(Q, Y):
            x = configuration(q)
            pin.forwardKinematics(pm, data, x)
            pin.updateFramePlacements(pm, data)
            J = pin.computeFrameJacobian(pm, data, x, fid, pin.LOCAL_WORLD_ALIGNED)[:, iv]
            P = data.oMf[fid]
            got = [y[:3], y[3:12].reshape(3, 3), _matrix(k, y[12:][None], n, rows=6, port=2)[0]]
            for g, want in zip(got, (P.translation, P.rotation, J)):
                assert np.abs(g - want).max() <= 1e-10 * max(1.0, np.abs(want).max()), f"{robot} {frame}"


@pytest.mark.host
@pytest.mark.needs(modules=("pinocchio",))
def test_mimic_joints_as_constraints_equal_pinocchio(tmp_path):
    """from_urdf(mimic=True) on tests/fixtures/urdf/gripper.urdf (a finger and a slider
    following the other finger, multipliers -1 and 0.03, offset 0.01): the compiled c-double
    forward-dynamics (the constraint formulation) against Pinocchio's reading with mimic
    joints (its reduced mass matrix and bias forces: its ABA takes no mimic joint), at
    random states on the constraints, to 1e-10 relative."""
    import pinocchio as pin

    from mbforge.kernels.builders import build_kernel

    path = _urdf("gripper")
    model = from_urdf(path, mimic=True)
    kernel = build_kernel(model.equations(), "forward-dynamics")
    pm = pin.buildModelFromUrdf(str(path), mimic=True)
    data = pm.createData()
    free = ["wrist", "left_knuckle"]  # mbforge's first two coordinates, Pinocchio's q
    assert [q.value.name for q in model.q] == free + ["right_knuckle", "slide"] and pm.nv == 2
    assert [a.name for a in model.actuators] == free and model.phi_names == ["mimic_right_knuckle", "mimic_slide"]
    assert [pm.joints[pm.getJointId(n)].idx_v for n in free] == [0, 1]
    G = np.array([[1, 0], [0, 1], [0, -1], [0, 0.03]])  # d(all coordinates) / d(free ones)
    rng = np.random.default_rng(28)
    lo, hi = np.array([model.ranges[q] for q in model.q[:2]]).T
    Q = rng.uniform(lo, hi, (SAMPLES, 2))
    V = rng.uniform(-1.5, 1.5, (SAMPLES, 2))
    U = rng.uniform(-1.0, 1.0, (SAMPLES, 2))
    X = np.hstack([Q @ G.T + [0, 0, 0, 0.01], V @ G.T, U])
    Y, _ = _run(kernel, "c-double", tmp_path / "fd", X)
    for x, y, q, v, u in zip(X, Y, Q, V, U):
        M = pin.crba(pm, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        want = G @ np.linalg.solve(M, u - pin.rnea(pm, data, q, v, np.zeros(2)))
        assert np.abs(y[:4] - want).max() <= 1e-10 * np.abs(want).max(), (y[:4], want)


@pytest.mark.host
@pytest.mark.needs(modules=("pinocchio",))
def test_mimic_joints_in_rnea_and_crba_equal_pinocchio(tmp_path):
    """The gripper's mimic joints substituted into RNEA and CRBA (q = k q_source + c, the
    forces reduced by virtual power): over the two independent joints, c-double equal to
    Pinocchio's own RNEA and CRBA of its mimic model to 1e-12 relative, c-float32 and c-fixed
    within their proved bounds; ABA refuses them in one line."""
    import pinocchio as pin

    path = _urdf("gripper")
    model = from_urdf(path, mimic=True)
    pm = pin.buildModelFromUrdf(str(path), mimic=True)
    data = pm.createData()
    rng = np.random.default_rng(30)
    lo, hi = np.array([model.ranges[q] for q in model.q[:2]]).T
    Q = rng.uniform(lo, hi, (SAMPLES, 2))
    V, A = rng.uniform(-1.5, 1.5, (SAMPLES, 2)), rng.uniform(-5.0, 5.0, (SAMPLES, 2))
    tau = np.array([pin.rnea(pm, data, q, v, a) for q, v, a in zip(Q, V, A)])
    M = np.array([pin.crba(pm, data, q) for q in Q])
    M = np.triu(M) + np.transpose(np.triu(M, 1), (0, 2, 1))
    cases = [(rnea_kernel(model), np.hstack([Q, V, A, np.full((SAMPLES, 1), 0.5)]), tau),
             (mass_matrix_crba_kernel(model), Q, M)]
    for kernel, X, ref in cases:
        assert [s.value.name for s in kernel.inputs[0].symbols] == ["wrist", "left_knuckle"]
        for target in ("c-double", "c-float32", "c-fixed"):
            Y, m = _run(kernel, target, tmp_path / f"{kernel.name}-{target}", X)
            bound = np.array([np.inf if b is None else b for b in m.outputs[0].error_bound]) \
                if target != "c-double" else np.zeros(Y.shape[1])
            if ref.ndim == 3:
                Y, bound = _matrix(kernel, Y, 2), _matrix(kernel, bound[None], 2)[0]
            scale = np.abs(ref).max()
            if target != "c-double":
                assert np.isfinite(bound).all(), (kernel.name, target)
            assert (np.abs(Y - ref) <= bound + 1e-12 * scale).all(), (kernel.name, target)
    with pytest.raises(KernelError, match=r"^gripper: mimic joints couple the tree's branches: the articulated-body"):
        aba_kernel(model)


@pytest.mark.host
@pytest.mark.needs(modules=("pinocchio",))
def test_mimic_joints_on_a_floating_base_equal_pinocchio(tmp_path):
    """from_urdf(floating=True, mimic=True): the base's 7 + 6 numbers lead, the mimic joints
    substituted behind them; RNEA's base wrench and joint forces and CRBA's matrix over the
    base and the independent joints equal Pinocchio's free-flyer model with mimic joints
    (c-double 1e-12 relative, c-fixed within its proved bounds); ABA refuses in one line."""
    import pinocchio as pin

    path = _urdf("floating_gripper")
    model = from_urdf(path, floating=True, mimic=True)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer(), mimic=True)
    data = pm.createData()
    assert (pm.nq, pm.nv) == (9, 8)
    rng = np.random.default_rng(31)
    quat = rng.normal(size=(SAMPLES, 4))
    lo, hi = np.array([model.ranges[q] for q in model.q[:2]]).T
    Q = np.hstack([rng.uniform(-1.0, 1.0, (SAMPLES, 3)), quat / np.linalg.norm(quat, axis=1, keepdims=True),
                   rng.uniform(lo, hi, (SAMPLES, 2))])
    V, A = rng.uniform(-1.5, 1.5, (SAMPLES, 8)), rng.uniform(-5.0, 5.0, (SAMPLES, 8))
    tau = np.array([pin.rnea(pm, data, q, v, a) for q, v, a in zip(Q, V, A)])
    M = np.array([pin.crba(pm, data, q) for q in Q])
    M = np.triu(M) + np.transpose(np.triu(M, 1), (0, 2, 1))
    kr, kc = rnea_kernel(model), mass_matrix_crba_kernel(model)
    assert kr.outputs[0].labels[5:] == ["tau_base_nz", "tau_wrist", "tau_left_knuckle"]
    for kernel, X, ref in ((kr, np.hstack([Q, V, A, np.full((SAMPLES, 1), 0.5)]), tau), (kc, Q, M)):
        for target in ("c-double", "c-fixed"):
            Y, m = _run(kernel, target, tmp_path / f"{kernel.name}-{target}", X)
            bound = np.array([np.inf if b is None else b for b in m.outputs[0].error_bound]) \
                if target == "c-fixed" else np.zeros(Y.shape[1])
            if ref.ndim == 3:
                Y, bound = _matrix(kernel, Y, 8), _matrix(kernel, bound[None], 8)[0]
            assert np.isfinite(bound).all(), (kernel.name, target)
            assert (np.abs(Y - ref) <= bound + 1e-12 * np.abs(ref).max()).all(), (kernel.name, target)
    with pytest.raises(KernelError, match=r"^floating_gripper: mimic joints couple the tree's branches"):
        aba_kernel(model)
    # the slider's frame (moved by a mimic joint) and its Jacobian over the base and the independent joints
    kf = frame_kinematics_kernel(model, "slider")
    fid = pm.getFrameId("slider")
    for x in Q[:6]:
        pin.framesForwardKinematics(pm, data, x)
        Jp = pin.computeFrameJacobian(pm, data, x, fid, pin.LOCAL_WORLD_ALIGNED)
        y = Evaluator(kf.output_atoms, kf.input_symbols)(x[None])[0]
        assert np.allclose(y[:12], np.r_[data.oMf[fid].translation, data.oMf[fid].rotation.ravel()], atol=1e-12)
        J = np.zeros((6, 8))
        J[tuple(np.array(kf.outputs[2].pattern).T)] = y[12:]
        assert np.abs(J - Jp).max() <= 1e-12 * np.abs(Jp).max(), (J, Jp)


@pytest.mark.host
@pytest.mark.needs(modules=("pinocchio",), dists=("example-robot-data",))
def test_floating_base_c_fixed_stays_within_its_bounds(tmp_path):
    """Solo12 on its floating base: the c-fixed rnea and crba (ABA is refused in c-fixed)
    against Pinocchio, each output within the manifest's proved error bound."""
    path = _urdf("solo12")
    model = _model("solo12")
    n = len(model.q) + 6
    Q, QD, QDD, U = _states(model, np.random.default_rng(12))
    tau_ref, _, M_ref = _pin_reference(path, model, Q, QD, QDD, U)
    X = np.hstack([Q, QD, QDD, np.full((SAMPLES, 1), 0.5)])
    for kernel, X, ref in ((rnea_kernel(model), X, tau_ref), (mass_matrix_crba_kernel(model), Q, M_ref)):
        Y, m = _run(kernel, "c-fixed", tmp_path / kernel.name, X)
        bound = np.array([np.inf if b is None else b for b in m.outputs[0].error_bound])
        if ref.ndim == 3:
            Y, bound = _matrix(kernel, Y, n), _matrix(kernel, bound[None], n)[0]
        assert np.isfinite(bound).all()
        assert (np.abs(Y - ref) <= bound + 1e-12 * np.abs(ref).max()).all(), kernel.name


def _with_forces(model, timed=True):
    """The force elements of the forces tests on floating_gripper: a point force on link
    `left` (depending on the wrist's rate), a torque on `palm` (depending on t when timed,
    else constant: helpers.models.check_recursive's Q takes no t), a point
    force on the root link (a body at the tree's root frame: on a floating base, the base)
    and a spring-damper on the left knuckle (a joint row only). World components."""
    from mbforge.ir import as_atom, mul

    t = model.relative_trees
    wrist, knuckle = model.q[0], model.q[1]
    body = {b.name: b for b in model.bodies}
    model.force("push", body["left"], (0.02, -0.01, 0.05), (1.5, mul(as_atom(-0.7), model.qd[0]), 0.4))
    model.torque("twist", body["palm"], (0.2, mul(model.t, as_atom(0.6)) if timed else 0.3, -0.1))
    model.force("shove", t.body("trunk", t.world, t.origin), (0.1, 0.03, -0.02), (-0.8, 0.3, 1.1))
    model.spring_damper("elastic", knuckle, k=3.0, c=0.4, rest=0.2)
    assert wrist.value.name == "wrist" and knuckle.value.name == "left_knuckle"
    return model


def _pin_fext(pm, data, x, elements, sign=1.0):
    """Point forces and torques (joint, local point, F, n; world components) as Pinocchio's
    fext: per joint, in its local frame about its origin (F and n turned from world axes by
    the joint's rotation)."""
    import pinocchio as pin

    pin.forwardKinematics(pm, data, x)
    fext = pin.StdVec_Force()
    for _ in range(pm.njoints):
        fext.append(pin.Force.Zero())
    for joint, p, F, n in elements:
        jid = pm.getJointId(joint)
        R = data.oMi[jid].rotation
        f = sign * R.T @ np.array(F, dtype=float)
        fext[jid] = fext[jid] + pin.Force(f, np.cross(p, f) + sign * R.T @ np.array(n, dtype=float))
    return fext


def _fext_errors(path, model, elements, spring, tmp_path) -> dict:
    """{(kernel, sign): worst relative error} of the compiled c-double rnea and aba against
    Pinocchio's rnea / aba with fext (elements(q, qd, t): _pin_fext's list; spring(q, qd):
    the scalar elements' generalized forces, on the joint rows) at 24 random states, the
    forces as they are (sign 1) and flipped in the reference (sign -1)."""
    import pinocchio as pin

    kr, ka = rnea_kernel(model), aba_kernel(model)  # no longer refused on a floating base
    Q, QD, QDD, U = _states(model, np.random.default_rng(28))
    t = 0.5
    pm, data, configuration, iv = _pinocchio(path, model)

    def tangent(v):
        x = np.zeros(pm.nv)
        x[iv] = v
        return x

    T = np.full((SAMPLES, 1), t)
    worst = {}
    for sign in (1.0, -1.0):
        tau, qdd = [], []
        for q, qd, a, u in zip(Q, QD, QDD, U):
            x, xd, Qs = configuration(q), tangent(qd), spring(q, qd)
            tau.append(pin.rnea(pm, data, x, xd, tangent(a), _pin_fext(pm, data, x, elements(q, qd, t), sign))[iv]
                       - Qs)
            tq = tangent(np.r_[np.zeros(6), u] + Qs)
            qdd.append(pin.aba(pm, data, x, xd, tq, _pin_fext(pm, data, x, elements(q, qd, t), sign))[iv])
        for kernel, X, ref in ((kr, np.hstack([Q, QD, QDD, T]), np.array(tau)),
                               (ka, np.hstack([Q, QD, T, U]), np.array(qdd))):
            Y, _ = _run(kernel, "c-double", tmp_path / f"{kernel.name}-{sign}", X)
            scale = np.abs(ref).max(axis=1, keepdims=True)
            worst[kernel.name, sign] = (np.abs(Y - ref) / scale).max()
    return worst


def _agree_and_flipped_differ(worst: dict) -> None:
    assert worst["inverse-dynamics-rnea", 1.0] <= 1e-10 and worst["forward-dynamics-aba", 1.0] <= 1e-10, worst
    assert worst["inverse-dynamics-rnea", -1.0] > 1e-3 and worst["forward-dynamics-aba", -1.0] > 1e-3, worst


@pytest.mark.host
@pytest.mark.needs(modules=("pinocchio",))
def test_forces_on_a_floating_base_equal_pinocchios_fext(tmp_path):
    """Point forces and a torque (world components; functions of qd and t) on the links and
    the base of floating_gripper on its floating base, and a spring-damper on a joint:
    mbforge's compiled c-double rnea and aba give Pinocchio's rnea / aba with fext (the
    spring's generalized force added on its joint's row) to 1e-10 relative at 24 random
    states; the forces' sign flipped in the reference gives a mismatch."""
    path = _urdf("floating_gripper")
    model = _with_forces(from_urdf(path, floating=True))
    knuckle = 6 + 1  # the left knuckle's row among the velocities (the base's 6 first)

    def elements(q, qd, t):
        return [("left_knuckle", (0.02, -0.01, 0.05), (1.5, -0.7 * qd[6], 0.4), (0, 0, 0)),
                ("wrist", (0, 0, 0), (0, 0, 0), (0.2, 0.6 * t, -0.1)),
                ("root_joint", (0.1, 0.03, -0.02), (-0.8, 0.3, 1.1), (0, 0, 0))]

    def spring(q, qd):
        Qs = np.zeros(len(qd))
        Qs[knuckle] = -(3.0 * (q[7 + 1] - 0.2) + 0.4 * qd[knuckle])
        return Qs

    _agree_and_flipped_differ(_fext_errors(path, model, elements, spring, tmp_path))


@pytest.mark.host
@pytest.mark.needs(modules=("pinocchio",), dists=("example-robot-data",))
def test_contact_forces_on_solo12_feet_equal_pinocchios_fext(tmp_path):
    """Solo12 on its floating base, contact forces at two feet (points of the lower legs,
    the FL_FOOT / HR_FOOT frames) and a push torque on the trunk, against Pinocchio's fext."""
    path = _urdf("solo12")
    model = _model("solo12")
    t = model.relative_trees
    body = {b.name: b for b in model.bodies}
    foot = {f[0]: tuple(float(x) for x in f[2]) for tj in model.joint_tree for f in tj.frames}
    # the random states' forces reach 3e4 (joint rates up to the URDF's limits): forces of
    # that order, so that their error (and the flipped sign) shows against them
    contacts = [("FL_LOWER_LEG", "FL_KFE", foot["FL_FOOT"], (300.0, -100.0, 1200.0)),
                ("HR_LOWER_LEG", "HR_KFE", foot["HR_FOOT"], (-200.0, 150.0, 900.0))]
    for link, _, p, F in contacts:
        model.force(f"contact_{link}", body[link], p, F)
    model.torque("push", t.body("trunk", t.world, t.origin), (40.0, -30.0, 20.0))

    def elements(q, qd, tt):
        return [(j, p, F, (0, 0, 0)) for _, j, p, F in contacts] + [("root_joint", (0, 0, 0), (0, 0, 0),
                                                                      (40.0, -30.0, 20.0))]

    _agree_and_flipped_differ(_fext_errors(path, model, elements, lambda q, qd: np.zeros(len(qd)), tmp_path))


def test_the_same_forces_on_a_fixed_base_equal_the_mass_matrix_equations():
    """_with_forces's elements on floating_gripper fixed to the world: RNEA and ABA equal
    M qdd - Q and M^-1 (Q + B u) of Model.equations (their generalized forces by virtual
    power), the path the floating base's f_ext leaves as it was."""
    from helpers.models import check_recursive

    check_recursive(_with_forces(from_urdf(_urdf("floating_gripper")), timed=False), seed=5)


def test_forces_a_floating_base_cannot_take_are_refused_with_one_line():
    """A force on a body that is no link of the tree, or a spring on the base's coordinates."""
    from mbforge.ir import as_atom, sub

    model = from_urdf(_urdf("floating_gripper"), floating=True)
    t = model.relative_trees
    elsewhere = t.point("elsewhere", t.origin, (0.0, 0.0, 0.3), t.world)
    model.force("push", t.body("probe", t.world, elsewhere), (0, 0, 0), (1.0, 0.0, 0.0))
    with pytest.raises(KernelError, match=r"^floating_gripper: force element 'push' acts on body 'probe', which is "
                                          r"no link of the joint tree nor the floating base[^\n]*$"):
        rnea_kernel(model)
    model = from_urdf(_urdf("floating_gripper"), floating=True)
    model.spring_damper("tether", sub(model.floating_base.q[2], as_atom(0.0)), k=2.0)
    with pytest.raises(KernelError, match=r"^floating_gripper: force element 'tether' depends on the floating base's "
                                          r"coordinates[^\n]*$"):
        aba_kernel(model)
