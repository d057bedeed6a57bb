"""Per-operation instruction costs of every emulated core (issue 33, item 4): what
`mbforge firmware`'s budget estimates cycles from (mbforge.firmware.budget.estimate_cycles).

For each emulated board (one per core: M0, M3, M4F, M7, M33) and each real type (c-fixed,
c-float32, c-double: in hardware or in libgcc's software floating point, as the core
allows), shipped kernels of different operation mixes are generated, built into the HIL
server firmware and run in QEMU under -icount; the instructions per call (SysTick ticks
turned into instructions by the CALIB request, exact) are the median over 16 input
vectors drawn in the kernel's domain (the calls that return 0). A non-negative least
squares fit over the kernels gives, per core and real type, the instructions per unit of
each feature (firmware.budget.features); targets/op_costs.py is written from it, with how
it was measured. A kernel whose domain its own fixed-point format does not hold is skipped.

    python -m bench.op_costs [--jobs 4] [--reals int32-m0,...] [--envs emulated_microbit,...] [--write]
                             [--save-rows FILE] [--rows FILE]

--reals (--envs) measures only those record kinds (on those boards); --write then keeps the
other records (and their measured counts) of targets/op_costs.py as they are.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from . import run

KERNELS = [("fourbar", "equations"), ("fourbar", "kinematics"), ("slidercrank", "kinematics"),
           ("slidercrank", "inverse-dynamics"), ("slidercrank_disc", "inverse-dynamics"),
           ("chain", "inverse-dynamics-rnea"), ("nfourbar", "equations"), ("sample_arm", "inverse-dynamics-rnea"),
           ("pendulum_block", "equations"), ("chain", "equations"), ("chain", "forward-dynamics-aba"),
           ("slidercrank_disc", "kinematics"), ("slidercrank_disc", "equations"),
           ("spatial_chain", "inverse-dynamics-rnea"), ("pendulum_block", "forward-dynamics"),
           ("chain", "forward-dynamics")]  # not spatial_chain n=4: test_firmware_budget's check
# the record kinds (firmware.budget.cost_kind) and the target measured for each
TARGETS = {"int32": "c-fixed", "int32-m0": "c-fixed-m0", "float": "c-float32", "double": "c-double"}
BOARD_ENVS = ["emulated_microbit", "emulated_an385", "emulated_f405", "emulated_an500", "emulated_an505"]


def generate(model: str, kernel: str, target: str, out: Path) -> Path | None:
    """The kernel folder, or None where the target refuses the kernel (a c-fixed divisor)."""
    from mbforge.cli import main

    d = out / f"{model}-{kernel}-{target}"
    if not (d / "manifest.json").exists() and main(["generate", model, "--kernel", kernel, "--target", target,
                                                   "--out", str(d)]) != 0:
        return None
    return d


def instructions(kdir: Path, env: str, work: Path) -> float:
    """Median instructions per call over the kernel's motion vectors on the emulated board."""
    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil.harness import calibrate
    from mbforge.hil.link import Link
    from mbforge.verify.vectors import draw_raw
    from mbforge.manifest import Manifest

    m = Manifest.load(kdir)
    elf = build(generate_project(kdir, work / f"fw-{kdir.name}-{env}", force=True), env)
    X = draw_raw(m, kdir, 16, seed=0, motion=False)  # inside the domain (a motion may leave a fixed format)
    with Emulator(elf, board=env) as emu, Link(emu.url, timeout=60.0) as link:
        link.hello()
        tpi = calibrate(link)
        batch = link.eval_many(X)
    ok = batch.status == 0
    if not ok.any():
        raise RuntimeError(f"{kdir.name} on {env}: no call returned status 0")
    return float(np.median(np.rint(batch.work[ok].astype(np.float64) / tpi)))


def measure(jobs: int, reals=tuple(TARGETS), envs=tuple(BOARD_ENVS)) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="mbf_opcost_") as tmp:
        tmp = Path(tmp)
        kdirs = [(real, d) for real, target in TARGETS.items() if real in reals for model, kernel in KERNELS
                 if (d := generate(model, kernel, target, tmp / "k")) is not None]
        from mbforge.manifest import Manifest

        from mbforge.firmware import budget as B
        from mbforge.verify.vectors import VectorError
        from mbforge.targets import BOARDS

        def one(job):
            (real, d), env = job
            m = Manifest.load(d)
            try:
                n = instructions(d, env, tmp)
            except VectorError as e:  # a domain its own fixed format does not hold: no figure
                print(f"skipped {d.name} on {env}: {e}")
                return None
            c = B.compile_kernel(d, BOARDS[env], m)
            return {"board": env, "real": real, "kernel": d.name, "features": B.features(m, c.body, c.calls),
                    "instructions": n}

        with ThreadPoolExecutor(jobs) as pool:
            rows = [r for r in pool.map(one, [(kd, env) for env in envs for kd in kdirs]) if r]
    return rows


def fit(rows: list[dict], leave_out: int | None = None) -> dict:
    """{env: {real: {feature: instructions per unit, ...}, ...}} by non-negative least
    squares relative to each kernel's count (small kernels weigh as much as large ones),
    over the features the real type has (USED); `worst_fit_error` is the largest relative
    error over the kernels fitted, `worst_left_out` the largest with each kernel left out of
    its own fit in turn (what a kernel outside the set can expect)."""
    from scipy.optimize import nnls

    out: dict = {}
    for env in BOARD_ENVS:
        for real in TARGETS:
            sel = [r for r in rows if r["board"] == env and r["real"] == real]
            if not sel:
                continue
            names = [k for k in USED[real] if any(r["features"].get(k) for r in sel)]
            A = np.array([[r["features"].get(k, 0.0) for k in names] for r in sel], dtype=np.float64)
            y = np.array([r["instructions"] for r in sel], dtype=np.float64)

            def solve(idx):
                return nnls(A[idx] / y[idx, None], np.ones(len(idx)))[0]

            coef = solve(list(range(len(y))))
            left = [abs(A[i] @ solve([j for j in range(len(y)) if j != i]) / y[i] - 1) for i in range(len(y))]
            out.setdefault(env, {})[real] = {
                **{k: round(float(c), 3) for k, c in zip(names, coef)}, "kernels": len(sel),
                "worst_fit_error": round(float(np.max(np.abs(A @ coef / y - 1))), 3),
                "worst_left_out": round(float(max(left)), 3)}
    return out


