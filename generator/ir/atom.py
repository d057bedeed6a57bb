"""Atoms: immutable, interned expression nodes ("on-the-fly atomization").

Every operation goes through a constructor that canonicalises its arguments, folds
constants and looks the result up in one intern table, so that an expression built twice
is one object (`a*b is b*a`). Invariants:

* `Atom.op` is one of OPS; `args` are atoms; `value` is the float of a constant or the
  Symbol of a symbol, else None.
* Constants are finite floats; -0.0 is stored as 0.0.
* Commutative arguments are ordered by `key`, a structural hash that depends only on the
  expression (never on the process, the creation order or PYTHONHASHSEED), so generated
  code is byte-identical from run to run.
* Negations are pushed outwards (`(-a)*b -> -(a*b)`, `-2*x -> -(2*x)`) and a difference
  keeps its earlier operand positive (`y - x -> -(x - y)`), so `-(a*b)` and `x - y` share
  atoms with `a*b` and `y - x`.
* `mask` is the set of free symbols as a bit mask (bit = Symbol.index); passes use it to
  skip sub-graphs that do not depend on what they differentiate or substitute.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

# The op table as data: name -> (arity, commutative). Evaluation, derivatives and the
# spelling per target live with their passes and renderers.
OPS: dict[str, tuple[int, bool]] = {
    "const": (0, False),
    "sym": (0, False),
    "add": (2, True),
    "mul": (2, True),
    "neg": (1, False),
    "div": (2, False),
    "pow": (1, False),  # integer power; the exponent is `value`
    "sqrt": (1, False),
    "sin": (1, False),
    "cos": (1, False),
    "tan": (1, False),
    "atan2": (2, False),
    "exp": (1, False),
    "log": (1, False),
    "abs": (1, False),
}
FUNCTIONS = ("sqrt", "sin", "cos", "tan", "exp", "log", "abs")


class ExpressionError(ValueError):
    """An expression that cannot be built or evaluated (names the atom and operands)."""


SYMBOL_KINDS = ("q", "qd", "qdd", "t", "param", "input")


@dataclass(frozen=True, eq=False)
class Symbol:
    name: str
    kind: str
    index: int  # bit position in masks; creation order within the process
    default: float | None = None  # parameters: value used when folded in
    range: tuple[float, float] | None = None  # parameters: where a runtime value may lie

    def __repr__(self) -> str:
        return self.name


_M = (1 << 61) - 1  # keys live in a Mersenne field: cheap, well mixed, deterministic


def _mix(*parts: int) -> int:
    h = 0x9E3779B97F4A7C15
    for p in parts:
        h = ((h ^ p) * 0x100000001B3 + 0x632BE59BD9B4E019) % _M
    return h


def _name_key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


_OPKEY = {op: _name_key(op) for op in OPS}


class Atom:
    __slots__ = ("op", "args", "value", "key", "mask", "__weakref__")

    # Atoms compare by identity (they are interned); == is NOT overloaded on purpose.

    def __init__(self, op: str, args: tuple, value, key: int, mask: int):
        self.op = op
        self.args = args
        self.value = value
        self.key = key
        self.mask = mask

    # ---- arithmetic sugar --------------------------------------------------------------
    def __add__(self, o):
        return add(self, as_atom(o))

    def __radd__(self, o):
        return add(as_atom(o), self)

    def __sub__(self, o):
        return sub(self, as_atom(o))

    def __rsub__(self, o):
        return sub(as_atom(o), self)

    def __mul__(self, o):
        return mul(self, as_atom(o))

    def __rmul__(self, o):
        return mul(as_atom(o), self)

    def __truediv__(self, o):
        return div(self, as_atom(o))

    def __rtruediv__(self, o):
        return div(as_atom(o), self)

    def __neg__(self):
        return neg(self)

    def __pos__(self):
        return self

    def __pow__(self, n):
        if isinstance(n, Atom) and n.op == "const":
            n = n.value
        if isinstance(n, float) and n.is_integer():
            n = int(n)
        if isinstance(n, int):
            return power(self, n)
        if n == 0.5:
            return sqrt(self)
        raise ExpressionError(f"only integer powers and **0.5 are supported, got {n!r} on {self}")

    # ---- inspection --------------------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return self.op == "const"

    @property
    def is_symbol(self) -> bool:
        return self.op == "sym"

    def __repr__(self) -> str:
        from .inspect import to_text

        return to_text(self)

    def __bool__(self):
        raise TypeError("an Atom has no truth value (compare with `is`, or test .is_const)")


_table: dict[tuple, Atom] = {}
_symbols: dict[str, Atom] = {}


def _intern(op: str, args: tuple, value=None, vkey: int = 0) -> Atom:
    k = (op, *args) if value is None else (op, value, *args)
    a = _table.get(k)
    if a is None:
        mask = 0
        for x in args:
            mask |= x.mask
        if len(args) == 1:
            key = _mix(_OPKEY[op], vkey, args[0].key)
        elif len(args) == 2:
            key = _mix(_OPKEY[op], vkey, args[0].key, args[1].key)
        else:
            key = _mix(_OPKEY[op], vkey)
        a = Atom(op, args, value, key, mask)
        _table[k] = a
    return a


def atom_count() -> int:
    """How many distinct atoms this process holds (for benchmarks)."""
    return len(_table)


# ---- leaves --------------------------------------------------------------------------------
def const(v) -> Atom:
    v = float(v)
    if not math.isfinite(v):
        raise ExpressionError(f"constant {v!r} is not finite")
    if v == 0.0:
        v = 0.0  # -0.0 -> 0.0
    k = ("const", v)
    a = _table.get(k)
    if a is None:
        a = Atom("const", (), v, _mix(_OPKEY["const"], hash(v)), 0)
        _table[k] = a
    return a


ZERO = const(0.0)
ONE = const(1.0)
TWO = const(2.0)


def symbol(name: str, kind: str = "input", default: float | None = None, range=None) -> Atom:
    """The symbol called `name` (one atom per name; its kind must not change)."""
    if kind not in SYMBOL_KINDS:
        raise ExpressionError(f"symbol {name!r}: kind {kind!r} is not one of {SYMBOL_KINDS}")
    a = _symbols.get(name)
    if a is not None:
        s = a.value
        if s.kind != kind:
            raise ExpressionError(f"symbol {name!r} already exists with kind {s.kind!r}, not {kind!r}")
        if default is not None and s.default is not None and float(default) != s.default:
            raise ExpressionError(f"parameter {name!r} already exists with value {s.default}, not {default}")
        return a
    s = Symbol(name, kind, len(_symbols), None if default is None else float(default),
               None if range is None else (float(range[0]), float(range[1])))
    a = Atom("sym", (), s, _mix(_OPKEY["sym"], _name_key(name)), 1 << s.index)
    _symbols[name] = a
    return a


def symbols(names, kind: str = "input") -> list[Atom]:
    if isinstance(names, str):
        names = names.replace(",", " ").split()
    return [symbol(n, kind) for n in names]


def as_atom(x) -> Atom:
    if isinstance(x, Atom):
        return x
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return const(x)
    try:
        import numpy as np

        if isinstance(x, np.generic) and np.isrealobj(x):
            return const(float(x))
    except ImportError:  # pragma: no cover
        pass
    if hasattr(x, "free_symbols") and hasattr(x, "func"):  # a sympy expression
        from .sympy_bridge import from_sympy

        return from_sympy(x)
    raise ExpressionError(f"cannot make an expression from {type(x).__name__} {x!r}")


def _first(a: Atom, b: Atom) -> bool:
    """Canonical order of two distinct atoms: True if a goes first."""
    if a.key != b.key:
        return a.key < b.key
    from .inspect import to_text  # a 61-bit collision: settle it by the printed form

    return to_text(a) < to_text(b)


def _split(a: Atom) -> tuple[float, Atom]:
    """a == c * base with c a number: (c, base)."""
    sign = 1.0
    if a.op == "neg":
        sign, a = -1.0, a.args[0]
    if a.op == "mul" and a.args[0].op == "const":
        return sign * a.args[0].value, a.args[1]
    return sign, a


def _pythagorean(a: Atom, b: Atom) -> bool:
    """a, b are sin(u)**2 and cos(u)**2 (either order) of one u."""
    if a.op != "pow" or b.op != "pow" or a.value != 2 or b.value != 2:
        return False
    x, y = a.args[0], b.args[0]
    return {x.op, y.op} == {"sin", "cos"} and x.args[0] is y.args[0]


# ---- operations ----------------------------------------------------------------------------
def neg(a: Atom) -> Atom:
    op = a.op
    if op == "const":
        return const(-a.value)
    if op == "neg":
        return a.args[0]
    return _intern("neg", (a,))


def add(a: Atom, b: Atom) -> Atom:
    ao, bo = a.op, b.op
    if ao == "const":
        if bo == "const":
            return const(a.value + b.value)
        if a.value == 0.0:
            return b
        if bo == "add" and b.args[0].op == "const":  # c1 + (c2 + x)
            return add(const(a.value + b.args[0].value), b.args[1])
        return _intern("add", (a, b))  # a constant term always comes first
    elif bo == "const":
        if b.value == 0.0:
            return a
        return add(b, a)
    else:
        if a is b:
            return mul(TWO, a)
        ca, xa = _split(a)
        cb, xb = _split(b)
        if xa is xb:  # like terms: c1*x + c2*x
            return mul(const(ca + cb), xa)
        if ca == cb and _pythagorean(xa, xb):  # c sin(u)^2 + c cos(u)^2 = c
            return const(ca)
        for p, s_ in ((a, b), (b, a)):  # (y + c sin^2) + c cos^2 = y + c, one level deep
            if s_.op == "add" and _split(p)[1].op == "pow":
                cp, xp = _split(p)
                for y, z in ((s_.args[0], s_.args[1]), (s_.args[1], s_.args[0])):
                    cz, xz = _split(z)
                    if cz == cp and _pythagorean(xp, xz):
                        return add(y, const(cp))
        if ao == "neg":
            if bo == "neg":  # (-x) + (-y) = -(x + y)
                return neg(add(a.args[0], b.args[0]))
            a, b = b, a  # keep the positive term first: p + (-n)
        if b.op == "neg":
            n = b.args[0]
            if _first(n, a):  # p - n with n earlier: -(n - p)
                return neg(_intern("add", (n, neg(a))))
            return _intern("add", (a, b))
    if not _first(a, b):
        a, b = b, a
    return _intern("add", (a, b))


def sub(a: Atom, b: Atom) -> Atom:
    return add(a, neg(b))


def mul(a: Atom, b: Atom) -> Atom:
    ao, bo = a.op, b.op
    if bo == "const" and ao != "const":
        a, b, ao, bo = b, a, bo, ao
    if ao == "const":
        c = a.value
        if bo == "const":
            return const(c * b.value)
        if c == 0.0:
            return ZERO
        if c == 1.0:
            return b
        if c == -1.0:
            return neg(b)
        if bo == "neg":
            return neg(mul(a, b.args[0]))
        if c < 0.0:
            return neg(mul(const(-c), b))
        if bo == "mul" and b.args[0].op == "const":  # c1 * (c2 * x)
            return mul(const(c * b.args[0].value), b.args[1])
        return _intern("mul", (a, b))
    if ao == "neg":
        return neg(mul(a.args[0], b))
    if bo == "neg":
        return neg(mul(a, b.args[0]))
    if bo == "mul" and b.args[0].op == "const":  # x * (c * y) = c * (x * y)
        return mul(b.args[0], mul(a, b.args[1]))
    if ao == "mul" and a.args[0].op == "const":
        return mul(a.args[0], mul(a.args[1], b))
    if a is b:
        return power(a, 2)
    pa, ea = (a.args[0], a.value) if ao == "pow" else (a, 1)
    pb, eb = (b.args[0], b.value) if bo == "pow" else (b, 1)
    if pa is pb:
        return power(pa, ea + eb)
    if not _first(a, b):
        a, b = b, a
    return _intern("mul", (a, b))


def div(a: Atom, b: Atom) -> Atom:
    if b.op == "const":
        if b.value == 0.0:
            raise ExpressionError(f"division by zero: ({a}) / 0")
        return mul(const(1.0 / b.value), a)
    if a.op == "const" and a.value == 0.0:
        return ZERO
    if a is b:
        return ONE
    if a.op == "neg":
        return neg(div(a.args[0], b))
    if b.op == "neg":
        return neg(div(a, b.args[0]))
    if a.op == "mul" and a.args[0].op == "const":
        return mul(a.args[0], div(a.args[1], b))  # (c*x)/y = c*(x/y): shares x/y
    if b.op == "mul" and b.args[0].op == "const":
        return mul(const(1.0 / b.args[0].value), div(a, b.args[1]))
    return _intern("div", (a, b))


def power(a: Atom, n: int) -> Atom:
    n = int(n)
    if n == 0:
        return ONE
    if n == 1:
        return a
    if a.op == "const":
        if a.value == 0.0 and n < 0:
            raise ExpressionError(f"division by zero: 0 ** {n}")
        try:
            return const(a.value ** n)
        except OverflowError:
            raise ExpressionError(f"{a.value!r} ** {n} overflows double precision") from None
    if n < 0:
        return div(ONE, power(a, -n))
    if a.op == "pow":
        return power(a.args[0], a.value * n)
    if a.op == "neg":
        p = power(a.args[0], n)
        return p if n % 2 == 0 else neg(p)
    return _intern("pow", (a,), n, n)


def sqrt(a: Atom) -> Atom:
    if a.op == "const":
        if a.value < 0.0:
            raise ExpressionError(f"sqrt of a negative constant: sqrt({a.value!r})")
        return const(math.sqrt(a.value))
    return _intern("sqrt", (a,))


def sin(a: Atom) -> Atom:
    if a.op == "const":
        return const(math.sin(a.value))
    if a.op == "neg":
        return neg(sin(a.args[0]))
    return _intern("sin", (a,))


def cos(a: Atom) -> Atom:
    if a.op == "const":
        return const(math.cos(a.value))
    if a.op == "neg":
        return cos(a.args[0])
    return _intern("cos", (a,))


def tan(a: Atom) -> Atom:
    if a.op == "const":
        return const(math.tan(a.value))
    if a.op == "neg":
        return neg(tan(a.args[0]))
    return _intern("tan", (a,))


def atan2(y: Atom, x: Atom) -> Atom:
    y, x = as_atom(y), as_atom(x)
    if y.op == "const" and x.op == "const":
        return const(math.atan2(y.value, x.value))
    return _intern("atan2", (y, x))


def exp(a: Atom) -> Atom:
    if a.op == "const":
        if a.value > 709.0:
            raise ExpressionError(f"exp({a.value!r}) overflows double precision")
        return const(math.exp(a.value))
    return _intern("exp", (a,))


def log(a: Atom) -> Atom:
    if a.op == "const":
        if a.value <= 0.0:
            raise ExpressionError(f"log of a non-positive constant: log({a.value!r})")
        return const(math.log(a.value))
    return _intern("log", (a,))


def abs_(a: Atom) -> Atom:
    if a.op == "const":
        return const(abs(a.value))
    if a.op == "neg":
        return abs_(a.args[0])
    return _intern("abs", (a,))


def apply(op: str, args: tuple, value=None) -> Atom:
    """Rebuild an atom of kind `op` over new arguments (used by passes)."""
    if op == "pow":
        return power(args[0], value)
    return _BUILDERS[op](*args)


_BUILDERS = {
    "add": add, "mul": mul, "neg": neg, "div": div, "sqrt": sqrt, "sin": sin, "cos": cos,
    "tan": tan, "atan2": atan2, "exp": exp, "log": log, "abs": abs_,
}

