"""The AXI-Stream wrapper `<top>_axis` around a kernel's ap_ctrl_hs core, and its check.

    path = write_axis(rtl_dir)                      # rtl/<top>_axis.v (templates/verilog/axis.v.j2)
    r = simulate_axis(rtl_dir, "icarus", fixed_dir, X, seed=0)

Beats (docs/kernels.md, verilog): s_axis carries the inputs, one 32-bit word each in port
order, tlast on the last; m_axis the outputs in port order, then the status word (ap_return;
bit 31 set when the input's tlast was not on its last beat), tlast on it. One vector at a
time: the inputs are registered and held while the core computes (what the shared
variant needs), so the wrapper serves every variant; a pipelined core's interval of 1 is
not kept (a vector every n_in + latency + n_out + 3 cycles or so).
The check (bench.test_axis) drives s_axis with random tvalid gaps and stalls m_axis with
random tready lows, and compares every result with the c-fixed host model bit for bit.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mbforge import __version__
from mbforge.backends.render import render_template
from mbforge.outdir import write_file

from . import sim as S


def axis_text(rtl: dict) -> str:
    n_in, n_out = rtl["n_in"], rtl["n_out"]
    return render_template("verilog/axis.v.j2", version=__version__, top=rtl["top"], variant=rtl.get("variant"),
                           n_in=n_in, n_out=n_out, cw=max(n_in, n_out + 1).bit_length())


def write_axis(rtl_dir: str | Path) -> str:
    """Write rtl/<top>_axis.v beside the kernel (never through a symlink); its file name."""
    rtl_dir = Path(rtl_dir)
    rtl = json.loads((rtl_dir / "rtl.json").read_text())
    name = f"{rtl['top']}_axis.v"
    write_file(rtl_dir / name, axis_text(rtl).encode(), "--interface axis")
    return name


@dataclass
class AxisResult:
    top: str
    vectors: int
    mismatches: list[str]
    cycles_per_vector: float | None
    stalls: dict
    errors: list[str]

    # the interface's name and its held-back counts (key, words) in the result line
    LABEL = "AXI-Stream"
    STALLS = (("tvalid_gaps", "s_axis tvalid gaps"), ("tready_stalls", "m_axis tready stalls"))
    UNIT = ""

    @property
    def passed(self) -> bool:
        return not self.mismatches and not self.errors and self.vectors > 0

    def line(self) -> str:
        if self.errors:
            return f"{self.top} ({self.LABEL}): FAIL: {self.errors[0].splitlines()[0]}"
        stalls = ", ".join(f"{words} {self.stalls.get(key, 0)}" for key, words in self.STALLS)
        return (f"{self.top} ({self.LABEL}, {stalls}{self.UNIT}): {self.vectors} vectors "
                f"{'bit-exact with the c-fixed host model' if not self.mismatches else 'DIFFERENT: ' + self.mismatches[0]}"
                f", {self.cycles_per_vector:.1f} cycles per vector")


def simulate_axis(rtl_dir: str | Path, sim: str, fixed_dir: str | Path, X: np.ndarray, seed: int = 0,
                  gap: float = 0.3) -> AxisResult:
    """X (raw int32 vectors) through `<top>_axis` under random tvalid gaps and tready
    stalls (a share `gap` of the cycles each), against the c-fixed host model."""
    top, r, errors = S.run_wrapper(rtl_dir, sim, write_axis(rtl_dir), "test_axis", fixed_dir, X, seed, gap)
    return AxisResult(top, int(r.get("vectors", 0)), list(r.get("mismatches", [])), r.get("cycles_per_vector"),
                      {k: r.get(k, 0) for k in ("tvalid_gaps", "tready_stalls")}, errors)
