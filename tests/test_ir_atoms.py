"""Interning, canonical forms and folding of atoms (pure IR, no tools)."""
import math
import os
import subprocess
import sys

import pytest

from mbforge.ir import ONE, ZERO, ExpressionError, atom_count, const, cos, div, dump, power, sin, sqrt, symbol, symbols, to_text

from mbforge.lower import lower, op_counts


def test_equal_expressions_are_one_atom():
    a, b, c = symbols("ia ib ic")
    assert a * b is b * a
    assert a + b is b + a
    assert (a * b) * c is (a * b) * c
    assert sin(a + b) is sin(b + a)
    parts = (a * b, sin(a + b))  # the table holds atoms weakly: keep the parts alive
    n = atom_count()
    _ = a * b + sin(b + a)
    _ = a * b + sin(b + a)
    assert atom_count() == n + 1  # only the sum is new
    assert _.args[0] in parts and _.args[1] in parts


def test_negation_and_subtraction_share():
    a, b = symbols("na nb")
    assert -(a * b) is -(b * a)
    assert (-(a * b)).args[0] is a * b
    assert b - a is -(a - b)
    assert (-a) * b is -(a * b)
    assert (-a) + (-b) is -(a + b)
    assert -(-a) is a
    assert (-2) * a is -(2 * a)


def test_constants_fold():
    a = symbol("fa")
    assert a - a is ZERO
    assert a * 0 is ZERO
    assert a * 1 is a
    assert a + 0 is a
    assert (a * -1) is -a
    assert a / a is ONE
    assert const(2) * const(3) is const(6)
    assert 2 * (3 * a) is 6 * a
    assert a + a is 2 * a
    assert 2 * a + 3 * a is 5 * a
    assert 2 * a - 2 * a is ZERO
    assert sin(const(0.0)) is ZERO
    assert sqrt(const(4.0)) is const(2.0)
    assert const(-0.0) is ZERO
    assert a * a is power(a, 2)
    assert power(a, 2) * a is power(a, 3)
    assert (a / 4).op == "mul"  # division by a constant is a multiplication


def test_errors_name_the_problem():
    a = symbol("ea")
    with pytest.raises(ExpressionError, match="division by zero"):
        a / 0
    with pytest.raises(ExpressionError, match=r"sqrt of a negative constant: sqrt\(-4.0\)"):
        sqrt(const(-4.0))
    with pytest.raises(ExpressionError, match="kind"):
        symbol("ea", "q")
    with pytest.raises(TypeError, match="truth value"):
        bool(a)


def test_canonical_order_does_not_depend_on_process_or_creation_order():
    """Commutative order comes from a structural key, so another process that creates the
    symbols in the opposite order, with another hash seed, prints the same text."""
    script = (
        "import sys; from mbforge.ir import symbols, sin, to_text\n"
        "names = 'cx cy cz'.split()\n"
        "s = {a.value.name: a for a in symbols(' '.join(names[::int(sys.argv[1])]))}\n"
        "x, y, z = s['cx'], s['cy'], s['cz']\n"
        "print(to_text(sin(z * y + x) * (y - z) + x * z))\n"
    )
    outs = set()
    for order, seed in (("1", "1"), ("-1", "2")):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", script, order], capture_output=True, text=True, env=env, check=True)
        outs.add(r.stdout)
    assert len(outs) == 1, outs


def test_text_and_dump():
    a, b = symbols("ta tb")
    e = sin(a * b) / b - a
    assert to_text(e) in ("sin(ta*tb)/tb - ta", "-(ta - sin(ta*tb)/tb)", "sin(tb*ta)/tb - ta")
    text = dump([e])
    assert text.splitlines()[-1].startswith("out[0] = t")
    assert any(" = sin(" in line for line in text.splitlines())


