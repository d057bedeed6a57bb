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
    death signals it), and leaves stop signals to the parent, which ends it."""
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


def run(fn, n: int) -> list:
    """[fn(0), ..., fn(n - 1)], each in a forked child when there is more than one piece
    and more than one core (at most jobs() at once); fn's results must pickle. A piece
    that raises raises here; a piece whose process ends without a result (killed: the
    system's out-of-memory killer sends SIGKILL) is reported in one line, where a pool
    of workers would wait for it forever; stopping the parent stops the pieces."""
    global _CHILD
    workers = min(n, jobs())
    if workers < 2 or _CHILD or not hasattr(os, "fork"):
        return [fn(i) for i in range(n)]
    import pickle
    import selectors

    out: list = [None] * n
    todo = list(range(n))
    running: dict = {}  # pid -> (piece, read end, chunks read)
    sel = selectors.DefaultSelector()
    parent = os.getpid()
    try:
        while todo or running:
            while todo and len(running) < workers:
                i = todo.pop(0)
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:  # the piece: its result (or its exception) down the pipe, then _exit
                    code = 1
                    try:
                        os.close(r)
                        _child_start(parent)
                        _CHILD = True
                        try:
                            payload = pickle.dumps((True, fn(i)), pickle.HIGHEST_PROTOCOL)
                        except BaseException as e:  # noqa: BLE001 (handed to the parent)
                            try:
                                payload = pickle.dumps((False, e), pickle.HIGHEST_PROTOCOL)
                            except Exception:  # an exception that does not pickle: its text
                                payload = pickle.dumps((False, RuntimeError(f"{type(e).__name__}: {e}")))
                        with os.fdopen(w, "wb") as f:
                            f.write(payload)
                        code = 0
                    finally:
                        os._exit(code)
                os.close(w)
                running[pid] = (i, r, [])
                sel.register(r, selectors.EVENT_READ, pid)
            for key, _ in sel.select():
                pid = key.data
                i, r, chunks = running[pid]
                data = os.read(r, 1 << 20)
                if data:
                    chunks.append(data)
                    continue
                sel.unregister(r)
                os.close(r)
                del running[pid]
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                if not chunks or code != 0:
                    raise CLIError(f"analysis: piece {i + 1} of {n} ended without a result ({_ended(code)}); "
                                   "MBFORGE_JOBS=1 runs the pieces one after the other, "
                                   + ("with less memory" if code == -signal.SIGKILL else "in this process"))
                ok, value = pickle.loads(b"".join(chunks))
                if not ok:
                    raise value
                out[i] = value
    finally:
        for pid, (_, r, _) in running.items():  # stopped or failed: no piece outlives the parent
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except OSError:
                pass
            os.close(r)
        sel.close()
    return out


def _ended(code: int) -> str:
    """How a piece's process ended, from os.waitstatus_to_exitcode (-N: signal N)."""
    if code >= 0:
        return f"exit status {code}"
    name = signal.Signals(-code).name
    return f"killed by {name}" + (", most likely by the system for want of memory" if name == "SIGKILL" else "")
