"""How far a command has got: a progress bar for long runs (simulate, HIL campaigns): tqdm
on stderr, drawn only when stderr is a terminal and the run has lasted 2 s, so logs, pipes
and CI stay quiet; and `Stages`, the wall time of a command by stage (`generate --verbose`).
Both write to stderr only, never to the files or the stdout a command produces."""
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


def process_age() -> float | None:
    """Seconds since this process started (Linux /proc, 10 ms resolution), or None elsewhere:
    so that a command's time includes the interpreter's start and its imports."""
    import os

    try:
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, after the command name
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return max(0.0, up - start / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


class Stages:
    """Wall time by stage of one command: `mark(name)` closes the stage that ran since the
    previous mark (the first one since `start` seconds ago, e.g. the process' age), and
    `report()` prints one line per stage and the total to stderr."""

    def __init__(self, start: float = 0.0):
        import time

        self._clock = time.perf_counter
        self._t0 = self._clock() - start
        self._last = self._t0
        self.times: list[tuple[str, float]] = []

    def mark(self, name: str) -> None:
        now = self._clock()
        self.times.append((name, now - self._last))
        self._last = now

    def total(self) -> float:
        return self._last - self._t0

    def report(self, command: str, file=None) -> None:
        out = sys.stderr if file is None else file
        width = max(len(n) for n, _ in [*self.times, ("total", 0.0)])
        for name, dt in [*self.times, ("total", self.total())]:
            print(f"mbforge {command}: {name:<{width}} {dt:7.3f} s", file=out)
