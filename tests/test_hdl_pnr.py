"""Place and route with nextpnr-ice40 (mbforge.hdl.pnr): a small kernel goes through the
real yosys + nextpnr flow and its report parses; a design too big for the part gets
the one-line "does not fit" answer."""
import json

import pytest

from mbforge.hdl.pnr import DEVICES, _fit, place_and_route, pnr_text
from mbforge.pipeline import generate

from helpers.hdl_kernels import tiny_kernel

pytestmark = pytest.mark.hdl


@pytest.mark.slow
@pytest.mark.needs("yosys", "nextpnr-ice40")
def test_small_kernel_is_placed_and_routed_on_an_up5k(tmp_path):
    generate(tiny_kernel(), "verilog", options={"variant": "pipelined"}).write(tmp_path)
    rep = place_and_route(tmp_path, "up5k", seed=1)
    assert json.loads((tmp_path / "pnr_report.json").read_text()) == json.loads(json.dumps(rep))
    assert rep["fits"] and rep["device"] == "up5k" and rep["seed"] == 1
    assert 1.0 < rep["fmax_mhz"] < 500.0
    used, avail = rep["utilization"]["ICESTORM_LC"]
    assert 0 < used <= avail == DEVICES["up5k"]["luts"]
    assert rep["dsps"] >= 1 and rep["utilization"]["ICESTORM_DSP"][0] == rep["dsps"]  # a * b on the MAC16s
    assert rep["ffs"] > rep["wrapper_ffs"] and rep["luts"] > 0
    # cycles become microseconds at the routed clock
    assert rep["latency_us"] == pytest.approx(rep["latency"] / rep["fmax_mhz"], rel=1e-2)
    text = pnr_text(rep)
    assert "Fmax" in text and "UP5K" in text and "MHz" in text


def test_too_big_a_design_gets_one_line():
    used, why = _fit(DEVICES["up5k"], {"SB_LUT4": 9000, "SB_MAC16": 3, "SB_DFF": 10})
    assert why == "does not fit: 9000 LUTs for 5280" and used["ffs"] == 10
    assert _fit(DEVICES["hx8k"], {"SB_LUT4": 100, "SB_MAC16": 1})[1] == "does not fit: 1 DSPs for 0"
    assert _fit(DEVICES["up5k"], {"SB_LUT4": 100})[1] is None
    rep = {"top": "k_hw", "variant": "pipelined", "fits": False,
           "tried": [{"device": "up5k", "why": "does not fit: 9000 LUTs for 5280"}]}
    assert pnr_text(rep) == "place and route of k_hw (pipelined): iCE40 UP5K: does not fit: 9000 LUTs for 5280"
