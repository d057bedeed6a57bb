"""How close box-wise float32 error analysis comes to the rounding model's floor as the
boxes shrink: the Stewart platform's reduced inverse dynamics (issue 13's float32 line).

    python -m bench.box_scaling [--states 8] [--fractions 1 0.5 0.25 0.125 0.03125]
        [--samples 300] [--timing 64] [--json FILE]

1. The kernel as `mbforge generate stewart --kernel inverse-dynamics-reduced` builds it
   over the model's envelope (one domain box per cell of the cover); 20,000 random
   consistent states of the envelope (bench.stewart_envelope.random_inputs); the cell
   whose states reach the largest floor (analysis.aligned: every rounding aligned), and
   `--states` of its states, those with the largest floor first.
2. Around each state, for each fraction f: a box of the kernel's inputs whose pose inputs
   (position, Euler parameters) span f of the cell's domain box (clipped to it), the
   rates and accelerations its whole range. The box is analysed as c-float32's generate
   analyses a domain box (floaterror.float32_forms_boxes: error forms, split at the
   solve, parts cut where the split fails).
3. The floor over the box: the largest aligned error at `--samples` points drawn
   uniformly in it and as many of its corners (the bound must hold at every point of a
   box, consistent or not). Per f: bound / floor, median and largest over the states
   and outputs; the CPU seconds per box of one pass over `--timing` such boxes at once
   (as generate analyses a domain's boxes); how many such boxes a cell needs ((1/f)^6:
   all six pose dimensions matter, see the closing note of issue 13) and what covering
   the cover's cells would cost at that rate.

Why: a bound at most 30x the errors float32 shows needs bound / floor <= 30 / (floor /
observed), about 3 to 3.75 for this kernel (bench.stewart_envelope: floor / observed 8 to
10, the cancellation of 7,124 to 7,159 roundings per output that no sound bound may count
on). This prints what f that takes and what it costs.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from mbforge.analysis.aligned import aligned_errors
from mbforge.analysis.floaterror import float32_forms_boxes
from mbforge.analysis.ranges import analyse_chunked
from mbforge.examples import load
from mbforge.kernels.builders import build_kernel
from mbforge.domain.cover import envelope_cover
from mbforge.kernels.reduced import reduction

from . import check_json, run
from .stewart_envelope import random_inputs


def box_around(x, lo, hi, pose, f):
    """The box of fraction f of [lo, hi] along the pose inputs around x (clipped), whole elsewhere."""
    half = np.where(pose, f, 1.0) * (hi - lo) / 2
    centre = np.where(pose, x, (lo + hi) / 2)
    return np.maximum(centre - half, lo), np.minimum(centre + half, hi)


def box_floor(tape, lo, hi, n: int, rng) -> np.ndarray:
    """Largest aligned error per output over n uniform points of the box and n corners."""
    X = lo + rng.random((n, lo.size)) * (hi - lo)
    C = np.where(rng.random((n, lo.size)) < 0.5, lo, hi)
    return aligned_errors(tape, np.vstack([X, C])).max(axis=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.box_scaling", description=__doc__.split("\n\n")[0])
    ap.add_argument("--states", type=int, default=8)
    ap.add_argument("--fractions", type=float, nargs="+", default=[1.0, 0.5, 0.25, 0.125, 1 / 32])
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--timing", type=int, default=64, help="boxes of the timed pass")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    check_json(ap, a.json)
    if any(not 0 < f <= 1 for f in a.fractions):
        ap.error("--fractions: each in (0, 1]")
    os.environ["MBFORGE_CACHE_DIR"] = "off"
    os.environ["MBFORGE_JOBS"] = "1"  # the CPU time is this process' own
    eqs = load("stewart").equations()
    kernel = build_kernel(eqs, "inverse-dynamics-reduced")
    tape = kernel.tape()
    red = reduction(eqs)
    cover = envelope_cover(eqs, unknowns=red.z, rows=red.psi)
    X, _, _ = random_inputs(eqs, kernel, cover, 20000)
    dom = np.array(kernel.domain, dtype=float)  # (cells, inputs, 2)
    inside = np.all((X[:, None, :] >= dom[None, :, :, 0]) & (X[:, None, :] <= dom[None, :, :, 1]), axis=2)
    cell_of = inside.argmax(axis=1)
    floor = aligned_errors(tape, X).max(axis=1)
    cell = int(cell_of[np.argmax(floor)])
    mine = np.flatnonzero(cell_of == cell)
    ranked = X[mine[np.argsort(-floor[mine])]]
    states, timed = ranked[:a.states], ranked[:a.timing]
    lo, hi = dom[cell, :, 0], dom[cell, :, 1]
    names = [s.value.name for s in kernel.input_symbols]
    pose = np.array([not n.endswith(("_d", "_dd")) for n in names])
    print(f"cell {cell} of {len(dom)} (largest floor {floor.max():.3g} N); {len(states)} states; "
          f"pose inputs {', '.join(n for n, p in zip(names, pose) if p)}")
    rng = np.random.default_rng(5)
    report = {"cell": cell, "states": len(states), "rows": []}
    for f in a.fractions:
        ratios = []
        for x in states:
            blo, bhi = box_around(x, lo, hi, pose, f)
            vec = analyse_chunked(tape, blo[None], bhi[None], False, hi - lo)
            bound = np.array(float32_forms_boxes(tape, vec))
            ratios.append(bound / box_floor(tape, blo, bhi, a.samples, rng))
        r = np.array(ratios)
        boxes_t = [box_around(x, lo, hi, pose, f) for x in timed]
        t0 = time.process_time()  # this process alone: MBFORGE_JOBS=1 below
        float32_forms_boxes(tape, analyse_chunked(tape, np.array([b[0] for b in boxes_t]),
                                                  np.array([b[1] for b in boxes_t]), False, hi - lo))
        per_box = (time.process_time() - t0) / len(timed)
        boxes = (1 / f) ** 6
        row = {"fraction": f, "bound_over_floor_min": float(r.min()), "bound_over_floor_median": float(np.median(r)),
               "bound_over_floor_max": float(r.max()),
               "cpu_s_per_box": per_box, "boxes_per_cell": boxes, "cpu_days_for_cover": boxes * len(dom) * per_box / 86400}
        report["rows"].append(row)
        print(f"f = {f:<8.4g} bound / floor median {row['bound_over_floor_median']:6.2f}, largest "
              f"{row['bound_over_floor_max']:6.2f}; {per_box:5.2f} CPU s per box; {boxes:9.0f} boxes per cell, "
              f"{row['cpu_days_for_cover']:.3g} CPU days for the {len(dom)} cells", flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(report, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    run("box_scaling", main)
