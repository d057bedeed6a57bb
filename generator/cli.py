"""The `mbforge` command line: one subcommand per pipeline stage."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mbforge", description="multibody models to real-time code")
    sub = ap.add_subparsers(dest="command", required=True)
    from mbforge.firmware import cli as fw_cli
    from mbforge.hil import cli as hil_cli

    for mod in (fw_cli, hil_cli):
        mod.register(sub)
    args = ap.parse_args(argv)
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main())