def test_lowering_counts():
    a, b = symbols("la lb")
    # sin and cos of one argument: one sincos; x**5: three multiplications
    c = op_counts([sin(a) * cos(a), power(b, 5)])
    assert c["sincos"] == 1 and c["mul"] == 4 and c["total"] == 5
    # a - b is one subtraction, not a negation and an addition
    assert op_counts([a - b]) == {"sub": 1, "total": 1}
    # -(a - b) alone is printed as b - a
    assert op_counts([b - a]) == {"sub": 1, "total": 1}
    t = lower([a - b, b - a])
    assert t.counts()["total"] == 2


def test_negations_fold_into_the_instructions_they_negate():
    a, b, c = symbols("ng_a ng_b ng_c")
    # -(2a + b*b) = (-2)*a - b*b: three instructions, no negation
    assert op_counts([-(2 * a + b * b)]) == {"mul": 2, "sub": 1, "total": 3}
    # -((b - c) * a) = (c - b) * a
    assert op_counts([-((b - c) * a)]) == {"mul": 1, "sub": 1, "total": 2}
    # when b - c is needed as well, the negation stays (computing both costs the same)
    assert op_counts([-((b - c) * a), b - c])["total"] == 3


def test_sin_squared_plus_cos_squared_folds():
    from mbforge.ir import cos, sin

    u = symbol("py_u")
    assert sin(u) ** 2 + cos(u) ** 2 is ONE
    assert 3 * cos(2 * u) ** 2 + 3 * sin(2 * u) ** 2 is const(3.0)
    assert (sin(u) ** 2 + 2 * cos(u) ** 2).op == "add"  # unequal coefficients stay
    v = symbol("py_v")
    assert 2 * cos(u) ** 2 + v + 2 * sin(u) ** 2 is v + 2


def test_sine_and_cosine_of_an_atan2_angle_are_its_ratios():
    """sin(atan2(y, x)) = y / r and cos(...) = x / r, r = sqrt(x^2 + y^2): a rotation by an
    angle given in closed form (stewart_relative's piston spin) needs no atan2, so every
    target (c-float32 has none, range analysis has no rule for it) takes it."""
    import math

    import numpy as np

    from mbforge.ir import Evaluator, atan2, time_derivative

    y, x, yd, xd = symbols("at_y at_x at_yd at_xd")
    a = atan2(y, x)
    r = sqrt(x * x + y * y)
    assert sin(a) is y / r and cos(a) is x / r and sin(-a) is -(y / r) and cos(-a) is x / r
    outs = [sin(a), cos(a), sin(2 * a), a, *time_derivative([sin(a), cos(a)], {y: yd, x: xd})]
    assert "atan2" not in op_counts(outs[:2] + outs[4:])
    assert op_counts(outs)["atan2"] == 1  # the angle itself (and sin(2 a)) keep it
    P = np.random.default_rng(0).uniform(-2, 2, (400, 4))  # every quadrant, both sides of the branch cut
    got = Evaluator(outs, [y, x, yd, xd])(P)
    ang = np.arctan2(P[:, 0], P[:, 1])
    rate = (P[:, 1] * P[:, 2] - P[:, 0] * P[:, 3]) / (P[:, 0] ** 2 + P[:, 1] ** 2)
    want = np.column_stack([np.sin(ang), np.cos(ang), np.sin(2 * ang), ang, np.cos(ang) * rate, -np.sin(ang) * rate])
    assert np.max(np.abs(got - want)) < 1e-12
    assert math.isclose(float(np.ravel(Evaluator([sin(a)], [y, x])(np.array([[-1e-3, -5.0]])))[0]),
                        math.sin(math.atan2(-1e-3, -5.0)))


def test_math_functions_take_numbers():
    # closed forms written once for numbers and expressions alike (issue 33: sqrt(2.0) raised)
    from mbforge.ir import cos, exp, log, sin, sqrt, tan

    for fn, x in ((sqrt, 2.0), (sin, 0.3), (cos, 1), (tan, 0.2), (exp, 1.5), (log, 3.0)):
        a = fn(x)
        assert a.op == "const" and a.value == getattr(math, fn.__name__)(x)
    with pytest.raises(ExpressionError, match="sqrt of a negative constant"):
        sqrt(-1.0)
