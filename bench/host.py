"""Host benchmark (issue 5): the generated C of mbforge, CasADi and SymPy for the same
joint function (Phi, Phi_q, Phi_t, gamma, M, Q), compiled alike (gcc -O2), side by side.

Figures per engine: operations in the generated code, ns per call (best of --repeat
timing runs over 256 input vectors) and instructions per call under callgrind (exact and
repeatable). Ratios are mbforge / peer, measured in this run. For the Stewart platform, the
instructions of each engine's kernel by kind, counted in its disassembly: mbforge's is
straight-line (each counts once per call; sincos in the library not included), CasADi's
has branches on its result pointers, so its counts add up to more than its callgrind figure.
And mbforge's against the x86-64 floor of its operations (two_operand_floor): what any
scalar SSE2 program of them must take at least, so what a goal in CasADi's instructions
asks for in terms of the floor.

    python -m bench.host [--models stewart] [--no-sympy] [--json FILE]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from . import check_json, check_models, generic, refuse_status, run
from .backends import BACKENDS
from .cbuild import CALLGRIND_MAIN, TIMING_C, casadi_kernel, mbforge_kernel, sympy_kernel

CFLAGS = ["-O2", "-fno-math-errno", "-ffp-contract=off", "-w"]


def two_operand_floor(tape) -> dict:
    """The fewest instructions any scalar SSE2 program of these operations can take: one per
    operation and per output store, plus a copy (or load) wherever an operation finds no
    operand it may overwrite. x86's `op dst, src` overwrites its first operand (either one
    of add and mul; the first of sub and div, and neg's only one), so a value still needed
    later must be copied first. Each value is overwritten at most once (by its last reader),
    so the operations that need no copy are at most a maximum matching between operations
    and the values they may overwrite (inputs included; constants never: they are loaded).
    Inputs read as memory operands, libm calls and the envelope checks count nothing."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    ops = [i for i in tape.instrs if i.op in ("add", "mul", "sub", "div", "neg")]
    vals: dict = {}
    rows, cols = [], []
    for r, ins in enumerate(ops):
        for a in set(ins.args if ins.op in ("add", "mul") else ins.args[:1]):
            if a[0] in ("t", "in"):
                rows.append(r)
                cols.append(vals.setdefault(a, len(vals)))
    g = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(ops), max(len(vals), 1)))
    copies = len(ops) - int((maximum_bipartite_matching(g, perm_type="column") >= 0).sum())
    n_ops, stores = len(tape.instrs), len(tape.outputs)
    return {"operations": n_ops, "copies": copies, "stores": stores, "floor": n_ops + copies + stores}


def build_kernels(model: str, engines: list[str]):
    out = {}
    for e in engines:
        r = BACKENDS[e]().joint(getattr(generic, model))
        if e == "mbforge":
            k = mbforge_kernel(r.extra["plan"])
        elif e == "casadi":
            k = casadi_kernel(r)
        else:
            k = sympy_kernel(r, r.extra["inputs"])
        out[e] = (k, r.ops, two_operand_floor(r.extra["kernel"].tape()) if e == "mbforge" else None)
    return out


def _compile(k, d: Path, extra: str, name: str, shared: bool, real: str = "double") -> Path:
    src = d / f"{name}.c"
    src.write_text(k.source + f"\n#define REAL {real}\n" + extra.replace("REAL", real))
    exe = d / (f"{name}.so" if shared else name)
    cmd = ["gcc", *CFLAGS, str(src), "-o", str(exe), "-lm"] + (["-shared", "-fPIC"] if shared else [])
    subprocess.run(cmd, check=True)
    return exe


def time_ns(k, d: Path, repeat: int, X: np.ndarray | None = None) -> float:
    """ns per call, best of `repeat`, over the rows of X (default: 256 uniform in [-1, 1],
    the joint kernels' declared ranges)."""
    lib = ctypes.CDLL(str(_compile(k, d, TIMING_C, f"t_{k.engine}", True)))
    lib.bench_ns.restype = ctypes.c_double
    if X is None:
        X = np.random.default_rng(0).uniform(-1, 1, (256, k.n_in))
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    Y = np.zeros((n, max(k.n_out, 1)))
    P = ctypes.POINTER(ctypes.c_double)
    args = (X.ctypes.data_as(P), Y.ctypes.data_as(P), ctypes.c_int64(n), ctypes.c_int64(k.n_in),
            ctypes.c_int64(max(k.n_out, 1)))
    if lib.bench_ns(*args, ctypes.c_int64(20)) < 0:  # warm up
        refuse_status(k.engine)
    return min(lib.bench_ns(*args, ctypes.c_int64(200)) for _ in range(repeat))


def callgrind_instructions(k, d: Path, X: np.ndarray | None = None) -> float:
    return _callgrind(k, d, X)[0]


