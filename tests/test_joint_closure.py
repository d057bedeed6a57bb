"""A joint kind of the trees (model.joint_kinds) closed between two bodies as constraints
(Model.joint, model.joints.of_kind): the equations vanish exactly on the poses the kind's
own rotation and translation give, and not off them."""
import numpy as np
import pytest

from mbforge.ir import Evaluator, symbol
from mbforge.model import Model, ModelError
from mbforge.model.frames import quat_from_matrix
from mbforge.model.joint_kinds import JointKind, Prismatic, Revolute, Spherical

P1, P2 = np.array([0.2, -0.1, 0.4]), np.array([-0.3, 0.5, 0.1])
KINDS = {"revolute": (Revolute((0.3, -0.5, 0.8)), 5), "prismatic": (Prismatic((1.0, 2.0, -0.5)), 5),
         "spherical": (Spherical("zyx"), 3), "spherical zyz": (Spherical("zyz"), 3)}


def closed(kind):
    """phi(pose) of a body b closed to the ground by the kind (pose: r, Euler parameters)."""
    m = Model("closure")
    c = [m.coordinate(f"b_{n}") for n in ("x", "y", "z", "e0", "e1", "e2", "e3")]
    b = m.body3d("b", c[:3], c[3:], normalize=False)
    names = m.joint(kind, m.ground(), P1, b, P2, "j")
    eqs = m.equations()
    assert eqs.phi_names == names
    return Evaluator(eqs.phi, eqs.q)


def pose(kind, q):
    """Where the kind's joint puts b: its frame turned by R(q) and moved by t(q) at P1."""
    qs = [symbol(f"s{k}") for k in range(kind.dof)]
    f = Evaluator([x for row in kind.rotation(qs) for x in row] + list(kind.translation(qs)), qs)(np.asarray(q))
    R, t = f[:9].reshape(3, 3), f[9:]
    return np.r_[P1 + t - R @ P2, quat_from_matrix(R)]


@pytest.mark.parametrize("which", KINDS)
def test_the_equations_vanish_on_the_kinds_own_poses_and_only_there(which):
    kind, n = KINDS[which]
    phi = closed(kind)
    rng = np.random.default_rng(3)
    for q in rng.uniform(-1.2, 1.2, (5, kind.dof)):
        x = pose(kind, q)
        assert len(phi(x)) == n and np.max(np.abs(phi(x))) < 1e-12, (which, q)
        off = x + np.r_[0.0, 0.0, 0.0, 0.0, 0.05, -0.03, 0.02]  # a turn the kind does not make
        if which != "spherical" and which != "spherical zyz":
            assert np.max(np.abs(phi(off))) > 1e-3
        assert np.max(np.abs(phi(x + np.r_[0.01, -0.02, 0.03, 0, 0, 0, 0]))) > 1e-3  # a shift off it


def test_a_series_with_no_constraint_form_is_refused_in_one_line():
    class Universal(JointKind):  # two turns: a Cardan, not yet a kind of the trees
        name, dof = "universal", 2

        def steps(self):
            return [Revolute((1.0, 0.0, 0.0)), Revolute((0.0, 1.0, 0.0))]

    with pytest.raises(ModelError, match=r"^closure: joint 'j': a .* has no constraint form") as e:
        closed(Universal())
    assert "\n" not in str(e.value)
