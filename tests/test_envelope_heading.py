"""A heading declared over +-pi (tests/fixtures/heading.py): kernels built over the
operating envelope keep float32 within their manifest bounds at every heading.

The model's driven motion sways the heading by +-0.9 rad only; pivots chosen on it would
divide by 2 x = 2 L cos(heading), which vanishes at +-90 degrees. Here the pivots are
chosen on consistent states of the whole envelope (domain.cover) and proved away from
zero over every box of the kernel's domain (interval evaluation); then the float32 C,
compiled on the host, is compared with double on a dense sweep of consistent states
(closed form: the tip at L (cos th, sin th)) over every heading, rate and acceleration
of the envelope, at the float32 inputs the kernel receives (the bound's reference).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from mbforge.analysis.intervals import IntervalEvaluator
from mbforge.verify.hostlib import load_kernel
from mbforge.ir import Evaluator
from mbforge.kernels.builders import build_kernel
from mbforge.pipeline import generate

from helpers.models import H, heading_sweep as sweep, kernel_inputs as _inputs


@pytest.fixture(scope="module")
def eqs():
    return H.build().equations()


@pytest.mark.parametrize("which", ["inverse-dynamics", "forward-dynamics"])
def test_pivots_proved_away_from_zero_over_the_domain(eqs, which):
    """Every pivot's interval over every domain box excludes 0 (a proof, not samples), and
    the domain holds every heading: the pivots do not divide by cos(heading)."""
    k = build_kernel(eqs, which)
    boxes = np.array(k.domain)
    names = [s.value.name for s in k.input_symbols]
    # the domain reaches +-pi and every x, y of the circle (cos and sin both change sign)
    for q in ("x", "y"):
        j = names.index(q)
        assert boxes[:, j, 0].min() <= -H.L and boxes[:, j, 1].max() >= H.L
    pivots = [p for F in k.info.solves.values() for p in F.pivots]
    assert pivots
    lo, hi = IntervalEvaluator(pivots, k.input_symbols)(boxes[:, :, 0], boxes[:, :, 1])
    away = (lo > 0) | (hi < 0)
    assert away.all(), f"{(~away).sum()} (box, pivot) pairs whose pivot's range reaches 0"


@pytest.mark.parametrize("which", ["inverse-dynamics", "forward-dynamics"])
def test_float32_within_its_manifest_bound_at_every_heading(eqs, which, tmp_path):
    k = build_kernel(eqs, which)
    generate(k, "c-float32").write(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    bound = np.concatenate([g["error_bound"] for g in manifest["outputs"]])
    assert np.all(np.isfinite(bound)) and np.all(bound > 0)
    X = _inputs(k, sweep())
    Xf = X.astype(np.float32)
    Y, status = load_kernel(tmp_path)(Xf)
    assert np.all(status == 0)
    ref = np.atleast_2d(Evaluator(k.output_atoms, k.input_symbols)(Xf.astype(np.float64)))
    err = np.abs(Y.astype(np.float64) - ref)
    worst = err.max(axis=0)
    print(f"\n{which}: float32 error / bound per output {np.round(worst / bound, 3).tolist()}, "
          f"worst at heading {sweep()['heading'][err.argmax(axis=0)].round(4).tolist()}")
    assert np.all(worst <= bound), f"float32 error above the bound: {worst} > {bound}"
    # not trivially loose either: near +-90 degrees as everywhere, the errors are rounding
    # errors of a well-conditioned solve
    assert np.all(worst > 0)


def test_the_motion_alone_would_divide_by_cos_heading(eqs):
    """What the envelope prevents: pivots chosen on the driven motion's samples only (the
    heading within +-0.9 rad) include one that vanishes at +-90 degrees."""
    from mbforge.domain.sampling import kernel_samples
    from mbforge.kernels.dynamics import inverse_dynamics_system
    from mbforge.linalg import factor_lu

    system, rows = inverse_dynamics_system(eqs)
    F = factor_lu(system.matrix, kernel_samples(eqs, rows, "kinematic constraint"))
    at = sweep(5)
    ev = Evaluator(F.pivots, [s for s in eqs.q])
    P = np.atleast_2d(ev(np.column_stack([at["x"], at["y"]])))
    assert (np.abs(P) < 1e-9).any(), "expected a pivot through 0 at +-90 degrees (the motion's choice)"
