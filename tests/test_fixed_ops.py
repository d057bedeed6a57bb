"""The fixed-point op set (mbforge.backends.fixed.ops): its semantics as its docstring states
them, and every printer of it agreeing with the one interpreter bit for bit on EDGE words
(zero divisors, INT32_MIN/MAX operands, ties of the rounding shift, saturating sums and
products at both ends, negative shifts, sqrt of 0/negative/max, sin/cos of extreme
arguments) and random int32 words: the host C (gcc), the HLS C (gcc, a C simulation) and
the RTL (Icarus through hdl.sim, which checks it against the host C)."""
import itertools

import numpy as np
import pytest

from mbforge.analysis.fixerror import bound_over_boxes
from mbforge.analysis.ranges import analyse_domain
from mbforge.backends.fixed import ops
from mbforge.backends.fixed.interp import simulate
from mbforge.backends.rtl.lower import evaluate
from mbforge.verify import hostlib
from mbforge.ir import cos, sin, sqrt, symbol
from mbforge.kernels import InPort, Kernel, OutPort
from mbforge.lower import lower
from mbforge.pipeline import generate

MAX, MIN = 2 ** 31 - 1, -2 ** 31


def _a(*v):
    return np.array(v, dtype=np.int64)


# ---- the semantics, as the module docstring states them ----------------------------------

def test_rounding_shift_rounds_ties_up_and_negative_shifts_multiply():
    assert ops.rsh(_a(3, -3, 1, -1, 5, -5), 1).tolist() == [2, -1, 1, 0, 3, -2]
    assert ops.rsh(_a(3, -3), -2).tolist() == [12, -12]
    assert ops.rsh(_a(7), 0).tolist() == [7]


def test_saturation_clamps_at_both_ends_and_flags():
    ovf = np.zeros(4, dtype=bool)
    assert ops.sat(_a(MAX + 1, MIN - 1, MAX, MIN), ovf).tolist() == [MAX, MIN, MAX, MIN]
    assert ovf.tolist() == [True, True, False, False]
    quiet = ops.sat(_a(MAX + 1), None)  # flag=False ops clamp without flagging
    assert quiet.tolist() == [MAX]


def test_division_by_zero_saturates_by_the_numerator_sign_and_rounds_half_away():
    """0 / 0 is INT32_MAX with the flag: the c-fixed C's definition (its helper tests the
    numerator's sign only). The numpy interpreter once returned 0 there (and x for x / 0)."""
    ovf = np.zeros(9, dtype=bool)
    q = ops.divide(_a(0, 5, -5, 2 ** 40, 1, -1, 3, -3, -(2 ** 31)), _a(0, 0, 0, 0, 2, 2, -2, -2, 1), ovf)
    assert q.tolist() == [MAX, MAX, MIN, MAX, 1, -1, -2, 2, MIN]
    assert ovf.tolist() == [True] * 4 + [False] * 5  # -2**31 / 1 fits: INT32_MIN is reachable
    ovf = np.zeros(2, dtype=bool)
    assert ops.divide(_a(2 ** 31, -(2 ** 31) - 2), _a(1, 1), ovf).tolist() == [MAX, MIN]
    assert ovf.all()


def test_square_root_is_nearest_and_reads_negatives_as_zero():
    ovf = np.zeros(7, dtype=bool)
    r = ops.square_root(_a(0, -5, 2, 6, 7, 2 ** 62, 2 ** 63 - 1), ovf)
    assert r.tolist() == [0, 0, 1, 2, 3, MAX, MAX]
    assert ovf.tolist() == [False] * 5 + [True, True]


def test_trig_constants_are_computed_here():
    t = ops.TRIG
    assert abs(t["two_over_pi_q24"] / 2 ** 24 - 2 / np.pi) < 2 ** -24
    assert abs(t["pio2_hi_q29"] / 2 ** 29 + t["pio2_lo_q60"] / 2 ** 60 - np.pi / 2) < 1e-17
    assert t["sin"][0] == round(-2 ** 30 / 6) and t["cos"][0] == -2 ** 29


def test_latencies_are_the_op_tables():
    from mbforge.backends.rtl.schedule import LATENCY

    assert LATENCY == {k: o.latency for k, o in ops.OPS.items()}
    assert set(LATENCY) == {"add", "mul", "div", "sqrt", "tred", "tsel"}


# ---- one kernel with every op, on every printer ---------------------------------------

def edge_kernel() -> Kernel:
    a, b, y, z = (symbol(f"eo_{n}") for n in "abyz")
    outs = [a + b, a - b, a + z, a + 0.3, -a, a * b, a * z, 0.7 * a, a / y, 3 / y, sqrt(y),
            sqrt(a * a + y), sin(z), cos(z), sin(a), cos(0.25 * z + 0.5)]
    return Kernel("eo", "edges", [InPort("v", [a, b, y, z], [(-1.0, 1.0), (-1.0, 1.0), (0.5, 2.0), (-200.0, 200.0)])],
                  [OutPort.vector("y", outs)])


def _program(k):
    tape = lower(k.output_atoms, k.input_symbols)
    per_box: list = []
    return bound_over_boxes(tape, analyse_domain(tape, [k.input_ranges], per_box=per_box), per_box)


