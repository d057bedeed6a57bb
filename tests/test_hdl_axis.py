"""The AXI-Stream wrapper (mbforge.hdl.axis): every variant's core behind s_axis / m_axis,
driven with random tvalid gaps and tready stalls, bit-exact with the c-fixed host model."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mbforge.hdl import sim as S
from mbforge.hdl.axis import axis_text, simulate_axis, write_axis
from mbforge.pipeline import generate

from helpers.hdl_kernels import functions_kernel, tiny_kernel

pytestmark = [pytest.mark.hdl, pytest.mark.slow]
MBFORGE = Path(sys.executable).parent / "mbforge"


@pytest.mark.parametrize("make, variant", [(tiny_kernel, "pipelined"), (functions_kernel, "shared")])
def test_axis_wrapper_under_backpressure_is_bit_exact(tmp_path, make, variant):
    k = make()
    generate(k, "verilog", options={"variant": variant}).write(tmp_path / "rtl")
    generate(k, "c-fixed").write(tmp_path / "fixed")
    X = S.with_robustness(tmp_path / "fixed", S.make_vectors(tmp_path / "fixed", 30, 2))[0]
    r = simulate_axis(tmp_path / "rtl", "icarus", tmp_path / "fixed", X, seed=5, gap=0.4)
    assert r.passed, r.errors or r.mismatches
    assert r.vectors == len(X) and r.stalls["tvalid_gaps"] > len(X) / 4 and r.stalls["tready_stalls"] > len(X)
    # one vector at a time: at least its beats in, the core's latency, its beats out
    rtl = json.loads((tmp_path / "rtl" / "rtl.json").read_text())
    assert r.cycles_per_vector > rtl["n_in"] + rtl["latency"] + rtl["n_out"] + 1
    # generated deterministically, beside the core
    text = (tmp_path / "rtl" / write_axis(tmp_path / "rtl")).read_text()
    assert text == axis_text(rtl) and f"module {rtl['top']}_axis (" in text


def test_hdl_interface_axis_from_the_command_line(tmp_path):
    r = subprocess.run([str(MBFORGE), "hdl", "fourbar", "--kernel", "equations", "--variant", "shared",
                        "--multipliers", "2", "--vectors", "10", "--no-synth", "--interface", "axis",
                        "--out", str(tmp_path / "h")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    line = [l for l in r.stdout.splitlines() if "(AXI-Stream" in l]
    assert len(line) == 1 and "bit-exact with the c-fixed host model" in line[0], r.stdout
    assert (tmp_path / "h" / "rtl" / "fourbar_equations_hw_axis.v").exists()
