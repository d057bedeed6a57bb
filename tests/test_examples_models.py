"""The planar examples: kinematics against closed forms, inverse dynamics against energy,
forward dynamics (energy drift, constraint residual), declared ranges, and `simulate`."""
import argparse
import csv
import math

import numpy as np
import pytest

from mbforge.examples import EXAMPLES, fourbar, load, motions
from mbforge.reference import Dynamics, Kinematics

W = 10 * 2 * math.pi / 60


def test_examples_by_name():
    assert set(EXAMPLES) == {"fourbar", "slidercrank", "pendulum_block", "slidercrank_disc", "stewart",
                             "stewart_relative", "sample_arm", "spatial_chain", "bricard", "pendulum", "nfourbar", "chain",
                             "andrews", "governor", "delta"}
    for name in EXAMPLES:
        assert load(name).name == name
    assert motions("stewart") == ("heave", "yaw", "roll", "pitch") == motions("stewart_relative")
    assert motions("fourbar") == ()
    with pytest.raises(KeyError, match="no example called 'nope'; known: andrews, bricard, chain, delta, fourbar"):
        load("nope")
    with pytest.raises(TypeError, match="example 'slidercrank' takes no option motion"):
        load("slidercrank", motion="yaw")


def test_fourbar_keeps_its_coordinates_ranges_and_equations():
    eqs = fourbar.build().equations()
    assert [s.value.name for s in eqs.q] == ["xB", "yB", "xC", "yC"]
    assert eqs.phi_names == ["bar_AB", "bar_BC", "bar_CD", "crank_angle"]
    assert eqs.driving == [False, False, False, True]
    r = {s.value.name: eqs.ranges[s] for s in eqs.q + eqs.qd + eqs.qdd}
    assert r["xB"] == (-1.2, 1.2) and r["xC"] == (1.0, 6.5) and r["yC"] == (-3.0, 3.0)
    assert r["xB_d"] == (-1.5, 1.5) and r["xB_dd"] == (-2.0, 2.0) and r["yC_d"] == (-2.0, 2.0)
    assert r["yC_dd"] == (-3.0, 3.0) and eqs.ranges[eqs.t] == (0.0, 6.0)
    assert eqs.M is None and eqs.actuator_names == []  # the kinematic model the demo uses
    dyn = fourbar.build(inertia=True).equations()
    # two models, two scopes: equal equations are equal in structure, not one atom
    assert dyn.phi_names == eqs.phi_names and [(a.key, repr(a)) for a in dyn.phi] == [(a.key, repr(a)) for a in eqs.phi]
    assert dyn.actuator_names == ["crank_torque"] and dyn.M.nnz == 8


def test_slidercrank_kinematics_closed_form():
    kin = Kinematics(load("slidercrank").equations())
    t = np.linspace(0, 12, 61)
    Q, QD, _ = kin.motion(t)
    th = W * t
    th2 = -np.arcsin(np.sin(th) / 2)
    assert np.allclose(Q[:, 8], th2, atol=1e-12)
    assert np.allclose(Q[:, 9], np.cos(th) + 2 * np.cos(th2), atol=1e-12)
    assert np.allclose(QD[:, 5], W, atol=1e-12)


def test_slidercrank_crank_torque_at_the_dead_point():
    """At t = 0 (crank and rod along x, no angular accelerations) the torque only lifts the
    crank's weight (1 kg at 0.5 m) and half the rod's (2 kg at 1 m): 9.81 (0.5 + 1)."""
    d = Dynamics(load("slidercrank").equations())
    r = d.inverse_motion([0.0])
    assert r["U"][0, 0] == pytest.approx(9.81 * 1.5, rel=1e-12)


@pytest.mark.parametrize("name", ["fourbar", "slidercrank", "slidercrank_disc"])
def test_crank_power_is_the_rate_of_energy(name):
    """tau w = d(T + V)/dt: the inverse dynamics (M, Q, B) agree with the energy atoms."""
    m = fourbar.build(inertia=True) if name == "fourbar" else load(name)
    d = Dynamics(m.equations())
    t = np.linspace(0.5, 5.5, 6)
    h = 1e-4
    Tm = np.sort(np.concatenate([t - h, t, t + h]))
    r = d.inverse_motion(Tm)
    E = np.array([sum(d.energy(tt, q, qd)) for tt, q, qd in zip(Tm, r["Q"], r["QD"])])
    power = r["U"][1::3, 0] * W  # every crank turns at 10 rpm
    dE = (E[2::3] - E[0::3]) / (2 * h)
    assert np.max(np.abs(power - dE)) < 1e-6 * np.max(np.abs(power))


