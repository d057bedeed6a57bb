"""Pivots proved over the whole declared envelope (issue 33, item 1): analysis.pivots
encloses each pivot of a straight-line LU over every cell of the cover by interval
arithmetic with bisection; the reduced inverse dynamics re-chooses its pivots on a grid
over the cells (corners included) where samples missed a sign change, or refuses in one
line naming the pivot, the state and the widest shrunk envelope that proves."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

from mbforge.analysis.intervals import IntervalEvaluator
from mbforge.analysis.pivots import enclose_bisected, prove_pivots
from mbforge.domain.cover import envelope_cover
from mbforge.domain.sampling import with_envelope_samples
from mbforge.examples import load
from mbforge.ir import Evaluator
from mbforge.kernels import reduced
from mbforge.kernels.builders import build_kernel
from mbforge.linalg import factor_lu


def mbforge(*args):
    return subprocess.run([sys.executable, "-m", "mbforge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def _delta_full_system():
    eqs = load("delta").equations()
    red = reduced.reduction(eqs)
    cover = envelope_cover(eqs, unknowns=red.z, rows=red.psi)
    samples = with_envelope_samples(reduced._samples(eqs, red, None), cover)
    return eqs, cover, samples, reduced._full(eqs, red).system


def test_samples_miss_the_corner_the_proof_finds_it():
    # the order chosen at the random samples alone (what the kernel did before): its pivot on
    # the elbow's x and the upper arm's length changes sign near the box's corner x = -0.3 m,
    # where the arm passes 90 degrees; the proof finds it, the samples do not
    eqs, cover, samples, s = _delta_full_system()
    F = factor_lu(s.matrix, samples, row_names=s.row_names, col_names=s.col_names)
    proof = prove_pivots(F, cover)
    assert not proof.ok and proof.crossing, proof.report()
    k = proof.first_failure()
    assert "motion of E1_x" in proof.names[k] and "lambda_upper1_len_E1" in proof.names[k]
    assert proof.where[k]["P_x"] < -0.25, proof.report()


def test_the_kernel_re_chooses_and_proves():
    eqs, cover, _, _ = _delta_full_system()
    k = build_kernel(eqs, "inverse-dynamics-reduced")
    assert "corners included" in k.info.report and "proved, min |pivot| >=" in k.info.report, k.info.report
    F = k.info.solves["G"]
    # every pivot away from 0 at dense states of the box, corners included, with the proof's sign
    rng = np.random.default_rng(0)
    lo, hi = cover.lo[0, :3], cover.hi[0, :3]
    X = np.vstack([rng.uniform(lo, hi, (20000, 3)),
                   np.array([[a, b, c] for a in (lo[0], hi[0]) for b in (lo[1], hi[1]) for c in (lo[2], hi[2])])])
    V = np.column_stack([np.broadcast_to(np.ravel(Evaluator([p], cover.symbols[:3])(X)), len(X)) for p in F.pivots])
    proof = prove_pivots(F, cover)
    least = np.array(proof.least)
    assert (np.abs(V) >= least).all() and (np.abs(V).min(axis=0) < 50 * least).any()
    assert all((np.sign(V[:, j]) == np.sign(V[0, j])).all() for j in range(V.shape[1]))


def test_bisected_enclosures_are_sound():
    eqs, cover, _, _ = _delta_full_system()
    k = build_kernel(eqs, "inverse-dynamics-reduced")
    F = k.info.solves["G"]
    blocks = [st.pivot for st in F.steps if len(st.rows) == 2]
    assert blocks  # the elbows' 2 x 2 pivots: what range analysis could not prove without this
    syms = cover.symbols[:3]
    ev = IntervalEvaluator(blocks, syms)
    lo, hi = cover.lo[:, :3], cover.hi[:, :3]
    plain_lo, plain_hi = ev(lo, hi)
    L, H = enclose_bisected(ev, lo, hi, [0, 1, 2])
    assert ((plain_lo <= 0) & (plain_hi >= 0)).any() and ((L > 0) | (H < 0)).all(), (plain_lo, plain_hi, L, H)
    X = np.random.default_rng(1).uniform(lo[0], hi[0], (20000, 3))
    V = np.column_stack([np.ravel(Evaluator([b], syms)(X)) for b in blocks])
    assert (V >= L[0]).all() and (V <= H[0]).all()


LEVER = '''
from mbforge.model import Model


def build():
    """Two coordinates moved by two motors, the second's direction (x + z - 1.98, twice)
    vanishing only near the corner x = z = 1 of the envelope."""
    m = Model("lever")
    x = m.coordinate("x", guess=0.0, range=(-1, 1), vrange=(-1, 1), arange=(-1, 1))
    z = m.coordinate("z", guess=0.0, range=(-1, 1), vrange=(-1, 1), arange=(-1, 1))
    y = m.coordinate("y", guess=0.0, range=(-1, 1), vrange=(-1, 1), arange=(-1, 1))
    m.body2d("b", x, z, y, mass=1.0, inertia=1.0)
    m.constraint(y - x, "slide")
    m.explicit(y, x)
    m.actuator("push", x)
    s = x + z - 1.98
    m.actuator("lift", s * s * 0.5)
    m.operate(x, range=(-1.0, 1.0), rate=(-1, 1), accel=(-1, 1))
    m.operate(z, range=(-1.0, 1.0), rate=(-1, 1), accel=(-1, 1))
    return m
'''


def test_no_order_holds_one_line_with_the_state_and_a_workspace(tmp_path):
    model = tmp_path / "lever.py"
    model.write_text(textwrap.dedent(LEVER))
    r = mbforge("generate", model, "--kernel", "inverse-dynamics-reduced", "--out", tmp_path / "out")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    line = lines[0]
    assert "no pivot order" in line and "u_lift" in line and "changes sign" in line, line
    assert "x=1, z=1" in line and "corners included" in line, line
    assert "shrunk to 95% of its ranges" in line and "x in [-0.95, 0.95]" in line, line
    assert not (tmp_path / "out").exists()


def test_verbose_prints_the_solve_report(tmp_path):
    r = mbforge("generate", "delta", "--kernel", "inverse-dynamics-reduced", "--out", tmp_path / "k", "--verbose")
    assert r.returncode == 0, r.stderr
    assert "mbforge generate:   pivots over the envelope's 1 cells" in r.stderr and "proved" in r.stderr, r.stderr
    assert "mbforge generate: LU of delta" in r.stderr and "mbforge generate: total" in r.stderr


def test_samples_see_no_order_the_refusal_still_names_a_workspace(tmp_path):
    # the second motor's direction vanishes on x + z = 1.5, inside the envelope: the samples
    # see it; the line adds the widest envelope about the centre over which an order proves
    model = tmp_path / "lever.py"
    model.write_text(textwrap.dedent(LEVER).replace("1.98", "1.5"))
    r = mbforge("generate", model, "--kernel", "inverse-dynamics-reduced", "--out", tmp_path / "out")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "u_lift" in lines[0] and "shrunk to 70% of its ranges" in lines[0] and "x in [-0.7, 0.7]" in lines[0], lines
