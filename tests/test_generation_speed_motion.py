"""The verification vectors made cheap: Kinematics.motion solves all times at once and must
give what the per-point continuation (motion_sequential) gives, to 1e-12; Kernel.motion and
Kernel.domain may be computed on first use."""
from __future__ import annotations

import numpy as np
import pytest

from mbforge.examples import load_model
from mbforge.ir import Evaluator, ExpressionError
from mbforge.kernels.builders import build_kernel
from mbforge.kernels.kernel import InPort, Kernel
from mbforge.pipeline import MOTION_NAME, generate
from mbforge.reference.solvers import Kinematics, _Batched

N = 48  # as the kernels' verification vectors (domain.motion.MOTION_POINTS)


def _times(eqs, n=N):
    lo, hi = eqs.ranges[eqs.t]
    return np.linspace(lo, hi, n)


def _close(a, b, tol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    err = np.max(np.abs(a - b) / np.maximum(1.0, np.abs(a)))
    assert err <= tol, err


@pytest.fixture(scope="module")
def models():
    return {name: load_model(name).equations() for name in ("fourbar", "slidercrank", "stewart")}


@pytest.mark.parametrize("name,window", [("fourbar", 12), ("slidercrank", 6), ("stewart", N)])
def test_batched_newton_equals_the_sequential_solver(models, name, window):
    """Over all times at once (the four-bar and the slider-crank turn by a full revolution
    and more, so from their first configuration over the first points of the motion; the
    Stewart platform over its whole motion from the model's guess)."""
    eqs = models[name]
    t = _times(eqs)
    seq = Kinematics(eqs).motion_sequential(t)
    q0 = None if window == N else seq[0][0]
    fast = Kinematics(eqs)._motion_batched(t[:window], q0)
    assert fast is not None, "the batched path applies"
    for a, b in zip(seq, fast):
        _close(a[:window], b)


def test_batches_of_a_long_motion_join(models):
    eqs = models["stewart"]
    t = _times(eqs, 2 * Kinematics.BATCH + 5)  # three batches
    fast = Kinematics(eqs)._motion_batched(t)
    assert fast is not None
    for a, b in zip(Kinematics(eqs).motion_sequential(t), fast):
        _close(a, b)


@pytest.mark.parametrize("name", ["fourbar", "slidercrank", "stewart"])
def test_motion_is_the_sequential_solution(models, name):
    # the four-bar and the slider-crank from their guess over whole turns: solved all at
    # once, some times would land a turn or a branch away; that must be caught and solved
    # by continuation instead
    eqs = models[name]
    t = _times(eqs)
    for a, b in zip(Kinematics(eqs).motion_sequential(t), Kinematics(eqs).motion(t)):
        _close(a, b)


def test_batched_evaluator_is_the_reference(models):
    eqs = models["stewart"]
    q, qd, t = eqs.q, eqs.qd, eqs.t
    parts = [eqs.phi + eqs.phi_q.values(), eqs.gamma]
    ev = _Batched(parts, q + qd + [t])
    X = np.random.default_rng(1).uniform(-1.0, 1.0, (7, len(q) + len(qd) + 1))
    for p, outs in enumerate(parts):
        assert np.array_equal(ev(X, p), Evaluator(outs, q + qd + [t])(X))
    with pytest.raises(ExpressionError, match="no value"):
        _Batched([eqs.gamma], q + [t])


def test_kernel_motion_and_domain_are_computed_once_on_first_use():
    sym = load_model("fourbar").equations().t
    calls = []

    def motion():
        calls.append("motion")
        return [[0.5]]

    k = Kernel("m", "k", [InPort("t", [sym], [(0.0, 1.0)])], [], motion=motion, domain=lambda: [[(0.0, 2.0)]])
    assert calls == []
    copy = k.replace(name="other")
    assert k.motion == [[0.5]] and copy.motion == [[0.5]] and k.motion == [[0.5]]
    assert calls == ["motion"], "computed once, shared by the copy"
    assert copy.domain == [[(0.0, 2.0)]]
    bad = Kernel("m", "k", [InPort("t", [sym], [(0.0, 1.0)])], [], domain=lambda: [[(0.0, 1.0), (0.0, 1.0)]])
    with pytest.raises(ExpressionError, match="2 ranges for 1 inputs"):
        bad.domain


def test_lazy_motion_is_written_as_the_eager_one():
    eqs = load_model("fourbar").equations()
    k = build_kernel(eqs, "equations")
    eager = k.replace(motion=[[float(v) for v in row] for row in k.motion])
    lazy = build_kernel(eqs, "equations")
    assert generate(lazy, "c-double").files[MOTION_NAME] == generate(eager, "c-double").files[MOTION_NAME]
    assert '"vectors": [[' in generate(lazy, "c-double").files[MOTION_NAME]


def test_near_a_singular_configuration_the_answer_is_the_sequential_one():
    """A slider-crank driven by its slider reaches the dead point (slider at full stretch)
    at t = 0, where two Newton paths stop 1e-6 apart within the tolerance: the batched
    path declines there and motion() is the sequential solver's answer."""
    from mbforge.ir import cos, sin
    from mbforge.model import Model

    m = Model("slider_dead_point")
    a = m.coordinate("sdp_crank", guess=0.3, range=(-4, 4))
    b = m.coordinate("sdp_rod", guess=-0.15, range=(-4, 4))
    s = m.coordinate("sdp_slider", guess=2.9, range=(0, 4))
    m.constraint(cos(a) + 2 * cos(b) - s, "loop_x")
    m.constraint(sin(a) + 2 * sin(b), "loop_y")
    m.drive(s - (3.0 - 0.5 * (1 - cos(m.t))), "slider_law")
    eqs = m.equations()
    t = np.linspace(1.0, 0.0, 6)
    assert Kinematics(eqs)._motion_batched(t) is None
    for x, y in zip(Kinematics(eqs).motion_sequential(t), Kinematics(eqs).motion(t)):
        assert np.array_equal(x, y)
    # away from it the batched path answers, as the sequential solver does
    fast = Kinematics(eqs)._motion_batched(t[:3])
    assert fast is not None
    for x, y in zip(Kinematics(eqs).motion_sequential(t[:3]), fast):
        _close(x, y)
