"""What the command line accepts, checked before any work: numbers and paths as argparse
`type=` functions, and a parser whose every mistake is one line.

Every numeric option of every command takes its type from here (the backends' unit counts
excepted: they are Options fields with their own bounds, mbforge.backends), so "a finite
number in a stated range, refused in one line naming the option" is defined once. A type
function words its refusal after the option's name: `OneLineParser.error` prints
`mbforge CMD: error: --vectors must be a whole number from 0 to 1000000, got 1e12`,
without argparse's usage block (the help is `mbforge CMD --help`). run_subcommand runs one
command's module on its own (`python -m mbforge.hil.cli`, `python -m mbforge.firmware.cli`).
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser, its errors on one line; subparsers are made of the same class."""

    def error(self, message: str):
        m = re.fullmatch(r"argument ([^:]+?): (must .*)", message, re.S)
        if m:  # "argument -o/--out: must be ..." -> "--out must be ..."
            message = f"{m.group(1).split('/')[-1]} {m.group(2)}"
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(parser: argparse.ArgumentParser, argv) -> argparse.Namespace | int:
    """parser.parse_args(argv), or the exit status of a refusal (2: the line is printed) for
    a caller that returns a status instead of ending the process."""
    try:
        return parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2


def run_subcommand(register, command: str, argv: list[str] | None) -> int:
    """`python -m mbforge.<command>.cli ...`: one subcommand without the rest of the CLI
    (`register`: its module's function that adds it to a subparsers object; argv: the
    subcommand's arguments, sys.argv's by default); the exit status."""
    ap = OneLineParser(prog="mbforge")
    register(ap.add_subparsers(dest="command", required=True))
    args = parse_args(ap, [command, *(sys.argv[1:] if argv is None else argv)])
    return args if isinstance(args, int) else args.func(args)


def whole(lo: int, hi: int | None = None, what: str | None = None):
    """A whole number from lo to hi (no upper bound: hi None)."""
    what = what or (f"a whole number from {lo} to {hi}" if hi is not None else f"a whole number >= {lo}")

    def parse(text: str) -> int:
        try:
            v = int(text, 10)
        except (TypeError, ValueError):
            v = None
        if v is None or v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return v
    return parse


def number(lo: float, hi: float, what: str, *, closed: bool = False):
    """A finite number above lo (from lo with `closed`) and at most hi."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except (TypeError, ValueError):
            v = math.nan
        if not (math.isfinite(v) and (v >= lo if closed else v > lo) and v <= hi):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return v
    return parse


def folder(text: str) -> Path:
    """An output folder's name: not empty (an unset shell variable must not mean '.')."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, got an empty name")
    return Path(text)


def file(text: str) -> Path:
    """An output file's name: not empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a file, got an empty name")
    return Path(text)


# the options several commands share, with one range each
VECTORS_MAX = 1_000_000
vectors = whole(0, VECTORS_MAX)
seed = whole(0)  # numpy takes any size
# a UART's rate: what a 32-bit baud register and pyserial take, within what a board's
# clock divides to (110 baud, the oldest standard rate, up to 16 Mbit/s)
baud = whole(110, 16_000_000)
