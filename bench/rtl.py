"""FPGA resources of a kernel's RTL: latency x resources over the variants, on an iCE40.

For one kernel (default the four-bar's kinematics): the pipelined design with its
outputs aligned and early, and the shared variant at several multiplier counts. Per
design: cycles (latency, interval), delay-line bits of the schedule, flip-flop bits of the
RTL as written (yosys proc, mbforge.hdl.synth.register_bits), and with --pnr the
nextpnr-ice40 figures (mbforge.hdl.pnr: LUTs, DSPs, Fmax, so cycles become
microseconds); the shared variant's place-and-route figures measured once are printed
beside (PNR_MEASURED). The delay-line bits of the schedule before the linear program (ASAP or
ALAP, outputs aligned) are computed in the same run, side by side.

Then issue 14's goal for the two pipelined designs it names (the four-bar kinematics, the
Stewart equations): delay-line flip-flop bits with delay_lines=memory (the default) and
=ffs, built in this run, against the issue's baseline (BASELINE) as a ratio, >= 3 wanted;
the memories' bits beside, and the whole RTL's flip-flop and memory bits (yosys proc).

Issue 32's table (--table): every variant of the four-bar kinematics and the delta's inverse
dynamics before (products by literals as multipliers, one divider), after (const_products=
shift-add) and with 4 dividers, and the microcode variant (issue 32 item 3: block RAM
register file and microcode ROM instead of operand multiplexers; its file depth and ROM size
printed), all built and measured in one run: latency, interval, yosys word level (cells,
multipliers, flip-flop bits) and, with --map, synth_ecp5 / synth_ice40 -dsp of the designs
up to MAP_MAX_CELLS word-level cells; --design picks designs by name.

    python -m bench.rtl [--model fourbar --kernel kinematics --multipliers 1,2,4 --pnr --json FILE]
    python -m bench.rtl --goal-only
    python -m bench.rtl --table [--map ecp5,ice40] [--only delta] [--pnr ecp5-25k] [--json FILE]
    python -m bench.rtl --table --map ecp5,ice40 --design "shared, 1 mul" --design microcode
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from mbforge.examples import load
from mbforge.kernels.builders import build_kernel
from mbforge.pipeline import generate


# the pipelined design before the register-minimising schedule, early outputs and trimmed
# product registers (commit e9d2b0f): counted once at the start of that work, the same way
BEFORE = {("fourbar", "kinematics"): "84 cycles, 28296 delay-line bits, 44738 FF bits (yosys proc)",
          ("stewart", "equations"): "30 cycles, 266252 delay-line bits, 669918 FF bits in the kernel module "
                                    "(its reg declarations; the trig operator's besides)"}


# issue 14's baseline, delay-line bits of the pipelined designs (outputs aligned, before the
# register-minimising schedule, BEFORE): the goal is 3x fewer delay-line flip-flop bits
BASELINE = {("fourbar", "kinematics"): 28296, ("stewart", "equations"): 266252}
GOAL_RATIO = 3.0
# the four-bar kinematics, pipelined, before const_products (its products by 2^k multiplied),
# mapped once by yosys 0.23 `synth_ice40 -dsp` (flip-flop
# cells: SB_DFF*; about 2 and 4 minutes here, so quoted; `--ice40` redoes it in the run)
ICE40_MEASURED = {"memory": {"flipflops": 17230, "brams": 34, "luts": 30008},
                  "ffs": {"flipflops": 29461, "brams": 0, "luts": 30046}}


# the four-bar kinematics, shared variant with 1 multiplier, placed and routed on an iCE40 UP5K
# (mbforge.hdl.pnr's flow: IO wrapper included, yosys synth_ice40 -dsp, nextpnr-ice40 --seed 1,
# Fmax the routed clock's achieved frequency); one run, nextpnr about 10 minutes on this
# machine, so quoted here rather than rerun. `python -m bench.rtl --multipliers 1 --pnr` redoes it.
PNR_MEASURED = {
    ("fourbar", "kinematics", "shared", 1): {
        "before": "8,827 LUT4 and 12 DSPs after synth_ice40 (pipelined divider and trig reduction, "
                  "barrel shifters): does not fit the UP5K (8 DSPs)",
        # measured with input_check off (the envelope comparators need about 240 LUTs more)
        "after": {"latency": 132, "interval": 133, "fmax_mhz": 15.1, "latency_us": 8.742, "us_per_result": 8.808,
                  "luts": 3799, "ffs": 1695, "dsps": 8, "logic_cells": "5088/5280", "wrapper_ffs": 192},
    },
}


def hw_program(kernel, options: dict | None = None):
    """The kernel's hardware program as the verilog target builds it (with these options)."""
    import mbforge.backends.rtl.target as V

    seen = {}
    orig = V.render_verilog

    def spy(hp, ctx, options):
        seen["hp"] = hp
        return orig(hp, ctx, options)
    V.render_verilog = spy
    try:
        generate(kernel, "verilog", options=options)
    finally:
        V.render_verilog = orig
    return seen["hp"]


