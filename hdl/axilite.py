"""The AXI4-Lite register map `<top>_axil` around a kernel's ap_ctrl_hs core, and its check.

    names = write_axil(rtl_dir)                     # rtl/<top>_axil.v and <top>_axil.vh
    r = simulate_axil(rtl_dir, "icarus", fixed_dir, X, seed=0)

Registers (docs/kernels.md, verilog; the offsets as `define macros in <top>_axil.vh): CTRL
at 0x00 (bit 0 start, clears itself when the core takes the vector; bit 1 done, cleared by
reading CTRL or by a start; bit 2 idle), STATUS at 0x04 (ap_return), then one register per
input word from 0x10 and one per output word after them. One vector at a time: the inputs
stay in their registers while the core computes (what the shared variant needs).
The check (bench.test_axilite) writes each vector's inputs, starts, polls done and reads
the outputs and the status, with random valid and ready delays on all five channels, and
compares them with the c-fixed host model bit for bit.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mbforge import __version__
from mbforge.backends.render import render_template
from mbforge.outdir import write_file

from . import sim as S
from .axis import AxisResult


class AxilResult(AxisResult):
    LABEL = "AXI4-Lite"
    STALLS = (("valid_delays", "valid delays"), ("ready_delays", "ready delays"))
    UNIT = " cycles"

IN_BASE = 0x10  # the first input's byte offset; CTRL 0x00, STATUS 0x04


def addr_bits(n_in: int, n_out: int) -> int:
    """Byte address bits covering CTRL, STATUS, two spare words and every input and output."""
    return max(4, (4 + n_in + n_out - 1).bit_length() + 2)


def axil_files(rtl: dict) -> dict[str, str]:
    n_in, n_out, top = rtl["n_in"], rtl["n_out"], rtl["top"]
    ctx = dict(version=__version__, top=top, variant=rtl.get("variant"), macro=top.upper(), n_in=n_in,
               n_out=n_out, aw=addr_bits(n_in, n_out))
    return {f"{top}_axil.v": render_template("verilog/axil.v.j2", **ctx),
            f"{top}_axil.vh": render_template("verilog/axil.vh.j2", **ctx)}


def write_axil(rtl_dir: str | Path) -> list[str]:
    """Write rtl/<top>_axil.v and .vh beside the kernel (never through a symlink); their names."""
    rtl_dir = Path(rtl_dir)
    files = axil_files(json.loads((rtl_dir / "rtl.json").read_text()))
    for name, text in files.items():
        write_file(rtl_dir / name, text.encode(), "--interface axilite")
    return list(files)


def simulate_axil(rtl_dir: str | Path, sim: str, fixed_dir: str | Path, X: np.ndarray, seed: int = 0,
                  gap: float = 0.3) -> AxilResult:
    """X (raw int32 vectors) through `<top>_axil`, each channel's valid and ready held back on
    a share `gap` of the cycles, against the c-fixed host model."""
    top, r, errors = S.run_wrapper(rtl_dir, sim, write_axil(rtl_dir)[0], "test_axilite", fixed_dir, X, seed, gap)
    return AxilResult(top, int(r.get("vectors", 0)), list(r.get("mismatches", [])), r.get("cycles_per_vector"),
                      {k: r.get(k, 0) for k in ("valid_delays", "ready_delays")}, errors)
