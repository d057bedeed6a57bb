"""The float32 error forms (analysis.floaterror): a value's error as coefficients of
rounding symbols, per box. A rounding adds a symbol below every one so far; its id and its
row must both go first, or every symbol is paired with its neighbour's coefficients and
later sums cancel the wrong terms (the bug of 2026-12-02 .. 12-07: bounds moved by 0.92 to
1.15 times when it was mended)."""
from types import SimpleNamespace

import numpy as np

from mbforge.analysis.floaterror import U, _Forms


def test_a_rounding_keeps_every_symbol_with_its_own_coefficients():
    f = object.__new__(_Forms)
    f.B, f.count, f.terms, f.forms, f.mags_out, f.absorb = 2, 3, 64, {}, None, None
    f.vec = SimpleNamespace(lo={7: np.array([-2.0, 1.0])}, hi={7: np.array([3.0, 4.0])})
    ids = np.array([-3, -1, 0, 5], dtype=np.int64)
    lo = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    hi = lo + 0.5
    f.rounded(7, ids, lo, hi, np.zeros(2), np.zeros(2))
    g = f.forms[7]
    assert g.ids.tolist() == [-4, -3, -1, 0, 5]  # sorted, the new symbol first
    assert np.array_equal(g.lo[0], [3.0, 4.0]) and np.array_equal(g.hi[0], [3.0, 4.0])  # max |value| per box
    assert np.array_equal(g.lo[1:], lo) and np.array_equal(g.hi[1:], hi)  # each row with its own symbol
    assert (g.r > 0).all() and (g.r < 1e-6 * U + 1e-290).all()