def goal(json_rows: list | None = None, ice40: bool = False) -> int:
    """Delay-line flip-flop bits of the pipelined designs of BASELINE, memory and ffs, against
    the baseline; 1 if a default (memory) design misses GOAL_RATIO. ice40: the four-bar's
    designs through synth_ice40 too (flip-flop cells, block RAMs)."""
    from mbforge.hdl.synth import register_bits, synthesize

    code = 0
    print("\nissue 14: pipelined RTL, delay-line flip-flop bits against the baseline (goal >= "
          f"{GOAL_RATIO:g}x fewer); FF and memory bits of the whole RTL by yosys proc + memory_dff")
    for (model, kernel), base in BASELINE.items():
        k = build_kernel(load(model).equations(), kernel)
        for mode in ("memory", "ffs"):
            with tempfile.TemporaryDirectory() as tmp:
                generate(k, "verilog", options={"delay_lines": mode}).write(tmp)
                rtl = json.loads((Path(tmp) / "rtl.json").read_text())
                rb = register_bits(tmp)
                ice = synthesize(tmp, ice40=True)["ice40"] if ice40 and model == "fourbar" else None
            ff = rtl["delay_line_ff_bits"]
            ratio = base / ff
            ok = ratio >= GOAL_RATIO
            if mode == "memory" and not ok:
                code = 1
            mems = ", ".join(rtl["delay_memories"]) or "none"
            print(f"  {model} {kernel:10s} delay_lines={mode:6s} latency {rtl['latency']:3d}: delay lines "
                  f"{rtl['delay_line_bits']} bits, {ff} in flip-flops ({ratio:.2f}x fewer than {base}: "
                  f"{'meets' if ok else 'misses'} {GOAL_RATIO:g}x), {rtl['delay_line_memory_bits']} in memories "
                  f"(depth x width: {mems}); whole RTL {rb['flipflop_bits']} FF bits, {rb['memory_bits']} memory bits",
                  flush=True)
            q = ICE40_MEASURED[mode] if model == "fourbar" and ice is None else ice
            if q is not None:
                print(f"  {'':18s} synth_ice40 -dsp{'' if ice else ' (measured once before const_products, not in this run)'}: "
                      f"{q['flipflops']} flip-flops, {q['brams']} SB_RAM40_4K, {q['luts']} LUT4", flush=True)
            if json_rows is not None:
                json_rows.append({"goal": f"{model} {kernel}", "delay_lines": mode, "baseline": base, "ratio": ratio,
                                  **{key: rtl[key] for key in ("latency", "delay_line_bits", "delay_line_ff_bits",
                                                               "delay_line_memory_bits", "delay_memories")},
                                  "rtl_ff_bits": rb["flipflop_bits"], "rtl_memory_bits": rb["memory_bits"],
                                  "ice40": ice})
    return code


# issue 32's table: per model and kernel, every variant before (products by literals as
# multipliers, one divider: the RTL before const_products and --dividers), with
# const_products=shift-add (the pipelined variant's default; the shared variant's default,
# auto, multiplies: these rows are why), and the shared variant with 4 dividers besides
MULTIPLY, SHIFT = {"const_products": "multiply"}, {"const_products": "shift-add"}
# (model, kernel, build options): the delta in natural coordinates (its first workspace, the
# model the table was measured on; the default's reduced kernel has its own row below)
TABLE_KERNELS = (("fourbar", "kinematics", {}), ("delta", "inverse-dynamics", {"workspace": "first"}),
                 ("delta", "inverse-dynamics-reduced", {}))
