"""Inverse dynamics of the Stewart platform, mbforge against CasADi, from one model.

mbforge: the `inverse-dynamics` kernel (straight-line sparse LU, pivots fixed at
generation time). CasADi: the same matrix G = [Phi_kin_q^T, -B] and right-hand side
Q - M qdd, converted atom by atom into SX (so both start from identical expressions),
wrapped in an MX function that solves with CasADi's sparse QR (`solve(G, rhs, "qr")`,
which its code generator emits as C), outputs the actuator forces.

Both are compared on the host (ns per call, callgrind instructions) and on the emulated
Cortex-M4F in float32 (casadi_real=float; CasADi keeps its double literals and calls),
on states of the kernel's motion (outside its envelope mbforge's kernel returns 2 at once).

    python -m bench.idyn [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from mbforge.examples import load
from mbforge.verify.hostlib import load_kernel
from mbforge.ir import Evaluator
from mbforge.ir.graph import translate
from mbforge.kernels.builders import build_kernel
from mbforge.kernels.common import LinearSystem
from mbforge.kernels.dynamics import inverse_dynamics_system
from mbforge.kernels.reduced import reduced_system
from mbforge.pipeline import generate

from . import check_json, run
from .cbuild import CKernel


def to_sx(roots, syms):
    """CasADi SX expressions of atoms (inputs: {symbol atom: SX})."""
    import casadi as ca

    fn = {"sqrt": ca.sqrt, "sin": ca.sin, "cos": ca.cos, "tan": ca.tan, "exp": ca.exp, "log": ca.log,
          "abs": ca.fabs, "atan2": ca.atan2}
    return translate(roots, ca.SX, syms.__getitem__, fn)


def casadi_solve_kernel(A, b, inputs, u_index, name: str, real: str = "float"):
    """CasADi C for u = (A^-1 b)[u_index]: A (Sparse of atoms) and b converted to SX, solved
    by CasADi's sparse QR in an MX function (which its code generator emits)."""
    import casadi as ca

    n = A.shape[0]
    keys = sorted(A.entries, key=lambda ij: (ij[1], ij[0]))  # CasADi stores by column
    X = ca.SX.sym("x", len(inputs))
    sx = to_sx([A.entries[k] for k in keys] + list(b), {s: X[i] for i, s in enumerate(inputs)})
    sp = ca.Sparsity.triplet(n, n, [i for i, _ in keys], [j for _, j in keys])
    G = ca.SX(sp, ca.vertcat(*sx[:len(keys)]))
    f_sx = ca.Function("mats", [X], [G, ca.vertcat(*sx[len(keys):])], {"cse": True})
    Xm = ca.MX.sym("x", len(inputs))
    Gm, bm = f_sx(Xm)
    sol = ca.solve(Gm, bm, "qr")
    f = ca.Function(name, [Xm], [ca.vertcat(*[sol[i] for i in u_index])])
    with tempfile.TemporaryDirectory() as d:
        cg = ca.CodeGenerator(name + ".c", {"casadi_real": real, "with_header": False})
        cg.add(f)
        cg.generate(d + "/")
        src = (Path(d) / (name + ".c")).read_text()
    if real == "float":
        src = "#define casadi_real float\n" + src
    sz = max(f.sz_w(), 1)
    iw = max(f.sz_iw(), 1)
    src += (f"\nint bench_kernel(const casadi_real *in, casadi_real *out) {{\n"
            f"  const casadi_real *arg[{f.sz_arg()}] = {{in}};\n"
            f"  casadi_real *res[{f.sz_res()}] = {{out}};\n"
            f"  static casadi_int iw[{iw}]; static casadi_real w[{sz}];\n"
            f"  return {name}(arg, res, iw, w, 0);\n}}\n")
    return CKernel("casadi", src, len(inputs), len(u_index)), f


def solved_system(eqs, kernel) -> LinearSystem:
    """The linear system an inverse-dynamics kernel of `eqs` solves, rebuilt by its
    formulation (atoms are interned: the very matrix and right-hand side the kernel
    factored; for the reduced kernel, of the formulation it kept)."""
    if kernel.name == "inverse-dynamics":
        return inverse_dynamics_system(eqs)[0]
    if kernel.name == "inverse-dynamics-reduced":
        return reduced_system(eqs, kernel.info.method)
    raise SystemExit(f"{kernel.name}: not an inverse-dynamics kernel, no linear system to hand to CasADi")


def casadi_for(system: LinearSystem, kernel, name: str, real: str = "float"):
    """The CasADi counterpart of an mbforge inverse-dynamics kernel: the system it solves
    (solved_system), the same inputs, the actuator forces out."""
    return casadi_solve_kernel(system.matrix, system.rhs, kernel.input_symbols, system.forces, name, real)


