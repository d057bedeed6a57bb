"""yosys synthesis report beside the RTL: word-level counts always, the iCE40 mapping for
small designs."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hdl_kernels import delay_kernel, tiny_kernel  # noqa: E402

from mbforge.hdl.synth import synthesize
from mbforge.pipeline import generate

pytestmark = pytest.mark.hdl


@pytest.mark.parametrize("variant", ["pipelined", "shared"])
def test_synthesis_report_is_written_beside_the_rtl(tmp_path, variant):
    generate(tiny_kernel(), "verilog", options={"variant": variant, "multipliers": 1}).write(tmp_path)
    rep = synthesize(tmp_path)
    on_disk = json.loads((tmp_path / "synth_report.json").read_text())
    assert on_disk == json.loads(json.dumps(rep))
    text = (tmp_path / "synth_report.txt").read_text()
    assert "iCE40" in text and "flip-flop bits" in text
    c = rep["coarse"]
    assert c["multipliers"] >= 1 and c["flipflop_bits"] > 0 and c["cells"] > 0
    ice = rep["ice40"]
    assert ice["luts"] > 0 and ice["flipflops"] > 0 and ice["dsps"] >= 1
    if variant == "shared":
        assert rep["rtl"]["multipliers"] == 1


def test_large_designs_get_the_coarse_flow_only(tmp_path, monkeypatch):
    from mbforge.hdl import synth

    monkeypatch.setattr(synth, "ICE40_MAX_OPS", 1)
    generate(tiny_kernel(), "verilog", options={"variant": "shared", "multipliers": 1}).write(tmp_path)
    rep = synth.synthesize(tmp_path)
    assert rep["ice40"] is None and "skipped" in rep["notes"][0]


def test_delay_lines_in_memories_are_block_rams_not_flip_flops(tmp_path):
    """delay_lines=memory against ffs on a kernel whose input waits for a division: the ring
    buffer maps to iCE40 block RAM (SB_RAM40_4K), the flip-flops it replaces are gone, and the
    word-level counts are rtl.json's (the memory's output register is the block RAM's)."""
    from mbforge.hdl.synth import register_bits

    got = {}
    for mode in ("memory", "ffs"):
        d = tmp_path / mode
        generate(delay_kernel(), "verilog", options={"delay_lines": mode}).write(d)
        got[mode] = (json.loads((d / "rtl.json").read_text()), register_bits(d), synthesize(d, ice40=True)["ice40"])
    (rm, bm, im), (rf, bf, i_f) = got["memory"], got["ffs"]
    moved = rf["delay_line_ff_bits"] - rm["delay_line_ff_bits"]
    assert rm["delay_line_bits"] == rf["delay_line_bits"] and moved > 0
    assert bf["flipflop_bits"] - bm["flipflop_bits"] == moved
    assert bm["memory_bits"] == rm["delay_line_memory_bits"] > 0 and bf["memory_bits"] == 0
    assert im["brams"] >= 2 and i_f["brams"] == 0  # a 32-bit ring buffer: two 256 x 16 block RAMs
    assert i_f["flipflops"] - im["flipflops"] >= moved - 16  # the counter and its address logic besides
