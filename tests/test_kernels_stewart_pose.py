"""The Stewart platform's inverse dynamics from the platform pose alone
(`inverse-dynamics-reduced`): the leg bodies' coordinates in closed form (Model.explicit),
their rates by the chain rule, the equations of motion projected on the platform's 7
coordinates. Checked against the 98-coordinate double-precision reference along the four
motions, and through the generated C in double, float32 and fixed point."""
import dataclasses
import json

import numpy as np
import pytest

from mbforge.analysis import solve_error
from mbforge.examples import _stewart as S
from mbforge.examples import load
from mbforge.examples import stewart as ST
from mbforge.verify import hostlib
from mbforge.ir import Evaluator
from mbforge.lower import lower
from mbforge.kernels.builders import build_kernel
from mbforge.manifest import Manifest
from mbforge.model import ModelError
from mbforge.reference import Dynamics
from mbforge.pipeline import generate

pytestmark = [pytest.mark.slow, pytest.mark.host]

MOTIONS = S.MOTIONS
TIMES = np.linspace(0.0, S.T_END, 26)
FULL_STATE_OPS = 7643  # the inverse-dynamics kernel on all 98 coordinates (u and lambda)


@pytest.fixture(scope="module")
def eqs():
    # the driven motion's tube (envelope=False): the fixed-point kernel over the operating
    # envelope is refused for now (its pivots; bench/stewart_envelope.py)
    return load("stewart", envelope=False).equations()


@pytest.fixture(scope="module")
def kernel(eqs):
    # a coarse domain tube: the same C for the float targets, a faster (looser) fixed-point plan
    return build_kernel(eqs, "inverse-dynamics-reduced", domain_steps=4)


@pytest.fixture(scope="module")
def reference():
    """Per motion: the platform's (q, qd, qdd) rows [N, 21] and the six forces of the
    98-coordinate reference (kinematics then inverse dynamics, model.solve)."""
    out = {}
    for motion in MOTIONS:
        e = load("stewart", motion=motion).equations()
        r = Dynamics(e).inverse_motion(TIMES)
        zi = [e.q.index(s) for s in e.independent]
        X = np.column_stack([r["Q"][:, zi], r["QD"][:, zi], r["QDD"][:, zi]])
        out[motion] = (X, r["U"], r)
    return out


@pytest.fixture(scope="module")
def compiled(kernel, tmp_path_factory):
    # the float kernels over the declared box: the coarse heave tube's hull would refuse
    # the other motions' states (status 2, an input outside the envelope)
    # (no error bound is read here: the cutting of boxes for the float32 bound over that
    # box, 100 s, is left out; solve_error.ROUNDS)
    kernel = dataclasses.replace(kernel, domain=None)
    libs = {}
    rounds, solve_error.ROUNDS = solve_error.ROUNDS, 0
    try:
        for target in ("c-double", "c-float32"):
            d = tmp_path_factory.mktemp(target)
            generate(kernel, target).write(d)
            libs[target] = hostlib.load_kernel(d)
    finally:
        solve_error.ROUNDS = rounds
    return libs


# ---- the closed forms -------------------------------------------------------------------------------
def test_explicit_coordinates_satisfy_every_constraint(eqs):
    assert [s.value.name for s in eqs.independent] == [f"plat_{c}" for c in ST.COORDS]
    assert len(eqs.explicit) == 91
    kin = eqs.kinematic_rows
    phi = eqs.explicit_phi()
    ev = Evaluator([phi[i] for i in kin], eqs.independent)
    dep = eqs.dependent
    closed = Evaluator([eqs.explicit[s] for s in dep], eqs.independent)
    cols = [eqs.q.index(s) for s in dep]
    for motion in MOTIONS:
        Q = S.coords_98(motion, np.linspace(0.0, S.T_END, 101))
        assert np.abs(ev(Q[:, -7:])).max() < 1e-14, motion
        # the same coordinates as the closed forms of _stewart (atan2 based), signs included
        assert np.abs(closed(Q[:, -7:]) - Q[:, cols]).max() < 1e-14, motion
    poses = ST.check_poses(seed=3)  # the motions, the corners of the declared ranges, random poses
    assert np.abs(ev(poses)).max() < 1e-14


