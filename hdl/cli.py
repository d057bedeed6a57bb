"""`mbforge hdl MODEL --kernel K --sim icarus|verilator`: generate, simulate, compare, report.

Into --out it writes rtl/ (target verilog; the plain Verilog testbench rtl/<top>_tb.v with
the simulated vectors and the host model's results as hex files, mbforge.hdl.tb; with
--interface axis its AXI-Stream wrapper, with --interface axilite its AXI4-Lite register
map too), hls/ (target hls-c), fixed/ (c-fixed, the bit-exact host model), double/ (c-double,
the reference); then it builds the RTL with the simulator, runs the cocotb bench
(mbforge.hdl.bench; with --interface axis or axilite the wrapper's test too), checks the HLS C's C
simulation against the host model, prints the comparison (rtl/sim_report.json: the vectors,
how many distinct, the worst error / bound ratio, ...) and the yosys report
(rtl/synth_report.txt) and, with --pnr, nextpnr's Fmax and utilisation (iCE40, ECP5)
(rtl/pnr_report.json; mbforge.hdl.pnr). Exit status 0 when everything passed (and the
design fits the part asked for), 1 otherwise, 2 when a tool is missing or failed.
"""
from __future__ import annotations

import sys
import time

import numpy as np


def _cmd_hdl(args) -> int:
    out, dirs, eqs, kernel = _generate(args)
    failed, b = _simulate(args, dirs, eqs, kernel)
    hr = _horizon(eqs, args, b, dirs) if kernel.step else None
    if hr is not None and not hr.passed:
        failed.append("horizon run: see its table below")
    fmax = _implement(args, dirs, failed)
    if hr is not None:
        print(hr.table(fmax))
    if failed:  # the closing line: which step failed, and why
        print(f"mbforge hdl: failed: {'; '.join(failed)}")
    return 1 if failed else 0


def _generate(args):
    """The kernel in verilog, hls-c, c-fixed and c-double under --out: (out, the four
    folders, the equations, the kernel)."""
    from mbforge.errors import CLIError
    from mbforge.modelflags import model_kernel, motion_only
    from mbforge.outdir import OutDir
    from mbforge.pipeline import check_prefix, generate, resolve_options

    out = OutDir(args.out)
    t0 = time.perf_counter()
    given = {f.name: getattr(args, f.name) for f in _rtl_fields() if getattr(args, f.name) is not None}
    opts = resolve_options("verilog", given, cli=True)
    if args.prefix is not None:
        check_prefix(args.prefix)
    # each subfolder a real folder inside --out (a symlinked rtl/ is refused, not followed)
    subs = {name: out.sub(name) for name in ("rtl", "hls", "fixed", "double")}
    for sub in subs.values():
        sub.check_writable()
    if args.horizon is not None and args.kernel != "step":
        raise CLIError(f"--horizon goes with --kernel step, not --kernel {args.kernel}")
    if args.clock is not None and not args.pnr:
        raise CLIError(f"--clock {args.clock:g}: a target for place and route, it goes with --pnr PART")
    eqs, kernel = model_kernel(args)
    generate(kernel, "verilog", prefix=args.prefix, options=opts).write(subs["rtl"])
    shared = {k: v for k, v in given.items() if k in FIXED_POINT_SHARED}
    generate(kernel, "hls-c", prefix=args.prefix, options=shared).write(subs["hls"])
    generate(kernel, "c-fixed", prefix=args.prefix, options=shared).write(subs["fixed"])
    generate(kernel, "c-double", prefix=args.prefix).write(subs["double"])
    print(f"generated {kernel.model} {kernel.name} ({opts.variant}) in {time.perf_counter() - t0:.1f} s -> {out.path}")
    note = motion_only(eqs, kernel)
    if note:
        print(note)
    return out, {name: sub.path for name, sub in subs.items()}, eqs, kernel


