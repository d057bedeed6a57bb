"""Fixed-point kernels: formats from range analysis, sound error bounds, bit-exact C."""
import numpy as np
import pytest

from mbforge.examples import load
from mbforge.verify import hostlib
from mbforge.ir import Evaluator, ExpressionError, atan2, cos, sin, sqrt, symbol
from mbforge.lower import lower
from mbforge.kernels import InPort, Kernel, OutPort
from mbforge.kernels.builders import build_kernel
from mbforge.manifest import Manifest
from mbforge.analysis.fixedpoint import TRIG_ERROR
from mbforge.analysis.ranges import analyse_domain
from mbforge.pipeline import generate

pytestmark = pytest.mark.host


def _check(kernel, tmp_path, n=100_000, seed=0):
    """Run the fixed C on n random vectors: every error (against double at the real,
    unrounded input) within its bound; returns
    (observed, bound) per flat output."""
    from mbforge.hil.harness import input_vectors

    generate(kernel, "c-fixed").write(tmp_path)
    m = Manifest.load(tmp_path)
    X = input_vectors(m, tmp_path, n, seed)  # inside the domain, plus the motion
    # the vectors sit on the input formats' grid; move them off it (within half a unit,
    # inside the envelope) so that the real input's rounding is in the observed error too
    f = np.array([b for g in m.inputs for b in g.frac_bits], dtype=float)
    env = np.array([e for g in m.inputs for e in g.envelope])
    jitter = np.random.default_rng(seed + 7).uniform(-0.5, 0.5, X.shape) * 2.0 ** -f
    X = np.clip(X + jitter, env[:, 0], env[:, 1])
    Xi = hostlib.to_raw(m, X, "inputs")
    Yi, status = hostlib.load_kernel(tmp_path)(Xi)
    assert (status == 0).all()
    ref = Evaluator(kernel.output_atoms, kernel.input_symbols)(X)  # double at the unrounded input
    err = np.abs(hostlib.from_raw(m, Yi, "outputs") - ref).max(axis=0)
    bound = np.array([b for g in m.outputs for b in g.error_bound])
    bad = [(name, e, b) for name, e, b in zip(m.flat_names(), err, bound) if e > b]
    assert not bad, bad
    return err, bound, m


def _tight(err, bound, m, factor=10.0):
    """The bound is at most `factor` x the largest observed error (or within one ulp of
    the output format where the arithmetic happened to be exact)."""
    ulp = np.array([2.0 ** -f for g in m.outputs for f in g.frac_bits])
    loose = [(n, e, b) for n, e, b, u in zip(m.flat_names(), err, bound, ulp) if b > factor * e and b > u]
    assert not loose, loose


def test_fourbar_equations_within_bound_and_tight(tmp_path):
    k = build_kernel(load("fourbar").equations(), "equations")
    err, bound, m = _check(k, tmp_path)
    # the vectors are consistent states now (the driven motion), where the drive row's
    # terms stay small: the goal, bound <= 30x the largest observed error
    _tight(err, bound, m, factor=30.0)
    assert bound.max() < 1e-6  # about 30 significant bits survive


def test_functions_within_bound(tmp_path):
    x, y = symbol("fx_x"), symbol("fx_y")
    outs = [sin(x), cos(0.25 * x + 0.5), sqrt(x * x + y * y + 0.25), x / (y * y + 0.5), sin(x) * cos(y) / (2 + sin(y))]
    k = Kernel("fx", "functions", [InPort("v", [x, y], [(-200.0, 200.0), (-3.0, 3.0)])],
               [OutPort.vector("y", outs)])
    err, bound, m = _check(k, tmp_path, n=200_000)
    _tight(err, bound, m)


