"""Independent pieces of a box-wise analysis on the machine's cores.

The boxes of a domain are analysed independently, but not alone: a pass over a chunk of
boxes keeps the error-form terms that matter most over the whole chunk, so how boxes are
grouped changes the (sound) bounds a little. The pieces therefore depend on the number of
boxes alone, never on the core count: every machine groups them alike and generates the
same bytes, and a machine with one core runs the same pieces one after the other.

The pieces run in forked children (POSIX fork: they inherit the tape and everything
analysed so far, nothing is pickled on the way in); only arrays come back.
MBFORGE_JOBS=1 keeps everything in the process.
"""
from __future__ import annotations

import os
import signal

from ..errors import CLIError

PIECES = 2  # a pass of this many boxes or more is cut in PIECES
MIN_BOXES = 64  # ... when each piece gets at least this many (a pass has a fixed cost)

_JOB = None
_CHILD = False  # pieces inside a piece run in that child, one after the other


def pieces(n: int) -> list[slice]:
    """Contiguous slices of range(n): PIECES of them when each gets MIN_BOXES, else one."""
    k = PIECES if n >= PIECES * MIN_BOXES else 1
    edges = [n * i // k for i in range(k + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:])]


def jobs() -> int:
    """Processes to use: $MBFORGE_JOBS (a whole number >= 1), else the cores this process may run on."""
    env = os.environ.get("MBFORGE_JOBS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise CLIError(f"MBFORGE_JOBS: expected a whole number of processes, 1 or more; got {env!r}")
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        return os.cpu_count() or 1


def _child_start(parent: int):
    """A piece's process ends with its parent, however that ends (Linux: the parent's
    death signals it), and leaves stop signals to the parent, whose pool ends it."""
    import ctypes

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover (not Linux)
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _call(i):
    global _CHILD
    _CHILD = True
    return _JOB(i)


def run(fn, n: int) -> list:
    """[fn(0), ..., fn(n - 1)], in forked children when there is more than one piece
    and more than one core; fn's results must pickle."""
    global _JOB
    import multiprocessing  # only where pieces run

    workers = min(n, jobs())
    if workers < 2 or _CHILD or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(i) for i in range(n)]
    _JOB = fn
    try:
        with multiprocessing.get_context("fork").Pool(workers, _child_start, (os.getpid(),)) as pool:
            return pool.map(_call, range(n), chunksize=1)
    finally:
        _JOB = None
_CHILD = False  # pieces inside a piece run in that child, one after the other
