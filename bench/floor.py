"""Every shipped kernel in float32 on the Cortex-M4F against its floor (issue 14).

The floor of a kernel: one instruction per arithmetic operation, one load per input and
one store per output. Each example's kernels are generated for c-float32, built into the
firmware and run on the emulated Cortex-M4F (bench.device: QEMU icount) at 16 consistent
states of the kernel's envelope (its own vector source): instructions per call, the
envelope checks and mbforge's sin/cos included, and their ratio to the floor. The kernel
function compiled alone (bench.device.M4F) gives the static columns: its instructions in
the disassembly (failure paths counted, checks in a function apart not), the spill loads
and stores (sp-relative: GCC's own spills and the allocation's m[] alike) and the
literal-pool loads (constants). Peak live is the schedule's most values alive at once;
`regs` the registers the allocation uses.

    python -m bench.floor [--examples fourbar,stewart] [--kernels step] [--json FILE]

The step kernel is generated at STEP_DT with its default integrator and iterations; its
states to run at are its reference run's (the kernel's own vector source, as for the
others).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from mbforge.examples.loader import EXAMPLES, load
from mbforge.kernels.builders import BUILDERS, build_kernel
from mbforge.backends import get_backend
from mbforge.backends.c import DIALECTS
from mbforge.lower.schedule import allocate
from mbforge.pipeline import generate

from . import check_json, run
from .device import device_instructions
from .disassembly import disassembly_counts

STEP_DT = 1e-3  # the step kernel's dt here (the device-simulation figures' dt)
M4F = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-O2", "-ffp-contract=off",
       "-fno-math-errno", "-w", "-c"]


def measure(kernel, tmp: Path, per_call: bool = False) -> dict:
    """The disassembly's counts of the kernel function (static); with `per_call`, also its
    instructions per call on the emulated M4F (bench.device) at 16 consistent states of
    its envelope, the envelope checks and mbforge's sin/cos included."""
    plan = generate(kernel, "c-float32")
    kdir = tmp / "kernel"
    plan.write(kdir)
    m = plan.manifest
    obj = tmp / "k.o"
    subprocess.run(["arm-none-eabi-gcc", *M4F, str(kdir / m.sources[0]), "-o", str(obj)], check=True, cwd=tmp)
    c = disassembly_counts(obj, m.function)
    sched = plan.schedule  # the order the C was printed from
    floor = m.ops["total"] + m.n_in + m.n_out
    d = DIALECTS["c-float32"]
    regs = allocate(sched, d.registers, d.constants, get_backend("c-float32").resolve(m.options).fuse).used
    r = {**c, "ops": m.ops["total"], "n_in": m.n_in, "n_out": m.n_out, "floor": floor,
         "ratio": c["instructions"] / floor, "peak_live": sched.peak_live, "regs": regs}
    if per_call:
        from mbforge.verify import vectors

        X = vectors.to_raw(m, vectors.draw(m, kdir, 16, seed=1))
        r["per_call"] = device_instructions(kdir, tmp, X=X)["instructions_median"]
        r["ratio"] = r["per_call"] / floor
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", default=",".join(sorted(EXAMPLES)))
    ap.add_argument("--kernels", default=",".join(BUILDERS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    unknown = [ex for ex in args.examples.split(",") if ex not in EXAMPLES]
    if unknown:
        ap.error(f"--examples: no example called {', '.join(unknown)}; known: {', '.join(sorted(EXAMPLES))}")
    kernels = args.kernels.split(",")
    unknown = [k for k in kernels if k not in BUILDERS]
    if unknown:
        ap.error(f"--kernels: no kernel called {', '.join(unknown)}; known: {', '.join(BUILDERS)}")
    check_json(ap, args.json)
    print("Every shipped kernel, c-float32 on the Cortex-M4F (arm-none-eabi-gcc -O2): instructions per call "
          "on the emulated M4F (QEMU icount, 16 consistent states; checks and sin/cos included) against the "
          "floor (ops + inputs + outputs); `static`: the kernel function's instructions in the disassembly")
    hdr = (f"{'example':<17} {'kernel':<25} {'ops':>6} {'floor':>6} {'static':>6} {'/call':>6} {'ratio':>6} "
           f"{'spill ld':>8} {'spill st':>8} {'literal':>7} {'peak live':>9} {'regs':>4}")
    print(hdr)
    print("-" * len(hdr))
    report = {}
    for ex in args.examples.split(","):
        eqs = load(ex).equations()
        for kname in kernels:
            try:
                kernel = build_kernel(eqs, kname, **({"dt": STEP_DT} if kname == "step" else {}))
                with tempfile.TemporaryDirectory() as tmp:
                    r = measure(kernel, Path(tmp), per_call=True)
            except Exception as e:  # a kernel the example does not have (or cannot spell in float32)
                print(f"{ex:<17} {kname:<25} n/a: {str(e).splitlines()[0][:70]}")
                continue
            report[f"{ex}/{kname}"] = r
            print(f"{ex:<17} {kname:<25} {r['ops']:>6} {r['floor']:>6} {r['instructions']:>6} {r['per_call']:>6.0f} "
                  f"{r['ratio']:>6.2f} "
                  f"{r['spill_loads']:>8} {r['spill_stores']:>8} {r['literal_loads']:>7} {r['peak_live']:>9} "
                  f"{r['regs']:>4}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    run("floor", main)
