"""Serial arms (issue 14, items 5 and 6): recursive dynamics, mbforge against Pinocchio.

1. Pinocchio's 6-revolute sample manipulator (examples/sample_arm.py is the same arm):
   mbforge's inverse-dynamics-rnea and forward-dynamics-aba kernels against Pinocchio's
   RNEA and ABA exported to C through CasADi. The pin wheel has no Python CasADi binding,
   so bench/pin_export.cpp evaluates Pinocchio's C++ templates with casadi::SX scalars
   (pinocchio/autodiff/casadi.hpp) and saves the functions; CasADi's code generator runs
   here, as for the other CasADi figures. Needs pin (PyPI), Eigen headers (Debian
   libeigen3-dev) and g++; the compiled exporter is cached by its source's digest.
   Figures: operations (+ - * / and calls, sin and cos each one, after dead-code
   elimination: manifest counts for mbforge, CasADi's instruction list for Pinocchio),
   host double ns/call and callgrind instructions (gcc -O2), instructions per call on the
   emulated Cortex-M4F in float32 (QEMU -icount, as bench/device.py; CasADi's C built
   with casadi_real=float and sin/cos mapped to sinf/cosf) and flash/stack; all on states
   of the arm's envelope from the kernel's own vector source (mbforge's kernel returns 2
   at once outside it, and a figure of that is refused: bench.BenchInputError).
2. Scaling: an N-body chain (examples/spatial_chain.py, joints about z, y, x in turn):
   operations and generation time (model built, kernel built, C generated, in process;
   CPU seconds of the process, steadier than wall time on a shared machine) of both
   recursive kernels for N = 10..100, the growth exponent fitted on log-log; the
   M(q)-based forward-dynamics kernel for the small N it can afford (--mq).

    python -m bench.arms [--no-device] [--chain 10,20,50,100] [--mq 6,12] [--json FILE]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from . import check_json, refuse_status, run
from .cbuild import CKernel, mbforge_kernel

HERE = Path(__file__).resolve().parent
EXPORT_SRC = HERE / "pin_export.cpp"
BOOST_DEFS = ["-DBOOST_MPL_LIMIT_LIST_SIZE=30", "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30",
              "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS", "-DBOOST_FUSION_INVOKE_MAX_ARITY=12"]
EIGEN = Path("/usr/include/eigen3")


# ---- Pinocchio through CasADi ------------------------------------------------------------------
def pinocchio_exporter():
    """(path of the compiled bench/pin_export.cpp, "") or (None, the reason it is not there)."""
    try:
        import casadi as ca
    except ImportError as e:
        return None, f"not measured: {e.name} is not installed (pip install pin casadi)"
    site = Path(ca.__file__).resolve().parent.parent
    return pin_binary(EXPORT_SRC, ["-O1", f"-I{site / 'casadi' / 'include'}", f"-L{site / 'casadi'}", "-lcasadi"],
                      ca.__version__, "Pinocchio's RNEA, ABA and CRBA over casadi::SX")


def pin_binary(src: Path, flags: list[str], salt: str, what: str):
    """(the command line that runs `src` compiled against the pin wheel's C++ with `flags`, "")
    or (None, the reason it is not there). Compiled once and cached by the digest of the source,
    the flags without their paths, `salt` (a version the binary depends on), pin's version and
    g++'s: a fresh clone's new venv reuses the binary (the first compile takes minutes), so the
    libraries are found through LD_LIBRARY_PATH at run time, not an rpath into one venv."""
    try:
        import pinocchio
    except ImportError as e:
        return None, f"not measured: {e.name} is not installed (pip install pin casadi)"
    prefix = Path(pinocchio.__file__).resolve().parents[4]  # .../site-packages/cmeel.prefix
    if not (prefix / "include" / "pinocchio").is_dir() or not EIGEN.is_dir() or shutil.which("g++") is None:
        return None, f"not measured: needs pin's C++ headers, Eigen ({EIGEN}) and g++"
    gxx = subprocess.run(["g++", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    portable = [f for f in flags if not f.startswith(("-I", "-L"))]
    key = hashlib.sha256(src.read_bytes() + " ".join(portable).encode() + salt.encode()
                         + pinocchio.__version__.encode() + gxx.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mbforge-bench" / f"pin-{key}"
    exe = cache / src.stem
    if not exe.exists():
        cache.mkdir(parents=True, exist_ok=True)
        print(f"compiling {what} (once; a few minutes on a busy machine) ...", flush=True)
        r = subprocess.run(["g++", "-std=c++17", "-w", str(src), "-o", str(exe) + ".part", *BOOST_DEFS, f"-I{EIGEN}",
                            f"-I{prefix / 'include'}", f"-L{prefix / 'lib'}", "-lpinocchio_default",
                            "-lboost_serialization", *flags],
                           capture_output=True, text=True)
        if r.returncode:
            return None, f"not measured: {src.name} did not compile: {r.stderr.strip().splitlines()[-1:]}"
        os.replace(str(exe) + ".part", exe)
    libs = [str(prefix / "lib")] + [f[2:] for f in flags if f.startswith("-L")]
    return ["env", "LD_LIBRARY_PATH=" + os.pathsep.join(libs), str(exe)], ""


def pinocchio_functions(work: Path, urdf: Path | None = None, floating: bool = False):
    """((rnea, aba, crba) CasADi Functions of Pinocchio's sample manipulator or of `urdf`
    (on a JointModelFreeFlyer root when `floating`), "") or (None, the reason they are not
    there)."""
    import casadi as ca

    cmd, why = pinocchio_exporter()
    if cmd is None:
        return None, why
    args = []
    if urdf:  # Pinocchio's reading of the file, handed over as its text archive
        import pinocchio as pin

        root = [pin.JointModelFreeFlyer()] if floating else []
        pin.buildModelFromUrdf(str(urdf), *root).saveToText(str(work / "pin_model.txt"))
        args = [str(work / "pin_model.txt")]
    subprocess.run([*cmd, str(work), *args], check=True)
    return tuple(ca.Function.load(str(work / f"pin_{k}.casadi")) for k in ("rnea", "aba", "crba")), ""


def casadi_c(f, real: str, offs: tuple[int, ...], n_in: int) -> CKernel:
    """CasADi's C of f behind bench_kernel(in, out), f's inputs read at in + offs (mbforge's
    input layout, so both engines read the same vectors)."""
    import casadi as ca

    name = f.name()
    with tempfile.TemporaryDirectory() as d:
        cg = ca.CodeGenerator(name + ".c", {"casadi_real": real, "with_header": False})
        cg.add(f)
        cg.generate(d + "/")
        src = (Path(d) / (name + ".c")).read_text()
    if real == "float":
        # single-precision calls, as mbforge's float32 C makes (after the includes: math.h
        # keeps its own declarations)
        last = max(m.end() for m in re.finditer(r"^#include.*$", src, re.M))
        src = "#define casadi_real float\n" + src[:last] + "\n#define sin sinf\n#define cos cosf\n" + src[last:]
    args = ", ".join(f"in + {o}" for o in offs)
    src += (f"\nint bench_kernel(const casadi_real *in, casadi_real *out) {{\n"
            f"  const casadi_real *arg[{f.sz_arg()}] = {{{args}}};\n"
            f"  casadi_real *res[{f.sz_res()}] = {{out}};\n"
            f"  casadi_real w[{max(f.sz_w(), 1)}];\n"
            f"  return {name}(arg, res, 0, w, 0);\n}}\n")
    return CKernel("pinocchio", src, n_in, f.nnz_out(0))


def port_offsets(kernel) -> dict[str, int]:
    """Where each input port of an mbforge kernel starts in its input vector (the ports a
    kernel keeps: build_kernel drops those no output depends on, such as t)."""
    offs, o = {}, 0
    for p in kernel.inputs:
        offs[p.name] = o
        o += len(p.symbols)
    return offs


def _arm_c(f, real: str, kernel) -> CKernel:
    """The arm's (q, v, a|tau) functions over mbforge's input layout (q, qd, qdd) for RNEA,
    (q, qd, u) for ABA."""
    o = port_offsets(kernel)
    third = o["qdd"] if "qdd" in o else o["u"]
    return casadi_c(f, real, (o["q"], o["qd"], third), len(kernel.input_symbols))


def casadi_ops(f) -> int:
    from .backends import casadi_ops as count

    return count(f)


# ---- the arm -------------------------------------------------------------------------------------
def arm_rows(device: bool) -> dict:
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    from .host import callgrind_instructions, time_ns

    from mbforge.verify import vectors

    model = load("sample_arm")
    kernels = {"RNEA": build_kernel(model.equations(), "inverse-dynamics-rnea"),
               "ABA": build_kernel(model.equations(), "forward-dynamics-aba")}
    report: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pin, why = pinocchio_functions(tmp)
        for kname, k in kernels.items():
            rows = {}
            plan_d = generate(k, "c-double")
            plan_f = generate(k, "c-float32")
            # states of the arm's envelope from the kernel's own vector source, the same rows
            # for both engines (outside it mbforge's kernel returns 2 at once)
            plan_d.write(tmp / f"{kname}_k64")
            X = vectors.draw(plan_d.manifest, tmp / f"{kname}_k64", 64, seed=1, motion=False)
            ops = plan_d.manifest.ops
            rows["mbforge"] = {"ops": ops["total"] + ops.get("sincos", 0), "kernel": mbforge_kernel(plan_d),
                               "kernel_f": mbforge_kernel(plan_f, real="float")}
            if pin is not None:
                f = pin[0] if kname == "RNEA" else pin[1]
                rows["pinocchio"] = {"ops": casadi_ops(f), "kernel": _arm_c(f, "double", k),
                                     "kernel_f": _arm_c(f, "float", k)}
            for e, r in rows.items():
                d = tmp / f"{kname}_{e}"
                d.mkdir()
                r["host_ns"] = time_ns(r["kernel"], d, 3, X)
                r["host_instructions"] = callgrind_instructions(r["kernel"], d, X[:8])
            if pin is not None:  # the same arm: the two C files agree (double, the envelope's states)
                rows["pinocchio"]["max_abs_diff"] = _agree(rows, kname, tmp, X)
            if device:
                _device(rows, kname, tmp, X[:16].astype(np.float32))
            report[kname] = {e: {x: v for x, v in r.items() if x not in ("kernel", "kernel_f")}
                             for e, r in rows.items()}
    return {"rows": report, "pinocchio": why}


def _agree(rows, kname, tmp: Path, X: np.ndarray) -> float:
    """max |mbforge - Pinocchio| over the rows of X, both generated C files in double; both
    must return status 0 (BenchInputError otherwise)."""
    import ctypes

    outs = []
    for e in ("mbforge", "pinocchio"):
        k = rows[e]["kernel"]
        src = tmp / f"agree_{kname}_{e}.c"
        src.write_text(k.source)
        so = tmp / f"agree_{kname}_{e}.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-w", str(src), "-o", str(so), "-lm"], check=True)
        lib = ctypes.CDLL(str(so))
        P = ctypes.POINTER(ctypes.c_double)
        Y = np.zeros((len(X), k.n_out))
        for i in range(len(X)):
            x = np.ascontiguousarray(X[i])
            y = np.zeros(k.n_out)
            if lib.bench_kernel(x.ctypes.data_as(P), y.ctypes.data_as(P)):
                refuse_status(k.engine)
            Y[i] = y
        outs.append(Y)
    return float(np.abs(outs[0] - outs[1]).max())


def _device(rows, kname, tmp: Path, X: np.ndarray, label: str = "arm") -> None:
    """Flash, stack and emulated M4F instructions of each engine's float32 kernel (kernel_f)."""
    from .device import _kernel_dir, device_instructions, sizes

    for e, r in rows.items():
        k = r["kernel_f"]
        base = tmp / f"dev_{label}_{kname}_{e}"
        kdir = _kernel_dir(base / "kernel", f"{label}_{kname.lower()}_{e}", k.source, k.n_in, k.n_out)
        (base / "obj").mkdir()
        rows[e].update(sizes(kdir, base / "obj"))
        rows[e].update(device_instructions(kdir, base, X=X))


# ---- scaling -------------------------------------------------------------------------------------
def _fit(ns, ys) -> float:
    return float(np.polyfit(np.log(ns), np.log(ys), 1)[0])


def scaling(ns, mq) -> dict:
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    out: dict = {"recursive": {}, "mass_matrix": {}}
    for n in ns:
        row = {}
        for kname in ("forward-dynamics-aba", "inverse-dynamics-rnea"):
            t0 = time.process_time()
            m = load("spatial_chain", n=n)
            k = build_kernel(m, kname)
            plan = generate(k, "c-double")
            ops = plan.manifest.ops
            row[kname] = {"seconds": time.process_time() - t0, "ops": ops["total"] + ops.get("sincos", 0)}
        out["recursive"][n] = row
    for n in mq:
        t0 = time.process_time()
        k = build_kernel(load("spatial_chain", n=n).equations(), "forward-dynamics")
        plan = generate(k, "c-double")
        ops = plan.manifest.ops
        out["mass_matrix"][n] = {"seconds": time.process_time() - t0, "ops": ops["total"] + ops.get("sincos", 0)}
    return out


def _print_arm(arm: dict) -> None:
    """The sample manipulator's table: per kernel and engine its ops, host time and
    instructions, emulated M4F instructions, flash and stack, and mbforge / Pinocchio."""
    print("6-revolute sample manipulator (Pinocchio's buildSampleModelManipulator): mbforge's recursive kernels")
    print("against Pinocchio's RNEA/ABA exported to C through CasADi (casadi::SX evaluation, cse)")
    if arm["pinocchio"]:
        print(f"Pinocchio: {arm['pinocchio']}")
    hdr = (f"{'kernel':<6} {'engine':<10} {'ops':>6} {'host ns':>8} {'host instr':>11} {'M4F instr':>10} "
           f"{'flash':>6} {'stack':>6}")
    print(hdr)
    print("-" * len(hdr))
    for kname, rows in arm["rows"].items():
        for e, r in rows.items():
            dev = (f"{r['instructions_median']:>10.0f} {r['flash']:>6} {r['stack']:>6}"
                   if "instructions_median" in r else f"{'-':>10} {'-':>6} {'-':>6}")
            print(f"{kname if e == 'mbforge' else '':<6} {e:<10} {r['ops']:>6} {r['host_ns']:>8.1f} "
                  f"{r['host_instructions']:>11.0f} {dev}")
        if "pinocchio" in rows:
            a, b = rows["mbforge"], rows["pinocchio"]
            ratio = f"ops {a['ops'] / b['ops']:.2f}, host instr {a['host_instructions'] / b['host_instructions']:.2f}"
            if "instructions_median" in a and "instructions_median" in b:
                ratio += f", M4F instr {a['instructions_median'] / b['instructions_median']:.2f}"
            print(f"{'':<6} mbforge / Pinocchio: {ratio} (goal <= 1); outputs agree to "
                  f"{b['max_abs_diff']:.1e} (double, 64 states of the envelope)")


def _print_scaling(sc: dict, ns: list[int], mq: list[int]) -> None:
    """The chain's scaling table and fitted exponents (sc["exponents"] set when ns has two
    lengths or more)."""
    print("\nN-body spatial chain (joints about z, y, x in turn): operations and generation time in process")
    print(f"{'N':>5} {'ABA ops':>9} {'ABA [s]':>8} {'RNEA ops':>9} {'RNEA [s]':>9}")
    for n, row in sc["recursive"].items():
        a, r = row["forward-dynamics-aba"], row["inverse-dynamics-rnea"]
        print(f"{n:>5} {a['ops']:>9} {a['seconds']:>8.2f} {r['ops']:>9} {r['seconds']:>9.2f}")
    if len(ns) >= 2:
        rec = sc["recursive"]
        grow = {k: (_fit(ns, [rec[n][k]["ops"] for n in ns]), _fit(ns, [rec[n][k]["seconds"] for n in ns]))
                for k in ("forward-dynamics-aba", "inverse-dynamics-rnea")}
        sc["exponents"] = grow
        a, b = ns[-2], ns[-1]
        for k, (eo, et) in grow.items():
            per = (rec[b][k]["ops"] - rec[a][k]["ops"]) / (b - a)
            print(f"{k}: operations grow as N^{eo:.2f}, generation time as N^{et:.2f} (log-log fit over N); "
                  f"{per:.0f} operations per added link from N={a} to {b}")
    if mq:
        print("M(q)-based forward-dynamics (KKT solve) of the same chain: "
              + ", ".join(f"N={n}: {r['ops']} ops, {r['seconds']:.1f} s" for n, r in sc["mass_matrix"].items()))
        if len(mq) >= 2:
            print(f"  operations grow as N^{_fit(mq, [sc['mass_matrix'][n]['ops'] for n in mq]):.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-device", action="store_true", help="skip the emulated Cortex-M4F")
    ap.add_argument("--no-arm", action="store_true", help="scaling only")
    ap.add_argument("--chain", default="10,20,50,100", help="chain lengths for the scaling (empty: skip)")
    ap.add_argument("--mq", default="6,12", help="chain lengths for the M(q)-based forward-dynamics kernel")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    check_json(ap, args.json)
    report: dict = {}
    if not args.no_arm:
        arm = arm_rows(not args.no_device)
        report["arm"] = arm
        _print_arm(arm)
    ns = [int(x) for x in args.chain.split(",") if x]
    mq = [int(x) for x in args.mq.split(",") if x]
    if ns:
        sc = scaling(ns, mq)
        report["scaling"] = sc
        _print_scaling(sc, ns, mq)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    run("arms", main)
