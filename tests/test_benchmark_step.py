"""Andrews' squeezer and the rigid flyball governor (issue 27, item 4): the shipped examples
`andrews` and `governor` through the real `mbforge simulate` and their step kernels (compiled
C on the host), against references written without mbforge.

andrews: the IVP test set's published state at t = 0.03 s (andrews.f SOLN: PSIDE at
rtol = atol = 1e-14) and the test set's own equations in numpy (helpers.andrews_hw), which
reach that state within 1.4e-9 rad. Tolerances (all seven angles): host simulate 1e-8 rad
at every sample (measured 1.4e-9); the c-double step at dt 2e-5 s 5e-4 rad at every
sample (measured 2.8e-4: the trapezoidal rule's second order, 1e-5 s gives 6.2e-5); the
c-float32 step within 1e-3 rad of the c-double step (measured 4.1e-4).

governor: its motion in the two minimal coordinates (alpha, the arms' angle, and psi, the
spin) from the Lagrangian written here in closed form. Tolerances: host simulate 1e-9 rad
(measured 1.3e-11); the c-double step at dt 2e-3 s 3e-4 rad (measured 1.9e-4), its error
falling by about 4 when dt halves; the c-float32 step within 1e-4 rad of the c-double step
(measured 2.6e-5).

On the emulated M4F (`mbforge simulate --device emulated_f405`, float32): the device's run is
the host build's bit for bit, within 1e-3 rad of the reference over the horizon (measured
4.2e-4 for andrews at dt 2e-5, 2.5e-4 for governor at dt 2e-3) and faster than real time.
"""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from helpers import andrews_hw as hw
from helpers.builds import MBFORGE
from helpers.steps import generate_step, run_steps

ANGLES = ["beta", "theta", "gamma", "phi", "delta", "omega", "epsilon"]


