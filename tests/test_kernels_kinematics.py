"""The `kinematics` kernel of the four-bar: qd and qdd from q and t through one
straight-line LU of Phi_q, against the double-precision reference (model.Kinematics), at
the motion points, at other assembled configurations, at random points of the declared
ranges (against numpy.linalg.solve), and compiled from generated C."""

import dataclasses

import numpy as np
import pytest

from mbforge.examples import load
from mbforge.ir import Evaluator, subs
from mbforge.kernels.builders import KernelError, build_kernel
from mbforge.model import Model
from mbforge.reference import Kinematics
from mbforge.linalg import Samples
from mbforge.pipeline import generate


@pytest.fixture(scope="module")
def fourbar():
    eqs = load("fourbar").equations()
    return eqs, build_kernel(eqs, "kinematics")


def outputs(k, X):
    Y = Evaluator(k.output_atoms, k.input_symbols)(X)
    return Y[:, 0:4], Y[:, 4:8], Y[:, 8:12]


def test_ports_and_report(fourbar):
    eqs, k = fourbar
    assert [p.name for p in k.inputs] == ["q", "t"] and [p.name for p in k.outputs] == ["qd", "qdd", "Phi"]
    assert all(len(p.ranges) == len(p.symbols) for p in k.inputs)
    F = k.info.solves["Phi_q"]
    # the crank's [xB yB; sin -cos] rows change sign over a revolution: one 2 x 2 block,
    # whose determinant (-2 on the motion) stays far from zero
    assert F.blocks == 1 and F.min_pivot == pytest.approx(2.0, rel=1e-9)
    assert F.divisions == 3 and F.fill == 0
    assert "2x2 block" in k.info.report and "'crank_angle'" in k.info.report


def test_motion_points_match_the_reference(fourbar):
    eqs, k = fourbar
    X = np.array(k.motion)
    qd, qdd, phi = outputs(k, X)
    kin = Kinematics(eqs)
    for s, x in enumerate(X):
        q, t = x[:4], x[4]
        rq = kin.velocity(t, q)
        np.testing.assert_allclose(qd[s], rq, atol=1e-11)
        np.testing.assert_allclose(qdd[s], kin.acceleration(t, q, rq), atol=1e-11)
    assert np.abs(phi).max() < 1e-10


def test_assembled_configurations_at_random_times(fourbar):
    eqs, k = fourbar
    kin = Kinematics(eqs)
    M = np.array(k.motion)
    rng = np.random.default_rng(4)
    X = []
    for t in rng.uniform(*eqs.ranges[eqs.t], 25):
        near = M[np.argmin(np.abs(M[:, 4] - t)), :4]
        X.append([*kin.position(float(t), near), t])
    X = np.array(X)
    qd, qdd, _ = outputs(k, X)
    for s, x in enumerate(X):
        rq = kin.velocity(x[4], x[:4])
        np.testing.assert_allclose(qd[s], rq, atol=1e-11)
        np.testing.assert_allclose(qdd[s], kin.acceleration(x[4], x[:4], rq), atol=1e-10)


def test_random_points_of_the_declared_ranges_match_numpy(fourbar):
    """Off the motion the kernel still solves the same linear systems; its error stays
    at the level the conditioning allows (a few eps times cond)."""
    eqs, k = fourbar
    syms = k.input_symbols
    S = Samples.box(syms, dict(zip(syms, [r for p in k.inputs for r in p.ranges])), n=400, seed=8)
    X = S.points[1:]
    qd, qdd, _ = outputs(k, X)
    ref = Evaluator(eqs.phi_q.values() + eqs.beta, syms)(X)
    g = Evaluator(eqs.gamma, syms + eqs.qd)
    checked = 0
    for s in range(len(X)):
        J = np.zeros((4, 4))
        for kk, (i, j) in enumerate(eqs.phi_q.pattern):
            J[i, j] = ref[s, kk]
        cond = np.linalg.cond(J)
        if cond > 1e8:
            continue
        v = np.linalg.solve(J, ref[s, eqs.phi_q.nnz:])
        a = np.linalg.solve(J, g(np.concatenate([X[s], v])))
        tol = 1e-14 * cond
        assert np.abs(qd[s] - v).max() <= tol * max(1.0, np.abs(v).max())
        assert np.abs(qdd[s] - a).max() <= 10 * tol * max(1.0, np.abs(a).max())
        checked += 1
    assert checked > 350


@pytest.mark.host
def test_generated_c_matches_the_reference(fourbar, tmp_path):
    from mbforge.verify.hostlib import load_kernel

    eqs, k = fourbar
    # over the declared box: without the domain, the kernel's envelope is that box (with
    # it, points off the domain's hull return status 2, see test_status)
    k = dataclasses.replace(k, domain=None)
    plan = generate(k, "c-double")
    assert plan.manifest.ops["div"] == 3
    hk = load_kernel(plan.write(tmp_path / "kin"))
    syms = k.input_symbols
    box = Samples.box(syms, dict(zip(syms, [r for p in k.inputs for r in p.ranges])), n=200, seed=2).points
    X = np.vstack([np.array(k.motion), box])
    Y, status = hk(X)
    R = Evaluator(k.output_atoms, syms)(X)
    assert not status.any()
    np.testing.assert_allclose(Y, R, rtol=1e-12, atol=1e-12)
    # (same bytes from a fresh process: test_install.py, test_determinism.py)


def test_gamma_uses_the_solved_velocities(fourbar):
    eqs, k = fourbar
    qdd = k.outputs[1].atoms
    # the kernel's inputs are q and t only: no velocity symbol survives
    from mbforge.ir import topo

    assert not any(a.is_symbol and a.value.kind == "qd" for a in topo(qdd))
    F = k.info.solves["Phi_q"]
    qd = F.solve(eqs.beta)
    assert all(a is b for a, b in zip(F.solve(subs(eqs.gamma, dict(zip(eqs.qd, qd)))), qdd))


def test_not_fully_driven_is_an_error():
    m = Model("kin_free")
    x = m.coordinate("kf_x", guess=1.0)
    y = m.coordinate("kf_y", guess=0.0)
    m.constraint(x ** 2 + y ** 2 - 1.0, "circle")
    with pytest.raises(KernelError, match=r"fully driven.*1 equations \(circle\) for 2 coordinates \(kf_x, kf_y\)"):
        build_kernel(m.equations(), "kinematics")


def test_divisor_ranges_stay_away_from_zero_on_the_motion(fourbar):
    eqs, k = fourbar
    dr = k.info.divisor_ranges()
    assert len(dr) == 3
    X = np.array(k.motion)
    for d, lo, hi in dr:
        assert lo > 0 or hi < 0  # one sign along the motion
        # sampled (160 times), so the 48 motion points may fall a little outside
        v = Evaluator([d], k.input_symbols)(X)[:, 0]
        w = 0.01 * max(abs(lo), abs(hi))
        assert lo - w <= v.min() and v.max() <= hi + w and (v > 0).all() == (lo > 0)
