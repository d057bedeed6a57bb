"""Straight-line sparse solves over atoms (mbforge.linalg), checked against
numpy.linalg.solve on the evaluated matrices: LU with generation-time pivots, LDL^T with
minimum-degree order, predicted fill, 2 x 2 pivot blocks and the errors for pivots that
vanish within the declared ranges."""
import math

import numpy as np
import pytest

from mbforge.ir import ONE, ZERO, Evaluator, Sparse, cos, sin, symbols, topo

from mbforge.lower import lower, op_counts
from mbforge.linalg import (LDLFactor, LUFactor, Samples, SingularPivotError, SolveError, factor_ldlt, factor_lu,
                            minimum_degree, symbolic_ldlt)

P = symbols("sv_a sv_b sv_c")
RANGES = {P[0]: (0.0, 1.0), P[1]: (-1.0, 1.0), P[2]: (0.5, 2.0)}
SAMPLES = Samples.box(P, RANGES, n=24, seed=3)


def dense(A: Sparse, Y_entries, s):
    M = np.zeros(A.shape)
    for k, (i, j) in enumerate(A.pattern):
        M[i, j] = Y_entries[s, k]
    return M


def evaluate(A: Sparse, vectors, points):
    """Dense A and the vectors (lists of atoms) at the points over P."""
    ev = Evaluator(A.values() + [a for v in vectors for a in v], P)
    Y = ev(points)
    out = []
    for s in range(len(points)):
        M = dense(A, Y, s)
        o, vs = A.nnz, []
        for v in vectors:
            vs.append(Y[s, o:o + len(v)])
            o += len(v)
        out.append((M, vs))
    return out