def test_explicit_rates_are_the_kinematic_solution(eqs, reference):
    pos, vel, acc = eqs.explicit_rates()
    z, zd, zdd = eqs.independent, eqs.independent_qd, eqs.independent_qdd
    ev = Evaluator(pos + vel + acc, z + zd + zdd)
    cols = [eqs.q.index(s) for s in eqs.dependent]
    nd = len(cols)
    for motion in MOTIONS:
        X, _, r = reference[motion]
        Y = ev(X)
        assert np.abs(Y[:, :nd] - r["Q"][:, cols]).max() < 1e-12, motion
        assert np.abs(Y[:, nd:2 * nd] - r["QD"][:, cols]).max() < 1e-10, motion
        assert np.abs(Y[:, 2 * nd:] - r["QDD"][:, cols]).max() < 1e-8, motion


def test_shepperd_branches_are_fixed_and_checked():
    m = load("stewart")
    branches = {b: br for b, (_, br) in m.shepperd_pivots.items()}
    # legs 3 and 4 turn by more than 120 degrees about the vertical: they pivot on e3, not e0
    assert branches["cyl3"] == branches["pis3"] == 3 and branches["cyl4"] == 3
    assert branches["cyl1"] == 0
    assert min(m.shepperd_min.values()) > 0.6
    # a platform yawed by 150 degrees is far outside the ranges: some fixed branch fails there
    a = np.radians(75.0)
    pose = np.array([[0.0, 0.0, 0.5, np.cos(a), 0.0, 0.0, np.sin(a)]])
    with pytest.raises(ModelError, match="Shepperd branch"):
        ST.check_branches(m.q[-7:], m.shepperd_pivots, pose)


def test_inertial_forces_equal_the_mass_matrix_form(eqs):
    from mbforge.ir import sub

    f = [sub(a, b) for a, b in zip(eqs.M.matvec(eqs.qdd), eqs.Q)]
    inp = eqs.q + eqs.qd + eqs.qdd
    X = np.random.default_rng(0).uniform(-1, 1, (16, len(inp)))
    np.testing.assert_allclose(Evaluator(eqs.inertial, inp)(X), Evaluator(f, inp)(X), rtol=1e-12, atol=1e-11)


# ---- the kernel --------------------------------------------------------------------------------------
def test_kernel_ports_and_size(kernel):
    assert [p.name for p in kernel.inputs] == ["q", "qd", "qdd"]
    assert [s.value.name for s in kernel.input_symbols[:7]] == [f"plat_{c}" for c in ST.COORDS]
    assert len(kernel.input_symbols) == 21 and [p.name for p in kernel.outputs] == ["u"]
    assert kernel.info.method == "projected"
    tape = lower(kernel.output_atoms, kernel.input_symbols)
    ops = tape.counts()
    assert ops["total"] < FULL_STATE_OPS and ops.get("div", 0) <= 40, ops
    assert kernel.info.solves["G"].min_relative_pivot > 0.3
    print(f"\ninverse-dynamics-reduced: {ops}\n{kernel.info.report}")


def test_kernel_equals_the_98_coordinate_reference(kernel, reference):
    ev = Evaluator(kernel.output_atoms, kernel.input_symbols)
    for motion in MOTIONS:
        X, U, _ = reference[motion]
        err = np.abs(ev(X) - U).max() / np.abs(U).max()
        assert err < 1e-12, (motion, err)


def test_double_c_equals_the_reference(compiled, reference):
    for motion in MOTIONS:
        X, U, _ = reference[motion]
        Y, status = compiled["c-double"](X)
        assert (status == 0).all()
        err = np.abs(Y - U).max() / np.abs(U).max()
        assert err < 1e-9, (motion, err)


def test_float32_c_within_1e5_of_double(compiled, reference):
    for motion in MOTIONS:
        X, _, _ = reference[motion]
        Yd, _ = compiled["c-double"](X)
        Yf, status = compiled["c-float32"](X.astype(np.float32))
        assert (status == 0).all()
        err = np.abs(Yf.astype(np.float64) - Yd).max() / np.abs(Yd).max()
        print(f"\nfloat32 {motion}: max error / peak force {err:.3g}")
        assert err < 1e-5, (motion, err)


