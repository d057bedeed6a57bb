"""Symbols belong to their model: two models in one process may use the same names, each
parameter keeps its own model's value, dropped models free their atoms, and one model's
generated code does not depend on the other models built in the process."""
import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
import sympy as sp

from mbforge.verify.hostlib import load_kernel
from mbforge.ir import Evaluator, atom_count, cos, sin, symbols
from mbforge.kernels.builders import build_kernel
from mbforge.model import Model, ModelError
from mbforge.pipeline import generate


def crank(name: str, length: float) -> Model:
    """x^2 + y^2 = L^2 turned by t; every model uses the names x, y and L."""
    m = Model(name)
    x = m.coordinate("x", guess=length, range=(-2.5, 2.5))
    y = m.coordinate("y", guess=0.0, range=(-2.5, 2.5))
    L = m.parameter("L", length, range=(0.5, 2.4))
    m.time_range(0.0, 6.0)
    m.constraint(x * x + y * y - L * L, "length")
    m.drive(x * sin(m.t) - y * cos(m.t), "angle")
    return m


def test_two_models_with_one_parameter_name_keep_their_values(tmp_path):
    La = Model("a").parameter("L", 1.0)
    Lb = Model("b").parameter("L", 2.0)  # raised "parameter 'L' already exists" before
    assert La is not Lb and La.value.default == 1.0 and Lb.value.default == 2.0

    a, b = crank("a", 1.0), crank("b", 2.0)
    X = np.random.default_rng(1).uniform(-1, 1, (100, 4))
    X = np.column_stack([X, np.linspace(0.0, 6.0, 100)])
    for m, L in ((a, 1.0), (b, 2.0)):
        plan = generate(build_kernel(m.equations(), "equations"), "c-double", options={"params": "fold"})
        plan.write(tmp_path / m.name)
        Y, _ = load_kernel(tmp_path / m.name)(X)  # the host C compiler builds each kernel
        assert np.allclose(Y[:, 0], X[:, 0] ** 2 + X[:, 1] ** 2 - L * L, atol=1e-14), m.name
    # and the numpy reference of each model reads its own symbols and parameter values
    for m, L in ((a, 1.0), (b, 2.0)):
        eqs = m.equations()
        y = Evaluator(eqs.phi[:1], eqs.q + eqs.params)([0.5, 0.25] + [p.value.default for p in eqs.params])
        assert y[0] == pytest.approx(0.3125 - L * L)


def test_same_names_in_two_models_are_different_atoms():
    a, b = crank("a", 1.0), crank("b", 2.0)
    assert [s.value.name for s in a.q] == [s.value.name for s in b.q] == ["x", "y"]
    assert all(p is not q for p, q in zip(a.q + a.qd + a.qdd + [a.t], b.q + b.qd + b.qdd + [b.t]))
    assert a.phi[0] is not b.phi[0] and a.phi[1] is not b.phi[1]
    assert repr(a.phi[1]) == repr(b.phi[1]) and a.phi[1].key == b.phi[1].key  # same structure, same order
    # a coordinate named like another model's parameter is fine
    c = Model("c")
    assert c.coordinate("L").value.kind == "q" and a.params[0].value.kind == "param"
    # an expression written in sympy reads the names in its own model
    c.drive(sp.Symbol("L") - sp.sin(sp.Symbol("t")), "law")
    assert c.phi[0] is c.q[0] - sin(c.t)
    # a symbol of another model is reported with its model's name
    with pytest.raises(ModelError, match=r"c: constraint 'mix' depends on x \(of model 'a'\), which are not "
                                         "coordinates or parameters of this model"):
        c.constraint(c.q[0] - a.q[0], "mix")


def test_a_name_is_used_once_in_a_model():
    m = Model("dup")
    m.coordinate("x")
    with pytest.raises(ModelError, match="dup: coordinate 'x' is defined twice"):
        m.coordinate("x")
    with pytest.raises(ModelError, match="dup: 'x' is defined twice"):
        m.parameter("x", 1.0)
    with pytest.raises(ModelError, match=r"dup: parameter 'x_d': the name 'x_d' is taken \(by a symbol of kind 'qd'\)"):
        m.parameter("x_d", 1.0)
    with pytest.raises(ModelError, match=r"dup: coordinate 't': the name 't' is taken \(by a symbol of kind 't'\)"):
        m.coordinate("t")
    m.parameter("k", 1.0)
    with pytest.raises(ModelError, match="dup: 'k' is defined twice"):
        m.parameter("k", 2.0)
    m.parameter("z_dd", 1.0)
    with pytest.raises(ModelError, match=r"dup: coordinate 'z': the name 'z_dd' is taken \(by a symbol of kind 'param'\)"):
        m.coordinate("z")
    assert "z" not in m.scope and [s.value.name for s in m.q] == ["x"]  # nothing half made


def test_a_dropped_model_frees_its_atoms():
    def build():
        m = crank("dropped", 1.5)
        eqs = m.equations()
        return [weakref.ref(a) for a in m.q + m.params + eqs.phi + eqs.phi_q.values()]

    gc.collect()
    before = atom_count()
    refs = build()
    gc.collect()
    assert refs and all(r() is None for r in refs)
    assert atom_count() <= before
    # interning still makes equal expressions one atom while they are alive
    a, b = symbols("scope_a scope_b")
    p = a * b
    assert b * a is p and sin(b + a) is sin(a + b)
    key = p.key
    del p
    gc.collect()
    assert (b * a).key == key and a * b is b * a


SCRIPT = r"""
import hashlib, sys
from mbforge import examples
from mbforge.kernels.builders import build_kernel
from mbforge.model import Model
from mbforge.pipeline import generate

keep = []
if sys.argv[1] == "after":  # other models first, with the fourbar's names, kinds swapped
    for name in ("other", "fourbar"):
        m = Model(name)
        for n in ("yC", "xC", "t_d", "xB_dd"):
            m.coordinate(n)
        for n in ("yB", "xB", "L"):
            m.parameter(n, 2.0)
        m.constraint(m.q[0] * m.params[0] - m.q[1] + m.t, "c")
        keep.append(m.equations())
    keep.append(examples.load("slidercrank").equations())
plan = generate(build_kernel(examples.load("fourbar").equations(), "equations"), "c-double")
for name, text in sorted(plan.files.items()):
    print(name, hashlib.sha256(text.encode()).hexdigest())
print("manifest", hashlib.sha256(plan.manifest.to_json().encode()).hexdigest())
"""


def test_generated_code_does_not_depend_on_other_models_in_the_process():
    outs = {}
    for mode, seed in (("alone", "0"), ("after", "7")):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        outs[mode] = r.stdout
    assert outs["alone"].count("\n") >= 3
    assert outs["alone"] == outs["after"]


def test_expressions_mixing_two_models_still_intern():
    """Same-named symbols of two models have equal keys and text; the order of a sum of both
    is still one atom whichever way it is written."""
    a, b = crank("a", 1.0), crank("b", 2.0)
    xa, xb = a.q[0], b.q[0]
    assert xa + xb is xb + xa and xa * xb is xb * xa
    big_a, big_b = a.phi[0], b.phi[0]
    for _ in range(40):  # a deep shared graph: the tie-break walks each atom once
        big_a, big_b = big_a * (big_a + xa), big_b * (big_b + xb)
    assert big_a + big_b is big_b + big_a
