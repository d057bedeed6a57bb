"""The multibody benchmark examples (pendulum, N-four-bar) against independent 1-DOF
formulations of their motion: the real `mbforge simulate` command against scipy on the
angle's own equation, written here without any of mbforge's solvers."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

G = 9.81


def _simulate(tmp_path, *args):
    out = tmp_path / "sim"
    r = subprocess.run([str(Path(sys.executable).parent / "mbforge"), "simulate", *args, "--out", str(out), "--points", "201"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    name = args[0]
    data = np.genfromtxt(out / f"{name}.csv", delimiter=",", names=True)
    return data


def _angle(theta0, rate0, accel, t):
    sol = solve_ivp(lambda _t, y: [y[1], accel(y[0])], (t[0], t[-1]), [theta0, rate0], t_eval=t,
                    rtol=1e-12, atol=1e-12, method="DOP853")
    return sol.y[0]


def test_pendulum_follows_the_angle_equation(tmp_path):
    d = _simulate(tmp_path, "pendulum")
    th = _angle(0.0, 0.0, lambda a: -G * np.cos(a), d["t"])  # from horizontal, at rest
    assert np.max(np.abs(d["qx"] - np.cos(th))) < 1e-7
    assert np.max(np.abs(d["qy"] - np.sin(th))) < 1e-7


def test_nfourbar_follows_its_closed_form_through_the_singular_positions(tmp_path):
    n = 4
    d = _simulate(tmp_path, "nfourbar", "--set", f"n={n}")
    inertia, c = (n + 1) / 3 + n, G * ((n + 1) / 2 + n)
    # from the vertical, every point at 1 m/s along +x: theta = pi/2, theta' = -1
    th = _angle(np.pi / 2, -1.0, lambda a: -c * np.cos(a) / inertia, d["t"])
    assert np.min(np.sin(th)) < -0.99 and np.ptp(np.unwrap(th)) > 2 * np.pi  # it turns through the singularities
    for i in range(n + 1):
        assert np.max(np.abs(d[f"qx{i}"] - (i + np.cos(th)))) < 1e-6, i
        assert np.max(np.abs(d[f"qy{i}"] - np.sin(th))) < 1e-6, i
