"""The Stewart platform's reduced inverse dynamics over its operating envelope (issue 13's
first done-when line): generation time and box count, then the generated kernel against
double on the four motions and on random consistent states of the envelope.

    python -m bench.stewart_envelope [--target c-fixed|c-float32] [--motion-points 20000]
        [--random 100000] [--search 2000] [--xyz-cells N] [--cells NAME=N ...]
        [--envelope-off [--domain-steps N]]
        [--out DIR] [--json FILE]

1. Build the kernel (`inverse-dynamics-reduced`, domain = the envelope's verified cover)
   and generate it for the target; wall and CPU time, the number of domain boxes. A
   refusal (e.g. a pivot whose range reaches 0 over a box) is reported with its message.
2. Inputs: each motion's platform states in closed form (_stewart.platform_states) on
   `--motion-points` times over [0, T_END], and `--random` consistent states drawn
   uniformly over the envelope (domain.cover: Cover.sample).
3. The kernel runs compiled on the host (verify.hostlib, bit-exact with the device C) on the
   inputs converted to its type (to_raw: fixed-point rounding, or float32); the reference
   is double (ir Evaluator) at the UNROUNDED inputs, so input rounding counts.
4. Per output: largest error per set, the manifest's bound, bound / observed; status codes.
5. Adversarial search, once per output (domain.cover.search_states, the search of `mbforge
   hdl --search`): from its `--search` worst random states (error / bound), random steps in
   the envelope's quantities, rates and accelerations (projected back on the constraint,
   kept inside the envelope), shrinking, keeping what raises err_i / bound_i. On the heave tube (--envelope-off), whose consistent states are the
   heave motion itself: the time grid refined 50x around the `--search` worst points.
6. The floor (analysis.aligned): per state the error with every rounding aligned, its
   largest over the sets and over a search like 5.; bound / floor is how far the analysis
   is from the tightest bound the rounding model allows, floor / observed the
   cancellation among the roundings (their count per output is printed). For float32 also
   summed / floor per cell of the cover (analysis.aligned.summed_maxima), its largest.

Exit status 0 when every state returned status 0 and stayed within its bound, else 1
(2: generation refused). Figures depend on the machine's load: quote them with it.

Measured 2026-12-07 (two cores shared with other work), the searches by
domain.cover.search_states from the one random draw, --search 300, defaults otherwise:
* c-fixed: status 0 and within the bound on all 180,000 states; bounds 2.90e-3, 1.54e-3,
  1.25e-3, 8.03e-4, 6.36e-4, 5.92e-4 N (as before); the search reached error / bound 0.268,
  0.300, 0.335, 0.244, 0.052, 0.036 (183 s); bound / observed with the search 3.74, 3.34,
  2.98, 4.10, 19.2, 27.6 (3.74 .. 26.8 with the bench's own search of 2026-12-03); bound /
  floor 1.79 .. 12.4; floor / observed 1.55 .. 2.22.
* c-float32: all within; the same bounds as before (0.0831 .. 0.0444 N); the search reached
  error / bound 0.0035 .. 0.0049 (79 s); bound / observed with the search 289, 221, 256, 208,
  238, 205 (272 .. 227 before); bound / floor 22.3 .. 33.7; summed / floor per cell 1.59 ..
  1.63; floor / observed 8.6 .. 10.0.

Measured 2026-12-03, fourth session (two cores, this bench alone), with the matrix's own
values enclosed over halves along the inputs that move it only (analysis.linear.moving_dims:
x, y, z, e1, e2, e3; e0 moves it 1%), --search 300:
* c-fixed: generated in 44.6 s wall (73 s CPU, build included; the same code without
  moving_dims took 62 to 67 s that day, 46 s the day before); status 0 and within the
  bound on all 180,000 states; bounds 2.90e-3, 1.54e-3, 1.25e-3, 8.03e-4, 6.36e-4,
  5.92e-4 N; bound / observed with the search 3.74, 3.94, 2.98, 4.36, 18.9, 26.8; bound /
  floor 1.8 .. 12.5; floor / observed 1.5 .. 2.1.
* c-float32: 38.5 s; all within; bounds 0.0831, 0.0598, 0.0535, 0.0488, 0.0435, 0.0444 N;
  bound / observed with the search 272, 229, 255, 228, 230, 227; bound / floor 22.6 ..
  34.2; floor / observed 8.0 .. 10.1. Why no sound box-wise bound comes within 30x:
  python -m bench.box_scaling.

Measured 2026-12-03 (two cores, this bench alone), with the pieces of each pass on both
cores (analysis.parallel; the CPU then printed was the parent's alone, now the children's
counts too), the cutting within 12x the boxes (the failed, then the loosest first), A's
errors through R column by column and float32's products as midpoint + one new symbol
(analysis.solve_error, floaterror), --search 300:
* c-fixed over the model's 64 cells (768 boxes): generated in 50 s wall; status 0 and
  within the bound on 4 x 20,000 motion points and 1e5 random consistent states; bounds
  3.04e-3, 1.50e-3, 1.27e-3, 6.88e-4, 5.36e-4, 4.79e-4 N; bound / observed, the
  per-output search included, 3.92, 3.49, 3.04, 3.41, 19.9, 22.3 (the search reached
  error / bound 0.255, 0.287, 0.329, 0.293, 0.050, 0.045); floor 1.61e-3 .. 4.66e-5 N:
  bound / floor 1.9, 1.8, 2.0, 2.3, 9.8, 10.3, floor / observed 2.1, 1.9, 1.6, 1.5, 2.0,
  2.2; 6,411 .. 6,376 roundings per output.
* c-float32, the same cells: 50 s; all within; bounds 0.0815, 0.0585, 0.0526, 0.0464,
  0.0437, 0.0444 N (0.109 .. 0.068 before); bound / observed with the search 267, 224,
  250, 217, 231, 227; floor 2.43e-3 .. 1.74e-3 N: bound / floor 33.5, 22.1, 25.1, 21.7,
  25.0, 22.8, floor / observed 8.0 .. 10.1; 7,159 .. 7,124 roundings per output. What
  keeps the float32 bound from the floor, in the box holding the largest: the errors A
  and b arrive with through R (b 0.009 N, A 0.010 N, of which 0.0084 is A's column
  errors times the forces' range over the box: accelerations span their whole range in
  every cell), the solve's own roundings (0.006 N), the Neumann factor 2 (G's row sums
  0.5) and the back substitution's roundings.
* c-float32, the same day: summed / aligned (new, analysis.aligned.summed_maxima over the
  ~1,500 random states of each cell) 1.59 .. 1.63 at most over the cells: a bound charging
  every rounding its own largest |adjoint| x size in a cell could come within 1.6x of the
  floor (the figures above otherwise unchanged); the 22-34x is in how the analysis
  encloses the adjoints over a cell.
* --xyz-cells 2 (512 cells, nothing cut), measured again 2026-12-03 (third session): c-fixed
  in 19 s, all within, bounds 8.77e-4 .. 5.90e-4 N, errors 3.3e-5 .. 5.4e-6 N (20x smaller
  than over the 64 cells), bound / observed with the search 26.5, 30.5, 26.9, 51.3, 101,
  109, bound / floor 10.5 .. 27.3; float32 in 25 s, bounds 0.152 .. 0.080 N (looser than
  over the 64 cells cut to 768 boxes), bound / observed 409 .. 498.
* Tried and not kept: the cutting within 16x (c-fixed 60 s, output 5's bound 3.8e-4 N);
  fewer halves for the matrix's enclosures of the parts (2^4, 2^5 instead of 2^7: 20%
  faster, bounds 10-50% looser); 400 error-form terms for float32 (bounds the same,
  50% slower).

Measured 2026-12-02, fourth session (two cores), with boxes where the split at the solve
fails cut round by round (analysis.solve_error.refine_for_solve):
* c-fixed over the model's 64 cells (659 boxes after the cutting): generated in 56 s
  (idle; 60 s before the solve enclosures were kept per box); status 0 and within the bound on 4 x 20,000 motion points and
  1e5 random consistent states; bounds 3.23e-3, 1.75e-3, 1.46e-3, 9.75e-4, 7.29e-4,
  6.87e-4 N (454 .. 3.95 N before); largest errors 7.7e-4 .. 2.2e-5 N; bound / observed
  4.17, 4.07, 3.50, 5.53, 27.8, 32.0; the search from the 2000 worst came to error /
  bound 0.286.
* c-float32 over the 64 cells: 81 s; all within; bounds 0.109 .. 0.068 N; bound /
  observed 359 .. 435; search 0.0037.
* --xyz-cells 2 (512 cells): no box fails the split, nothing is cut; c-fixed 36 s,
  float32 44 s, the figures below unchanged.
* --xyz-cells 2 --cells plat_e1=8 --cells plat_e2=8 --cells plat_e3=8 (4096 cells):
  c-fixed in 302 s; all within; bounds 1.93e-4 .. 1.14e-4 N; errors 1.3e-5 .. 3.0e-6 N;
  bound / observed 14.8, 17.6, 15.1, 21.8, 36.0, 38.4; search 0.077. Halving one cell's
  e1..e3 alone (8 parts) cut its bound 3-5x (the error forms' coefficient intervals
  narrow), which is what the cutting above does where it is needed.

Measured 2026-12-02, third session (two cores, this bench alone unless said), with the
bound split where the solve begins (analysis.solve_error) and the op notes made lazily:
* c-fixed, --xyz-cells 2 (512 cells, as `mbforge generate ... --envelope
  docs/stewart-envelope-fine.json`): generated in 52 s wall (idle machine); status 0 and
  within the bound on 4 x 20,000 motion points and 1e5 random consistent states; bounds
  9.08e-4, 7.49e-4, 7.20e-4, 6.93e-4, 6.48e-4, 6.22e-4 N (whole-program forms: 2.58 ..
  0.049 N); largest errors 3.3e-5 .. 5.1e-6 N; bound / observed 27.4, 31.9, 28.1, 55.6,
  122, 123; the search from the 2000 worst random states came to error / bound 0.0385.
  What is left: the split bound's first part, sum_k u_k |R g_k| (g_k = c_b,k - C_A,k y),
  encloses each rounding's reach through b and through A y separately over a cell that
  spans every rate and acceleration (in truth b = A y and they cancel), and the Neumann
  factor (I - G)^-1 (G's row sums about 0.52 over a cell's halves, 0.68 over the cell)
  spreads the largest component over all six forces: forces 4 and 5, whose errors are 6x
  smaller, get nearly the bound of force 0.
* c-float32, --xyz-cells 2: 65-75 s; status 0 and within the bound everywhere; bounds
  0.214, 0.163, 0.153, 0.149, 0.135, 0.129 N (839 .. 16 N before); largest errors 2.6e-4
  .. 1.6e-4 N; bound / observed 700 .. 850 (the errors A and b arrive with dominate).
* c-fixed over the model's 64 cells: 19.6 s; bounds 454 .. 3.95 N, unchanged (the split
  needs G's row sums below 1, over cells twice as wide they are not); errors 3.7e-3 N.

Measured 2026-12-02, second session (load about 4), with the leg lengths as measures
(Model.explicit_measure) and the LU's values enclosed from its matrix (analysis.linear):
* c-fixed on the heave tube (--envelope-off, 96 boxes, 20,001 points): generated in 15 s
  wall / 9 s CPU; status 0 and within the bound everywhere; with error forms of 400 terms
  (fixerror.MAX_TERMS, was 40) bounds 5.7e-5 .. 1.1e-5 N (first session: 1.1e-3 .. 1.3e-4);
  bound / observed 31.5, 19.7, 13.5, 15.5, 14.4, 12.2 (first session 123 .. 596); more
  than 400 roundings reach each output, and bound / (4 sigma) is 7.3 .. 8.4 (what
  independent roundings would show); the closest a state of the search along heave came
  to a bound: error / bound 0.0834 (u_f6, t = 1.0357). With --domain-steps 192 (192 boxes,
  12.6 s wall / 12 s CPU): bounds 4.9e-5 .. 1.0e-5 N, bound / observed 26.8, 17.4, 12.5,
  13.9, 13.0, 11.2 (bound / (4 sigma) 8.2 .. 13); the search's closest: 0.0919 (t = 0.86). Yaw, roll, pitch lie outside the tube's formats (refused on the host, as a
  device would answer 2).
* over the envelope, with the matrix's values also enclosed over the 128 halves of each
  cell (analysis.linear): c-fixed generates, over the model's 64 cells in 11 s with bounds
  4 .. 454 N, and with --xyz-cells 2 (512 cells) in 39 s with bounds 2.58, 0.82, 0.54,
  0.31, 0.052, 0.049 N; status 0 and within the bound on 4 x 20,001 motion points and 1e5
  random consistent states; largest errors 3.3e-5 .. 5.1e-6 N, bound / observed 7.8e4 ..
  9.6e3. float32 at 512 cells: bounds 16 .. 839 N.

Measured 2026-12-02, first session (2 cores shared by nine sessions; ENV_CELLS x, y, z 1, e1..e3 4):
* c-fixed over the envelope: kernel built (64 boxes) in 19 s wall / 4.4 s CPU; generation
  refused on the first box: an LU pivot of the projected system encloses [-3.01, 5.59]
  (its value about -0.73). Probed by hand: the pivots pass once all seven position inputs
  of a box are narrowed to a quarter of a 64-cell box (half is not enough): uniformly,
  about 4^3 x 16^3 = 262,144 boxes, at 1.2 s per box with today's scalar analysis.
* c-float32 over the envelope: generated in 129 s wall / 28 s CPU, no error bound for any
  output (the same pivots); status 0 on 4 x 20,000 motion points and 1e5 random states;
  largest error against double at the unrounded input 1.3e-4 .. 2.9e-4 N per output.
* c-fixed on the heave tube (--envelope-off, 96 boxes, 2,000 points per motion): 602 s
  wall / 90 s CPU; heave within its bound (bound / observed 106 .. 783), yaw, roll and
  pitch status 1 on every point (errors up to 98 N).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from mbforge.analysis.aligned import (aligned_errors, fixed_aligned_errors, fixed_roundings, rounded_operations,
                                      summed_maxima)
from mbforge.examples import _stewart as S
from mbforge.examples import load
from mbforge.verify.hostlib import from_raw, load_kernel, to_raw
from mbforge.verify.vectors import VectorError
from mbforge.ir import Evaluator
from mbforge.model.errors import ModelError
from mbforge.kernels.builders import build_kernel
from mbforge.domain.cover import drawn_rows, drawn_states, envelope_cover, search_states
from mbforge.kernels.reduced import reduced_inverse_dynamics_kernel, reduction
from mbforge.manifest import Manifest
from mbforge.pipeline import generate

from . import check_json, run

CHUNK = 20000


def _reference(kernel):
    ev = Evaluator(kernel.output_atoms, kernel.input_symbols)

    def f(X):
        return np.vstack([np.atleast_2d(ev(X[i:i + CHUNK])) for i in range(0, len(X), CHUNK)])
    return f


def motion_at(kernel, motion: str, t) -> np.ndarray:
    """The kernel's inputs along a motion at times t (closed form)."""
    names = [s.value.name for s in kernel.input_symbols]
    Z, ZD, ZDD = S.platform_states(motion, t)
    cols = {}
    for k, c in enumerate(("x", "y", "z", "e0", "e1", "e2", "e3")):
        cols[f"plat_{c}"], cols[f"plat_{c}_d"], cols[f"plat_{c}_dd"] = Z[:, k], ZD[:, k], ZDD[:, k]
    return np.column_stack([cols[nm] for nm in names])


