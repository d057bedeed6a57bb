"""analysis.aligned: the float32 error the rounding model allows at a point with every
rounding aligned. It is checked by hand on a three-operation tape, then against the real
float32 C on the heading fixture's consistent states: the compiled kernel's error is never
above it (first order: every rounding is within u of its result), and the manifest bound,
sound under the same model, is never below it."""
from __future__ import annotations

import json

import numpy as np

from mbforge.analysis.aligned import aligned_errors, rounded_operations, summed_maxima
from mbforge.analysis.floaterror import TRIG_ULPS, U
from mbforge.verify.hostlib import load_kernel
from mbforge.ir import Evaluator
from mbforge.kernels.builders import build_kernel
from mbforge.lower.tape import Instr, Tape
from mbforge.pipeline import generate

from helpers.models import H, heading_sweep as sweep, kernel_inputs as _inputs


def test_by_hand():
    # y0 = a*b + c, y1 = 0.1 * sin(a), y2 = -(a*b)
    tape = Tape(inputs=[None] * 3, outputs=[("t", 1), ("t", 4), ("t", 5)], instrs=[
        Instr("mul", (0,), (("in", 0), ("in", 1))),
        Instr("add", (1,), (("t", 0), ("in", 2))),
        Instr("sin", (2,), (("in", 0),)),
        Instr("mul", (4,), (("c", 0.1), ("t", 2))),
        Instr("neg", (5,), (("t", 0),)),
    ])
    a, b, c = 1.5, -2.25, 0.75
    A = aligned_errors(tape, np.array([[a, b, c]]))[0]
    ab = a * b
    want0 = U * (abs(ab + c) + abs(ab) + abs(b * a) + abs(a * b) + abs(c))  # add, mul, inputs a, b, c
    s = 0.1 * np.sin(a)
    want1 = U * abs(s) + 0.1 * TRIG_ULPS * U + U * abs(0.1 * np.cos(a) * a) + U * abs(s)  # mul, sin, a, literal
    want2 = U * (abs(ab) + abs(ab) + abs(ab))  # the negation is exact
    assert np.allclose(A, [want0, want1, want2], rtol=1e-12, atol=0)
    assert rounded_operations(tape) == [2 + 3, 2 + 1, 1 + 2]
    # one state: each rounding's largest is its value there, so the sum is the floor itself
    floor, summed = summed_maxima(tape, np.array([[a, b, c]]))
    assert np.allclose(floor, A, rtol=1e-12) and np.allclose(summed, A, rtol=1e-12)
    # two states whose roundings peak apart: y0's product rounding peaks at the first, its
    # input c at the second, so the sum of the maxima is above both states' floors
    X = np.array([[2.0, 2.0, 0.0], [0.0, 0.0, 8.0]])
    floor, summed = summed_maxima(tape, X)
    assert summed[0] > floor[0] * 1.2 and np.allclose(floor, aligned_errors(tape, X).max(0), rtol=1e-12)


def test_float32_kernel_never_above_it_and_the_bound_never_below(tmp_path):
    eqs = H.build().equations()
    k = build_kernel(eqs, "inverse-dynamics")
    generate(k, "c-float32").write(tmp_path)
    bound = np.concatenate([g["error_bound"] for g in json.loads((tmp_path / "manifest.json").read_text())["outputs"]])
    X = _inputs(k, sweep())
    Y, status = load_kernel(tmp_path)(X.astype(np.float32))
    assert np.all(status == 0)
    err = np.abs(Y.astype(np.float64) - np.atleast_2d(Evaluator(k.output_atoms, k.input_symbols)(X)))
    A = aligned_errors(k.tape(), X)
    # second-order terms (u^2 times the coefficients) are far below this slack
    assert np.all(err <= A * (1 + 1e-4)), f"float32 error above the aligned first-order error: {(err / A).max(0)}"
    assert (err / A).max() > 0.05, "the aligned error is no measure of these errors"
    assert np.all(A.max(axis=0) <= bound)


def test_fixed_point_kernel_never_above_its_floor_and_the_bound_never_below(tmp_path):
    """The same for c-fixed: the roundings are the error forms' symbols (sites_out), each
    a half ulp of its format times |dy/d temp|. The literals' conversion errors are left
    out of the floor (it may leave terms out), which this kernel's margin absorbs."""
    from mbforge.analysis.aligned import fixed_aligned_errors, fixed_roundings
    from mbforge.analysis.fixerror import bound_over_boxes, output_errors_boxes
    from mbforge.analysis.ranges import BoxRanges, analyse_domain
    from mbforge.verify.vectors import from_raw, to_raw
    from mbforge.manifest import Manifest

    k = build_kernel(H.build().equations(), "inverse-dynamics")
    generate(k, "c-fixed").write(tmp_path)
    m = Manifest.load(tmp_path)
    bound = np.array([x for g in m.outputs for x in g.error_bound])
    tape, per, sites = k.tape(), [], []
    fx = bound_over_boxes(tape, analyse_domain(tape, k.domain, per_box=per), per)
    output_errors_boxes(fx, BoxRanges.from_list(tape, per[:1]), sites_out=sites)
    assert len(sites) > len(k.input_symbols)
    assert all(len(k.input_symbols) < n <= len(sites) for n in fixed_roundings(tape, sites))
    X = _inputs(k, sweep())
    Y, status = load_kernel(tmp_path)(to_raw(m, X, "inputs"))
    assert np.all(status == 0)
    err = np.abs(from_raw(m, Y, "outputs") - np.atleast_2d(Evaluator(k.output_atoms, k.input_symbols)(X)))
    A = fixed_aligned_errors(tape, sites, X)
    assert np.all(err <= A), f"fixed-point error above its aligned floor: {(err / A).max(0)}"
    assert (err / A).max() > 0.3
    assert np.all(A.max(axis=0) <= bound)


def test_fixed_sites_from_the_generated_program_equal_a_fresh_analysis():
    """bench.stewart_envelope takes the fixed-point roundings from the program generate
    made (Plan.analysis) instead of analysing the kernel again (about 50 s on the
    Stewart): the same sites and half-ulps, in the same order."""
    from bench.stewart_envelope import fixed_sites
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    k = build_kernel(load("slidercrank").equations(), "kinematics")
    plan = generate(k, "c-fixed")
    assert plan.analysis is not None and plan.analysis.plan is not None
    got, want = fixed_sites(k, plan.analysis.plan), fixed_sites(k)
    assert len(want) > 20 and got == want
