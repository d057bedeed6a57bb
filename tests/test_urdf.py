"""mbforge.model.from_urdf: what a URDF becomes (coordinates and actuators named after the
joints, limits as ranges, efforts as actuator input ranges, fixed links merged, the
gravity option), its recursive kernels against the model's own M(q)-based equations, a
.urdf wherever a command takes a model (with --set of from_urdf's options), a named
frame's kinematics (--frame), and one line for every file or frame it cannot take. (tests/test_urdf_pinocchio.py holds the Pinocchio checks.)"""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mbforge.ir import Evaluator
from mbforge.kernels.recursive import aba_kernel, rnea_kernel
from mbforge.manifest import Manifest
from mbforge.model import URDFError, from_urdf

from helpers import FIXTURES
from helpers.builds import generate_in_fresh_process
from helpers.models import check_recursive

BRANCHY = FIXTURES / "urdf" / "branchy.urdf"
MBFORGE = Path(sys.executable).parent / "mbforge"


def test_joints_become_coordinates_actuators_and_ranges():
    m = from_urdf(BRANCHY, acceleration=7.0)
    assert m.name == "branchy"
    assert [q.value.name for q in m.q] == ["trunk", "slide", "elbow", "wrist", "finger"]  # parents first
    assert [a.name for a in m.actuators] == ["trunk", "slide", "elbow", "wrist", "finger"]
    r = {q.value.name: (m.ranges[q], m.ranges[qd], m.ranges[qdd]) for q, qd, qdd in zip(m.q, m.qd, m.qdd)}
    assert r["trunk"] == ((-2.5, 2.5), (-3.0, 3.0), (-7.0, 7.0))
    assert r["elbow"][0] == (-math.pi, math.pi)  # continuous
    assert r["finger"][:2] == ((0.0, 0.04), (-0.2, 0.2))
    assert m.envelope.inputs["slide"] == (-200.0, 200.0)
    assert [p.ranges for p in aba_kernel(m).inputs if p.name == "u"] == [[(-80.0, 80.0), (-200.0, 200.0),
                                                                         (-40.0, 40.0), (-10.0, 10.0),
                                                                         (-20.0, 20.0)]]
    # one body per moving joint; the fixed tool (0.3 kg) merged into the carriage (0.8 kg), the
    # camera without <inertial> adds nothing, the base (fixed to the world) is not a body
    mass = {b.name: b.mass for b in m.bodies}
    assert mass == pytest.approx({"trunk_link": 2.5, "carriage": 1.1, "forearm": 1.2, "hand": 0.5, "finger": 0.05})
    assert [j.kind for j in m.joint_tree] == ["revolute", "prismatic", "revolute", "revolute", "prismatic"]


def test_recursive_kernels_agree_with_the_models_equations():
    """The explicit joint tree the recursive kernels read and the bases and points the
    M(q)-based equations read describe the same robot."""
    check_recursive(from_urdf(BRANCHY), samples=8, seed=28)


def test_gravity_option_scales_the_static_torques():
    def static(g):
        k = rnea_kernel(from_urdf(BRANCHY, gravity=(0.0, 0.0, g)))
        x = np.zeros(len(k.input_symbols))
        x[:2] = (0.4, 0.1)
        return Evaluator(k.output_atoms, k.input_symbols)(x[None])[0]

    earth, moon = static(-9.81), static(-1.62)
    assert np.abs(earth).max() > 1.0
    assert np.allclose(moon, earth * 1.62 / 9.81, rtol=1e-12)