def _vectors(args, dirs, eqs, kernel):
    """The raw vectors of the RTL simulation, before the robustness set: mbforge.verify's
    draw (the motion file's states drawn with replacement on a kernel with an operating
    envelope), or, when --vectors asks for more than those states and the kernel is not a
    step, --vectors distinct consistent states drawn afresh over the envelope by the
    sampler that made them (domain.cover.envelope_states, seeded by --seed), then the
    motion's."""
    import functools

    from mbforge.domain.base import DomainError
    from mbforge.domain.cover import envelope_cover, envelope_states
    from mbforge.manifest import Manifest
    from mbforge.verify.vectors import VectorError, fresh_raw, pool_size

    from . import sim as S

    m = Manifest.load(dirs["fixed"])
    pool = pool_size(m, dirs["fixed"])
    if not pool or args.vectors <= pool or kernel.step or not eqs.envelope:
        return S.make_vectors(dirs["fixed"], args.vectors, args.seed)
    t0 = time.perf_counter()
    try:
        sample = functools.partial(envelope_states, eqs, kernel.inputs, envelope_cover(eqs))
        fresh = fresh_raw(m, dirs["fixed"], sample, args.vectors, args.seed)
    except (DomainError, VectorError) as e:
        print(f"note: --vectors {args.vectors} drawn from the motion file's {pool} states (no fresh ones: {e})")
        return S.make_vectors(dirs["fixed"], args.vectors, args.seed)
    print(f"--vectors {args.vectors}: more than the motion file's {pool} distinct states: {len(fresh)} distinct "
          f"consistent states drawn afresh over the operating envelope (seed {args.seed}, "
          f"{time.perf_counter() - t0:.1f} s), the motion's after them")
    return np.vstack([fresh, S.make_vectors(dirs["fixed"], 0, args.seed)])  # no random ones: the motion's


def _search(args, dirs, eqs, kernel) -> dict | None:
    """--search N: domain.cover.search_states over the envelope's consistent states for the
    worst error / bound of the c-fixed host model (bit-exact with the RTL) against the
    c-double reference, on the inputs rounded to the kernel's format; its final states,
    as raw vectors ("raw"), join the RTL's, the figures the report. None, with a note,
    where there is no envelope to search (or a step kernel)."""
    from mbforge.domain.base import DomainError
    from mbforge.domain.cover import envelope_cover, search_states
    from mbforge.manifest import Manifest
    from mbforge.verify import hostlib
    from mbforge.verify.compare import row_bound_ratios
    from mbforge.verify.vectors import VectorError, for_reference, from_raw, states_raw

    m = Manifest.load(dirs["fixed"])
    if not eqs.envelope or not m.envelope or kernel.step:
        print(f"note: --search: {kernel.model} {kernel.name} has no operating envelope to search"
              + (" (a step kernel)" if kernel.step else "") + "; skipped")
        return None
    fixed, double = hostlib.load_kernel(dirs["fixed"]), hostlib.load_kernel(dirs["double"])

    def score(X):
        R = states_raw(m, dirs["fixed"], X)
        Yf, sf = fixed(R)
        Yd, _ = double(for_reference(m, dirs["fixed"], from_raw(m, R, "inputs")))
        return row_bound_ratios(m, from_raw(m, Yf, "outputs"), sf, Yd)

    t0 = time.perf_counter()
    try:
        best, X, first = search_states(eqs, kernel.inputs, envelope_cover(eqs), score, args.search, seed=args.seed)
    except (DomainError, VectorError) as e:
        print(f"note: --search: {e}; skipped")
        return None
    if not len(best):
        print("note: --search: no consistent state drawn; skipped")
        return None
    w = int(np.argmax(best))
    out = {"states": args.search, "searched": len(best), "worst_error_ratio": float(best[w]),
           "worst_error_ratio_drawn": float(first.max()),
           "worst_state": [float(v) for v in X[w]], "seconds": time.perf_counter() - t0,
           "raw": states_raw(m, dirs["fixed"], X)}
    print(f"search over the operating envelope (seed {args.seed}): from the {len(best)} worst of {args.search} "
          f"consistent states (worst error / bound {first.max():.3g}), worst error / bound on the c-fixed host model {best[w]:.3g} "
          f"({out['seconds']:.1f} s); the {len(best)} states found are simulated in the RTL after the drawn ones")
    return out


