"""`mbforge hdl MODEL --kernel K --sim icarus|verilator`: generate, simulate, compare, report.

Into --out it writes rtl/ (target verilog), hls/ (target hls-c), fixed/ (c-fixed, the
bit-exact host model), double/ (c-double, the reference); then it builds the RTL with
the simulator, runs the cocotb bench (mbforge.hdl.bench), checks the HLS C's C
simulation against the host model, prints the comparison and the yosys report
(rtl/synth_report.txt). Exit status 0 when everything passed, 1 otherwise.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def cmd_hdl(args) -> int:
    from mbforge.examples import load_model
    from mbforge.hil import hostlib
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    from . import sim as S
    from .synth import report_text, synthesize

    out = Path(args.out)
    t0 = time.perf_counter()
    kernel = build_kernel(load_model(args.model).equations(), args.kernel)
    opts = {"variant": args.variant, "multipliers": args.multipliers}
    if args.adders:
        opts["adders"] = args.adders
    dirs = {"rtl": out / "rtl", "hls": out / "hls", "fixed": out / "fixed", "double": out / "double"}
    generate(kernel, "verilog", prefix=args.prefix, options=opts).write(dirs["rtl"])
    generate(kernel, "hls-c", prefix=args.prefix).write(dirs["hls"])
    generate(kernel, "c-fixed", prefix=args.prefix).write(dirs["fixed"])
    generate(kernel, "c-double", prefix=args.prefix).write(dirs["double"])
    t_gen = time.perf_counter() - t0
    print(f"generated {kernel.model} {kernel.name} ({args.variant}) in {t_gen:.1f} s -> {out}")

    X = S.make_vectors(dirs["fixed"], args.vectors, args.seed)
    ok = True
    Yf, sf = hostlib.load_kernel(dirs["fixed"])(X)
    Yh, sh = hostlib.load_kernel(dirs["hls"])(X)
    hls_ok = bool(np.array_equal(Yf, Yh) and np.array_equal(sf, sh))
    ok &= hls_ok
    print(f"HLS C (gcc C simulation) versus the c-fixed host model on {len(X)} vectors: "
          f"{'bit-exact' if hls_ok else 'DIFFERENT'}")

    b = S.build(dirs["rtl"], args.sim)
    r = S.simulate(b, dirs["fixed"], dirs["double"], X=X, seed=args.seed)
    print(r.table())
    ok &= r.passed
    if not args.no_synth:
        rep = synthesize(dirs["rtl"], ice40=True if args.ice40 else None)
        print(report_text(rep))
    return 0 if ok else 1


def register(sub) -> None:
    from mbforge.kernels.builders import BUILDERS

    from .sim import SIMULATORS

    p = sub.add_parser("hdl", help="generate a kernel's RTL and HLS C, simulate it with cocotb, report synthesis")
    p.add_argument("model", help="a shipped example (e.g. fourbar) or a .py file with build()")
    p.add_argument("--kernel", default="equations", choices=sorted(BUILDERS))
    p.add_argument("--sim", default="icarus", choices=SIMULATORS)
    p.add_argument("--variant", default="pipelined", choices=("pipelined", "shared"))
    p.add_argument("--multipliers", type=int, default=4, help="multipliers of the shared variant (default 4)")
    p.add_argument("--adders", type=int, default=None, help="adders of the shared variant (default: as multipliers)")
    p.add_argument("--vectors", type=int, default=200, help="random vectors (the motion's come on top)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prefix", default=None)
    p.add_argument("--no-synth", action="store_true", help="skip the yosys report")
    p.add_argument("--ice40", action="store_true", help="run synth_ice40 even on a large design")
    p.add_argument("--out", required=True, type=Path)
    p.set_defaults(func=cmd_hdl)