TABLE_DESIGNS = (
    ("pipelined", "before", dict(MULTIPLY, variant="pipelined")),
    ("pipelined", "after", dict(SHIFT, variant="pipelined")),
    ("shared, 1 mul", "before", dict(MULTIPLY, variant="shared", multipliers=1)),
    ("shared, 1 mul", "after", dict(SHIFT, variant="shared", multipliers=1)),
    ("shared, 1 mul", "+4 div", dict(SHIFT, variant="shared", multipliers=1, dividers=4)),
    ("shared, 4 mul", "before", dict(MULTIPLY, variant="shared", multipliers=4)),
    ("shared, 4 mul", "after", dict(SHIFT, variant="shared", multipliers=4)),
    ("shared, 4 mul", "+4 div", dict(SHIFT, variant="shared", multipliers=4, dividers=4)),
)
MAP_MAX_CELLS = 2000
# the microcode variant placed and routed once (mbforge hdl --variant microcode --pnr ecp5-25k
# --pnr-seed 1), quoted beside the table like PNR_TABLE_MEASURED
MICROCODE_MEASURED: dict[tuple[str, str], tuple[str, ...]] = {
    ("fourbar", "kinematics"): (
        "microcode, 1 divider, placed and routed on ECP5 25K (seed 1): 145 cycles latency, interval 146; Fmax "
        "41.7 MHz: 285,342 results/s; logic cells 4858/24288, 8/28 MULT18X18D, 6/56 DP16KD; 3,534 LUT4, 1,068 FF "
        "(wrapper 192); yosys 20 s, nextpnr-ecp5 240 s",),
    ("delta", "inverse-dynamics"): (
        "microcode, 4 dividers, placed and routed on ECP5 25K (seed 1): 287 cycles latency, interval 288; Fmax "
        "31.5 MHz: 109,271 results/s; logic cells 13071/24288, 4/28 MULT18X18D, 5/56 DP16KD; 9,345 LUT4, 1,962 FF "
        "(wrapper 800); yosys 110 s, nextpnr-ecp5 942 s (the shared design, 1 mul, 4 dividers: 224,706 results/s "
        "in 14226 logic cells, PNR_TABLE_MEASURED)",),
}
# the delta's shared design, 1 multiplier, 4 dividers, placed and routed once on an ECP5 25K
# (mbforge hdl --pnr ecp5-25k: IO wrapper, synth_ecp5, nextpnr-ecp5 of the yowasp wheel,
# --seed 1); nextpnr-ecp5 under WebAssembly takes minutes, so quoted beside the table
PNR_TABLE_MEASURED = {
    ("delta", "inverse-dynamics"): {
        "part": "ecp5-25k",
        "text": "shared, 1 mul, +4 div: 152 cycles latency, interval 153; Fmax 34.4 MHz: 224,706 results/s "
                "(issue 32's goal 100,000); logic cells 14226/24288, 4/28 MULT18X18D, 0 DP16KD; 10,294 LUT4, "
                "3,060 FF (wrapper 800); yosys 43 s, nextpnr-ecp5 346 s"},
    ("delta", "inverse-dynamics-reduced"): {
        "part": "ecp5-25k",
        "text": "shared, 1 mul, +4 div: 394 cycles latency, interval 395; Fmax 35.1 MHz: 88,810 results/s "
                "(short of issue 32's 100,000: its 354 products wait for the one multiplier); logic cells "
                "16762/24288, 4/28 MULT18X18D, 0 DP16KD; 14,738 LUT4, 2,753 FF (wrapper 320); yosys 37 s, "
                "nextpnr-ecp5 576 s. Shared, 2 mul, +4 div (not a table row): 234 cycles, interval 235; Fmax "
                "36.9 MHz: 156,936 results/s; logic cells 20146/24288, 8/28 MULT18X18D; yosys 93 s, nextpnr-ecp5 "
                "2,123 s"},
}
TABLE_DESIGNS = (
    ("pipelined", "before", dict(MULTIPLY, variant="pipelined")),
    ("pipelined", "after", {"variant": "pipelined"}),
    ("shared, 1 mul", "before", dict(MULTIPLY, variant="shared", multipliers=1)),
    ("shared, 1 mul", "after", {"variant": "shared", "multipliers": 1}),
    ("shared, 1 mul", "+4 div", {"variant": "shared", "multipliers": 1, "dividers": 4}),
    ("shared, 4 mul", "before", dict(MULTIPLY, variant="shared", multipliers=4)),
    ("shared, 4 mul", "after", {"variant": "shared", "multipliers": 4}),
    ("shared, 4 mul", "+4 div", {"variant": "shared", "multipliers": 4, "dividers": 4}),
    # issue 32 item 3: one unit per class under a microcode ROM, operands from a register
    # file in block RAM (rtl.microcode); against "shared, 1 mul"
    ("microcode", "after", {"variant": "microcode"}),
    ("microcode", "+4 div", {"variant": "microcode", "dividers": 4}),
)


