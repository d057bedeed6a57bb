"""The linearized-dynamics kernel: its generated C (double, host build) against
mbforge.linearize at consistent operating points (cart-pole in reference-point coordinates,
a double pendulum in relative coordinates), and its float32 build through `mbforge hil` on
the emulated board."""
import dataclasses
import math

import numpy as np
import pytest

import mbforge
from mbforge.verify.hostlib import load_kernel
from mbforge.kernels.builders import KernelError, build_kernel
from mbforge.model import Model
from mbforge.pipeline import generate

from helpers.models import G, I_POLE, L_COM, M_CART, M_POLE, double_pendulum
from helpers.models import cart_pole as linearize_cart_pole


# the kernel's inputs (and test vectors) need a declared range for every position, velocity
# and acceleration that fits the operating points
KERNEL_RANGES = {"travel": ((-1, 1), (-2, 2), (-50, 50)), "still": ((-0.01, 0.01), (-0.01, 0.01), (-1, 1)),
                 "pole": ((1.2, 1.9), (-3, 3), (-99, 99))}


def cart_pole() -> Model:
    """The cart-pole of test_linearize over KERNEL_RANGES."""
    return linearize_cart_pole("lkcp", **KERNEL_RANGES)


def _matrix(kernel, got: np.ndarray, name: str) -> np.ndarray:
    """The dense matrix `name` from one row of flat kernel outputs."""
    off = 0
    for p in kernel.outputs:
        if p.name == name:
            X = np.zeros(p.shape)
            for k, (i, j) in enumerate(p.pattern):
                X[i, j] = got[off + k]
            return X
        off += len(p.atoms)
    raise KeyError(name)


def _wide_u(k, names=("u",)):
    """k with the ports `names` declared over [-10, 10]: the operating points below push
    harder (or turn faster) than declared, and an input outside its range returns status 2."""
    ports = [dataclasses.replace(p, ranges=[(-10.0, 10.0)] * len(p.symbols)) if p.name in names else p
             for p in k.inputs]
    return dataclasses.replace(k, inputs=ports)


def _check(kernel, hk, lin):
    timed = any(p.name == "t" for p in kernel.inputs)  # t only where the outputs depend on it
    X = np.concatenate([lin.q, lin.qd, [lin.t] if timed else [], lin.u])[None]
    got, status = hk(X)
    assert status[0] == 0
    for name, want in (("A", lin.A), ("B", lin.B), ("C", lin.C)):
        if want is None:  # a model without outputs: no C
            continue
        scale = max(1.0, np.max(np.abs(want)))
        np.testing.assert_allclose(_matrix(kernel, got[0], name), want, rtol=0, atol=1e-10 * scale, err_msg=name)


@pytest.fixture(scope="module")
def cart_pole_kernel(tmp_path_factory):
    m = cart_pole()
    k = _wide_u(build_kernel(m.equations(), "linearized-dynamics", coordinates=["lkcp_xc", "lkcp_thp"]))
    d = tmp_path_factory.mktemp("lkcp")
    generate(k, "c-double").write(d)
    return m, k, load_kernel(d)


@pytest.mark.host
@pytest.mark.parametrize("point", [
    ({"lkcp_xc": 0.0, "lkcp_thp": math.pi / 2}, {"lkcp_xc": 0.0, "lkcp_thp": 0.0}, [0.0]),
    ({"lkcp_xc": 0.3, "lkcp_thp": 1.4}, {"lkcp_xc": 0.5, "lkcp_thp": -1.0}, [2.0]),
    ({"lkcp_xc": -0.7, "lkcp_thp": 1.85}, {"lkcp_xc": -1.5, "lkcp_thp": 2.5}, [-7.5]),
])
def test_cart_pole_kernel_agrees_with_linearize(cart_pole_kernel, point):
    m, k, hk = cart_pole_kernel
    q, qd, u = point
    lin = mbforge.linearize(m, q=q, qd=qd, u=u, coordinates=["lkcp_xc", "lkcp_thp"])
    assert k.description.count("lkcp_xc, lkcp_thp, lkcp_xc_d, lkcp_thp_d") == 1
    _check(k, hk, lin)


@pytest.mark.host
def test_cart_pole_upright_is_the_closed_form(cart_pole_kernel):
    """At the upright equilibrium the kernel gives the textbook A, B (pole angle from vertical)."""
    from helpers.models import cart_pole_closed_form

    m, k, hk = cart_pole_kernel
    q = np.zeros(6)
    q[5] = math.pi / 2
    got, _ = hk(np.concatenate([q, np.zeros(6), [0.0]])[None])  # q, qd, u (no t: time-independent)
    A, B = cart_pole_closed_form(True)
    np.testing.assert_allclose(_matrix(k, got[0], "A"), A, rtol=0, atol=1e-12)
    np.testing.assert_allclose(_matrix(k, got[0], "B"), B, rtol=0, atol=1e-12)


