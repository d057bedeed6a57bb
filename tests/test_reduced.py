"""issue 27 (singular positions in fixed point): the step over a model's independent
coordinates (`--kernel step --reduced`, model.reduce). The N-four-bar with `--set
envelope=True` gives its couplers in closed form (x_i = i + x0, y_i = y0) and declares the
first crank's full turn; its step then integrates (x0, y0) under one distance equation,
whose gradient never vanishes, so the c-fixed step is proved over every crank angle,
singular positions included, where the exact multipliers of all 2N + 1 rows do not exist.

The reduced accelerations are checked against the motion's closed form (I theta'' =
-c cos theta, the energy of nfourbar's docstring, not mbforge's equations), the c-fixed step
against the c-double one within its per-step bound at dense states of the full turn, and
the device run over 10 s on the emulated Cortex-M0 against the full model's reference."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from helpers.steps import assert_within_bound
from mbforge.domain.cover import envelope_cover
from mbforge.examples import load_model
from mbforge.kernels.builders import build_kernel
from mbforge.model.reduce import reduced_equations
from mbforge.pipeline import generate
from mbforge.reference.solvers import Dynamics
from mbforge.verify.hostlib import load_kernel

G = 9.81


def _fixed_and_double(k, tmp_path):
    """(c-fixed folder, its host kernel, the c-double host kernel, c-fixed's per-output bounds) of k."""
    fx, db = tmp_path / "fx", tmp_path / "db"
    generate(k, "c-fixed").write(fx)
    generate(k, "c-double").write(db)
    kf, kd = load_kernel(fx), load_kernel(db)
    return fx, kf, kd, np.concatenate([np.asarray(g.error_bound) for g in kf.manifest.outputs])


def _eqs(n: int):
    return load_model("nfourbar", options={"n": n, "envelope": True}).equations()


@pytest.mark.parametrize("n", [1, 4, 40])
def test_reduced_accelerations_follow_the_closed_form_through_singular_positions(n):
    eqs = _eqs(n)
    red = reduced_equations(eqs)
    assert [s.value.name for s in red.q] == ["x0", "y0"] and red.phi_names == ["crank0_len"]
    inertia, c = (n + 1) / 3 + n, G * ((n + 1) / 2 + n)
    dyn = Dynamics(red)
    rng = np.random.default_rng(1)
    # random angles and the singular positions themselves (every point on the ground line)
    th = np.concatenate([rng.uniform(-math.pi, math.pi, 60), [0.0, math.pi, -math.pi / 2]])
    w = rng.uniform(-7.0, 7.0, len(th))
    for a, b in zip(th, w):
        q = np.array([math.cos(a), math.sin(a)])
        qd = b * np.array([-math.sin(a), math.cos(a)])
        qdd, _ = dyn.accelerations(0.0, q, qd)
        tdd = -c / inertia * math.cos(a)
        want = tdd * np.array([-math.sin(a), math.cos(a)]) - b * b * q
        assert np.abs(qdd - want).max() < 1e-10 * (1 + b * b), (a, b, qdd, want)


def test_fixed_point_reduced_step_holds_its_bound_over_the_full_turn(tmp_path, monkeypatch):
    monkeypatch.setenv("MBFORGE_JOBS", "1")
    eqs = _eqs(4)
    k = build_kernel(eqs, "step", dt=1e-3, integrator="rk4", penalty=0.0, reduced=True)
    assert k.step["coordinates"] == "independent" and k.step["closed_forms"] == [
        f"{a}{i}" for i in range(1, 5) for a in "xy"]
    fx, kf, kd, bound = _fixed_and_double(k, tmp_path)
    assert (bound[:2] < 1e-8).all() and (bound[2:] < 1e-6).all(), bound
    red = reduced_equations(eqs)
    cover = envelope_cover(red)
    S = cover.sample(3_000, 5)
    X = np.column_stack([S[s] for s in list(red.q) + list(red.qd)])
    angle = np.arctan2(X[:, 1], X[:, 0])
    near = np.minimum(np.abs(angle), math.pi - np.abs(angle))
    assert (near < 0.01).sum() >= 5  # the singular positions are among the states checked
    assert_within_bound(fx, kf, kd, X, 2_500)


def test_the_full_coordinate_step_through_singular_positions_points_to_reduced(tmp_path):
    """Without --reduced, the exact multipliers of all 2N + 1 rows do not exist at the
    singular positions the full turn holds: one line that says so and names --reduced."""
    r = subprocess.run([sys.executable, "-m", "mbforge.cli", "generate", "nfourbar", "--set", "n=2", "--set",
                        "envelope=True", "--kernel", "step", "--dt", "1e-3", "--integrator", "rk4", "--penalty", "0",
                        "--target", "c-fixed", "--out", str(tmp_path / "k")], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and not (tmp_path / "k").exists(), r.stderr
    assert "needs independent constraints" in lines[0] and "or --reduced (the step over the independent" in lines[0]


def test_reduced_step_refuses_a_model_without_closed_forms_in_one_line():
    r = subprocess.run([sys.executable, "-m", "mbforge.cli", "generate", "pendulum", "--kernel", "step", "--dt", "1e-3",
                        "--reduced", "--target", "c-double", "--out", "unused"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "mbforge generate: error: step: --reduced: pendulum: equations in the independent coordinates need explicit "
        "(closed-form) dependent coordinates (Model.explicit); the model has none"]


@pytest.mark.slow
@pytest.mark.firmware
def test_fixed_point_full_turns_on_the_cortex_m0(tmp_path):
    """The N-four-bar (N = 4) turning fully for 10 s at dt 1 ms, c-fixed on the emulated
    micro:bit (16 MHz Cortex-M0): bit-exact with the host build, within 1e-5 m of the full
    model's reference (measured 1.6e-6 m), faster than real time (2.2x measured, 7,292
    instructions per step), and the CSV holds every coordinate of the full model."""
    out = tmp_path / "dev"
    p = subprocess.run([sys.executable, "-m", "mbforge.cli", "simulate", "nfourbar", "--set", "n=4", "--set",
                        "envelope=True", "--device", "emulated_microbit", "--target", "c-fixed", "--dt", "1e-3",
                        "--integrator", "rk4", "--penalty", "0", "--reduced", "--t-end", "10", "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads((out / "report.json").read_text())
    assert r["status"] == 0 and r["steps"] == 10_000 and r["step"]["n_state"] == 4
    assert r["step"]["coordinates"] == "independent" and r["coordinates"] == 10
    assert r["divergence"]["host_same_kernel"]["bit_exact"]
    assert 1e-9 < r["divergence"]["reference"]["q_max_abs"] < 1e-5, r["divergence"]
    assert r["constraint_residual_max"] < 1e-7
    assert r["timing"]["real_time_factor"] > 1 and r["timing"]["overruns"] == 0
    header = (out / "nfourbar.csv").read_text().splitlines()[0].split(",")
    assert [h for h in header if h.startswith("q.")] == [f"q.{a}{i}" for i in range(5) for a in "xy"]
    # the cranks turned: x0 changed sign through the singular positions more than twice
    rows = np.loadtxt(out / "nfourbar.csv", delimiter=",", skiprows=1)
    y0 = rows[:, header.index("q.y0")]
    assert np.count_nonzero(np.diff(np.sign(y0))) >= 4


def _stewart_states(red, kernel, count: int, seed: int) -> np.ndarray:
    """Consistent (z, zd) of the Stewart's envelope and actuator forces over their ranges, as
    rows of the reduced kernel's inputs (q, qd, u)."""
    S = envelope_cover(red).sample(count, seed)
    X = np.column_stack([S[s] for s in list(red.q) + list(red.qd)])
    ur = np.array(kernel.inputs[-1].ranges)
    U = np.random.default_rng(seed).uniform(ur[:, 0], ur[:, 1], (len(X), len(ur)))
    return np.column_stack([X, U])


def test_stewart_forward_dynamics_over_its_platform_coordinates_in_fixed_point(tmp_path, monkeypatch):
    """issue 33: the Stewart's forward dynamics over all 98 coordinates has a pivot that
    range analysis encloses across 0 over the workspace, so it has no c-fixed kernel;
    `--reduced` solves it over the platform's 7 coordinates (Euler normalisation, one
    multiplier). Its accelerations agree with the 98-coordinate kernel's at consistent states
    of the envelope (two formulations: the KKT matrix of 98 + 92 unknowns against R^T M R
    over 7 + 1), and the c-fixed kernel holds its bounds there."""
    monkeypatch.setenv("MBFORGE_JOBS", "1")
    eqs = load_model("stewart").equations()
    red = reduced_equations(eqs)
    k = build_kernel(eqs, "forward-dynamics", reduced=True)
    assert [p.name for p in k.inputs] == ["q", "qd", "u"] and len(k.inputs[0].symbols) == 7
    assert "independent coordinates" in k.description
    full = build_kernel(eqs, "forward-dynamics")
    dirs = {name: tmp_path / name for name in ("fx", "db", "full")}
    generate(k, "c-fixed").write(dirs["fx"])
    generate(k, "c-double").write(dirs["db"])
    generate(full, "c-double").write(dirs["full"])
    kf, kd, kfull = (load_kernel(dirs[n]) for n in ("fx", "db", "full"))
    X = _stewart_states(red, k, 400, 7)
    Yd, sd = kd(X)
    assert (sd == 0).all()
    # the same states over all 98 coordinates (the closed forms), t = 0: the full kernel's platform rows
    from mbforge.model.reduce import expand

    Q, QD = expand(red, np.zeros(len(X)), X[:, :7], X[:, 7:14])
    ins = [p.name for p in full.inputs]
    cols = {"q": Q, "qd": QD, "t": np.zeros((len(X), 1)), "u": X[:, 14:]}
    Yf, sf = kfull(np.column_stack([cols[n] for n in ins]))
    assert (sf == 0).all()
    plat = [eqs.q.index(s) for s in red.q]
    scale = np.abs(Yd[:, :7]).max()
    assert np.abs(Yf[:, plat] - Yd[:, :7]).max() < 1e-9 * scale, np.abs(Yf[:, plat] - Yd[:, :7]).max()
    # c-fixed within its bounds at 4,000 states of the envelope
    from mbforge.verify.vectors import from_raw, to_raw

    m = kf.manifest
    bound = np.concatenate([np.asarray(g.error_bound) for g in m.outputs])
    assert np.isfinite(bound).all() and bound[:7].max() < 1e-4, bound
    X = _stewart_states(red, k, 4_000, 11)
    Xr = from_raw(m, to_raw(m, X), "inputs")
    Yx, sx = kf(to_raw(m, Xr))
    Yd, sd = kd(Xr)
    assert (sx == 0).all() and (sd == 0).all()
    err = np.abs(from_raw(m, Yx) - Yd)
    assert (err <= bound).all() and err.max() > 0, (err.max(0), bound)


def test_the_delta_robots_fixed_point_step_over_its_cylinder_workspace(tmp_path, monkeypatch):
    """issue 33 (fixed-point forward dynamics make fixed-point steps): the delta robot's rk4
    step over its platform coordinates (--reduced) and its cylinder workspace, the motor
    torques held over the step within the envelope's +-10 N m. Its host reference run (the
    motors off) falls out of the workspace: it ends where it leaves the declared ranges. At
    2,000 states of the workspace the c-fixed step stays within its per-step bound of the
    c-double one (measured on the emulated M4F over 0.15 s of free fall: 2.9e-8 m from the
    full model's reference, bit-exact with the host build)."""
    monkeypatch.setenv("MBFORGE_JOBS", "1")
    eqs = load_model("delta", options={"workspace": "cylinder"}).equations()
    k = build_kernel(eqs, "step", dt=1e-3, integrator="rk4", reduced=True)
    assert k.inputs[-1].name == "u"
    z = np.asarray(k.motion)[:, 2] + k.step["q_offset"][2]  # P_z along the reference run (positions shifted)
    assert len(z) >= 3 and z.min() >= -0.9 and z[-1] < -0.85, z  # it fell, and stopped inside the workspace
    fx, kf, kd, bound = _fixed_and_double(k, tmp_path)
    assert (bound[:3] < 1e-8).all() and (bound[3:] < 1e-4).all(), bound
    u = json.loads((fx / "manifest.json").read_text())["inputs"][-1]
    assert u["name"] == "u" and u["envelope"] == [[-10.0, 10.0]] * 3  # analysed over the envelope's forces
    red = reduced_equations(eqs)
    S = envelope_cover(red).sample(2_000, 3)
    X = np.column_stack([S[s] for s in list(red.q) + list(red.qd)])
    U = np.random.default_rng(4).uniform(-10.0, 10.0, (len(X), 3))
    assert_within_bound(fx, kf, kd, np.column_stack([X, U]), 1_500)
