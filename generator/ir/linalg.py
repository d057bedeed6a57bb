"""Vectors and matrices of atoms: the one vector algebra of mbforge.

Vectors are lists of atoms; small dense matrices are lists of rows. Numbers (floats, numpy
scalars, rows of numpy arrays) are taken as constant atoms, so products with structural
zeros and ones fold away as the matrices are built. The 3-vector and 3 x 3 helpers
(cross, skew, congruences R S R^T, Turn) serve the rotations of the coordinate families
(model.frames) and the spatial algebra of the recursive kernels (kernels.recursive).
Large matrices (Jacobians, mass matrices) are `Sparse`: only structurally nonzero entries
are stored, so structural zeros never enter the graph or the generated code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .atom import ONE, TWO, ZERO, Atom, ExpressionError, add, as_atom, cos, mul, neg, sin, sub
from .derive import adjoints, derivatives
from .graph import gc_paused, topo


def vec(*xs) -> list[Atom]:
    if len(xs) == 1 and isinstance(xs[0], (list, tuple)):
        xs = xs[0]
    return [as_atom(x) for x in xs]


def vconst(v) -> list[Atom]:
    """Numbers as constant atoms (atoms kept)."""
    return [x if isinstance(x, Atom) else as_atom(float(x)) for x in v]


def folded(x: float) -> Atom:
    """A number as a constant atom, ZERO below 1e-15 (round-off of a placement is no term)."""
    x = float(x)
    return ZERO if abs(x) < 1e-15 else as_atom(x)


def folded_vec(v) -> list[Atom]:
    return [folded(x) for x in v]


def folded_mat(M) -> list[list[Atom]]:
    return [[folded(x) for x in row] for row in M]


def is_zero(v) -> bool:
    """Every entry is the ZERO atom (a structurally zero vector)."""
    return all(x is ZERO for x in v)


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


def mtv(A, v) -> list[Atom]:
    """A^T v."""
    v = vconst(v)
    return [dot(vconst(c), v) for c in zip(*A)]


def matmul(A, B) -> list[list[Atom]]:
    n = len(B)
    for k, row in enumerate(A):
        if len(row) != n:
            raise ExpressionError(f"matrix product: row {k} of the left factor has {len(row)} columns, right factor has {n} rows")
    cols = list(zip(*B))
    return [[dot(row, col) for col in cols] for row in A]


def congruence(R, S, symmetric: bool = False) -> list[list[Atom]]:
    """R S R^T; for a symmetric S the upper triangle is computed and mirrored."""
    RS = matmul(R, S)
    if not symmetric:
        return [[dot(RS[i], R[j]) for j in range(3)] for i in range(3)]
    out = [[ZERO] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(i, 3):
            out[i][j] = out[j][i] = dot(RS[i], R[j])
    return out


class Turn:
    """R = Rot(e_k, q): a rotation in the plane (i, j) of the two other axes
    (v_i' = c v_i - s v_j, v_j' = s v_i + c v_j). Congruences R S R^T then use the double
    angle (C2 = c^2 - s^2, S2 = 2 s c, computed once per turn): the trace of the plane
    block is invariant, its antisymmetric part too."""

    def __init__(self, k: int, q):
        self.k, self.i, self.j = k, (k + 1) % 3, (k + 2) % 3
        self.c, self.s = cos(q), sin(q)
        self._double = None

    def double(self):
        if self._double is None:
            c, s = self.c, self.s
            self._double = (sub(mul(c, c), mul(s, s)), mul(TWO, mul(s, c)))
        return self._double

    def vec(self, x, y):
        c, s = self.c, self.s
        return sub(mul(c, x), mul(s, y)), add(mul(s, x), mul(c, y))

    def _plane(self, a, b, d):
        C2, S2 = self.double()
        half = as_atom(0.5)
        sm = add(a, d)
        hd = mul(half, sub(a, d))
        ai = add(mul(half, sm), sub(mul(hd, C2), mul(b, S2)))
        return ai, add(mul(hd, S2), mul(b, C2)), sub(sm, ai)

    def sym(self, S):
        """R S R^T of a symmetric S."""
        i, j, k = self.i, self.j, self.k
        out = [[ZERO] * 3 for _ in range(3)]
        out[k][k] = S[k][k]
        out[i][i], out[i][j], out[j][j] = self._plane(S[i][i], S[i][j], S[j][j])
        out[j][i] = out[i][j]
        out[i][k], out[j][k] = self.vec(S[i][k], S[j][k])
        out[k][i], out[k][j] = out[i][k], out[j][k]
        return out

    def gen(self, S):
        """R S R^T of any S."""
        i, j, k = self.i, self.j, self.k
        out = [[ZERO] * 3 for _ in range(3)]
        out[k][k] = S[k][k]
        half = as_atom(0.5)
        ai, b, dj = self._plane(S[i][i], mul(half, add(S[i][j], S[j][i])), S[j][j])
        t = mul(half, sub(S[i][j], S[j][i]))
        out[i][i], out[j][j], out[i][j], out[j][i] = ai, dj, add(b, t), sub(b, t)
        out[i][k], out[j][k] = self.vec(S[i][k], S[j][k])
        out[k][i], out[k][j] = self.vec(S[k][i], S[k][j])
        return out


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
