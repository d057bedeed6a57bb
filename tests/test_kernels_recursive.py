"""Recursive dynamics (kernels/recursive.py) against the M(q)-based equations of the same
model: RNEA's forces equal M qdd - Q, ABA's accelerations solve M qdd = Q + B u and
CRBA's matrix is M, at random states (1e-10 relative; helpers.models.check_recursive),
for Pinocchio's sample arm, an N-body chain and a branched tree; op counts grow linearly
along the chain; models that are not open trees of revolute joints are refused with one
line; the arm's numbers equal pinocchio's model when pin is installed."""
import numpy as np
import pytest

from mbforge.examples import sample_arm as arm6, spatial_chain as chain
from mbforge.ir import Evaluator
from mbforge.kernels.builders import build_kernel
from mbforge.kernels.common import KernelError
from mbforge.kernels.recursive import aba_kernel, rnea_kernel
from mbforge.lower import op_counts
from mbforge.ir import vconst
from mbforge.model import Model
from mbforge.model.joint_kinds import Prismatic, Revolute, Spherical

from helpers.models import check_recursive


def test_arm6_matches_the_mass_matrix_kernels():
    kr, ka = check_recursive(arm6.build())
    assert kr.outputs[0].name == "u" and ka.outputs[0].name == "qdd"


@pytest.mark.parametrize("n", [1, 2, 7])
def test_chain_matches_the_mass_matrix_kernels(n):
    check_recursive(chain.build(n=n), seed=n)


def _tree_model(actuated: bool) -> Model:
    """A trunk with two branches, tilted fixed placements, an oblique axis, off-axis
    centres of mass, full inertia matrices, a spring-damper and an applied force: what
    the arm and the chain do not exercise."""
    m = Model("branchy")
    t = m.relative()
    q = [m.coordinate(f"a{k}", range=(-2, 2)) for k in range(5)]
    c, s = np.cos(0.3), np.sin(0.3)
    tilt = t.fixed_base("tilt", t.world, [[c, 0, s], [0, 1, 0], [-s, 0, c]])
    b0 = t.base("b0", tilt, (0, 0, 1), q[0])
    P1 = t.point("P1", t.origin, (0.1, 0.2, 0.3), tilt)
    body0 = t.body("trunk", b0, P1)
    body0.set_inertia(2.0, com=(0.1, 0.0, 0.4), inertia=[[0.3, 0.01, 0.02], [0.01, 0.2, 0.03], [0.02, 0.03, 0.25]])
    P2 = t.point("P2", P1, (0.0, 0.1, 0.8), b0)
    b1 = t.base("b1", b0, (1, 1, 0), q[1])
    t.body("left", b1, P2).set_inertia(1.0, com=(0.2, 0.1, 0.0), inertia=(0.05, 0.06, 0.07))
    P3 = t.point("P3", P2, (0.5, 0.0, 0.0), b1)
    k2 = t.fixed_base("k2", b1, [[1, 0, 0], [0, c, -s], [0, s, c]])
    b2 = t.base("b2", k2, (0, 1, 0), q[2])
    t.body("hand", b2, P3).set_inertia(0.5, com=(0.0, 0.0, 0.1), inertia=(0.01, 0.01, 0.02))
    P4 = t.point("P4", P1, (0.0, -0.3, 0.6), b0)
    b3 = t.base("b3", b0, (1, 0, 0), q[3])
    t.body("right", b3, P4).set_inertia(1.5, com=(0.0, -0.2, 0.1), inertia=(0.04, 0.02, 0.03))
    P5 = t.point("P5", P4, (0.0, -0.4, 0.0), b3)
    b4 = t.base("b4", b3, (0, 0, 1), q[4])
    t.body("claw", b4, P5).set_inertia(0.3, com=(0.05, 0.0, 0.0), inertia=(0.002, 0.003, 0.004))
    m.gravity((0.0, 0.0, -9.81))
    m.spring_damper("elastic", q[1], k=3.0, c=0.4, rest=0.2)
    m.force("push", body0, (0.0, 0.1, 0.5), (1.0, -2.0, 0.5))
    if actuated:
        for k in range(5):
            m.actuator(f"m{k}", 2.0 * q[k])
    return m


