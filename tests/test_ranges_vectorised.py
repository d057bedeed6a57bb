"""Range analysis over all boxes at once (analyse_boxes / analyse_domain) against plain
interval arithmetic box by box (an oracle of this file) and against dense samples; bisection where a
divisor reaches 0; fixed-point and float32 bounds against double at unrounded inputs."""
import numpy as np
import pytest

import math

from mbforge.analysis.ranges import analyse_boxes, analyse_domain
from mbforge.examples import load
from mbforge.verify import hostlib
from mbforge.ir import Evaluator, ExpressionError, symbol
from mbforge.kernels import InPort, Kernel, OutPort
from mbforge.kernels.builders import build_kernel
from mbforge.lower import lower
from mbforge.manifest import ERROR_BOUND_BASIS, Manifest
from mbforge.pipeline import generate

pytestmark = pytest.mark.host


def _ulps(x):
    return 4 * np.spacing(np.abs(x))


def _up(x):
    return math.nextafter(x, math.inf)


def _down(x):
    return math.nextafter(x, -math.inf)


def _trig(lo, hi, f, peaks):
    """f over [lo, hi]: the ends and the peaks inside (peaks: the offset of f's extrema)."""
    if hi - lo >= 2 * math.pi:
        return -1.0, 1.0
    vals = [f(lo), f(hi)] + [f(peaks + k * math.pi) for k in range(math.ceil((lo - peaks) / math.pi),
                                                                    math.floor((hi - peaks) / math.pi) + 1)]
    return max(-1.0, _down(min(vals))), min(1.0, _up(max(vals)))


def _plain_intervals(tape, box) -> dict:
    """The oracle: every temp by interval arithmetic alone over one box, rounded outwards
    (the analysis keeps the tighter of this and its affine forms, so its enclosures lie
    inside these)."""
    iv: dict = {}

    def of(o):
        return iv[o[1]] if o[0] == "t" else tuple(box[o[1]]) if o[0] == "in" else (o[1], o[1])

    for ins in tape.instrs:
        a = [of(o) for o in ins.args]
        if ins.op in ("add", "sub"):
            (al, ah), (bl, bh) = a
            r = [(_down(al + bl), _up(ah + bh)) if ins.op == "add" else (_down(al - bh), _up(ah - bl))]
        elif ins.op == "neg":
            r = [(-a[0][1], -a[0][0])]
        elif ins.op in ("mul", "div"):
            (al, ah), (bl, bh) = a
            if ins.op == "div":
                assert not bl <= 0.0 <= bh
                bl, bh = _down(1 / bh), _up(1 / bl)
            p = [x * y for x in (al, ah) for y in (bl, bh)]
            r = [(_down(min(p)), _up(max(p)))]
        elif ins.op == "sqrt":
            r = [(_down(math.sqrt(max(a[0][0], 0.0))), _up(math.sqrt(a[0][1])))]
        else:
            fns = {"sin": [(math.sin, math.pi / 2)], "cos": [(math.cos, 0.0)]}
            fns["sincos"] = fns["sin"] + fns["cos"]
            r = [_trig(*a[0], f, peaks) for f, peaks in fns[ins.op]]
        for d, x in zip(ins.dst, r):
            iv[d] = x
    return iv