def motion_inputs(kernel, n: int) -> dict:
    t = np.linspace(0.0, S.T_END, n)
    return {motion: motion_at(kernel, motion, t) for motion in S.MOTIONS}


def random_inputs(eqs, kernel, cover, n: int, seed: int = 11):
    """(kernel inputs [n', 21], envelope parameters [n', 18]: quantities, rates,
    accelerations, the draw itself: domain.cover.drawn_states, which the searches start from)."""
    drawn = drawn_states(eqs, kernel.inputs, cover, n, seed)
    S_, ps = drawn[0], cover.problem.params
    P = np.column_stack([S_[a.sym] for a in ps] + [S_[a.sym_d] for a in ps] + [S_[a.sym_dd] for a in ps])
    return drawn_rows(drawn), P, drawn


class Runner:
    """The compiled kernel and the double reference on real-valued inputs."""

    def __init__(self, kernel, kdir: Path):
        self.m = Manifest.load(kdir)
        self.lib = load_kernel(kdir)
        self.ref = _reference(kernel)
        b = [x for g in self.m.outputs for x in (g.error_bound or [None] * g.size)]
        self.bound = np.array([np.inf if x is None else x for x in b], dtype=float)

    def errors(self, X):
        Y, status = self.lib(to_raw(self.m, X, "inputs"))
        return np.abs(from_raw(self.m, Y, "outputs") - self.ref(X)), np.asarray(status)


