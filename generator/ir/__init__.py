"""mbforge's atomized expression graph.

    ops.py       the op table: arity, evaluation, derivative rules, text spelling per op
    atom.py      interned atoms, their canonicalising constructors, symbol scopes
    text.py      infix text (from the op table; atom.py prints and orders with it)
    graph.py     iterative traversal
    derive.py    d/dx, d/dt and Jacobians without expansion
    subs.py      substitution without expansion
    linalg.py    vectors, small matrices, sparse matrices and Jacobians
    evaluate.py  the numpy double-precision reference
    inspect.py   text and dumps
    sympy_bridge.py  atoms from and to sympy
"""
from .atom import (DEFAULT_SCOPE, ONE, TWO, ZERO, Atom, ExpressionError, Scope, Symbol, abs_, add, as_atom, mul_kept,
                   div_kept, atan2, atom_count, const, cos, div, exp, log, mul, neg, power, sin, sqrt, sub,
                   symbol, symbols, tan)
from .ops import OPS, Op
from .derive import derivatives, diff, time_derivative
from .evaluate import Evaluator, evaluate
from .graph import flatten, topo
from .linalg import (Sparse, Turn, congruence, cross, dot, folded, folded_mat, folded_vec, identity, is_zero, jacobian,
                     matmul, matvec, mtv, skew, transpose, vadd, vconst, vec, vscale, vsub)
from .inspect import dump, to_text
from .subs import subs, substitute_all
from .sympy_bridge import from_sympy, to_sympy

__all__ = [
    "mul_kept",
    "div_kept",
    "DEFAULT_SCOPE", "OPS", "Op", "Scope", "ONE", "TWO", "ZERO", "Atom", "ExpressionError", "Symbol", "abs_", "add", "as_atom",
    "atan2", "atom_count", "const", "cos", "div", "exp", "log", "mul", "neg", "power", "sin",
    "sqrt", "sub", "symbol", "symbols", "tan", "derivatives", "diff", "jacobian",
    "time_derivative", "Evaluator", "evaluate", "flatten", "topo", "dump",
    "to_text", "subs", "substitute_all", "from_sympy", "to_sympy", "Sparse", "cross", "dot", "matmul",
    "matvec", "skew", "transpose", "vadd", "vec", "vscale", "vsub", "identity", "vconst", "mtv", "folded",
    "folded_vec", "folded_mat", "is_zero", "congruence", "Turn",
]