@pytest.mark.host
def test_cart_pole_default_choice_matches_linearize(tmp_path):
    """Left to itself the kernel picks the coordinates linearize() picks."""
    m = cart_pole()
    k = _wide_u(build_kernel(m.equations(), "linearized-dynamics"))
    generate(k, "c-double").write(tmp_path)
    lin = mbforge.linearize(m, q={"lkcp_xc": 0.2, "lkcp_thp": 1.6}, qd={"lkcp_xc": 0.4, "lkcp_thp": 0.9}, u=[1.0])
    assert ", ".join(lin.state) in k.description
    _check(k, load_kernel(tmp_path), lin)


@pytest.mark.host
def test_double_pendulum_kernel_agrees_with_linearize(tmp_path):
    m = double_pendulum()
    k = _wide_u(build_kernel(m.equations(), "linearized-dynamics"))
    generate(k, "c-double").write(tmp_path)
    hk = load_kernel(tmp_path)
    for a, b, ad, bd, u in [(-1.0, 0.7, 1.3, -0.8, [0.5, -0.2]), (0.3, -2.0, 0.0, 4.0, [-3.0, 1.0]),
                            (2.5, 1.1, -6.0, 2.0, [0.0, 0.0])]:
        lin = mbforge.linearize(m, q={"dpl_a": a, "dpl_b": b}, qd={"dpl_a": ad, "dpl_b": bd}, u=u)
        assert lin.state == ["dpl_a", "dpl_b", "dpl_a_d", "dpl_b_d"]
        _check(k, hk, lin)


@pytest.mark.host
def test_closed_loop_fourbar_kernel_agrees_with_linearize(tmp_path):
    """A closed loop (the slider-crank, its driver left out: the crank torque takes its
    place): the position and velocity maps (Tq, V, G) depend on the state."""
    from mbforge.examples.slidercrank import build as slidercrank

    m = slidercrank()
    k = _wide_u(build_kernel(m.equations(), "linearized-dynamics", coordinates="th1"), ("u", "qd"))
    assert set(k.info.solves) == {"KKT", "positions", "velocities"}
    assert "state (th1, th1_d)" in k.description
    generate(k, "c-double").write(tmp_path)
    hk = load_kernel(tmp_path)
    for th, w, u in [(0.6, 1.0, [1.5]), (2.5, 1.1, [-4.0]), (4.0, 1.05, [0.0])]:
        lin = mbforge.linearize(m, q={"th1": th}, qd={"th1": w}, u=u, coordinates=["th1"])
        assert abs(lin.A[1, 0]) > 0.1 and abs(lin.A[1, 1]) > 1e-3
        _check(k, hk, lin)


def test_driven_model_gets_motion_vectors():
    """A driven model's kernel carries the states of its motion (and the forces that drive
    it) for the firmware and HIL checks, in the order of its inputs."""
    from mbforge.examples.slidercrank import build as slidercrank

    m = slidercrank()
    k = build_kernel(m.equations(), "linearized-dynamics")
    assert k.motion and all(len(v) == len(k.input_symbols) for v in k.motion)
    # the force along the motion drives it: forward dynamics there gives the motion's qdd
    d = mbforge.reference.Dynamics(m.equations())
    v = np.array(k.motion[7])
    n = len(m.q)
    assert [p.name for p in k.inputs] == ["q", "qd", "u"]  # t dropped: no force depends on it
    qdd, _ = d.accelerations(0.0, v[:n], v[n:2 * n], v[2 * n:])
    np.testing.assert_allclose(qdd[5], 0.0, atol=1e-8)  # the crank turns at constant speed


def test_a_choice_that_fails_somewhere_is_one_clear_error():
    """The free four-bar swings through the crank's horizontal: with xB independent yB is
    not determined there."""
    from mbforge.examples.fourbar import build as fourbar

    with pytest.raises(KernelError, match=r"with xB independent .* coordinates=\.\.\."):
        build_kernel(fourbar(driven=False).equations(), "linearized-dynamics", coordinates=["xB"])


def test_bad_coordinate_choice_is_one_clear_error():
    m = cart_pole()
    with pytest.raises(KernelError, match="linearized-dynamics: .*the model has 2 here, 1 given"):
        build_kernel(m.equations(), "linearized-dynamics", coordinates=["lkcp_xc"])