def test_trig_error_constant_holds_for_the_fixed_sincos(tmp_path):
    x = symbol("trig_x")
    k = Kernel("trig", "k", [InPort("x", [x], [(-255.0, 255.0)])], [OutPort.vector("y", [sin(x), cos(x)])])
    generate(k, "c-fixed").write(tmp_path)
    m = Manifest.load(tmp_path)
    X = np.linspace(-255.0, 255.0, 400_001)[:, None]
    Xi = hostlib.to_raw(m, X, "inputs")
    Y = hostlib.from_raw(m, hostlib.load_kernel(tmp_path)(Xi)[0], "outputs")
    xq = hostlib.from_raw(m, Xi, "inputs")[:, 0]
    worst = max(np.abs(Y[:, 0] - np.sin(xq)).max(), np.abs(Y[:, 1] - np.cos(xq)).max())
    assert worst < TRIG_ERROR / 2


def test_ranges_are_sound_on_samples():
    k = build_kernel(load("fourbar").equations(), "equations")
    tape = lower(k.output_atoms, k.input_symbols)
    rng = [r for p in k.inputs for r in p.ranges]
    R = analyse_domain(tape, [rng], budget=1)
    r = np.array(rng)
    X = r[:, 0] + (r[:, 1] - r[:, 0]) * np.random.default_rng(3).random((50_000, len(rng)))
    Y = Evaluator([tape.atoms[i] for i in sorted(tape.atoms)], tape.inputs)(X)
    for col, i in enumerate(sorted(tape.atoms)):
        iv = R.temps[i]
        assert iv.lo <= Y[:, col].min() and Y[:, col].max() <= iv.hi


def test_affine_arithmetic_sees_correlations():
    x, y = symbol("aa_x"), symbol("aa_y")
    u = (0.5 * x + y) - y  # == 0.5 x, but intervals see three independent terms
    t = lower([u - 0.5 * x, x * (4 - x)], [x, y])
    R = analyse_domain(t, [[(-10.0, 10.0), (-10.0, 10.0)]], budget=1)
    zero, parabola = (R.of(o) for o in t.outputs)
    assert zero.hi - zero.lo < 1e-12  # intervals alone: [-40, 40]
    assert parabola.hi <= 150 + 1e-9  # exact: [-140, 4]; intervals: [-140, 140]


def test_division_by_a_range_containing_zero_is_refused(tmp_path):
    x, y = symbol("dz_x"), symbol("dz_y")
    k = Kernel("dz", "k", [InPort("v", [x, y], [(-1.0, 1.0), (-1.0, 1.0)])], [OutPort.vector("q", [x / y])])
    with pytest.raises(ExpressionError, match=r"divisor's range \[-1, 1\] contains 0"):
        generate(k, "c-fixed")


def test_unsupported_function_is_named(tmp_path):
    x = symbol("us_x")
    k = Kernel("us", "k", [InPort("v", [x], [(0.5, 1.0)])], [OutPort.vector("q", [atan2(x, x + 1)])])
    with pytest.raises(ExpressionError, match=r"^fixed point has no 'atan2' yet \(atan2 computing atan2\(us_x"):
        generate(k, "c-fixed")


def test_input_outside_the_envelope_is_status_2_and_saturation_inside_it_status_1(tmp_path):
    x = symbol("sat_x")
    k = Kernel("sat", "k", [InPort("v", [x], [(-1.0, 1.0)])], [OutPort.vector("y", [x * x * x * 5])])
    generate(k, "c-fixed").write(tmp_path / "a")
    raw = np.array([[2 ** 31 - 1]], dtype=np.int32)  # ~ 2.0: outside the declared range
    _, status = hostlib.load_kernel(tmp_path / "a")(raw)
    assert status[0] == 2
    # a domain of two boxes: their hull holds (1, 1), where x*y leaves the format chosen
    # over the boxes (|x y| <= 0.1): inside the envelope, so computed, and saturated
    y = symbol("sat_y")
    k = Kernel("sat", "k", [InPort("v", [x, y], [(-1.0, 1.0), (-1.0, 1.0)])], [OutPort.vector("p", [x * y * 3])],
               domain=[[(0.0, 0.1), (0.9, 1.0)], [(0.9, 1.0), (0.0, 0.1)]])
    generate(k, "c-fixed").write(tmp_path / "b")
    m = Manifest.load(tmp_path / "b")
    _, status = hostlib.load_kernel(tmp_path / "b")(hostlib.to_raw(m, [[1.0, 1.0], [0.05, 0.95], [1.0, -0.01]]))
    assert status.tolist() == [1, 0, 2]