def test_branched_tree_with_placements_and_oblique_axis():
    check_recursive(_tree_model(actuated=True), seed=3)
    kr, ka = check_recursive(_tree_model(actuated=False), seed=4)
    assert kr.outputs[0].name == "tau"


def test_operations_grow_linearly_along_the_chain():
    ops = {}
    for n in (8, 16, 32):
        m = chain.build(n=n)
        ops[n] = (op_counts(rnea_kernel(m).output_atoms)["total"], op_counts(aba_kernel(m).output_atoms)["total"])
    # each added link costs about the same: the increments double with N (within 5%: an ABA
    # link whose pivot ranges over more than 256 times its floor divides by it, a few
    # operations fewer, and the longer chains have more of them near the base)
    for k in range(2):
        assert ops[32][k] - ops[16][k] == pytest.approx(2 * (ops[16][k] - ops[8][k]), rel=0.05)


def test_sample_arm_takes_fewer_operations_than_pinocchio():
    """Pinocchio's RNEA and ABA of this arm exported through CasADi: 400 and 872 operations
    (issue 14, sin and cos not counted; bench/arms.py measures them side by side)."""
    m = arm6.build()
    for k, peer in ((rnea_kernel(m), 400), (aba_kernel(m), 872)):
        ops = op_counts(k.output_atoms)
        assert ops["total"] - ops.get("sincos", 0) <= peer


def test_registered_under_their_own_names():
    eqs = arm6.build().equations()
    assert build_kernel(eqs, "inverse-dynamics-rnea").name == "inverse-dynamics-rnea"
    assert build_kernel(eqs, "forward-dynamics-aba").name == "forward-dynamics-aba"


def test_closed_loops_and_models_not_in_relative_coordinates_are_refused_with_one_line():
    from mbforge.examples import load
    with pytest.raises(KernelError, match="stewart_relative: recursive dynamics needs an open tree without "
                                          "constraints; equation 'loop1_x'"):
        aba_kernel(load("stewart_relative"))
    with pytest.raises(KernelError, match="fourbar: recursive dynamics needs a model in relative coordinates"):
        rnea_kernel(load("fourbar", inertia=True))



def _cart_double_pendulum() -> Model:
    """A cart on a rail (tree.joint(Prismatic)) with a double pendulum whose first turn is
    about the cart's point but whose base hangs from the world's: the turn hangs from the
    slide."""
    m = Model("cart_pendulum")
    x, th, ph = (m.coordinate(n, range=(-2, 2)) for n in ("x", "th", "ph"))
    t = m.relative()
    _, cart = t.joint(Prismatic((0.6, 0.8, 0.0)), "rail", t.world, t.origin, [x])
    pend = t.base("pend", t.world, (0.0, 0.0, 1.0), th)
    t.body("cart", t.world, cart).set_inertia(1.0, com=(0.1, 0.0, 0.0), inertia=(0.1, 0.1, 0.1))
    t.body("pole", pend, cart).set_inertia(0.5, com=(0.0, -0.4, 0.0), inertia=(0.01, 0.02, 0.03))
    low = t.base("low", pend, (0.0, 0.0, 1.0), ph)
    t.body("pole2", low, t.point("tip", cart, (0.0, -0.8, 0.0), pend)).set_inertia(0.3, com=(0.0, -0.3, 0.0))
    m.gravity((0.0, -9.81, 0.0))
    return m


