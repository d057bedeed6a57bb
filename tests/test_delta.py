"""The delta robot (examples/delta.py, issue 33 items 1 and 6): its kernels against an
independent computation written here in numpy (the elbows by the closed form of each arm,
the bodies as uniform rods and a point mass, their virtual work solved for the torques and
multipliers; nothing of mbforge's), at 2,000 consistent states drawn uniformly over the
declared workspace: c-double to 1e-9, c-float32 and c-fixed within their proved bounds
wherever a bound is proved. The forward and full inverse dynamics run on the first shipped
model (workspace="first": x, y within +-0.2 m; the forward dynamics' float32 bounds are
missing and its fixed-point bounds useless: the bound warnings say so), the reduced inverse
dynamics on the default one (the declared workspace of issue 33, x, y within +-0.3 m, z from
-0.9 to -0.6 m), whose every bound must be finite and hold."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbforge.examples import load
from mbforge.verify import hostlib
from mbforge.verify.vectors import from_raw, to_raw
from mbforge.kernels.builders import build_kernel
from mbforge.model import Model, ModelError
from mbforge.model.natural import NaturalBody3D, point
from mbforge.pipeline import generate

R_BASE, R_PLAT, LA, MA, LF, MF, MP, G = 0.2, 0.05, 0.3, 0.3, 0.8, 0.1, 0.7, 9.81
BOX = ((-0.2, 0.2), (-0.2, 0.2), (-0.85, -0.65))  # workspace="first"
FULL_BOX = ((-0.3, 0.3), (-0.3, 0.3), (-0.9, -0.6))  # the default: issue 33's declared workspace
SPEED, ACCEL, N = 2.0, 20.0, 2000
Z = np.array([0.0, 0.0, 1.0])


def frame(k):
    a = 2 * math.pi * k / 3
    u = np.array([math.cos(a), math.sin(a), 0.0])
    return R_BASE * u, u, np.array([-u[1], u[0], 0.0])


def states(n, seed, box=BOX):
    """Consistent states {label: values}: P, its rate and acceleration uniform in the box;
    each elbow from its arm's closed form, its rate and acceleration from the constraints."""
    rng = np.random.default_rng(seed)
    return states_at(np.column_stack([rng.uniform(lo, hi, n) for lo, hi in box]), rng)


def states_at(P, rng):
    """states() at the platform positions P (n x 3), rates and accelerations drawn by rng."""
    n = len(P)
    Pd, Pdd = rng.uniform(-SPEED, SPEED, (n, 3)), rng.uniform(-ACCEL, ACCEL, (n, 3))
    out = {}
    for c in range(3):
        out[f"P_{'xyz'[c]}"], out[f"P_{'xyz'[c]}_d"], out[f"P_{'xyz'[c]}_dd"] = P[:, c], Pd[:, c], Pdd[:, c]
    for k in range(3):
        A, u, t = frame(k)
        E, Ed, Edd = np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 3))
        for i in range(n):
            b = P[i] + R_PLAT * u - A
            a_, c_ = 2 * LA * (b @ u), -2 * LA * b[2]
            th = math.atan2(c_, a_) - math.acos((b @ b + LA ** 2 - LF ** 2) / math.hypot(a_, c_))
            E[i] = A + LA * (math.cos(th) * u - math.sin(th) * Z)
            W = np.array([E[i] - A, t, P[i] + R_PLAT * u - E[i]])
            Ed[i] = np.linalg.solve(W, [0.0, 0.0, W[2] @ Pd[i]])
            rel = Pd[i] - Ed[i]
            Edd[i] = np.linalg.solve(W, [-Ed[i] @ Ed[i], 0.0, W[2] @ Pdd[i] + rel @ rel])
        for c in range(3):
            out[f"E{k + 1}_{'xyz'[c]}"] = E[:, c]
            out[f"E{k + 1}_{'xyz'[c]}_d"], out[f"E{k + 1}_{'xyz'[c]}_dd"] = Ed[:, c], Edd[:, c]
    return out


