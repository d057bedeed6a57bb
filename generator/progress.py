"""A progress bar for long runs (simulate, HIL campaigns): tqdm on stderr, drawn only when
stderr is a terminal and the run has lasted 2 s, so logs, pipes and CI stay quiet."""
from __future__ import annotations

import sys
from contextlib import contextmanager


@contextmanager
def progress_bar(total: int, desc: str, unit: str):
    """Yields update(done, total=None): moves the bar to `done` of `total`."""
    from tqdm import tqdm

    quiet = not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty())
    bar = tqdm(total=total, desc=desc, unit=unit, disable=quiet, delay=2.0, leave=False, file=sys.stderr)
    try:
        def update(done: int, _total: int | None = None) -> None:
            bar.update(done - bar.n)
        yield update
    finally:
        bar.close()
