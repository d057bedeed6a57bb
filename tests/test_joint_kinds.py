"""Joint kinds (model/joint_kinds.py) and trees built with them (model/tree.py) through the
recursive kernels: a tree with spherical (z, y, x turns), oblique revolute and prismatic
joints, tilted placements and full inertias gives Pinocchio's torques (rnea), accelerations
(aba) and mass matrix (crba) to 1e-10 at random states, Pinocchio's model being built from
the same numbers with JointModelSphericalZYX, RevoluteUnaligned and PrismaticUnaligned; the
same kernels agree with the M(q)-based equations of the model (its relative trees, built
by the kinds' place); a spherical joint's motion subspace is Pinocchio's."""
from __future__ import annotations

import numpy as np
import pytest

from mbforge.ir import Evaluator, evaluate
from mbforge.kernels.recursive import aba_kernel, frame_kinematics_kernel, mass_matrix_crba_kernel, rnea_kernel
from mbforge.model import Model
from mbforge.model.errors import ModelError
from mbforge.model.frames import rotation_np
from mbforge.model.joint_kinds import Prismatic, Revolute, Spherical
from mbforge.model.tree import JointTree

from helpers.models import check_recursive

G = (0.0, 0.0, -9.81)
# (name, kind, parent, origin, R, mass, com, inertia about com)
JOINTS = [
    ("ball", Spherical(), None, (0.0, 0.1, 0.2), rotation_np((1, 0, 0), 0.3), 2.0, (0.1, 0.0, 0.4),
     [[0.3, 0.01, 0.02], [0.01, 0.2, 0.03], [0.02, 0.03, 0.25]]),
    ("elbow", Revolute((1.0, 1.0, 0.0)), 0, (0.0, 0.1, 0.8), np.eye(3), 1.0, (0.2, 0.1, 0.0),
     np.diag([0.05, 0.06, 0.07])),
    ("slide", Prismatic((0.0, 0.6, 0.8)), 1, (0.5, 0.0, 0.0), rotation_np((0, 1, 1), -0.4), 0.5, (0.0, 0.0, 0.1),
     np.diag([0.01, 0.01, 0.02])),
    ("wrist", Spherical(), 2, (0.0, 0.0, 0.3), np.eye(3), 0.3, (0.05, 0.0, 0.02), np.diag([0.002, 0.003, 0.004])),
    ("side", Prismatic((1.0, 0.0, 0.0)), 0, (0.0, -0.3, 0.6), np.eye(3), 1.5, (0.0, -0.2, 0.1),
     np.diag([0.04, 0.02, 0.03])),
]


def _model(actuated: bool = True, joints=JOINTS, finish: bool = True) -> Model:
    m = Model("balls")
    tree = JointTree(m)
    for name, kind, parent, origin, R, mass, com, inertia in joints:
        tree.joint(name, kind, parent, origin, R, mass, com, inertia, range=(-1.2, 1.2), actuated=actuated)
    m.gravity(G)
    return tree.finish() if finish else m


def _pinocchio():
    import pinocchio as pin

    pm = pin.Model()
    ids = []
    for name, kind, parent, origin, R, mass, com, inertia in JOINTS:
        if isinstance(kind, Spherical):
            jm = pin.JointModelSphericalZYX()
        elif isinstance(kind, Revolute):
            jm = pin.JointModelRevoluteUnaligned(*kind.axis)
        else:
            jm = pin.JointModelPrismaticUnaligned(*kind.axis)
        pid = 0 if parent is None else ids[parent]
        jid = pm.addJoint(pid, jm, pin.SE3(np.asarray(R, dtype=float), np.asarray(origin, dtype=float)), name)
        pm.appendBodyToJoint(jid, pin.Inertia(mass, np.asarray(com, dtype=float), np.asarray(inertia, dtype=float)),
                             pin.SE3.Identity())
        ids.append(jid)
    pm.gravity.linear = np.asarray(G)
    return pm


