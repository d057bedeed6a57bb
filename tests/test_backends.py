"""Backends as a registry: names, typed options resolved before anything is generated,
the digest over the resolved options, and the CLI flags built from the Options fields.

Digests: since options are resolved first, `generate(k, t)` digests the complete option
set (e.g. {"params": "fold", "schedule": "pressure"}) instead of the empty dict it
digested before; so every default request's digest changed once, while its files did not
(the digest inside the generated header aside).
"""
import argparse
import dataclasses
import json

import pytest

from mbforge import cli
from mbforge.backends import Backend, GenerateError, OptionError, Options, backend_names, get_backend
from mbforge.examples import load
from mbforge.hdl import cli as hdl_cli
from mbforge.ir import ExpressionError, exp, symbol
from mbforge.kernels import InPort, Kernel, OutPort
from mbforge.kernels.builders import build_kernel
from mbforge.pipeline import TARGETS, generate
from mbforge.reals import REALS

VERILOG_DEFAULTS = {"params": "fold", "schedule": "pressure", "input_check": "on", "variant": "pipelined", "multipliers": 4,
                    "adders": None, "dividers": 1, "dsp": None, "outputs": "early", "delay_lines": "memory", "delay_memory_min": 16,
                    "const_products": "auto"}


@pytest.fixture(scope="module")
def fourbar():
    return build_kernel(load("fourbar").equations(), "equations")


def test_one_backend_per_target_record():
    assert backend_names() == TARGETS == ("c-double", "c-float32", "c-fixed", "c-fixed-m0", "hls-c", "verilog")
    for name in TARGETS:
        b = get_backend(name)
        assert isinstance(b, Backend) and b.name == name and b.real in REALS.values() and b.use
        assert dataclasses.is_dataclass(b.Options) and issubclass(b.Options, Options)
        # a fixed-point target's backend prints the fixed-point plan and reports saturation
        assert b.real.fixed == ("1" in b.status)


def test_a_backend_states_its_target_facts():
    from mbforge.backends.base import _REGISTRY, register

    class NoFacts(Backend):
        name = "c-nofacts"
    with pytest.raises(TypeError, match="backend NoFacts: no real, use"):
        register(NoFacts)
    assert "c-nofacts" not in _REGISTRY
    with pytest.raises(GenerateError, match=r"unknown target 'c-quad'; known: c-double, c-float32, c-fixed, "
                                            r"c-fixed-m0, hls-c, verilog"):
        get_backend("c-quad")


def test_options_are_typed_and_frozen():
    o = get_backend("verilog").resolve({"variant": "shared"})
    assert (o.variant, o.multipliers, o.adders, o.params) == ("shared", 4, None, "fold")
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.variant = "pipelined"
    # direct construction is checked too
    with pytest.raises(OptionError, match="option multipliers=0: must be a positive integer"):
        type(o)(multipliers=0)
    assert get_backend("c-double").resolve(None) == Options()


@pytest.mark.parametrize("target", ["c-double", "c-fixed", "verilog"])
def test_digest_covers_resolved_options(fourbar, target):
    explicit = {k: v for k, v in VERILOG_DEFAULTS.items() if k in get_backend(target).Options.names()}
    a = generate(fourbar, target)
    b = generate(fourbar, target, options=explicit)
    c = generate(fourbar, target, options=get_backend(target).Options())
    assert a.files == b.files == c.files
    assert a.manifest.to_json() == b.manifest.to_json() == c.manifest.to_json()
    assert a.manifest.options == explicit
    # a different option is a different request even where the files happen to agree
    assert generate(fourbar, target, options={"schedule": "fast"}).manifest.digest != a.manifest.digest


def test_float32_multiply_accumulate_option(fourbar):
    """c-float32 spells multiply-accumulates by default (lower.schedule.FUSED, one VMLA on
    32-bit ARM); multiply_accumulate off prints separate operations, and is recorded."""
    on, off = generate(fourbar, "c-float32"), generate(fourbar, "c-float32", options={"multiply_accumulate": "off"})
    src_on, src_off = (p.files[p.manifest.sources[0]] for p in (on, off))
    assert "_MLA(" in src_on and "vmla.f32" in src_on
    assert "_MLA(" not in src_off and "_MLS(" not in src_off and "vmla" not in src_off
    assert on.manifest.options["multiply_accumulate"] == "on" and off.manifest.options["multiply_accumulate"] == "off"
    assert on.manifest.digest != off.manifest.digest