def _telescope() -> Model:
    """A boom turned about y, a sleeve sliding along the boom, a wrist turning on the sleeve,
    a spring on the slide: a slide carried by a turn, and a turn carried by the slide."""
    m = Model("telescope")
    a, s, w = (m.coordinate(n, range=(-2, 2)) for n in ("a", "s", "w"))
    t = m.relative()
    arm = t.base("arm", t.world, (0, 1, 0), a)
    P = t.point("P", t.origin, (0.0, 0.0, 0.2), t.world)
    t.body("boom", arm, P).set_inertia(2.0, com=(0.3, 0, 0.05), inertia=[[0.1, 0.01, 0], [0.01, 0.2, 0], [0, 0, 0.3]])
    _, S = t.joint(Prismatic((1.0, 0.0, 0.0)), "ext", arm, t.point("E", P, (0.2, 0.0, 0.0), arm), [s])
    t.body("sleeve", arm, S).set_inertia(0.7, com=(0.1, 0.02, 0.0), inertia=(0.01, 0.02, 0.03))
    wrist = t.base("wrist", arm, (1, 0, 0), w)
    t.body("hand", wrist, t.point("H", S, (0.3, 0.0, 0.0), arm)).set_inertia(0.4, com=(0.0, 0.05, 0.02))
    m.gravity((0.0, 0.0, -9.81))
    m.spring_damper("spring", s, k=20.0, c=0.5, rest=0.1)
    return m


@pytest.mark.parametrize("build", [_cart_double_pendulum, _telescope])
def test_prismatic_joints_of_hand_built_relative_trees(build):
    """Slides made with tree.joint(Prismatic(axis), ...) are prismatic links: turns may hang
    from them and they from turns; the recursions equal the M(q)-based equations."""
    kr, ka = check_recursive(build(), seed=11)
    assert "1 prismatic" in ka.description
    m = build()
    m.actuator("push", m.q[0])  # an underactuated cart: ABA takes the force on the slide
    check_recursive(m, seed=12, inverse=False)


