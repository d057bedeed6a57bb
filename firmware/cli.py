"""`mbforge firmware`: generate (and optionally build) the PlatformIO project of a kernel."""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys

from mbforge.firmware import budget as B
from mbforge.firmware.build import BuildError, build
from mbforge.firmware.project import (APPS, ENVIRONMENTS, RX_BUFFER, STACK_BYTES, ProjectError, generate_project,
                                      load_manifest, loop_period_ticks, runtime_payload)
from mbforge.options import baud, folder, number, run_subcommand, whole
from mbforge.targets import BOARDS, Board


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "firmware", help="generate a PlatformIO project that runs a kernel behind the serial link",
        description="Write a PlatformIO project (environments: " + ", ".join(ENVIRONMENTS) + ") "
                    "for the kernel in --kernel (or, with --library, a library for your own project); "
                    "prints the kernel's flash, RAM, stack and cycle budget on every board and refuses "
                    "one that does not fit --env; with --build, also build that environment offline.")
    p.add_argument("--kernel", required=True, help="generated kernel directory (holds manifest.json)")
    p.add_argument("--out", required=True, type=folder, help="project directory to write")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out that holds no project (same-named files replaced)")
    p.add_argument("--baud", type=baud, default=None, help="UART baud rate of the link, 110 to 16000000 "
                   "(default: each board's, "
                   + ", ".join(f"{b.env} {b.baud}" for b in BOARDS.values()) + ")")
    p.add_argument("--build", action="store_true", help="build after generating (pio run)")
    p.add_argument("--library", action="store_true",
                   help="write a PlatformIO library (library.json, include/, src/, ld/) for your own project's "
                        "lib_deps instead of a project: your main() calls the kernel, and mbf_serve() to serve the link")
    p.add_argument("--app", choices=APPS, default="server",
                   help="server: the HIL server `mbforge hil` talks to (default); loop: the kernel from a "
                        "timer interrupt every 1/--rate s, reporting periods, overruns, cycles and jitter "
                        "(`mbforge hil --loop SECONDS`)")
    p.add_argument("--rate", type=number(0, 1e9, "a whole number of Hz > 0"), default=None,
                   help="with --app loop: the loop rate in Hz")
    p.add_argument("--cycles", type=whole(1, 2**32 - 1, "a count from 1 to 4294967295"), default=None,
                   help="measured cycles per call on the --env board (e.g. from `mbforge hil` on it): the "
                        "budget's time per call and highest loop rate use it instead of the op-count estimate")
    p.add_argument("--soft-float", action="store_true",
                   help="allow --build of a float or double kernel for a core without that FPU (software "
                        "floating point, tens of cycles per operation)")
    p.add_argument("--env", default="emulated_f405", choices=ENVIRONMENTS,
                   help="environment to build with --build (nucleo_f446re needs the PlatformIO registry; "
                        "emulated_an385 is a Cortex-M3 without FPU, for c-fixed kernels)")
    p.set_defaults(func=run_command)


def soft_float_note(real: str, env: str) -> str | None:
    """A float or double kernel on a core without that FPU (none, or single precision only
    for double) runs in software floating point (libgcc's, IEEE-correct): say so, with its
    cost, and name the target meant for such cores."""
    board = BOARDS[env]
    if not B.needs_soft_float(real, board):
        return None
    what = "no FPU" if board.fpu is None else f"a single-precision FPU ({board.fpu})"
    return (f"{env} ({board.cpu}) has {what}: this {real} kernel runs in software floating point "
            f"(correct, about {B.op_costs(board, real).get('soft_mul', 0):.0f} instructions per multiply, "
            f"measured); "
            f"c-fixed is the target for this core")


M0_CORES = ("cortex-m0", "cortex-m0plus")  # 32 x 32 -> 32 multiply only, no divider


def target_note(target: str, env: str) -> str | None:
    """c-fixed on a Cortex-M0/M0+ board: name c-fixed-m0 (the same bits, fewer
    instructions there); c-fixed-m0 elsewhere: name c-fixed (not tuned for the core: on the
    Cortex-M3 either is faster on some shipped kernels, targets/op_costs.py)."""
    board = BOARDS[env]
    if target == "c-fixed" and board.cpu in M0_CORES:
        return (f"{env} ({board.cpu}) has no 32 x 32 -> 64 multiply or divider: --target c-fixed-m0 computes "
                f"the same bits in fewer instructions (about half c-fixed's on the delta robot's inverse dynamics)")
    if target == "c-fixed-m0" and board.cpu not in M0_CORES:
        return (f"c-fixed-m0 is meant for a Cortex-M0/M0+; on {env} ({board.cpu}) --target c-fixed computes "
                f"the same bits, faster on some kernels (compare the budgets)")
    return None