def test_fixed_point_within_the_manifest_bounds(kernel, tmp_path):
    """The fixed-point program (the bit-exact interpreter of the c-fixed C) against double
    at the same quantized inputs, along the motion and at random points of the domain."""
    from mbforge.analysis.fixerror import bound_over_boxes
    from mbforge.backends.fixed.interp import simulate
    from mbforge.analysis.ranges import analyse_domain

    generate(kernel, "c-fixed").write(tmp_path)
    m = Manifest.load(tmp_path)
    bound = np.array(m.outputs[0].error_bound)
    tape = kernel.tape()  # as the pipeline lowers it: with the solve's range hints
    per_box: list = []
    fx = bound_over_boxes(tape, analyse_domain(tape, kernel.domain, per_box=per_box), per_box)
    np.testing.assert_allclose(fx.out_error[:6], bound, rtol=1e-12)  # the program the C was made from
    rng = np.random.default_rng(7)
    boxes = np.array(kernel.domain)
    B = boxes[rng.integers(0, len(boxes), 4000)]
    X = np.vstack([np.array(json.loads((tmp_path / "motion.json").read_text())["vectors"]),
                   B[:, :, 0] + (B[:, :, 1] - B[:, :, 0]) * rng.random(B.shape[:2])])
    Xi = hostlib.to_raw(m, X, "inputs")
    Yi, status = simulate(fx, Xi)
    assert (status == 0).all()
    ref = Evaluator(kernel.output_atoms, kernel.input_symbols)(hostlib.from_raw(m, Xi, "inputs"))
    err = np.abs(hostlib.from_raw(m, Yi, "outputs") - ref).max(axis=0)
    assert (err <= bound).all(), (err, bound)
    print(f"\nfixed point: bound {bound.max():.3g} N, observed {err.max():.3g} N, "
          f"bound / observed {np.min(bound / err):.3g} .. {np.max(bound / err):.3g}")


def test_split_at_the_solve_tightens_the_fixed_bound(kernel, monkeypatch):
    """The tape reads A's entries and b where its straight-line solve begins
    (analysis.solve_error): the bound split there (the errors A and b arrive with, through
    A^-1; the solve's own roundings as perturbations of A and b) is below the error forms'
    bound through the elimination, for every force; that it holds is the test above."""
    from mbforge.analysis import fixerror
    from mbforge.analysis.ranges import analyse_domain
    from mbforge.analysis.solve_error import find_cut

    tape = kernel.tape()
    per_box: list = []
    hull = analyse_domain(tape, kernel.domain, per_box=per_box)
    split = fixerror.bound_over_boxes(tape, hull, per_box)
    cut = find_cut(tape)
    assert cut is not None and len(cut.entries) == 46 and len(cut.rhs) == 7 and cut.absorb
    assert set(cut.outputs) == set(range(6)) and len(cut.section) < len(split.instrs) / 10
    monkeypatch.setattr(solve_error, "SPLIT_AT_SOLVE", False)
    whole = fixerror.bound_over_boxes(tape, hull, per_box)
    assert all(a < b for a, b in zip(split.out_error, whole.out_error)), (split.out_error, whole.out_error)
    print("\nsplit / whole-program bound: " + " ".join(f"{a / b:.2f}" for a, b in zip(split.out_error, whole.out_error)))


def test_float32_within_its_split_bound(kernel, tmp_path, monkeypatch):
    """c-float32 over the tube: the compiled kernel against double at the unrounded
    inputs (the motion and 4,000 random points of the boxes) stays within the manifest's
    bound, which the split at the solve makes tighter than the error forms alone."""
    from mbforge.analysis import solve_error
    from mbforge.analysis.floaterror import float32_forms_boxes
    from mbforge.analysis.ranges import BoxRanges, analyse_domain

    generate(kernel, "c-float32").write(tmp_path)
    bound = np.array(Manifest.load(tmp_path).outputs[0].error_bound)
    lib = hostlib.load_kernel(tmp_path)
    rng = np.random.default_rng(5)
    boxes = np.array(kernel.domain)
    B = boxes[rng.integers(0, len(boxes), 4000)]
    X = np.vstack([np.array(json.loads((tmp_path / "motion.json").read_text())["vectors"]),
                   B[:, :, 0] + (B[:, :, 1] - B[:, :, 0]) * rng.random(B.shape[:2])])
    Y, status = lib(X.astype(np.float32))
    assert (status == 0).all()
    err = np.abs(np.asarray(Y, dtype=np.float64) - Evaluator(kernel.output_atoms, kernel.input_symbols)(X)).max(0)
    assert (err <= bound).all(), (err, bound)
    tape = kernel.tape()
    per_box: list = []
    analyse_domain(tape, kernel.domain, strict=False, per_box=per_box)
    vec = BoxRanges.from_list(tape, per_box)
    monkeypatch.setattr(solve_error, "SPLIT_AT_SOLVE", False)
    whole = np.array(float32_forms_boxes(tape, vec))
    assert (bound < whole).all(), (bound, whole)
    print(f"\nfloat32: bound {bound.max():.3g} N (error forms alone {whole.max():.3g}), observed {err.max():.3g} N")