def _mapped(d: Path, family: str) -> dict:
    """yosys synth_<family> of the kernel alone (no IO wrapper, no place and route): cells by
    resource as mbforge.hdl.pnr counts them (FAMILIES), and the seconds it took."""
    from mbforge.hdl.pnr import FAMILIES
    from mbforge.hdl.synth import _cells, _yosys
    from mbforge.manifest import Manifest

    rtl = json.loads((d / "rtl.json").read_text())
    srcs = " ".join(str(d / s) for s in Manifest.load(d).sources)
    if family == "xilinx":  # an estimate: synth_xilinx, no place and route (mbforge.hdl.synth)
        from mbforge.hdl.synth import xilinx_counts
        x = xilinx_counts(srcs, rtl["top"])
        return {"luts": x["luts"], "dsps": x["dsps"], "brams": x["brams_18k"], "ffs": x["flipflops"],
                "seconds": x["seconds"]}
    fam = FAMILIES[family]
    t0 = time.perf_counter()
    _yosys(f"read_verilog -sv {srcs}\nsynth_{family} -top {rtl['top']}{' -dsp' if family == 'ice40' else ''}\n"
           f"tee -q -o {d / 'map.json'} stat -json\n", 3600)
    c = _cells(d / "map.json")
    out = {k: c.get(cell, 0) for k, cell in fam["cells"].items() if k != "carries"}
    out["ffs"] = sum(v for k, v in c.items() if k.startswith(fam["ff_prefix"]))
    return dict(out, seconds=round(time.perf_counter() - t0, 1))


def variant_table(json_rows: list, families: list[str], only: str | None = None, pnr: str | None = None,
                  designs: list[str] | None = None) -> None:
    """Every variant of TABLE_KERNELS before and after, built and measured in this run:
    latency, interval, multiplier operators, dividers; yosys word level (cells, $mul/$macc,
    flip-flop bits); and the families' technology mapping when asked. pnr (a --pnr part of
    mbforge hdl, e.g. ecp5-25k): the shared designs with 4 dividers placed and routed there
    too (mbforge.hdl.pnr; nextpnr-ecp5 takes about ten minutes a design here). designs: only
    the TABLE_DESIGNS of these names (all if None)."""
    from mbforge.hdl.pnr import PNR_DEVICE, place_and_route
    from mbforge.hdl.synth import synthesize

    for model, kernel, options in TABLE_KERNELS:
        if only and model != only:
            continue
        k = build_kernel(load(model, **options).equations(), kernel)
        print(f"\n{model} {kernel}: before (products by literals as multipliers, 1 divider), after "
              f"(const_products=shift-add), +4 div (and --dividers 4); yosys {'/'.join(['word level'] + families)}")
        for name, when, opts in TABLE_DESIGNS:
            if designs and name not in designs:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                d = Path(tmp)
                generate(k, "verilog", options=opts).write(d)
                rtl = json.loads((d / "rtl.json").read_text())
                c = synthesize(d, ice40=False)["coarse"]
                # a technology mapping takes minutes per thousand word-level cells here
                maps = {f: _mapped(d, f) if c["cells"] <= MAP_MAX_CELLS else None for f in families}
                placed = (place_and_route(d, PNR_DEVICE[pnr], seed=1)
                          if pnr and opts.get("variant") == "shared" and opts.get("dividers") == 4 else None)
            row = {"model": model, "kernel": kernel, "design": name, "when": when, "options": opts,
                   "latency": rtl["latency"], "interval": rtl["interval"], "mul_ops": rtl["hw_ops"].get("mul", 0),
                   "dividers": (rtl.get("units") or {}).get("div", rtl["hw_ops"].get("div", 0)),
                   "cells": c["cells"], "yosys_multipliers": c["multipliers"], "ff_bits": c["flipflop_bits"], **maps,
                   **{key: rtl[key] for key in ("register_file_depth", "register_file_copies", "rom_words",
                                                "rom_width") if key in rtl}}
            if placed is not None:
                row["pnr"] = {key: placed.get(key) for key in ("device", "fits", "fmax_mhz", "results_per_s", "luts",
                                                               "ffs", "dsps", "brams", "utilization", "seconds",
                                                               "tried")}
            json_rows.append(row)
            print(_table_line(row, families), flush=True)
        for line in MICROCODE_MEASURED.get((model, kernel), ()) if not designs or "microcode" in designs else ():
            print(f"  measured once (not in this run): {line}")
        m = PNR_TABLE_MEASURED.get((model, kernel))
        if m is not None and not pnr:
            print(f"  placed and routed once (not in this run; --pnr {m['part']} redoes it): {m['text']}")