def budgets(kernel_dir: str, boards: list[Board], manifest) -> dict[str, B.Budget]:
    """The kernel's budget on each board, compiled once per core and FPU (the cores' compilers
    run side by side: one process each, MBFORGE_JOBS at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    from mbforge.analysis.parallel import jobs

    first_of = {}
    for b in boards:
        first_of.setdefault((b.cpu, b.fpu), b)
    with ThreadPoolExecutor(max_workers=min(jobs(), len(first_of))) as pool:
        done = {key: pool.submit(B.kernel_budget, kernel_dir, b, manifest) for key, b in first_of.items()}
        try:
            by_core = {key: f.result() for key, f in done.items()}  # the first failure, in board order
        except BaseException:  # a core failed, or Ctrl-C: the cores not started yet are not compiled
            pool.shutdown(cancel_futures=True)
            raise
    out = {}
    for b in boards:
        first = by_core[(b.cpu, b.fpu)]
        out[b.env] = dataclasses.replace(first, board=b,
                                         cycles=B.estimate_cycles(manifest, first.body, first.calls, b))
    return out


def check_budget(kernel_dir: str, board: Board, manifest=None) -> B.Budget:
    """The kernel's budget on `board`; ProjectError (one line, the numbers) if it does not fit."""
    m = manifest or load_manifest(kernel_dir)
    b = B.kernel_budget(kernel_dir, board, m)
    why = B.refusal(b, B.runtime_ram(runtime_payload(m), RX_BUFFER, STACK_BYTES))
    if why:
        raise ProjectError(why)
    return b


def check_rate(args: argparse.Namespace) -> int | None:
    """The loop app's rate in whole Hz, checked against every board's 24-bit SysTick."""
    if args.app != "loop":
        if args.rate is not None:
            raise ProjectError("--rate goes with --app loop")
        return None
    if args.library:
        raise ProjectError("--app loop makes a project: it does not go with --library")
    if args.rate is None:
        raise ProjectError("--app loop needs --rate HZ (the loop rate)")
    if not (args.rate > 0 and args.rate == int(args.rate)):
        raise ProjectError(f"--rate must be a whole number of Hz > 0, got {args.rate:g}")
    rate = int(args.rate)
    for b in BOARDS.values():
        period = loop_period_ticks(b, rate)
        if not 64 <= period <= 1 << 24:
            per_s = b.cpu_hz * b.ticks_per_cycle  # SysTick ticks per second of the board's clock
            lo, hi = math.ceil(per_s / (1 << 24)), math.floor(per_s / 64)
            raise ProjectError(f"--rate {rate} Hz: a period of {period} SysTick ticks on {b.env} "
                               f"({b.cpu_hz / 1e6:g} MHz{', emulated' if b.emulated else ''}); "
                               f"the loop app needs {lo} to {hi} Hz there")
    return rate


def run_command(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (ProjectError, BuildError, B.BudgetError) as e:
        print(f"mbforge firmware: error: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.library and args.build:
        raise ProjectError("--library writes a library for your own project: build that project "
                           "(pio run), not the library (drop --build)")
    rate = check_rate(args)
    m = load_manifest(args.kernel)
    note = soft_float_note(m.real, args.env)
    if note and args.build and not args.soft_float:
        raise ProjectError(f"refusing to build: {note}; add --soft-float to build it anyway")
    hint = target_note(m.target, args.env)
    if hint:
        print(f"note: {hint}", file=sys.stderr)
    try:
        table = budgets(args.kernel, list(BOARDS.values()), m)
    except B.BudgetError as e:  # no cross compiler: the budget is a help, not a requirement
        print(f"note: no budgets: {e}", file=sys.stderr)
        table = {}
    if args.cycles and args.env in table:
        table[args.env].cycles, table[args.env].measured = args.cycles, True
    if args.env in table:
        why = B.refusal(table[args.env], B.runtime_ram(runtime_payload(m), RX_BUFFER, STACK_BYTES))
        if why:
            raise ProjectError(why)
    if rate and args.env in table and rate > table[args.env].max_rate_hz:
        print(f"note: {rate} Hz is above the estimated highest loop rate on {args.env} "
              f"({table[args.env].max_rate_hz:,.0f} Hz): expect overruns", file=sys.stderr)
    out = generate_project(args.kernel, args.out, baud=args.baud, library=args.library, app=args.app, rate=rate,
                           force=args.force)
    print(f"{'library' if args.library else 'project'} written to {out}")
    for env, b in table.items():
        print(f"budget {b.line()}")
    if args.build:
        if note:
            print(f"note: {note}", file=sys.stderr)
        elf = build(out, args.env)
        print(f"built {elf}")
        print(f"budget {B.elf_budget(elf, out, args.env)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m mbforge.firmware.cli ...`: the same subcommand without the rest of the CLI."""
    return run_subcommand(register, "firmware", argv)


if __name__ == "__main__":
    sys.exit(main())
