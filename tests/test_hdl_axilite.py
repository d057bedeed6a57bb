"""The AXI4-Lite register map (mbforge.hdl.axilite): every variant's core behind s_axil_*,
driven with random valid and ready delays on all five channels, bit-exact with the c-fixed
host model; a wrapper that returns one wrong bit fails."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mbforge.hdl import sim as S
from mbforge.hdl.axilite import IN_BASE, addr_bits, axil_files, simulate_axil, write_axil
from mbforge.pipeline import generate

from helpers.hdl_kernels import functions_kernel, tiny_kernel

pytestmark = [pytest.mark.hdl, pytest.mark.slow]
MBFORGE = Path(sys.executable).parent / "mbforge"


def _design(tmp_path, make, variant):
    k = make()
    generate(k, "verilog", options={"variant": variant}).write(tmp_path / "rtl")
    generate(k, "c-fixed").write(tmp_path / "fixed")
    return S.with_robustness(tmp_path / "fixed", S.make_vectors(tmp_path / "fixed", 20, 3))[0]


@pytest.mark.parametrize("make, variant", [(tiny_kernel, "pipelined"), (functions_kernel, "shared")])
def test_axilite_register_map_under_random_delays_is_bit_exact(tmp_path, make, variant):
    X = _design(tmp_path, make, variant)
    r = simulate_axil(tmp_path / "rtl", "icarus", tmp_path / "fixed", X, seed=7, gap=0.4)
    assert r.passed, r.errors or r.mismatches
    assert r.vectors == len(X) and r.stalls["valid_delays"] > len(X) and r.stalls["ready_delays"] > len(X)
    # files beside the core, deterministic; the header's offsets are the wrapper's
    rtl = json.loads((tmp_path / "rtl" / "rtl.json").read_text())
    files = axil_files(rtl)
    for name in write_axil(tmp_path / "rtl"):
        assert (tmp_path / "rtl" / name).read_text() == files[name]
    vh = files[f"{rtl['top']}_axil.vh"]
    last_out = IN_BASE + 4 * (rtl["n_in"] + rtl["n_out"] - 1)
    assert f"_AXIL_OUT_{rtl['n_out'] - 1} 'h{last_out:02x}" in vh and last_out < 2 ** addr_bits(rtl["n_in"], rtl["n_out"])


def test_axilite_check_fails_on_a_wrong_output_bit(tmp_path, monkeypatch):
    import mbforge.hdl.axilite as A

    X = _design(tmp_path, tiny_kernel, "pipelined")
    text = axil_files(json.loads((tmp_path / "rtl" / "rtl.json").read_text()))["tk_tiny_hw_axil.v"]
    assert text.count("res_1 <= out_1;") == 1

    def write_broken(rtl_dir):  # the check writes its wrapper: this one flips a bit of out_1
        names = write_axil(rtl_dir)
        (Path(rtl_dir) / names[0]).write_text(text.replace("res_1 <= out_1;", "res_1 <= out_1 ^ 32'd1;"))
        return names
    monkeypatch.setattr(A, "write_axil", write_broken)
    r = simulate_axil(tmp_path / "rtl", "icarus", tmp_path / "fixed", X[:6], seed=1)
    assert not r.passed and r.mismatches, r.errors


def test_hdl_interface_axilite_from_the_command_line(tmp_path):
    r = subprocess.run([str(MBFORGE), "hdl", "fourbar", "--kernel", "kinematics", "--variant", "shared",
                        "--vectors", "10", "--no-synth", "--interface", "axilite", "--out", str(tmp_path / "h")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    line = [l for l in r.stdout.splitlines() if "(AXI4-Lite" in l]
    assert len(line) == 1 and "bit-exact with the c-fixed host model" in line[0], r.stdout
    assert (tmp_path / "h" / "rtl" / "fourbar_kinematics_hw_axil.vh").exists()
