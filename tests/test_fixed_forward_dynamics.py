"""Fixed-point forward dynamics of closed loops over their operating envelopes: the
slider-crank (a full crank turn at 5..60 rpm), the free four-bar (a full turn either way)
and a five-bar (tests/fixtures/fivebar.py, two cranks); and the pairs of issue 33 item 8
that the envelopes' covers now hold: the slider-crank with a disc's forward and linearized
dynamics and the slider-crank's linearized dynamics (in c-float32 too). Their c-fixed kernels are checked
on consistent states drawn uniformly over each envelope (domain.cover), not on one
motion: every state returns status 0 and every output stays within its manifest bound,
against double both at the inputs the kernel receives (the int32 words: the bound's
contract today) and at the real inputs before rounding (issue 13 item 7's contract; the
observed errors are far below the bound either way). The compiled C is checked on the
host, the four-bar also on the AN385 in QEMU (`mbforge hil`'s harness, then dense
consistent states over the link) and its RTL on Icarus.
"""
import numpy as np
import pytest

from mbforge.domain import cover as C
from mbforge.examples import load_model
from mbforge.verify import hostlib
from mbforge.verify.vectors import from_raw, to_raw
from mbforge.ir import Evaluator
from mbforge.kernels.builders import build_kernel
from mbforge.kernels.common import constraint_rows
from mbforge.manifest import Manifest
from mbforge.pipeline import generate

from helpers import FIXTURES

pytestmark = pytest.mark.host

MODELS = {  # name -> (model, --set options, kernel)
    "slidercrank": ("slidercrank", {}, "forward-dynamics"),
    "fourbar": ("fourbar", {"driven": False}, "forward-dynamics"),
    "fivebar": (str(FIXTURES / "fivebar.py"), {}, "forward-dynamics"),
    # issue 33 item 8's pairs that the envelopes' covers hold (refused over the declared boxes)
    "slidercrank_disc": ("slidercrank_disc", {}, "forward-dynamics"),
    "slidercrank_disc_linearized": ("slidercrank_disc", {}, "linearized-dynamics"),
    "slidercrank_linearized": ("slidercrank", {}, "linearized-dynamics"),
}
DENSE = 20_000


class Case:
    """One model's forward-dynamics kernel, its cover and generated c-fixed/c-double dirs."""

    def __init__(self, name: str, root):
        spec, options, kernel = MODELS[name]
        self.eqs = load_model(spec, options=options).equations()
        self.kernel = build_kernel(self.eqs, kernel)
        rows = constraint_rows(self.eqs, kinematic_only=True)[3]
        self.cover = C.envelope_cover(self.eqs, rows=rows)
        self.fixed, self.double = root / "c-fixed", root / "c-double"
        generate(self.kernel, "c-fixed").write(self.fixed)
        generate(self.kernel, "c-double").write(self.double)
        self.m = Manifest.load(self.fixed)

    def consistent(self, n: int, seed: int):
        """n consistent states of the envelope as kernel inputs (t and the actuator inputs,
        which the cover does not bound, uniform over their envelope ranges), and the
        envelope quantities' samples {name: values}."""
        S = self.cover.sample(n, seed)
        fb = C.input_fallback(self.eqs, self.kernel.inputs)
        rng = np.random.default_rng(seed + 1)
        k = len(next(iter(S.values())))
        X = np.column_stack([S[s] if s in S else rng.uniform(*fb[s], k) for s in self.kernel.input_symbols])
        p = self.cover.problem.params
        return X, {a.name: S[a.sym] for a in p} | {a.name + "_d": S[a.sym_d] for a in p}

    def bounds(self) -> np.ndarray:
        return np.array([b for g in self.m.outputs for b in g.error_bound])

    def beyond_bound(self, X_real, Y_raw) -> list:
        """(output, observed, bound) for every output whose error exceeds its bound, against
        double at the int32 inputs and at the real ones."""
        ev = Evaluator(self.kernel.output_atoms, self.kernel.input_symbols)
        Y = from_raw(self.m, Y_raw, "outputs")
        bound = self.bounds()
        out = []
        for what, X in (("int32 inputs", from_raw(self.m, to_raw(self.m, X_real, "inputs"), "inputs")),
                        ("real inputs", X_real)):
            err = np.abs(Y - ev(X)).max(axis=0)
            out += [(what, name, e, b) for name, e, b in zip(self.m.flat_names(), err, bound) if not e <= b]
        return out


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    made: dict[str, Case] = {}

    def get(name: str) -> Case:
        if name not in made:
            made[name] = Case(name, tmp_path_factory.mktemp(f"fd_{name}"))
        return made[name]
    return get


