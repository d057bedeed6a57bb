"""`mbforge demo`: the whole chain for the four-bar, end to end.

    model -> atoms -> float32 C (+ the double reference) -> PlatformIO firmware
    -> QEMU netduinoplus2 (STM32F405, Cortex-M4F) -> serial harness -> report

Exit status 0 only if every output of the emulated board agrees with the double
reference within tolerance and bit for bit with the host build of the same float32 C.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .outdir import OutDir


def run_demo(out: Path | OutDir, model_name: str = "fourbar", kernel_name: str = "equations",
             vectors: int = 1000, seed: int = 0, options: dict | None = None) -> tuple[dict, int]:
    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil.harness import run

    from .examples import load_model
    from .kernels.builders import build_kernel
    from .pipeline import generate

    steps: dict[str, float] = {}
    t0 = time.monotonic()

    def step(name: str, t: float) -> float:
        now = time.monotonic()
        steps[name] = round(now - t, 3)
        print(f"[demo] {name}: {steps[name]:.2f} s", flush=True)
        return now

    t = t0
    # each subfolder a real folder inside `out` (a symlinked firmware/ is refused, not followed)
    out = out if isinstance(out, OutDir) else OutDir(out)
    dev, ref, fw = (out.sub(name) for name in ("kernel-float32", "kernel-double", "firmware"))
    dev_dir, ref_dir = dev.path, ref.path
    kernel = build_kernel(load_model(model_name, options=options).equations(), kernel_name)
    dev_plan = generate(kernel, "c-float32")
    dev_plan.write(dev)
    generate(kernel, "c-double").write(ref)
    m = dev_plan.manifest
    print(f"[demo] {m.function}: {m.n_in} inputs, {m.n_out} outputs, {m.ops['total']} operations, "
          f"peak {m.peak_live} live values")
    t = step("generate kernels", t)
    proj = generate_project(dev_dir, fw)
    t = step("generate firmware project", t)
    elf = build(proj, "emulated_f405")
    t = step("pio run -e emulated_f405", t)
    with Emulator(elf) as emu:
        t = step("start QEMU", t)
        report = run(emu.url, dev_dir, ref_dir, vectors=vectors, seed=seed, host_model=True)
        t = step(f"harness ({report.vectors} vectors over the serial socket)", t)
    step("stop QEMU", t)
    steps["total"] = round(time.monotonic() - t0, 3)
    print()
    print(report.table())
    print(f"\ndemo total: {steps['total']:.1f} s")
    result = report.to_json() | {"steps_seconds": steps, "elf": str(elf)}
    return result, 0 if report.passed else 1


def cmd_demo(args) -> int:
    from mbforge.firmware.build import BuildError
    from mbforge.firmware.project import ProjectError
    from mbforge.firmware.qemu import EmulatorError
    from mbforge.hil.harness import HarnessError
    from mbforge.hil.link import LinkError

    from .errors import CLIError
    from .examples import parse_options
    from .outdir import OutDirError, check_file, write_file

    try:  # the outputs, before any work
        check_file(args.json, "--json")
        if args.out is not None:
            OutDir(args.out).check_writable()
    except OutDirError as e:
        raise CLIError(str(e)) from None
    options = parse_options(args.set)
    if args.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="mbforge-demo-")
        out = OutDir(tmp.name)
    else:
        tmp = None
        out = OutDir(args.out)
    try:
        try:
            result, code = run_demo(out, args.model, args.kernel, args.vectors, args.seed, options)
            if args.json:
                write_file(args.json, (json.dumps(result, indent=1, sort_keys=True) + "\n").encode(), "--json")
        except (BuildError, ProjectError, EmulatorError, HarnessError, LinkError, OutDirError) as e:
            raise CLIError(str(e)) from None
        return code
    finally:
        if tmp is not None:
            tmp.cleanup()


def register(sub) -> None:
    from .kernels.builders import BUILDERS
    from .options import VECTORS_MAX, file, folder, seed, vectors

    p = sub.add_parser("demo", help="run the four-bar end to end on the emulated board")
    p.add_argument("--model", default="fourbar", help="a shipped example, a .py file with build() or a .urdf robot (default fourbar)")
    p.add_argument("--kernel", default="equations", choices=sorted(BUILDERS),
                   help="what the kernel computes (default equations)")
    p.add_argument("--vectors", type=vectors, default=1000,
                   help=f"random vectors, 0 to {VECTORS_MAX} (the motion's come on top; default 1000)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the random vectors, >= 0 (default 0)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the model's build() (repeatable)")
    p.add_argument("--out", type=folder, default=None, help="keep the generated files here")
    p.add_argument("--json", type=file, default=None, help="also write the report as JSON")
    p.set_defaults(func=cmd_demo)