def _compare(tape, boxes, n_samples, seed):
    """Every vectorised enclosure inside plain interval arithmetic's (up to rounding) and
    around dense samples; returns (tighter, total) counts."""
    arr = np.array(boxes, dtype=np.float64)
    vec = analyse_boxes(tape, arr[:, :, 0], arr[:, :, 1])
    assert (vec.fail < 0).all()
    ids = sorted(tape.atoms)
    ev = Evaluator([tape.atoms[i] for i in ids], tape.inputs)
    rng = np.random.default_rng(seed)
    tighter = total = 0
    for b, box in enumerate(boxes):
        old = _plain_intervals(tape, box)
        lo = np.array([vec.lo[i][b] for i in ids])
        hi = np.array([vec.hi[i][b] for i in ids])
        olo = np.array([old[i][0] for i in ids])
        ohi = np.array([old[i][1] for i in ids])
        slack = 1e-13 * (ohi - olo) + _ulps(olo) + _ulps(ohi)
        assert (lo >= olo - slack).all() and (hi <= ohi + slack).all(), \
            max(np.max(olo - lo), np.max(hi - ohi))
        tighter += int(((lo > olo + slack) | (hi < ohi - slack)).sum())
        total += len(ids)
        a = arr[b]
        Y = ev(a[:, 0] + (a[:, 1] - a[:, 0]) * rng.random((n_samples, len(box))))
        assert (lo <= Y.min(0)).all() and (Y.max(0) <= hi).all()
    assert tighter > 0  # the affine forms do see correlations
    return tighter, total


@pytest.mark.parametrize("model,kernel", [("fourbar", "kinematics"), ("slidercrank", "kinematics"),
                                          ("fourbar", "equations")])
def test_vectorised_enclosures_inside_the_scalar_ones_and_around_samples(model, kernel):
    k = build_kernel(load(model).equations(), kernel)
    tape = lower(k.output_atoms, k.input_symbols)
    boxes = k.domain[::7] if k.domain else [k.input_ranges]
    tighter, total = _compare(tape, boxes, 3000, 5)
    print(f"\n{model} {kernel}: {len(boxes)} boxes, {tighter} of {total} enclosures strictly tighter")


def test_stewart_inverse_dynamics_enclosures(stewart_reduced):
    k, tape = stewart_reduced
    tighter, total = _compare(tape, k.domain[::40], 2000, 9)
    assert tighter > 0
    print(f"\nstewart: {tighter} of {total} enclosures strictly tighter")


@pytest.fixture(scope="module")
def stewart_reduced():
    # the driven motion's tube: over the operating envelope (the default) range analysis
    # cannot yet prove the reduced kernel's pivots away from 0 (bench/stewart_envelope.py)
    k = build_kernel(load("stewart", envelope=False).equations(), "inverse-dynamics-reduced")
    return k, lower(k.output_atoms, k.input_symbols)


def test_hull_and_boxes_of_analyse_domain():
    k = build_kernel(load("fourbar").equations(), "kinematics")
    tape = lower(k.output_atoms, k.input_symbols)
    per: list = []
    hull = analyse_domain(tape, k.domain, per_box=per)
    assert len(per) == len(k.domain)
    for t in list(tape.atoms)[::5]:
        assert hull.temps[t].lo == min(r.temps[t].lo for r in per)
        assert hull.temps[t].hi == max(r.temps[t].hi for r in per)
    for r, box in zip(per[::9], k.domain[::9]):
        assert [(iv.lo, iv.hi) for iv in r.inputs] == [tuple(b) for b in box]


def test_a_divisor_reaching_0_by_overestimation_is_bisected_away():
    """(x - y)^2 + 0.1 never vanishes, but its interval over the box contains 0; the
    halves prove it, and their union is the box, so the hull stays sound."""
    x, y = symbol("bs_x"), symbol("bs_y")
    d = x * x - 2.0 * x * y + y * y + 0.1
    tape = lower([1.0 / d, x / d], [x, y])
    box = [(-1.0, 1.0), (-1.0, 1.0)]
    with pytest.raises(ExpressionError, match="contains 0"):
        analyse_domain(tape, [box], budget=1)  # no bisection allowed
    per: list = []
    hull = analyse_domain(tape, [box], per_box=per, budget=64)
    assert 1 < len(per) <= 64
    lo = np.array([[iv.lo for iv in r.inputs] for r in per])
    hi = np.array([[iv.hi for iv in r.inputs] for r in per])
    assert np.isclose(np.prod(hi - lo, 1).sum(), 4.0, rtol=1e-12)  # the halves tile the box
    X = np.random.default_rng(2).uniform(-1, 1, (200_000, 2))
    X = np.vstack([X, [[1, 1], [-1, -1], [0.5, 0.5]]])  # where the divisor is smallest
    Y = Evaluator([tape.atoms[o[1]] for o in tape.outputs], tape.inputs)(X)
    for col, o in enumerate(tape.outputs):
        iv = hull.of(o)
        assert iv.lo <= Y[:, col].min() and Y[:, col].max() <= iv.hi
    assert np.isfinite(hull.of(tape.outputs[0]).hi)  # 10 is the true largest; the halves stop once 0 is excluded


