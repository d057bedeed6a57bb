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


def _double_pendulum_accelerations(a, b, ad, bd):
    """Two uniform rods of 1 kg and 1 m, absolute angles a, b from +x, gravity -y: the
    Lagrangian's equations, M [a'', b''] = f, written out by hand."""
    c = 0.5 * np.cos(a - b)  # m l^2 / 2 cos(a - b)
    M = np.array([[1 / 3 + 1, c], [c, 1 / 3]])
    s = 0.5 * np.sin(a - b)
    f = np.array([-s * bd ** 2 - 1.5 * G * np.cos(a), s * ad ** 2 - 0.5 * G * np.cos(b)])
    return np.linalg.solve(M, f)


def test_chain_of_two_is_the_double_pendulum():
    from mbforge.examples import load
    from mbforge.reference import Dynamics

    d = Dynamics(load("chain", n=2).equations())
    rng = np.random.default_rng(3)
    for q, qd in zip(rng.uniform(-3, 3, (20, 2)), rng.uniform(-5, 5, (20, 2))):
        qdd, _ = d.accelerations(0.0, q, qd)
        add, bdd = _double_pendulum_accelerations(q[0], q[0] + q[1], qd[0], qd[0] + qd[1])
        assert np.allclose(qdd, [add, bdd - add], rtol=0, atol=1e-10), (q, qd)


def test_chain_keeps_its_energy(tmp_path):
    d = _simulate(tmp_path, "chain", "--set", "n=3", "--t-end", "2")
    # the tip from the angles, summed by hand: every link 1 m, relative angles
    phi = np.cumsum(np.stack([d["qth0"], d["qth1"], d["qth2"]]), axis=0)
    assert np.allclose(d["tip_x"], np.cos(phi).sum(axis=0), atol=1e-12)
    assert np.allclose(d["tip_y"], np.sin(phi).sum(axis=0), atol=1e-12)
    assert np.min(d["tip_y"]) < -2.5  # it falls
    # T + V from the angles and rates by hand (uniform rods: centres at half length, I = 1/12)
    w = np.cumsum(np.stack([d["qdth0"], d["qdth1"], d["qdth2"]]), axis=0)
    y = np.cumsum(np.sin(phi), axis=0) - 0.5 * np.sin(phi)
    vx = np.cumsum(-np.sin(phi) * w, axis=0) + 0.5 * np.sin(phi) * w
    vy = np.cumsum(np.cos(phi) * w, axis=0) - 0.5 * np.cos(phi) * w
    T = (0.5 * (vx ** 2 + vy ** 2) + w ** 2 / 24).sum(axis=0)
    E = T + G * y.sum(axis=0)
    assert np.max(np.abs(E - E[0])) < 1e-8 * np.max(T)
