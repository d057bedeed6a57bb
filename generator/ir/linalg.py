"""Vectors and matrices of atoms.

Vectors are lists of atoms; small dense matrices are lists of rows. Large matrices
(Jacobians, mass matrices) are `Sparse`: only structurally nonzero entries are stored, so
structural zeros never enter the graph or the generated code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .atom import ONE, ZERO, Atom, ExpressionError, add, as_atom, mul, neg, sub
from .derive import adjoints, derivatives
from .graph import gc_paused, topo


def vec(*xs) -> list[Atom]:
    if len(xs) == 1 and isinstance(xs[0], (list, tuple)):
        xs = xs[0]
    return [as_atom(x) for x in xs]


def _same_len(a, b, what: str) -> None:
    if len(a) != len(b):
        raise ExpressionError(f"{what}: lengths {len(a)} and {len(b)} differ")


def vadd(a, b) -> list[Atom]:
    _same_len(a, b, "vector sum")
    return [add(as_atom(x), as_atom(y)) for x, y in zip(a, b)]


def vsub(a, b) -> list[Atom]:
    _same_len(a, b, "vector difference")
    return [sub(as_atom(x), as_atom(y)) for x, y in zip(a, b)]


def vscale(c, a) -> list[Atom]:
    c = as_atom(c)
    return [mul(c, as_atom(x)) for x in a]


def dot(a, b) -> Atom:
    _same_len(a, b, "dot product")
    s = ZERO
    for x, y in zip(a, b):
        s = add(s, mul(as_atom(x), as_atom(y)))
    return s


def cross(a, b) -> list[Atom]:
    if len(a) != 3 or len(b) != 3:
        raise ExpressionError(f"cross product needs 3-vectors, got {len(a)} and {len(b)}")
    a = vec(a)
    b = vec(b)
    return [
        sub(mul(a[1], b[2]), mul(a[2], b[1])),
        sub(mul(a[2], b[0]), mul(a[0], b[2])),
        sub(mul(a[0], b[1]), mul(a[1], b[0])),
    ]


def skew(v) -> list[list[Atom]]:
    x, y, z = vec(v)
    return [[ZERO, neg(z), y], [z, ZERO, neg(x)], [neg(y), x, ZERO]]


def matvec(A, v) -> list[Atom]:
    for k, row in enumerate(A):
        if len(row) != len(v):
            raise ExpressionError(f"matrix-vector product: row {k} has {len(row)} columns, vector has {len(v)}")
    return [dot(row, v) for row in A]


def matmul(A, B) -> list[list[Atom]]:
    n = len(B)
    for k, row in enumerate(A):
        if len(row) != n:
            raise ExpressionError(f"matrix product: row {k} of the left factor has {len(row)} columns, right factor has {n} rows")
    cols = list(zip(*B))
    return [[dot(row, col) for col in cols] for row in A]


def transpose(A) -> list[list[Atom]]:
    return [list(r) for r in zip(*A)]


def identity(n: int) -> list[list[Atom]]:
    return [[ONE if i == j else ZERO for j in range(n)] for i in range(n)]


@dataclass
class Sparse:
    """An m x n matrix of atoms storing only its structurally nonzero entries."""

    shape: tuple[int, int]
    entries: dict[tuple[int, int], Atom] = field(default_factory=dict)

    def __post_init__(self):
        m, n = self.shape
        clean = {}
        for (i, j), a in sorted(self.entries.items()):
            if not (0 <= i < m and 0 <= j < n):
                raise ExpressionError(f"entry ({i}, {j}) outside a {m} x {n} matrix")
            a = as_atom(a)
            if a is not ZERO:
                clean[(i, j)] = a
        self.entries = clean

    @property
    def pattern(self) -> list[tuple[int, int]]:
        return list(self.entries)

    @property
    def nnz(self) -> int:
        return len(self.entries)

    def __getitem__(self, ij) -> Atom:
        return self.entries.get(ij, ZERO)

    def values(self) -> list[Atom]:
        return list(self.entries.values())

    def dense(self) -> list[list[Atom]]:
        m, n = self.shape
        return [[self[(i, j)] for j in range(n)] for i in range(m)]

    def matvec(self, v) -> list[Atom]:
        m, n = self.shape
        if len(v) != n:
            raise ExpressionError(f"sparse matrix-vector product: {m} x {n} matrix, vector of {len(v)}")
        out = [ZERO] * m
        for (i, j), a in self.entries.items():
            out[i] = add(out[i], mul(a, as_atom(v[j])))
        return out

    def rmatvec(self, v) -> list[Atom]:
        """A^T v, each entry summed in storage order."""
        m, n = self.shape
        if len(v) != m:
            raise ExpressionError(f"sparse transpose-vector product: {m} x {n} matrix, vector of {len(v)}")
        out = [ZERO] * n
        for (i, j), a in self.entries.items():
            out[j] = add(out[j], mul(a, as_atom(v[i])))
        return out

    @classmethod
    def from_dense(cls, rows) -> "Sparse":
        m = len(rows)
        n = len(rows[0]) if m else 0
        return cls((m, n), {(i, j): as_atom(x) for i, r in enumerate(rows) for j, x in enumerate(r)})


def jacobian(fs, xs, mode: str = "auto") -> Sparse:
    """d fs / d xs with only the structurally nonzero entries.

    mode "forward" sweeps once per variable, "reverse" once per function; "auto" picks
    the one that visits fewer atoms (a chain's tip Jacobian, 3 x N: reverse, O(N) instead
    of O(N^2); a constraint Jacobian with short rows: forward).
    """
    fs = [as_atom(f) for f in fs]
    for j, x in enumerate(xs):
        if not x.is_symbol:
            raise ExpressionError(f"Jacobian column {j}: {x} is not a symbol")
    mask = 0
    for x in xs:
        mask |= x.mask
    if mode == "auto" and len(fs) >= len(xs):
        mode = "forward"  # no fewer sweeps in reverse
    if mode == "auto":
        fwd = sum((a.mask & mask).bit_count() for a in topo(fs, mask))
        rev = sum(len(topo([f], mask)) for f in fs)
        # a reverse sweep builds a product and a sum per edge: about twice the atoms a
        # forward sweep builds per visit
        mode = "forward" if fwd <= 2 * rev else "reverse"
    entries: dict[tuple[int, int], Atom] = {}
    with gc_paused():
        if mode == "forward":
            _forward_columns(fs, xs, entries)
        elif mode == "reverse":
            _reverse_rows(fs, xs, mask, entries)
        else:
            raise ExpressionError(f"Jacobian mode {mode!r} is not auto, forward or reverse")
    return Sparse((len(fs), len(xs)), entries)


def _forward_columns(fs, xs, entries) -> None:
    for j, x in enumerate(xs):
        rows = [(i, f) for i, f in enumerate(fs) if f.mask & x.mask]
        if not rows:
            continue
        d = derivatives([f for _, f in rows], {x: ONE})
        for i, f in rows:
            v = d.get(f)
            if v is not None:
                entries[(i, j)] = v


def _reverse_rows(fs, xs, mask, entries) -> None:
    for i, f in enumerate(fs):
        if not f.mask & mask:
            continue
        adj = adjoints(f, mask)
        for j, x in enumerate(xs):
            v = adj.get(x)
            if v is not None and v is not ZERO:
                entries[(i, j)] = v
