"""The Stewart platform examples against closed forms computed here from the numbers of
../shared/models/stewart-platform.md, and against each other (98 reference-point
coordinates with Euler parameters vs 24 relative coordinates)."""
import functools
import math

import numpy as np
import pytest

from mbforge.examples import load
from mbforge.reference import Dynamics

# ---- the spec's numbers, independently of the example modules ------------------------------------
BASE = [0.5 * np.array([math.cos(math.radians(a)), math.sin(math.radians(a)), 0.0])
        for a in (-15, 15, 105, 135, 225, 255)]
PLAT = [0.5 * np.array([math.cos(math.radians(a)), math.sin(math.radians(a)), 0.0])
        for a in (-45, 45, 75, 165, 195, 285)]
DISC_MASS = 106.02875205865553
G = 9.81
TIMES = np.linspace(0.0, 1.25, 26)


def _pose(motion, t):
    c = np.array([0.0, 0.0, 0.5])
    R = np.eye(3)
    if motion == "heave":
        c[2] += 0.04 * math.sin(5 * t)
    else:
        a = math.pi / 18 * math.sin(5 * t)
        k = {"roll": 0, "pitch": 1, "yaw": 2}[motion]
        i, j = [(1, 2), (2, 0), (0, 1)][k]
        R[i, i] = R[j, j] = math.cos(a)
        R[i, j], R[j, i] = -math.sin(a), math.sin(a)
    return c, R


def _leg_lengths(motion, t):
    c, R = _pose(motion, t)
    return np.array([np.linalg.norm(c + R @ p - b) for b, p in zip(BASE, PLAT)])


@functools.lru_cache(maxsize=None)
def _run(name, motion, massless=False):
    m = load(name, motion=motion, massless_legs=massless)
    d = Dynamics(m.equations())
    r = d.inverse_motion(TIMES)
    r["out"] = d.outputs(TIMES, r["Q"], r["QD"])
    r["dyn"] = d
    return r


# ---- structure and speed --------------------------------------------------------------------------
def test_equation_counts_and_names():
    eqs = load("stewart").equations()
    assert len(eqs.q) == 98 and len(eqs.phi) == 98
    names = eqs.phi_names
    assert sum(n.startswith("base_fix_") for n in names) == 7
    assert sum(n.startswith(("ub", "up")) for n in names) == 48  # 12 Cardans x 4
    assert sum(n.startswith("cj") for n in names) == 24  # 6 cylindrical x 4
    assert sum(n.endswith("_norm") for n in names) == 13  # 12 leg bodies + the platform
    assert [n for n, d in zip(names, eqs.driving) if d] == [f"drive_{c}" for c in ("x", "y", "z", "e1", "e2", "e3")]
    assert eqs.actuator_names == [f"f{k}" for k in range(1, 7)]
    rel = load("stewart_relative").equations()
    assert len(rel.q) == 24 and len(rel.phi) == 24 and sum(rel.driving) == 6
    assert rel.B.nnz == 6 and all(a.is_const and a.value == 1.0 for a in rel.B.values())


def test_the_98_coordinate_equations_build_in_full():
    # (how fast they build is measured by bench/engine.py, not asserted here)
    eqs = load("stewart", motion="yaw").equations()
    eqs.phi_q, eqs.gamma, eqs.phi_t  # noqa: B018 (built lazily)
    assert eqs.M.nnz > 0 and len(eqs.Q) == 98


# ---- closed forms ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["stewart", "stewart_relative"])
@pytest.mark.parametrize("motion", ["heave", "yaw", "roll", "pitch"])
def test_leg_lengths_equal_the_closed_form(name, motion):
    r = _run(name, motion)
    L = np.column_stack([r["out"][f"L{k}"] for k in range(1, 7)])
    expect = np.array([_leg_lengths(motion, t) for t in TIMES])
    assert np.max(np.abs(L - expect)) < 1e-12
    # and the leg rates are the time derivatives of the closed form (central differences)
    h = 1e-5
    rate = np.array([(_leg_lengths(motion, t + h) - _leg_lengths(motion, t - h)) / (2 * h) for t in TIMES])
    Ld = np.column_stack([r["out"][f"L{k}_d"] for k in range(1, 7)])
    assert np.max(np.abs(Ld - rate)) < 1e-8


