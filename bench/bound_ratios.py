"""How loose the error bounds are (issue 29): for every shipped example (default options) and
kernel, the c-float32 and c-fixed bound of each output over its largest error observed on the
states users reach, worst pairs first.

States: a kernel whose domain is an operating envelope's cover is checked at N consistent
states drawn uniformly over the envelope (domain.cover.envelope_states); any other at its
own verification vectors (motion.json: the driven motion), or without them at N states
drawn uniformly over its declared ranges (the bound holds over them). The
compiled kernel (host C, the same bits as on a device) against double at the real inputs,
the bound's contract. An output whose observed error is at double's own noise (exact in the target: a constant, a copy) or
whose value is 0 up to double rounding at every state (a constraint's residual: judged as
analysis.boundnotes judges bounds) is left out of the ratio. Each pair runs in its own process with a time limit (the Stewart
platforms' full dynamics take minutes to generate).

    python -m bench.bound_ratios [--examples fourbar,slidercrank] [--kernels kinematics,...] [--states 20000]
                                 [--timeout 300] [--json FILE]

A kernel written KERNEL+reduced is built with --reduced (over the independent coordinates of
the model's closed forms, Model.explicit); by default forward-dynamics and linearized-dynamics
are measured so too for the examples that have closed forms.

Columns: target, pair, outputs with a bound, the worst and the median bound / observed
over them, and how the states were taken. A pair that does not generate (not applicable,
refused, no bound) is listed with its reason.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from . import check_json, run

TARGETS = ("c-float32", "c-fixed")


def measure(example: str, kernel: str, states: int) -> dict:
    """One pair, in this process: {target: {...}} or {"skip": reason}."""
    from mbforge.analysis.boundnotes import ZERO
    from mbforge.domain.cover import envelope_states
    from mbforge.examples import load
    from mbforge.ir import Evaluator
    from mbforge.kernels.builders import build_kernel
    from mbforge.manifest import Manifest
    from mbforge.pipeline import generate
    from mbforge.verify import hostlib
    from mbforge.verify.vectors import from_raw, to_raw

    eqs = load(example).equations()
    kernel, _, flag = kernel.partition("+")
    try:
        if flag == "reduced":  # over the independent coordinates: the kernel's inputs, its states' equations
            from mbforge.model.reduce import reduced_equations

            eqs = reduced_equations(eqs)
        k = build_kernel(eqs, kernel)
    except Exception as e:  # not applicable to this model (one line, as the CLI says it)
        return {"skip": str(e).splitlines()[0][:160]}
    if k.envelope:
        X, how = envelope_states(eqs, k.inputs, None, states, seed=7), "envelope states"
    elif k.motion:
        X, how = np.asarray(k.motion, dtype=float), "motion vectors"
    else:  # no verification vectors: the declared ranges, uniformly (the bound holds over them)
        lo, hi = np.array(k.input_ranges).T
        X, how = np.random.default_rng(7).uniform(lo, hi, (states, len(lo))), "declared-range samples"
    ref = Evaluator(k.output_atoms, k.input_symbols)(X) if len(X) else None
    out = {}
    with tempfile.TemporaryDirectory(prefix="mbf_ratios_") as tmp:
        for target in TARGETS:
            d = Path(tmp) / target
            try:
                generate(k, target).write(d)
            except Exception as e:
                out[target] = {"skip": "refused: " + str(e).splitlines()[0][:160]}
                continue
            m = Manifest.load(d)
            bound = np.array([np.inf if b is None else b for g in m.outputs for b in g.error_bound], dtype=float)
            Y, status = hostlib.load_kernel(d)(to_raw(m, X, "inputs"))
            ok = status == 0
            err = np.abs(from_raw(m, Y[ok], "outputs") - ref[ok]).max(axis=0) if ok.any() else np.zeros(len(bound))
            mag = np.abs(ref[ok]).max(axis=0) if ok.any() else np.zeros(len(bound))
            # not judged, as analysis.boundnotes: exact outputs, and those 0 up to double rounding (residuals)
            # ... and those the target computed exactly (an error at double's own noise: no rounding to judge)
            judged = (err > 1e-12 * mag) & np.isfinite(bound) & (mag > ZERO * mag.max(initial=0.0))
            r = bound[judged] / err[judged]
            out[target] = {"states": int(ok.sum()), "of": int(len(X)), "how": how, "outputs": int(len(bound)),
                           "unbounded": int((~np.isfinite(bound)).sum()), "judged": int(judged.sum()),
                           "beyond": int((err > bound).sum()),
                           "worst": float(r.max()) if r.size else None, "median": float(np.median(r)) if r.size else None,
                           "worst_output": m.flat_names()[int(np.flatnonzero(judged)[int(np.argmax(r))])]
                           if r.size else None}
    return out


def pairs(examples, kernels):
    from mbforge.examples import EXAMPLES
    from mbforge.kernels.builders import BUILDERS

    ex = examples or sorted(EXAMPLES)
    ks = kernels or sorted(k for k in BUILDERS if k != "step")  # step needs --dt: bench.step
    out = [(e, k) for e in ex for k in ks]
    if not kernels:  # and over the independent coordinates where the model has closed forms
        from mbforge.examples import load

        out += [(e, f"{k}+reduced") for e in ex if load(e).explicit_coords
                for k in ("forward-dynamics", "linearized-dynamics")]
    return out


def _check_names(ap, examples, kernels) -> None:
    """An example or kernel that does not exist is refused up front (one line), not per pair."""
    from mbforge.examples import EXAMPLES
    from mbforge.kernels.builders import BUILDERS

    for what, given, known in (("--examples", examples, EXAMPLES), ("--kernels", kernels, BUILDERS)):
        unknown = [x for x in given if x.removesuffix("+reduced") not in known]
        if unknown:
            ap.error(f"{what}: no {what[2:-1]} called {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def one(example: str, kernel: str, states: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "bench.bound_ratios", "--one", example, kernel, "--states", str(states)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skip": f"not measured: over {timeout:g} s"}
    if p.returncode != 0:
        return {"skip": "failed: " + (p.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    lines = [f"{'target':<10} {'pair':<42} {'bounded':>9} {'worst':>9} {'median':>8}  states"]
    done = [r for r in rows if r.get("worst") is not None]
    for r in sorted(done, key=lambda r: -r["worst"]):
        lines.append(f"{r['target']:<10} {r['pair']:<42} {r['judged']:>4} of {r['outputs']:<3} {r['worst']:>9.3g} "
                     f"{r['median']:>8.3g}  {r['states']:,} {r['how']} (worst: {r['worst_output']})"
                     + (f"; {r['unbounded']} without a bound" if r["unbounded"] else "")
                     + (f"; {r['beyond']} BEYOND THE BOUND" if r["beyond"] else ""))
    for r in rows:
        if r.get("worst") is None:
            why = r.get("skip") or ("no bound" if r.get("unbounded") == r.get("outputs") else "no output judged")
            lines.append(f"{r['target']:<10} {r['pair']:<42} {why}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bound_ratios", description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", default="", help="comma-separated examples (default: all)")
    ap.add_argument("--kernels", default="", help="comma-separated kernels (default: all but step)")
    ap.add_argument("--states", type=int, default=20000)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per pair")
    ap.add_argument("--json", default=None)
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(a.one[0], a.one[1], a.states)))
        return 0
    check_json(ap, a.json)
    examples, kernels = [x for x in a.examples.split(",") if x], [x for x in a.kernels.split(",") if x]
    _check_names(ap, examples, kernels)
    if a.states < 1 or not a.timeout > 0:
        ap.error(f"--states must be at least 1 and --timeout positive, got {a.states} and {a.timeout:g}")
    rows = []
    for e, k in pairs(examples, kernels):
        got = one(e, k, a.states, a.timeout)
        if "skip" in got and len(got) == 1:
            if got["skip"].startswith("not measured") or got["skip"].startswith("failed"):
                rows += [{"target": t, "pair": f"{e} {k}", "skip": got["skip"]} for t in TARGETS]
            continue  # not applicable to the model
        rows += [{"target": t, "pair": f"{e} {k}", **got[t]} for t in TARGETS]
        print(f"{e} {k}: " + ", ".join(f"{t} {got[t].get('worst') or got[t].get('skip')}" for t in TARGETS),
              file=sys.stderr, flush=True)
    print(table(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 1 if any(r.get("beyond") for r in rows) else 0


if __name__ == "__main__":
    run("bound_ratios", main)
