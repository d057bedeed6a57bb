"""Atoms: immutable, interned expression nodes ("on-the-fly atomization").

Every operation goes through a constructor that canonicalises its arguments, folds
constants and looks the result up in one intern table, so that an expression built twice
is one object (`a*b is b*a`). Invariants:

* `Atom.op` is a key of `ops.OPS` (the op table); `args` are atoms; `value` is the float of
  a constant, the Symbol of a symbol, the exponent of a power, else None.
* Constants are finite floats; -0.0 is stored as 0.0.
* Commutative arguments are ordered by `key`, a structural hash that depends only on the
  expression (never on the process, the creation order, PYTHONHASHSEED or the other models
  in the process), so generated code is byte-identical from run to run. A symbol's key is
  its name's: two scopes' same-named symbols are distinct atoms with equal keys, ordered by
  their text and then by scope only where one expression mixes them.
* Negations are pushed outwards (`(-a)*b -> -(a*b)`, `-2*x -> -(2*x)`) and a difference
  keeps its earlier operand positive (`y - x -> -(x - y)`), so `-(a*b)` and `x - y` share
  atoms with `a*b` and `y - x`.
* Symbols belong to a Scope (each Model owns one; `symbol()` uses the default scope): one
  atom per name within a scope, distinct atoms across scopes.
* `mask` is the set of free symbols as a bit mask (bit = Symbol.index); passes use it to
  skip sub-graphs that do not depend on what they differentiate or substitute. Bits are
  unique among live symbols (a dead symbol's bit is reused), so masks are exact; which bit
  a symbol gets depends on the process and must never decide an order.
* The intern table holds atoms weakly: an atom lives as long as something (a model, an
  expression using it, a caller) refers to it, and then is one object. Atoms never form
  reference cycles, so they are freed as soon as the last reference goes.
* This module imports only ops.py and text.py of the IR; the sympy bridge registers itself
  as a converter (register_converter) instead of being imported here.
"""
from __future__ import annotations

import hashlib
import heapq
import math
import weakref
from dataclasses import dataclass

from .ops import FUNCTIONS, OPS  # noqa: F401  (FUNCTIONS: the one-argument functions, re-exported)
from .text import to_text


class ExpressionError(ValueError):
    """An expression that cannot be built or evaluated (names the atom and operands)."""


SYMBOL_KINDS = ("q", "qd", "qdd", "t", "param", "input")


@dataclass(frozen=True, eq=False)
class Symbol:
    name: str
    kind: str
    index: int  # bit position in masks: unique among live symbols, process-dependent
    default: float | None = None  # parameters: value used when folded in
    range: tuple[float, float] | None = None  # parameters: where a runtime value may lie
    scope: str = ""  # name of the owning scope ("" for the default scope)
    serial: int = 0  # the owning scope's creation number (0: default); settles ties only

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
        return to_text(self)

    def __bool__(self):
        raise TypeError("an Atom has no truth value (compare with `is`, or test .is_const)")


# Intern table: (op, [value,] id of each argument) -> weak reference to the atom. While an
# atom lives its arguments live, so their ids in its key are theirs; once an argument
# dies every atom over it is dead too, so an entry whose ids were reused by new objects
# only ever holds a dead reference, which a lookup overwrites. Dead entries are swept
# when the table has doubled since the last sweep (amortised O(1) per atom, and no
# callback per freed atom: those cost more than the sweeps).
_table: dict[tuple, weakref.ref] = {}
_ref = weakref.ref
_SWEEP_MIN = 1 << 16
_sweep_at = _SWEEP_MIN


def _sweep() -> None:
    global _sweep_at
    for k in [k for k, r in _table.items() if r() is None]:
        del _table[k]
    _sweep_at = max(_SWEEP_MIN, 2 * len(_table))


def _intern(op: str, args: tuple, value=None, vkey: int = 0) -> Atom:
    if value is not None:
        k = (op, value, id(args[0]))
    elif len(args) == 2:
        k = (op, id(args[0]), id(args[1]))
    else:
        k = (op, id(args[0]))
    r = _table.get(k)
    if r is not None:
        a = r()
        if a is not None:
            return a
    mask = 0
    for x in args:
        mask |= x.mask
    if len(args) == 1:
        key = _mix(_OPKEY[op], vkey, args[0].key)
    else:
        key = _mix(_OPKEY[op], vkey, args[0].key, args[1].key)
    a = Atom(op, args, value, key, mask)
    _table[k] = _ref(a)
    if len(_table) > _sweep_at:
        _sweep()
    return a


def atom_count() -> int:
    """How many distinct atoms are alive in this process (for benchmarks)."""
    _sweep()
    return len(_table)