def test_verilog_variant_changes_files_and_digest(fourbar):
    a = generate(fourbar, "verilog", options={"variant": "shared", "multipliers": 2})
    b = generate(fourbar, "verilog", options={"variant": "shared", "multipliers": 2, "adders": None})
    c = generate(fourbar, "verilog", options={"variant": "shared", "multipliers": 2, "adders": 1})
    assert a.files == b.files and a.manifest.digest == b.manifest.digest
    assert json.loads(c.files["rtl.json"])["units"]["add"] == 1 and c.manifest.digest != a.manifest.digest
    assert a.manifest.options == dict(VERILOG_DEFAULTS, variant="shared", multipliers=2)


@pytest.mark.parametrize("target, options, message", [
    ("c-double", {"variant": "shared"},
     r"^option variant does not apply to target c-double \(only to verilog\); options of c-double: params, schedule, input_check$"),
    ("hls-c", {"multipliers": 2}, r"^option multipliers does not apply to target hls-c \(only to verilog\)"),
    ("c-float32", {"precision": "half"},
     r"^unknown option precision for target c-float32; options of c-float32: params, schedule, input_check, multiply_accumulate$"),
    ("verilog", {"variant": "systolic"}, r"^option variant='systolic': must be one of pipelined, shared, microcode$"),
    ("verilog", {"multipliers": 0}, r"^option multipliers=0: must be a positive integer$"),
    ("verilog", {"adders": "2"}, r"^option adders='2': must be a positive integer$"),
    ("verilog", {"multipliers": True}, r"^option multipliers=True: must be a positive integer$"),
    ("verilog", {"delay_lines": "bram"}, r"^option delay_lines='bram': must be one of memory, ffs$"),
    ("verilog", {"delay_memory_min": 1}, r"^option delay_memory_min=1: must be an integer >= 2$"),
    ("c-fixed", {"params": "folded"}, r"^option params='folded': must be one of fold, runtime$"),
])
def test_bad_options_are_refused_by_name(fourbar, target, options, message):
    with pytest.raises(GenerateError, match=message):
        generate(fourbar, target, options=options)


def test_options_of_another_target_are_refused(fourbar):
    with pytest.raises(OptionError, match="VerilogOptions are not the options of target c-fixed"):
        generate(fourbar, "c-fixed", options=get_backend("verilog").Options())


def test_every_target_generates(fourbar):
    for t in TARGETS:
        plan = generate(fourbar, t)
        m = plan.manifest
        assert m.target == t and m.real == get_backend(t).real.name
        assert set(m.sources + m.headers) <= set(plan.files)
        assert plan.manifest.digest in plan.files[m.sources[0]]
        # every target checks its inputs against the envelope first (status 2)
        assert m.status_codes["2"].startswith("input outside its envelope")
        assert [e for g in m.inputs for e in g.envelope] == [list(r) for r in fourbar.input_envelope()]
        if m.real == "int32":
            assert m.status_codes["1"].startswith("saturated") and all(g.frac_bits for g in m.outputs)
        if t == "c-float32":
            assert all(b is not None for g in m.outputs for b in g.error_bound)
        if t == "c-double":
            assert sorted(m.status_codes) == ["0", "2"] and all(g.error_bound is None for g in m.outputs)


def _parser(register):
    ap = argparse.ArgumentParser(prog="mbforge")
    register(ap.add_subparsers(dest="command", required=True))
    return ap


@pytest.mark.parametrize("register", [cli._register_generate, hdl_cli.register], ids=["generate", "hdl"])
def test_every_flag_has_help(register):
    ap = _parser(register)
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    for p in sub.choices.values():
        for a in p._actions:
            assert a.help, f"{p.prog} {a.option_strings or a.dest} has no help"
        flags = {s for a in p._actions for s in a.option_strings}
        assert {"--kernel", "--out", "--variant", "--multipliers", "--adders"} <= flags


