"""Range-analysis hints of straight-line solves (analysis.linear): the parametric
linear-system enclosure, the LU's values enclosed from its matrix alone, and the Stewart
platform's reduced inverse dynamics, whose pivots they prove away from 0 where the plain
range analysis cannot; Model.explicit_measure, which gives that kernel short matrix entries."""
import numpy as np
import pytest

from mbforge.analysis.linear import param_solve
from mbforge.analysis.ranges import analyse_boxes
from mbforge.domain.krawczyk import _linear_enclosure
from mbforge.examples import load
from mbforge.ir import Evaluator, symbol
from mbforge.kernels.builders import build_kernel
from mbforge.kernels.common import KernelError
from mbforge.lower import lower
from mbforge.model import ModelError

pytestmark = pytest.mark.host


def _affine_system(rng, B, T, m):
    A0 = np.eye(m) * 4 + rng.uniform(-1, 1, (B, m, m))
    AK = rng.uniform(-0.15, 0.15, (B, T, m, m))
    b0, bK = rng.uniform(-1, 1, (B, m)), rng.uniform(-0.2, 0.2, (B, T, m))
    EA, Eb = np.full((B, m, m), 1e-3), np.full((B, m), 1e-3)
    return A0, AK, EA, b0, bK, Eb


def test_parametric_solve_encloses_every_solution_and_beats_the_interval_hull():
    rng = np.random.default_rng(1)
    B, T, m = 6, 5, 4
    A0, AK, EA, b0, bK, Eb = _affine_system(rng, B, T, m)
    z, r = param_solve(A0, AK, EA, b0, bK, Eb)
    assert np.isfinite(r).all()
    for _ in range(400):
        e = rng.uniform(-1, 1, (B, T))
        dA = rng.uniform(-1, 1, (B, m, m)) * EA
        db = rng.uniform(-1, 1, (B, m)) * Eb
        A = A0 + np.einsum("bt,btij->bij", e, AK) + dA
        b = b0 + np.einsum("bt,bti->bi", e, bK) + db
        x = np.linalg.solve(A, b[..., None])[..., 0]
        assert (np.abs(x - z) <= r).all()
    # the same data as independent intervals (what the entries' ranges alone say)
    Ar = np.abs(AK).sum(1) + EA
    br = np.abs(bK).sum(1) + Eb
    zc, rr = _linear_enclosure(A0, Ar, b0, br)
    assert (r <= rr * (1 + 1e-9)).all() and (r < 0.9 * rr).any()


def test_lu_hints_enclose_samples_and_tighten_the_elimination():
    """A 3 x 3 system whose entries move together: the hinted analysis encloses every value
    at dense samples, and its pivots are tighter than the plain analysis's."""
    x, y = symbol("lx", "input"), symbol("ly", "input")
    from mbforge.ir import Sparse
    from mbforge.linalg import Samples, factor_lu
    from mbforge.analysis.linear import LUEnclosure, bind_hints
    A = Sparse((3, 3), {(0, 0): 2 + x, (0, 1): y, (0, 2): x * y, (1, 0): y - x, (1, 1): 3 + x * x,
                        (1, 2): y, (2, 0): x, (2, 1): 1 - y, (2, 2): 4 + y * x})
    rng = np.random.default_rng(3)
    pts = rng.uniform(-0.3, 0.3, (64, 2))
    F = factor_lu(A, Samples([x, y], pts, "test points"))
    b = [x + 1, y * y, 1 - x * y]
    sol = F.solve(b)
    plain = lower(sol + F.pivots, [x, y])
    hinted = lower(sol + F.pivots, [x, y])
    bind_hints(hinted, [LUEnclosure(F, b, outputs={k: k for k in range(3)})])
    assert hinted.hints is not None and len(hinted.hints.targets) > 5
    lo = np.array([[-0.3, -0.3], [0.0, -0.1], [0.1, 0.1]])
    hi = lo + np.array([[0.6, 0.6], [0.3, 0.2], [0.05, 0.2]])
    p = analyse_boxes(plain, lo, hi)
    h = analyse_boxes(hinted, lo, hi)
    ids = sorted(hinted.atoms)
    targets = {t for t, *_ in hinted.hints.targets}
    ev = Evaluator([hinted.atoms[i] for i in ids], [x, y])
    for k in range(len(lo)):
        Y = ev(lo[k] + (hi[k] - lo[k]) * rng.random((3000, 2)))
        for c, i in enumerate(ids):
            assert h.lo[i][k] <= Y[:, c].min() and Y[:, c].max() <= h.hi[i][k]
    wider = [float(np.max((p.hi[i] - p.lo[i]) / (h.hi[i] - h.lo[i]))) for i in targets]
    assert max(wider) > 1.1  # the Stewart test below shows the strong case