# ---- leaves --------------------------------------------------------------------------------
def const(v) -> Atom:
    v = float(v)
    if not math.isfinite(v):
        raise ExpressionError(f"constant {v!r} is not finite")
    if v == 0.0:
        v = 0.0  # -0.0 -> 0.0
    k = ("const", v)
    r = _table.get(k)
    if r is not None:
        a = r()
        if a is not None:
            return a
    a = Atom("const", (), v, _mix(_OPKEY["const"], hash(v)), 0)
    _table[k] = _ref(a)
    return a


ZERO = const(0.0)
ONE = const(1.0)
TWO = const(2.0)


# ---- symbols and their scopes ----------------------------------------------------------------
_free_bits: list[int] = []  # mask bits of dead symbols, smallest first (keeps masks short)
_next_bit = 0
_scope_count = 0


def _take_bit() -> int:
    global _next_bit
    if _free_bits:
        return heapq.heappop(_free_bits)
    _next_bit += 1
    return _next_bit - 1


def _release_bit(i: int) -> None:
    heapq.heappush(_free_bits, i)


class Scope:
    """The symbols of one model (or of free-standing expressions): one atom per name.

    Two scopes may use the same name; their atoms are distinct (expressions tell the models
    apart) but print and order alike, so one model's generated code does not depend on which
    other models exist in the process. A scope keeps its symbols alive, nothing more.
    """

    def __init__(self, name: str = ""):
        global _scope_count
        self.name = name
        _scope_count += 1
        self.serial = _scope_count if name else 0
        self._symbols: dict[str, Atom] = {}

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, {len(self._symbols)} symbols)"

    def __contains__(self, name: str) -> bool:
        return name in self._symbols

    def __len__(self) -> int:
        return len(self._symbols)

    def get(self, name: str) -> Atom | None:
        """The symbol called `name` in this scope, or None."""
        return self._symbols.get(name)

    def names(self) -> list[str]:
        return list(self._symbols)

    def symbol(self, name: str, kind: str = "input", default: float | None = None, range=None) -> Atom:
        """The symbol called `name` (made on first use; its kind and value must not change)."""
        _check_kind(name, kind)
        a = self._symbols.get(name)
        if a is None:
            return self._create(name, kind, default, range)
        s = a.value
        if s.kind != kind:
            raise ExpressionError(f"symbol {name!r} already exists with kind {s.kind!r}, not {kind!r}")
        if default is not None and s.default is not None and float(default) != s.default:
            raise ExpressionError(f"parameter {name!r} already exists with value {s.default}, not {default}")
        return a

    def new(self, name: str, kind: str = "input", default: float | None = None, range=None) -> Atom:
        """A new symbol `name`; an error naming it if this scope has one already."""
        _check_kind(name, kind)
        a = self._symbols.get(name)
        if a is not None:
            raise ExpressionError(f"the name {name!r} is taken (by a symbol of kind {a.value.kind!r})")
        return self._create(name, kind, default, range)

    def _create(self, name: str, kind: str, default, range) -> Atom:
        bit = _take_bit()
        s = Symbol(name, kind, bit, None if default is None else float(default),
                   None if range is None else (float(range[0]), float(range[1])), self.name, self.serial)
        a = Atom("sym", (), s, _mix(_OPKEY["sym"], _name_key(name)), 1 << bit)
        weakref.finalize(a, _release_bit, bit).atexit = False  # no atom carries the bit then
        self._symbols[name] = a
        return a


def _check_kind(name: str, kind: str) -> None:
    if kind not in SYMBOL_KINDS:
        raise ExpressionError(f"symbol {name!r}: kind {kind!r} is not one of {SYMBOL_KINDS}")


DEFAULT_SCOPE = Scope()


def symbol(name: str, kind: str = "input", default: float | None = None, range=None) -> Atom:
    """The symbol called `name` in the default scope (one atom per name; its kind must not
    change). A Model makes its symbols in its own scope (Model.scope)."""
    return DEFAULT_SCOPE.symbol(name, kind, default, range)


def symbols(names, kind: str = "input", scope: Scope | None = None) -> list[Atom]:
    if isinstance(names, str):
        names = names.replace(",", " ").split()
    sc = DEFAULT_SCOPE if scope is None else scope
    return [sc.symbol(n, kind) for n in names]


# Converters of foreign expressions (sympy) to atoms, registered by their bridges: this
# module imports none of them.
_converters: list = []


def register_converter(fn) -> None:
    """fn(x) -> Atom, or None when x is not its kind of expression; as_atom tries each."""
    if fn not in _converters:
        _converters.append(fn)


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
    for conv in _converters:
        r = conv(x)
        if r is not None:
            return r
    raise ExpressionError(f"cannot make an expression from {type(x).__name__} {x!r}")


