"""Derivative, substitution and the reference evaluator, checked against sympy on random
expressions (property tests) and on hand-picked cases."""
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mbforge.ir import (ONE, ZERO, Evaluator, ExpressionError, atan2, cos, derivatives, diff, evaluate,
                        from_sympy, jacobian, power, sin, sqrt, subs, symbol, symbols, time_derivative,
                        to_sympy, topo)

X, Y, Z = symbols("px py pz")
SX, SY, SZ = sp.symbols("px py pz", real=True)
SYM = {X: SX, Y: SY, Z: SZ}


def _expr(draw, depth):
    """A random sympy expression on px, py, pz that is defined for px, py, pz in [0.5, 1.5]."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from([SX, SY, SZ, sp.Integer(2), sp.Rational(-3, 2), sp.Float(0.7)]))
    op = draw(st.sampled_from(["add", "sub", "mul", "div", "pow", "sin", "cos", "sqrt", "atan2", "exp"]))
    a = _expr(draw, depth - 1)
    if op in ("sin", "cos"):
        return getattr(sp, op)(a / 4)
    if op == "exp":
        return sp.exp(a / (a ** 2 + 4))
    if op == "sqrt":
        return sp.sqrt(a ** 2 + 1)
    if op == "pow":
        n = draw(st.integers(-2, 4))
        return a ** n if n >= 0 else (a ** 2 + 1) ** n
    b = _expr(draw, depth - 1)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / (b ** 2 + 1)
    return sp.atan2(a, b ** 2 + 1)


@st.composite
def expressions(draw):
    return _expr(draw, 4)


POINTS = np.array([[0.6, 0.9, 1.3], [1.4, 0.55, 0.8], [1.0, 1.2, 0.7]])


def _values(e_sym, pts):
    f = sp.lambdify((SX, SY, SZ), e_sym, "numpy")
    return np.array([float(f(*p)) for p in pts])


def _close(a, b):
    return np.allclose(a, b, rtol=1e-9, atol=1e-9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions(), st.sampled_from([0, 1, 2]))
def test_derivative_matches_sympy(e, k):
    a = from_sympy(e, {SX: X, SY: Y, SZ: Z})
    var, svar = [(X, SX), (Y, SY), (Z, SZ)][k]
    got = Evaluator([diff(a, var)], [X, Y, Z])(POINTS)[:, 0]
    want = _values(sp.diff(e, svar), POINTS)
    assert _close(got, want)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions())
def test_substitution_matches_sympy(e):
    a = from_sympy(e, {SX: X, SY: Y, SZ: Z})
    # x -> y*z + 1 and z -> 0.75 at once
    got = Evaluator([subs(a, {X: Y * Z + 1, Z: 0.75})], [X, Y, Z])(POINTS)[:, 0]
    want = _values(e.subs({SX: SY * SZ + 1, SZ: sp.Float(0.75)}, simultaneous=True), POINTS)
    assert _close(got, want)


@settings(max_examples=100, deadline=None)
@given(expressions())
def test_round_trip_through_sympy(e):
    a = from_sympy(e, {SX: X, SY: Y, SZ: Z})
    back = to_sympy(a, SYM)
    assert _close(_values(back, POINTS), _values(e, POINTS))
    assert from_sympy(back, {SX: X, SY: Y, SZ: Z}) is a or _close(
        Evaluator([from_sympy(back, {SX: X, SY: Y, SZ: Z})], [X, Y, Z])(POINTS)[:, 0], _values(e, POINTS))


def test_derivative_shares_atoms_with_the_original():
    u = X * Y + 1
    f = sqrt(u)
    d = diff(f, X)
    assert f in topo([d])  # d sqrt(u) = du / (2 sqrt(u)) reuses sqrt(u)
    q = X / (Y + 2)
    assert q in topo([diff(q, Y)])
    assert diff(Z * 3, X) is ZERO
    assert diff(X, X) is ONE


def test_derivative_cost_is_linear_in_the_graph():
    # a chain of 2000 nested operations: recursion would overflow, memoisation keeps it linear
    e = X
    for k in range(2000):
        e = sin(e) * Y + X * (k % 7)
    d = derivatives([e], {X: ONE})
    assert len(d) <= 6 * len(topo([e], X.mask))
    v = Evaluator([diff(e, Y)], [X, Y])(np.array([0.3, 0.2]))
    assert np.isfinite(v).all()


def test_time_derivative_chain_rule():
    q, qd, qdd, t = symbol("tq", "q"), symbol("tq_d", "qd"), symbol("tq_dd", "qdd"), symbol("t", "t")
    f = sin(q) * t
    seeds = {q: qd, qd: qdd, t: ONE}
    d1 = time_derivative(f, seeds)
    d2 = time_derivative(d1, seeds)
    vals = {q: 0.3, qd: 0.7, qdd: -0.2, t: 1.5}
    # by hand: d/dt = cos q qd t + sin q ; d2 = -sin q qd^2 t + cos q qdd t + 2 cos q qd
    want2 = -math.sin(0.3) * 0.49 * 1.5 + math.cos(0.3) * -0.2 * 1.5 + 2 * math.cos(0.3) * 0.7
    assert evaluate(d2, vals) == pytest.approx(want2, rel=1e-12)


def test_jacobian_keeps_structural_zeros_out():
    J = jacobian([X * Y, Z + 1, sin(Y)], [X, Y, Z])
    assert J.pattern == [(0, 0), (0, 1), (1, 2), (2, 1)]
    assert J[(1, 0)] is ZERO


def test_evaluator_errors():
    with pytest.raises(ExpressionError, match="no value for symbol.*py"):
        Evaluator([X + Y], [X])
    ev = Evaluator([X + Y], [X, Y])
    with pytest.raises(ExpressionError, match="got 3 input columns, expected 2"):
        ev(np.zeros((4, 3)))


def test_evaluator_batch_matches_pointwise():
    e = atan2(sin(X) + Y, cos(Z) + 2) * power(X, 3)
    ev = Evaluator([e, diff(e, Z)], [X, Y, Z])
    Y_ = ev(POINTS)
    for p, row in zip(POINTS, Y_):
        assert row[0] == pytest.approx(math.atan2(math.sin(p[0]) + p[1], math.cos(p[2]) + 2) * p[0] ** 3)


def test_forward_and_reverse_jacobians_agree():
    fs = [sin(X * Y) + Z ** 3, atan2(Y, X + 2) * sqrt(Z * Z + 1), X / (Y * Y + 1)]
    Jf = jacobian(fs, [X, Y, Z], mode="forward")
    Jr = jacobian(fs, [X, Y, Z], mode="reverse")
    assert Jf.pattern == Jr.pattern
    a = Evaluator(Jf.values(), [X, Y, Z])(POINTS)
    b = Evaluator(Jr.values(), [X, Y, Z])(POINTS)
    assert np.allclose(a, b, rtol=1e-13, atol=1e-14)


def test_chain_jacobian_picks_reverse_mode_and_stays_linear():
    """Tip of a planar chain: 2 outputs, n angles. Reverse mode keeps the Jacobian O(n)."""
    from mbforge.lower import op_counts

    def tip_jacobian_ops(n):
        th = [symbol(f"chain_th{k}", "q") for k in range(n)]
        ang = ZERO
        x = y = ZERO
        for k in range(n):
            ang = ang + th[k]
            x, y = x + cos(ang), y + sin(ang)
        return op_counts(jacobian([x, y], th).values())["total"]

    small, big = tip_jacobian_ops(10), tip_jacobian_ops(40)
    assert big < 6 * small  # forward mode would be ~16x


def test_from_sympy_reuses_an_existing_symbol_by_name():
    q = symbol("fs_q", "q")
    a = from_sympy(sp.Symbol("fs_q") * 2)
    assert a is 2 * q


def test_every_op_of_the_table_evaluates_and_differentiates_alike():
    """Each op of ir/ops.py: the numpy reference, the scalar solver path and sympy give one
    value, and its forward rule and its reverse partials match sympy's derivative."""
    from mbforge.ir import OPS, as_atom
    from mbforge.ir.atom import apply
    from mbforge.reference.numeric import Compiled

    u, v = symbols("op_u op_v")
    su, sv = sp.symbols("op_u op_v", real=True)
    pt = {u: 0.7, v: 1.3}
    seen = set()
    for name, op in OPS.items():
        if op.arity == 0:
            continue
        args = (u, v)[:op.arity]
        e = power(u, 3) if op.valued else apply(name, args)
        assert e.op == name, name
        seen.add(name)
        want = to_sympy(e, {u: su, v: sv})
        ref = float(want.subs({su: 0.7, sv: 1.3}))
        assert Evaluator([e], [u, v])([0.7, 1.3])[0] == pytest.approx(ref, rel=1e-15), name
        assert Compiled([e], [u, v])([0.7, 1.3])[0] == pytest.approx(ref, rel=1e-15), name
        J = jacobian([e], [u, v], mode="forward")
        R = jacobian([e], [u, v], mode="reverse")
        for j, (x, sx) in enumerate(((u, su), (v, sv))):
            d = float(sp.diff(want, sx).subs({su: 0.7, sv: 1.3}))
            for S in (J, R):
                got = S.entries.get((0, j), ZERO)
                assert evaluate(as_atom(got), pt) == pytest.approx(d, rel=1e-12, abs=1e-15), (name, j)
    assert seen == {n for n, o in OPS.items() if o.arity}