@pytest.fixture(scope="module")
def stewart_envelope():
    eqs = load("stewart", envelope=True).equations()
    return eqs, build_kernel(eqs, "inverse-dynamics-reduced")


def _split_xyz(box):
    """The 8 boxes of a box's platform x, y, z halves."""
    out = []
    for code in range(8):
        b = np.array(box, dtype=float)
        for d in range(3):
            mid = (b[d, 0] + b[d, 1]) / 2
            b[d] = (b[d, 0], mid) if code >> d & 1 else (mid, b[d, 1])
        out.append(b)
    return np.array(out)


def test_stewart_pivots_proven_over_the_envelope_only_with_the_hints(stewart_envelope):
    """Over cells of the operating envelope (x, y, z halved), the plain analysis of the
    elimination's straight-line code lets a pivot reach 0; with the hints every divisor is
    proven nonzero, and the enclosures hold dense consistent states."""
    eqs, k = stewart_envelope
    boxes = np.concatenate([_split_xyz(k.domain[b]) for b in (30, 45)])
    plain = lower(k.output_atoms, k.input_symbols)
    tape = k.tape()
    assert tape.hints is not None
    assert (analyse_boxes(plain, boxes[:, :, 0], boxes[:, :, 1], strict=False).fail >= 0).any()
    vec = analyse_boxes(tape, boxes[:, :, 0], boxes[:, :, 1], strict=False)
    assert (vec.fail < 0).all()
    from mbforge.domain.cover import envelope_cover
    from mbforge.kernels.reduced import reduction
    red = reduction(eqs)
    S = envelope_cover(eqs, unknowns=red.z, rows=red.psi).sample(20000, seed=5)
    n = len(next(iter(S.values())))
    X = np.column_stack([S[s] if s in S else np.zeros(n) for s in k.input_symbols])
    hinted = sorted({t for t, *_ in tape.hints.targets})
    V = np.atleast_2d(Evaluator([tape.atoms[t] for t in hinted], k.input_symbols)(X))
    seen = 0
    for b in range(len(boxes)):
        inside = np.all((X >= boxes[b, :, 0]) & (X <= boxes[b, :, 1]), axis=1)
        seen += int(inside.sum())
        for c, t in enumerate(hinted):
            if inside.any():
                assert vec.lo[t][b] <= V[inside, c].min() and V[inside, c].max() <= vec.hi[t][b], (t, b)
    assert seen > 50


def test_explicit_measure_errors():
    m = load("fourbar")
    with pytest.raises(ModelError, match="names no actuator 'nope'"):
        m.explicit_measure("nope", 1.0)
    m = load("stewart")
    with pytest.raises(ModelError, match="given twice"):
        m.explicit_measure("f1", 1.0)


def test_a_wrong_measure_is_refused_naming_the_actuator():
    m = load("stewart")
    m.explicit_measures["f3"] = 2.0 * m.explicit_measures["f3"]
    with pytest.raises(KernelError, match="measure of actuator f3 .*does not match its virtual power"):
        build_kernel(m.equations(), "inverse-dynamics-reduced")


def test_the_matrix_is_halved_only_along_inputs_that_move_it(stewart_envelope):
    """The hints enclose the matrix's own values over halves of each box along the inputs
    that move it (linear.moving_dims): over the Stewart envelope's cells its Euler
    parameter e0 moves the leg forces' matrix about 1%, the position and e1..e3 8 to 16%,
    so e0 is left out (64 halves instead of 128: c-fixed generation 62 -> 36 s here, the
    bounds within 25%); an input range of zero width moves nothing and is left out too."""
    _, k = stewart_envelope
    h = k.tape().hints
    names = [s.value.name for s in k.input_symbols]
    dom = np.array(k.domain, dtype=float)
    got = [names[d] for d in h.moving_dims(dom[:, :, 0], dom[:, :, 1])]
    assert got == ["plat_x", "plat_y", "plat_z", "plat_e1", "plat_e2", "plat_e3"]
    lo, hi = dom[:, :, 0].copy(), dom[:, :, 1].copy()
    z = names.index("plat_z")
    lo[:, z] = hi[:, z] = (lo[:, z] + hi[:, z]) / 2
    assert "plat_z" not in [names[d] for d in h.moving_dims(lo, hi)]
