"""The planar examples: kinematics against closed forms, inverse dynamics against energy,
forward dynamics (energy drift, constraint residual), declared ranges, and `simulate`."""
import argparse
import csv
import math

import numpy as np
import pytest

from mbforge.examples import EXAMPLES, fourbar, load, motions
from mbforge.model import Dynamics, Kinematics

W = 10 * 2 * math.pi / 60


def test_examples_by_name():
    assert set(EXAMPLES) == {"fourbar", "slidercrank", "pendulum_block", "slidercrank_disc", "stewart",
                             "stewart_relative"}
    for name in EXAMPLES:
        assert load(name).name == name
    assert motions("stewart") == ("heave", "yaw", "roll", "pitch") == motions("stewart_relative")
    assert motions("fourbar") == ()
    with pytest.raises(KeyError, match="no example called 'nope'; known: fourbar"):
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
    from mbforge.reference import cli

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
    assert header[7:] == [f"L{k}" for k in range(1, 7)] + [f"L{k}_d" for k in range(1, 7)] + \
        [f"f{k}" for k in range(1, 7)]
    data = np.array(rows[1:], dtype=float)
    assert data.shape == (11, 25)
    assert np.allclose(data[:, 6], math.pi / 18 * np.sin(5 * data[:, 0]), atol=1e-10)
    png = tmp_path / "stewart_relative_yaw.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_free_model_runs_forward_dynamics(tmp_path, capsys):
    assert _simulate(["pendulum_block", "--out", str(tmp_path), "--points", "21", "--t-end", "2"]) == 0
    assert "forward dynamics" in capsys.readouterr().out
    header = (tmp_path / "pendulum_block.csv").read_text().splitlines()[0].split(",")
    assert header == ["t", "swing_angle", "bob_x", "bob_y", "T", "E", "V"]


def test_simulate_names_files_after_the_default_motion(tmp_path):
    assert _simulate(["stewart", "--out", str(tmp_path), "--points", "3"]) == 0
    assert (tmp_path / "stewart_heave.csv").exists() and (tmp_path / "stewart_heave.png").exists()


def test_simulate_reports_bad_options():
    from mbforge.cli import CLIError

    with pytest.raises(CLIError, match="example 'stewart' has no motion 'surge'; its motions: heave, yaw"):
        _simulate(["stewart", "--motion", "surge", "--out", "/tmp/unused"])
    with pytest.raises(CLIError, match="example 'fourbar' has no motions to choose from"):
        _simulate(["fourbar", "--motion", "heave", "--out", "/tmp/unused"])
