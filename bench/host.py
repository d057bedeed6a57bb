"""Host benchmark (issue 5): the generated C of mbforge, CasADi and SymPy for the same
joint function (Phi, Phi_q, Phi_t, gamma, M, Q), compiled alike (gcc -O2), side by side.

Figures per engine: operations in the generated code, ns per call (best of --repeat
timing runs over 256 input vectors) and instructions per call under callgrind (exact and
repeatable). Ratios are mbforge / peer, measured in this run.

    python -m bench.host [--models stewart] [--no-sympy] [--json FILE]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from . import generic
from .backends import BACKENDS
from .cbuild import CALLGRIND_MAIN, TIMING_C, casadi_kernel, mbforge_kernel, sympy_kernel

CFLAGS = ["-O2", "-fno-math-errno", "-ffp-contract=off", "-w"]


def build_kernels(model: str, engines: list[str]):
    out = {}
    for e in engines:
        r = BACKENDS[e]().joint(getattr(generic, model))
        if e == "mbforge":
            k = mbforge_kernel(r)
        elif e == "casadi":
            k = casadi_kernel(r)
        else:
            k = sympy_kernel(r, r.extra["inputs"])
        out[e] = (k, r.ops)
    return out


def _compile(k, d: Path, extra: str, name: str, shared: bool) -> Path:
    src = d / f"{name}.c"
    src.write_text(k.source + "\n#define REAL double\n" + extra.replace("REAL", "double"))
    exe = d / (f"{name}.so" if shared else name)
    cmd = ["gcc", *CFLAGS, str(src), "-o", str(exe), "-lm"] + (["-shared", "-fPIC"] if shared else [])
    subprocess.run(cmd, check=True)
    return exe


def time_ns(k, d: Path, repeat: int) -> float:
    lib = ctypes.CDLL(str(_compile(k, d, TIMING_C, f"t_{k.engine}", True)))
    lib.bench_ns.restype = ctypes.c_double
    n = 256
    rng = np.random.default_rng(0)
    X = np.ascontiguousarray(rng.uniform(-1, 1, (n, k.n_in)))
    Y = np.zeros((n, max(k.n_out, 1)))
    P = ctypes.POINTER(ctypes.c_double)
    args = (X.ctypes.data_as(P), Y.ctypes.data_as(P), ctypes.c_int64(n), ctypes.c_int64(k.n_in),
            ctypes.c_int64(max(k.n_out, 1)))
    lib.bench_ns(*args, ctypes.c_int64(20))  # warm up
    return min(lib.bench_ns(*args, ctypes.c_int64(200)) for _ in range(repeat))


def callgrind_instructions(k, d: Path) -> float:
    main = CALLGRIND_MAIN.replace("NIN", str(k.n_in)).replace("NOUT", str(max(k.n_out, 1)))
    exe = _compile(k, d, main, f"c_{k.engine}", False)
    counts = []
    for calls in (10, 110):
        out = d / f"cg_{k.engine}_{calls}.out"
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(exe), str(calls)],
                           capture_output=True, text=True)
        m = re.search(r"Collected\s*:\s*(\d+)", r.stderr) or re.search(r"refs:\s*([\d,]+)", r.stderr)
        if not m:
            raise RuntimeError(f"callgrind gave no count: {r.stderr[-500:]}")
        counts.append(int(m.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / 100.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="fourbar,slidercrank,stewart")
    ap.add_argument("--no-sympy", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    engines = ["mbforge", "casadi"] + ([] if args.no_sympy else ["sympy"])
    report = {}
    hdr = f"{'model':<12} {'engine':<8} {'ops':>7} {'ns/call':>9} {'instr/call':>11}   {'ops':>6} {'ns':>6} {'instr':>6}"
    print("Generated C of the joint function, gcc -O2 on the host; last three columns: mbforge / engine")
    print(hdr)
    print("-" * len(hdr))
    for model in args.models.split(","):
        ks = build_kernels(model, engines)
        rows = {}
        with tempfile.TemporaryDirectory() as tmp:
            for e, (k, ops) in ks.items():
                rows[e] = {"ops": ops, "ns": time_ns(k, Path(tmp), args.repeat),
                           "instructions": callgrind_instructions(k, Path(tmp))}
        mine = rows["mbforge"]
        for e, r in rows.items():
            ratio = "" if e == "mbforge" else (f"{mine['ops'] / r['ops']:>6.2f} {mine['ns'] / r['ns']:>6.2f} "
                                               f"{mine['instructions'] / r['instructions']:>6.2f}")
            print(f"{model if e == 'mbforge' else '':<12} {e:<8} {r['ops']:>7} {r['ns']:>9.1f} "
                  f"{r['instructions']:>11.0f}   {ratio}")
        report[model] = rows
    if "stewart" in report:
        s = report["stewart"]
        print(f"\nStewart platform: operations {s['mbforge']['ops'] / s['casadi']['ops']:.2f} x CasADi (target <= 0.75), "
              f"time {s['mbforge']['ns'] / s['casadi']['ns']:.2f} x (target <= 0.8), "
              f"instructions {s['mbforge']['instructions'] / s['casadi']['instructions']:.2f} x (target <= 0.7)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
