"""`mbforge hil`: compare a device's kernel with the double reference over the serial link.

Exit status: 0 every output within tolerance (and bit-exact with --host-model),
1 the comparison failed, 2 it could not be made (an error message says why),
128 + the signal's number when stopped by SIGINT (130), SIGTERM (143) or SIGHUP (129):
QEMU is ended and every answer so far is kept in the run database (--resume RUN).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

from mbforge.firmware.qemu import DEFAULT_BOARD, EMULATED_BOARDS, Emulator, EmulatorError, board_of_elf
from mbforge.hil.harness import HarnessError, run
from mbforge.hil.link import LinkError
from mbforge.hil.report import junit_xml, render_html
from mbforge.hil.rundb import RunDB, RunDBError
from mbforge.targets import BOARDS
from mbforge.manifest import MANIFEST_NAME, ManifestError
from mbforge.options import VECTORS_MAX, baud, file, number, run_subcommand, seed, vectors, whole
from mbforge.outdir import OutDirError, check_file, write_file
from mbforge.verify.hostlib import HostLibError


WINDOW_MAX = 64  # frames in flight: a device's receive ring holds a few
BATCH_MAX = 65535  # the HELLO's max batch is a u16
LOOP_MAX = 1e6  # seconds of loop reports (11 days)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "hil", help="check a device's kernel against the double reference over serial",
        description=__doc__.splitlines()[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", help="serial port or URL: /dev/ttyACM0, socket://127.0.0.1:PORT")
    where.add_argument("--emulate", metavar="ELF",
                       help="start this firmware in QEMU and talk to it; the machine is the one of the "
                            "board the ELF was built for (" + ", ".join(
                                f"{e}: {BOARDS[e].qemu_machine}" for e in EMULATED_BOARDS) + ")")
    p.add_argument("--board", choices=EMULATED_BOARDS, default=None,
                   help="with --emulate: the board to emulate, checked against the ELF's "
                        "(default: the ELF's; emulated_f405 for an ELF that names none)")
    p.add_argument("--kernel", help="the device kernel's directory (manifest.json)")
    p.add_argument("--reference", help="c-double kernel directory of the same model and kernel")
    p.add_argument("--vectors", type=vectors, default=1000,
                   help=f"random input vectors, 0 to {VECTORS_MAX} (default 1000)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the random vectors, >= 0 (default 0)")
    p.add_argument("--tol", type=number(0, math.inf, "a positive number"), default=None,
                   help="tolerance relative to each output group's scale "
                        "(default 1e-5 float, 1e-12 double, the manifest's error_bound for int32)")
    p.add_argument("--json", type=file, default=None, help="write the report as JSON")
    p.add_argument("--html", type=file, default=None,
                   help="write a single-file HTML report (figures embedded; mbforge.hil.report)")
    p.add_argument("--junit", type=file, default=None,
                   help="write JUnit XML for CI: one testcase per output group, status codes, host model")
    p.add_argument("--host-model", action="store_true",
                   help="also require the device outputs to equal a host build of the same C bit for bit")
    p.add_argument("--timeout", type=number(0.1, 3600, "a number of seconds from 0.1 to 3600", closed=True),
                   default=5.0, help="seconds a request may stay unanswered, its resends included, 0.1 to 3600 "
                                     "(default 5)")
    p.add_argument("--window", type=whole(1, WINDOW_MAX), default=None,
                   help=f"requests in flight, 1 to {WINDOW_MAX} (default: 1 on a serial port, up to 8 on a socket)")
    p.add_argument("--baud", type=baud, default=None,
                   help="serial baud rate, 110 to 16000000 (default: the --board's record, else 115200; QEMU's "
                        "socket ignores it)")
    p.add_argument("--batch", type=whole(1, BATCH_MAX), default=None,
                   help=f"vectors per EVAL frame, 1 to {BATCH_MAX} (default and at most: the device's maximum)")
    p.add_argument("--run", type=file, default=None,
                   help="run database to keep every answer in as it arrives (default: beside --json, "
                        "else ./KERNEL-TIME.hil.sqlite)")
    p.add_argument("--loop", type=number(0, LOOP_MAX, f"a number of seconds > 0, at most {LOOP_MAX:g}"),
                   metavar="SECONDS", default=None,
                   help="the device runs the loop app (mbforge firmware --app loop): print its window reports "
                        "for SECONDS (exit 0: no overrun, 1: overruns; --kernel optional, checks the digest)")
    p.add_argument("--resume", type=file, metavar="RUN", default=None,
                   help="continue the run kept in this database (its kernel, reference and options)")
    p.set_defaults(func=run_command)


class Stopped(BaseException):
    """A stop signal arrived (BaseException: no `except Exception` swallows it)."""

    def __init__(self, signum: int):
        self.signum = signum


def _stop(signum, _frame):
    # further stop signals would interrupt the clean-up (QEMU's end): ignore them from now
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    raise Stopped(signum)


def _default_run(args) -> Path:
    if args.json:
        return args.json.with_name(args.json.name.removesuffix(".json") + ".hil.sqlite")
    stem = f"{Path(args.kernel).resolve().name}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, k = Path(f"{stem}.hil.sqlite"), 1
    while path.exists():  # two runs in one second
        k += 1
        path = Path(f"{stem}-{k}.hil.sqlite")
    return path


def _bad_socket_url(url: str | None) -> str | None:
    """What is wrong with a socket://HOST:PORT URL (pyserial's own message for a bad port
    names its logging levels), or None."""
    if not url or not url.startswith("socket://"):
        return None
    host, _, port = url[len("socket://"):].partition("?")[0].rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return "expected socket://HOST:PORT with PORT from 1 to 65535"
    return None


def _loop(args: argparse.Namespace) -> int:
    from mbforge.hil.loop import loop_command

    try:
        with contextlib.ExitStack() as stack:
            port = args.port
            if args.emulate:
                port = stack.enter_context(Emulator(args.emulate, board=args.board)).url
            return loop_command(port, args.loop, args.timeout, args.kernel)
    except (LinkError, EmulatorError, ManifestError) as e:
        print(f"mbforge hil: error: {e}", file=sys.stderr)
        return 2


def run_command(args: argparse.Namespace) -> int:
    if args.board and not args.emulate:
        print("mbforge hil: error: --board goes with --emulate (a --port is already a board)", file=sys.stderr)
        return 2
    if args.loop is not None:
        return _loop(args)
    if args.resume is None and not (args.kernel and args.reference):
        print("mbforge hil: error: --kernel and --reference are required (unless --resume RUN)", file=sys.stderr)
        return 2
    bad_port = _bad_socket_url(args.port)
    if bad_port:
        print(f"mbforge hil: error: --port {args.port}: {bad_port}", file=sys.stderr)
        return 2
    run_db = None if args.resume else (args.run or _default_run(args))
    try:  # every report writable and none of them a file this run reads or keeps
        for option in REPORTS:
            check_file(getattr(args, option), f"--{option}")
        _check_outputs_apart(args, run_db)
    except OutDirError as e:
        print(f"mbforge hil: error: {e}", file=sys.stderr)
        return 2
    report = _run_stoppable(args, run_db)
    if isinstance(report, int):
        return report
    if args.emulate and not report.device.get("board"):  # the ELF's board, as Emulator chose it
        report.device["board"] = args.board or board_of_elf(args.emulate) or DEFAULT_BOARD
    print(report.table())
    print(f"run kept in {report.run.get('path')}")
    return _write_reports(args, report)


def _run_stoppable(args: argparse.Namespace, run_db):
    """The run's report, or the exit status when a signal or an error ended it (said on stderr)."""
    where = args.resume or run_db
    ours = args.resume is not None or not Path(where).exists()  # else the error is that it exists
    handlers = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with contextlib.ExitStack() as stack:
            port, emu = args.port, None
            if args.emulate:
                emu = stack.enter_context(Emulator(args.emulate, board=args.board))
                port = emu.url
            try:
                return run(port, args.kernel, args.reference, vectors=args.vectors, seed=args.seed,
                           tol=args.tol, host_model=args.host_model, timeout=args.timeout,
                           window=args.window, batch=args.batch,
                           baudrate=args.baud or (BOARDS[args.board].baud if args.board else 115200),
                           run_db=run_db, resume=args.resume)
            except (HarnessError, LinkError) as e:  # a dead emulator says why, in the same line
                dead = emu.exit_note() if emu is not None else ""
                if dead:
                    raise HarnessError(f"{e} ({dead})") from None
                raise
    except Stopped as e:
        try:  # after SIGHUP the terminal may be gone
            again = f"; continue with --resume {where}" if Path(where).is_file() else ""
            print(f"mbforge hil: stopped by {signal.Signals(e.signum).name}: {_kept(where)}{again}",
                  file=sys.stderr)
        except OSError:
            pass
        return 128 + e.signum
    except (HarnessError, LinkError, HostLibError, EmulatorError, ManifestError) as e:
        kept = f" ({_kept(where)}; continue with --resume {where})" if ours and _kept(where, count=True) else ""
        print(f"mbforge hil: error: {e}{kept}", file=sys.stderr)
        return 2
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def _write_reports(args: argparse.Namespace, report) -> int:
    """Write the asked-for report files; the exit status of the run."""
    result = report.to_json()
    texts = {"json": lambda: json.dumps(result, indent=1, sort_keys=True) + "\n",
             "html": lambda: render_html(result), "junit": lambda: junit_xml(result)}
    for option in REPORTS:
        if getattr(args, option) is not None:
            try:
                write_file(getattr(args, option), texts[option]().encode(), f"--{option}")
            except OutDirError as e:
                print(f"mbforge hil: error: {e}", file=sys.stderr)
                return 2
    return 0 if report.passed else 1