def _simulate(tmp_path, model, points):
    """The host simulate's samples, checked inside the model's declared ranges (q, qd, qdd)."""
    from mbforge.examples import load

    r = subprocess.run([str(MBFORGE), "simulate", model, "--out", str(tmp_path / "sim"), "--points", str(points)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    d = np.genfromtxt(tmp_path / "sim" / f"{model}.csv", delimiter=",", names=True)
    eqs = load(model).equations()
    for group, syms in (("q", eqs.q), ("qd", eqs.qd), ("qdd", eqs.qdd)):
        for q, s in zip(eqs.q, syms):
            lo, hi = eqs.ranges[s]
            col = d[group + q.value.name]
            assert lo < col.min() and col.max() < hi, (group, q.value.name, col.min(), col.max(), lo, hi)
    return d


# ---- Andrews' squeezer ---------------------------------------------------------------------------

def test_andrews_equations_are_the_test_sets():
    """mbforge's M and accelerations from the bodies and loops against the test set's
    closed forms at consistent states off the motion."""
    from mbforge.examples import load
    from mbforge.reference import Dynamics

    d = Dynamics(load("andrews").equations())
    assert [s.value.name for s in d.eqs.q] == ANGLES
    rng = np.random.default_rng(5)
    for _ in range(5):
        q, qd = hw.project(hw.Q0 + rng.uniform(-0.3, 0.3, 7), rng.uniform(-300, 300, 7))
        M, _, _ = d.mass_matrix(0.0, q, qd)
        assert np.allclose(M, hw.mass(q), rtol=0, atol=1e-15)
        qdd, _ = d.accelerations(0.0, q, qd)
        ref, _ = hw.accelerations(q, qd)
        assert np.max(np.abs(qdd - ref)) < 1e-10 * np.max(np.abs(ref)), (q, qd)
    qdd, _ = d.accelerations(0.0, hw.Q0, np.zeros(7))
    assert np.allclose(qdd, hw.QDD0, rtol=1e-12, atol=1e-9)  # the test set's consistent accelerations


def test_simulate_andrews_reaches_the_published_state(tmp_path):
    d = _simulate(tmp_path, "andrews", 301)
    q = np.column_stack([d[f"q{a}"] for a in ANGLES])
    assert d["t"][-1] == hw.T_END
    assert np.max(np.abs(q[-1] - hw.Q_REF)) < 1e-8  # measured 1.4e-9 rad
    Q, QD = hw.motion(d["t"])
    assert np.max(np.abs(Q[-1] - hw.Q_REF)) < 1e-8 and np.max(np.abs(QD[-1] - hw.QD_REF)) < 1e-5  # the reference's own
    assert np.max(np.abs(q - Q)) < 1e-8
    assert q[-1, 0] > 15.0  # the crank turned about 2.5 times


@pytest.mark.host
def test_andrews_step_kernels_over_the_horizon(tmp_path):
    runs = {}
    for target in ("c-double", "c-float32"):
        out = generate_step(tmp_path, "andrews", "--dt", "2e-5", "--target", target, name=target)
        runs[target] = run_steps(out, "andrews", every_s=2e-4)
    t, q = runs["c-double"]
    assert len(t) == 150 and abs(t[-1] - hw.T_END) < 1e-12
    Q, _ = hw.motion(np.concatenate([[0.0], t]))
    err = np.max(np.abs(q - Q[1:]))
    assert 1e-5 < err < 5e-4, err  # the trapezoidal rule's own error, not a copy of the reference
    assert np.max(np.abs(q[-1] - hw.Q_REF)) < 5e-4
    drift = np.max(np.abs(runs["c-float32"][1] - q))
    assert drift < 1e-3, drift


# ---- the rigid flyball governor ------------------------------------------------------------------

def _governor_reference(t):
    """(alpha, psi) at t: per arm side, in the shaft's turning plane, hinge T at height H,
    the couplers (length S = the arm's point C at S from T) making a rhombus, so the slider
    sits at H - 2 S cos(alpha). With s, c = sin, cos(alpha):
        T = J(alpha) psi'^2 / 2 + m(alpha) alpha'^2 / 2,  J = J0 + 2 K s^2,  m = 2 K + B s^2
    (K: an arm rod, its ball and a coupler about the hinge; B: the coupler's and the slider's
    vertical motion), V = KV (1 - c) + const; Lagrange: (J psi')' = 0 and
    m alpha'' + m' alpha'^2 / 2 - J' psi'^2 / 2 + V' = 0."""
    from mbforge.examples import governor as g

    mc = g.M_ROD * g.S / g.L
    j0 = g.M_ROD * g.WIDTH ** 2 / 6 + g.M_SLIDER * g.SLIDER_SIDE ** 2 / 6
    k = g.M_ROD * g.L ** 2 / 3 + g.M_BALL * g.L ** 2 + mc * g.S ** 2 / 3
    b = 4 * (mc + g.M_SLIDER) * g.S ** 2
    kv = g.G * (2 * (g.M_ROD * g.L / 2 + g.M_BALL * g.L + 1.5 * mc * g.S) + 2 * g.M_SLIDER * g.S)

    def rhs(_t, y):
        a, ad, _, pd = y
        s, c = np.sin(a), np.cos(a)
        J, dJ, m, dm = j0 + 2 * k * s * s, 4 * k * s * c, 2 * k + b * s * s, 2 * b * s * c
        return [ad, (0.5 * dJ * pd ** 2 - 0.5 * dm * ad ** 2 - kv * s) / m, pd, -dJ * ad * pd / J]

    sol = solve_ivp(rhs, (0.0, t[-1]), [g.ALPHA0, 0.0, 0.0, g.SPIN0], t_eval=t, method="DOP853",
                    rtol=1e-12, atol=1e-12)
    assert sol.success
    return sol.y[0], sol.y[2]


def _governor_error(t, q):
    """Largest |q - reference| over psi, a1, b1, a2, b2 (b = -2 alpha: the rhombus)."""
    alpha, psi = _governor_reference(t)
    ref = np.column_stack([psi, alpha, -2 * alpha, alpha, -2 * alpha])
    return np.max(np.abs(q - ref))


def test_simulate_governor_follows_its_minimal_coordinates(tmp_path):
    d = _simulate(tmp_path, "governor", 201)
    q = np.column_stack([d[f"q{n}"] for n in ("psi", "a1", "b1", "a2", "b2")])
    assert _governor_error(d["t"], q) < 1e-9  # measured 1.3e-11
    alpha, _ = _governor_reference(d["t"])
    assert np.ptp(alpha) > 0.25 and np.min(d["qdpsi"]) < 3.0  # the arms swing out, the spin halves
    assert np.max(np.abs(d["slider_z"] - (1.0 - np.cos(alpha)))) < 1e-9


@pytest.mark.host
def test_governor_step_kernels_converge_at_second_order(tmp_path):
    errs, runs = {}, {}
    for dt, target in (("2e-3", "c-double"), ("1e-3", "c-double"), ("2e-3", "c-float32")):
        out = generate_step(tmp_path, "governor", "--dt", dt, "--target", target, name=f"{target}{dt}")
        runs[dt, target] = t, q = run_steps(out, "governor", every_s=0.02)
        errs[dt, target] = _governor_error(t, q)
        assert json.loads((out / "manifest.json").read_text())["step"]["integrator"] == "ali3p"
    assert errs["2e-3", "c-double"] < 3e-4, errs
    ratio = errs["2e-3", "c-double"] / errs["1e-3", "c-double"]
    assert 4 * 0.6 < ratio < 4 * 1.6, errs
    drift = np.max(np.abs(runs["2e-3", "c-float32"][1] - runs["2e-3", "c-double"][1]))
    assert drift < 1e-4, drift


# ---- on the emulated board -----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.firmware
@pytest.mark.parametrize("model, dt, t_end", [("andrews", "2e-5", "0.03"), ("governor", "2e-3", "2")])
def test_benchmark_float32_on_the_emulated_board(tmp_path, model, dt, t_end):
    out = tmp_path / "dev"
    r = subprocess.run([str(MBFORGE), "simulate", model, "--device", "emulated_f405", "--target", "c-float32",
                        "--dt", dt, "--t-end", t_end, "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["status"] == 0 and rep["steps"] == rep["horizon_steps"] == round(float(t_end) / float(dt))
    assert rep["divergence"]["host_same_kernel"]["bit_exact"]
    assert rep["divergence"]["reference"]["q_max_abs"] < 1e-3, rep["divergence"]
    assert rep["timing"]["real_time_factor"] > 1 and rep["timing"]["overruns"] == 0, rep["timing"]
    if model == "andrews":  # the published state, from the device's own last sample
        d = np.genfromtxt(out / "andrews.csv", delimiter=",", names=True)
        assert abs(d["t"][-1] - hw.T_END) < 1e-12
        assert np.max(np.abs([d[f"q{a}"][-1] - v for a, v in zip(ANGLES, hw.Q_REF)])) < 5e-4  # measured 8.4e-5