def test_generate_takes_a_urdf_and_its_options(tmp_path):
    r = subprocess.run([MBFORGE, "generate", BRANCHY, "--kernel", "mass-matrix-crba", "--set", "acceleration=5",
                        "--out", tmp_path / "m"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = Manifest.load(tmp_path / "m")
    assert [g.name for g in m.outputs] == ["M"] and m.inputs[0].name == "q"


@pytest.mark.parametrize("extra", [(), ("--set", "floating=True")])
def test_generated_files_do_not_depend_on_the_hash_seed(tmp_path, extra):
    a, b = (generate_in_fresh_process(str(BRANCHY), "forward-dynamics-aba", "c-float32", tmp_path / s, s, extra)
            for s in ("1", "2"))
    assert a == b and len(a) == 3


def test_frame_kinematics_of_a_named_frame(tmp_path):
    """A frame fixed to a moving link (the merged tool) and its Jacobian's zero columns."""
    r = subprocess.run([MBFORGE, "generate", BRANCHY, "--kernel", "frame-kinematics", "--frame", "tool",
                        "--out", tmp_path / "f"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = Manifest.load(tmp_path / "f")
    assert [g.name for g in m.outputs] == ["p", "R", "J"]
    # the tool hangs from trunk and slide only: no column of elbow, wrist or finger
    assert {label.split("/")[1] for label in m.outputs[2].labels} == {"trunk", "slide"}


@pytest.mark.parametrize("args, message", [
    (("--kernel", "frame-kinematics"), "branchy: frame-kinematics needs a frame that moves (--frame NAME), got "
                                       "None; the model's: trunk_link, carriage, tool, forearm, hand, camera, finger"),
    (("--kernel", "frame-kinematics", "--frame", "base"), "got 'base'"),
    (("--kernel", "mass-matrix-crba", "--frame", "tool"), "--frame goes with --kernel frame-kinematics, not "
                                                          "--kernel mass-matrix-crba"),
])
def test_frames_that_cannot_be_had_get_one_line(tmp_path, args, message):
    r = subprocess.run([MBFORGE, "generate", BRANCHY, *args, "--out", tmp_path / "f"], capture_output=True,
                       text=True, timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and message in lines[0], r.stderr


def _robot(joints: str, links=("a", "b"), inertial=True) -> str:
    body = ('<inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/>'
            '</inertial>' if inertial else "")
    return (f'<robot name="r">{"".join(f"<link name={chr(34)}{n}{chr(34)}>{body}</link>" for n in links)}'
            f"{joints}</robot>")


def _joint(name="j", kind="revolute", parent="a", child="b", limit='<limit lower="-1" upper="1" effort="1" '
           'velocity="1"/>'):
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<axis xyz="0 0 1"/>{limit}</joint>')


@pytest.mark.parametrize("text, options, message", [
    (None, (), "model file {f} does not exist"),
    ('<robot name="r">\n<link name="a">\n</robot>', (), "URDF file {f}: does not parse at line 3"),
    (_robot(_joint(kind="planar")), (), "URDF file {f}: joint 'j' is planar: only revolute, continuous, prismatic "
                                        "and fixed joints are read"),
    (_robot(_joint(kind="floating")), (), "joint 'j' is floating"),
    (_robot(_joint() + _joint("k", parent="c"), links=("a", "b", "c")), (),
     "link 'b' is the child of joints 'j' and 'k': a closed kinematic graph"),
    (_robot(_joint(), links=("a", "b", "c")), (), "several root links: a, c"),
    (_robot(_joint(child="zz")), (), "joint 'j' names link 'zz', which is not defined"),
    (_robot(_joint(), inertial=False), (), "joint 'j' moves no inertia: link 'b' and the links below it have no "
                                           "<inertial>"),
    (_robot(_joint(limit='<limit lower="1" upper="-1" effort="1" velocity="1"/>')), (),
     "joint 'j': limits lower=1.0 upper=-1.0 make no range"),
    (_robot(_joint(limit="")), (), "joint 'j' (revolute) has no lower/upper <limit>"),
    (_robot(_joint().replace('name="j" ', "")), (), "not a URDF robot (KeyError: 'name')"),
    (_robot(_joint()), ("floating=maybe",), "option floating is yes or no: --set floating=true|false|1|0, got 'maybe'"),
    (_robot(_joint()), ("floating=True", "--kernel", "forward-dynamics"),
     "r: a floating base has no equations in M(q) form here: only the recursive kernels take it "
     "(inverse-dynamics-rnea, forward-dynamics-aba, mass-matrix-crba, frame-kinematics)"),
    (_robot(_joint()).replace('<link name="a"><inertial><mass value="1"/>', '<link name="a"><inertial><mass value="0"/>'),
     ("floating=True",), "a floating base needs a root link 'a' with mass"),
    (_robot(_joint()), ("gravity=9.81",), "gravity must be 3 numbers, got 9.81"),
    (_robot(_joint().replace("</joint>", '<mimic joint="nope"/></joint>')), ("mimic=True",),
     "joint 'j' mimics 'nope', which is no other revolute, continuous or prismatic joint"),
    (_robot(_joint() + _joint("k", child="c").replace("</joint>", '<mimic joint="j"/></joint>'),
            links=("a", "b", "c")), ("mimic=True",),
     "r: mimic joints couple the tree's branches: the articulated-body algorithm takes none ('mimic_k')"),
    (_robot(_joint()), ("path=x",), "from_urdf() takes no option path (--set); its options: floating, gravity, "
                                    "acceleration, velocity, mimic"),
])
def test_what_cannot_be_read_gets_one_line(tmp_path, text, options, message):
    f = tmp_path / "robot.urdf"
    if text is not None:
        f.write_text(text)
    args = [a for o in options for a in ((o,) if o.startswith("-") or "=" not in o else ("--set", o))]
    r = subprocess.run([MBFORGE, "generate", f, "--kernel", "forward-dynamics-aba", *args, "--out", tmp_path / "o"],
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert message.format(f=f) in lines[0]
    assert not (tmp_path / "o").exists()


def test_the_python_call_raises_urdf_errors():
    with pytest.raises(URDFError, match="URDF file nowhere.urdf does not exist"):
        from_urdf("nowhere.urdf")
    with pytest.raises(URDFError, match="floating must be True or False, got 'yes'"):
        from_urdf(BRANCHY, floating="yes")


def test_generate_takes_a_floating_base(tmp_path):
    """--set floating=True: the base's 7 configuration numbers and 6 velocities lead the
    inputs, its wrench the torques (tests/test_urdf_pinocchio.py checks the values)."""
    r = subprocess.run([MBFORGE, "generate", BRANCHY, "--kernel", "inverse-dynamics-rnea", "--set", "floating=True",
                        "--out", tmp_path / "id"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = Manifest.load(tmp_path / "id")
    q, qd = ([s for s in m.inputs[k].labels] for k in (0, 1))
    assert q[:8] == ["base_x", "base_y", "base_z", "base_qx", "base_qy", "base_qz", "base_qw", "trunk"]
    assert qd[:7] == ["base_vx", "base_vy", "base_vz", "base_wx", "base_wy", "base_wz", "trunk_d"] and len(qd) == 11
    assert m.outputs[0].labels[:7] == ["tau_base_fx", "tau_base_fy", "tau_base_fz", "tau_base_nx", "tau_base_ny",
                                       "tau_base_nz", "tau_trunk"]


def test_a_loop_closed_on_a_urdf_tree_goes_through_the_constraint_formulation():
    """A four-bar knee: the URDF's tree (crank and coupler in series, the rocker on its own
    branch) closed by a spherical pair between the coupler's and the rocker's ends (its
    out-of-plane equation vanishes: two constraints). Swinging from rest under gravity for
    1 s, its crank angle equals the natural-coordinates four-bar's of the same geometry
    (examples/fourbar, an independent formulation: points, not angles) to 1e-9 rad; its
    constrained forward-dynamics kernel generates."""
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel
    from mbforge.model.joint_kinds import Spherical
    from mbforge.reference import Dynamics

    knee = from_urdf(FIXTURES / "urdf" / "knee.urdf", gravity=(0.0, -9.81, 0.0))
    body = {b.name: b for b in knee.bodies}
    knee.joint(Spherical(), body["coupler"], (3.5, 0.0, 0.0), body["rocker"], (2.5, 0.0, 0.0), "close")
    eqs = knee.equations()
    assert [s.value.name for s in eqs.q] == ["a", "c", "b"] and eqs.phi_names == ["close_x", "close_y"]
    a0 = 1.0
    urdf = Dynamics(eqs)
    q = urdf.position(0.0, np.array([a0, 1.2, -0.9]), fixed=["a"])
    natural = Dynamics(load("fourbar", driven=False).equations())
    with pytest.warns(Warning, match="redundant"):  # crank fixed by both its coordinates
        qn = natural.position(0.0, np.array([math.cos(a0), math.sin(a0), 3.0, 2.5]), fixed=["xB", "yB"])
    angle = urdf.forward(1.0, q, np.zeros(3), dt=0.05).Q[:, 0]
    Qn = natural.forward(1.0, qn, np.zeros(4), dt=0.05).Q
    assert np.abs(angle - np.unwrap(np.arctan2(Qn[:, 1], Qn[:, 0]))).max() < 1e-9
    assert abs(angle[-1] - a0) > 1.0  # it swung
    assert "multipliers" in build_kernel(eqs, "forward-dynamics").description