def _simulate(args, dirs, eqs, kernel) -> tuple[list, object]:
    """HLS C against the c-fixed host model, the RTL simulation and (--interface axis) the
    AXI-Stream one: (the failed steps, the RTL build)."""
    import dataclasses
    import json
    from pathlib import Path

    from mbforge.outdir import write_file
    from mbforge.verify import hostlib

    from . import sim as S
    from .axilite import simulate_axil
    from .axis import simulate_axis
    from .tb import write_tb

    # the drawn vectors (and the search's states), then the labelled robustness set (what simulate() adds)
    X0 = _vectors(args, dirs, eqs, kernel)
    found = _search(args, dirs, eqs, kernel) if args.search else None
    if found is not None:
        X0 = np.vstack([X0, found.pop("raw")]).astype(np.int32)
    X = S.with_robustness(dirs["fixed"], X0)[0]
    Yf, sf = hostlib.load_kernel(dirs["fixed"])(X)
    tb = write_tb(dirs["rtl"], X, Yf, sf)  # the plain bench, on these vectors and the host model's results
    print(f"plain Verilog bench: rtl/{tb[0]} on rtl/{tb[1]} and rtl/{tb[2]} ({len(X)} vectors); "
          f"in {Path(dirs['rtl']).parent}: iverilog -g2012 -o tb rtl/*.v && vvp tb")
    Yh, sh = hostlib.load_kernel(dirs["hls"])(X)
    hls_ok = bool(np.array_equal(Yf, Yh) and np.array_equal(sf, sh))
    failed = [] if hls_ok else ["HLS C simulation: not bit-exact with the c-fixed host model"]
    print(f"HLS C (gcc C simulation) versus the c-fixed host model on {len(X)} vectors: "
          f"{'bit-exact' if hls_ok else 'DIFFERENT'}")
    b = S.build(dirs["rtl"], args.sim)
    r = S.simulate(b, dirs["fixed"], dirs["double"], seed=args.seed, X=X0, robust=True)
    print(r.table())
    rep = dataclasses.asdict(r) | ({"search": found} if found is not None else {})
    write_file(Path(dirs["rtl"]) / "sim_report.json",
               (json.dumps(rep, indent=1, sort_keys=True, default=str) + "\n").encode(), "--out")
    failed += [] if r.passed else [f"RTL simulation: {_sim_failure(r)}"]
    if args.interface == "axis":
        ar = simulate_axis(dirs["rtl"], args.sim, dirs["fixed"], X, seed=args.seed)
        print(ar.line())
        failed += [] if ar.passed else ["AXI-Stream simulation: see the line above"]
    if args.interface == "axilite":
        lr = simulate_axil(dirs["rtl"], args.sim, dirs["fixed"], X, seed=args.seed)
        print(lr.line())
        failed += [] if lr.passed else ["AXI4-Lite simulation: see the line above"]
    return failed, b


def _implement(args, dirs, failed: list):
    """Synthesis (unless --no-synth) and --pnr; a part that does not fit joins `failed`.
    The Fmax placed and routed, or None."""
    from .pnr import PNR_DEVICE, clock_failure, place_and_route, pnr_failure, pnr_text
    from .synth import report_text, synthesize

    if not args.no_synth:
        # with --pnr the part's own mapping gives the resources: no iCE40 estimate, no note of one
        print(report_text(synthesize(dirs["rtl"], ice40=True if args.ice40 else (False if args.pnr else None),
                                     xilinx=args.xilinx)))
    if not args.pnr:
        return None
    rep = place_and_route(dirs["rtl"], PNR_DEVICE[args.pnr], seed=args.pnr_seed, clock_mhz=args.clock)
    print(pnr_text(rep))
    if not rep["fits"]:
        failed.append(f"place and route: {pnr_failure(rep)}")
    elif clock_failure(rep):
        failed.append(clock_failure(rep))
    return rep.get("fmax_mhz")


def _sim_failure(r) -> str:
    """Why an RTL simulation did not pass, in a few words."""
    if not r.bit_exact:
        return f"not bit-exact with the c-fixed host model ({len(r.mismatches)} mismatches)"
    if r.errors:
        return r.errors[0].splitlines()[0][:200]
    if not r.reset_ok:
        return "the reset in the middle of a computation was not clean"
    if r.within_bound is False:
        return "an output beyond its error bound from the double reference"
    return f"latency {r.latency} cycles, {r.expected_latency} expected"


