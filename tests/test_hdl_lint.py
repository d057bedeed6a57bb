"""Every generated Verilog file passes `verilator --lint-only -Wall` with no warning
(mbforge.hdl.lint): the three variants of the four-bar's kinematics and the four-bar's and
slider-crank's equations, each with its AXI-Stream and AXI4-Lite wrappers and its plain
testbench, and every operator module (a test kernel of them all, four option sets)."""
import json

import numpy as np
import pytest

from mbforge.hdl.axilite import write_axil
from mbforge.hdl.axis import write_axis
from mbforge.hdl.lint import lint
from mbforge.hdl.tb import write_tb
from mbforge.pipeline import generate

from helpers.hdl_kernels import functions_kernel

pytestmark = [pytest.mark.hdl, pytest.mark.slow]


def _design(tmp_path, model, kernel, variant):
    from mbforge import cli

    out = tmp_path / f"{model}_{kernel}_{variant}"
    assert cli.main(["generate", model, "--kernel", kernel, "--target", "verilog", "--variant", variant,
                     "--out", str(out)]) == 0
    rtl = json.loads((out / "rtl.json").read_text())
    write_axis(out)
    write_axil(out)
    n = 3
    write_tb(out, np.zeros((n, rtl["n_in"]), np.int32), np.zeros((n, rtl["n_out"]), np.int32), np.zeros(n, np.int32))
    return out, rtl["top"]


@pytest.mark.parametrize("model, kernel", [("fourbar", "kinematics"), ("fourbar", "equations"),
                                           ("slidercrank", "equations")])
@pytest.mark.parametrize("variant", ["pipelined", "shared", "microcode"])
def test_generated_verilog_is_lint_clean(tmp_path, model, kernel, variant):
    out, top = _design(tmp_path, model, kernel, variant)
    for t in (top, f"{top}_axis", f"{top}_axil", f"{top}_tb"):  # the core, the wrappers, the bench: each the top
        assert lint(out, t) == [], t


@pytest.mark.parametrize("options", [{"variant": "pipelined"}, {"variant": "pipelined", "dsp": 0},
                                     {"variant": "shared", "const_products": "shift-add"},
                                     {"variant": "shared", "multipliers": 2, "dividers": 2, "dsp": 0},
                                     {"variant": "microcode", "dividers": 2}])
def test_every_operator_is_lint_clean(tmp_path, options):
    """Every operator module (division, square root, sin/cos reduction; mul_lut with --dsp 0)."""
    generate(functions_kernel(), "verilog", options=options).write(tmp_path)
    write_axil(tmp_path)
    top = json.loads((tmp_path / "rtl.json").read_text())["top"]
    assert lint(tmp_path, top) == [] and lint(tmp_path, f"{top}_axil") == []


def test_lint_reports_a_width_mismatch(tmp_path):
    """The check can fail: one line narrowing a 64-bit sum into 32 bits is a WIDTHTRUNC."""
    out, top = _design(tmp_path, "fourbar", "kinematics", "shared")
    v = out / f"{top}.v"
    v.write_text(v.read_text().replace("endmodule", "    wire [31:0] narrow = {32'd0, ap_return};\nendmodule", 1))
    found = lint(out, top)
    assert any(w.startswith("%Warning-WIDTHTRUNC") for w in found), found
