"""The microcode variant (rtl.microcode): the shared variant's units under a microcode ROM,
operands from a register file in block RAM. Icarus bit-exact with the c-fixed host model
(reset in the middle of a computation included) on the four-bar's kinematics, the
slider-crank's equations and a kernel of every operator; the schedule's rules (one issue
and one write a cycle, operands read after they are written, no register overwritten
before its last read); deterministic text; yosys maps the ROM and the file to block RAM on
ECP5 and iCE40 with fewer LUTs than the shared variant with one multiplier."""
import json
import re
import shutil

import pytest

from bench.rtl import hw_program
from mbforge.backends.rtl.microcode import default_micro_units, schedule
from mbforge.backends.rtl.schedule import _readers
from mbforge.examples import load
from mbforge.hdl import sim as S
from mbforge.ir import const, symbol
from mbforge.kernels import InPort, Kernel, OutPort
from mbforge.kernels.builders import build_kernel
from mbforge.pipeline import generate

from helpers.hdl_kernels import fourbar_kinematics, functions_kernel

pytestmark = pytest.mark.hdl

KERNELS = {"fourbar": fourbar_kinematics, "slidercrank": lambda: build_kernel(load("slidercrank").equations(),
                                                                             "equations"),
           "functions": functions_kernel}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("ucode")
    for name, make in KERNELS.items():
        k = make()
        generate(k, "c-fixed").write(root / name / "fixed")
        generate(k, "c-double").write(root / name / "double")
        generate(k, "verilog", options={"variant": "microcode"}).write(root / name / "rtl")
    return root


# every kernel on Icarus; Verilator (a C++ build of a minute here) on the kernel of every operator
RUNS = [(name, "icarus") for name in KERNELS] + [("functions", "verilator")]


@pytest.mark.parametrize("name,sim", RUNS)
def test_microcode_matches_host_model_and_reference(work, name, sim):
    r = S.simulate(S.build(work / name / "rtl", sim), work / name / "fixed", work / name / "double",
                   vectors=30, seed=5)
    assert r.passed, r.table()
    assert r.bit_exact and r.within_bound and r.reset_ok
    rtl = json.loads((work / name / "rtl" / "rtl.json").read_text())
    assert rtl["variant"] == "microcode" and r.latency == rtl["latency"]
    assert r.interval == rtl["interval"] == rtl["cycles"] + 2
    # a small file: the values live at once, not one word per value
    n_values = sum(rtl["hw_ops"].values()) + rtl["n_in"]
    assert 1 <= rtl["registers"] == rtl["register_file_depth"] < n_values / 3
    assert rtl["rom_words"] == rtl["cycles"] + 1


def test_no_operations(tmp_path):
    """A kernel of inputs and a constant passed through: no unit, an empty schedule, still the protocol."""
    x, y = symbol("pt_x"), symbol("pt_y")
    k = Kernel("pt", "pass", [InPort("v", [x, y], [(-2.0, 2.0), (-1.0, 1.0)])],
               [OutPort.vector("y", [x, const(2.5), y])])
    generate(k, "c-fixed").write(tmp_path / "fixed")
    generate(k, "verilog", options={"variant": "microcode"}).write(tmp_path / "rtl")
    rtl = json.loads((tmp_path / "rtl" / "rtl.json").read_text())
    assert rtl["hw_ops"] == {} and rtl["units"] == {}
    r = S.simulate(S.build(tmp_path / "rtl", "icarus"), tmp_path / "fixed", vectors=5)
    assert r.passed and r.bit_exact and r.reset_ok, r.table()


def test_a_corrupted_microcode_word_is_caught(work, tmp_path):
    """The comparison can fail: the four-bar's RTL with one ROM word's write enable dropped
    (a value never reaches the register file) is not bit-exact."""
    rtl = shutil.copytree(work / "fourbar" / "rtl", tmp_path / "rtl")
    [v] = [p for p in rtl.glob("*_hw.v")]
    text = v.read_text()
    we = int(re.search(r"wire \[0:0\] uc_we = uc\[(\d+):", text).group(1))
    words = re.findall(r"rom\[(\d+)\] = (\d+)'h([0-9a-f]+);", text)
    t, w, h = next((t, w, h) for t, w, h in words if int(h, 16) >> we & 1)
    bad = f"{int(h, 16) & ~(1 << we):0{len(h)}x}"
    v.write_text(text.replace(f"rom[{t}] = {w}'h{h};", f"rom[{t}] = {w}'h{bad};"))
    r = S.simulate(S.build(rtl, "icarus"), work / "fourbar" / "fixed", vectors=5, tests=("test_vectors",))
    assert not r.passed and not r.bit_exact


@pytest.mark.parametrize("name", list(KERNELS))
def test_schedule_rules(name):
    hp = hw_program(KERNELS[name](), {"variant": "microcode"})
    ms = schedule(hp, default_micro_units(hp, 1))
    issues = [ms.issue[op.id] for op in hp.ops]
    assert len(set(issues)) == len(issues)  # one issue a cycle
    assert len(set(ms.write.values())) == len(ms.write)  # one write a cycle
    for op in hp.ops:
        for s in op.srcs:
            assert ms.write[s] <= ms.issue[op.id]  # written (on the bus at least) before it is read
    live: dict[int, list] = {}
    for ref, reg in ms.reg_of.items():
        last = max(ms.issue[c] for c in _readers(hp)[ref]) - 1
        live.setdefault(reg, []).append((ms.write[ref], last))
    for spans in live.values():  # a register is written again only after its last read
        spans.sort()
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
    assert ms.depth == len(live) or not live


def test_output_is_deterministic(work, tmp_path):
    generate(KERNELS["fourbar"](), "verilog", options={"variant": "microcode"}).write(tmp_path / "again")
    for p in (work / "fourbar" / "rtl").iterdir():
        if p.is_file():
            assert (tmp_path / "again" / p.name).read_bytes() == p.read_bytes(), p.name


@pytest.mark.slow
def test_block_ram_and_fewer_luts_than_shared(tmp_path, work):
    """yosys of the four-bar's kinematics: synth_ice40 -dsp (mbforge.hdl.synth) and synth_ecp5
    (bench.rtl's mapping, mbforge.hdl.pnr's cell names): the microcode design's ROM and
    register file are block RAMs, and it takes fewer LUTs than the shared design with one
    multiplier (about 15 s a mapping here)."""
    from bench.rtl import _mapped
    from mbforge.hdl.synth import synthesize

    k = KERNELS["fourbar"]()
    generate(k, "verilog", options={"variant": "shared", "multipliers": 1}).write(tmp_path / "shared")
    shutil.copytree(work / "fourbar" / "rtl", tmp_path / "microcode")
    mc, sh = synthesize(tmp_path / "microcode", ice40=True), synthesize(tmp_path / "shared", ice40=True)
    assert mc["coarse"]["memories"] >= 3 and sh["coarse"]["memories"] == 0  # the ROM and the file's copies
    assert mc["ice40"]["brams"] > 0 and sh["ice40"]["brams"] == 0
    assert mc["ice40"]["luts"] < sh["ice40"]["luts"], (mc["ice40"], sh["ice40"])
    mc, sh = _mapped(tmp_path / "microcode", "ecp5"), _mapped(tmp_path / "shared", "ecp5")
    assert mc["brams"] > 0 and sh["brams"] == 0, (mc, sh)
    assert mc["luts"] < sh["luts"], (mc, sh)