def edge_words(fx, n_random=20000, seed=0):
    """Every combination of ten edge words per input (10**4 rows), ties of the rounding
    shifts the plan uses, then n_random random int32 words."""
    W = [0, 1, -1, 2, MAX, MIN, MAX - 1, MIN + 1, 1 << 30, -(1 << 30)]
    rows = [list(r) for r in itertools.product(W, repeat=4)]
    for ins in fx.instrs:  # operands whose shifted value lies exactly half-way
        if ins.op == "mul" and "lit" not in ins.params and ins.params["s"] > 0:
            h = 1 << (ins.params["s"] - 1)
            rows += [[m * h, 1, 1, 1] for m in (1, -1, 3, -3)]
        if ins.op in ("add", "sub") and ins.params["s"] > 0:  # a's term alone, half an ulp
            h = 1 << (ins.params["s"] - 1)
            rows += [[m * h, 0, 0, 0] for m in (1, -1, 3, -3)]
    rng = np.random.default_rng(seed)
    rnd = rng.integers(MIN, MAX + 1, size=(n_random, 4), dtype=np.int64)
    return np.vstack([np.array(rows, dtype=np.int64), rnd]).astype(np.int32)


@pytest.fixture(scope="module")
def edges(tmp_path_factory):
    k = edge_kernel()
    root = tmp_path_factory.mktemp("edges")
    # the op set on any words: the envelope check off (it would refuse most of them)
    generate(k, "c-fixed", options={"input_check": "off"}).write(root / "fixed")
    generate(k, "hls-c", options={"input_check": "off"}).write(root / "hls")
    fx = _program(k)
    return k, root, fx, edge_words(fx)


def test_the_edge_kernel_has_every_op(edges):
    k, root, fx, X = edges
    kinds = {i.op for i in fx.instrs}
    assert {"add", "sub", "neg", "mul", "div", "sqrt"} <= kinds and kinds & {"sin", "cos", "sincos"}
    assert any("lit" in i.params for i in fx.instrs if i.op == "div")
    assert any("lit" in i.params for i in fx.instrs if i.op == "mul")
    hp = ops.lower_hw(fx)
    assert hp.counts().keys() == ops.OPS.keys()
    # a negative shift: the reduction of a Q30 argument aligns it to Q29 by rsh(x, 1)
    assert any(op.kind == "tred" and op.p["sh"] < 0 for op in hp.ops)


@pytest.mark.host
def test_interpreter_host_c_and_hls_c_agree_on_edge_and_random_words(edges):
    k, root, fx, X = edges
    Yi, si = simulate(fx, X)
    Yc, sc = hostlib.load_kernel(root / "fixed")(X)
    Yh, sh = hostlib.load_kernel(root / "hls")(X)
    assert (sc == 1).any() and (sc == 0).any()  # saturation at work, and not everywhere
    assert np.array_equal(Yc.astype(np.int64), Yi) and np.array_equal(sc, si)
    assert np.array_equal(Yh, Yc) and np.array_equal(sh, sc)
    Ye, se = evaluate(ops.lower_hw(fx), X)
    assert np.array_equal(Ye, Yc) and np.array_equal(se, sc)
    # the saturating ends are reached: INT32_MAX and INT32_MIN both appear in a sum and a product
    for col in (0, 5):
        assert (Yc[:, col] == MAX).any() and (Yc[:, col] == MIN).any()


@pytest.mark.host
def test_division_by_zero_in_every_model(edges):
    """q = a / y with raw (0, 0): INT32_MAX and status 1 in the C, the HLS C and the
    interpreter (the interpreter gave 0 before the op set was one)."""
    k, root, fx, _ = edges
    X = np.array([[0, 0, 0, 0], [5, 0, 0, 0], [-5, 0, 0, 0], [MIN, 0, -1, 0]], dtype=np.int32)
    col = 8  # a / y
    for Y, st in (simulate(fx, X), hostlib.load_kernel(root / "fixed")(X), hostlib.load_kernel(root / "hls")(X)):
        assert Y[:, col].tolist() == [MAX, MAX, MIN, MAX] and st.tolist() == [1, 1, 1, 1]


@pytest.mark.hdl
@pytest.mark.needs("iverilog")
@pytest.mark.parametrize("variant", ["pipelined", "shared"])
def test_rtl_on_icarus_agrees_on_edge_words(edges, variant, tmp_path):
    from mbforge.hdl import sim as S

    k, root, fx, X = edges
    generate(k, "verilog", options={"variant": variant, "multipliers": 2, "input_check": "off"}).write(tmp_path / "rtl")
    # the edge words of five values per input, the ties, 200 random words (a cocotb
    # vector costs a few clocks)
    W = [0, 1, -1, MAX, MIN]
    rows = np.array(list(itertools.product(W, repeat=4)), dtype=np.int32)
    Xr = np.vstack([rows, X[10 ** 4:len(X) - 20000], X[-200:]])
    b = S.build(tmp_path / "rtl", "icarus")
    r = S.simulate(b, root / "fixed", X=Xr, tests=("test_vectors",))
    assert r.bit_exact and not r.errors, r.table()