def test_disc_adds_its_inertia_to_the_slider_crank_torque():
    """Reference-point slider-crank vs the relative-coordinate one with a pinion disc: the
    torques differ by the disc's power I phi3' phi3'' / w (its axle is fixed)."""
    t = np.linspace(0.0, 6.0, 31)
    a = Dynamics(load("slidercrank").equations()).inverse_motion(t)
    b = Dynamics(load("slidercrank_disc").equations()).inverse_motion(t)
    I_disc = 0.5 * 2.0 * 0.25 ** 2
    extra = I_disc * b["QD"][:, 3] * b["QDD"][:, 3] / W
    assert np.allclose(b["U"][:, 0] - a["U"][:, 0], extra, atol=1e-10)
    assert np.allclose(b["Q"][:, 2], a["Q"][:, 9], atol=1e-12)  # same slider position


@pytest.mark.parametrize("name", ["fourbar", "slidercrank", "slidercrank_disc"])
def test_driven_examples_stay_inside_their_ranges(name):
    eqs = load(name).equations()
    lo, hi = eqs.ranges[eqs.t]
    Q, QD, QDD = Kinematics(eqs).motion(np.linspace(lo, hi, 121))
    for arr, syms in ((Q, eqs.q), (QD, eqs.qd), (QDD, eqs.qdd)):
        assert np.all(arr >= [eqs.ranges[s][0] for s in syms]), name
        assert np.all(arr <= [eqs.ranges[s][1] for s in syms]), name


@pytest.mark.parametrize("build", [lambda: fourbar.build(driven=False), lambda: load("pendulum_block")],
                         ids=["fourbar_free", "pendulum_block"])
def test_forward_dynamics_under_gravity_10s(build):
    m = build()
    d = Dynamics(m.equations())
    tr = d.forward(10.0, dt=0.02)
    assert tr.t[-1] == 10.0
    assert tr.drift < 1e-6, f"energy drift {tr.drift:.3g} of the largest kinetic energy"
    assert abs(tr.E[-1] - tr.E[0]) < 1e-6 * abs(tr.E[0])
    assert tr.residual < 1e-9 and tr.vresidual < 1e-9  # before each projection
    assert np.max(tr.T) > 1.0  # it really moved
    # the motion stays inside the declared ranges
    eqs = d.eqs
    QDD = np.array([d.accelerations(t, q, qd)[0] for t, q, qd in zip(tr.t, tr.Q, tr.QD)])
    for arr, syms in ((tr.Q, eqs.q), (tr.QD, eqs.qd), (QDD, eqs.qdd)):
        assert np.all(arr >= [eqs.ranges[s][0] for s in syms])
        assert np.all(arr <= [eqs.ranges[s][1] for s in syms])
    if m.name == "pendulum_block":  # nothing pushes horizontally: the momentum stays zero
        p = [(d.mass_matrix(0.0, q)[0] @ qd)[[0, 3]].sum() for q, qd in zip(tr.Q, tr.QD)]
        assert np.max(np.abs(p)) < 1e-9


# ---- mbforge simulate ----------------------------------------------------------------------------
def _simulate(argv):
    from mbforge.simulate import cli

    ap = argparse.ArgumentParser()
    cli.register(ap.add_subparsers(dest="command"))
    args = ap.parse_args(["simulate", *argv])
    return args.func(args)


def test_simulate_stewart_writes_csv_and_png(tmp_path, capsys):
    assert _simulate(["stewart_relative", "--motion", "yaw", "--out", str(tmp_path), "--points", "11"]) == 0
    out = capsys.readouterr().out
    assert "stewart_relative_yaw: kinematics + inverse dynamics, 11 points" in out and "peak |actuator|" in out
    with open(tmp_path / "stewart_relative_yaw.csv") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert header[:7] == ["t", "x", "y", "z", "roll", "pitch", "yaw"]
    n_q = 24  # stewart_relative's coordinates: q, qd and qdd of each follow the outputs
    outs = [f"L{k}" for k in range(1, 7)] + [f"L{k}_d" for k in range(1, 7)]
    assert header[7:19] == outs
    assert [h.split(".")[0] for h in header[19:19 + 3 * n_q]] == ["q"] * n_q + ["qd"] * n_q + ["qdd"] * n_q
    # the run's checks come last (a driven motion: its residuals, no energy)
    assert header[19 + 3 * n_q:] == [f"f{k}" for k in range(1, 7)] + ["residual_phi", "residual_vel"]
    data = np.array(rows[1:], dtype=float)
    assert data.shape == (11, 1 + 18 + 3 * n_q + 6 + 2)
    assert np.all(data[:, -2:] < 1e-9) and np.all(data[:, -2:] >= 0)
    assert np.allclose(data[:, 6], math.pi / 18 * np.sin(5 * data[:, 0]), atol=1e-10)
    png = tmp_path / "stewart_relative_yaw.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_free_model_runs_forward_dynamics(tmp_path, capsys):
    assert _simulate(["pendulum_block", "--out", str(tmp_path), "--points", "21", "--t-end", "2"]) == 0
    assert "forward dynamics" in capsys.readouterr().out
    header = (tmp_path / "pendulum_block.csv").read_text().splitlines()[0].split(",")
    qs = ["xb", "yb", "thb", "xp", "yp", "thp"]
    assert header == ["t", "swing_angle", "bob_x", "bob_y"] + [f"{p}.{q}" for p in ("q", "qd", "qdd") for q in qs] + \
        ["T", "E", "V", "residual_phi", "residual_vel", "energy_drift"]


