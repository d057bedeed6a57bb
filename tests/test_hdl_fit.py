"""The four-bar kinematics, shared variant with one multiplier, fits an iCE40 UP5K: the real
yosys synth_ice40 -dsp mapping of the kernel inside mbforge.hdl.pnr's IO wrapper has no
more LUTs and DSPs than the part, with the room nextpnr needed to pack it (measured: 3,799
LUT4 + 1,695 flip-flops packed into 5,088 of 5,280 logic cells, Fmax 15.1 MHz; nextpnr takes
about 10 minutes here, so it is not run in a test: bench.rtl --pnr does). The pipelined variant
and the shared one before its iterative units did not (29,921 and 8,827 LUTs, 250 and 12 DSPs)."""
import json
import subprocess

import pytest

from mbforge.hdl.pnr import DEVICES, _fit, wrapper
from mbforge.manifest import Manifest
from mbforge.pipeline import generate

from helpers.hdl_kernels import fourbar_kinematics

pytestmark = pytest.mark.hdl


@pytest.mark.slow
@pytest.mark.needs("yosys")
def test_fourbar_kinematics_shared_maps_into_an_up5k(tmp_path):
    # placed and routed without the input check (its 10 comparators cost about 240 LUTs,
    # more than the UP5K has left): the check is on by default, off where the caller validates
    generate(fourbar_kinematics(), "verilog",
             options={"variant": "shared", "multipliers": 1, "input_check": "off"}).write(tmp_path)
    rtl = json.loads((tmp_path / "rtl.json").read_text())
    assert rtl["units"] == {"mul": 1, "add": 1, "div": 1, "tred": 1}
    (tmp_path / "wrap.v").write_text(wrapper(rtl))
    srcs = " ".join(str(tmp_path / s) for s in Manifest.load(tmp_path).sources + ["wrap.v"])
    (tmp_path / "s.ys").write_text(f"read_verilog -sv {srcs}\nsynth_ice40 -top {rtl['top']}_pnr -dsp\n"
                                   f"tee -q -o {tmp_path / 'stat.json'} stat -json\n")
    proc = subprocess.run(["yosys", "-q", "-s", str(tmp_path / "s.ys")], capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
    used, why = _fit(DEVICES["up5k"], cells)
    assert why is None, why
    assert used["dsps"] == 8  # the product unit's and the trig reduction's 32 x 32 multipliers
    # LUTs and flip-flops share logic cells only when a LUT feeds its own flip-flop: leave the
    # packer the room it needed (5,088 cells for 3,799 LUTs and 1,695 flip-flops)
    assert used["luts"] + used["ffs"] <= 1.06 * DEVICES["up5k"]["luts"], used