def test_a_divisor_that_vanishes_is_named_with_the_configuration_and_the_input():
    x, y = symbol("vz_x"), symbol("vz_y")
    tape = lower([x / (y - 0.3)], [x, y])
    with pytest.raises(ExpressionError) as e:
        analyse_domain(tape, [[(-1.0, 1.0), (0.0, 1.0)], [(-1.0, 1.0), (-2.0, -1.0)]], budget=8)
    msg = str(e.value)
    assert "\n" not in msg
    assert "div computing" in msg and "divisor's range [-0.3, 0.7] contains 0" in msg
    assert "narrow the envelope of vz_y" in msg
    # the midpoint named is close to y = 0.3, where the divisor vanishes
    mid_y = float(msg.split("vz_y=")[1].split(";")[0])
    assert abs(mid_y - 0.3) < 0.2


def test_bisection_is_deterministic():
    x, y = symbol("dt_x"), symbol("dt_y")
    d = x * x - 2.0 * x * y + y * y + 0.05
    tape = lower([x / d], [x, y])
    runs = []
    for _ in range(2):
        per: list = []
        hull = analyse_domain(tape, [[(-1.0, 1.0), (-1.0, 1.0)]], per_box=per, budget=64)
        runs.append(([(iv.lo, iv.hi) for r in per for iv in r.inputs], hull.of(tape.outputs[0])))
    assert runs[0] == runs[1]


def _unrounded_inputs(k, n, seed):
    rng = np.random.default_rng(seed)
    boxes = np.array(k.domain or [k.input_ranges])
    B = boxes[rng.integers(0, len(boxes), n)]
    return B[:, :, 0] + (B[:, :, 1] - B[:, :, 0]) * rng.random(B.shape[:2])


@pytest.mark.parametrize("model,kernel", [("slidercrank", "kinematics"), ("fourbar", "equations")])
def test_fixed_bound_holds_against_double_at_the_unrounded_input(model, kernel, tmp_path):
    """The compiled c-fixed kernel at real inputs rounded to their formats by the host,
    against double at the real inputs themselves: the rounding of the inputs is part of
    the bound."""
    k = build_kernel(load(model).equations(), kernel)
    generate(k, "c-fixed").write(tmp_path)
    m = Manifest.load(tmp_path)
    assert m.error_bound_basis == ERROR_BOUND_BASIS and "unrounded input" in m.error_bound_basis
    assert "against double at the unrounded input" in (tmp_path / f"{m.prefix}.h").read_text()
    X = _unrounded_inputs(k, 100_000, 3)
    Y, status = hostlib.load_kernel(tmp_path)(hostlib.to_raw(m, X, "inputs"))
    assert (status == 0).all()
    err = np.abs(hostlib.from_raw(m, Y, "outputs") - Evaluator(k.output_atoms, k.input_symbols)(X)).max(0)
    bound = np.array([b for g in m.outputs for b in g.error_bound])
    assert (err <= bound).all(), [(n, e, b) for n, e, b in zip(m.flat_names(), err, bound) if e > b]


@pytest.mark.parametrize("model,kernel", [("slidercrank", "kinematics"), ("fourbar", "kinematics"),
                                          ("slidercrank", "equations")])