def main(argv=None) -> int:
    from .cbuild import mbforge_kernel

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="stewart")
    ap.add_argument("--kernel", default="inverse-dynamics-reduced",
                    choices=["inverse-dynamics", "inverse-dynamics-reduced"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    check_json(ap, args.json)
    eqs = load(args.model).equations()
    t0 = time.perf_counter()
    k = build_kernel(eqs, args.kernel)
    # the forces only: CasADi's function returns u, so mbforge's kernel is trimmed alike
    k.outputs = [p for p in k.outputs if p.name == "u"]
    k.domain = None
    plan = generate(k, "c-float32")
    t_mb = time.perf_counter() - t0
    system = solved_system(eqs, k)  # CasADi starts from the system, as mbforge's factorization does
    t0 = time.perf_counter()
    ck, f = casadi_for(system, k, "cas_idyn")
    t_ca = time.perf_counter() - t0

    # every figure on states of the motion (outside its envelope mbforge's kernel returns 2
    # at once): 8 evenly spread for the device, 16 for callgrind, all for the time
    motion = np.array(k.motion, dtype=np.float64)
    rows = _device_rows(args.model, k, {"mbforge": mbforge_kernel(plan, real="float"), "casadi": ck}, motion)
    rows["mbforge"]["ops"] = plan.manifest.ops["total"]
    rows["mbforge"]["generate_s"] = t_mb
    rows["casadi"]["generate_s"] = t_ca
    print(f"{args.model} {args.kernel}: {k.description}")
    print(f"{plan.manifest.n_in} inputs -> {plan.manifest.n_out} forces, float32 on the emulated Cortex-M4F")
    print(f"{'engine':<8} {'instr/call':>11} {'flash [B]':>10} {'stack [B]':>10} {'static [B]':>11} "
          f"{'generate [s]':>13} {'rel. error':>11}")
    for e, r in rows.items():
        print(f"{e:<8} {r['instructions_median']:>11.0f} {r['flash']:>10} {r['stack']:>10} {r['static_ram']:>11} "
              f"{r['generate_s']:>13.2f} {r['max_rel_error']:>11.1e}")
    ratio = rows["mbforge"]["instructions_median"] / rows["casadi"]["instructions_median"]
    print(f"instructions mbforge / CasADi = {ratio:.2f} (target <= 0.5)")
    _host_rows(k, system, motion, rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def _pick(motion: np.ndarray, n: int) -> np.ndarray:
    """n states of the motion, evenly spread."""
    return motion[np.linspace(0, len(motion) - 1, n).round().astype(int)]


def _device_rows(model: str, k, kernels: dict, motion: np.ndarray) -> dict:
    """Per engine: its size and instructions per call on the emulated Cortex-M4F (float32),
    and its largest error relative to the double reference on the motion."""
    from .device import _kernel_dir, device_instructions, sizes

    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for engine, kk in kernels.items():
            kdir = _kernel_dir(tmp / engine / "kernel", f"{model}_{engine}", kk.source, kk.n_in, kk.n_out)
            (tmp / engine / "obj").mkdir()
            X8 = _pick(motion, 8).astype(np.float32)
            rows[engine] = sizes(kdir, tmp / engine / "obj") | device_instructions(kdir, tmp / engine, X=X8)
            # both must compute the forces: compare with the double reference on the motion
            X = motion.astype(np.float32)
            Y, _ = load_kernel(kdir)(X)
            ref = Evaluator(k.output_atoms, k.input_symbols)(X.astype(np.float64))
            rows[engine]["max_rel_error"] = float(np.abs(Y - ref).max() / np.abs(ref).max())
    return rows


def _host_rows(k, system, motion: np.ndarray, rows: dict) -> None:
    """The host, in double: ns per call and callgrind instructions of each engine, printed
    and into rows."""
    from .cbuild import mbforge_kernel
    from .host import callgrind_instructions, time_ns

    mk = mbforge_kernel(generate(k, "c-double"))
    cd, _ = casadi_for(system, k, "cas_idyn_d", real="double")
    print(f"\nhost (gcc -O2, double): {'engine':<8} {'ns/call':>9} {'instr/call':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for e, kk in (("mbforge", mk), ("casadi", cd)):
            ns, ins = time_ns(kk, Path(tmp), 3, motion), callgrind_instructions(kk, Path(tmp), _pick(motion, 16))
            rows[e]["host_ns"], rows[e]["host_instructions"] = ns, ins
            print(f"{'':<24}{e:<8} {ns:>9.0f} {ins:>11.0f}")
    print(f"host time mbforge / CasADi = {rows['mbforge']['host_ns'] / rows['casadi']['host_ns']:.2f}")


if __name__ == "__main__":
    run("idyn", main)