def _callgrind(k, d: Path, X: np.ndarray | None = None, real: str = "double") -> tuple[float, Path]:
    """Instructions per call (callgrind: 110 calls less 10), cycling through the rows of X
    (default: one fixed vector in [0.1, 0.9], inside the joint kernels' ranges); `real` is
    the kernel's element type (int32_t for a fixed-point kernel, X then holds its words)."""
    if X is None:
        X = [[0.1 + 0.8 * ((j * 7919) % 101) / 101.0 for j in range(k.n_in)]]
    rows = ", ".join("{" + ", ".join(repr(float(v)) for v in row) + "}" for row in np.asarray(X, dtype=np.float64))
    main = (CALLGRIND_MAIN.replace("NIN", str(k.n_in)).replace("NOUT", str(max(k.n_out, 1)))
            .replace("NX", str(len(X))).replace("XS", "{" + rows + "}"))
    exe = _compile(k, d, main, f"c_{k.engine}", False, real)
    counts = []
    for calls in (10, 110):
        out = d / f"cg_{k.engine}_{calls}.out"
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(exe), str(calls)],
                           capture_output=True, text=True)
        if r.returncode == 3:
            refuse_status(k.engine)
        m = re.search(r"Collected\s*:\s*(\d+)", r.stderr) or re.search(r"refs:\s*([\d,]+)", r.stderr)
        if not m:
            raise RuntimeError(f"callgrind gave no count: {r.stderr[-500:]}")
        counts.append(int(m.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / 100.0, exe


KINDS = ("arithmetic", "register copies", "stack loads", "stack stores", "constant loads",
         "other loads", "other stores", "compare/branch", "other")
_ARITH = re.compile(r"(add|sub|mul|div|sqrt|min|max|and|andn|or|xor)[sp]d$|^pand|^por|^pxor")


def instruction_kinds(exe: Path, name: str) -> dict[str, int]:
    """x86-64 instructions of the functions whose names match the regex `name` (from the
    start) in exe, by kind (objdump)."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(exe)], capture_output=True, text=True,
                          check=True).stdout
    kinds = dict.fromkeys(KINDS, 0)
    for block in text.split("\n\n"):
        head = re.match(r"[0-9a-f]+ <([^>]+)>:", block.strip())
        if not head or not re.match(name, head.group(1)):
            continue
        for line in block.strip().splitlines()[1:]:
            parts = line.split("\t")
            if len(parts) < 2:
                continue
            mnem, _, ops = parts[1].strip().partition(" ")
            args = [a.strip() for a in re.split(r",(?![^(]*\))", ops.strip())] if ops.strip() else []
            if _ARITH.search(mnem) or mnem.startswith(("cvt", "unpck", "shuf")):
                kind = "arithmetic"
            elif mnem.startswith("mov") and args and len(args) == 2:
                src, dst = args
                if "(" not in src and "(" not in dst:
                    kind = "register copies"
                elif "(" in src:
                    kind = ("stack loads" if "%rsp" in src else "constant loads" if "%rip" in src else "other loads")
                else:
                    kind = "stack stores" if "%rsp" in dst else "other stores"
            elif mnem.startswith(("comi", "ucomi", "cmp", "test", "j", "set")):
                kind = "compare/branch"
            else:
                kind = "other"
            kinds[kind] += 1
    return kinds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="fourbar,slidercrank,stewart")
    ap.add_argument("--no-sympy", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    check_models(ap, args.models)
    check_json(ap, args.json)
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
            for e, (k, ops, floor) in ks.items():
                ins, exe = _callgrind(k, Path(tmp))
                rows[e] = {"ops": ops, "ns": time_ns(k, Path(tmp), args.repeat), "instructions": ins}
                if model == "stewart" and e in ("mbforge", "casadi"):
                    rows[e]["kinds"] = instruction_kinds(exe, r"mbf_" if e == "mbforge" else r"cas_\w+_f\d")
                if floor:
                    rows[e]["floor"] = floor
        mine = rows["mbforge"]
        for e, r in rows.items():
            ratio = "" if e == "mbforge" else (f"{mine['ops'] / r['ops']:>6.2f} {mine['ns'] / r['ns']:>6.2f} "
                                               f"{mine['instructions'] / r['instructions']:>6.2f}")
            print(f"{model if e == 'mbforge' else '':<12} {e:<8} {r['ops']:>7} {r['ns']:>9.1f} "
                  f"{r['instructions']:>11.0f}   {ratio}")
        report[model] = rows
    if "stewart" in report:
        s = report["stewart"]
        print("\nStewart platform, kernel instructions by kind in the disassembly (mbforge: with its envelope "
              "checks; CasADi: both sides of its branches)")
        print(f"{'kind':<18} {'mbforge':>8} {'casadi':>8}")
        for kind in KINDS:
            print(f"{kind:<18} {s['mbforge']['kinds'][kind]:>8} {s['casadi']['kinds'][kind]:>8}")
        print(f"\nStewart platform: operations {s['mbforge']['ops'] / s['casadi']['ops']:.2f} x CasADi (target <= 0.75), "
              f"time {s['mbforge']['ns'] / s['casadi']['ns']:.2f} x (target <= 0.8), "
              f"instructions {s['mbforge']['instructions'] / s['casadi']['instructions']:.2f} x (target <= 0.7)")
        f, cas = s["mbforge"]["floor"], s["casadi"]["instructions"]
        print(f"Stewart platform, x86-64 floor (scalar SSE2, two-operand): {f['operations']} operations + "
              f"{f['copies']} copies at least + {f['stores']} stores = {f['floor']}; mbforge "
              f"{s['mbforge']['instructions'] / f['floor']:.2f} x the floor; 0.7 x CasADi = {0.7 * cas:.0f} "
              f"= {0.7 * cas / f['floor']:.2f} x the floor")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    run("host", main)
