"""The Stewart platform's `kinematics` and `inverse-dynamics` kernels (98 natural
coordinates, six leg forces) against the model layer's double-precision reference along
the driven motion."""
import numpy as np
import pytest

from mbforge.examples import load
from mbforge.ir import Evaluator
from mbforge.kernels.builders import build_kernel
from mbforge.reference.solvers import Dynamics, Kinematics

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stewart():
    return load("stewart").equations()


def test_kinematics_kernel(stewart):
    eqs = stewart
    n = len(eqs.q)
    k = build_kernel(eqs, "kinematics")
    F = k.info.solves["Phi_q"]
    assert F.min_relative_pivot > 0.1 and F.divisions < n  # constant pivots need no division
    X = np.array(k.motion)[::4]
    Y = Evaluator(k.output_atoms, k.input_symbols)(X)
    ref = Kinematics(eqs)
    for x, y in zip(X, Y):
        qd = ref.velocity(x[-1], x[:n])
        np.testing.assert_allclose(y[:n], qd, atol=1e-12)
        np.testing.assert_allclose(y[n:2 * n], ref.acceleration(x[-1], x[:n], qd), atol=1e-11)


def test_inverse_dynamics_kernel(stewart):
    eqs = stewart
    n = len(eqs.q)
    k = build_kernel(eqs, "inverse-dynamics")
    assert [p.name for p in k.outputs] == ["u", "lambda"] and len(k.outputs[0].atoms) == 6
    X = np.array(k.motion)[::4]
    Y = Evaluator(k.output_atoms, k.input_symbols)(X)
    ref = Dynamics(eqs)
    peak = 0.0
    for x, y in zip(X, Y):
        u, _ = ref.inverse(x[-1], x[:n], x[n:2 * n], x[2 * n:3 * n])
        np.testing.assert_allclose(y[:6], u, atol=1e-9)
        peak = max(peak, np.abs(u).max())
    assert peak > 1.0