def test_float32_bound_holds_against_double_at_the_unrounded_input(model, kernel, tmp_path):
    """The compiled c-float32 kernel at the real inputs rounded to float, against double
    at the real inputs (the bound without the inputs' rounding fails here by up to 4x)."""
    k = build_kernel(load(model).equations(), kernel)
    generate(k, "c-float32").write(tmp_path)
    m = Manifest.load(tmp_path)
    assert m.error_bound_basis == ERROR_BOUND_BASIS
    X = _unrounded_inputs(k, 100_000, 4)
    Y, status = hostlib.load_kernel(tmp_path)(X.astype(np.float32))
    assert (status == 0).all()
    err = np.abs(Y.astype(np.float64) - Evaluator(k.output_atoms, k.input_symbols)(X)).max(0)
    bound = np.array([b for g in m.outputs for b in g.error_bound], dtype=np.float64)
    assert (err <= bound).all(), [(n, e, b) for n, e, b in zip(m.flat_names(), err, bound) if e > b]


def test_float32_bounds_over_boxes_are_the_largest_of_the_box_by_box_bounds():
    from mbforge.analysis.floaterror import float32_bounds, float32_bounds_boxes
    from mbforge.analysis.ranges import BoxRanges

    k = build_kernel(load("fourbar").equations(), "kinematics")
    tape = lower(k.output_atoms, k.input_symbols)
    per: list = []
    hull = analyse_domain(tape, k.domain, strict=False, per_box=per)
    vec = BoxRanges.from_list(tape, per)
    together = np.array(float32_bounds_boxes(tape, vec))
    one_by_one = np.array([float32_bounds(tape, r) for r in per]).max(0)
    np.testing.assert_allclose(together, one_by_one, rtol=1e-12)
    assert (together <= np.array(float32_bounds(tape, hull)) * (1 + 1e-12)).all()


def test_unbounded_boxes_stay_unbounded_through_sin_and_cos():
    """Not strict: downstream of a divisor reaching 0 a box's values are unbounded (sin
    and cos of them too), and the other boxes keep their own
    enclosures."""
    from mbforge.ir import cos, sin

    x, y = symbol("ub_x"), symbol("ub_y")
    tape = lower([sin(x / y) + cos(x / y), x * y], [x, y])
    per: list = []
    analyse_domain(tape, [[(0.0, 1.0), (-1.0, 1.0)], [(0.0, 1.0), (1.0, 2.0)]], strict=False, per_box=per, budget=1)
    first, second = per
    s = first.of(tape.outputs[0])
    assert (s.lo, s.hi) == (-np.inf, np.inf)
    assert np.isfinite(first.of(tape.outputs[1]).hi)
    t = second.of(tape.outputs[0])
    assert t.hi - t.lo < 2.0


def test_an_input_form_covers_its_box_when_the_midpoint_rounds():
    """[0.29999999999999993, 0.3]: (lo + hi) / 2 rounds to lo, so half the width from
    there misses hi; y - 0.3 reaches 0 at hi and the division must be refused."""
    y = symbol("mr_y")
    tape = lower([1.0 / (y - 0.3)], [y])
    box = [(0.29999999999999993, 0.3)]
    with pytest.raises(ExpressionError, match="contains 0"):
        analyse_domain(tape, [box], budget=1)
    arr = np.array([box])
    assert analyse_boxes(tape, arr[:, :, 0], arr[:, :, 1]).fail[0] >= 0