def _table_line(r: dict, families: list[str]) -> str:
    s = (f"  {r['design']:14s} {r['when']:6s} latency {r['latency']:4d} interval {r['interval']:4d}  "
         f"mul ops {r['mul_ops']:3d} dividers {r['dividers']:2d}  word level: {r['cells']:6d} cells, "
         f"{r['yosys_multipliers']:3d} multipliers, {r['ff_bits']:6d} FF bits")
    if "rom_words" in r:
        s += (f"; register file {r['register_file_depth']} x 32 ({r['register_file_copies']} copies), "
              f"ROM {r['rom_words']} x {r['rom_width']}")
    for f in families:
        m = r[f]
        if m is None:
            s += f"; {f}: not mapped (over {MAP_MAX_CELLS} word-level cells)"
            continue
        s += (f"; {f}: {m['luts']} {'LUT' if f == 'xilinx' else 'LUT4'}, {m['dsps']} DSP, {m['ffs']} FF, {m['brams']} BRAM "
              f"({m['seconds']} s)")
    p = r.get("pnr")
    if p is not None:
        from mbforge.hdl.pnr import DEVICES, FAMILIES, part_name, pnr_failure

        lc = FAMILIES[DEVICES[p["device"] or "up5k"]["family"]]["lc"]
        s += (f"\n{'':22s}placed and routed on {part_name(p['device'])}: Fmax {p['fmax_mhz']:.1f} MHz, "
              f"{p['results_per_s']:,} results/s; logic cells {'/'.join(map(str, p['utilization'][lc]))}, "
              f"{p['dsps']} DSP, {p['brams']} BRAM ({sum(p['seconds'].values()):.0f} s)"
              if p["fits"] else f"\n{'':22s}place and route: {pnr_failure(p)}")
    return s


def _parser() -> argparse.ArgumentParser:
    from mbforge.hdl.pnr import PNR_CHOICES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="fourbar")
    ap.add_argument("--kernel", default="kinematics")
    ap.add_argument("--multipliers", default="1,2,4", help="unit counts of the shared variant")
    ap.add_argument("--pnr", nargs="?", const="ice40", default=None, choices=PNR_CHOICES,
                    help="place and route every design on the first iCE40 it fits (or on this part; minutes "
                    "each); with --table: the shared designs with 4 dividers, e.g. --pnr ecp5-25k (about ten "
                    "minutes each)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--goal-only", action="store_true", help="only issue 14's flip-flop goal (both designs)")
    ap.add_argument("--ice40", action="store_true", help="the goal's four-bar designs through synth_ice40 (minutes)")
    ap.add_argument("--table", action="store_true", help="issue 32's table: every variant of the four-bar "
                    "kinematics and the delta's inverse dynamics, before and after")
    ap.add_argument("--map", default="", help="with --table: comma-separated families to map to (ice40, ecp5; "
                                              "xilinx: a 7-series estimate, synth_xilinx)")
    ap.add_argument("--only", default=None, help="with --table: one model (fourbar or delta)")
    ap.add_argument("--design", action="append", default=None, choices=sorted({d[0] for d in TABLE_DESIGNS}),
                    help="with --table: only the designs of this name (repeatable; default all)")
    return ap


def main(argv=None) -> int:
    from mbforge.backends.rtl.schedule import pipeline

    ap = _parser()
    args = ap.parse_args(argv)
    if args.table:
        rows: list = []
        families = [f for f in args.map.split(",") if f]
        from mbforge.hdl.pnr import FAMILIES
        bad = [f for f in families if f not in FAMILIES and f != "xilinx"]
        if bad:
            ap.error(f"--map {','.join(bad)}: families are {', '.join([*FAMILIES, 'xilinx'])}")
        variant_table(rows, families, args.only, args.pnr, args.design)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
        return 0
    if args.goal_only:
        rows: list = []
        code = goal(rows, args.ice40)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
        return code
    k = build_kernel(load(args.model).equations(), args.kernel)
    hp = hw_program(k)
    before = {o: pipeline(hp, outputs=o, min_registers=False).delay_bits for o in ("aligned", "early")}
    designs = [("pipelined", {"variant": "pipelined", "outputs": "aligned"}),
               ("pipelined", {"variant": "pipelined", "outputs": "early"})]
    designs += [("shared", {"variant": "shared", "multipliers": int(m)}) for m in args.multipliers.split(",")]
    rows = _measure_designs(k, designs, before, args.pnr)
    _print_recorded(args.model, args.kernel, before)
    code = goal(rows, args.ice40)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return code


