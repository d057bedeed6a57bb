"""analysis.parallel: the pieces of a box-wise pass depend on the number of boxes alone, and
running them as tasks on a dask.distributed cluster gives the same arrays, bit for bit, as
running them in the process (MBFORGE_JOBS=1), whatever the workers, a worker killed
mid-run included; finished pieces are reused from the cache (analysis.piececache); a
scheduler out of reach or workers of another mbforge are one line."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from mbforge import cache
from mbforge.analysis import parallel, piececache
from mbforge.analysis.fixerror import bound_over_boxes
from mbforge.errors import CLIError
from mbforge.analysis.ranges import analyse_chunked, analyse_domain
from mbforge.examples import load
from mbforge.kernels.builders import build_kernel


def test_pieces_depend_on_the_boxes_only(monkeypatch):
    for jobs in ("1", "2", "7"):
        monkeypatch.setenv("MBFORGE_JOBS", jobs)
        assert parallel.pieces(10) == [slice(0, 10)]
        assert parallel.pieces(2 * parallel.MIN_BOXES) == [slice(0, parallel.MIN_BOXES),
                                                          slice(parallel.MIN_BOXES, 2 * parallel.MIN_BOXES)]
    got = parallel.pieces(301)
    assert got[0].start == 0 and got[-1].stop == 301 and all(a.stop == b.start for a, b in zip(got, got[1:]))


@pytest.fixture(scope="module")
def boxes():
    """The slider-crank's inverse-dynamics domain cut into 200 boxes along its crank angle."""
    k = build_kernel(load("slidercrank").equations(), "inverse-dynamics")
    tape = k.tape()
    lo, hi = np.array(k.domain)[:, :, 0], np.array(k.domain)[:, :, 1]
    reps = -(-200 // lo.shape[0])
    lo, hi = np.repeat(lo, reps, axis=0)[:200], np.repeat(hi, reps, axis=0)[:200]
    w = (hi - lo) / 4
    j = np.arange(200) % 4
    lo2, hi2 = lo + j[:, None] * w, lo + (j[:, None] + 1) * w  # quarters of each box, every input
    return tape, lo2, hi2


@pytest.fixture(scope="module")
def cluster():
    """A local cluster of 2 worker processes, named to parallel as a scheduler."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
            Client(c, set_as_default=False) as client:
        yield c, client


@pytest.fixture
def on_cluster(cluster, monkeypatch):
    c, client = cluster
    monkeypatch.delenv("MBFORGE_DASK_SCHEDULER", raising=False)
    parallel.use_scheduler(c.scheduler_address)
    yield client
    parallel.use_scheduler(None)


def _same(one, two):
    assert one.tape is two.tape and np.array_equal(one.fail, two.fail)
    for t in one.lo:
        assert np.array_equal(one.lo[t], two.lo[t]) and np.array_equal(one.hi[t], two.hi[t])


@pytest.mark.slow  # a cluster's start-up: 5 to 15 s
def test_pieces_on_a_cluster_equal_in_process(monkeypatch, boxes, on_cluster):
    tape, lo, hi = boxes
    assert len(parallel.pieces(lo.shape[0])) > 1
    on = analyse_chunked(tape, lo, hi)
    parallel.use_scheduler(None)
    monkeypatch.setenv("MBFORGE_JOBS", "1")
    _same(analyse_chunked(tape, lo, hi), on)


@pytest.mark.slow
def test_fixed_point_bounds_on_a_cluster_equal_in_process(monkeypatch, boxes, on_cluster):
    tape, lo, hi = boxes
    domain = [list(zip(l_, h_)) for l_, h_ in zip(lo[:130], hi[:130])]

    def bounds():
        per: list = []
        return bound_over_boxes(tape, analyse_domain(tape, domain, per_box=per), per).out_error
    on = bounds()
    parallel.use_scheduler(None)
    monkeypatch.setenv("MBFORGE_JOBS", "1")
    assert bounds() == on and all(np.isfinite(on))


def _slow_pieces(tape, lo, hi, seconds):
    """A piece function over halves of the boxes that takes `seconds` first (time to kill its worker)."""
    from mbforge.analysis.ranges import analyse_boxes

    half = lo.shape[0] // 2
    cut = [slice(0, half), slice(half, lo.shape[0])]

    def piece(i):
        time.sleep(seconds)
        got = analyse_boxes(tape, lo[cut[i]], hi[cut[i]], True, hi.max(0) - lo.min(0))
        return np.concatenate([got.lo[t] for t in sorted(got.lo)] + [got.hi[t] for t in sorted(got.hi)])
    return piece


@pytest.mark.slow
def test_a_killed_worker_loses_nothing(boxes, on_cluster, monkeypatch):
    """A worker process SIGKILLed while it runs a piece: the scheduler runs the piece again
    elsewhere and the result is the clean run's."""
    monkeypatch.setenv("MBFORGE_CACHE_DIR", "off")
    tape, lo, hi = boxes
    clean = [_slow_pieces(tape, lo, hi, 0)(i) for i in range(2)]
    pids = on_cluster.run(os.getpid)
    got: dict = {}
    t = threading.Thread(target=lambda: got.update(out=parallel.run(_slow_pieces(tape, lo, hi, 4), 2)))
    t.start()
    deadline = time.monotonic() + 60
    while not any(on_cluster.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    busy = [w for w, tasks in on_cluster.processing().items() if tasks]
    assert busy, "no piece started"
    time.sleep(1)
    os.kill(pids[busy[0]], signal.SIGKILL)
    t.join(180)
    assert not t.is_alive() and "out" in got
    assert all(np.array_equal(a, b) for a, b in zip(got["out"], clean))


@pytest.mark.slow
def test_a_pass_whose_inputs_died_with_the_workers_is_sent_again(boxes, on_cluster, monkeypatch):
    """Every worker killed between the pass's inputs being shipped and its tasks being sent (a
    worker killed as a pass starts, the CI's case): the scheduler cancels the tasks for "lost
    dependencies"; the pass ships its inputs again and ends with the clean run's result."""
    from distributed import Client

    monkeypatch.setenv("MBFORGE_CACHE_DIR", "off")
    tape, lo, hi = boxes
    clean = [_slow_pieces(tape, lo, hi, 0)(i) for i in range(2)]
    scatter, shipped = Client.scatter, []

    def scatter_then_kill_every_worker(self, *args, **kwargs):
        out = scatter(self, *args, **kwargs)
        if not shipped:
            pids = set(on_cluster.run(os.getpid).values())
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 60  # until both nannies have started new workers
            while time.monotonic() < deadline:
                with contextlib.suppress(Exception):
                    now = set(on_cluster.run(os.getpid).values())
                    if len(now) == 2 and not now & pids:
                        break
                time.sleep(0.2)
        shipped.append(out)
        return out
    monkeypatch.setattr(Client, "scatter", scatter_then_kill_every_worker)
    out = parallel.run(_slow_pieces(tape, lo, hi, 0), 2)
    assert len(shipped) == 2, "the pass was not sent again"
    assert all(np.array_equal(a, b) for a, b in zip(out, clean))


@pytest.mark.slow
def test_a_restarted_run_reuses_the_finished_pieces(boxes, on_cluster, monkeypatch, tmp_path):
    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    tape, lo, hi = boxes
    fn = _slow_pieces(tape, lo, hi, 0)
    first = parallel.run(fn, 2, key=lambda i: piececache.key("test", tape, str(i)))
    assert len(list((tmp_path / "cache" / piececache.KIND).glob("*.npz"))) == 2

    def refuse(i):
        raise AssertionError(f"piece {i} ran again")
    again = parallel.run(refuse, 2, key=lambda i: piececache.key("test", tape, str(i)))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_a_piece_of_another_mbforge_is_named_and_computed_again(boxes, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MBFORGE_CACHE_DIR", str(tmp_path / "cache"))
    tape = boxes[0]
    k = piececache.key("test", tape, "0")
    piececache.store(k, np.arange(3.0))
    assert np.array_equal(piececache.load(k), np.arange(3.0)) and capsys.readouterr().err == ""
    cache.store(piececache.KIND, k, data=np.frombuffer(b"x", np.uint8), version=np.array("0.0.1 (source 0123456789ab)"))
    assert piececache.load(k) is piececache.MISS
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"mbforge: warning: cache entry {tmp_path / 'cache' / piececache.KIND / (k + '.npz')} was written "
                    f"by mbforge 0.0.1 (source 0123456789ab), not this {cache.version()}: not used, computed again")


def _pretend_another_version():
    import mbforge.cache

    mbforge.cache.version = lambda: "0.0.1 (source 0123456789ab)"


@pytest.mark.slow
def test_workers_of_another_mbforge_are_one_line(cluster, monkeypatch):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
            Client(c, set_as_default=False) as client:
        client.run(_pretend_another_version)
        with pytest.raises(parallel.SchedulerError, match=r"^scheduler tcp://\S+: worker tcp://\S+ runs mbforge "
                           r"0\.0\.1 \(source 0123456789ab\), this command \S+ \(source \w+\): install the same "
                           r"mbforge on every worker$"):
            parallel.use_scheduler(c.scheduler_address)
    parallel.use_scheduler(None)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_an_unreachable_scheduler_is_one_line(tmp_path, how):
    address = "tcp://127.0.0.1:9"  # discard: nothing listens
    env = dict(os.environ, MBFORGE_DASK_SCHEDULER=address) if how == "env" else dict(os.environ)
    args = ["--scheduler", address] if how == "flag" else []
    r = subprocess.run([sys.executable, "-m", "mbforge.cli", "generate", "fourbar", "--target", "c-fixed", *args,
                        "--out", str(tmp_path / "k")], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    [line] = r.stderr.splitlines()
    assert line.startswith(f"mbforge generate: error: scheduler {address}: cannot be reached (") and line.endswith(
        "); a local cluster is used only when no scheduler is named (--scheduler, $MBFORGE_DASK_SCHEDULER)"), line
    assert not (tmp_path / "k").exists()


@pytest.mark.slow
def test_progress_shows_pieces_done_and_time_left(boxes, on_cluster, monkeypatch):
    """On a terminal, a pass on a cluster that lasts past 2 s draws its pieces done / total
    and the estimated time left on stderr."""
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv("MBFORGE_CACHE_DIR", "off")
    tape, lo, hi = boxes
    parallel.run(_slow_pieces(tape, lo, hi, 3), 2)
    text = err.getvalue()
    # pieces done of 2 (the bar redraws at most every 0.1 s: the two pieces may end in one redraw)
    assert "analysis pieces" in text and re.search(r"[12]/2 ", text) and re.search(r"<\d\d:\d\d", text), text


@pytest.mark.slow
def test_small_local_work_stays_in_process_until_the_local_cluster_runs(monkeypatch):
    """No configuration: a small pass does not start a cluster; once a large one has
    started it, passes of any size run there (its start-up is paid)."""
    monkeypatch.delenv("MBFORGE_DASK_SCHEDULER", raising=False)
    monkeypatch.setenv("MBFORGE_JOBS", "2")
    monkeypatch.setenv("MBFORGE_CACHE_DIR", "off")
    parallel.use_scheduler(None)
    me = os.getpid()
    try:
        assert parallel.run(lambda i: os.getpid(), 2, work=1) == [me, me] and parallel._client is None
        assert me not in parallel.run(lambda i: os.getpid(), 2, work=parallel.LOCAL_WORK)
        assert me not in parallel.run(lambda i: os.getpid(), 2, work=1)
    finally:
        parallel.close()