# the features each real type is fitted on (firmware.budget.FEATURES): soft-float routines
# where the core has no FPU for the type, the operation classes elsewhere
USED = {"int32": ("call", "input", "body", "lin", "mul", "div", "sincos"),
        "int32-m0": ("call", "input", "body", "lin", "mul", "div", "sincos"),
        "float": ("call", "input", "body", "lin", "mul", "div", "sincos", "soft_add", "soft_mul", "soft_div",
                  "soft_other"),
        "double": ("call", "input", "body", "lin", "mul", "div", "sincos", "soft_add", "soft_mul", "soft_div",
                   "soft_other", "libm")}


def render(costs: dict, measured: dict) -> str:
    """targets/op_costs.py of the records and the measured counts ({"<env> <kernel dir>": n})."""
    kernels = sorted({k.split(" ", 1)[1].rsplit("-c-", 1)[0] for k in measured})
    lines = ['"""Instructions per kernel call by core and real type: what `mbforge firmware`\'s budget',
             "estimates from (firmware.budget.estimate_cycles), measured, not guessed. Written by",
             "`python -m bench.op_costs --write` (do not edit by hand).", "",
             "How: for each emulated board (one per core) and real type, the shipped kernels",
             *[f"    {', '.join(kernels[i:i + 4])}" for i in range(0, len(kernels), 4)],
             "were generated (where the target accepts them), built into the HIL server and run in QEMU",
             "under -icount; the instructions per call (SysTick turned into instructions by the CALIB",
             "request, exact) are the median over vectors drawn in each kernel's domain. A non-negative",
             "least squares fit, relative to each kernel's count, gives per record the instructions per",
             "unit of each feature (firmware.budget.features: the call, an input, an instruction of the",
             "compiled body, an operation by class, a soft-float or libm call); `worst_fit_error` is the",
             "largest relative error over the kernels fitted, `worst_left_out` the largest with each",
             "kernel left out of its own fit (what a new kernel can expect). The real boards take the",
             "record of their core's emulated twin (targets.cost_board).",
             '"""', "", "OP_COSTS = " + json.dumps(costs, indent=4, sort_keys=True), "",
             "MEASURED = " + json.dumps(measured, indent=4, sort_keys=True), ""]
    return "\n".join(lines)


def merged(costs: dict, rows: list[dict]) -> tuple[dict, dict]:
    """The records and measured counts of targets/op_costs.py with those just fitted and
    measured put in (a record kind measured replaces its records and counts, on every core)."""
    from mbforge.targets.op_costs import MEASURED, OP_COSTS

    kinds = {(r["board"], r["real"]) for r in rows}
    keep = {k: v for k, v in MEASURED.items() if not any(k.startswith(env + " ") and _kind(k) == real
                                                          for env, real in kinds)}
    out = {env: dict(recs) for env, recs in OP_COSTS.items()}
    for env, recs in costs.items():
        out.setdefault(env, {}).update(recs)
    return out, {**keep, **{f"{r['board']} {r['kernel']}": r["instructions"] for r in rows}}


def _kind(measured_key: str) -> str:
    """The record kind of a MEASURED key ("<env> <model>-<kernel>-<target>")."""
    target = "c-" + measured_key.rsplit("-c-", 1)[1]
    return next(k for k, t in TARGETS.items() if t == target)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--reals", default=",".join(TARGETS),
                    help=f"the record kinds to measure (of {', '.join(TARGETS)}); the others are kept")
    ap.add_argument("--envs", default=",".join(BOARD_ENVS), help="the emulated boards to measure on; the others' "
                    "records are kept")
    ap.add_argument("--write", action="store_true", help="write targets/op_costs.py")
    ap.add_argument("--rows", default=None, help="a JSON file of earlier measurements to fit (skip measuring)")
    ap.add_argument("--save-rows", default=None, help="keep the measurements in this JSON file")
    args = ap.parse_args(argv)
    reals = tuple(r for r in args.reals.split(",") if r)
    if not reals or set(reals) - set(TARGETS):
        ap.error(f"--reals {args.reals}: known kinds are {', '.join(TARGETS)}")
    envs = tuple(e for e in args.envs.split(",") if e)
    if not envs or set(envs) - set(BOARD_ENVS):
        ap.error(f"--envs {args.envs}: known boards are {', '.join(BOARD_ENVS)}")
    rows = json.loads(Path(args.rows).read_text()) if args.rows else measure(args.jobs, reals, envs)
    if args.save_rows:
        Path(args.save_rows).write_text(json.dumps(rows, indent=1))
    costs = fit(rows)
    for env, recs in costs.items():
        for real, rec in recs.items():
            print(f"{env:<18} {real:<6} " + ", ".join(f"{k} {v}" for k, v in rec.items()))
    if args.write:
        path = Path(__file__).resolve().parents[1] / "targets" / "op_costs.py"
        path.write_text(render(*merged(costs, rows)))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    run("op_costs", lambda: main(__import__("sys").argv[1:]))
