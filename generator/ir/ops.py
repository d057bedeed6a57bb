"""The op table: every operation an atom can be, as data, in one place.

`OPS[name]` describes the op stored as the string `Atom.op`: its arity, whether it is
commutative, how it evaluates (`py` at one point on floats, `np` elementwise on arrays,
`algebra` with Python operators in any algebra: sympy, CasADi...), how it is written in
text (`infix` and `prec`) and how it is differentiated (`forward` and `partials`). The
passes look an op up here instead of branching on its name. Invariants:

* Keys are the op strings; their order is the order of the table below (stable, tests and
  lowered op tuples derive from it).
* `valued` ops (only `pow`) take `Atom.value` (the integer exponent) as a last argument of
  `py`, `np` and `algebra`; leaves (`const`, `sym`) have arity 0 and no functions.
* `forward(a, da, K)` is d a given the derivatives `da` of a's arguments (ZERO when an
  argument does not depend on the variable) and `partials(a, K)` is [d a / d arg_i]; both
  build atoms only through K, the constructors of `ir.atom` passed in by the caller, so this
  module imports nothing of the IR (the IR imports it).
* Derivative rules reuse `a` itself where they can (d sqrt u = du / (2 sqrt u)), so
  derivatives share atoms with the expression; changing a rule changes generated code.

Lowered instructions (`sub`, `sincos` of lower/tape.py) are not atom ops: the tape's own
op table, and the one walk the analyses run over it, are lower/tapeops.py.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Op:
    name: str
    arity: int
    commutative: bool = False
    valued: bool = False  # Atom.value is an operand (pow's exponent)
    py: Callable | None = None  # one point, floats (math functions)
    np: Callable | None = None  # elementwise over numpy arrays
    algebra: Callable | None = None  # Python operator usable in any algebra, else None
    infix: str | None = None  # text spelling of a binary/prefix operator, else f(args)
    prec: int = 5  # text precedence: 1 sum, 2 negation, 3 product/quotient, 4 power, 5 atom/call
    forward: Callable | None = None  # (a, da, K) -> d a
    partials: Callable | None = None  # (a, K) -> [d a / d arg]

    @property
    def is_function(self) -> bool:
        """Written f(args) in text and code (sqrt, sin, ..., atan2)."""
        return self.arity > 0 and self.infix is None


def _d_atan2(a, da, K):  # d atan2(y, x) = (x dy - y dx) / (x^2 + y^2)
    y, x = a.args
    return K.div(K.sub(K.mul(x, da[0]), K.mul(y, da[1])), K.add(K.power(x, 2), K.power(y, 2)))


def _p_atan2(a, K):
    y, x = a.args
    r2 = K.add(K.power(x, 2), K.power(y, 2))
    return [K.div(x, r2), K.neg(K.div(y, r2))]


_TABLE = (
    Op("const", 0),
    Op("sym", 0),
    Op("add", 2, commutative=True, py=operator.add, np=np.add, algebra=operator.add, infix="+", prec=1,
       forward=lambda a, da, K: K.add(da[0], da[1]),
       partials=lambda a, K: [K.ONE, K.ONE]),
    Op("mul", 2, commutative=True, py=operator.mul, np=np.multiply, algebra=operator.mul, infix="*", prec=3,
       forward=lambda a, da, K: K.add(K.mul(da[0], a.args[1]), K.mul(a.args[0], da[1])),
       partials=lambda a, K: [a.args[1], a.args[0]]),
    Op("neg", 1, py=operator.neg, np=np.negative, algebra=operator.neg, infix="-", prec=2,
       forward=lambda a, da, K: K.neg(da[0]),
       partials=lambda a, K: [K.neg(K.ONE)]),
    Op("div", 2, py=operator.truediv, np=np.divide, algebra=operator.truediv, infix="/", prec=3,
       # (du - (u/v) dv) / v: reuses u/v
       forward=lambda a, da, K: K.div(K.sub(da[0], K.mul(a, da[1])), a.args[1]),
       partials=lambda a, K: [K.div(K.ONE, a.args[1]), K.neg(K.div(a, a.args[1]))]),
    Op("pow", 1, valued=True, py=operator.pow, np=operator.pow, algebra=operator.pow, infix="**", prec=4,
       forward=lambda a, da, K: K.mul(K.mul(K.as_atom(a.value), K.power(a.args[0], a.value - 1)), da[0]),
       partials=lambda a, K: [K.mul(K.as_atom(a.value), K.power(a.args[0], a.value - 1))]),
    Op("sqrt", 1, py=math.sqrt, np=np.sqrt,
       forward=lambda a, da, K: K.div(da[0], K.mul(K.TWO, a)),
       partials=lambda a, K: [K.div(K.ONE, K.mul(K.TWO, a))]),
    Op("sin", 1, py=math.sin, np=np.sin,
       forward=lambda a, da, K: K.mul(K.cos(a.args[0]), da[0]),
       partials=lambda a, K: [K.cos(a.args[0])]),
    Op("cos", 1, py=math.cos, np=np.cos,
       forward=lambda a, da, K: K.neg(K.mul(K.sin(a.args[0]), da[0])),
       partials=lambda a, K: [K.neg(K.sin(a.args[0]))]),
    Op("tan", 1, py=math.tan, np=np.tan,
       forward=lambda a, da, K: K.mul(K.add(K.ONE, K.power(a, 2)), da[0]),
       partials=lambda a, K: [K.add(K.ONE, K.power(a, 2))]),
    Op("atan2", 2, py=math.atan2, np=np.arctan2, forward=_d_atan2, partials=_p_atan2),
    Op("exp", 1, py=math.exp, np=np.exp,
       forward=lambda a, da, K: K.mul(a, da[0]),
       partials=lambda a, K: [a]),
    Op("log", 1, py=math.log, np=np.log,
       forward=lambda a, da, K: K.div(da[0], a.args[0]),
       partials=lambda a, K: [K.div(K.ONE, a.args[0])]),
    Op("abs", 1, py=abs, np=np.abs,
       forward=lambda a, da, K: K.mul(K.div(a.args[0], a), da[0]),
       partials=lambda a, K: [K.div(a.args[0], a)]),
)

OPS: dict[str, Op] = {o.name: o for o in _TABLE}
LEAVES = ("const", "sym")
FUNCTIONS = tuple(n for n, o in OPS.items() if o.arity == 1 and o.is_function)  # sqrt, sin, ..., abs
UNARY = tuple(n for n, o in OPS.items() if o.arity == 1 and not o.valued)  # neg and FUNCTIONS
