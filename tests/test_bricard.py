"""Redundant constraints (issue 31, item 7): the Bricard linkage (IFToMM benchmark A04) through
the real `mbforge simulate` command line, checked against a formulation of its own written
here, and "fully driven" decided by rank.

The independent reference: minimal coordinates. The open chain of the five bars in its own
relative angles a1..a5 (numpy rotations, geometric Jacobians, nothing of mbforge), a1 = s the
one independent coordinate, a2..a5 solved from four of the five closure equations by Newton
(the fifth checked), dtheta/ds from the closure's Jacobian, and the one-degree-of-freedom
Lagrange equation  m(s) s'' + m'(s) s'^2 / 2 + V'(s) = 0,  m = N^T M N,  with m' and V' by the
complex step (exact to rounding: every function here is analytic), integrated by scipy's
DOP853 at rtol = atol = 1e-12. The benchmark's published P3 curve is not available offline;
this reference stands in for it.

The c-fixed step (issue 27, item 4: `--set envelope=True`, rk4 --penalty 0 through the KKT
matrix of the five independent loop rows) is checked against the c-double step at random
states of its envelope and against the reference over 1 s; the envelope's rate and
acceleration bounds against this file's energy.

Tolerances: P3 within 1e-8 m of the reference over the 10 s (measured: 7e-12 m from rest,
5e-12 m with --qd0 th1=0.5), energy_drift within 1e-8 J (measured 1e-13 J: simulate
projects every 0.04 s), the constraint residual columns below 1e-10 (measured 2e-14).
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp

ROOT = Path(__file__).resolve().parents[1]
MBFORGE = [str(Path(sys.executable).parent / "mbforge")]  # the installed command line

# the open chain from the ground joint at P1 = (0, 0, 0): joint axes (in the parent's frame,
# equal in the child's) and each bar as a vector in its own frame; the loop closes at P6 =
# (0, 0, 1) with the sixth joint's axis, x of the fifth bar, along the ground's x
AXES = np.eye(3)[[1, 2, 0, 1, 2]]
BARS = np.array([[1, 0, 0], [0, -1, 0], [0, 0, 1], [-1, 0, 0], [0, 1, 0]], float)
P6 = np.array([0.0, 0.0, 1.0])
MASS, G, ROD = 1.0, 9.81, 1.0 / 12.0
CLOSE_ROWS = [0, 1, 2, 3]  # the closure rows Newton solves: x, y, z of P6 and the axis' y (its z is checked)
H = 1e-30  # complex step


def _rot(axis, a):
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]], float)
    return np.eye(3) + np.sin(a) * K + (1 - np.cos(a)) * (K @ K)


def _chain(th):
    """Per bar: rotation to the world, centre of mass, joint origin, joint axis (world); the
    chain's end and the fifth bar's rotation."""
    R, p, bars = np.eye(3), np.zeros(3, dtype=th.dtype), []
    for k in range(5):
        axis = R @ AXES[k]
        R = R @ _rot(AXES[k], th[k])
        bars.append((R, p + R @ (0.5 * BARS[k]), p, axis))
        p = p + R @ BARS[k]
    return bars, p, R


def _closure(th):
    """The five closure equations and their Jacobian (geometric, analytic in th)."""
    bars, end, R5 = _chain(th)
    ex = R5[:, 0]
    F = np.concatenate([end - P6, ex[1:]])
    J = np.array([np.concatenate([np.cross(axis, end - o), np.cross(axis, ex)[1:]]) for _, _, o, axis in bars]).T
    return F, J


def _dependent(s, guess):
    """a2..a5 at a1 = s (complex for the step), from `guess`, by Newton on CLOSE_ROWS."""
    th = np.concatenate([[s], np.asarray(guess, dtype=complex if np.iscomplexobj(s) else float)])
    for _ in range(40):
        F, J = _closure(th)
        step = np.linalg.solve(J[CLOSE_ROWS][:, 1:], F[CLOSE_ROWS])
        th[1:] = th[1:] - step
        if np.max(np.abs(step)) < 1e-15:
            break
    return th


def _mass_energy(th):
    """(m, V) on the curve: N = dtheta/ds from the closure rows, m = N^T M N."""
    bars, _, _ = _chain(th)
    _, J = _closure(th)
    N = np.concatenate([[1.0], -np.linalg.solve(J[CLOSE_ROWS][:, 1:], J[CLOSE_ROWS][:, 0])])
    m, V = 0.0, 0.0
    for k, (R, c, _, _) in enumerate(bars):
        Jv = np.array([np.cross(axis, c - o) if j <= k else np.zeros(3) for j, (_, _, o, axis) in enumerate(bars)]).T
        Jw = np.array([axis if j <= k else np.zeros(3) for j, (_, _, _, axis) in enumerate(bars)]).T
        inertia = R @ np.diag(ROD * (1.0 - np.abs(BARS[k]))) @ R.T  # thin rod: none about its own axis
        v, w = Jv @ N, Jw @ N
        m = m + MASS * (v @ v) + w @ inertia @ w
        V = V + MASS * G * c[1]
    return m, V


class Reference:
    """The minimal-coordinates Bricard: s = a1, the joint angle at P1."""

    def __init__(self):
        self.last = np.zeros(4)

    def state(self, s):
        th = _dependent(s, self.last)
        self.last = th[1:].real
        return th

    def rhs(self, t, y):
        s, sd = y
        th = self.state(s)
        m, _ = _mass_energy(th)
        mc, Vc = _mass_energy(_dependent(s + 1j * H, th[1:]))
        dm, dV = mc.imag / H, Vc.imag / H
        return [sd, -(0.5 * dm * sd ** 2 + dV) / m.real]

    def run(self, times, sd0):
        sol = solve_ivp(self.rhs, (times[0], times[-1]), [0.0, sd0], method="DOP853", t_eval=times,
                        rtol=1e-12, atol=1e-12)
        assert sol.success
        out = []
        self.last = np.zeros(4)
        for s, sd in sol.y.T:
            th = self.state(s)
            F, _ = _closure(th)
            assert np.max(np.abs(F)) < 1e-12  # the fifth closure equation holds too
            m, V = _mass_energy(th)
            bars, _, _ = _chain(th)
            out.append([*(bars[1][0] @ BARS[1] + bars[1][2]), 0.5 * m * sd ** 2 + V, s])
        return np.array(out)


def _simulate(tmp_path, *extra):
    env = {**os.environ, "MBFORGE_CACHE_DIR": "off"}
    r = subprocess.run([*MBFORGE, "simulate", "bricard", "--out", str(tmp_path), *extra], capture_output=True,
                       text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    with open(tmp_path / "bricard.csv") as f:
        rows = list(csv.reader(f))
    return r, rows[0], np.array(rows[1:], dtype=float)


@pytest.mark.parametrize("qd0", [None, 0.5], ids=["from_rest", "qd0"])
def test_simulate_bricard_matches_an_independent_formulation(tmp_path, qd0):
    r, header, data = _simulate(tmp_path, *(["--qd0", f"th1={qd0}"] if qd0 else []))
    assert "forward dynamics" in r.stdout
    assert "1 redundant equation(s)" in r.stderr  # said once, in one line
    assert header[-3:] == ["residual_phi", "residual_vel", "energy_drift"]
    col = {h: data[:, i] for i, h in enumerate(header)}
    assert np.max(col["residual_phi"]) < 1e-10 and np.max(col["residual_vel"]) < 1e-10
    assert np.max(np.abs(col["energy_drift"])) < 1e-8
    assert np.max(col["T"]) > 4.0  # it swings: about 4.6 J of kinetic energy from rest
    ref = Reference().run(col["t"], qd0 or 0.0)
    P3 = np.column_stack([col["P3_x"], col["P3_y"], col["P3_z"]])
    err = np.max(np.abs(P3 - ref[:, :3]))
    assert err < 1e-8, f"P3 off the reference by {err:.3g} m"
    assert np.max(np.abs(col["q.th1"] - ref[:, 4])) < 1e-8  # the same joint angle, the same sign
    assert np.max(np.abs(ref[:, 3] - ref[0, 3])) < 1e-9  # the reference conserves its energy too
    assert np.max(np.abs(col["E"] - ref[:, 3])) < 1e-6  # and both have the same energy


def test_fully_driven_is_decided_by_rank():
    """Bricard: 6 equations for 6 coordinates, rank 5: one free degree of freedom, not
    driven; with a driver on th1 (7 equations, rank 6) fully driven; with a duplicated
    closure equation (7 equations, rank 5) still free."""
    from mbforge.examples.bricard import build
    from mbforge.ir import sin
    from mbforge.kernels.builders import build_kernel
    from mbforge.kernels.common import KernelError
    from mbforge.reference.solvers import RANK_TOL, Kinematics, mobility

    free = mobility(build().equations())
    assert (free.n, free.equations, free.rank, free.driven, free.redundant) == (6, 6, 5, False, 1)
    assert f"rank 5 of its 6 equations at the consistent state of t=0 (SVD, singular values below " \
           f"{RANK_TOL:g} x the largest count as zero): 1 free degree(s) of freedom, 1 redundant" in free.describe()

    m = build()
    m.drive(m.q[0] - 0.3 * sin(m.t), "swing")
    eqs = m.equations()
    driven = mobility(eqs)
    assert (driven.equations, driven.rank, driven.driven) == (7, 6, True)
    Q, QD, _ = Kinematics(eqs).motion(np.linspace(0.0, 1.0, 5))  # a prescribed motion, redundant rows and all
    assert np.allclose(Q[:, 0], 0.3 * np.sin(np.linspace(0.0, 1.0, 5)), atol=1e-12)
    with pytest.raises(KernelError, match=r"square Phi_q: 7 equations .* rank 6 of its 7 equations .* 1 redundant"):
        build_kernel(eqs, "kinematics")
    with pytest.raises(KernelError, match=r"inverse-dynamics kernel solves a square .* rank 6 of its 7 .* 1 redundant"):
        build_kernel(eqs, "inverse-dynamics")

    m = build()
    m.constraint(m.q[0] - m.q[2], "symmetry")  # holds on the whole motion (th1 = th3): redundant
    twice = mobility(m.equations())
    assert (twice.equations, twice.rank, twice.driven) == (7, 5, False)
    with pytest.raises(KernelError, match=r"needs a fully driven model .* rank 5 of its 7 equations"):
        build_kernel(m.equations(), "kinematics")


def test_simulate_a_driven_model_with_a_redundant_equation(tmp_path):
    """A driven model with one redundant equation runs kinematically, and --qd0 is refused
    because it is fully driven (by rank)."""
    model = tmp_path / "bricard_driven.py"
    model.write_text("from mbforge.examples.bricard import build as bricard\nfrom mbforge.ir import sin\n\n\n"
                     "def build():\n    m = bricard()\n    m.drive(m.q[0] - 0.3 * sin(m.t), 'swing')\n    return m\n")
    env = {**os.environ, "MBFORGE_CACHE_DIR": "off"}
    run = [*MBFORGE, "simulate", str(model), "--out", str(tmp_path / "o"), "--points", "11", "--t-end", "1"]
    r = subprocess.run(run, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert "bricard: kinematics, 11 points" in r.stdout
    rows = (tmp_path / "o" / "bricard.csv").read_text().splitlines()
    assert rows[0].split(",")[-2:] == ["residual_phi", "residual_vel"]
    data = np.array([x.split(",") for x in rows[1:]], dtype=float)
    assert np.max(data[:, -2:]) < 1e-10
    r = subprocess.run(run + ["--qd0", "th1=1"], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(
        "mbforge simulate: error: bricard is fully driven (rank 6 of its 7 equations")


def test_the_declared_envelope_holds_the_motion_by_energy():
    """--set envelope=True declares th1 in [-MARGIN, pi + MARGIN] at rates within RATE and
    accelerations within ACCEL. From rest at the cube, energy keeps th1 where V(th1) <= V(0):
    on this file's own formulation (m(s), V(s) on the curve, m' and V' by the complex step)
    V rises above V(0) just outside [0, pi], and inside it th1'^2 = 2 (V(0) - V) / m and
    |th1''| = |V' + m' th1'^2 / 2| / m stay within the declared bounds (measured 2.2286 rad/s
    and 2.2144 rad/s^2, declared 5 % above)."""
    from mbforge.examples.bricard import ACCEL, MARGIN, RATE, build

    ref = Reference()
    rate, accel, V0 = 0.0, 0.0, None
    for s in np.linspace(0.0, np.pi, 401):
        th = ref.state(s)
        m, V = _mass_energy(th)
        mc, Vc = _mass_energy(_dependent(s + 1j * H, th[1:]))
        V0 = V if V0 is None else V0
        w2 = max(0.0, 2 * (V0 - V) / m)
        rate, accel = max(rate, w2 ** 0.5), max(accel, abs(Vc.imag / H + 0.5 * mc.imag / H * w2) / m)
    assert 2.2 < rate < RATE / 1.04 and 2.2 < accel < ACCEL / 1.04, (rate, accel)
    for s, guess in ((-0.5 * MARGIN, np.zeros(4)), (np.pi + 0.5 * MARGIN, ref.state(np.pi)[1:])):
        assert _mass_energy(_dependent(s, guess))[1] > V0 + 1e-3  # out of reach from rest
    env = build(envelope=True).envelope
    (q,) = env.quantities
    assert (q.name, q.range, q.rate, q.accel) == ("th1", (-MARGIN, np.pi + MARGIN), (-RATE, RATE), (-ACCEL, ACCEL))
    assert not build().envelope  # off by default: kernels that take every row refuse the redundant one


def _envelope_states(eqs, count, seed, residual=0.0):
    """Random states of the envelope: th1 uniform over the declared range, its rate uniform
    within RATE, the other angles by Newton on the loop (continued along th1) and the rates
    along the loop's tangent; with residual, the positions and then the velocities moved
    off the kept rows (close_x .. close_ry) in a random direction by 0.9 residual per row
    at most (to first order; states beyond `residual` left out)."""
    import warnings

    from mbforge.examples.bricard import MARGIN, RATE
    from mbforge.ir import Evaluator
    from mbforge.reference.solvers import Dynamics, RedundantConstraintsWarning

    rng = np.random.default_rng(seed)
    s = np.sort(rng.uniform(-MARGIN, np.pi + MARGIN, count))
    dyn, q, Q = Dynamics(eqs), np.zeros(6), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RedundantConstraintsWarning)
        for a in s:
            q = dyn.position(0.0, np.concatenate([[a], q[1:]]), fixed={"th1": a})
            Q.append(q)
    Q = np.array(Q)
    tangent = np.array([np.linalg.svd(dyn.jacobian(0.0, x))[2][-1] for x in Q])
    X = np.hstack([Q, tangent / tangent[:, :1] * rng.uniform(-RATE, RATE, (count, 1))])
    if not residual:
        return X
    rows = eqs.phi[:5] + [b - c for b, c in zip(eqs.phi_q.matvec(list(eqs.qd))[:5], eqs.beta[:5])]
    ev = Evaluator(rows, list(eqs.q) + list(eqs.qd) + [eqs.t])

    def res(Y):
        return ev(np.column_stack([Y, np.zeros(len(Y))]))

    for part, r in ((slice(0, 6), slice(0, 5)), (slice(6, 12), slice(5, 10))):
        D = rng.uniform(-1, 1, (len(X), 6))
        Y = X.copy()
        Y[:, part] += 1e-6 * D
        dr = res(Y)[:, r] - res(X)[:, r]
        X[:, part] += 0.9 * residual * 1e-6 / np.abs(dr).max(axis=1, keepdims=True) * D
    return X[np.abs(res(X)).max(axis=1) <= residual]


@pytest.mark.host
def test_fixed_point_rk4_step_over_the_declared_envelope(tmp_path, monkeypatch):
    """issue 27 item 4: Bricard's c-fixed step (--set envelope=True, rk4 --penalty 0). Its last
    joint moves no mass (M singular) and close_rz is implied by the other five loop
    equations, so the step solves the KKT matrix of the five (kernels.step._rk4_kkt), analysed
    over the envelope's cover (512 cells of th1, each kept row allowed a residual of 1e-3).
    At 1,500 random consistent states and as many near-consistent ones (residual up to 1e-3)
    inside the cover's boxes, the fixed-point step stays within its per-step bound of the
    double step fed the same rounded state (bounds up to 9.0e-7 rad and 1.6e-4 rad/s); over
    1 s from rest it follows this file's minimal-coordinates reference within 1e-5 rad (th1;
    measured 2.8e-6 rad, the c-double step 5.6e-12 rad: the fixed-point rounding of the
    rates, about an ulp of Q3.28 a step, adds up; 1.2e-5 rad at most over the 10 s)."""
    from mbforge.examples.bricard import build
    from mbforge.verify.hostlib import load_kernel

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.steps import assert_within_bound, generate_step, run_steps

    monkeypatch.setenv("MBFORGE_JOBS", "1")  # 28 s in one process, 84 s with the local cluster's start
    args = ("--set", "envelope=True", "--dt", "0.001", "--integrator", "rk4", "--penalty", "0")
    fx = generate_step(tmp_path, "bricard", *args, "--target", "c-fixed", name="fx")
    db = generate_step(tmp_path, "bricard", *args, name="db")
    kf, kd = load_kernel(fx), load_kernel(db)
    m = kf.manifest
    assert m.step["rows_left_out"] == ["close_rz"]
    bound = np.concatenate([np.asarray(g.error_bound) for g in m.outputs])
    assert (bound[:6] < 2e-6).all() and (bound[6:] < 5e-4).all(), bound
    eqs = build(envelope=True).equations()
    for residual, seed, count in ((0.0, 5, 1_500), (1e-3, 6, 2_500)):
        assert_within_bound(fx, kf, kd, _envelope_states(eqs, count, seed, residual), 1_000, residual)
    t, q = run_steps(fx, "bricard", ["envelope=True"], t_end=1.0)
    ref = Reference().run(np.concatenate([[0.0], t]), 0.0)[1:]
    err = np.abs(q[:, 0] - ref[:, 4]).max()
    assert len(t) == 100 and q[-1, 0] > 1.0 and err < 1e-5, err


def test_the_exact_step_leaves_out_the_implied_row_and_checks_the_rest():
    """kernels.step: Bricard's rows kept for the KKT step are the five that raise Phi_q's rank
    at the start (close_rz left out); _check_kkt passes them over the envelope's grid, and
    refuses the five without close_rx (the dependent set: rank 4) in one message naming them."""
    from mbforge.examples.bricard import build
    from mbforge.kernels import step as S

    eqs = build(envelope=True).equations()
    ref = S._reference(eqs)
    rows = S._independent_rows(eqs, ref)
    assert [eqs.phi_names[i] for i in rows] == ["close_x", "close_y", "close_z", "close_rx", "close_ry"]
    S._check_kkt(eqs, S._rows_of(eqs.phi_q, rows), rows, ref)
    dependent = [0, 1, 2, 4, 5]
    with pytest.raises(S.StepError, match=r"its constraints close_x, close_y, close_z, close_ry, close_rz are nearly "
                                          r"dependent \(smallest singular value of their Jacobian .* at the consistent "
                                          r"configuration th1="):
        S._check_kkt(eqs, S._rows_of(eqs.phi_q, dependent), dependent, ref)