def search_outputs(eqs, kernel, cover, drawn, scores, start: int) -> list:
    """domain.cover.search_states once per output j, from the `start` states of the random
    draw with the largest scores(X)[:, j], for the largest scores(.)[:, j]: [(score, input)]
    per output."""
    out = []
    for j in range(len(kernel.output_atoms)):
        sc, X, _ = search_states(eqs, kernel.inputs, cover, lambda Y, j=j: scores(Y)[:, j], 0, start, drawn=drawn)
        w = int(np.argmax(sc))
        out.append((float(sc[w]), X[w]))
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench.stewart_envelope", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="c-fixed", choices=("c-fixed", "c-float32"))
    ap.add_argument("--motion-points", type=int, default=20000)
    ap.add_argument("--random", type=int, default=100000)
    ap.add_argument("--search", type=int, default=2000)
    ap.add_argument("--xyz-cells", type=int, default=None,
                    help="cells of the envelope along the platform's x, y and z (the model's: 1); 2 makes the "
                         "reduced kernel's c-fixed bounds finite over the envelope")
    ap.add_argument("--cells", action="append", default=[], metavar="NAME=N",
                    help="cells of the envelope along one quantity, e.g. plat_e1=8 (repeatable; after --xyz-cells)")
    ap.add_argument("--domain-steps", type=int, default=None,
                    help="with --envelope-off: boxes of the tube (default domain.motion.DOMAIN_STEPS)")
    ap.add_argument("--envelope-off", action="store_true", help="the driven (heave) motion's tube (the model built with envelope=False)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    return ap


def main(argv=None) -> int:
    ap = _parser()
    a = ap.parse_args(argv)
    check_json(ap, a.json)
    report: dict = {"target": a.target, "envelope": not a.envelope_off}
    eqs = _equations(ap, a)
    built = _generate(a, eqs, report)
    if built is None:
        return 2
    kernel, plan, out = built
    run = Runner(kernel, out)
    report["ops"] = run.m.ops
    report["bound"] = run.bound.tolist()
    sets = motion_inputs(kernel, a.motion_points)
    cover, P_random = None, None
    if not a.envelope_off and a.random:
        red = reduction(eqs)
        cover = envelope_cover(eqs, unknowns=red.z, rows=red.psi)
        sets["random"], P_random, drawn = random_inputs(eqs, kernel, cover, a.random)
    ok, worst_all = _errors(run, sets, a.envelope_off, report)
    _floors(a, eqs, kernel, plan, run, sets, (cover, P_random, drawn), worst_all, report)
    if a.envelope_off and a.search:
        score, t_best = search_along(run, kernel, sets["heave"], a.motion_points, a.search)
        report["adversarial"] = {"max_err_over_bound": score, "t": t_best}
        print(f"search along heave (the {a.search} worst grid points, refined 50x around each): max error / "
              f"bound {score:.3g} at t = {t_best:.9g}")
    _dump(a.json, report)
    return 0 if ok else 1


def _equations(ap, a):
    """The Stewart model's equations, its envelope's cells as --xyz-cells and --cells ask."""
    eqs = load("stewart", envelope=not a.envelope_off).equations()
    if a.xyz_cells and not a.envelope_off:
        cells = {"quantities": {f"plat_{c}": {"cells": a.xyz_cells} for c in "xyz"}}
        eqs.envelope = eqs.envelope.override(cells, "--xyz-cells", list(eqs.actuator_names))
    if a.cells and not a.envelope_off:
        try:
            cells = {"quantities": {n: {"cells": int(k)} for n, k in (c.split("=") for c in a.cells)}}
            eqs.envelope = eqs.envelope.override(cells, "--cells", list(eqs.actuator_names))
        except ModelError as e:
            ap.error(str(e))
        except ValueError:
            ap.error(f"--cells: expected NAME=N, got {a.cells}")
    return eqs


def _generate(a, eqs, report: dict):
    """(kernel, plan, folder) of the reduced inverse dynamics generated for --target, timed
    into report; None (reported) when generation refuses."""
    # the times are a first run's: neither the cover's enclosures nor the analysis come from
    # the disk cache (mbforge.cache), which makes a second `mbforge generate` take seconds
    os.environ["MBFORGE_CACHE_DIR"] = "off"
    t0, c0 = time.perf_counter(), _cpu()
    if a.domain_steps is not None and a.envelope_off:
        kernel = reduced_inverse_dynamics_kernel(eqs, domain_steps=a.domain_steps)
    else:
        kernel = build_kernel(eqs, "inverse-dynamics-reduced")
    t1, c1 = time.perf_counter(), _cpu()
    report["boxes"] = len(kernel.domain)
    report["build_s"] = {"wall": round(t1 - t0, 1), "cpu": round(c1 - c0, 1)}
    print(f"kernel built: {report['boxes']} domain boxes, {t1 - t0:.1f} s wall, {c1 - c0:.1f} s CPU")
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="stewart_env_"))
    try:
        plan = generate(kernel, a.target)
    except Exception as e:  # the refusal is the measurement: report it
        report["refused"] = str(e).splitlines()[0][:400]
        print(f"generation refused after {time.perf_counter() - t1:.1f} s: {report['refused']}")
        _dump(a.json, report)
        return None
    t2, c2 = time.perf_counter(), _cpu()
    plan.write(out)
    report["generate_s"] = {"wall": round(t2 - t0, 1), "cpu": round(c2 - c0, 1)}
    print(f"generated {a.target} in {t2 - t0:.1f} s wall ({c2 - c0:.1f} s CPU, build included) -> {out}")
    return kernel, plan, out


