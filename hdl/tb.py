"""A plain Verilog testbench of a kernel's ap_ctrl_hs core, with its vectors as hex files.

    names = write_tb(rtl_dir, X, Y, status)   # rtl/<top>_tb.v, <top>_in.hex, <top>_expected.hex
    r = run_tb(rtl_dir, "icarus")             # the two plain commands; r.passed, r.text

The bench (templates/verilog/tb.v.j2) needs nothing but a simulator: it reads the vectors
with $readmemh (their number from the input file's length), drives ap_ctrl_hs after a reset,
compares every output and ap_return bit for bit, prints a line per mismatch and ends with
`PASS <n> vectors` or `FAIL <k> of <n> vectors` ($fatal, a non-zero exit; a cycle limit
so it never hangs). `mbforge hdl` writes the files with the vectors it simulated and the
c-fixed host model's results for them; an engineer may replace both hex files.
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mbforge import __version__
from mbforge.backends.render import render_template
from mbforge.outdir import OutDir, OutDirError, write_file

from . import sim as S

MIN_DEPTH = 1024  # vectors the bench holds at least, so a longer hand-made file fits


def hex_text(words: np.ndarray) -> str:
    """One 32-bit word per line, row by row, two's complement in 8 lowercase hex digits."""
    flat = np.asarray(words, dtype=np.int64).reshape(-1) & 0xFFFFFFFF
    return "".join(f"{int(w):08x}\n" for w in flat)


def tb_text(rtl: dict, n: int) -> str:
    depth = max(MIN_DEPTH, 1 << max(0, n - 1).bit_length())  # a power of two >= n
    return render_template("verilog/tb.v.j2", version=__version__, top=rtl["top"], variant=rtl.get("variant"),
                           n_in=rtl["n_in"], n_out=rtl["n_out"], latency=rtl["latency"],
                           interval=rtl["interval"], max_vectors=depth)


def write_tb(rtl_dir: str | Path, X: np.ndarray, Y: np.ndarray, status: np.ndarray) -> list[str]:
    """rtl/<top>_tb.v and its vectors (X raw int32 inputs; Y, status: the host model's results
    for them); the three file names."""
    rtl_dir = Path(rtl_dir)
    rtl = json.loads((rtl_dir / "rtl.json").read_text())
    X, Y = np.asarray(X).reshape(len(X), -1), np.asarray(Y).reshape(len(X), -1)
    if X.shape[1] != rtl["n_in"] or Y.shape[1] != rtl["n_out"]:
        raise S.SimError(f"vectors of {X.shape[1]} inputs and {Y.shape[1]} outputs for {rtl['top']} "
                         f"({rtl['n_in']} and {rtl['n_out']})")
    top = rtl["top"]
    files = {f"{top}_tb.v": tb_text(rtl, len(X)), f"{top}_in.hex": hex_text(X),
             f"{top}_expected.hex": hex_text(np.column_stack([Y, np.asarray(status).reshape(-1)]))}
    for name, text in files.items():
        write_file(rtl_dir / name, text.encode(), "the testbench")
    return list(files)


@dataclass
class TbResult:
    sim: str
    returncode: int
    text: str  # the simulation's output (or the build's, when it failed)

    @property
    def verdict(self) -> str:
        lines = [l for l in self.text.splitlines() if l.startswith(("PASS ", "FAIL "))]
        return lines[-1] if lines else "no verdict"

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and self.verdict.startswith("PASS ")


def tb_commands(top: str, sim: str, sources: list[str]) -> list[list[str]]:
    """The bench's commands, run in the folder above rtl/ (docs/kernels.md, verilog)."""
    if sim == "icarus":
        return [["iverilog", "-g2012", "-o", "tb", *sources], ["vvp", "-n", "tb"]]
    if sim == "verilator":
        return [["verilator", "--binary", "--timing", "--top-module", f"{top}_tb", *sources],
                [f"obj_dir/V{top}_tb"]]
    raise S.SimError(f"unknown simulator {sim!r}; known: {', '.join(S.SIMULATORS)}")


def run_tb(rtl_dir: str | Path, sim: str, timeout: float = 1200) -> TbResult:
    """The plain bench under rtl/tb_<sim>/ (a copy of rtl/'s .v and .hex files, so the
    commands are the documented ones, run beside that rtl/)."""
    rtl_dir = Path(rtl_dir).resolve()
    top = json.loads((rtl_dir / "rtl.json").read_text())["top"]
    try:
        work = OutDir(rtl_dir).sub(f"tb_{sim}")
        work.sub("rtl").path.mkdir(parents=True, exist_ok=True)
    except OutDirError as e:
        raise S.SimError(str(e)) from None
    sources = sorted(p.name for p in rtl_dir.iterdir() if p.suffix in (".v", ".hex") and p.is_file())
    for name in sources:
        write_file(work.path / "rtl" / name, (rtl_dir / name).read_bytes(), "the testbench")
    env = dict(os.environ) | S.sim_env(sim)
    out = []
    for cmd in tb_commands(top, sim, [f"rtl/{s}" for s in sources if s.endswith(".v")]):
        try:
            p = subprocess.run(cmd, cwd=work.path, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return TbResult(sim, -1, "\n".join(out + [f"{cmd[0]}: no end after {timeout:g} s"]))
        out.append(p.stdout + p.stderr)
        if p.returncode:
            return TbResult(sim, p.returncode, "\n".join(out))
    return TbResult(sim, 0, "\n".join(out))