def mechanics(s, i):
    """At state i, over x = (P, E1, E2, E3): M, Q (gravity), G = dPhi/dx, gamma (Phi's
    second derivative without the accelerations, negated) and T = d(arm angles)/dx."""
    x = lambda name: np.array([s[f"{name}_{c}"][i] for c in "xyz"])  # noqa: E731
    xd = lambda name: np.array([s[f"{name}_{c}_d"][i] for c in "xyz"])  # noqa: E731
    M, Q = np.zeros((12, 12)), np.zeros(12)
    Gm, gam, T = np.zeros((9, 12)), np.zeros(9), np.zeros((3, 12))
    g = np.array([0.0, 0.0, -G])
    M[0:3, 0:3] += MP * np.eye(3)
    Q[0:3] += MP * g
    for k in range(3):
        A, u, t = frame(k)
        e = slice(3 + 3 * k, 6 + 3 * k)
        E, Ed, P, Pd = x(f"E{k + 1}"), xd(f"E{k + 1}"), x("P"), xd("P")
        M[e, e] += MA / 3 * np.eye(3)  # an arm about its fixed end
        Q[e] += MA * g / 2
        M[e, e] += MF / 3 * np.eye(3)  # a rod between its ends: m/6 [[2, 1], [1, 2]]
        M[0:3, 0:3] += MF / 3 * np.eye(3)
        M[e, 0:3] += MF / 6 * np.eye(3)
        M[0:3, e] += MF / 6 * np.eye(3)
        Q[e] += MF * g / 2
        Q[0:3] += MF * g / 2
        r = 3 * k
        Gm[r, e] = 2 * (E - A)
        Gm[r + 1, e] = t
        d = P + R_PLAT * u - E
        Gm[r + 2, 0:3], Gm[r + 2, e] = 2 * d, -2 * d
        gam[r], gam[r + 2] = -2 * Ed @ Ed, -2 * (Pd - Ed) @ (Pd - Ed)
        a_, b_ = (E - A) @ u, -(E - A)[2]
        T[k, e] = (-a_ * Z - b_ * u) / (a_ * a_ + b_ * b_)
    return M, Q, Gm, gam, T


def inverse(s, i, xdd):
    """Torques and multipliers: M xdd - Q = T^T u - G^T lambda."""
    M, Q, Gm, _, T = mechanics(s, i)
    sol = np.linalg.solve(np.hstack([T.T, -Gm.T]), M @ xdd - Q)
    return sol[:3], sol[3:]


def forward(s, i, u):
    M, Q, Gm, gam, T = mechanics(s, i)
    K = np.block([[M, Gm.T], [Gm, np.zeros((9, 9))]])
    sol = np.linalg.solve(K, np.concatenate([Q + T.T @ u, gam]))
    return sol[:12], sol[12:]


COORDS = ["P_x", "P_y", "P_z"] + [f"E{k}_{c}" for k in (1, 2, 3) for c in "xyz"]


@pytest.fixture(scope="module")
def delta(tmp_path_factory):
    eqs = load("delta", workspace="first").equations()
    root = tmp_path_factory.mktemp("delta")
    made = {}
    for kernel in ("inverse-dynamics", "forward-dynamics"):
        k = build_kernel(eqs, kernel)
        for target in ("c-double", "c-float32", "c-fixed"):
            plan = generate(k, target)
            out = plan.write(root / f"{kernel}-{target}")
            made[kernel, target] = plan.manifest, hostlib.load_kernel(out)
    return made


def _run(made, kernel, target, X):
    m, lib = made[kernel, target]
    Y, status = lib(to_raw(m, X, "inputs"))
    assert (status == 0).all(), (kernel, target, np.unique(status))
    return from_raw(m, Y, "outputs"), m


