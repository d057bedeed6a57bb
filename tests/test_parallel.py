"""analysis.parallel: the pieces of a box-wise pass depend on the number of boxes alone, and
running them in forked children gives the same arrays, bit for bit, as running them in the
process (MBFORGE_JOBS=1): what is generated does not depend on the machine's cores."""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from mbforge.analysis import parallel
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


def _run(monkeypatch, jobs, fn):
    monkeypatch.setenv("MBFORGE_JOBS", jobs)
    return fn()


def test_forked_pieces_equal_in_process(monkeypatch, boxes):
    tape, lo, hi = boxes
    one = _run(monkeypatch, "1", lambda: analyse_chunked(tape, lo, hi))
    two = _run(monkeypatch, "2", lambda: analyse_chunked(tape, lo, hi))
    assert len(parallel.pieces(lo.shape[0])) > 1
    assert one.tape is tape and two.tape is tape
    assert np.array_equal(one.fail, two.fail)
    for t in one.lo:
        assert np.array_equal(one.lo[t], two.lo[t]) and np.array_equal(one.hi[t], two.hi[t])


def test_fixed_point_bounds_equal_in_process(monkeypatch, boxes):
    tape, lo, hi = boxes
    domain = [list(zip(l_, h_)) for l_, h_ in zip(lo[:130], hi[:130])]

    def bounds():
        per: list = []
        return bound_over_boxes(tape, analyse_domain(tape, domain, per_box=per), per).out_error
    one, two = _run(monkeypatch, "1", bounds), _run(monkeypatch, "2", bounds)
    assert one == two and all(np.isfinite(one))


def _piece(i):
    if i == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer ends a process
    if i == 3:
        raise ValueError("piece 3 refused")
    if i == 4:
        os._exit(3)  # ends without writing its result
    return np.full(3, float(i))


def test_a_killed_piece_is_reported_not_waited_for(monkeypatch):
    """A piece's process killed (the OOM killer's SIGKILL) once made the pool wait forever."""
    monkeypatch.setenv("MBFORGE_JOBS", "2")
    got = parallel.run(_piece, 2)
    assert [g.tolist() for g in got] == [[0.0] * 3, [1.0] * 3]
    with pytest.raises(CLIError, match=r"piece 3 of 3 ended without a result \(killed by SIGKILL, most likely"):
        parallel.run(_piece, 3)
    with pytest.raises(ValueError, match="piece 3 refused"):
        parallel.run(lambda i: _piece(3 if i else 0), 2)
    with pytest.raises(CLIError, match=r"piece 2 of 2 ended without a result \(exit status 3\); MBFORGE_JOBS=1 runs "
                                       r"the pieces one after the other, in this process"):
        parallel.run(lambda i: _piece(i * 4), 2)
    with pytest.raises(ChildProcessError):  # every piece's process was waited for
        os.waitpid(-1, os.WNOHANG)