def test_a_joint_tree_read_as_relative_trees_gives_the_same_dynamics():
    """The explicit tree's links and the ones read off the relative trees it builds agree."""
    from mbforge.ir import Evaluator
    from mbforge.model.tree import JointTree
    m = Model("ball_arm")
    tree = JointTree(m)
    ball = tree.joint("ball", Spherical(), origin=(0, 0, 0.1), mass=2.0, com=(0, 0, 0.4),
                      inertia=[[0.3, 0, 0], [0, 0.3, 0], [0, 0, 0.1]], range=(-1.2, 1.2))
    elbow = tree.joint("elbow", Revolute((0, 1, 0)), parent=ball, origin=(0, 0, 0.8), mass=1.0, com=(0, 0, 0.3),
                       inertia=(0.02, 0.02, 0.01))
    tree.joint("slide", Prismatic((0, 0.6, 0.8)), parent=elbow, origin=(0, 0.1, 0.6), mass=0.5,
               com=(0.05, 0, 0), inertia=(0.001, 0.001, 0.001), range=(-0.1, 0.2))
    m.gravity((0.0, 0.0, -9.81))
    tree.finish()
    explicit = aba_kernel(m)
    m.joint_tree = None
    relative = aba_kernel(m)
    X = np.random.default_rng(2).uniform(-1.0, 1.0, (5, len(explicit.input_symbols)))
    assert relative.input_symbols == explicit.input_symbols
    got = [Evaluator(k.output_atoms, k.input_symbols)(X) for k in (explicit, relative)]
    assert np.allclose(got[0], got[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("vector, message", [
    (lambda x: (2.0 * x, 0.0, 0.0), r"point 'C' moves by .*, not by one coordinate along a unit axis"),
    (lambda x: (x * x, 0.0, 0.0), r"point 'C' moves by .*, not by one coordinate along a unit axis"),
    (lambda x: (x, 0.0, 0.0), r"point 'C' hangs from 'E', which the joints above it do not carry"),
])
def test_points_that_are_no_slide_are_refused_with_one_line(vector, message):
    """A point moved by a multiple or a function of a coordinate, or sliding along a world
    axis from a point a turn carries (its axis would turn in the link): refused."""
    m = Model("slide")
    t = m.relative()
    x, a = m.coordinate("x"), m.coordinate("a")
    turned = t.base("turned", t.world, (0, 0, 1), a)
    E = t.point("E", t.origin, (1.0, 0.0, 0.0), turned)
    t.body("arm", turned, t.origin).set_inertia(1.0, com=(0.5, 0.0, 0.0))
    C = t.point("C", E, vconst(vector(x)), t.world)
    t.body("carriage", turned, C).set_inertia(1.0)
    with pytest.raises(KernelError, match="slide: " + message):
        rnea_kernel(m)


def _two_links(actuate):
    m = Model("pair")
    t = m.relative()
    a, b = m.coordinate("a"), m.coordinate("b")
    ba = t.base("ba", t.world, (0, 0, 1), a)
    t.body("first", ba, t.origin).set_inertia(1.0, com=(0.5, 0.0, 0.0), inertia=(0.1, 0.1, 0.1))
    bb = t.base("bb", ba, (0, 1, 0), b)
    t.body("second", bb, t.point("E", t.origin, (1.0, 0.0, 0.0), ba)).set_inertia(1.0, com=(0.5, 0.0, 0.0))
    actuate(m, a, b)
    return m


@pytest.mark.parametrize("actuate, kernel, message", [
    (lambda m, a, b: m.actuator("only_a", a), rnea_kernel,
     r"pair: inverse-dynamics-rnea needs one actuator per coordinate \(1 actuators for 2 coordinates\), or none: "
     "it then returns the generalized forces tau"),
    (lambda m, a, b: m.actuator("both", a + b), aba_kernel,
     "pair: actuator 'both' does not act on one coordinate with a constant coefficient"),
])
def test_actuators_the_recursions_cannot_take_are_named(actuate, kernel, message):
    with pytest.raises(KernelError, match=message):
        kernel(_two_links(actuate))


def test_partly_actuated_forward_dynamics_and_angles_that_are_not_one_coordinate():
    check_recursive(_two_links(lambda m, a, b: m.actuator("only_b", b)), seed=5, inverse=False)  # ABA: tau = B u
    m = Model("coupled")
    t = m.relative()
    a, b = m.coordinate("a"), m.coordinate("b")
    ba = t.base("ba", t.world, (0, 0, 1), a)
    t.body("first", ba, t.origin).set_inertia(1.0, com=(0.5, 0.0, 0.0))
    bb = t.base("bb", ba, (0, 1, 0), a + b)
    t.body("second", bb, t.origin).set_inertia(1.0, com=(0.5, 0.0, 0.0))
    with pytest.raises(KernelError, match=r"coupled: base 'bb' turns by .*, not by one coordinate"):
        aba_kernel(m)


@pytest.mark.needs(modules=("pinocchio",))
def test_arm6_is_pinocchios_sample_manipulator():
    import pinocchio as pin

    pm = pin.buildSampleModelManipulator()
    assert pm.nq == len(arm6.JOINTS) == pm.njoints - 1
    axes = {"JointModelRX": arm6.X, "JointModelRY": arm6.Y, "JointModelRZ": arm6.Z}
    for k, (name, axis, placement, (mass, com, inertia)) in enumerate(arm6.JOINTS, start=1):
        assert pm.names[k] == f"{name}_joint"
        assert axes[pm.joints[k].shortname()] == axis
        assert np.allclose(pm.jointPlacements[k].rotation, np.eye(3))
        assert np.allclose(pm.jointPlacements[k].translation, placement)
        I = pm.inertias[k]
        assert I.mass == pytest.approx(mass)
        assert np.allclose(I.lever, com) and np.allclose(I.inertia, np.diag(inertia))
    assert np.allclose(pm.gravity.linear, (0.0, 0.0, -arm6.G))
    # and the dynamics agree: pinocchio's RNEA and ABA against the generated atoms
    m = arm6.build()
    kr, ka = rnea_kernel(m), aba_kernel(m)
    rng = np.random.default_rng(7)
    for _ in range(4):
        q, qd, qdd, u = (rng.uniform(-1, 1, 6) for _ in range(4))
        tau = Evaluator(kr.output_atoms, kr.input_symbols)(np.concatenate([q, qd, qdd, [0.0]])[None])[0]
        assert np.allclose(tau, pin.rnea(pm, pm.createData(), q, qd, qdd), rtol=1e-10, atol=1e-10)
        acc = Evaluator(ka.output_atoms, ka.input_symbols)(np.concatenate([q, qd, [0.0], u])[None])[0]
        assert np.allclose(acc, pin.aba(pm, pm.createData(), q, qd, u), rtol=1e-10, atol=1e-10)


@pytest.mark.host
@pytest.mark.parametrize("target", ["c-float32", "c-fixed"])
def test_a_slides_pivot_is_bounded_by_its_subtrees_mass(tmp_path, target):
    """ABA's pivot D of a slide is a translational entry of the articulated inertia: at
    least the cart's own mass, at most the mass it carries (the rotational ceiling the
    turns use would exclude it: the range analysis found the hint [1, 0.07] disjoint from
    its own enclosure and stopped). The compiled kernel's accelerations stay within their
    proved bounds at random states of the declared ranges."""
    from mbforge.manifest import Manifest
    from mbforge.pipeline import generate
    from mbforge.verify import hostlib

    m = _cart_double_pendulum()
    m.actuator("push", m.q[0])
    k = aba_kernel(m)
    out = tmp_path / target
    generate(k, target).write(out)
    man = Manifest.load(out)
    rng = np.random.default_rng(7)
    lo, hi = np.array([p.ranges[i] for p in k.inputs for i in range(len(p.symbols))]).T
    X = rng.uniform(lo + 0.01 * (hi - lo), hi - 0.01 * (hi - lo), (2000, len(lo)))
    Y, status = hostlib.load_kernel(out)(hostlib.to_raw(man, X, "inputs"))
    assert (np.asarray(status) == 0).all()
    err = np.abs(hostlib.from_raw(man, Y, "outputs") - Evaluator(k.output_atoms, k.input_symbols)(X))
    bound = np.array(man.outputs[0].error_bound, dtype=float)
    assert np.isfinite(bound).all() and (err <= bound).all(), (err.max(axis=0), bound)


@pytest.mark.parametrize("kname", ["forward-dynamics-aba", "inverse-dynamics-rnea", "mass-matrix-crba"])
def test_generate_builds_a_recursive_kernel_from_the_model_without_its_equations(tmp_path, kname):
    """`mbforge generate` builds a recursive kernel from the model itself (its M(q)
    equations went unused: 2.3 s of the 30-joint chain's 8.5 s), and writes the files that
    the kernel built from the equations gives, byte for byte (c-float32: its bounds too)."""
    import argparse
    from pathlib import Path

    from mbforge import cli
    from mbforge.model import from_urdf
    from mbforge.modelflags import add_model_flags, model_kernel
    from mbforge.pipeline import generate

    urdf = str(Path(__file__).parent / "fixtures" / "urdf" / "branchy.urdf")
    p = argparse.ArgumentParser()
    add_model_flags(p)
    eqs, _ = model_kernel(p.parse_args([urdf, "--kernel", kname]), equations=False)
    assert isinstance(eqs, Model)  # no equations were built
    assert cli.main(["generate", urdf, "--kernel", kname, "--target", "c-float32", "--out", str(tmp_path / "cli")]) == 0
    generate(build_kernel(from_urdf(urdf).equations(), kname), "c-float32").write(tmp_path / "eqs")
    names = sorted(f.name for f in (tmp_path / "cli").iterdir())
    assert names == sorted(f.name for f in (tmp_path / "eqs").iterdir())
    for name in names:
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "eqs" / name).read_bytes(), name