def _errors(run: Runner, sets: dict, envelope_off: bool, report: dict):
    """(whether every state returned status 0 within its bound, the largest error per
    output) over the input sets; printed and into report."""
    ok = True
    worst_all = np.zeros(len(run.bound))
    rows = {}
    for name, X in sets.items():
        try:
            err, status = run.errors(X)
        except VectorError as e:  # the heave tube (--envelope-off) does not hold the other motions
            rows[name] = {"points": len(X), "outside_domain": str(e)[:200]}
            print(f"{name:7s} {len(X):6d} points: outside the kernel's domain ({str(e)[:120]})")
            ok &= bool(envelope_off)
            continue
        worst = err.max(axis=0)
        worst_all = np.maximum(worst_all, worst)
        inside = np.all(err <= run.bound, axis=1)
        rows[name] = {"points": len(X), "status0": int((status == 0).sum()), "within": int(inside.sum()),
                      "max_err": worst.tolist()}
        ok &= bool((status == 0).all() and inside.all())
        print(f"{name:7s} {len(X):6d} points: status 0 on {rows[name]['status0']}, within bound on "
              f"{rows[name]['within']}; max error per output {_fmt(worst)}")
    report["sets"] = rows
    ratio = run.bound / np.where(worst_all > 0, worst_all, np.nan)
    report["bound_over_observed"] = ratio.tolist()
    print(f"bound per output       {_fmt(run.bound)}")
    print(f"bound / observed       {_fmt(ratio)}")
    return ok, worst_all


