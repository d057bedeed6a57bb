"""The solvers' one-point evaluator computes what the numpy reference evaluator computes."""
import numpy as np
import pytest

from mbforge.examples import load
from mbforge.ir import ONE, Evaluator, div, symbol
from mbforge.reference.numeric import Compiled, EvaluationError


@pytest.mark.parametrize("name", ["stewart", "slidercrank_disc"])
def test_compiled_equals_the_reference_evaluator(name):
    eqs = load(name).equations()
    outs = eqs.phi + eqs.phi_q.values() + eqs.gamma + eqs.M.values() + eqs.Q + eqs.B.values()
    inputs = eqs.q + eqs.qd + [eqs.t]
    rng = np.random.default_rng(7)
    X = np.array([[rng.uniform(*eqs.ranges[s]) for s in inputs] for _ in range(20)])
    ref = Evaluator(outs, inputs)(X)
    f = Compiled(outs, inputs)
    got = np.array([f(x) for x in X])
    assert np.allclose(got, ref, rtol=1e-13, atol=1e-13 * np.abs(ref).max())


def test_undefined_points_raise():
    x = symbol("num_x", "q")
    f = Compiled([div(ONE, x)], [x])
    assert f([4.0])[0] == 0.25
    with pytest.raises(EvaluationError, match="expression undefined at this point"):
        f([0.0])
