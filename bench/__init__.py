"""Benchmarks against the peers (CasADi, SymPy): python -m bench"""
from __future__ import annotations

import sys
from pathlib import Path


def check_json(ap, path: str | None) -> None:
    """Refuse --json into a folder that does not exist before minutes of work, not after."""
    if path and not Path(path).resolve().parent.is_dir():
        ap.error(f"--json {path}: its folder does not exist")


def run(name: str, main) -> None:
    """sys.exit(main()), and Ctrl-C as one line and exit 130 instead of a traceback."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print(f"bench.{name}: interrupted", file=sys.stderr)
        sys.exit(130)