def _floors(a, eqs, kernel, plan, run: Runner, sets: dict, envelope, worst_all, report: dict) -> None:
    """The aligned floor (analysis.aligned) over the sets and, over the envelope (its
    cover, the random states' parameters and draw, or Nones), the searches per output;
    the ratios between bound, floor and observed; printed and into report."""
    cover, P_random, drawn = envelope if envelope[0] is not None else (None, None, None)
    tape = kernel.tape()
    if a.target == "c-fixed":  # the floor of any bound under the rounding model (analysis.aligned)
        sites = fixed_sites(kernel, plan.analysis.plan if plan.analysis is not None else None)

        def floor_of(Y):
            return fixed_aligned_errors(tape, sites, Y)
    else:
        def floor_of(Y):
            return aligned_errors(tape, Y)
    floor = np.zeros(len(run.bound))
    for X in sets.values():
        floor = np.maximum(floor, floor_of(X).max(axis=0))
    report["aligned_floor"] = floor.tolist()
    print(f"aligned roundings      {_fmt(floor)}  (max over the sets of sum |dy/dv_i| x rounding_i: no bound sound "
          "under the rounding model is lower; analysis.aligned)")
    if cover is not None and a.search and np.all(np.isfinite(run.bound)):
        worst_all, floor = _searches(a.search, eqs, kernel, run, cover, drawn, floor_of, worst_all, floor, report)
    print(f"bound / aligned        {_fmt(run.bound / floor)}  (how far the analysis is from the model's floor)")
    if a.target == "c-float32" and cover is not None:
        report["summed_over_aligned"] = per_cell = summed_per_cell(tape, cover, sets["random"], P_random)
        print(f"summed / aligned       {_fmt(per_cell)}  (largest over the cells: each rounding's own largest "
              "|adjoint| x size in a cell, summed, over the cell's floor; how close a cell-wise bound can come)")
    print(f"aligned / observed     {_fmt(floor / worst_all)}  (the roundings' cancellation, which no sound bound "
          "under the model can claim)")
    report["roundings"] = rounded_operations(tape) if a.target == "c-float32" else fixed_roundings(tape, sites)
    print("roundings per output    " + " ".join(str(x) for x in report["roundings"]))


