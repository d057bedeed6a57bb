"""`mbforge hil`: compare a device's kernel with the double reference over the serial link.

Exit status: 0 every output within tolerance (and bit-exact with --host-model),
1 the comparison failed, 2 it could not be made (an error message says why).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from mbforge.firmware.qemu import DEFAULT_BOARD, EMULATED_BOARDS, Emulator, EmulatorError, board_of_elf
from mbforge.hil.harness import HarnessError, run
from mbforge.hil.hostlib import HostLibError
from mbforge.hil.link import LinkError
from mbforge.hil.report import junit_xml, render_html
from mbforge.manifest import ManifestError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "hil", help="check a device's kernel against the double reference over serial",
        description=__doc__.splitlines()[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", help="serial port or URL: /dev/ttyACM0, socket://127.0.0.1:PORT")
    where.add_argument("--emulate", metavar="ELF",
                       help="start this firmware in QEMU and talk to it; the machine is the one of the "
                            "board the ELF was built for (emulated_f405: netduinoplus2, "
                            "emulated_an385: mps2-an385)")
    p.add_argument("--board", choices=EMULATED_BOARDS, default=None,
                   help="with --emulate: the board to emulate, checked against the ELF's "
                        "(default: the ELF's; emulated_f405 for an ELF that names none)")
    p.add_argument("--kernel", required=True, help="the device kernel's directory (manifest.json)")
    p.add_argument("--reference", required=True, help="c-double kernel directory of the same model and kernel")
    p.add_argument("--vectors", type=int, default=1000, help="random input vectors (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tol", type=float, default=None,
                   help="tolerance relative to each output group's scale "
                        "(default 1e-5 float, 1e-12 double, the manifest's error_bound for int32)")
    p.add_argument("--json", type=Path, default=None, help="write the report as JSON")
    p.add_argument("--html", type=Path, default=None,
                   help="write a single-file HTML report (figures embedded; mbforge.hil.report)")
    p.add_argument("--junit", type=Path, default=None,
                   help="write JUnit XML for CI: one testcase per output group, status codes, host model")
    p.add_argument("--host-model", action="store_true",
                   help="also require the device outputs to equal a host build of the same C bit for bit")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each reply")
    p.add_argument("--window", type=int, default=None,
                   help="requests in flight (default: 1 on a serial port, up to 8 on a socket)")
    p.add_argument("--baud", type=int, default=115200)
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    if args.board and not args.emulate:
        print("mbforge hil: error: --board goes with --emulate (a --port is already a board)", file=sys.stderr)
        return 2
    try:
        with contextlib.ExitStack() as stack:
            port = args.port
            if args.emulate:
                port = stack.enter_context(Emulator(args.emulate, board=args.board)).url
            report = run(port, args.kernel, args.reference, vectors=args.vectors, seed=args.seed,
                         tol=args.tol, host_model=args.host_model, timeout=args.timeout,
                         window=args.window, baudrate=args.baud)
    except (HarnessError, LinkError, HostLibError, EmulatorError, ManifestError) as e:
        print(f"mbforge hil: error: {e}", file=sys.stderr)
        return 2
    if args.emulate and not report.device.get("board"):  # the ELF's board, as Emulator chose it
        report.device["board"] = args.board or board_of_elf(args.emulate) or DEFAULT_BOARD
    print(report.table())
    result = report.to_json()
    for path, text in ((args.json, lambda: json.dumps(result, indent=1, sort_keys=True) + "\n"),
                       (args.html, lambda: render_html(result)), (args.junit, lambda: junit_xml(result))):
        if path is not None:
            try:
                path.write_text(text())
            except OSError as e:
                print(f"mbforge hil: error: cannot write {path}: {e.strerror}", file=sys.stderr)
                return 2
    return 0 if report.passed else 1


def main(argv: list[str] | None = None) -> int:
    """`python -m mbforge.hil.cli ...`: the same subcommand without the rest of the CLI."""
    ap = argparse.ArgumentParser(prog="mbforge")
    register(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(["hil", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