def test_simulate_a_free_mechanism_from_a_given_velocity(tmp_path, capsys):
    """Forward dynamics from a non-zero, consistent velocity: the given rates are held, the
    others solved from the constraints; the CSV's qd columns start there and the energy at
    t0 is the kinetic energy of that state; leaving a declared range is warned, with the
    first time it happens."""
    assert _simulate(["pendulum_block", "--out", str(tmp_path), "--points", "41", "--t-end", "2",
                      "--qd0", "thp=6", "--qd0", "xb=0", "--q0", "xb=0.1"]) == 0
    cap = capsys.readouterr()
    assert "forward dynamics from a given state" in cap.out
    assert "warning: acceleration thp left its declared range (-16, 16) at t=0 " in cap.err
    rows = (tmp_path / "pendulum_block.csv").read_text().splitlines()
    header = rows[0].split(",")
    first = dict(zip(header, map(float, rows[1].split(","))))
    assert first["qd.thp"] == pytest.approx(6.0) and first["qd.xb"] == pytest.approx(0.0)
    assert first["q.xb"] == pytest.approx(0.1)
    assert first["T"] > 1.0  # moving from the start, not at rest


def test_simulate_rejects_bad_initial_states():
    from mbforge.errors import CLIError

    with pytest.raises(CLIError, match="--qd0: pendulum_block has no coordinate swing; its coordinates: xb"):
        _simulate(["pendulum_block", "--out", "/tmp/unused", "--qd0", "swing=3"])
    with pytest.raises(CLIError, match="--q0 'xb': expected NAME=NUMBER"):
        _simulate(["pendulum_block", "--out", "/tmp/unused", "--q0", "xb"])
    with pytest.raises(CLIError, match=r"fourbar is fully driven \(rank 4 of its 4 equations at the consistent "
                                       r"state of t=0 .*\): its motion is prescribed"):
        _simulate(["fourbar", "--out", "/tmp/unused", "--qd0", "xB=1"])
    with pytest.raises(CLIError, match=r"--q0 xB=5: no configuration on the constraints was found that holds it "
                                       r"\(fourbar_free: position problem at t=0.0 did not close"):
        _simulate(["fourbar", "--set", "driven=False", "--out", "/tmp/unused", "--q0", "xB=5"])


def test_model_files_take_options_and_import_their_neighbours(tmp_path, capsys):
    """build(**options) gets --set values (read as Python literals); the file's folder is
    importable while it loads; an unknown option is one clear error."""
    from mbforge.examples import ModelFileError, load_model, parse_options

    (tmp_path / "pend_params.py").write_text("LENGTH = 0.5\n")
    (tmp_path / "pend.py").write_text(
        "from mbforge.model import Model\n"
        "from mbforge.ir import sin\n"
        "import pend_params\n"
        "def build(length=pend_params.LENGTH, name='pend'):\n"
        "    m = Model(name)\n"
        "    th = m.coordinate('th', range=(-2, 2))\n"
        "    m.drive(th - 0.3 * sin(m.t), 'swing')\n"
        "    m.output('tip_x', length * sin(th))\n"
        "    return m\n")
    opts = parse_options(["length=2.0", "name='other'"])
    assert opts == {"length": 2.0, "name": "other"}
    assert load_model(str(tmp_path / "pend.py"), options=opts).name == "other"
    with pytest.raises(ModelFileError, match=r"build\(\) takes no option lenght \(--set\); its options: length, name"):
        load_model(str(tmp_path / "pend.py"), options={"lenght": 1})
    with pytest.raises(ModelFileError, match="example 'fourbar' takes no option speed"):
        load_model("fourbar", options={"speed": 1})
    assert _simulate([str(tmp_path / "pend.py"), "--set", "length=2", "--out", str(tmp_path / "o"),
                      "--points", "5"]) == 0
    rows = (tmp_path / "o" / "pend.csv").read_text().splitlines()
    h = rows[0].split(",")
    last = dict(zip(h, map(float, rows[-1].split(","))))
    assert last["tip_x"] == pytest.approx(2.0 * math.sin(last["q.th"]))


