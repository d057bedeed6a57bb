"""Independent pieces of a box-wise analysis, run on dask.distributed.

The boxes of a domain are analysed independently, but not alone: a pass over a chunk of
boxes keeps the error-form terms that matter most over the whole chunk, so how boxes are
grouped changes the (sound) bounds a little. The pieces therefore depend on the number of
boxes alone, never on the workers: every machine and cluster groups them alike, results
come back in piece order whatever order they finish in, and the same bytes are generated.

Where the pieces run: on the cluster of the scheduler named by `generate --scheduler` or
$MBFORGE_DASK_SCHEDULER (its workers must run this same mbforge: checked on connecting and
by every task); else, when a pass is small (below local_work() box-instructions, where a
cluster's start-up would cost more than the work), in this process; else on a LocalCluster
of jobs() worker processes, started on first use and kept for the command. The pass's
function and what it closes over (its tape and boxes: tens of MB for the Stewart) are
scattered once to every worker; each piece is a small task naming it and its index. A worker
that dies has its pieces run again by the scheduler (distributed's allowed-failures); a
piece with a cache key (analysis.piececache) is stored as it finishes, so a run interrupted
and started again runs only the pieces it lacks. Progress (pieces done, time left) on stderr.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal

from ..errors import CLIError

PIECES = 2  # a pass of this many boxes or more is cut in PIECES
MIN_BOXES = 64  # ... when each piece gets at least this many (a pass has a fixed cost)
LOCAL_WORK = 2_000_000  # box-instructions: below, an error pass takes less than a local cluster's start-up (~3 s)
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # held while a local cluster starts
CONNECT_TIMEOUT = 5  # s to reach a named scheduler
WORKER_TIMEOUT = 30  # s for its first worker (a cluster just started: workers import numpy, scipy)

_address: str | None = None  # generate --scheduler
_client = None  # the distributed.Client of this command, made on first use
_in_task = False  # pieces inside a piece run in that task, one after the other


class SchedulerError(CLIError):
    """A named scheduler that cannot be used (unreachable, no workers, another mbforge)."""


def pieces(n: int) -> list[slice]:
    """Contiguous slices of range(n): PIECES of them when each gets MIN_BOXES, else one."""
    k = PIECES if n >= PIECES * MIN_BOXES else 1
    edges = [n * i // k for i in range(k + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:])]


def jobs() -> int:
    """Local worker processes: $MBFORGE_JOBS (a whole number >= 1), else the cores this process may run on."""
    env = os.environ.get("MBFORGE_JOBS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise CLIError(f"MBFORGE_JOBS: expected a whole number of processes, 1 or more; got {env!r}")
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        return os.cpu_count() or 1


def local_work() -> int:
    """Box-instructions below which a pass runs in this process: $MBFORGE_LOCAL_WORK (a whole
    number >= 0; 0 sends every pass of two pieces to the cluster), else LOCAL_WORK."""
    env = os.environ.get("MBFORGE_LOCAL_WORK", "").strip()
    if not env:
        return LOCAL_WORK
    if not env.isdigit():
        raise CLIError(f"MBFORGE_LOCAL_WORK: expected a whole number of box-instructions, 0 or more; got {env!r}")
    return int(env)


def scheduler() -> str | None:
    """The scheduler named by --scheduler, else by $MBFORGE_DASK_SCHEDULER, else None (local)."""
    return _address or os.environ.get("MBFORGE_DASK_SCHEDULER", "").strip() or None


def use_scheduler(address: str | None) -> None:
    """Run the pieces on the cluster of `address` (None: $MBFORGE_DASK_SCHEDULER, else
    locally); a named scheduler is reached now, so a bad address fails before any work."""
    global _address
    close()
    _address = address or None
    if scheduler():
        _connect()


def run(fn, n: int, work: int = 0, key=None) -> list:
    """[fn(0), ..., fn(n - 1)]: in this process for one piece, inside a piece, or for small
    local work before the local cluster has started (`work`: the pass's boxes x
    instructions), else as tasks on the cluster.
    key(i): piece i's analysis.piececache key (pieces on a cluster are cached)."""
    address = scheduler()
    small = work < local_work() and _client is None  # once a cluster runs, its start-up is paid
    if n < 2 or _in_task or (address is None and (jobs() < 2 or small)):
        return [fn(i) for i in range(n)]
    from . import piececache

    out: list = [piececache.MISS] * n
    keys = [key(i) for i in range(n)] if key is not None else None
    if keys:
        out = [piececache.load(k) for k in keys]
    todo = [i for i in range(n) if out[i] is piececache.MISS]
    if todo:
        _submit(fn, n, todo, out, keys)
    return out


# how often a pass is sent again when the scheduler cancels its tasks because their shipped
# inputs died with a worker ("lost dependencies": the worker was killed while the pass started)
RESUBMITS = 3


def _submit(fn, n: int, todo: list, out: list, keys) -> None:
    """Pieces `todo` as tasks, each result into out[i] (and the cache) as it comes; the pieces
    still missing are sent again (with their inputs) when the cluster lost what they needed."""
    from distributed.client import FutureCancelledError

    from . import piececache

    for attempt in range(RESUBMITS + 1):
        try:
            _submit_once(fn, n, [i for i in todo if out[i] is piececache.MISS], out, keys)
            return
        except FutureCancelledError as e:
            if attempt == RESUBMITS:
                raise CLIError(f"analysis: the cluster cancelled the pieces {RESUBMITS + 1} times ({e.reason}); "
                               "MBFORGE_JOBS=1 runs the pieces one after the other, in this process") from None


