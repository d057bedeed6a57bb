"""Place and route of a generated RTL kernel on an iCE40 with nextpnr: Fmax and utilisation.

    rep = place_and_route(rtl_dir, device="up5k", seed=1)   # -> pnr_report.json beside the RTL

Flow: the kernel inside an IO wrapper (`<top>_pnr`, below), yosys `synth_ice40 -json`
(`-dsp` on the UP5K, whose SB_MAC16s nextpnr places), then `nextpnr-ice40 --up5k|--hx8k
--seed N --report`; Fmax is nextpnr's achieved frequency of the clock net after routing.

Invariants:
* The wrapper exists because a kernel has 32 pins per input and output, more than any
  iCE40 package: the inputs come from a shift register loaded one bit per clock, the
  outputs, their _ap_vld, ap_done and ap_return are folded by XOR into one register whose
  parity is the only output pin. Every kernel bit stays observable, so yosys removes no
  logic; the wrapper's flip-flops (32 per input + 32) and XOR LUTs are counted in the
  utilisation (reported beside it as `wrapper_ffs`).
* A design with more LUTs, DSPs or block RAMs than the device after synthesis does not go
  to nextpnr: the report says `does not fit: N LUTs for M` (or DSPs, RAMs). With
  device=auto the HX8K (no DSPs) is skipped when the UP5K mapping already has more LUTs
  than it, as its multipliers would only add LUTs there.
* Runs are deterministic: yosys is, and nextpnr gets a fixed --seed (default 1).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from mbforge.manifest import Manifest
from mbforge.outdir import write_file

# logic cells, DSPs, block RAMs of the parts nextpnr-ice40 places (its chip database)
DEVICES = {
    "up5k": {"flag": "--up5k", "package": "sg48", "luts": 5280, "dsps": 8, "brams": 30, "dsp_synth": True},
    "hx8k": {"flag": "--hx8k", "package": "ct256", "luts": 7680, "dsps": 0, "brams": 32, "dsp_synth": False},
}
PNR_CHOICES = ("ice40-up5k", "ice40-hx8k", "ice40")  # ice40: the first part the design fits
PNR_DEVICE = {"ice40-up5k": "up5k", "ice40-hx8k": "hx8k", "ice40": "auto"}


class PnrError(RuntimeError):
    """yosys or nextpnr is missing or failed."""


def _run(cmd: list[str], timeout: float, cwd: Path) -> subprocess.CompletedProcess:
    if shutil.which(cmd[0]) is None:
        raise PnrError(f"{cmd[0]} not found (apt-get install {'yosys' if cmd[0] == 'yosys' else 'nextpnr-ice40'})")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
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
    used = {"luts": cells.get("SB_LUT4", 0), "dsps": cells.get("SB_MAC16", 0), "brams": cells.get("SB_RAM40_4K", 0),
            "ffs": sum(v for k, v in cells.items() if k.startswith("SB_DFF")), "carries": cells.get("SB_CARRY", 0)}
    for k, name in (("luts", "LUTs"), ("dsps", "DSPs"), ("brams", "block RAMs")):
        if used[k] > dev[k]:
            return used, f"does not fit: {used[k]} {name} for {dev[k]}"
    return used, None


def place_and_route(rtl_dir: str | Path, device: str = "up5k", seed: int = 1, timeout: float = 3600) -> dict:
    """device: up5k, hx8k or auto (the UP5K if the design fits it, else the HX8K)."""
    rtl_dir = Path(rtl_dir).resolve()
    m = Manifest.load(rtl_dir)
    rtl = json.loads((rtl_dir / "rtl.json").read_text())
    parts = ["up5k", "hx8k"] if device == "auto" else [device]
    if any(p not in DEVICES for p in parts):
        raise PnrError(f"unknown iCE40 part {device!r}: one of {', '.join(DEVICES)} or auto")
    rep: dict = {"top": rtl["top"], "variant": rtl.get("variant"), "latency": rtl.get("latency"),
                 "interval": rtl.get("interval"), "seed": seed, "tried": [], "seconds": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "wrap.v").write_text(wrapper(rtl))
        srcs = " ".join(str(rtl_dir / s) for s in m.sources) + " " + str(tmp / "wrap.v")
        for part in parts:
            dev = DEVICES[part]
            prev = rep["tried"][-1] if rep["tried"] else None
            if prev and prev["dsps"] > dev["dsps"] and prev["luts"] > dev["luts"]:
                # its multipliers would only add LUTs on a part without DSPs: not worth a synthesis
                rep["tried"].append({"device": part, "fits": False, "why": f"does not fit: more than {prev['luts']} "
                                     f"LUTs (the {prev['device'].upper()} mapping's, with {prev['dsps']} DSPs) "
                                     f"for {dev['luts']}"})
                continue
            t0 = time.perf_counter()
            script = (f"read_verilog -sv {srcs}\nsynth_ice40 -top {rtl['top']}_pnr {'-dsp ' if dev['dsp_synth'] else ''}"
                      f"-json {tmp / 'net.json'}\ntee -q -o {tmp / 'stat.json'} stat -json\n")
            (tmp / "s.ys").write_text(script)
            proc = _run(["yosys", "-q", "-s", str(tmp / "s.ys")], timeout, tmp)
            if proc.returncode != 0:
                raise PnrError(f"yosys failed:\n{(proc.stderr or proc.stdout)[-2000:]}")
            rep["seconds"][f"synth_{part}"] = round(time.perf_counter() - t0, 1)
            stat = json.loads((tmp / "stat.json").read_text())
            cells = dict(stat["design"]["num_cells_by_type"]) if "design" in stat else {}
            used, miss = _fit(dev, cells)
            rep["tried"].append({"device": part, **used, "fits": miss is None, "why": miss})
            if miss is not None:
                continue
            t0 = time.perf_counter()
            cmd = ["nextpnr-ice40", dev["flag"], "--package", dev["package"], "--json", str(tmp / "net.json"),
                   "--report", str(tmp / "report.json"), "--seed", str(seed), "--timing-allow-fail", "--quiet",
                   "--threads", "1"]
            proc = _run(cmd, timeout, tmp)
            rep["seconds"][f"nextpnr_{part}"] = round(time.perf_counter() - t0, 1)
            if proc.returncode != 0 or not (tmp / "report.json").exists():
                err = (proc.stderr or proc.stdout).strip().splitlines()
                # its ERROR line says why (e.g. more logic cells than the part once LUTs and
                # flip-flops are packed); the last line only counts warnings and errors
                err = [e for e in err if e.startswith("ERROR")] or err
                rep["tried"][-1].update(fits=False, why="nextpnr: " + (err[-1] if err else f"exit {proc.returncode}"))
                continue
            r = json.loads((tmp / "report.json").read_text())
            fmax = [v.get("achieved") for k, v in r.get("fmax", {}).items()]
            util = {k: [v["used"], v["available"]] for k, v in r.get("utilization", {}).items()}
            rep.update(device=part, fits=True, fmax_mhz=round(min(fmax), 2) if fmax else None, utilization=util,
                       luts=used["luts"], ffs=used["ffs"], dsps=used["dsps"], brams=used["brams"],
                       wrapper_ffs=32 * rtl["n_in"] + 32)
            break
        else:
            rep.update(device=None, fits=False, fmax_mhz=None)
    if rep.get("fmax_mhz"):
        cyc = rep["latency"] or 0
        rep["latency_us"] = round(cyc / rep["fmax_mhz"], 3)
        rep["us_per_result"] = round((rep["interval"] or 1) / rep["fmax_mhz"], 4)
    # beside the RTL, never through a symlink planted there (mbforge.outdir)
    write_file(rtl_dir / "pnr_report.json", (json.dumps(rep, indent=1, sort_keys=True) + "\n").encode(), "--out")
    return rep


def pnr_text(rep: dict) -> str:
    if not rep.get("fits"):
        why = "; ".join(f"iCE40 {t['device'].upper()}: {t['why']}" for t in rep["tried"])
        return f"place and route of {rep['top']} ({rep['variant']}): {why}"
    u = rep["utilization"]

    def cell(name):
        return f"{u[name][0]}/{u[name][1]}" if name in u else "0"
    return (f"place and route of {rep['top']} ({rep['variant']}) on iCE40 {rep['device'].upper()} "
            f"(nextpnr-ice40, seed {rep['seed']}): Fmax {rep['fmax_mhz']:.1f} MHz; "
            f"latency {rep['latency']} cycles = {rep['latency_us']:.3f} us, one result per "
            f"{rep['interval']} cycles = {rep['us_per_result']:.4f} us\n"
            f"  utilisation: logic cells {cell('ICESTORM_LC')}, DSPs {cell('ICESTORM_DSP')}, block RAMs "
            f"{cell('ICESTORM_RAM')}; from synth_ice40: {rep['luts']} LUT4, {rep['ffs']} flip-flops "
            f"(IO wrapper: {rep['wrapper_ffs']} of them)")