def random_sparse(n, density, seed, symmetric=False, dominant=True):
    """A random sparse matrix of atoms in P, diagonally dominant over RANGES (so
    well conditioned everywhere)."""
    rng = np.random.default_rng(seed)
    a, b, c = P
    funcs = [lambda k: k * a + b, lambda k: sin(k * b) + c, lambda k: k * a * c - 0.5, lambda k: cos(a + k) * b,
             lambda k: k * (b - a)]
    ent = {}
    rowsum = np.zeros(n)
    for i in range(n):
        for j in range(i + 1 if symmetric else 0, n):
            if i != j and rng.random() < density:
                k = float(rng.uniform(0.2, 0.9))
                e = funcs[int(rng.integers(len(funcs)))](k)
                ent[(i, j)] = e
                rowsum[i] += 2.5
                if symmetric:
                    ent[(j, i)] = e
                    rowsum[j] += 2.5
    for i in range(n):
        if dominant:
            ent[(i, i)] = rowsum[i] + 1.0 + c * (1 + i % 3) + a * a
    return Sparse((n, n), ent)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lu_matches_numpy_on_random_sparse(seed):
    A = random_sparse(9, 0.25, seed)
    F = factor_lu(A, SAMPLES)
    b1 = [P[0] + k for k in range(9)]
    b2 = [ZERO] * 4 + [P[1] * P[2]] + [ZERO] * 4  # sparse: costs only what it touches
    x1, x2, xt = F.solve(b1), F.solve(b2), F.solve_transposed(b1)
    pts = np.vstack([SAMPLES.points, Samples.box(P, RANGES, n=20, seed=99).points])
    for M, (v1, v2, vt, bb1, bb2) in evaluate(A, [x1, x2, xt, b1, b2], pts):
        np.testing.assert_allclose(v1, np.linalg.solve(M, bb1), rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(v2, np.linalg.solve(M, bb2), rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(vt, np.linalg.solve(M.T, bb1), rtol=1e-11, atol=1e-12)
    assert F.min_pivot > 0 and F.min_relative_pivot >= 0.1


@pytest.mark.parametrize("seed", [4, 5])
def test_ldlt_matches_numpy_on_random_spd(seed):
    A = random_sparse(10, 0.3, seed, symmetric=True)
    F = factor_ldlt(A, SAMPLES)
    b = [P[2] - k for k in range(10)]
    x = F.solve(b)
    for M, (v, bb) in evaluate(A, [x, b], SAMPLES.points):
        assert np.all(np.linalg.eigvalsh(M) > 0)
        np.testing.assert_allclose(v, np.linalg.solve(M, bb), rtol=1e-11, atol=1e-12)
    # a symmetric factorization does about half the work of LU on the same matrix
    G = factor_lu(A, SAMPLES)
    assert F.ops()["factor"]["total"] < G.ops()["factor"]["total"]
    assert F.fill == F.predicted_fill


def test_shared_factorization_and_one_division_per_pivot():
    A = random_sparse(8, 0.3, 7)
    F = factor_lu(A, SAMPLES)
    x1 = F.solve([P[0]] * 8)
    x2 = F.solve([P[1] + k for k in range(8)])
    # the second solve adds no division and reuses every factor atom it reads
    both, one = op_counts(x1 + x2), op_counts(x1)
    assert both["div"] == one["div"] == F.divisions == len({r for r in F.recips if r.args})
    fac = set(F.factor_atoms())
    assert fac & set(topo(x1)) and fac & set(topo(x2))
    sep = op_counts(x1)["total"] + op_counts(x2)["total"]
    assert both["total"] < sep - F.ops()["factor"]["total"] // 2
    ops = F.ops(x1, x2)
    assert ops["matrix"]["total"] + ops["factor"]["total"] + ops["solve"]["total"] == ops["total"]["total"]
    text = F.report(x1, x2)
    assert "min |pivot|" in text and "ops factor" in text


def test_tridiagonal_and_pentadiagonal_have_no_fill():
    a, b, c = P
    for bw in (1, 2):
        n = 12
        ent = {}
        for i in range(n):
            ent[(i, i)] = 10.0 + c + a * i
            for d in range(1, bw + 1):
                if i + d < n:
                    ent[(i, i + d)] = ent[(i + d, i)] = b + 0.1 * d
        A = Sparse((n, n), ent)
        F = factor_ldlt(A, SAMPLES)
        assert F.fill == F.predicted_fill == 0
        assert sum(len(st.lower) for st in F.steps) == (A.nnz - n) // 2  # L has A's own pattern
        L = factor_lu(A, SAMPLES)
        assert L.fill == 0


def test_arrow_matrix_minimum_degree_avoids_fill():
    a, b, c = P
    n = 10
    ent = {(0, 0): 50.0 + c}
    for i in range(1, n):
        ent[(i, i)] = 5.0 + a
        ent[(0, i)] = ent[(i, 0)] = b + 0.1 * i
    A = Sparse((n, n), ent)
    order = minimum_degree(A.pattern, n)
    assert order.index(0) >= n - 2  # the hub goes (nearly) last
    natural = symbolic_ldlt(A.pattern, n, list(range(n)))
    assert sum(len(v) for v in natural.values()) == n * (n - 1) // 2  # natural order: L is dense
    F = factor_ldlt(A, SAMPLES)
    assert F.order == order and F.fill == 0 and F.predicted_fill == 0
    x = F.solve([ONE] * n)
    for M, (v,) in evaluate(A, [x], SAMPLES.points[:5]):
        np.testing.assert_allclose(v, np.linalg.solve(M, np.ones(n)), rtol=1e-12)
    # LU's Markowitz order finds the same: leaves first, no fill
    assert factor_lu(A, SAMPLES).fill == 0


def test_predicted_fill_matches_the_numeric_pattern():
    """On a 2-D grid Laplacian (fill unavoidable) the symbolic prediction is exactly the
    pattern of a numeric factorization with generic values, and the atoms follow it."""
    a, b, c = P
    k = 4
    n = k * k
    ent = {}
    for r in range(k):
        for s in range(k):
            i = r * k + s
            ent[(i, i)] = 8.0 + c
            for (r2, s2) in ((r + 1, s), (r, s + 1)):
                if r2 < k and s2 < k:
                    j = r2 * k + s2
                    ent[(i, j)] = ent[(j, i)] = -1.0 - 0.3 * a
    A = Sparse((n, n), ent)
    F = factor_ldlt(A, SAMPLES)
    pred = symbolic_ldlt(A.pattern, n, F.order)
    assert F.fill == F.predicted_fill > 0
    got = {st.idx[0]: sorted(st.lower) for st in F.steps}
    assert got == pred
    # numeric check: generic values, dense LDL^T of P A P^T, nonzeros of L
    rng = np.random.default_rng(0)
    M = np.zeros((n, n))
    for (i, j) in A.pattern:
        M[i, j] = M[j, i] = -rng.uniform(0.5, 1.0) if i != j else 0.0
    M += np.diag(np.abs(M).sum(axis=1) + 1.0)
    perm = F.order
    Mp = M[np.ix_(perm, perm)]
    Lc = np.linalg.cholesky(Mp)
    numeric = {perm[j]: sorted(perm[i] for i in range(j + 1, n) if abs(Lc[i, j]) > 1e-14) for j in range(n)}
    assert numeric == pred


def test_structurally_zero_diagonal_is_pivoted():
    a, b, c = P
    # a 4 x 4 permutation-like pattern with a zero diagonal
    A = Sparse((4, 4), {(0, 1): 2.0 + a, (1, 0): c, (1, 2): b, (2, 3): 1.0 + c, (3, 2): 3.0 + a, (3, 0): b * 0.2,
                        (2, 1): 0.5 * b})
    F = factor_lu(A, SAMPLES)
    assert {(s.rows[0], s.cols[0]) for s in F.steps if len(s.rows) == 1} >= {(0, 1), (1, 0)}
    x = F.solve([ONE, P[0], ZERO, P[2]])
    for M, (v, bb) in evaluate(A, [x, [ONE, P[0], ZERO, P[2]]], SAMPLES.points):
        np.testing.assert_allclose(v, np.linalg.solve(M, bb), rtol=1e-12)
    # a symmetric elimination reaches the off-diagonal entries through a 2 x 2 block
    S = Sparse((3, 3), {(0, 1): 1.0 + a, (1, 0): 1.0 + a, (2, 2): 2.0 + c, (1, 2): b, (2, 1): b})
    L = factor_ldlt(S, SAMPLES, definite=False)
    assert L.blocks == 1
    x = L.solve([ONE, P[1], P[2]])
    for M, (v, bb) in evaluate(S, [x, [ONE, P[1], P[2]]], SAMPLES.points):
        np.testing.assert_allclose(v, np.linalg.solve(M, bb), rtol=1e-12)
    # ... but not where that block's determinant vanishes too
    Z = Sparse((2, 2), {(0, 1): b, (1, 0): b})
    with pytest.raises(SingularPivotError, match="no symmetric pivot"):
        factor_ldlt(Z, SAMPLES, definite=False)


def test_rotation_needs_a_block_pivot():
    """Over a full turn every entry of a rotation matrix changes sign, so no single-entry
    pivot order exists; a 2 x 2 block does. Its determinant cos^2 + sin^2 folds to 1 as it
    is built, so the block needs no division at all."""
    (t,) = symbols("sv_t")
    R = Sparse.from_dense([[cos(t), -sin(t)], [sin(t), cos(t)]])
    S = Samples.box([t], {t: (0.0, 2 * math.pi)}, n=64, seed=1)
    F = factor_lu(R, S, row_names=["r0", "r1"], col_names=["c0", "c1"])
    assert F.blocks == 1 and F.divisions == 0
    assert F.min_pivot == pytest.approx(1.0)
    x = F.solve([ONE, ZERO])
    xt = F.solve_transposed([ONE, t])
    ev = Evaluator(x + xt, [t])
    for tv in np.linspace(0, 2 * math.pi, 17):
        y = ev(np.array([tv]))
        c, s = math.cos(tv), math.sin(tv)
        M = np.array([[c, -s], [s, c]])
        np.testing.assert_allclose(y[:2], np.linalg.solve(M, [1.0, 0.0]), atol=1e-14)
        np.testing.assert_allclose(y[2:], np.linalg.solve(M.T, [1.0, tv]), atol=1e-13)


def test_pivot_that_vanishes_in_range_is_an_error_naming_row_and_column():
    x, y, z = P
    names = dict(row_names=["bar_AB", "crank"], col_names=["xB", "yB"])
    # column yB has a single entry, which crosses zero for sv_b in [-1, 1]
    A = Sparse((2, 2), {(0, 0): 2.0 + x, (1, 0): z, (1, 1): y})
    with pytest.raises(SingularPivotError) as e:
        factor_lu(A, SAMPLES, **names)
    msg = str(e.value)
    assert "'crank'" in msg and "'yB'" in msg and "changes sign" in msg and "sv_b=" in msg
    assert e.value.row == 1 and e.value.col == 1
    # det = sv_c^2 - 1 vanishes at sv_c = 1 inside [0.5, 2]: whatever the order, the
    # second pivot changes sign
    B = Sparse((2, 2), {(0, 0): z, (0, 1): ONE, (1, 0): ONE, (1, 1): z})
    with pytest.raises(SingularPivotError, match="singular, or nearly so"):
        factor_lu(B, SAMPLES)
    # the same matrix is fine where the ranges keep sv_c away from 1
    ok = Samples.box(P, {**RANGES, z: (1.2, 2.0)}, n=24)
    F = factor_lu(B, ok)
    assert F.min_pivot > 0.2
    # LDL^T of a matrix that is not positive definite in range
    D = Sparse((2, 2), {(0, 0): y, (1, 1): ONE})
    with pytest.raises(SingularPivotError, match="not positive definite"):
        factor_ldlt(D, SAMPLES, names=["q1", "q2"])
    # structurally singular: an empty column
    E = Sparse((2, 2), {(0, 0): ONE, (1, 0): x})
    with pytest.raises(SingularPivotError, match="column 'yB' has no entries"):
        factor_lu(E, SAMPLES, **names)


def test_quasi_definite_kkt_by_symmetric_pivoting():
    """[M A^T; A 0]: the constraint diagonal is structurally zero and only fills in once
    the coordinates it touches are eliminated; the symmetric search finds that order."""
    a, b, c = P
    n, m = 4, 2
    ent = {(i, i): 1.0 + i + c for i in range(n)}
    ent[(0, 1)] = ent[(1, 0)] = 0.2 * b
    A = {(0, 0): 1.0 + a, (0, 2): b, (1, 1): c, (1, 3): ONE, (1, 0): 0.3 * a}
    for (i, j), e in A.items():
        ent[(n + i, j)] = ent[(j, n + i)] = e
    K = Sparse((n + m, n + m), ent)
    F = factor_ldlt(K, SAMPLES, definite=False)
    assert sorted(F.order) == list(range(n + m)) and F.fill == F.predicted_fill
    rhs = [a, b, c, ONE, ZERO, a * b]
    x = F.solve(rhs)
    for M, (v, bb) in evaluate(K, [x, rhs], SAMPLES.points):
        np.testing.assert_allclose(v, np.linalg.solve(M, bb), rtol=1e-11, atol=1e-12)
    with pytest.raises(SingularPivotError, match="not positive definite"):
        factor_ldlt(K, SAMPLES)
    # a mass matrix singular along a normalization constraint (Euler parameters): the
    # symmetric elimination needs a 2 x 2 block there
    K2 = Sparse((3, 3), {(0, 0): 1.0 + c, (0, 1): 0.2 * a, (1, 0): 0.2 * a, (1, 1): 0.04 * a * a / (1.0 + c),
                         (1, 2): 1.0 + b * b, (2, 1): 1.0 + b * b})
    F2 = factor_ldlt(K2, SAMPLES, definite=False)
    assert F2.blocks == 1 and F2.fill == F2.predicted_fill
    x2 = F2.solve([a, b, c])
    for M, (v, bb) in evaluate(K2, [x2, [a, b, c]], SAMPLES.points):
        np.testing.assert_allclose(v, np.linalg.solve(M, bb), rtol=1e-9, atol=1e-12)


def test_factorization_is_deterministic():
    A = random_sparse(8, 0.35, 11)
    F1 = factor_lu(A, SAMPLES)
    F2 = factor_lu(A, Samples.box(P, RANGES, n=24, seed=3))
    x1, x2 = F1.solve([P[0]] * 8), F2.solve([P[0]] * 8)
    assert all(u is v for u, v in zip(x1, x2))
    t1, t2 = lower(x1), lower(x2)
    assert t1.instrs == t2.instrs


def test_constant_matrix_needs_no_samples_and_symbolic_one_does():
    A = Sparse.from_dense([[4.0, 1.0], [1.0, 3.0]])
    F = factor_ldlt(A)
    x = F.solve([ONE, ONE])
    assert all(v.is_const for v in x)
    np.testing.assert_allclose([v.value for v in x], np.linalg.solve([[4, 1], [1, 3]], [1, 1]))
    B = Sparse.from_dense([[P[0] + 1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(SolveError, match="sample points"):
        factor_lu(B)
    with pytest.raises(SolveError, match="not symmetric"):
        factor_ldlt(Sparse.from_dense([[1.0, 2.0], [0.0, 1.0]]))
    assert isinstance(F, LDLFactor) and isinstance(factor_lu(A), LUFactor)


def test_augmented_lagrangian_matrix_is_factored_as_definite():
    """M + alpha A^T A (a singular M made definite by the constraints it is penalised
    with): the minimum-degree LDL^T, every pivot positive over the samples."""
    a, b, c = P
    n = 4
    Mm = {(0, 0): 2.0 + a, (1, 1): 2.0 + a, (2, 2): ONE}  # coordinate 3 has no inertia
    A = {(0, 0): 2 * c, (0, 1): b, (1, 1): ONE, (1, 3): 1.0 + a, (0, 2): 0.5 * b}
    alpha = 100.0
    ent = dict(Mm)
    rows = {}
    for (i, j), e in A.items():
        rows.setdefault(i, {})[j] = e
    for r in rows.values():
        for j, x in r.items():
            for k, y in r.items():
                ent[(j, k)] = ent.get((j, k), ZERO) + alpha * x * y
    K = Sparse((n, n), ent)
    F = factor_ldlt(K, SAMPLES, names=["x1", "y1", "x2", "s"])
    assert F.blocks == 0 and all(s.min_abs > 0 for s in F.stats)
    rhs = [a, ONE, b, c]
    x = F.solve(rhs)
    for M, (v, bb) in evaluate(K, [x, rhs], SAMPLES.points):
        assert np.all(np.linalg.eigvalsh(M) > 0)
        np.testing.assert_allclose(v, np.linalg.solve(M, bb), rtol=1e-9, atol=1e-12)