@pytest.mark.firmware
def test_fixed_kernel_on_the_emulated_board_is_bit_exact_and_within_bound(tmp_path):
    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil.harness import run

    k = build_kernel(load("fourbar").equations(), "equations")
    generate(k, "c-fixed").write(tmp_path / "fixed")
    generate(k, "c-double").write(tmp_path / "double")
    elf = build(generate_project(tmp_path / "fixed", tmp_path / "fw"), "emulated_f405")
    with Emulator(elf) as emu:
        rep = run(emu.url, tmp_path / "fixed", tmp_path / "double", vectors=300, host_model=True)
    assert rep.passed, rep.table()
    assert rep.host_model["elements_mismatched"] == 0
    assert all(g.tolerance_kind == "error_bound" for g in rep.outputs)


def test_a_domain_around_a_path_makes_formats_where_the_box_cannot(tmp_path):
    """x / y over the box y in [-1, 1] divides by 0; along the path y stays near 0.5..0.8,
    and a tube of boxes around that path is enough for formats and sound bounds."""
    from mbforge.hil.harness import input_vectors
    from mbforge.domain.motion import covers, tube

    x, y = symbol("dm_x"), symbol("dm_y")
    port = InPort("v", [x, y], [(-1.0, 1.0), (-1.0, 1.0)])
    th = np.linspace(0, 2 * np.pi, 200)
    path = np.column_stack([np.cos(th), 0.65 + 0.15 * np.sin(th)])
    k = Kernel("dm", "k", [port], [OutPort.vector("q", [x / y, sqrt(y)])])
    with pytest.raises(ExpressionError, match="contains 0"):
        generate(k, "c-fixed")
    k.domain = tube(path)
    dense = np.column_stack([np.cos(np.linspace(0, 2 * np.pi, 5000)), 0.65 + 0.15 * np.sin(np.linspace(0, 2 * np.pi, 5000))])
    assert covers(k.domain, dense)
    generate(k, "c-fixed").write(tmp_path)
    m = Manifest.load(tmp_path)
    assert m.domain == "domain.json"
    X = input_vectors(m, tmp_path, 20000, seed=1)
    assert covers(k.domain, X)
    Xi = hostlib.to_raw(m, X, "inputs")
    Yi, status = hostlib.load_kernel(tmp_path)(Xi)
    assert (status == 0).all()
    ref = Evaluator(k.output_atoms, k.input_symbols)(hostlib.from_raw(m, Xi, "inputs"))
    err = np.abs(hostlib.from_raw(m, Yi, "outputs") - ref).max(axis=0)
    assert (err <= np.array(m.outputs[0].error_bound)).all()


@pytest.mark.needs("gappa")
def test_gappa_proves_the_polynomial_bounds_independently():
    """Gappa, from the same tape but its own reasoning, proves enclosures of the error of
    every polynomial output; each lies within mbforge's bound."""
    from mbforge.analysis import gappa
    from mbforge.analysis.fixedpoint import plan_fixed

    k = build_kernel(load("fourbar").equations(), "equations")
    tape = lower(k.output_atoms, k.input_symbols)
    fx = plan_fixed(tape, analyse_domain(tape, [k.input_ranges], budget=1))
    proved = gappa.prove(fx, list(range(len(tape.outputs))), k.input_ranges)
    assert len(proved) >= 10
    for out, b in proved.items():  # Gappa reads the ranges in decimal: allow its last digits
        assert b <= fx.out_error[out] * (1 + 1e-9), (out, b, fx.out_error[out])


