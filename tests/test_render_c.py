"""Compile-and-compare: the generated double and float32 C against the numpy reference."""
import os
import subprocess
import sys

import numpy as np
import pytest

from mbforge.examples import load
from mbforge.verify.hostlib import load_kernel
from mbforge.ir import Evaluator
from mbforge.kernels.builders import build_kernel
from mbforge.pipeline import generate

pytestmark = pytest.mark.host
STRICT = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic", "-ffp-contract=off"]
M4F = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-fno-math-errno"]


@pytest.fixture(scope="module")
def fourbar():
    return build_kernel(load("fourbar").equations(), "equations")


@pytest.fixture(scope="module")
def dirs(fourbar, tmp_path_factory):
    out = {}
    for t in ("c-double", "c-float32"):
        d = tmp_path_factory.mktemp(t)
        generate(fourbar, t).write(d)
        out[t] = d
    return out


def _inputs(kernel, n, seed=1):
    rng = np.random.default_rng(seed)
    r = np.array(kernel.input_envelope())  # where the kernel computes (status 2 outside)
    X = r[:, 0] + (r[:, 1] - r[:, 0]) * rng.random((n, len(r)))
    return np.vstack([X, np.array(kernel.motion)])


def test_double_c_matches_numpy_reference(fourbar, dirs):
    X = _inputs(fourbar, 20000)
    want = Evaluator(fourbar.output_atoms, fourbar.input_symbols)(X)
    got, status = load_kernel(dirs["c-double"])(X)
    assert (status == 0).all()
    scale = np.maximum(np.abs(want).max(axis=0), 1.0)
    assert np.max(np.abs(got - want) / scale) < 1e-13


def test_float32_c_is_within_single_precision(fourbar, dirs):
    X = _inputs(fourbar, 20000)
    want = Evaluator(fourbar.output_atoms, fourbar.input_symbols)(X.astype(np.float32).astype(np.float64))
    got, _ = load_kernel(dirs["c-float32"])(X)
    scale = np.maximum(np.abs(want).max(axis=0), 1e-30)
    assert np.max(np.abs(got - want) / scale) < 2e-6


@pytest.mark.parametrize("target", ["c-double", "c-float32"])
def test_compiles_strictly_on_host(dirs, target, tmp_path):
    d = dirs[target]
    flags = STRICT + (["-Wdouble-promotion"] if target == "c-float32" else [])
    subprocess.run(["gcc", *flags, "-c", str(d / "fourbar.c"), "-o", str(tmp_path / "k.o")], check=True)
    syms = subprocess.run(["nm", "-g", "--defined-only", str(tmp_path / "k.o")], capture_output=True,
                          text=True, check=True).stdout.split()
    exported = [s for s in syms[2::3]]
    assert exported == ["fourbar_equations"]


@pytest.mark.needs("arm-none-eabi-gcc")
def test_float32_on_cortex_m4f_uses_no_double_and_no_libm(dirs, tmp_path):
    d = dirs["c-float32"]
    obj = tmp_path / "k.o"
    subprocess.run(["arm-none-eabi-gcc", *STRICT, "-Wdouble-promotion", *M4F, "-c", str(d / "fourbar.c"),
                    "-o", str(obj)], check=True)
    undefined = subprocess.run(["arm-none-eabi-nm", "-u", str(obj)], capture_output=True, text=True,
                               check=True).stdout
    assert undefined.strip() == "", f"calls into libraries: {undefined}"
    text = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    assert "vmul.f32" in text and ".f64" not in text


def test_generated_files_are_deterministic_across_processes(fourbar, dirs, tmp_path):
    """Same model and options in a fresh process (another hash seed) give the same bytes."""
    code = ("import sys; from mbforge.examples import load; from mbforge.kernels.builders import build_kernel; "
            "from mbforge.pipeline import generate; "
            "generate(build_kernel(load('fourbar').equations(), 'equations'), sys.argv[1]).write(sys.argv[2])")
    for t in ("c-double", "c-float32"):
        out = tmp_path / t
        subprocess.run([sys.executable, "-c", code, t, str(out)], check=True,
                       env=dict(os.environ, PYTHONHASHSEED="12345"))
        for f in sorted(p.name for p in dirs[t].iterdir()):
            assert (out / f).read_bytes() == (dirs[t] / f).read_bytes(), f


def test_sin_and_cos_of_one_argument_reuse_slots_safely(tmp_path):
    """Regression: sin and cos of one argument written into the argument's own slot."""
    from mbforge.ir import cos, sin, symbol
    from mbforge.kernels import InPort, Kernel, OutPort

    x = symbol("slot_x")
    k = Kernel("slot", "k", [InPort("x", [x], [(-3.0, 3.0)])], [OutPort.vector("y", [sin(2 * x) + cos(2 * x)])])
    generate(k, "c-double").write(tmp_path)
    X = np.linspace(-3, 3, 101)[:, None]
    got, _ = load_kernel(tmp_path)(X)
    assert np.allclose(got[:, 0], np.sin(2 * X[:, 0]) + np.cos(2 * X[:, 0]), rtol=0, atol=1e-14)