@pytest.mark.needs(modules=("pinocchio",))
def test_spherical_and_prismatic_links_equal_pinocchio():
    import pinocchio as pin

    model = _model()
    n = len(model.q)
    pm = _pinocchio()
    data = pm.createData()
    assert pm.nq == pm.nv == n
    kr, ka, kc = rnea_kernel(model), aba_kernel(model), mass_matrix_crba_kernel(model)
    assert "5 joints (1 revolute, 2 prismatic, 2 spherical)" in kr.description
    rng = np.random.default_rng(3)
    S = 16
    Q, QD, QDD, U = (rng.uniform(-1.1, 1.1, (S, n)) for _ in range(4))
    tau = Evaluator(kr.output_atoms, kr.input_symbols)(np.hstack([Q, QD, QDD, np.zeros((S, 1))]))
    qdd = Evaluator(ka.output_atoms, ka.input_symbols)(np.hstack([Q, QD, np.zeros((S, 1)), U]))
    Mc = Evaluator(kc.output_atoms, kc.input_symbols)(Q)
    for s in range(S):
        ref = pin.rnea(pm, data, Q[s], QD[s], QDD[s])
        assert np.allclose(tau[s], ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
        ref = pin.aba(pm, data, Q[s], QD[s], U[s])
        assert np.allclose(qdd[s], ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
        Mp = pin.crba(pm, data, Q[s])
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        M = np.zeros((n, n))
        M[tuple(np.array(kc.outputs[0].pattern).T)] = Mc[s]
        assert np.allclose(M, Mp, rtol=1e-10, atol=1e-10 * np.abs(Mp).max())


@pytest.mark.needs(modules=("pinocchio",))
def test_spherical_frame_kinematics_equal_pinocchio():
    import pinocchio as pin

    model = _model()
    pm = _pinocchio()
    data = pm.createData()
    k = frame_kinematics_kernel(model, "wrist")
    ev = Evaluator(k.output_atoms, k.input_symbols)
    rng = np.random.default_rng(4)
    for q in rng.uniform(-1.1, 1.1, (8, len(model.q))):
        y = ev(q)
        pin.computeJointJacobians(pm, data, q)
        jid = pm.getJointId("wrist")
        X = data.oMi[jid]
        assert np.allclose(y[:3], X.translation, atol=1e-12)
        assert np.allclose(y[3:12].reshape(3, 3), X.rotation, atol=1e-12)
        Jp = pin.getJointJacobian(pm, data, jid, pin.LOCAL_WORLD_ALIGNED)
        J = np.zeros((6, len(model.q)))
        J[tuple(np.array(k.outputs[2].pattern).T)] = y[12:]
        assert np.allclose(J, Jp, atol=1e-12)


def test_tree_of_kinds_matches_the_mass_matrix_kernels():
    """The relative trees the kinds place and the explicit tree give one dynamics."""
    check_recursive(_model(), seed=5)


def test_relative_trees_alone_take_spherical_joints():
    """Without the explicit tree the recursive kernels read the three bases a spherical
    joint places off the relative trees: the same dynamics."""
    wrist = ("wrist", Spherical("xyz"), 1) + JOINTS[3][3:]
    m = _model(joints=JOINTS[:2] + [wrist], finish=False)
    assert m.joint_tree is None
    check_recursive(m, seed=7)


@pytest.mark.needs(modules=("pinocchio",))
def test_spherical_subspace_is_pinocchios():
    import pinocchio as pin

    kind = Spherical()
    jm = pin.JointModelSphericalZYX()
    jm.setIndexes(1, 0, 0)  # calc reads q from the joint's own slice
    jd = jm.createData()
    for q in np.random.default_rng(6).uniform(-1.5, 1.5, (5, 3)):
        jm.calc(jd, q)
        cols = kind.subspace([float(x) for x in q])
        S = np.array([[evaluate(x, {}) for x in w + v] for w, v in cols]).T
        assert np.allclose(S, np.asarray(jd.S)[[3, 4, 5, 0, 1, 2]], atol=1e-14)
        R = np.array([[evaluate(x, {}) for x in row] for row in kind.rotation([float(x) for x in q])])
        assert np.allclose(R, jd.M.rotation, atol=1e-14)


def test_joint_kind_errors_are_one_line():
    with pytest.raises(ModelError, match="spherical joint axes"):
        Spherical("zzx")
    with pytest.raises(ModelError, match="revolute joint axis"):
        Revolute((0.0, 0.0, 0.0))
    m = Model("bad")
    with pytest.raises(ModelError, match="parent 3 is not a joint added before it"):
        JointTree(m).joint("a", Revolute((0, 0, 1)), parent=3)
