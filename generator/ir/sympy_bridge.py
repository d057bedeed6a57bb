"""Between sympy and atoms: users write force laws and driving functions in sympy, and any
atom can be read back as a sympy expression (for checks and for printing).

Importing this module registers `from_sympy` with `atom.as_atom` (the atoms do not import
sympy); sympy symbols become symbols of a Scope, the default one unless told.

Invariant: importing this module (and so mbforge.ir) does not import sympy; sympy is
imported on the first conversion. It costs about a second, and a command that reads no
sympy expression (`mbforge generate` of a shipped example) should not pay it; a sympy
expression can only exist once its author imported sympy."""
from __future__ import annotations

import math
from functools import lru_cache

from .atom import (DEFAULT_SCOPE, ONE, Atom, ExpressionError, Scope, abs_, add, atan2, const, cos, div, exp,
                   log, mul, power, register_converter, sin, sqrt, tan)
from .graph import translate


@lru_cache(maxsize=None)
def _sp():
    """sympy and the function tables of both directions, on first use."""
    import sympy as sp

    funcs = {sp.sin: sin, sp.cos: cos, sp.tan: tan, sp.exp: exp, sp.log: log, sp.Abs: abs_}
    to = {"sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "exp": sp.exp, "log": sp.log, "abs": sp.Abs,
          "sqrt": sp.sqrt, "atan2": sp.atan2}
    return sp, funcs, to


def from_sympy(expr, symbols: dict | None = None, scope: Scope | None = None) -> Atom:
    """Atoms from a sympy expression. Symbols map through `symbols` ({sympy.Symbol: Atom});
    others become the symbol of the same name in `scope` (default: the default scope): an
    existing one keeps its kind, a new one is made as kind 'input'."""
    sp, _FUNCS, _ = _sp()
    expr = sp.sympify(expr)
    symbols = symbols or {}
    scope = DEFAULT_SCOPE if scope is None else scope
    memo: dict = {}

    def conv(e):
        if e in memo:
            return memo[e]
        if e.is_Symbol:
            r = symbols.get(e)
            if r is None:
                r = scope.get(e.name)  # an existing symbol keeps its kind
                if r is None:
                    r = scope.symbol(e.name)
        elif e.is_Number:
            if not e.is_real:
                raise ExpressionError(f"complex number {e} in {expr}")
            r = const(float(e))
        elif e is sp.pi:
            r = const(math.pi)
        elif e is sp.E:
            r = const(math.e)
        elif e.is_Add:
            r = conv(e.args[0])
            for a in e.args[1:]:
                r = add(r, conv(a))
        elif e.is_Mul:
            r = conv(e.args[0])
            for a in e.args[1:]:
                r = mul(r, conv(a))
        elif e.is_Pow:
            base, ex = e.args
            b = conv(base)
            if ex.is_Integer:
                r = power(b, int(ex))
            elif ex == sp.Rational(1, 2):
                r = sqrt(b)
            elif ex == sp.Rational(-1, 2):
                r = div(ONE, sqrt(b))
            elif ex.is_Rational and ex.q == 2:
                r = power(sqrt(b), int(ex.p))
            else:
                raise ExpressionError(f"power with exponent {ex} in {expr}: only integers and halves")
        elif e.func in _FUNCS:
            r = _FUNCS[e.func](conv(e.args[0]))
        elif e.func is sp.atan:
            r = atan2(conv(e.args[0]), ONE)
        elif e.func is sp.atan2:
            r = atan2(conv(e.args[0]), conv(e.args[1]))
        else:
            raise ExpressionError(f"sympy {e.func.__name__} in {expr} has no atom")
        memo[e] = r
        return r

    return conv(expr)


def _convert(x) -> Atom | None:
    """as_atom's hook: a sympy expression (duck-typed, as sympy objects are), else None."""
    if hasattr(x, "free_symbols") and hasattr(x, "func"):
        return from_sympy(x)
    return None


register_converter(_convert)


def _sympy_const(v: float):
    sp = _sp()[0]
    return sp.Integer(int(v)) if v.is_integer() else sp.Float(v)


def to_sympy(root: Atom, symbols: dict | None = None):
    """The sympy expression of an atom; `symbols` maps atom symbols to sympy symbols."""
    sp, _, _TO = _sp()
    symbols = symbols or {}

    def sym(a):
        s = symbols.get(a)
        return s if s is not None else sp.Symbol(a.value.name, real=True)

    return translate([root], _sympy_const, sym, _TO)[0]