def test_bool_options_read_true_false_1_0_and_refuse_anything_else(tmp_path):
    """--set driven=false must give False (the text "false" is truthy); a yes/no option
    (annotated bool, or a bool default) takes true/false/1/0 in any case, nothing else."""
    from mbforge.examples import ModelFileError, load_model, parse_options

    for text, name in (("false", "fourbar_free"), ("False", "fourbar_free"), ("0", "fourbar_free"),
                       ("true", "fourbar"), ("TRUE", "fourbar"), ("1", "fourbar")):
        assert load_model("fourbar", options=parse_options([f"driven={text}"])).name == name, text
    for text in ("no", "2", "", "'maybe'"):
        with pytest.raises(ModelFileError, match=r"example 'fourbar': option driven is yes or no: "
                                                 r"--set driven=true\|false\|1\|0, got"):
            load_model("fourbar", options=parse_options([f"driven={text}"]))
    (tmp_path / "flag.py").write_text(
        "from mbforge.model import Model\n"
        "def build(wide: bool = None, size=1):\n"
        "    m = Model('wide' if wide else 'narrow')\n"
        "    th = m.coordinate('th', range=(-2, 2))\n"
        "    m.drive(th - 0.1 * size * m.t, 'd')\n"
        "    return m\n")
    assert load_model(str(tmp_path / "flag.py"), options=parse_options(["wide=false"])).name == "narrow"
    assert load_model(str(tmp_path / "flag.py"), options=parse_options(["wide=1", "size=0"])).name == "wide"
    with pytest.raises(ModelFileError, match="option wide is yes or no"):
        load_model(str(tmp_path / "flag.py"), options=parse_options(["wide=yes"]))


def test_simulate_names_files_after_the_default_motion(tmp_path):
    assert _simulate(["stewart", "--out", str(tmp_path), "--points", "3"]) == 0
    assert (tmp_path / "stewart_heave.csv").exists() and (tmp_path / "stewart_heave.png").exists()


def test_simulate_reports_bad_options():
    from mbforge.examples import ModelFileError

    with pytest.raises(ModelFileError, match="example 'stewart' has no motion 'surge'; its motions: heave, yaw"):
        _simulate(["stewart", "--motion", "surge", "--out", "/tmp/unused"])
    with pytest.raises(ModelFileError, match="example 'fourbar' has no motions to choose from"):
        _simulate(["fourbar", "--motion", "heave", "--out", "/tmp/unused"])


BAD_FILES = {
    "missing.py": (None, r"model file \S*missing.py does not exist"),
    "nobuild.py": ("X = 1\n", r"model file \S*nobuild.py defines no build\(\) returning a Model"),
    "syntax.py": ("def build(:\n", r"model file \S*syntax.py: syntax error at line 1"),
    "raises.py": ("import math\n\ndef build():\n    return math.nope\n",
                  r"model file \S*raises.py: build\(\) failed: AttributeError: .*nope.* \(line 4\)"),
    "notmodel.py": ("def build():\n    return 3\n", r"model file \S*notmodel.py: build\(\) returned int, not a Model"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_load_model_names_the_file_and_the_problem(tmp_path, name):
    from mbforge.examples import ModelFileError, load_model
    from mbforge.model import ModelError

    text, pattern = BAD_FILES[name]
    if text is not None:
        (tmp_path / name).write_text(text)
    with pytest.raises(ModelFileError, match=pattern) as e:
        load_model(str(tmp_path / name))
    assert isinstance(e.value, ModelError) and "\n" not in str(e.value)


def test_load_model_by_name_and_by_file(tmp_path):
    from mbforge.examples import ModelFileError, load_model

    assert load_model("stewart", "yaw").name == "stewart"
    with pytest.raises(ModelFileError, match="no example called 'nope' and not a .py or .urdf file; examples: andrews, bricard, chain, delta, fourbar"):
        load_model("nope")
    f = tmp_path / "mine.py"
    f.write_text("from mbforge.examples import fourbar\n\ndef build():\n    return fourbar.build()\n")
    assert load_model(str(f)).name == "fourbar"
    with pytest.raises(ModelFileError, match="--motion applies to shipped examples only"):
        load_model(str(f), "yaw")


def test_cli_reports_a_bad_model_file_in_one_line(tmp_path, capsys):
    from mbforge.cli import main

    (tmp_path / "syntax.py").write_text("def build(:\n")
    assert main(["generate", str(tmp_path / "syntax.py"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mbforge generate: error: model file ") and "syntax error at line 1" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("module", ["mbforge.reference.solvers", "mbforge.simulate.cli", "mbforge.demo",
                                    "mbforge.hdl.cli", "mbforge.kernels.builders", "mbforge.examples"])
def test_modules_import_alone_and_commands_without_the_cli(module):
    """Each imports first in a fresh interpreter (an import cycle through a package's
    __init__ fails exactly there), and a subcommand never imports the CLI that registers it."""
    import subprocess
    import sys

    code = f"import sys, {module}; print('mbforge.cli' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