REPORTS = ("json", "html", "junit")


def _check_outputs_apart(args: argparse.Namespace, run_db: Path | None) -> None:
    """OutDirError when a report would overwrite another report or a file the run reads or
    keeps (the run database, the ELF, a kernel's manifest or files): refused before the run,
    as after it the file is lost. Paths are compared resolved (a symlink names its target)."""
    def real(p) -> str:
        return os.path.realpath(p)

    inputs = {real(p): what for p, what in ((run_db, "--run"), (args.resume, "--resume"),
                                             (args.emulate, "--emulate")) if p is not None}
    for opt in ("kernel", "reference"):
        folder = getattr(args, opt)
        if folder is not None:  # the manifest and every file beside it
            inputs[real(Path(folder) / MANIFEST_NAME)] = f"--{opt}"
            if Path(folder).is_dir():
                inputs.update({real(f): f"--{opt}" for f in Path(folder).iterdir()})
    for db in [p for p, what in inputs.items() if what in ("--run", "--resume")]:
        inputs.update({f"{db}-wal": "--run", f"{db}-shm": "--run"})  # SQLite's journal files
    for option in REPORTS:
        path = getattr(args, option)
        if path is None:
            continue
        where = real(path)
        if where in inputs:
            raise OutDirError(f"--{option} {path} names a file of {inputs[where]}: the report would overwrite it; "
                              "name another file")
        inputs[where] = f"--{option}"


def _kept(path, count: bool = False):
    """How many answers the run database at `path` holds (never raises)."""
    try:
        if path is None or not Path(path).is_file():
            return 0 if count else "no answers kept"
        db = RunDB.open(path)
        try:
            k, n = db.count(), db.get("n")
        finally:
            db.close()
    except (RunDBError, OSError):
        return 0 if count else "no answers kept"
    return k if count else f"{k} of {n} vectors kept in {path}"


def main(argv: list[str] | None = None) -> int:
    """`python -m mbforge.hil.cli ...`: the same subcommand without the rest of the CLI."""
    return run_subcommand(register, "hil", argv)


if __name__ == "__main__":
    sys.exit(main())
