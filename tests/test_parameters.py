"""Model parameters: folded in as constants, or kept as a runtime input port."""
import numpy as np
import pytest

from mbforge.verify.hostlib import load_kernel
from mbforge.ir import Evaluator, cos, sin
from mbforge.kernels.builders import build_kernel
from mbforge.manifest import Manifest
from mbforge.model import Model, ModelError
from mbforge.pipeline import generate


def crank(length_value=1.0):
    m = Model("pcrank")
    x = m.coordinate("pc_x", guess=length_value, range=(-1.5, 1.5))
    y = m.coordinate("pc_y", guess=0.0, range=(-1.5, 1.5))
    L = m.parameter("pc_L", length_value, range=(0.5, 1.4))
    m.time_range(0.0, 6.0)
    m.constraint(x * x + y * y - L * L, "length")
    m.drive(x * sin(m.t) - y * cos(m.t), "angle")
    return m


def test_folded_and_runtime_parameters(tmp_path):
    eqs = crank().equations()
    k = build_kernel(eqs, "equations")
    folded = generate(k, "c-double", options={"params": "fold"})
    runtime = generate(k, "c-double", options={"params": "runtime"})
    assert [g.name for g in folded.manifest.inputs] == ["q", "qd", "t"]
    assert [g.name for g in runtime.manifest.inputs] == ["q", "qd", "t", "params"]
    assert runtime.manifest.inputs[-1].range == [[0.5, 1.4]]
    assert folded.manifest.digest != runtime.manifest.digest
    runtime.write(tmp_path / "rt")
    X = np.random.default_rng(0).uniform(-1, 1, (200, 6))
    X = np.column_stack([X[:, :4], np.linspace(0, 6, 200), np.linspace(0.5, 1.4, 200)])
    Y, _ = load_kernel(tmp_path / "rt")(X)
    L = X[:, 5]
    assert np.allclose(Y[:, 0], X[:, 0] ** 2 + X[:, 1] ** 2 - L * L, atol=1e-14)
    folded.write(tmp_path / "fd")
    Yf, _ = load_kernel(tmp_path / "fd")(X[:, :5])
    assert np.allclose(Yf[:, 0], X[:, 0] ** 2 + X[:, 1] ** 2 - 1.0, atol=1e-14)


def test_parameter_errors_name_the_parameter():
    m = Model("perr")
    with pytest.raises(ModelError, match="parameter 'pe_k': value 3.0 is not inside its range"):
        m.parameter("pe_k", 3.0, range=(0.0, 1.0))