def test_inverse_dynamics_against_an_independent_lagrangian(delta):
    s = states(N, 1)
    m = delta["inverse-dynamics", "c-double"][0]
    labels = [lab for g in m.inputs for lab in g.labels]
    assert labels == COORDS + [f"{c}_dd" for c in COORDS]  # qd is no input: the mass matrix is constant
    X = np.column_stack([s[lab] for lab in labels])
    ref = np.array([np.concatenate(inverse(s, i, X[i, 12:])) for i in range(N)])
    assert np.abs(ref[:, :3]).max() > 1.0  # torques of a few N m
    for target in ("c-double", "c-float32", "c-fixed"):
        Y, mt = _run(delta, "inverse-dynamics", target, X)
        err = np.abs(Y - ref)
        if target == "c-double":
            assert err.max() < 1e-9, err.max()
        else:
            bound = np.array([b for g in mt.outputs for b in g.error_bound], dtype=float)
            assert np.isfinite(bound).all() and (err <= bound).all(), (target, (err / bound).max())
            assert bound[:3].max() < 0.1  # a bound a controller can use: within 0.1 N m


def test_forward_dynamics_against_an_independent_lagrangian(delta):
    s = states(N, 2)
    rng = np.random.default_rng(3)
    u = rng.uniform(-10.0, 10.0, (N, 3))
    m = delta["forward-dynamics", "c-double"][0]
    values = {**s, **{f"u_motor{k + 1}": u[:, k] for k in range(3)}}
    labels = [lab for g in m.inputs for lab in g.labels]
    X = np.column_stack([values[lab] for lab in labels])
    ref = np.array([np.concatenate(forward(s, i, u[i])) for i in range(N)])
    for target in ("c-double", "c-float32", "c-fixed"):
        Y, mt = _run(delta, "forward-dynamics", target, X)
        err = np.abs(Y - ref)
        if target == "c-double":
            assert err.max() < 1e-9 * max(1.0, np.abs(ref).max()), err.max()
            continue
        bound = np.array([np.inf if b is None else b for g in mt.outputs for b in g.error_bound], dtype=float)
        assert (err <= bound).all(), (target, (err / bound).max())


def test_reduced_inverse_dynamics_over_the_declared_workspace(tmp_path):
    """Platform position, rate and acceleration in, three torques out, over x, y within
    +-0.3 m: the pivots proved over the whole box (corners included), every float32 and
    fixed-point bound finite and holding at 2,000 states, with the corners among them."""
    k = build_kernel(load("delta").equations(), "inverse-dynamics-reduced")
    assert "proved, min |pivot| >=" in k.info.report, k.info.report
    s = states(N, 4, FULL_BOX)
    corners = np.array([[x, y, z] for x in FULL_BOX[0] for y in FULL_BOX[1] for z in FULL_BOX[2]] * 4)
    s_c = states_at(corners, np.random.default_rng(5))  # the box's corners, where a sampled pivot order failed
    s = {key: np.concatenate([s[key], s_c[key]]) for key in s}
    n = len(s["P_x"])
    P = [f"P_{c}" for c in "xyz"]
    X = np.column_stack([s[lab] for lab in P + [f"{c}_d" for c in P] + [f"{c}_dd" for c in P]])
    ref = np.array([inverse(s, i, np.array([s[f"{c}_dd"][i] for c in COORDS]))[0] for i in range(n)])
    assert np.abs(ref).max() > 5.0
    ratios = {}
    for target in ("c-double", "c-float32", "c-fixed"):
        plan = generate(k, target)
        m = plan.manifest
        assert [lab for g in m.inputs for lab in g.labels] == P + [f"{c}_d" for c in P] + [f"{c}_dd" for c in P]
        lib = hostlib.load_kernel(plan.write(tmp_path / target))
        Y, status = lib(to_raw(m, X, "inputs"))
        assert (status == 0).all(), (target, np.unique(status))
        err = np.abs(from_raw(m, Y, "outputs") - ref)
        if target == "c-double":
            assert err.max() < 1e-9, err.max()
            ratios[target] = err.max()
            continue
        bound = np.array([np.inf if b is None else b for g in m.outputs for b in g.error_bound], dtype=float)
        assert np.isfinite(bound).all() and (err <= bound).all(), (target, bound, err.max(axis=0))
        assert bound.max() < 0.05, bound  # a bound a controller can use
        ratios[target] = (err.max(axis=0), bound, bound / err.max(axis=0))
    print(f"|u| up to {np.abs(ref).max():.3g}; largest error, bound, bound / error:", ratios)


