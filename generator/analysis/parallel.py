"""Independent pieces of a box-wise analysis, run on dask.distributed.

The boxes of a domain are analysed independently, but not alone: a pass over a chunk of
boxes keeps the error-form terms that matter most over the whole chunk, so how boxes are
grouped changes the (sound) bounds a little. The pieces therefore depend on the number of
boxes alone, never on the workers: every machine and cluster groups them alike, results
come back in piece order whatever order they finish in, and the same bytes are generated.

Where the pieces run: on the cluster of the scheduler named by `generate --scheduler` or
$MBFORGE_DASK_SCHEDULER (its workers must run this same mbforge: checked on connecting and
by every task); else, when a pass is small (below LOCAL_WORK box-instructions, where a
cluster's start-up would cost more than the work), in this process; else on a LocalCluster
of jobs() worker processes, started on first use and kept for the command. A piece is a
task carrying its inputs (cloudpickle of the function and what it closes over). A worker
that dies has its pieces run again by the scheduler (distributed's allowed-failures); a
piece with a cache key (analysis.piececache) is stored as it finishes, so a run interrupted
and started again runs only the pieces it lacks. Progress (pieces done, time left) on stderr.
"""
from __future__ import annotations

import atexit
import logging
import os
import warnings

from ..errors import CLIError

PIECES = 2  # a pass of this many boxes or more is cut in PIECES
MIN_BOXES = 64  # ... when each piece gets at least this many (a pass has a fixed cost)
LOCAL_WORK = 2_000_000  # box-instructions: below, an error pass takes less than a local cluster's start-up (~3 s)
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
    small = work < LOCAL_WORK and _client is None  # once a cluster runs, its start-up is paid
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


def _submit(fn, n: int, todo: list, out: list, keys) -> None:
    """Pieces `todo` as tasks, each result into out[i] (and the cache) as it comes."""
    from distributed import as_completed

    from ..cache import version
    from ..progress import progress_bar
    from . import piececache

    client = _connect()
    with warnings.catch_warnings():
        # each task carries its pass's tape and boxes (tens of MB for the Stewart): dask warns of it
        # on stderr, a line the user can do nothing about (sending them once is left for later)
        warnings.filterwarnings("ignore", message="Sending large graph")
        futures = {client.submit(_task, fn, i, version(), pure=False): i for i in todo}
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
        client.cancel(list(futures))


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