def test_cli_generates_it(tmp_path, capsys):
    from mbforge.cli import main

    out = tmp_path / "k"
    assert main(["generate", "stewart", "--kernel", "inverse-dynamics-reduced", "--target", "c-double",
                 "--out", str(out)]) == 0
    m = Manifest.load(out)
    assert m.kernel == "inverse-dynamics-reduced" and m.n_in == 21 and m.n_out == 6
    assert "stewart_inverse_dynamics_reduced" in (out / "stewart.h").read_text()


# ---- the modelling layer's explicit coordinates, on a small model --------------------------------
def _slidercrank_explicit():
    """The slider-crank with every coordinate but the crank angle in closed form."""
    from mbforge.ir import atan2, cos, sin, sqrt

    m = load("slidercrank")
    c = {s.value.name: s for s in m.q}
    th = c["th1"]
    for name in ("x0", "y0", "th0", "x1", "y1", "y3", "th3"):
        m.explicit(c[name], 0.0)
    m.explicit(c["x2"], cos(th))
    m.explicit(c["y2"], sin(th))
    m.explicit(c["th2"], atan2(-sin(th) * 0.5, sqrt(1.0 - sin(th) * sin(th) * 0.25)))
    m.explicit(c["x3"], c["x2"] + 2.0 * cos(c["th2"]))  # uses earlier explicit coordinates
    return m


def test_reduced_kernel_of_a_small_model_equals_the_full_state_kernel():
    m = _slidercrank_explicit()
    eqs = m.equations()
    assert [s.value.name for s in eqs.independent] == ["th1"]
    assert not eqs.explicit[eqs.q[9]].mask & eqs.q[6].mask  # x3's form has x2 substituted
    k = build_kernel(eqs, "inverse-dynamics-reduced", method="projected")  # as "auto" takes it here
    assert k.info.method == "projected" and len(k.input_symbols) == 3
    assert k.outputs[0].labels == ["u_crank_torque"]  # the actuator's name, not u[0]
    full = build_kernel(eqs, "inverse-dynamics")
    n = len(eqs.q)
    Xf = np.array(full.motion)
    Uf = Evaluator(full.outputs[0].atoms, full.input_symbols)(Xf)
    X = np.column_stack([Xf[:, 5], Xf[:, n + 5], Xf[:, 2 * n + 5]])
    U = Evaluator(k.output_atoms, k.input_symbols)(X)
    np.testing.assert_allclose(U, Uf, atol=1e-10 * np.abs(Uf).max())


def test_explicit_declarations_are_checked():
    from mbforge.ir import symbol

    m = load("slidercrank")
    c = {s.value.name: s for s in m.q}
    m.explicit(c["x3"], c["x2"] + 1.0)
    with pytest.raises(ModelError, match="twice"):
        m.explicit(c["x3"], 0.0)
    with pytest.raises(ModelError, match="in terms of itself"):
        m.explicit(c["y3"], c["y3"] * 2.0)
    with pytest.raises(ModelError, match="make it explicit before"):
        m.explicit(c["x2"], 1.0)
    with pytest.raises(ModelError, match="not coordinates or parameters"):
        m.explicit(c["y2"], symbol("somewhere_else") + 1.0)
    with pytest.raises(ModelError, match="needs a coordinate"):
        m.explicit(symbol("not_a_coordinate"), 1.0)
    with pytest.raises(ModelError, match="explicit"):
        build_kernel(load("slidercrank").equations(), "inverse-dynamics-reduced")