def _horizon(eqs, args, b, dirs):
    """A step kernel's motion in the RTL over --horizon seconds from the model's initial
    state (sim.horizon): bit for bit against the c-fixed host model, and against the
    c-double step."""
    from mbforge.kernels.common import independent_equations
    from mbforge.kernels.step import initial_state
    from mbforge.manifest import Manifest

    from . import sim as S

    m = Manifest.load(dirs["rtl"])
    steps = int(round((args.horizon or 1.0) / m.step["dt"]))
    if steps < 1:
        raise S.SimError(f"--horizon {args.horizon:g} s is shorter than one step of {m.step['dt']:g} s")
    # from the model's initial state, in the coordinates the step integrates (--reduced: the independent ones)
    t0, state = initial_state(independent_equations(eqs, m.step.get("coordinates") == "independent", "step"),
                              m.step["integrator"])
    every = max(1, steps // 100)
    return S.horizon(b, dirs["fixed"], dirs["double"], m.step_start(t0, state), steps - steps % every, every)


def cmd_hdl(args) -> int:
    from mbforge.outdir import OutDirError

    from .pnr import PnrError
    from .sim import SimError
    from .synth import SynthError

    try:
        return _cmd_hdl(args)
    except (PnrError, SimError, SynthError, OutDirError) as e:  # one line, the tool's own words
        msg = str(e).strip().splitlines()
        print(f"mbforge hdl: error: {msg[0] if msg else type(e).__name__}", file=sys.stderr)
        return 2


# options of every target that hdl passes to each fixed-point folder (rtl/, hls/ and the
# bit-exact host model fixed/): the RTL and its models must agree on them
FIXED_POINT_SHARED = ("input_check",)


def _rtl_fields():
    """The verilog backend's own options (variant, unit counts) and FIXED_POINT_SHARED: the
    flags of the RTL."""
    from mbforge.backends import Options, get_backend

    return [f for f in get_backend("verilog").Options.fields()
            if f.name not in Options.names() or f.name in FIXED_POINT_SHARED]


def register(sub) -> None:
    from mbforge.backends import add_flags
    from mbforge.modelflags import add_model_flags
    from mbforge.options import VECTORS_MAX, folder, number, seed, vectors, whole

    from .pnr import PNR_CHOICES
    from .sim import SIMULATORS

    p = sub.add_parser("hdl", help="generate a kernel's RTL and HLS C, simulate it with cocotb, report synthesis")
    add_model_flags(p)
    p.add_argument("--sim", default="icarus", choices=SIMULATORS, help="the RTL simulator (default icarus)")
    add_flags(p, _rtl_fields())
    p.add_argument("--vectors", type=vectors, default=200,
                   help=f"random vectors, 0 to {VECTORS_MAX} (the motion's come on top; default 200)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the random vectors, >= 0 (default 0)")
    p.add_argument("--search", type=whole(0, VECTORS_MAX), default=0,
                   help="kernels with an operating envelope: a local search for the worst error / bound of the c-fixed "
                        "host model over the envelope's consistent states, from the worst of this many drawn (--seed); "
                        "the states found are simulated in the RTL too (default 0: none)")
    p.add_argument("--prefix", default=None, help="prefix of emitted symbols (default: model name)")
    p.add_argument("--interface", choices=("ap_ctrl_hs", "axis", "axilite"), default="ap_ctrl_hs",
                   help="axis: also rtl/<top>_axis.v, an AXI-Stream wrapper (inputs in, then outputs and the status "
                        "word out, 32-bit beats; docs/kernels.md), simulated with random tvalid gaps and tready "
                        "stalls against the c-fixed host model; axilite: also rtl/<top>_axil.v, an AXI4-Lite "
                        "register map (CTRL, STATUS, a register per input and output word; offsets in "
                        "rtl/<top>_axil.vh), simulated with random valid and ready delays (default ap_ctrl_hs: "
                        "the core alone)")
    p.add_argument("--no-synth", action="store_true", help="skip the yosys report")
    p.add_argument("--ice40", action="store_true", help="run synth_ice40 even on a large design")
    p.add_argument("--xilinx", action="store_true",
                   help="also estimate Xilinx 7-series resources (yosys synth_xilinx; no place and route)")
    p.add_argument("--pnr", choices=PNR_CHOICES, default=None,
                   help="place and route with nextpnr-ice40 on an UP5K, an HX8K, or (ice40) the first that fits, or "
                        "with nextpnr-ecp5 on an ECP5 25K, 45K, 85K, or (ecp5) the first that fits; prints Fmax "
                        "and utilisation")
    p.add_argument("--clock", type=number(1, 1000, "a clock in MHz"), default=None, metavar="MHZ",
                   help="with --pnr: the target clock (nextpnr's --freq); a routed Fmax below it fails the command "
                        "with the Fmax reached")
    p.add_argument("--pnr-seed", type=whole(0, 2**31 - 1), default=1,
                   help="nextpnr's placement seed, 0 to 2147483647 (default 1: runs repeat)")
    p.add_argument("--horizon", type=number(0, 60, "a number of seconds"), default=None,
                   help="step kernels: seconds of motion run in the RTL, each step's state fed back (default 1; "
                        "about 100 samples compared)")
    p.add_argument("--out", required=True, type=folder, help="directory for rtl/, hls/, fixed/ and double/")
    p.set_defaults(func=cmd_hdl)
