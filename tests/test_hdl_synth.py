"""yosys synthesis report beside the RTL: word-level counts always, the iCE40 mapping for
small designs."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from mbforge.hdl.synth import synthesize
from mbforge.pipeline import generate

from helpers.hdl_kernels import constants_kernel, delay_kernel, tiny_kernel

pytestmark = [pytest.mark.hdl, pytest.mark.needs("yosys")]


def coarse_statistics(rtl_dir: Path, top: str) -> tuple[int, dict[str, int]]:
    """(cells, cells by type) of yosys' `stat` text after the word-level flow."""
    sources = " ".join(str(p) for p in sorted(rtl_dir.glob("*.v")))
    out = rtl_dir / "test_stat.txt"
    subprocess.run(["yosys", "-q", "-p", f"read_verilog -sv {sources}; synth -top {top} -flatten -run begin:fine; "
                    f"tee -q -o {out} stat"], check=True, capture_output=True, timeout=600)
    text = out.read_text()
    out.unlink()
    cells = int(re.search(r"Number of cells:\s+(\d+)", text).group(1))
    by_type = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(\$\w+)\s+(\d+)\s*$", text, re.M)}
    return cells, by_type


@pytest.mark.parametrize("variant", ["pipelined", "shared", "microcode"])
def test_synthesis_report_is_written_beside_the_rtl(tmp_path, variant):
    generate(tiny_kernel(), "verilog", options={"variant": variant, "multipliers": 1}).write(tmp_path)
    rep = synthesize(tmp_path)
    on_disk = json.loads((tmp_path / "synth_report.json").read_text())
    assert on_disk == rep
    # against what the test finds itself: rtl.json, and yosys' own text statistics of the
    # same word-level flow
    rtl = json.loads((tmp_path / "rtl.json").read_text())
    assert on_disk["top"] == rtl["top"] and on_disk["variant"] == variant
    assert on_disk["hw_ops"] == sum(rtl["hw_ops"].values())
    # what the variant has, never a null: a register file (registers) in the shared and microcode
    # ones (the latter's in block RAM, with its ROM), delay lines in the pipelined one only
    want = {"latency", "interval", "multipliers", "units"} | {
        "shared": {"registers"}, "microcode": {"registers", "register_file_depth", "rom_words", "rom_width"},
        "pipelined": {"delay_line_bits"}}[variant]
    assert set(on_disk["rtl"]) == want and all(on_disk["rtl"][k] == rtl[k] is not None for k in want)
    cells, by_type = coarse_statistics(tmp_path, rtl["top"])
    c = on_disk["coarse"]
    assert c["cells"] == cells and c["by_type"] == by_type
    # multipliers: the RTL's products (`*`), not the $macc cells alumacc makes of sums too
    assert c["multipliers"] == (tmp_path / f"{rtl['top']}.v").read_text().count(") * ") == 1
    text = (tmp_path / "synth_report.txt").read_text()
    assert "iCE40" in text and "flip-flop bits" in text
    c = rep["coarse"]
    assert c["multipliers"] >= 1 and c["flipflop_bits"] > 0 and c["cells"] > 0
    ice = rep["ice40"]
    assert ice["luts"] > 0 and ice["flipflops"] > 0 and ice["dsps"] >= 1
    if variant != "pipelined":
        assert rep["rtl"]["multipliers"] == 1
    assert (ice["brams"] > 0) == (variant == "microcode")  # the ROM and the register file


def test_large_designs_get_the_coarse_flow_only(tmp_path, monkeypatch):
    from mbforge.hdl import synth

    monkeypatch.setattr(synth, "ICE40_MAX_OPS", 1)
    generate(tiny_kernel(), "verilog", options={"variant": "shared", "multipliers": 1}).write(tmp_path)
    rep = synth.synthesize(tmp_path)
    assert rep["ice40"] is None and "skipped" in rep["notes"][0]
    # `hdl --pnr` maps for its part itself: no iCE40 estimate, and no note that one was skipped
    rep = synth.synthesize(tmp_path, ice40=False)
    assert rep["ice40"] is None and rep["notes"] == []


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


def test_dsp_cap_moves_multipliers_into_luts(tmp_path):
    """--dsp: synth_ice40 -dsp maps only the capped products to SB_MAC16; the others are
    counted as LUTs (the fit report no longer understates them)."""
    ice = {}
    for dsp in (None, 1, 0):
        d = tmp_path / str(dsp)
        generate(constants_kernel(), "verilog", options={} if dsp is None else {"dsp": dsp}).write(d)
        ice[dsp] = synthesize(d, ice40=True)["ice40"]
    assert ice[None]["dsps"] > ice[1]["dsps"] > ice[0]["dsps"] == 0
    assert ice[None]["luts"] < ice[1]["luts"] < ice[0]["luts"]


def test_xilinx_estimate_on_request(tmp_path):
    """synthesize(xilinx=True): yosys synth_xilinx's counts, labelled an estimate: the product
    in a DSP48E1, the microcode variant's ROM and register file in 18 kbit block RAMs, against
    yosys' own statistics of the same run."""
    variant = "microcode"
    from mbforge.hdl.synth import XC7A35T, xilinx_counts

    generate(tiny_kernel(), "verilog", options={"variant": variant, "multipliers": 1}).write(tmp_path)
    rep = synthesize(tmp_path, xilinx=True)
    x = rep["xilinx"]
    by = x["by_type"]
    assert x["luts"] == sum(by.get(f"LUT{k}", 0) for k in range(1, 7)) > 0
    assert x["dsps"] == by.get("DSP48E1", 0) >= 1 and x["flipflops"] > 0
    assert x["brams_18k"] == by.get("RAMB18E1", 0) + 2 * by.get("RAMB36E1", 0) > 0
    assert x["fits_xc7a35t"] == all(x[k] <= n for k, n in XC7A35T.items())
    assert "Xilinx 7-series ESTIMATE" in (tmp_path / "synth_report.txt").read_text()