@pytest.mark.slow  # generates the three kernels (the five-bar's 266 boxes: about 15 s)
def test_the_envelopes_are_a_full_turn_at_a_range_of_speeds(case):
    """What the kernels are checked on: the slider-crank's crank angle over a whole turn at
    5..60 rpm, the four-bar's either way at up to 6.5 rad/s, the five-bar's 60 degrees of
    each crank; every sampled state lies in a box of the kernel's domain."""
    for name, spans in (("slidercrank", {"th1": 2 * np.pi, "th1_d": 2 * np.pi - 0.5}),
                        ("fourbar", {"crank": 2 * np.pi, "crank_d": 13.0}),
                        ("fivebar", {"th1": np.pi / 3, "th2": np.pi / 3, "th1_d": 6.0, "th2_d": 6.0})):
        c = case(name)
        X, P = c.consistent(4000, 5)
        for q, span in spans.items():
            assert np.ptp(P[q]) > 0.98 * span, (name, q, np.ptp(P[q]))
        D = np.array(c.kernel.domain)
        inside = np.zeros(len(X), dtype=bool)
        for b in range(0, len(X), 500):
            x = X[b:b + 500, None, :]
            inside[b:b + 500] = np.all((x >= D[None, :, :, 0]) & (x <= D[None, :, :, 1]), axis=2).any(axis=1)
        assert inside.all(), (name, int((~inside).sum()))


@pytest.mark.parametrize("name", ["fourbar", pytest.param("fivebar", marks=pytest.mark.slow), "slidercrank",
                                  "slidercrank_disc", "slidercrank_disc_linearized", "slidercrank_linearized"])
def test_consistent_states_give_status_0_within_the_bound(case, name):
    """20,000 consistent states of the envelope through the compiled c-fixed kernel."""
    c = case(name)
    X, _ = c.consistent(DENSE, 11)
    assert len(X) > 0.99 * DENSE  # Newton reached (almost) every drawn state
    Y, status = hostlib.load_kernel(c.fixed)(to_raw(c.m, X, "inputs"))
    assert (status == 0).all(), (name, int((status != 0).sum()))
    assert not c.beyond_bound(X, Y)
    assert np.isfinite(c.bounds()).all() and c.bounds().max() < 0.05  # a bound a controller can use


@pytest.mark.parametrize("name", ["slidercrank_disc", "slidercrank_disc_linearized", "slidercrank_linearized"])
def test_float32_bounds_are_finite_and_hold_on_the_envelope(case, name, tmp_path):
    """The same pairs in c-float32 (their bounds were missing over the declared boxes):
    every bound finite and below 1e-3 of its output's largest value, and it holds against
    double at the real inputs of 20,000 consistent states."""
    c = case(name)
    generate(c.kernel, "c-float32").write(tmp_path / "f32")
    m = Manifest.load(tmp_path / "f32")
    X, _ = c.consistent(DENSE, 13)
    Y, status = hostlib.load_kernel(tmp_path / "f32")(to_raw(m, X, "inputs"))
    assert (status == 0).all()
    ref = Evaluator(c.kernel.output_atoms, c.kernel.input_symbols)(X)
    err = np.abs(from_raw(m, Y, "outputs") - ref).max(axis=0)
    bound = np.array([b for g in m.outputs for b in g.error_bound], dtype=float)
    assert np.isfinite(bound).all() and (err <= bound).all(), (name, (err / bound).max())
    assert (bound <= 1e-3 * np.maximum(np.abs(ref).max(axis=0), 1.0)).all()


def test_the_check_catches_a_kernel_off_its_bound(case):
    """The comparison can fail: outputs one bound-and-a-bit off are reported."""
    c = case("fourbar")
    X, _ = c.consistent(200, 12)
    Y, _ = hostlib.load_kernel(c.fixed)(to_raw(c.m, X, "inputs"))
    ulp = np.exp2(-np.array([f for g in c.m.outputs for f in g.frac_bits], dtype=float))
    off = Y.astype(np.int64) + np.ceil(1.01 * c.bounds() / ulp).astype(np.int64) + 1
    assert {n for _, n, _, _ in c.beyond_bound(X, off)} == set(c.m.flat_names())


