"""domain.krawczyk's interval linear enclosure on a batch where some cells have no finite
matrix (their Krawczyk test failed, so their position boxes are unbounded): those cells
fail, an exactly singular one fails, the others keep their enclosures (the batched inverse
raised on the singular cell and its pseudo-inverse fallback on the NaN ones)."""
from __future__ import annotations

import numpy as np

from mbforge.domain.krawczyk import _linear_enclosure


def test_cells_without_a_finite_matrix_fail_and_the_others_hold():
    rng = np.random.default_rng(0)
    n, B = 5, 4
    Ac = np.eye(n)[None].repeat(B, 0) * 3 + 0.1 * rng.standard_normal((B, n, n))
    Ar = np.full((B, n, n), 1e-3)
    bc, br = rng.standard_normal((B, n)), np.full((B, n), 1e-3)
    Ac[1, 2, 3] = np.nan
    Ar[2, 0, 0] = np.inf
    Ac[3] = 0.0  # exactly singular: numpy's inverse raises for the whole batch
    x, r = _linear_enclosure(Ac, Ar, bc, br)
    assert np.all(np.isinf(r[1])) and np.all(np.isinf(r[2])) and np.all(np.isinf(r[3]))
    for k in (0,):  # the solution at the centre lies in the enclosure
        assert np.all(np.isfinite(r[k]))
        xs = np.linalg.solve(Ac[k], bc[k])
        assert np.all(np.abs(xs - x[k]) <= r[k])
