"""Device benchmark (issue 5): instructions per call on the emulated Cortex-M4F (QEMU
netduinoplus2 under -icount, SysTick turned into instructions by the firmware's CALIB
loop) for single-precision kernels, mbforge's against CasADi's generated C built with
casadi_real=float and the same flags and firmware; plus flash (.text of the kernel) and
RAM (its stack frame from -fstack-usage, and static data); spill loads and stores per call
from the disassembly (sp-relative; straight-line code runs each once per call) and the ratio
of instructions per call to the floor (mbforge's operations + one load per input + one
store per output, the same quantities for both engines). bench.floor does the same for
every shipped kernel.

    python -m bench.device [--models fourbar,stewart] [--json FILE]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from mbforge.firmware.build import build
from mbforge.firmware.project import generate_project
from mbforge.firmware.qemu import Emulator
from mbforge.hil.harness import calibrate
from mbforge.hil.link import Link
from mbforge.manifest import Group, Manifest

from . import check_json, check_models, generic, refuse_status, run
from .backends import BACKENDS
from .cbuild import casadi_kernel, mbforge_kernel
from .disassembly import disassembly_counts

M4F = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-O2", "-ffp-contract=off",
       "-fno-math-errno", "-fstack-usage", "-w", "-c"]


def _kernel_dir(d: Path, name: str, source: str, n_in: int, n_out: int) -> Path:
    """A kernel directory (manifest + one C file) around a `bench_kernel` function."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "bench.c").write_text(source)
    (d / "bench.h").write_text("int bench_kernel(const float *in, float *out);\n")
    digest = hashlib.sha256(source.encode()).hexdigest()
    m = Manifest(model=name, prefix="bench", kernel="joint", function="bench_kernel", target="c-float32",
                 real="float", digest=digest, model_digest=digest, sources=["bench.c"], headers=["bench.h"],
                 inputs=[Group("x", [n_in], 0, n_in, range=[[-1.0, 1.0]] * n_in)],
                 outputs=[Group("y", [n_out], 0, n_out)])
    (d / "manifest.json").write_text(m.to_json())
    return d


def sizes(kdir: Path, tmp: Path) -> dict:
    """Flash and RAM of the kernel itself, compiled as the firmware compiles it."""
    obj = tmp / "k.o"
    subprocess.run(["arm-none-eabi-gcc", *M4F, str(kdir / "bench.c"), "-o", str(obj)], check=True, cwd=tmp)
    out = subprocess.run(["arm-none-eabi-size", "-A", str(obj)], capture_output=True, text=True, check=True).stdout
    sec = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\.\S+)\s+(\d+)", out, re.M)}
    text = sum(v for k, v in sec.items() if k.startswith(".text") or k.startswith(".rodata"))
    data = sum(v for k, v in sec.items() if k.startswith(".data") or k.startswith(".bss"))
    stack = 0
    for su in tmp.glob("*.su"):
        for line in su.read_text().splitlines():
            stack = max(stack, int(line.split()[-2]))
    c = disassembly_counts(obj)
    return {"flash": text, "static_ram": data, "stack": stack, "spill_loads": c["spill_loads"],
            "spill_stores": c["spill_stores"]}


def device_instructions(kdir: Path, tmp: Path, n: int = 32, X=None) -> dict:
    """Instructions per call of the kernel in kdir on the emulated M4F (QEMU icount,
    calibrated), median and largest over the rows of X (default: n uniform in [-1, 1],
    the benchmark kernels' ranges)."""
    elf = build(generate_project(kdir, tmp / "fw"), "emulated_f405")
    m = Manifest.load(kdir)
    if X is None:
        X = np.random.default_rng(0).uniform(-1, 1, (n, m.n_in)).astype(np.float32)
    with Emulator(elf) as emu, Link(emu.url, timeout=20.0) as link:
        link.hello()
        tpi = calibrate(link)
        batch = link.eval_many(X)
    if np.any(batch.status != 0):  # an early return's count is no figure
        codes = sorted({int(c) for c in batch.status if c})
        refuse_status(m.model, f"{codes} on {int((batch.status != 0).sum())} of {len(X)} ")
    work = np.rint(batch.work.astype(np.float64) / tpi)
    return {"instructions_median": float(np.median(work)), "instructions_max": float(work.max())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="fourbar,slidercrank,stewart")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    check_models(ap, args.models)
    check_json(ap, args.json)
    report = {}
    hdr = (f"{'model':<12} {'engine':<8} {'instr/call':>11} {'flash [B]':>10} {'stack [B]':>10} "
           f"{'static':>7} {'spill ld':>8} {'spill st':>8} {'x floor':>7}   {'instr ratio':>11}")
    print("float32 joint function on the emulated Cortex-M4F (QEMU netduinoplus2, -icount)")
    print(hdr)
    print("-" * len(hdr))
    for model in args.models.split(","):
        rows = {}
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            mb = BACKENDS["mbforge"]().joint(getattr(generic, model), target="c-float32")
            mk = mbforge_kernel(mb.extra["plan"], real="float")
            floor = mb.ops + mk.n_in + mk.n_out
            ca = casadi_kernel(BACKENDS["casadi"]().joint(getattr(generic, model)), real="float")
            for engine, k in (("mbforge", mk), ("casadi", ca)):
                kdir = _kernel_dir(tmp / engine / "kernel", f"{model}_{engine}", k.source, k.n_in, k.n_out)
                (tmp / engine / "obj").mkdir()
                rows[engine] = sizes(kdir, tmp / engine / "obj") | device_instructions(kdir, tmp / engine)
        for e, r in rows.items():
            ratio = "" if e == "mbforge" else f"{rows['mbforge']['instructions_median'] / r['instructions_median']:>11.3f}"
            r["floor"] = floor
            print(f"{model if e == 'mbforge' else '':<12} {e:<8} {r['instructions_median']:>11.0f} {r['flash']:>10} "
                  f"{r['stack']:>10} {r['static_ram']:>7} {r['spill_loads']:>8} {r['spill_stores']:>8} "
                  f"{r['instructions_median'] / floor:>7.2f}   {ratio}")
        print(f"{'':<12} floor {floor} = {mb.ops} operations + {mk.n_in} inputs + {mk.n_out} outputs")
        report[model] = rows
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    run("device", main)