@pytest.mark.parametrize("kernel", ["equations", "kinematics"])
def test_interpreter_is_bit_exact_with_the_c(kernel, tmp_path):
    """The numpy interpreter of fixed-point programs gives the bits of the compiled C."""
    from mbforge.hil.harness import input_vectors
    from mbforge.analysis.fixerror import bound_over_boxes
    from mbforge.backends.fixed.interp import simulate
    from mbforge.analysis.ranges import analyse_domain

    k = build_kernel(load("fourbar").equations(), kernel)
    generate(k, "c-fixed").write(tmp_path)
    m = Manifest.load(tmp_path)
    tape = lower(k.output_atoms, k.input_symbols)
    per_box: list = []
    fx = bound_over_boxes(tape, analyse_domain(tape, k.domain or [k.input_ranges], per_box=per_box), per_box)
    Xi = hostlib.to_raw(m, input_vectors(m, tmp_path, 30000, 5), "inputs")
    # and any words inside the envelope (off the domain's boxes: saturating), then any
    # int32 words (each op's edge words are in test_fixed_ops.py)
    rng = np.random.default_rng(6)
    f = np.array([b for g in m.inputs for b in g.frac_bits], dtype=np.float64)
    env = np.array([e for g in m.inputs for e in g.envelope])
    lw, hw = np.floor(env[:, 0] * 2 ** f), np.ceil(env[:, 1] * 2 ** f)  # the C's bounds, rounded outward
    inside = (lw + (hw - lw) * rng.random((20000, Xi.shape[1]))).round().astype(np.int32)
    wild = rng.integers(-2 ** 31, 2 ** 31, size=(20000, Xi.shape[1])).astype(np.int32)
    Xi = np.vstack([Xi, inside, wild, np.zeros((1, Xi.shape[1]), dtype=np.int32)])
    Yc, sc = hostlib.load_kernel(tmp_path)(Xi)
    Ys, ss = simulate(fx, Xi)
    out = ((Xi < lw) | (Xi > hw)).any(axis=1)
    assert (sc == np.where(out, 2, sc)).all() and not (sc[~out] == 2).any()  # 2 exactly outside
    # a sound plan over a box never saturates inside it: status 1 needs a domain smaller
    # than its hull (kinematics), equations is planned over its whole declared box
    assert (sc == 1).any() == bool(k.domain)
    # the interpreter has no envelope check: it is the C where the C computes
    assert (Yc[~out].astype(np.int64) == Ys[~out]).all() and (sc[~out] == ss[~out]).all()


def test_ranges_through_divisions_are_sound_box_by_box():
    """Affine forms carry divisions (linearised reciprocals), square roots and sin/cos
    with their correlations; every enclosure must still hold on samples of its box."""
    k = build_kernel(load("fourbar").equations(), "kinematics")
    tape = lower(k.output_atoms, k.input_symbols)
    ids = sorted(tape.atoms)
    ev = Evaluator([tape.atoms[i] for i in ids], tape.inputs)
    rng = np.random.default_rng(11)
    for box in k.domain[::12]:
        R = analyse_domain(tape, [box], budget=1)
        b = np.array(box)
        Y = ev(b[:, 0] + (b[:, 1] - b[:, 0]) * rng.random((4000, len(box))))
        for col, i in enumerate(ids):
            assert R.temps[i].lo <= Y[:, col].min() and Y[:, col].max() <= R.temps[i].hi, tape.atoms[i]


def test_fourbar_kinematics_in_fixed_point_within_bound(tmp_path):
    k = build_kernel(load("fourbar").equations(), "kinematics")
    err, bound, m = _check(k, tmp_path, n=100_000)
    assert bound.max() < 1e-5
