"""`mbforge firmware`: generate (and optionally build) the PlatformIO project of a kernel."""
from __future__ import annotations

import argparse
import sys

from mbforge.firmware.build import BuildError, build
from mbforge.firmware.project import ENVIRONMENTS, ProjectError, generate_project, load_manifest
from mbforge.targets import BOARDS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "firmware", help="generate a PlatformIO project that runs a kernel behind the serial link",
        description="Write a PlatformIO project (environments: " + ", ".join(ENVIRONMENTS) + ") "
                    "for the kernel in --kernel; with --build, also build one environment offline.")
    p.add_argument("--kernel", required=True, help="generated kernel directory (holds manifest.json)")
    p.add_argument("--out", required=True, help="project directory to write")
    p.add_argument("--baud", type=int, default=None, help="UART baud rate of the link (default: each board's, "
                   + ", ".join(f"{b.env} {b.baud}" for b in BOARDS.values()) + ")")
    p.add_argument("--build", action="store_true", help="build after generating (pio run)")
    p.add_argument("--env", default="emulated_f405", choices=ENVIRONMENTS,
                   help="environment to build with --build (nucleo_f446re needs the PlatformIO registry; "
                        "emulated_an385 is a Cortex-M3 without FPU, for c-fixed kernels)")
    p.set_defaults(func=run_command)


def soft_float_note(real: str, env: str) -> str | None:
    """A float or double kernel on a core without an FPU runs, in software floating point
    (libgcc's, IEEE-correct): say so, and name the target meant for such cores."""
    board = BOARDS[env]
    if board.fpu is None and real in ("float", "double"):
        return (f"note: {env} ({board.cpu}) has no FPU: this {real} kernel runs in software floating "
                f"point (correct, but many instructions per operation); c-fixed is the target for this core")
    return None


def run_command(args: argparse.Namespace) -> int:
    try:
        out = generate_project(args.kernel, args.out, baud=args.baud)
        print(f"project written to {out}")
        if args.build:
            note = soft_float_note(load_manifest(args.kernel).real, args.env)
            if note:
                print(note, file=sys.stderr)
            elf = build(out, args.env)
            print(f"built {elf}")
    except (ProjectError, BuildError) as e:
        print(f"mbforge firmware: error: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m mbforge.firmware.cli ...`: the same subcommand without the rest of the CLI."""
    ap = argparse.ArgumentParser(prog="mbforge")
    register(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(["firmware", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