def _measure_designs(k, designs: list, before: dict, pnr: str | None) -> list[dict]:
    """Each design of kernel k generated, its registers counted (and placed and routed with
    pnr): one row each, printed as it is measured."""
    from mbforge.hdl.pnr import PNR_DEVICE, place_and_route
    from mbforge.hdl.synth import register_bits

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, opts) in enumerate(designs):
            d = Path(tmp) / f"d{i}"
            generate(k, "verilog", options=opts).write(d)
            rtl = json.loads((d / "rtl.json").read_text())
            row = {"design": name, "options": opts, "latency": rtl["latency"], "interval": rtl["interval"],
                   "units": rtl.get("units"), "delay_line_bits": rtl.get("delay_line_bits"),
                   "delay_line_bits_before": before.get(opts.get("outputs")) if name == "pipelined" else None}
            t0 = time.perf_counter()
            rb = register_bits(d)
            row["ff_bits"], row["memory_bits"] = rb["flipflop_bits"], rb["memory_bits"]
            row["delay_line_ff_bits"] = rtl.get("delay_line_ff_bits")
            if pnr:
                rep = place_and_route(d, PNR_DEVICE[pnr], seed=1)
                row["pnr"] = {key: rep.get(key) for key in ("device", "fits", "fmax_mhz", "luts", "ffs", "dsps",
                                                            "brams", "latency_us", "us_per_result", "tried")}
            row["seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _print_recorded(model: str, kernel: str, before: dict) -> None:
    """The delay-line bits before the linear program (this run), and the figures recorded
    before this schedule and of the shared design's place and route (not this run)."""
    print(f"\n{model} {kernel}: delay-line bits of the pipelined schedule before the linear program "
          f"(ASAP/ALAP): aligned {before['aligned']}, early {before['early']} (same run)")
    if (model, kernel) in BEFORE:
        print(f"before this schedule (commit e9d2b0f, measured at its start, not in this run): "
              f"{BEFORE[(model, kernel)]}")
    m = PNR_MEASURED.get((model, kernel, "shared", 1))
    if m is not None:
        a = m["after"]
        print(f"shared, 1 mul, placed and routed once on an iCE40 UP5K (not in this run): {a['latency']} cycles "
              f"latency, interval {a['interval']}; Fmax {a['fmax_mhz']} MHz: {a['latency_us']} us latency, "
              f"{a['us_per_result']} us per result; {a['luts']} LUT4, {a['ffs']} FF (wrapper {a['wrapper_ffs']}), "
              f"{a['dsps']} DSP, logic cells {a['logic_cells']}. Before the iterative units: {m['before']}")


def _line(r: dict) -> str:
    from mbforge.hdl.pnr import part_name

    o = r["options"]
    what = f"pipelined, outputs {o['outputs']}" if r["design"] == "pipelined" else f"shared, {o['multipliers']} mul"
    dl = (f"delay lines {r['delay_line_bits']} bits (ASAP/ALAP schedule: {r['delay_line_bits_before']}), "
          f"{r['delay_line_ff_bits']} of them flip-flops" if r["delay_line_bits"] is not None else "")
    s = (f"{what:28s} latency {r['latency']:4d} cycles, interval {r['interval']:4d}; FF bits {r['ff_bits']:6d}, "
         f"memory bits {r['memory_bits']}; {dl}")
    p = r.get("pnr")
    if p is not None:
        if p["fits"]:
            s += (f"\n{'':28s} {part_name(p['device'])}: {p['luts']} LUT4, {p['ffs']} FF, {p['dsps']} DSP, "
                  f"{p['brams']} BRAM; Fmax {p['fmax_mhz']:.1f} MHz: {p['latency_us']:.2f} us latency, "
                  f"{p['us_per_result']:.3f} us per result")
        else:
            s += f"\n{'':28s} " + "; ".join(f"{part_name(t['device'])}: {t['why']}" for t in p["tried"])
    return s


if __name__ == "__main__":
    sys.exit(main())