def _searches(search: int, eqs, kernel, run: Runner, cover, drawn, floor_of, worst_all, floor, report: dict):
    """The adversarial searches per output, of error / bound then of floor / bound, from
    the `search` worst random states: (worst_all, floor) raised by what they found."""
    t_s = time.perf_counter()
    found = search_outputs(eqs, kernel, cover, drawn, lambda Y: run.errors(Y)[0] / run.bound, search)
    report["adversarial"] = [{"max_err_over_bound": sc, "input": x.tolist()} for sc, x in found]
    print(f"adversarial search per output (from its {search} worst random states, "
          f"{time.perf_counter() - t_s:.0f} s): error / bound {_fmt([sc for sc, _ in found])}")
    for j, (sc, x) in enumerate(found):
        print(f"  output {j} closest at " + ", ".join(f"{s.value.name}={v:.6g}" for s, v in zip(kernel.input_symbols, x)))
    worst_all = np.maximum(worst_all, np.array([sc for sc, _ in found]) * run.bound)
    ratio = run.bound / np.where(worst_all > 0, worst_all, np.nan)
    report["bound_over_observed_with_search"] = ratio.tolist()
    print(f"bound / observed, search included {_fmt(ratio)}")
    found = search_outputs(eqs, kernel, cover, drawn, lambda Y: floor_of(Y) / run.bound, search)
    floor = np.maximum(floor, np.array([sc for sc, _ in found]) * run.bound)
    report["aligned_floor_with_search"] = floor.tolist()
    report["aligned_search"] = [{"aligned_over_bound": sc, "input": x.tolist()} for sc, x in found]
    print(f"aligned, search incl.  {_fmt(floor)}")
    return worst_all, floor