def test_bisecting_the_boxes_that_hold_the_largest_fixed_bound():
    """With a budget, the boxes holding an output's largest bound are bisected where
    that lowers it: never a larger bound, the same program, and the bound still holds
    (the fixed-point interpreter at real inputs against double there)."""
    from mbforge.analysis.fixerror import bound_over_boxes
    from mbforge.backends.fixed.interp import simulate

    k = build_kernel(load("fourbar").equations(), "kinematics")
    tape = lower(k.output_atoms, k.input_symbols)
    per: list = []
    hull = analyse_domain(tape, k.domain, per_box=per)
    fx1 = bound_over_boxes(tape, hull, per, budget=1)
    fx4 = bound_over_boxes(tape, hull, per, budget=4)
    assert fx4.temp_bits == fx1.temp_bits and fx4.out_bits == fx1.out_bits
    assert all(b4 <= b1 for b4, b1 in zip(fx4.out_error, fx1.out_error))
    assert any(b4 < b1 for b4, b1 in zip(fx4.out_error, fx1.out_error))  # some halves were kept
    X = _unrounded_inputs(k, 50_000, 8)
    Xi = np.rint(X * np.exp2(fx4.in_bits))
    Y, status = simulate(fx4, Xi)
    assert (status == 0).all()
    err = np.abs(Y / np.exp2(fx4.out_bits) - Evaluator(k.output_atoms, k.input_symbols)(X)).max(0)
    assert (err <= np.array(fx4.out_error)).all()
    print(f"\nfourbar kinematics: largest bound {max(fx1.out_error):.3g} -> {max(fx4.out_error):.3g} with bisection")


def test_rounding_statistics_say_where_a_bound_comes_from():
    """Per output, the roundings' shares of the bound (by tenth of the program and the
    largest five) add up with the remainder to the bound, and each named rounding is an
    instruction of the program that rounds (or an input's conversion)."""
    from mbforge.analysis.fixerror import bound_over_boxes, rounding_statistics
    from mbforge.analysis.ranges import BoxRanges

    k = build_kernel(load("fourbar").equations(), "kinematics")
    tape = lower(k.output_atoms, k.input_symbols)
    per: list = []
    fx = bound_over_boxes(tape, analyse_domain(tape, k.domain, per_box=per), per)
    stats = rounding_statistics(fx, BoxRanges.from_list(tape, per))
    assert len(stats) == len(tape.outputs)
    for s in stats:
        first_order = sum(s["share_by_tenth"]) * s["bound"]
        assert first_order + s["remainder"] == pytest.approx(s["bound"], rel=1e-3)
        shares = [t["share"] for t in s["top"]]
        assert shares == sorted(shares, reverse=True) and 0 < shares[0] <= 1
        for t in s["top"]:
            assert t["op"] == ("input" if t["instr"] < 0 else fx.instrs[t["instr"]].op)
            assert t["op"] in ("input", "add", "sub", "mul", "div", "sqrt", "sin", "cos", "sincos")


def test_atan2_enclosure_holds_every_point_of_its_boxes():
    """ranges._vi_atan2 on random boxes of every quadrant, across the axes and the branch
    cut: every point's angle inside [lo, hi]; boxes holding (0, 0) flagged, and no
    enclosure narrower than the corners' where the box touches the cut from above."""
    from mbforge.analysis.ranges import _vi_atan2

    rng = np.random.default_rng(2)
    c = rng.uniform(-2, 2, (3000, 2))
    r = rng.uniform(0, 1.5, (3000, 2))
    ylo, yhi, xlo, xhi = c[:, 0] - r[:, 0], c[:, 0] + r[:, 0], c[:, 1] - r[:, 1], c[:, 1] + r[:, 1]
    ylo[:200], yhi[:200] = 0.0, np.abs(yhi[:200]) + 0.1  # boxes resting on the x axis from above
    lo, hi, origin = _vi_atan2(ylo, yhi, xlo, xhi)
    assert origin.any() and (~origin).any()
    t = rng.uniform(0, 1, (3000, 400, 2))
    t[:, 0, 0] = 0.0  # a point on each box's lower edge
    Y = ylo[:, None] + (yhi - ylo)[:, None] * t[:, :, 0]
    X = xlo[:, None] + (xhi - xlo)[:, None] * t[:, :, 1]
    A = np.arctan2(Y, X)
    ok = (A >= lo[:, None]) & (A <= hi[:, None])
    assert ok[~origin].all()
    assert (lo >= -np.pi - 1e-15).all() and (hi <= np.pi + 1e-15).all()