def test_flags_come_from_the_options():
    ap = _parser(cli._register_generate)
    args = ap.parse_args(["generate", "fourbar", "--out", "x", "--variant", "shared"])
    assert args.variant == "shared" and args.multipliers is None and args.schedule is None
    with pytest.raises(SystemExit):  # argparse's choices, from the field's metadata
        ap.parse_args(["generate", "fourbar", "--out", "x", "--variant", "systolic"])


def test_generate_cli_reaches_the_rtl_options(tmp_path, capsys):
    out = tmp_path / "rtl"
    rc = cli.main(["generate", "fourbar", "--kernel", "kinematics", "--target", "verilog", "--variant", "shared",
                   "--multipliers", "4", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    rtl = json.loads((out / "rtl.json").read_text())
    assert rtl["variant"] == "shared" and rtl["units"]["mul"] == 4 and rtl["multipliers"] == 4
    man = json.loads((out / "manifest.json").read_text())
    assert man["options"] == dict(VERILOG_DEFAULTS, variant="shared")
    # the same request through the API is the same kernel, digest included
    k = build_kernel(load("fourbar").equations(), "kinematics")
    assert generate(k, "verilog", options={"variant": "shared"}).manifest.digest == man["digest"]


@pytest.mark.parametrize("argv, message", [
    (["--variant", "shared"], "--variant does not apply to --target c-double (only to verilog); "
                              "flags of c-double: --params, --schedule"),
    (["--target", "c-fixed", "--adders", "2"], "--adders does not apply to --target c-fixed"),
    (["--target", "verilog", "--multipliers", "0"], "--multipliers 0: must be a positive integer"),
])
def test_generate_cli_refuses_flags_in_one_line(tmp_path, capsys, argv, message):
    rc = cli.main(["generate", "fourbar", *argv, "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "x").exists()


def test_hdl_cli_checks_rtl_flags_before_any_work(tmp_path, capsys):
    rc = cli.main(["hdl", "fourbar", "--variant", "shared", "--adders", "0", "--out", str(tmp_path / "h")])
    err = capsys.readouterr().err
    assert rc == 2 and "--adders 0: must be a positive integer" in err and err.count("\n") == 1, err
    assert not (tmp_path / "h").exists()


def test_a_function_the_dialect_lacks_is_named_before_any_analysis():
    """float32 C has no exp: the refusal names the target and the function, not the range
    analysis that would otherwise meet it first (as stewart_relative's atan2 once did)."""
    x, y = symbol("tb_exp_x"), symbol("tb_exp_y")
    k = Kernel("tb", "growth", [InPort("v", [x, y], [(0.5, 1.0), (0.5, 1.0)])],
               [OutPort.vector("y", [exp(y * x) * 2.0])])
    assert "exp(" in generate(k, "c-double").files["tb.c"]
    with pytest.raises(ExpressionError, match=r"^target c-float32 has no 'exp' \(used by the model\)$"):
        generate(k, "c-float32")


def test_headers_name_every_output_element_with_its_format():
    """The header alone says which entry of out[] is which: the constraint, coordinate or
    matrix entry (row/column), and for c-fixed its Q format and error bound; the manifest
    carries the same labels."""
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    eqs = load("slidercrank").equations()
    plan = generate(build_kernel(eqs, "inverse-dynamics"), "c-double")
    h = plan.files["slidercrank.h"]
    assert "     0   u_crank_torque\n" in h and "     1   lambda_ground_x\n" in h
    labels = [l for g in plan.manifest.outputs for l in g.labels]
    assert len(labels) == plan.manifest.n_out == 12
    k = build_kernel(load("fourbar").equations(), "kinematics")
    fx = generate(k, "c-fixed")
    h = fx.files["fourbar.h"]
    qd = fx.manifest.outputs[0]
    assert qd.labels == ["xB_d", "yB_d", "xC_d", "yC_d"]
    f, b = qd.frac_bits[0], qd.error_bound[0]
    assert f" 0   xB_d  Q{31 - f}.{f}  +-{b:.3g}\n" in h
    eq = generate(build_kernel(eqs, "equations"), "c-float32").manifest
    phi_q = next(g for g in eq.outputs if g.name == "Phi_q")
    assert phi_q.labels[:2] == ["ground_x/x0", "ground_y/y0"]