@pytest.mark.parametrize("name", ["stewart", "stewart_relative"])
def test_static_nominal_pose_massless_legs_is_jT_f_equals_w(name):
    """With massless legs each leg is a two-force member: sum f_k [u_k; (p_k - c) x u_k] = W."""
    c = np.array([0.0, 0.0, 0.5])
    cols = []
    for b, p in zip(BASE, PLAT):
        u = (c + p - b) / np.linalg.norm(c + p - b)
        cols.append(np.concatenate([u, np.cross(p, u)]))
    f_expect = np.linalg.solve(np.column_stack(cols), [0, 0, DISC_MASS * G, 0, 0, 0])
    m = load(name, massless_legs=True)
    d = Dynamics(m.equations())
    q = d.position(0.0, [d.eqs.guess[s] for s in d.eqs.q])
    zero = np.zeros(d.n)
    u, _ = d.inverse(0.0, q, zero, zero)
    assert np.max(np.abs(u - f_expect)) / np.max(np.abs(f_expect)) < 1e-9
    assert np.all(u > 0)  # the legs push the platform up


@pytest.mark.parametrize("motion", ["heave", "yaw", "roll", "pitch"])
def test_98_and_24_coordinates_give_the_same_actuator_forces(motion):
    U98 = _run("stewart", motion)["U"]
    U24 = _run("stewart_relative", motion)["U"]
    assert np.max(np.abs(U98 - U24)) / np.max(np.abs(U98)) < 1e-8
    assert np.max(np.abs(U98)) > 150.0  # the forces are not trivially zero


@pytest.mark.parametrize("name", ["stewart", "stewart_relative"])
@pytest.mark.parametrize("motion", ["heave", "yaw"])
def test_actuator_power_is_the_rate_of_energy(name, motion):
    """sum f_k L_k' = d(T + V)/dt along the motion (the drives do no work once the actuators
    replace them): checks M and Q (incl. the velocity terms) against the energy atoms."""
    d = Dynamics(load(name, motion=motion).equations())
    t = np.linspace(0.2, 1.0, 5)
    h = 1e-4
    Tm = np.sort(np.concatenate([t - h, t, t + h]))
    r = d.inverse_motion(Tm)
    E = np.array([sum(d.energy(tt, q, qd)) for tt, q, qd in zip(Tm, r["Q"], r["QD"])])
    out = d.outputs(Tm, r["Q"], r["QD"])
    power = sum(r["U"][:, k] * out[f"L{k + 1}_d"] for k in range(6))
    dE = (E[2::3] - E[0::3]) / (2 * h)
    assert np.max(np.abs(power[1::3] - dE)) < 1e-5 * np.max(np.abs(power))


def test_solved_coordinates_equal_the_closed_form_frames():
    """Every body of the 98-coordinate model sits where the closed-form leg geometry puts it
    (cylinder axes F0 Rx(alpha) Ry(gamma), piston spun by psi) -- the same geometry that
    seeds the guesses and the declared ranges."""
    from mbforge.examples import _stewart

    r = _run("stewart", "yaw")
    X = _stewart.coords_98("yaw", TIMES)
    assert np.max(np.abs(r["Q"] - X)) < 1e-10
    r24 = _run("stewart_relative", "yaw")
    assert np.max(np.abs(r24["Q"] - _stewart.coords_24("yaw", TIMES))) < 1e-10


@pytest.mark.parametrize("name", ["stewart", "stewart_relative"])
@pytest.mark.parametrize("motion", ["heave", "yaw", "roll", "pitch"])
def test_declared_ranges_cover_the_motions(name, motion):
    r = _run(name, motion)
    eqs = r["dyn"].eqs
    for arr, syms in ((r["Q"], eqs.q), (r["QD"], eqs.qd), (r["QDD"], eqs.qdd)):
        lo = np.array([eqs.ranges[s][0] for s in syms])
        hi = np.array([eqs.ranges[s][1] for s in syms])
        assert np.all(arr >= lo) and np.all(arr <= hi)


