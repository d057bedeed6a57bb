"""Benchmarks against the peers (CasADi, SymPy): python -m bench"""
from __future__ import annotations

import sys
from pathlib import Path


class BenchInputError(RuntimeError):
    """A kernel returned a nonzero status on the bench's inputs: its figures would be an
    early return's (inputs outside the kernel's envelope)."""


def refuse_status(what: str, detail: str = "") -> None:
    """BenchInputError for the kernel `what` (its engine or model)."""
    raise BenchInputError(f"{what}: the kernel returned a nonzero status {detail}on the bench's inputs "
                          f"(outside its envelope?): its figures would time an early return")


def check_models(ap, text: str) -> list[str]:
    """The --models list; a name that is not a bench model is refused up front (one line)."""
    from .generic import MODELS

    models = [m for m in text.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        ap.error(f"--models: no model called {', '.join(unknown) or '(empty)'}; known: {', '.join(MODELS)}")
    return models


def check_json(ap, path: str | None) -> None:
    """Refuse --json into a folder that does not exist before minutes of work, not after."""
    if path and not Path(path).resolve().parent.is_dir():
        ap.error(f"--json {path}: its folder does not exist")


def run(name: str, main) -> None:
    """sys.exit(main()); Ctrl-C (exit 130) and a refused figure (BenchInputError, exit 1)
    as one line instead of a traceback."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print(f"bench.{name}: interrupted", file=sys.stderr)
        sys.exit(130)
    except BenchInputError as e:
        print(f"bench.{name}: {e}", file=sys.stderr)
        sys.exit(1)