@pytest.mark.host
def test_fixed_point_kernel_within_its_error_bounds(cart_pole_kernel, tmp_path):
    """c-fixed (and so hls-c / verilog, bit-exact with it): the manifest's error bound of
    each element holds against the double kernel at the same (quantized) inputs."""
    from mbforge.verify import hostlib
    from mbforge.verify.vectors import from_raw, to_raw
    from mbforge.manifest import Manifest

    m, k, hk = cart_pole_kernel
    generate(k, "c-fixed").write(tmp_path)
    man = Manifest.load(tmp_path)
    rng = np.random.default_rng(3)
    r = np.array(k.input_ranges)
    X = r[:, 0] + (r[:, 1] - r[:, 0]) * rng.random((2000, len(r)))
    raw = to_raw(man, X)
    Y, status = hostlib.load_kernel(tmp_path)(raw)
    assert (status == 0).all()
    got = from_raw(man, Y)
    want, _ = hk(from_raw(man, raw, "inputs"))
    bound = np.array([b for p in man.outputs for b in p.error_bound])
    assert np.max(np.abs(got - want)) > 0  # really fixed point
    assert np.all(np.abs(got - want) <= bound)


def _model_file(folder):
    """The cart-pole as a model file, and a runner of `mbforge` commands in its folder."""
    import inspect
    import os
    import subprocess
    import sys

    (folder / "lkcp_model.py").write_text(
        "import math\nfrom mbforge.model import Model\n\n"
        f"G = {G}\nM_CART, M_POLE, L_COM, I_POLE = {M_CART}, {M_POLE}, {L_COM}, {I_POLE}\n\n\n"
        + inspect.getsource(linearize_cart_pole)
        + f"\n\ndef build():\n    return cart_pole('lkcp', **{KERNEL_RANGES!r})\n")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])

    def run(*args):
        r = subprocess.run(["mbforge", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    return run


@pytest.mark.firmware
@pytest.mark.slow
def test_float32_kernel_passes_hil_on_the_emulated_board(tmp_path):
    """The user's path: a model file, `mbforge generate` (c-float32 and the c-double
    reference), `mbforge firmware --build`, `mbforge hil --emulate ... --host-model`."""
    import json

    run = _model_file(tmp_path)
    for t in ("c-float32", "c-double"):
        run("generate", "lkcp_model.py", "--kernel", "linearized-dynamics", "--target", t, "--out", t)
    run("firmware", "--kernel", "c-float32", "--out", "fw", "--build")
    [elf] = (tmp_path / "fw" / ".pio" / "build" / "emulated_f405").glob("*.elf")
    out = run("hil", "--emulate", str(elf), "--kernel", "c-float32", "--reference", "c-double", "--host-model",
              "--vectors", "500", "--json", "hil.json")
    assert "PASS" in out
    rep = json.loads((tmp_path / "hil.json").read_text())
    assert rep["passed"] is True and set(rep["outputs"]) == {"A", "B", "C"}
    assert rep["host_model"]["vectors_mismatched"] == 0
    assert all(g["max_rel_error"] <= 1e-5 for g in rep["outputs"].values())


@pytest.mark.hdl
def test_fixed_point_rtl_on_icarus(tmp_path):
    """hls-c and verilog follow c-fixed: the pipelined RTL is bit-exact with the c-fixed host
    model and within the error bounds of the double reference."""
    out = _model_file(tmp_path)("hdl", "lkcp_model.py", "--kernel", "linearized-dynamics", "--sim", "icarus",
                                "--no-synth", "--vectors", "200", "--out", "rtl")
    assert "on icarus: PASS" in out and "bit-exact with the c-fixed host model: True" in out
    assert "within the manifest's error bounds: True" in out


@pytest.mark.slow
def test_two_processes_write_the_same_bytes(tmp_path):
    """The choice of coordinates (QR at the guess) and the placeholder symbols of the
    implicit derivatives leave no trace of hash order in the generated files."""
    from helpers.builds import generate_in_fresh_process

    a = generate_in_fresh_process("slidercrank", "linearized-dynamics", "c-double", tmp_path / "a", "1")
    b = generate_in_fresh_process("slidercrank", "linearized-dynamics", "c-double", tmp_path / "b", "2")
    assert a == b and "slidercrank.c" in a


def test_model_without_actuators():
    """pendulum_block: no actuators, so no B and no u input; A against linearize() with the
    numpy evaluation of the kernel's atoms."""
    from mbforge.examples import load
    from mbforge.ir import Evaluator

    m = load("pendulum_block")
    k = build_kernel(m.equations(), "linearized-dynamics")
    assert [p.name for p in k.inputs] == ["q", "qd"] and "B" not in [p.name for p in k.outputs]  # no t: time-independent
    lin = mbforge.linearize(m, qd={c: 0.3 for c in mbforge.linearize(m).coordinates})
    y = Evaluator(k.output_atoms, k.input_symbols)(np.concatenate([lin.q, lin.qd])[None])[0]
    A = _matrix(k, y, "A")
    assert np.max(np.abs(lin.A)) > 0.1
    np.testing.assert_allclose(A, lin.A, rtol=0, atol=1e-10 * max(1.0, np.max(np.abs(lin.A))))


def test_non_holonomic_model():
    """A sled towing a trailer (knife edges): 4 independent positions, 2 independent
    velocities; the velocity map and its derivative G carry the velocity constraints."""
    from mbforge.ir import Evaluator
    from helpers.models import sled_with_trailer

    m = sled_with_trailer("lknh")
    z = ["lknh_sx", "lknh_sy", "lknh_sth", "lknh_tth"]
    k = build_kernel(m.equations(), "linearized-dynamics", coordinates=z)
    ev = Evaluator(k.output_atoms, k.input_symbols)
    for q, qd, u in [({"lknh_sx": 0.2, "lknh_sy": -0.1, "lknh_sth": 0.3, "lknh_tth": -0.4},
                      {"lknh_sx": 0.8, "lknh_sth": 0.5}, [0.3, -0.1]),
                     ({"lknh_sx": -0.5, "lknh_sy": 0.4, "lknh_sth": -0.2, "lknh_tth": 0.1},
                      {"lknh_sx": -0.3, "lknh_sth": 0.9}, [-0.6, 0.2])]:
        lin = mbforge.linearize(m, q=q, qd=qd, u=u, coordinates=z)
        assert len(lin.velocities) == 2 and ", ".join(lin.state) in k.description
        y = ev(np.concatenate([lin.q, lin.qd, lin.u])[None])[0]
        for name, want in (("A", lin.A), ("B", lin.B)):
            np.testing.assert_allclose(_matrix(k, y, name), want, rtol=0, atol=1e-10 * max(1.0, np.abs(want).max()))
        assert np.max(np.abs(lin.A[:4, :4])) > 0.1


@pytest.mark.host
@pytest.mark.parametrize("example", ["sample_arm", "spatial_chain"])
def test_open_tree_kernel_agrees_with_linearize_and_holds_its_bounds(tmp_path, example):
    """An unconstrained open tree's kernel is built on CRBA and RNEA with one LDL^T factor
    for every column (sample_arm: 3,729 operations, 8,845 from the Lagrangian's M and Q).
    c-double agrees with mbforge.linearize (the model's Lagrangian M and Q, differentiated
    there) at 5 random states to 1e-10 of the largest entry; c-fixed (and c-float32 where
    it has bounds) stays within its manifest bounds of c-double at 2,000 random states of
    the declared box. The bounds are sound but useless over the arms' full joint ranges
    (the columns' right-hand sides carry M's derivative times the accelerations' bound)."""
    from mbforge.examples import load
    from mbforge.manifest import Manifest
    from mbforge.verify.vectors import from_raw, to_raw
    m = load(example)
    k = build_kernel(m.equations(), "linearized-dynamics")
    assert "composite-rigid-body" in k.description
    generate(k, "c-double").write(tmp_path / "db")
    hk = load_kernel(tmp_path / "db")
    rng = np.random.default_rng(3)
    lo, hi = np.array(k.input_ranges).T
    names = [s.value.name for s in m.equations().q]
    for X in rng.uniform(lo, hi, (5, len(lo))):
        n = len(names)
        lin = mbforge.linearize(m, q=dict(zip(names, X[:n])), qd=dict(zip(names, X[n:2 * n])), u=list(X[2 * n:]))
        _check(k, hk, lin)
    X = rng.uniform(lo, hi, (2000, len(lo)))
    md = Manifest.load(tmp_path / "db")
    for target in ("c-fixed", "c-float32"):
        generate(k, target).write(tmp_path / target)
        mt = Manifest.load(tmp_path / target)
        bound = np.array([b if b is not None else np.inf for g in mt.outputs for b in (g.error_bound or [])])
        if target == "c-fixed" or example == "sample_arm":  # spatial_chain's float32 M: no bound (docs/kernels.md)
            assert np.isfinite(bound).all(), target
        Y, st = load_kernel(tmp_path / target)(to_raw(mt, X, "inputs"))
        Yd, sd = hk(to_raw(md, from_raw(mt, to_raw(mt, X, "inputs"), "inputs"), "inputs"))
        assert (st == 0).all() and (sd == 0).all()
        err = np.abs(from_raw(mt, Y, "outputs") - from_raw(md, Yd, "outputs")).max(0)
        assert (err <= bound).all(), (target, err[err > bound], bound[err > bound])