def _first(a: Atom, b: Atom) -> bool:
    """Canonical order of two distinct atoms: True if a goes first."""
    if a.key != b.key:
        return a.key < b.key
    ta, tb = to_text(a), to_text(b)  # a 61-bit collision, or same-named symbols of two scopes
    if ta != tb:
        return ta < tb
    return _scope_serials(a) < _scope_serials(b)


def _scope_serials(a: Atom) -> tuple:
    """The scopes of a's symbols, left to right. Only reached when one expression mixes
    two models' same-named symbols, which no single model's generated code does."""
    out, stack, seen = [], [a], set()
    while stack:  # depth first, left to right, each shared atom once
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if x.op == "sym":
            out.append(x.value.serial)
        stack.extend(reversed(x.args))
    return tuple(out)


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


def mul_kept(a: Atom, b: Atom) -> Atom:
    """a * b as one product of these two operands: where mul moves a constant factor of
    an operand out (c x * y = c (x y)), this keeps c x whole, so the product reads the
    operand as computed (analysis.ldlback replays a solve's products by their operands'
    roles). Constants, negations and operand order fold as in mul."""
    if a.op == "neg":
        return neg(mul_kept(a.args[0], b))
    if b.op == "neg":
        return neg(mul_kept(a, b.args[0]))
    if b.op == "const" and a.op != "const":
        a, b = b, a
    scaled = [x for x in (a, b) if x.op == "mul" and x.args[0].op == "const"]
    if not scaled or a.op == "const" and (b.op == "const" or a.value in (0.0, 1.0)):
        return mul(a, b)
    if a.op == "const":
        if a.value < 0.0:
            return neg(mul_kept(const(-a.value), b))
        return _intern("mul", (a, b))
    if not _first(a, b):
        a, b = b, a
    return _intern("mul", (a, b))


def div_kept(a: Atom, b: Atom) -> Atom:
    """a / b as one quotient of these two operands (as mul_kept: where div moves a constant
    factor out, (c x) / y = c (x / y), this keeps c x whole). Negations fold as in div."""
    if a.op == "neg":
        return neg(div_kept(a.args[0], b))
    if b.op == "neg":
        return neg(div_kept(a, b.args[0]))
    if b.op == "const" or not (a.op == "mul" and a.args[0].op == "const" or b.op == "mul" and b.args[0].op == "const"):
        return div(a, b)
    return _intern("div", (a, b))


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


def sqrt(a: Atom | float) -> Atom:
    a = as_atom(a)  # a number folds to a constant, as in closed forms that serve both
    if a.op == "const":
        if a.value < 0.0:
            raise ExpressionError(f"sqrt of a negative constant: sqrt({a.value!r})")
        return const(math.sqrt(a.value))
    return _intern("sqrt", (a,))


def _polar(a: Atom) -> tuple[Atom, Atom]:
    """(y, r) of an angle atan2(y, x): r = sqrt(x^2 + y^2)."""
    y, x = a.args
    return y, sqrt(add(mul(x, x), mul(y, y)))


def sin(a: Atom | float) -> Atom:
    a = as_atom(a)
    if a.op == "const":
        return const(math.sin(a.value))
    if a.op == "neg":
        return neg(sin(a.args[0]))
    if a.op == "atan2":  # y / r: no angle where only its rotation is used (a relative joint's closed form)
        y, r = _polar(a)
        return div(y, r)
    return _intern("sin", (a,))


def cos(a: Atom | float) -> Atom:
    a = as_atom(a)
    if a.op == "const":
        return const(math.cos(a.value))
    if a.op == "neg":
        return cos(a.args[0])
    if a.op == "atan2":  # x / r
        _, r = _polar(a)
        return div(a.args[1], r)
    return _intern("cos", (a,))


def tan(a: Atom | float) -> Atom:
    a = as_atom(a)
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


def exp(a: Atom | float) -> Atom:
    a = as_atom(a)
    if a.op == "const":
        if a.value > 709.0:
            raise ExpressionError(f"exp({a.value!r}) overflows double precision")
        return const(math.exp(a.value))
    return _intern("exp", (a,))


def log(a: Atom | float) -> Atom:
    a = as_atom(a)
    if a.op == "const":
        if a.value <= 0.0:
            raise ExpressionError(f"log of a non-positive constant: log({a.value!r})")
        return const(math.log(a.value))
    return _intern("log", (a,))


def abs_(a: Atom | float) -> Atom:
    a = as_atom(a)
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

if set(_BUILDERS) | {"pow", "const", "sym"} != set(OPS):  # pragma: no cover
    raise ImportError("ir/ops.py and the constructors of ir/atom.py name different ops")