def _submit_once(fn, n: int, todo: list, out: list, keys) -> None:
    from distributed import as_completed

    from ..cache import version
    from ..progress import progress_bar
    from . import piececache

    client = _connect()
    # the pass's inputs once per worker, not once per task (dask warned of the large graph)
    shipped = client.scatter(fn, broadcast=True, hash=False)
    futures = {client.submit(_task, shipped, i, version(), pure=False): i for i in todo}
    try:
        with progress_bar(n, "analysis pieces", "piece") as update:
            done = n - len(todo)
            update(done)
            for fut in as_completed(futures, loop=client.loop):
                i = futures[fut]
                out[i] = _result(fut, i, n)
                if keys:
                    piececache.store(keys[i], out[i])
                done += 1
                update(done)
    finally:
        client.cancel([*futures, shipped])


def _task(fn, i: int, version: str):
    """Piece i on a worker, which must run the mbforge that sent it."""
    global _in_task
    from ..cache import version as mine

    if mine() != version:
        raise SchedulerError(f"analysis: worker runs mbforge {mine()}, this command {version}: "
                             "install the same mbforge on every worker")
    _in_task = True
    return fn(i)


def _result(fut, i: int, n: int):
    from distributed import KilledWorker

    try:
        return fut.result()
    except KilledWorker as e:
        raise CLIError(f"analysis: piece {i + 1} of {n} was running on every worker that died for it "
                       f"({e.args[1] if len(e.args) > 1 else e}); MBFORGE_JOBS=1 runs the pieces "
                       "one after the other, in this process, with less memory") from None
    except ImportError as e:  # a worker without mbforge (or one that cannot load it)
        raise SchedulerError(f"analysis: a worker cannot run mbforge's pieces ({type(e).__name__}: {e}): "
                             "install the same mbforge on every worker") from None


def _connect():
    """The command's Client: the named scheduler's (checked) or a new LocalCluster's."""
    global _client
    if _client is not None:
        return _client
    from distributed import Client, LocalCluster

    address = scheduler()
    if address is None:
        from distributed.deploy.spec import SpecCluster

        before = set(SpecCluster._instances)
        try:
            with _signals_deferred():
                cluster = LocalCluster(n_workers=jobs(), threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=logging.ERROR)
        except BaseException as e:  # noqa: BLE001 - failed or interrupted (SIGTERM) while it started
            _close_quietly(set(SpecCluster._instances) - before)
            if isinstance(e, (OSError, RuntimeError, TimeoutError)):  # a worker process died as it started
                raise CLIError(f"analysis: the local cluster of {jobs()} workers did not start ({_why(e)}); "
                               "MBFORGE_JOBS=1 runs the pieces in this process") from None
            raise
        _client = Client(cluster, set_as_default=False)
    else:
        try:
            _client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            raise SchedulerError(f"scheduler {address}: cannot be reached ({_why(e)}); a local cluster is used "
                                 "only when no scheduler is named (--scheduler, $MBFORGE_DASK_SCHEDULER)") from None
        try:
            _check_workers(_client, address)
        except BaseException:
            close()
            raise
    atexit.register(close)
    return _client


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT/SIGTERM/SIGHUP while the local cluster starts, then deliver the first one.

    A signal that lands while the worker processes are being spawned interrupts
    multiprocessing half-way: a child then prints its own traceback (FileNotFoundError of the
    spawn's pipe, a Nanny error) after our one-line message. Held, it arrives once the cluster
    is whole, and the usual interrupt path closes it cleanly."""
    held: list[int] = []
    old = {}
    for s in HELD_SIGNALS:
        try:
            old[s] = signal.signal(s, lambda n, _f: held.append(n))
        except ValueError:  # not the main thread: nothing to hold
            pass
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if held:
            signal.raise_signal(held[0])


def _why(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _check_workers(client, address: str) -> None:
    """At least one worker, and every worker runs this mbforge (one line naming one that does not)."""
    from ..cache import version

    try:
        client.wait_for_workers(1, timeout=WORKER_TIMEOUT)
    except (OSError, TimeoutError) as e:
        raise SchedulerError(f"scheduler {address}: no worker joined within {WORKER_TIMEOUT} s ({_why(e)})") from None
    theirs = client.run(_worker_version, on_error="return")
    for worker, v in sorted(theirs.items()):
        if v != version():
            what = f"cannot load mbforge ({_why(v)})" if isinstance(v, BaseException) else f"runs mbforge {v}"
            raise SchedulerError(f"scheduler {address}: worker {worker} {what}, this command {version()}: "
                                 "install the same mbforge on every worker")


def _worker_version() -> str:
    from ..cache import version

    return version()


def close() -> None:
    """Close the command's Client (and its LocalCluster, if it made one)."""
    global _client
    c, _client = _client, None
    if c is None:
        return
    cluster = c.cluster
    try:
        c.close()
        if cluster is not None:
            cluster.close()
    except Exception:  # noqa: BLE001 - closing at the end of a command: nothing left to save
        pass


def _close_quietly(clusters) -> None:
    """Clusters of this command that never finished starting: closed here, quietly, and kept
    from dask's own exit hook, which would print a traceback of a half-started cluster."""
    for cluster in clusters:
        try:
            cluster.close(timeout=10)
        except Exception:  # noqa: BLE001 - a cluster that never started: its processes end with ours
            pass
        cluster.shutdown_on_close = False