def summed_per_cell(tape, cover, X, P) -> list:
    """Per output, the largest over the cover's cells of analysis.aligned.summed_maxima's
    summed / floor, from the random states in each cell (cells with fewer than 50 skipped)."""
    pcol = [cover.symbols.index(p.sym) for p in cover.problem.params]
    k = len(pcol)
    inside = np.all((P[:, None, :k] >= cover.lo[None, :, pcol]) & (P[:, None, :k] <= cover.hi[None, :, pcol]), axis=2)
    cell = inside.argmax(axis=1)
    worst = np.zeros(len(tape.outputs))
    for c in range(len(cover)):
        Xc = X[cell == c]
        if len(Xc) >= 50:
            floor, summed = summed_maxima(tape, Xc)
            worst = np.maximum(worst, summed / floor)
    return worst.tolist()


def fixed_sites(kernel, fx=None) -> list:
    """The roundings of the kernel's fixed-point program over its domain (fixerror's
    output_errors_boxes sites_out) for analysis.aligned. `fx`: the program generate made
    (Plan.analysis.plan); without it, the analysis runs again (about 50 s)."""
    from mbforge.analysis.fixerror import bound_over_boxes, output_errors_boxes
    from mbforge.analysis.ranges import BoxRanges, analyse_domain
    tape = kernel.tape()
    per: list = []
    hull = analyse_domain(tape, kernel.domain if fx is None else kernel.domain[:1], per_box=per)
    if fx is None:
        fx = bound_over_boxes(tape, hull, per)
    sites: list = []
    output_errors_boxes(fx, BoxRanges.from_list(tape, per[:1]), sites_out=sites)
    return sites


def search_along(run: Runner, kernel, X, n: int, top: int):
    """The tube's consistent states are the heave motion itself: refine the time grid 50x
    around the `top` grid points with the largest max_i err_i / bound_i."""
    err, _ = run.errors(X)
    score = np.max(err / run.bound, axis=1)
    dt = S.T_END / (n - 1)
    best, t_best = float(score.max()), float(np.argmax(score) * dt)
    for j in np.argsort(-score)[:top]:
        t = np.clip(j * dt + np.linspace(-dt, dt, 51), 0.0, S.T_END)
        Xs = motion_at(kernel, "heave", t)
        e, _ = run.errors(Xs)
        sc = np.max(e / run.bound, axis=1)
        if sc.max() > best:
            best, t_best = float(sc.max()), float(t[np.argmax(sc)])
    return best, t_best


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the analysis' pieces)."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def _fmt(v) -> str:
    return "[" + " ".join(f"{x:.3g}" for x in v) + "]"


def _dump(path, report):
    if path:
        Path(path).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    run("stewart_envelope", main)