@pytest.mark.firmware
@pytest.mark.slow
@pytest.mark.usefixtures("deadline")
def test_fourbar_forward_dynamics_on_the_an385(case, tmp_path):
    """`mbforge hil`'s harness passes on the emulated Cortex-M3; then 1,000 consistent
    states over the link: status 0, the host C's bits, within the bound."""
    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil.harness import run
    from mbforge.hil.link import Link, LinkDevice

    c = case("fourbar")
    elf = build(generate_project(c.fixed, tmp_path / "fw"), "emulated_an385")
    X, _ = c.consistent(1000, 13)
    R = to_raw(c.m, X, "inputs")
    with Emulator(elf) as emu:
        rep = run(emu.url, c.fixed, c.double, vectors=200, host_model=True)
        assert rep.passed, rep.table()
        assert rep.host_model["elements_mismatched"] == 0
        with Link(emu.url, timeout=3.0) as link:
            dev = LinkDevice(link, calibrated=False).eval(R)
    Yh, sh = hostlib.load_kernel(c.fixed)(R)
    assert (dev.status == 0).all() and (sh == 0).all()
    assert (dev.outputs.astype(np.int64) == Yh.astype(np.int64)).all()
    assert not c.beyond_bound(X, dev.outputs)


@pytest.mark.hdl
@pytest.mark.slow
def test_fourbar_forward_dynamics_rtl_on_icarus(case, tmp_path):
    """The pipelined RTL on Icarus, on consistent states: the host C's bits, within the bound."""
    from mbforge.hdl import sim as S

    c = case("fourbar")
    generate(c.kernel, "verilog", options={"variant": "pipelined"}).write(tmp_path / "rtl")
    X, _ = c.consistent(120, 14)
    R = to_raw(c.m, X, "inputs")
    _, status = hostlib.load_kernel(c.fixed)(R)
    assert (status == 0).all()
    r = S.simulate(S.build(tmp_path / "rtl", "icarus"), c.fixed, c.double, X=R, tests=("test_vectors",))
    assert r.passed, r.table()
    assert r.bit_exact and r.within_bound and r.vectors == len(R)


def test_near_constant_inputs_keep_every_shift_within_int64(tmp_path):
    """A coordinate the cover pins to +-1e-13 (a ground body's) once got Q74 and its
    products shifted by 72 bits: undefined in the C, an OverflowError in the interpreter.
    Formats stop at 62 fractional bits; the C and the interpreter agree bit for bit on
    any int32 words, and stay within the bound inside the ranges."""
    from mbforge.analysis.fixerror import bound_over_boxes
    from mbforge.analysis.ranges import analyse_domain
    from mbforge.backends.fixed.interp import simulate
    from mbforge.ir import symbol
    from mbforge.kernels import InPort, Kernel, OutPort
    from mbforge.lower import lower

    x, y, z = symbol("nc_x"), symbol("nc_y"), symbol("nc_z")
    k = Kernel("nc", "near-constant", [InPort("v", [x, y, z], [(-1e-13, 1e-13), (-1e-13, 1e-13), (-1.0, 1.0)])],
               [OutPort.vector("y", [x * y, x * y * y, x * y * z, x * z + y, z * z * x])])
    generate(k, "c-fixed").write(tmp_path)
    m = Manifest.load(tmp_path)
    assert max(f for g in m.inputs for f in g.frac_bits) == 62
    tape = lower(k.output_atoms, k.input_symbols)
    per_box: list = []
    fx = bound_over_boxes(tape, analyse_domain(tape, [k.input_ranges], per_box=per_box), per_box)
    rng = np.random.default_rng(3)
    # words inside the envelope (the C computes there; outside it returns status 2 at once)
    # and any int32 words (the interpreter must not overflow on them either)
    w = [int(np.floor(hi * 2.0 ** f)) for (lo, hi), f in zip(k.input_ranges, m.inputs[0].frac_bits)]
    inside = np.column_stack([rng.integers(-v, v + 1, 5000) for v in w])
    X = np.vstack([inside, rng.integers(-2 ** 31, 2 ** 31, size=(5000, 3)),
                   [[-2 ** 31, -2 ** 31, -2 ** 31], [2 ** 31 - 1] * 3, [0, 0, 0]]]).astype(np.int32)
    Yc, sc = hostlib.load_kernel(tmp_path)(X)
    Yi, si = simulate(fx, X)
    ran = sc != 2
    assert ran[:5000].all() and (sc[5000:] == 2).any()
    assert (Yc[ran].astype(np.int64) == Yi[ran]).all() and (sc[ran] == si[ran]).all()
    Xr = np.column_stack([rng.uniform(lo, hi, 5000) for lo, hi in k.input_ranges])
    Y, status = hostlib.load_kernel(tmp_path)(to_raw(m, Xr, "inputs"))
    err = np.abs(from_raw(m, Y, "outputs") - Evaluator(k.output_atoms, k.input_symbols)(
        from_raw(m, to_raw(m, Xr, "inputs"), "inputs"))).max(axis=0)
    assert (status == 0).all() and (err <= np.array(m.outputs[0].error_bound)).all()