@pytest.mark.parametrize("name", ["stewart", "stewart_relative"])
def test_declared_ranges_are_tight(name):
    """Each declared interval is at most the union of the four motions' spans plus 25 % and
    a few thousandths (fixed-point formats are chosen from these ranges)."""
    runs = [_run(name, motion) for motion in ("heave", "yaw", "roll", "pitch")]
    eqs = runs[0]["dyn"].eqs
    for key, syms in (("Q", eqs.q), ("QD", eqs.qd), ("QDD", eqs.qdd)):
        arr = np.vstack([r[key] for r in runs])
        span = arr.max(0) - arr.min(0)
        width = np.array([eqs.ranges[s][1] - eqs.ranges[s][0] for s in syms])
        assert np.all(width <= 1.25 * span + 0.005), key


@pytest.mark.slow  # about 12 s
def test_relative_legs_in_closed_form_and_over_the_envelope():
    """stewart_relative's legs (alpha, beta, L) in closed form (atan2 and a square root of
    the leg vector in its base frame) equal _stewart.leg_state's (asin and arctan2 in
    numpy) along every motion; its envelope's cover comes from those forms, 64 cells, and
    holds leg_state's legs at random poses of the envelope; its equations and kinematics
    get float32 bounds and c-fixed formats over it, and its reduced inverse dynamics
    (projected) stays within its c-fixed and float32 bounds at consistent states."""
    import itertools

    from mbforge.examples import _stewart as S
    from mbforge.examples.stewart_relative import operating_envelope
    from mbforge.ir import Evaluator
    from mbforge.kernels.builders import build_kernel
    from mbforge.domain.cover import envelope_cover
    from mbforge.pipeline import generate
    from helpers.models import in_cover

    eqs = load("stewart_relative").equations()
    dep = [eqs.q[j] for j in range(6, 24)]
    forms = Evaluator([eqs.explicit[s] for s in dep], eqs.q[:6])
    for motion in S.MOTIONS:
        Q = S.coords_24(motion, np.linspace(0.0, S.T_END, 301))
        assert np.abs(forms(Q[:, :6]) - Q[:, 6:]).max() < 1e-12, motion
    eqs = load("stewart_relative").equations()  # the envelope is the default
    cover = envelope_cover(eqs)
    assert cover.explicit is not None and len(cover) == 64
    rng = np.random.default_rng(3)
    env = operating_envelope()
    P = np.column_stack([rng.uniform(*r, 3000) for r, *_ in env])
    P = np.vstack([P, np.array(list(itertools.product(*[r for r, *_ in env])))])  # and the corners
    R = S.rot(2, P[:, 3]) @ S.rot(1, P[:, 4]) @ S.rot(0, P[:, 5])  # Rz(yaw) Ry(pitch) Rx(roll)
    legs = [S.leg_state(leg, P[:, :3], R) for leg in S.legs()]
    X = np.column_stack([P] + [np.column_stack([s["alpha"], s["beta"], s["L"]]) for s in legs])
    assert in_cover(cover, X, eqs.q, slack=1e-12).all()
    for kernel in ("equations", "kinematics"):
        k = build_kernel(eqs, kernel)
        b32 = [e for g in generate(k, "c-float32").manifest.outputs for e in g.error_bound]
        assert all(e is not None and e < 1e-3 for e in b32), kernel
        assert generate(k, "c-fixed").manifest.outputs[0].frac_bits is not None
    # the leg forces from the platform's pose alone, over the envelope, against double
    import tempfile
    from pathlib import Path

    from mbforge.verify.hostlib import from_raw, load_kernel, to_raw
    from mbforge.kernels.reduced import reduction

    k = build_kernel(eqs, "inverse-dynamics-reduced")
    assert k.info.method == "projected" and len(k.domain) == 64
    red = reduction(eqs)
    St = envelope_cover(eqs, unknowns=red.z, rows=red.psi).sample(2000, seed=5)
    X = np.column_stack([St[s] for s in k.input_symbols])
    want = Evaluator(k.output_atoms, k.input_symbols)(X)
    for target, most in (("c-fixed", 0.01), ("c-float32", 0.5)):
        with tempfile.TemporaryDirectory() as d:
            plan = generate(k, target)
            plan.write(d)
            m = plan.manifest
            Y, status = load_kernel(Path(d))(to_raw(m, X, "inputs"))
            err = np.abs(from_raw(m, Y, "outputs") - want).max(0)
        bound = np.array(m.outputs[0].error_bound)
        assert (np.asarray(status) == 0).all() and (err <= bound).all() and bound.max() < most, (target, err, bound)
