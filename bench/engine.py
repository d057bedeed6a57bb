"""Engine benchmark (issue 3): the same equations built by mbforge, CasADi SX and SymPy.

Each measurement runs in a fresh Python process (mbforge interns atoms: a second build in
one process would find everything made already) and the best of --repeat runs is kept.
Prints generation time, operations (+ - * / and calls, after dead-code elimination) and
atoms / nodes, with the ratios mbforge / peer; then the derivative scaling on a serial
chain.

    python -m bench.engine [--repeat 3] [--no-sympy] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

from . import check_json, check_models, run
from .generic import MODELS

CHAIN_N = (12, 16, 20, 24, 48)


def _child(kind: str, backend: str, arg: str) -> dict:
    code = (
        "import json, sys\n"
        "from bench.backends import BACKENDS\n"
        "from bench import generic\n"
        f"B = BACKENDS[{backend!r}]()\n"
        f"if {kind!r} == 'joint':\n"
        f"    r = B.joint(getattr(generic, {arg!r}))\n"
        "    print(json.dumps({'seconds': r.seconds, 'ops': r.ops, 'atoms': r.atoms, 'n_out': r.n_out}))\n"
        "else:\n"
        f"    s, ops = B.chain_jacobian({arg})\n"
        "    print(json.dumps({'seconds': s, 'ops': ops}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best(kind: str, backend: str, arg: str, repeat: int) -> dict:
    runs = [_child(kind, backend, arg) for _ in range(repeat)]
    r = min(runs, key=lambda d: d["seconds"])
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-sympy", action="store_true", help="skip SymPy (about 15 s on the Stewart platform)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--json", default=None)
    ap.add_argument("--chain", default=",".join(map(str, CHAIN_N)), help="chain lengths (empty: skip)")
    args = ap.parse_args(argv)
    check_models(ap, args.models)
    check_json(ap, args.json)
    chain_n = [int(n) for n in args.chain.split(",") if n]
    peers = ["casadi"] + ([] if args.no_sympy else ["sympy"])
    variants = ["mbforge-fast"]  # the same engine without the register-pressure scheduler
    report: dict = {"joint": {}, "chain": {}}

    print("Joint function Phi, Phi_q, Phi_t, gamma, M, Q (best of %d fresh processes)" % args.repeat)
    hdr = f"{'model':<12} {'engine':<12} {'time [s]':>9} {'ops':>7} {'atoms':>7}   {'time ratio':>10} {'ops ratio':>9}"
    print(hdr)
    print("-" * len(hdr))
    for model in args.models.split(","):
        mine = best("joint", "mbforge", model, args.repeat)
        rows = {"mbforge": mine}
        print(f"{model:<12} {'mbforge':<12} {mine['seconds']:>9.4f} {mine['ops']:>7} {mine['atoms']:>7}")
        for v in variants:
            r = best("joint", v, model, args.repeat)
            rows[v] = r
            print(f"{'':<12} {v:<12} {r['seconds']:>9.4f} {r['ops']:>7} {r['atoms']:>7}")
        for peer in peers:
            rep = 1 if peer == "sympy" else args.repeat
            r = best("joint", peer, model, rep)
            rows[peer] = r
            print(f"{'':<12} {peer:<12} {r['seconds']:>9.4f} {r['ops']:>7} {r['atoms']:>7}   "
                  f"{mine['seconds'] / r['seconds']:>10.2f} {mine['ops'] / r['ops']:>9.2f}")
        report["joint"][model] = rows

    print("\nTip-position Jacobian of an N-body serial chain in relative coordinates")
    print(f"{'N':>4} " + " ".join(f"{e + ' [s]':>13} {'ops':>7}" for e in ["mbforge", "casadi"]))
    for n in chain_n:
        row = {e: best("chain", e, str(n), args.repeat) for e in ("mbforge", "casadi")}
        report["chain"][n] = row
        print(f"{n:>4} " + " ".join(f"{row[e]['seconds']:>13.4f} {row[e]['ops']:>7}" for e in ("mbforge", "casadi")))
    if len(chain_n) >= 2:
        a, b = chain_n[0], chain_n[-1]
        t = {n: report["chain"][n]["mbforge"]["seconds"] for n in chain_n}
        growth = math.log(t[b] / t[a]) / math.log(b / a)
        report["chain_growth_exponent"] = growth
        print(f"mbforge time grows as N^{growth:.2f} from N={a} to N={b} (target: no faster than about N^2)")

    st = report["joint"].get("stewart")
    if st:
        print("\nTargets on the Stewart platform (same run):")
        print(f"  generation time mbforge/CasADi = {st['mbforge']['seconds'] / st['casadi']['seconds']:.2f} (target <= 1.0); "
              f"without the pressure scheduler {st['mbforge-fast']['seconds'] / st['casadi']['seconds']:.2f}")
        print(f"  operations      mbforge/CasADi = {st['mbforge']['ops'] / st['casadi']['ops']:.2f} (target <= 0.75)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    run("engine", main)
