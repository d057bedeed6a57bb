"""Synthesis report of a generated RTL kernel with yosys, written beside the RTL.

    rep = synthesize(rtl_dir)            # -> synth_report.json, synth_report.txt

Two flows:
* coarse (always): `synth -flatten -run begin:fine` (its steps spelled out), yosys'
  word-level netlist after optimisation and operator sharing: cells by type, multipliers
  (the $mul cells before alumacc, which makes a $macc of any sum of three terms; constant
  ones included), flip-flop bits (the widths of $dff-like cells), memories.
* xilinx (when asked): `synth_xilinx -family xc7`, an ESTIMATE of the resources on a Xilinx
  7-series part (no place and route here: LUT1..LUT6, flip-flops, CARRY4, DSP48E1, block
  RAM in 18 kbit halves) against an Artix-7 XC7A35T's counts.
* ice40 (small designs, or when asked): `synth_ice40 -dsp`, the iCE40 UltraPlus mapping:
  SB_LUT4, SB_CARRY, flip-flops, SB_MAC16 DSPs, SB_RAM40_4K, against the UP5K's 5280 LUTs
  and 8 DSPs. It costs about a minute per 100 operators on this kind of machine, so by
  default it runs only up to ICE40_MAX_OPS hardware operators; larger designs get the
  coarse counts and the note that the mapping was skipped.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from mbforge.manifest import Manifest
from mbforge.outdir import write_file

ICE40_MAX_OPS = 40
UP5K = {"SB_LUT4": 5280, "SB_MAC16": 8, "SB_RAM40_4K": 30, "SB_SPRAM256KA": 4}
FF_TYPES = ("$dff", "$dffe", "$sdff", "$sdffe", "$sdffce", "$adff", "$adffe", "$aldff", "$dffsr", "$dffsre")
ICE40_FF = re.compile(r"^SB_DFF")
XC7A35T = {"luts": 20800, "flipflops": 41600, "dsps": 90, "brams_18k": 100}  # Artix-7 35T: what an estimate is held to


COARSE_BEFORE_ALUMACC = "proc; flatten; opt_expr; opt_clean; check; opt -nodffe -nosdff; fsm; opt; wreduce; peepopt; opt_clean"
COARSE_AFTER = "alumacc; share; opt; memory -nomap; opt_clean"


class SynthError(RuntimeError):
    """yosys is missing or failed."""


def _yosys(script: str, timeout: float) -> str:
    exe = shutil.which("yosys")
    if exe is None:
        raise SynthError("yosys not found (apt-get install yosys)")
    with tempfile.NamedTemporaryFile("w", suffix=".ys", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        proc = subprocess.run([exe, "-q", "-s", path], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SynthError(f"yosys did not finish within {timeout:.0f} s") from None
    finally:
        Path(path).unlink(missing_ok=True)
    if proc.returncode != 0:
        raise SynthError(f"yosys failed:\n{(proc.stderr or proc.stdout)[-3000:]}")
    return proc.stdout


def _cells(stat_json: Path) -> dict[str, int]:
    d = json.loads(stat_json.read_text())
    if "design" in d:
        return dict(d["design"]["num_cells_by_type"])
    mods = list(d["modules"].values())
    return dict(mods[0]["num_cells_by_type"]) if mods else {}


def _ff_bits(stat_width: str) -> int:
    bits = 0
    for line in stat_width.splitlines():
        m = re.match(r"\s+(\$\w+?)_(\d+)\s+(\d+)\s*$", line)
        if m and m.group(1) in FF_TYPES:
            bits += int(m.group(2)) * int(m.group(3))
    return bits


def _memory_bits(stat_width: str) -> int:
    m = re.search(r"Number of memory bits:\s+(\d+)", stat_width)
    return int(m.group(1)) if m else 0


def register_bits(rtl_dir: str | Path, timeout: float = 3600) -> dict:
    """Flip-flop bits of the RTL as written: yosys `proc; flatten; opt_clean` (no constant
    folding, no sharing), `stat -width`; by cell type and in total. A count that does not
    depend on synthesis optimisations, cheap enough for the largest kernels. A memory's
    output register (a ring buffer's, delay_lines=memory) is the memory's read port
    (`memory_dff`), as in a block RAM, so not a flip-flop; the memories' bits are counted
    apart (memory_bits)."""
    rtl_dir = Path(rtl_dir).resolve()
    m = Manifest.load(rtl_dir)
    top = json.loads((rtl_dir / "rtl.json").read_text())["top"]
    srcs = " ".join(str(rtl_dir / s) for s in m.sources)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stat.txt"
        _yosys(f"read_verilog -sv {srcs}\nhierarchy -top {top}\nproc\nflatten\nopt_clean\nmemory_dff\nopt_clean\n"
               f"tee -q -o {out} stat -width\n", timeout)
        text = out.read_text()
        return {"flipflop_bits": _ff_bits(text), "memory_bits": _memory_bits(text)}


def xilinx_counts(srcs: str, top: str, timeout: float = 3600) -> dict:
    """yosys `synth_xilinx -family xc7` of the kernel alone: resources of a Xilinx 7-series
    part, an estimate (no place and route), against an XC7A35T."""
    with tempfile.TemporaryDirectory() as tmp:
        stat = Path(tmp) / "xc7.json"
        t0 = time.perf_counter()
        _yosys(f"read_verilog -sv {srcs}\nsynth_xilinx -family xc7 -top {top}\ntee -q -o {stat} stat -json\n", timeout)
        c = _cells(stat)
    out = {"luts": sum(v for k, v in c.items() if re.fullmatch(r"LUT[1-6]", k)),
           "flipflops": sum(v for k, v in c.items() if re.fullmatch(r"FD[RSCP]E", k)),
           "carries": c.get("CARRY4", 0), "dsps": c.get("DSP48E1", 0),
           "brams_18k": c.get("RAMB18E1", 0) + 2 * c.get("RAMB36E1", 0), "by_type": dict(sorted(c.items())),
           "seconds": round(time.perf_counter() - t0, 2)}
    out["fits_xc7a35t"] = all(out[k] <= n for k, n in XC7A35T.items())
    return out


def synthesize(rtl_dir: str | Path, ice40: bool | None = None, timeout: float = 3600, xilinx: bool = False) -> dict:
    rtl_dir = Path(rtl_dir).resolve()
    m = Manifest.load(rtl_dir)
    rtl = json.loads((rtl_dir / "rtl.json").read_text())
    top = rtl["top"]
    srcs = " ".join(str(rtl_dir / s) for s in m.sources)
    n_ops = sum(rtl.get("hw_ops", {}).values())
    rep: dict = {"top": top, "variant": rtl.get("variant"), "hw_ops": n_ops, "yosys": None, "coarse": None,
                 "ice40": None, "notes": [], "seconds": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        # synth's coarse steps spelled out (yosys 0.23's `synth -flatten -run begin:fine`), with
        # a count of the `*` left before alumacc: after it a sum of three terms is a $macc too
        _yosys(f"read_verilog -sv {srcs}\nhierarchy -check -top {top}\n{COARSE_BEFORE_ALUMACC}\n"
               f"tee -q -o {tmp / 'mul.json'} stat -json\n{COARSE_AFTER}\n"
               f"tee -q -o {tmp / 'coarse.txt'} stat -width\ntee -q -o {tmp / 'coarse.json'} stat -json\n", timeout)
        rep["seconds"]["coarse"] = round(time.perf_counter() - t0, 2)
        cells = _cells(tmp / "coarse.json")
        rep["yosys"] = json.loads((tmp / "coarse.json").read_text()).get("creator")
        rep["coarse"] = {
            "cells": sum(cells.values()), "by_type": dict(sorted(cells.items())),
            "multipliers": _cells(tmp / "mul.json").get("$mul", 0),
            "flipflop_bits": _ff_bits((tmp / "coarse.txt").read_text()),
            "memories": cells.get("$mem", 0) + cells.get("$mem_v2", 0),
        }
        run_ice = ice40 if ice40 is not None else n_ops <= ICE40_MAX_OPS
        if run_ice:
            t0 = time.perf_counter()
            _yosys(f"read_verilog -sv {srcs}\nsynth_ice40 -top {top} -dsp\n"
                   f"tee -q -o {tmp / 'ice40.json'} stat -json\n", timeout)
            rep["seconds"]["ice40"] = round(time.perf_counter() - t0, 2)
            c = _cells(tmp / "ice40.json")
            ice = {"by_type": dict(sorted(c.items())), "luts": c.get("SB_LUT4", 0), "carries": c.get("SB_CARRY", 0),
                   "flipflops": sum(v for k, v in c.items() if ICE40_FF.match(k)), "dsps": c.get("SB_MAC16", 0),
                   "brams": c.get("SB_RAM40_4K", 0)}
            ice["fits_up5k"] = ice["luts"] <= UP5K["SB_LUT4"] and ice["dsps"] <= UP5K["SB_MAC16"]
            rep["ice40"] = ice
        if xilinx:
            rep["xilinx"] = xilinx_counts(srcs, top, timeout)
        if not run_ice and ice40 is None:  # skipped for its size, not because the caller said so
            rep["notes"].append(f"iCE40 mapping skipped: {n_ops} hardware operators > {ICE40_MAX_OPS} "
                                "(`mbforge hdl --ice40` forces it; about a minute per 100 operators)")
    # what the variant has: registers the shared and microcode ones (the latter's in a block RAM
    # file, with its ROM), delay lines the pipelined one
    rep["rtl"] = {k: rtl[k] for k in ("latency", "interval", "multipliers", "registers", "delay_line_bits", "units",
                                      "register_file_depth", "rom_words", "rom_width") if k in rtl}
    # beside the RTL, never through a symlink planted there (mbforge.outdir)
    write_file(rtl_dir / "synth_report.json", (json.dumps(rep, indent=1, sort_keys=True) + "\n").encode(), "--out")
    write_file(rtl_dir / "synth_report.txt", (report_text(rep) + "\n").encode(), "--out")
    return rep


def report_text(rep: dict) -> str:
    c = rep["coarse"]
    r = rep.get("rtl") or {}
    lines = [f"synthesis of {rep['top']} ({rep['variant']}), {rep['yosys']}",
             f"  kernel: latency {r.get('latency')} cycles, interval {r.get('interval')}, "
             f"{r.get('multipliers')} multiplier operators, {rep['hw_ops']} hardware operators",
             f"  word-level (synth -run begin:fine, {rep['seconds'].get('coarse')} s): {c['cells']} cells, "
             f"{c['multipliers']} multipliers (constant ones included), {c['flipflop_bits']} flip-flop bits, "
             f"{c['memories']} memories"]
    ice = rep.get("ice40")
    if ice:
        lines.append(f"  iCE40 (synth_ice40 -dsp, {rep['seconds'].get('ice40')} s): {ice['luts']} LUT4, "
                     f"{ice['carries']} carries, {ice['flipflops']} flip-flops, {ice['dsps']} SB_MAC16, "
                     f"{ice['brams']} block RAMs; fits an UP5K (5280 LUT4, 8 DSP): {ice['fits_up5k']}")
    x = rep.get("xilinx")
    if x:
        lines.append(f"  Xilinx 7-series ESTIMATE (synth_xilinx -family xc7, no place and route, {x['seconds']} s): "
                     f"{x['luts']} LUT, {x['flipflops']} flip-flops, {x['carries']} CARRY4, {x['dsps']} DSP48E1, "
                     f"{x['brams_18k']} block RAM (18 kbit); fits an XC7A35T ({XC7A35T['luts']} LUT, "
                     f"{XC7A35T['dsps']} DSP48E1, {XC7A35T['brams_18k']} x 18 kbit) by these counts: {x['fits_xc7a35t']}")
    lines += [f"  note: {n}" for n in rep.get("notes", [])]
    return "\n".join(lines)