def test_reduced_forward_dynamics_over_the_cylinder_workspace_in_fixed_point(tmp_path):
    """issue 33 (the same proofs give fixed-point forward dynamics): the platform's
    accelerations from its position, rate and the three torques, over the cylinder
    workspace (x^2 + y^2 <= 0.3^2, z from -0.9 to -0.6 m, 8 x 8 cells) and its independent
    coordinates (--reduced: 3 coordinates, no constraint, R^T M R from the elbows' closed
    forms): against the independent Lagrangian to 1e-9 in double, and c-float32 and c-fixed
    within finite bounds at 2,000 states (c-fixed's a controller can use)."""
    k = build_kernel(load("delta", workspace="cylinder").equations(), "forward-dynamics", reduced=True)
    s = states(3 * N, 6, FULL_BOX)
    inside = s["P_x"] ** 2 + s["P_y"] ** 2 <= 0.3 ** 2
    s = {key: v[inside][:N] for key, v in s.items()}
    u = np.random.default_rng(7).uniform(-10.0, 10.0, (N, 3))
    P = [f"P_{c}" for c in "xyz"]
    X = np.column_stack([s[lab] for lab in P + [f"{c}_d" for c in P]] + [u])
    ref = np.array([forward(s, i, u[i])[0][:3] for i in range(N)])
    assert np.abs(ref).max() > 10.0
    for target in ("c-double", "c-float32", "c-fixed"):
        plan = generate(k, target)
        m = plan.manifest
        assert [lab for g in m.inputs for lab in g.labels][:6] == P + [f"{c}_d" for c in P]
        lib = hostlib.load_kernel(plan.write(tmp_path / target))
        Y, status = lib(to_raw(m, X, "inputs"))
        assert (status == 0).all(), (target, np.unique(status))
        err = np.abs(from_raw(m, Y, "outputs") - ref)
        if target == "c-double":
            assert err.max() < 1e-9 * np.abs(ref).max(), err.max()
            continue
        bound = np.array([np.inf if b is None else b for g in m.outputs for b in g.error_bound], dtype=float)
        assert np.isfinite(bound).all() and (err <= bound).all(), (target, bound, err.max(axis=0))
        if target == "c-fixed":
            assert bound.max() < 1e-2, bound


def test_point_mass_falls_freely():
    m = Model("drop")
    p = point(m, "p", (0.0, 0.0, 1.0), range=(-2, 2), vrange=(-5, 5), arange=(-20, 20))
    NaturalBody3D(m, "ball", [(p, (0, 0, 0))]).set_inertia(2.0)
    m.gravity((0.0, 0.0, -9.81))
    from mbforge.reference import Dynamics

    qdd, _ = Dynamics(m.equations()).accelerations(0.0, [0.0, 0.0, 1.0], [0.0, 0.0, 0.0])
    assert np.allclose(qdd, [0.0, 0.0, -9.81], atol=1e-12)
    spin = Model("spin")  # a point mass has no rotational inertia
    NaturalBody3D(spin, "ball", [(point(spin, "q", (0, 0, 0)), (0, 0, 0))]).set_inertia(1.0, inertia=(1, 1, 1))
    with pytest.raises(ModelError, match="outside the span of its points"):
        spin.equations()