def test_float32_error_bounds_hold(fourbar, dirs):
    from mbforge.manifest import Manifest

    m = Manifest.load(dirs["c-float32"])
    bound = np.array([np.inf if b is None else b for g in m.outputs for b in g.error_bound])
    X = _inputs(fourbar, 50000, seed=7).astype(np.float32).astype(np.float64)
    want = Evaluator(fourbar.output_atoms, fourbar.input_symbols)(X)
    got, _ = load_kernel(dirs["c-float32"])(X)
    err = np.abs(got - want).max(axis=0)
    assert (err <= bound).all()
    phi = next(g for g in m.outputs if g.name == "Phi")
    assert max(phi.error_bound) < 1e-4


KERNELS = [("fourbar", "kinematics"), ("slidercrank", "kinematics"), ("slidercrank", "inverse-dynamics"),
           ("slidercrank", "forward-dynamics"), ("pendulum_block", "forward-dynamics"),
           ("stewart", "inverse-dynamics"), ("stewart", "equations")]


@pytest.mark.slow
@pytest.mark.parametrize("model,kernel", KERNELS)
def test_every_kernel_generates_and_compiles_warning_free(model, kernel, tmp_path):
    """All three targets of the shipped kernels compile with -Wall -Wextra -Werror (and
    -Wdouble-promotion for float32); big ones are checked by the front end only."""
    from mbforge.ir import ExpressionError

    # the Stewart over its driven motion's tube: over its operating envelope (the default)
    # c-fixed inverse dynamics is refused (the LU's pivots cannot be proven away from 0)
    k = build_kernel(load(model, **({"envelope": False} if model == "stewart" else {})).equations(), kernel)
    for target in ("c-double", "c-float32", "c-fixed"):
        d = tmp_path / target
        try:
            generate(k, target).write(d)
        except ExpressionError as e:
            # fixed point needs every divisor's range away from 0; over the whole box of a
            # free mechanism's forward dynamics interval bounds cannot show that: the
            # refusal must say which division
            assert target == "c-fixed" and kernel == "forward-dynamics", e
            assert "divisor" in str(e) and "contains 0" in str(e)
            continue
        src = next(d.glob("*.c"))
        big = src.stat().st_size > 200_000
        flags = STRICT + (["-Wdouble-promotion"] if target == "c-float32" else [])
        cmd = ["gcc", *flags, "-fsyntax-only" if big else "-c", str(src), "-o", str(tmp_path / "k.o")]
        subprocess.run([c for c in cmd if not (big and c in ("-o", str(tmp_path / "k.o")))], check=True)


def test_schedule_option_changes_order_not_results(fourbar, tmp_path):
    """The depth-first schedule computes the same operations in another order: the same
    bits; an unknown schedule is refused by name."""
    from mbforge.pipeline import GenerateError

    generate(fourbar, "c-float32", options={"schedule": "fast"}).write(tmp_path / "fast")
    generate(fourbar, "c-float32").write(tmp_path / "pressure")
    X = _inputs(fourbar, 5000).astype(np.float32)
    a, _ = load_kernel(tmp_path / "fast")(X)
    b, _ = load_kernel(tmp_path / "pressure")(X)
    assert (a.view(np.uint32) == b.view(np.uint32)).all()
    with pytest.raises(GenerateError, match="schedule='quick'"):
        generate(fourbar, "c-double", options={"schedule": "quick"})


def _context_names(cls) -> set[str]:
    """The template variables a render context gives (a nested context's fields merged in)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    out = set()
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        out |= _context_names(t) if dataclasses.is_dataclass(t) else {f.name}
    return out


@pytest.mark.parametrize("template, context", [
    ("c/kernel.c.j2", "CSourceContext"), ("c/kernel.h.j2", "CHeaderContext"),
    ("hls/kernel.c.j2", "HlsSourceContext"), ("hls/kernel.h.j2", "HlsHeaderContext"),
    ("verilog/head.v.j2", "VerilogHeadContext"), ("verilog/pipelined.v.j2", "VerilogPipelinedContext"),
    ("verilog/shared.v.j2", "VerilogSharedContext")])
def test_render_context_names_what_its_template_reads(template, context):
    # the contract between the pipeline and a template is the context dataclass: every variable the
    # template reads is one of its fields (a typo or a new variable fails here, not in a kernel)
    from jinja2 import meta

    from mbforge.backends import context as C
    from mbforge.backends.render import _env

    env = _env("mbforge.backends")
    read = meta.find_undeclared_variables(env.parse(env.loader.get_source(env, template)[0]))
    assert read <= _context_names(getattr(C, context)), read - _context_names(getattr(C, context))
