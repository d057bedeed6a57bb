"""Verilog from a fixed-point program: a pipelined, a resource-shared or a microcode kernel.

    FixedProgram -> HwProgram (backends.fixed.ops) -> cycle schedule (rtl.schedule) -> Verilog

Files: `<function>_hw.v` (the kernel), `<function>_hw_ops.v` (its operators, from
templates/verilog/ops.v.j2, pipelines as deep as the op table's latencies), `rtl.json` (ports, latency, interval, units, registers, delay-line bits). The
kernel's ports are those Vitis HLS gives the HLS-ready C's top function `<function>_hw`
(block protocol ap_ctrl_hs, scalar inputs ap_none, outputs with _ap_vld, the status as
ap_return), so one bench drives either:

    ap_clk, ap_rst (synchronous, active high), ap_start, ap_done, ap_idle, ap_ready,
    ap_return[31:0] (the c-fixed status: 2 an input word outside its envelope, outputs not
    meaningful; 1 a value saturated; 0 ok), in_<k>[31:0], out_<k>[31:0], out_<k>_ap_vld

* pipelined: ap_ready = ap_start (an input vector is taken in every cycle ap_start is
  high, from the ports in that cycle); ap_return and ap_done appear `latency` cycles
  later, one vector per cycle. With outputs=early (the default) out_<k> and its
  out_<k>_ap_vld appear in the cycle the value is computed (rtl.json output_cycles: 0 for
  an input or a constant passed through, `latency` for the last), so nothing is held for
  the others; with outputs=aligned all in the ap_done cycle. There is no back-pressure:
  the consumer takes each output in its _ap_vld cycle; the producer paces the kernel
  with ap_start. Delay lines are shift registers, or ring buffers in memories for their
  long segments (delay_lines=memory: rtl.schedule.delay_plan), which yosys maps to block RAM.
* shared: ap_start in the idle state starts a computation that reads the input ports
  while it runs, so they must stay as they are until ap_ready; ap_done = ap_ready in the
  last cycle, with the outputs held in registers; the kernel is idle in the next cycle
  and starts again if ap_start is high then (interval = cycles + 2).
* microcode: the shared variant's protocol and units (one per class), driven by a ROM word
  per cycle, their operands from a register file in block RAM (rtl.microcode, which
  renders it; its unit datapaths are this module's and templates/verilog/unit.v.j2).

rtl.target picks the variant and writes rtl.json and the .vh header (render_rtl, the
`verilog` target's entry); this module renders the pipelined and shared variants and the
pieces the microcode one shares (rtl.microcode imports them; neither imports rtl.target).
The text is laid out by templates/verilog/{head,pipelined,shared,unit,microcode,ops}.v.j2; this module
computes what goes in them (schedules, operand sources, Verilog expressions of the op set's
shifts). Output depends only on the program and the options (no dates, no paths), and
passes `verilator --lint-only -Wall` (mbforge.hdl.lint): what it would flag and is meant
(a product's dropped bits, the shared datapaths' narrowed widths) is waived where it arises.
"""
from __future__ import annotations

import math

from ..fixed.ops import DIV_STAGES, LATENCY, OPS, SQRT_STAGES, HwProgram, trig_constants
from .schedule import SHARED_LATENCY, DelayPlan, PipeSchedule, SharedSchedule, _width, unit_class
from ..context import (KernelContext, VerilogContext, VerilogHeadContext, VerilogPipelinedContext,
                       VerilogSharedContext)
from ..render import render_context, render_template



def lit(v: int, w: int) -> str:
    """A signed w-bit Verilog literal with value v (two's complement)."""
    return f"{w}'sh{v & ((1 << w) - 1):x}"


def _rsh(expr: str, s: int) -> str:
    if s > 0:
        return f"((({expr}) + {lit(1 << (s - 1), 64)}) >>> {s})"
    if s < 0:
        return f"(({expr}) <<< {-s})"
    return f"({expr})"


def _align(src: str, sh: int) -> str:
    return _rsh(f"sx({src})", -sh)


def _ops_file(ctx: KernelContext, top: str, hp: HwProgram, variant: str = "pipelined") -> str:
    counts = hp.counts()
    t = trig_constants()
    trig = dict(t, c_lit=lit(t["two_over_pi_q24"], 32), hi_lit=lit(t["pio2_hi_q29"], 32),
                lo_lit=lit(t["pio2_lo_q60"], 32))
    trig_iter = None
    iterative = variant in ("shared", "microcode")
    if iterative and counts.get("tred"):
        # the shared variant's one reduction unit shifts by the amounts its operations use
        am = sorted({op.p["sh"] for op in hp.ops if op.kind == "tred"})
        trig_iter = {"amounts": am, "w": max(1, (len(am) - 1).bit_length()),
                     "xr": _shift_mux("xr", "xw", "sel", [max(-a, 0) for a in am]),
                     "kx": _shift_mux("kw", "p", "sel1", [53 - max(a, 0) for a in am])
                     # x1 sign-extended to the multiplexer's 64 bits, spelt out (Verilator -Wall)
                     + _shift_mux("xs", "$signed({{32{x1[31]}}, x1})", "sel1", [-max(a, 0) for a in am])}
    return render_template("verilog/ops.v.j2", version=ctx.version, top=top, trig_iter=trig_iter,
                           prefix=ctx.prefix, lat=LATENCY, lat_shared=SHARED_LATENCY,
                           iterative=iterative, div_stages=DIV_STAGES, sqrt_stages=SQRT_STAGES,
                           div=bool(counts.get("div")),
                           sqrt=bool(counts.get("sqrt")), trig=trig if counts.get("tred") else None)


def _name(ref: tuple) -> str:
    if ref[0] == "in":
        return f"in_{ref[1]}"
    return f"h{ref[1]}" if ref[2] == 0 else f"h{ref[1]}_{ref[2]}"


def _comment(note) -> str:
    return str(note).replace("*/", "* /").replace("\n", " ")[:110]


def env_check(env_words) -> str:
    """A Verilog expression, true when an input word is outside its envelope range in
    words (the c-fixed check's bounds, fixed.c.envelope_words); "1'b0" if none can be."""
    terms = []
    for k, (lw, hw) in enumerate(env_words or []):
        if lw is not None:
            terms.append(f"($signed(in_{k}) < {lit(lw, 32)})")
        if hw is not None:
            terms.append(f"($signed(in_{k}) > {lit(hw, 32)})")
    return " || ".join(terms) or "1'b0"


def _head(ctx: VerilogContext, top: str, hp: HwProgram, variant: str, lut_mul: bool = False) -> VerilogHeadContext:
    """What templates/verilog/head.v.j2 (ports, functions) needs, and the envelope check."""
    k = ctx.common
    return VerilogHeadContext(version=k.version, model=k.model, kernel=k.kernel, digest=k.digest, variant=variant,
                              top=top, n_in=hp.n_in, n_out=len(hp.outputs), env=env_check(ctx.env_words),
                              in_doc=[_port_doc(e, r) for e, r in zip(k.in_elems, k.envelope)],
                              out_doc=[_port_doc(e) for e in k.out_elems], lut_mul=lut_mul)


def _port_doc(elem: tuple[str, int | None], checked: tuple[float, float] | None = None) -> str:
    """A port's comment: its element, how a word reads (value = word / 2^frac) and, for an
    input, the range it is checked against (status 2 outside)."""
    name, frac = elem
    text = f"{name}: value = word / 2^{frac}" if frac is not None else name
    if checked is not None and all(math.isfinite(v) for v in checked):
        text += f", checked within [{checked[0]:.6g}, {checked[1]:.6g}]"
    return text


def params_header(k, top: str, desc: dict) -> str:
    """`<top>.vh`: what a design that instantiates the kernel needs as `define macros (plain
    Verilog, SystemVerilog alike): port counts, latency and interval in cycles, and each
    port's index and fractional bits by element name."""
    return render_template("verilog/params.vh.j2", version=k.version, model=k.model, kernel=k.kernel,
                           digest=k.digest, top=top, variant=desc["variant"], macro=top.upper(), n_in=k.n_in,
                           n_out=k.n_out, latency=desc["latency"], interval=desc["interval"],
                           ports=[("IN", k.in_elems), ("OUT", k.out_elems)])


def dsp_products(hp: HwProgram, dsp: int | None) -> set[int]:
    """The ids of the pipelined variant's products left to DSP blocks under a cap of `dsp`
    (None: all): products of two values first, in program order, then those by a literal,
    the most signed digits first (a literal's LUT multiplier is one adder per digit)."""
    from .lower import signed_digits

    muls = [op for op in hp.ops if op.kind == "mul"]
    if dsp is None:
        return {op.id for op in muls}
    order = sorted(muls, key=lambda op: (-len(signed_digits(op.p["lit"])) if "lit" in op.p else -99, op.id))
    return {op.id for op in order[:dsp]}


def _delay_lines(hp: HwProgram, plan: DelayPlan) -> tuple[list[dict], list[dict]]:
    """The template's shift registers and ring buffers of a delay plan (schedule.delay_plan):
    a value `x` delayed d cycles is `x_d<d>`, for every d a reader takes."""
    def src(ref, a):
        return _name(ref) if a == 0 else f"{_name(ref)}_d{a}"

    delays = []
    for ref, a, b in plan.chains:
        names = [f"{_name(ref)}_d{j}" for j in range(a + 1, b + 1)]
        prev = [src(ref, a)] + names[:-1]
        delays.append({"width": _width(hp, ref), "names": names,
                       "chain": " ".join(f"{n} <= {p};" for n, p in zip(names, prev))})
    memories = []
    for m in plan.memories:
        L, k = m["length"], (m["depth"] - 1).bit_length()
        outs, lo = [], 0
        for ref, a in m["parts"]:
            w = _width(hp, ref)
            outs.append((w, f"{_name(ref)}_d{a + L}", f"{lo + w - 1}:{lo}"))  # the first part lowest
            lo += w
        memories.append({"n": f"dm{L}", "length": L, "depth": m["depth"], "width": m["width"],
                         "wa": f"dl_t[{k - 1}:0]", "k": k, "back": f"{k}'d{(L - 1) % m['depth']}",
                         "data": "{" + ", ".join(src(r, a) for r, a in reversed(m["parts"])) + "}", "outs": outs})
    return delays, memories


def _tap(ps: PipeSchedule, ref, t) -> str:
    """The name of value `ref` as read in cycle t: the value itself, or its delayed copy."""
    d = t - ps.ready[ref]
    assert 0 <= d <= ps.depth[ref], (ref, t, d)
    return _name(ref) if d == 0 else f"{_name(ref)}_d{d}"


def _pipelined_op(op, src: list[str], t: int, dsp: set[int] | None) -> dict:
    """What templates/verilog/pipelined.v.j2 writes of one operation started in cycle t, its
    sources read as `src`."""
    h = _name(("h", op.id, 0))
    p = op.p
    o = {"kind": op.kind, "h": h, "flag": op.flag, "comment": f"h{op.id} {op.kind} @{t}: {_comment(op.note)}",
         "module": OPS[op.kind].verilog}
    if op.kind == "add":
        terms = [("- " if sg < 0 else "+ ") + _align(s_, sh) for s_, sh, sg in zip(src, p["sh"], p["sign"])]
        if p["lit"]:
            terms.append("+ " + lit(p["lit"], 64))
        x = " ".join(terms).lstrip("+ ")
        o["x"] = lit(0, 64) + " " + x if x.startswith("- ") else x
        o["y"] = _rsh(f"{h}_x", p["s"])
    elif op.kind == "mul":
        # the product register keeps only the bits the rounding shift and the saturation
        # read: none above the product's width (32 + bits of a literal factor), none below
        # bit s - 1, as rsh(p, s) = rsh(floor(p / 2^(s-1)), 1) for s >= 1
        full = 32 + abs(p["lit"]).bit_length() if "lit" in p else 64
        drop = min(max(p["s"] - 1, 0), full - 2)
        pw = full - drop
        o.update(a=src[0], b=lit(p["lit"], 32) if "lit" in p else f"$signed({src[1]})", pw=pw,
                 lut=dsp is not None and op.id not in dsp,
                 # the register sign-extended to 64 bits, spelt out (Verilator -Wall: no implicit widening)
                 pw_x=f"{{{{{64 - pw}{{{h}_p[{pw - 1}]}}}}, {h}_p}}" if pw < 64 else f"{h}_p",
                 sel=f"{full - 1}:{drop}", y=_rsh(f"{h}_pw", p["s"] - drop))
    elif op.kind == "tsel":
        sv, cv, q = src
        if p["which"] == "sin":
            o["sel"] = f"{q} == 2'd0 ? {sv} : {q} == 2'd1 ? {cv} : {q} == 2'd2 ? 32'd0 - {sv} : 32'd0 - {cv}"
        else:
            o["sel"] = f"{q} == 2'd0 ? {cv} : {q} == 2'd1 ? 32'd0 - {sv} : {q} == 2'd2 ? 32'd0 - {cv} : {sv}"
        o["y"] = _rsh(f"sx({h}_s)", p["sh"])
    elif op.kind in ("div", "sqrt"):
        o["n"] = lit(p["nlit"], 64) if "nlit" in p else _align(src[0], p["k"])
        o["d"] = src[-1]
    elif op.kind == "tred":
        o.update(kw=p["kw"], x=src[0], sh=lit(p["sh"], 8))
    else:
        raise AssertionError(op.kind)
    return o


def _pipelined_outputs(hp: HwProgram, ps: PipeSchedule) -> list[tuple[str, str]]:
    """Per output: (its value, the strobe that says it is valid)."""
    outputs = []
    for o, c in zip(hp.outputs, ps.out_cycle):
        v = lit(o[1], 32) if o[0] == "c" else _tap(ps, o, c)
        # an output computed in cycle c is valid when the vector accepted c cycles ago is
        outputs.append((v, "ap_done" if c == ps.latency else "ap_start" if c == 0 else f"vld[{c}]"))
    return outputs


def render_pipelined(hp: HwProgram, ps: PipeSchedule, ctx: VerilogContext, top: str, plan: DelayPlan,
                     dsp: set[int] | None = None) -> str:
    """dsp: the ids of the products built as `*` (DSP blocks); the others mul_lut (None: all `*`)."""
    flags: dict[int, list[str]] = {}
    ops: list[dict] = []
    for op in hp.ops:
        t = ps.start[op.id]
        o = _pipelined_op(op, [_tap(ps, s, t) for s in op.srcs], t, dsp)
        ops.append(o)
        if op.flag:
            flags.setdefault(t + ps.lat[op.kind], []).append(f"{o['h']}_o")
    delays, memories = _delay_lines(hp, plan)
    return render_context("verilog/pipelined.v.j2", VerilogPipelinedContext(
        _head(ctx, top, hp, "pipelined", any(o.get("lut") for o in ops)), ops=ops, delays=delays, memories=memories,
        pointer_bits=plan.pointer_bits, L=ps.latency, flags=flags, outputs=_pipelined_outputs(hp, ps)))


# per operator class of the shared variant: the fields a unit's input multiplexer sets
# each cycle (name, width). A shift field (width 0 here) is an index into the amounts its unit's
# operations use (its width set per unit): the unit shifts by a multiplexer of those
# constant shifts, not by a barrel shifter. go: 1 in an iterative unit's issue cycles.
UNIT_FIELDS = {
    "mul": [("a", 32), ("b", 32), ("s", 0)],
    "add": [("a", 32), ("b", 32), ("sha", 0), ("shb", 0), ("na", 1), ("nb", 1), ("ub", 1), ("lit", 64), ("s", 0),
            ("tq", 1), ("qd", 2), ("w", 1)],
    "div": [("go", 1), ("a", 32), ("d", 32), ("k", 0), ("ul", 1), ("lit", 64)],
    "sqrt": [("go", 1), ("a", 32), ("k", 0)],
    "tred": [("go", 1), ("x", 32), ("sh", 0)],
}
_SIGNED = ()


def _shift_mux(name: str, v: str, idx: str, amounts: list[int], width: int = 64) -> list[str]:
    """Declarations of `name` = rsh(v, amounts[idx]) as a multiplexer of constant shifts (v: a
    signed 64-bit expression): one adder adds the rounding half of the selected amount
    (name_r), the shifts themselves are wires."""
    if len(amounts) == 1:
        return [f"wire signed [{width - 1}:0] {name} = {_rsh(v, amounts[0])};"]
    w = (len(amounts) - 1).bit_length()

    def mux(parts):
        expr = parts[-1]
        for i in range(len(parts) - 2, -1, -1):
            expr = f"({idx} == {w}'d{i} ? {parts[i]} : {expr})"
        return expr
    lines = []
    if any(s > 0 for s in amounts):
        lines.append(f"wire signed [{width - 1}:0] {name}_r = {v} + {mux([lit(1 << (s - 1) if s > 0 else 0, 64) for s in amounts])};")
        v = f"{name}_r"
    return lines + [f"wire signed [{width - 1}:0] {name} = "
                    + mux([f"({v} >>> {s})" if s > 0 else f"({v} <<< {-s})" if s < 0 else v for s in amounts]) + ";"]


def _sbits(v: int) -> int:
    """Bits of v as a two's complement number."""
    return (v if v >= 0 else -v - 1).bit_length() + 1


_SWAP = {"mul": (("a", "b"),), "add": (("a", "b"), ("sha", "shb"), ("na", "nb"))}


def _balance(c: str, issued: list) -> list:
    """Operands of commutative operations (a product, a sum of two terms with their shifts and
    signs) swapped so that each operand field reads from fewer sources: the unit's input
    multiplexers shrink. Greedy passes in issue order until none helps; deterministic."""
    pairs = _SWAP.get(c)
    if not issued or pairs is None:
        return issued
    rows = [dict(a) for _, _, a in issued]
    can = [all(x in r and y in r for x, y in pairs) for r in rows]
    use = {f: {} for f in ("a", "b")}
    for r in rows:
        for f in ("a", "b"):
            if f in r:
                use[f][r[f]] = use[f].get(r[f], 0) + 1

    def gain(r):  # change of the number of distinct sources if r's a and b swap
        a, b = r["a"], r["b"]
        if a == b:
            return 0
        before = (use["a"][a] == 1) + (use["b"][b] == 1)
        after = (use["a"].get(b, 0) == 0) + (use["b"].get(a, 0) == 0)
        return after - before
    changed = True
    while changed:
        changed = False
        for k, r in enumerate(rows):
            if can[k] and gain(r) < 0:
                for f, v in (("a", r["a"]), ("b", r["b"])):
                    use[f][v] -= 1
                for x, y in pairs:
                    r[x], r[y] = r[y], r[x]
                for f, v in (("a", r["a"]), ("b", r["b"])):
                    use[f][v] = use[f].get(v, 0) + 1
                changed = True
    return [(t, i, list(r.items())) for (t, i, _), r in zip(issued, rows)]


def _unit_inputs(op, s: list[str]) -> list[tuple[str, str]]:
    """(field, value) of one op issued on its class's unit; s: its operands' sources."""
    p, c = op.p, op.kind
    # shift fields carry the amount (an int: rsh(value, amount)), render_shared indexes them;
    # lit carries the int, render_shared sizes the field
    if c == "mul":
        return [("a", s[0]), ("b", lit(p["lit"], 32) if "lit" in p else s[1]), ("s", p["s"])]
    if c == "add":
        a = [("a", s[0]), ("sha", -p["sh"][0]), ("na", "1'b1" if p["sign"][0] < 0 else "1'b0")]
        if len(s) > 1:
            a += [("b", s[1]), ("shb", -p["sh"][1]), ("nb", "1'b1" if p["sign"][1] < 0 else "1'b0"),
                  ("ub", "1'b1")]
        else:
            a += [("ub", "1'b0")]
        return a + [("lit", p["lit"]), ("s", p["s"]), ("tq", "1'b0")]
    if c == "div":
        if "nlit" in p:
            return [("go", "1'b1"), ("d", s[0]), ("ul", "1'b1"), ("lit", p["nlit"])]
        return [("go", "1'b1"), ("a", s[0]), ("d", s[1]), ("k", -p["k"]), ("ul", "1'b0")]
    if c == "sqrt":
        return [("go", "1'b1"), ("a", s[0]), ("k", -p["k"])]
    if c == "tred":
        return [("go", "1'b1"), ("x", s[0]), ("sh", p["sh"])]
    # tsel on an adder (schedule.UNIT_CLASS): a = sv, b = cv, the quadrant picks one and its sign
    return [("a", s[0]), ("b", s[1]), ("qd", s[2]), ("w", "1'b1" if p["which"] == "cos" else "1'b0"), ("tq", "1'b1"),
            ("sha", 0), ("na", "1'b0"), ("ub", "1'b0"), ("lit", 0), ("s", p["sh"])]


def render_shared(hp: HwProgram, ss: SharedSchedule, ctx: VerilogContext, top: str, dsp: int | None = None) -> str:
    """The shared-operator module: each unit's issue table and datapath, the register writes.
    dsp: multiplier units built as `*` (DSP blocks), the first ones; the others mul_lut (None: all)."""
    C = ss.cycles
    pcw = max(1, C.bit_length())
    names = [f"r{i}" for i in range(ss.n_regs)]
    regs = [", ".join(names[i:i + 16]) for i in range(0, len(names), 16)]
    computed = sorted({k for r, k in ss.out_of.items()})
    regs += [", ".join(f"out_{k}_r" for k in computed[i:i + 16]) for i in range(0, len(computed), 16)]

    by_unit: dict[tuple, list] = {}
    for op in hp.ops:
        by_unit.setdefault((unit_class(op.kind), ss.unit[op.id]), []).append(op)
    # a unit the schedule issues nothing on is not built (its results would be read nowhere)
    units = [dict(_shared_unit(hp, ss, c, u, by_unit), lut=c == "mul" and dsp is not None and u >= dsp)
             for c in ss.units for u in range(ss.units[c]) if (c, u) in by_unit]
    writes, flagged = _shared_writes(hp, ss)
    outputs = []
    for o in hp.outputs:
        outputs.append(lit(o[1], 32) if o[0] == "c" else f"in_{o[1]}" if o[0] == "in" else f"out_{ss.out_of[o]}_r")
    return render_context("verilog/shared.v.j2", VerilogSharedContext(
        _head(ctx, top, hp, "shared", any(u["lut"] for u in units)), pcw=pcw, C=C, regs=regs, units=units,
        writes=[(t, " ".join(writes[t])) for t in sorted(writes)],
        flagged=[(t, " | ".join(flagged[t])) for t in sorted(flagged)], outputs=outputs))


def _bus(hp: HwProgram, ss: SharedSchedule, ref) -> str:
    """The output wire of the unit that computes ref."""
    op = hp.ops[ref[1]]
    u = f"{unit_class(op.kind)}{ss.unit[op.id]}"
    return f"{u}_q" if ref[2] == 0 else f"{u}_q{ref[2]}"


def _src_expr(hp: HwProgram, ss: SharedSchedule, ref, t: int) -> str:
    """Where an operand is read at cycle t: an input, a unit's bus, an output or a pooled register."""
    s = ss.source(ref, t)
    if s[0] == "in":
        return f"in_{s[1]}"
    if s[0] == "bus":
        return _bus(hp, ss, s[1])
    if s[0] == "out":
        return f"out_{s[1]}_r"
    narrow = hp.ops[ref[1]].widths[ref[2]] < 32  # 2-bit quadrants sit in 32-bit registers
    return f"r{s[1]}[1:0]" if narrow else f"r{s[1]}"


def _shared_unit(hp: HwProgram, ss: SharedSchedule, c: str, u: int, by_unit: dict) -> dict:
    """One unit's template values: its field settings per issue cycle and its datapath."""
    n = f"{c}{u}"
    issued = _balance(c, [(ss.issue[op.id], op.id,
                           _unit_inputs(op, [_src_expr(hp, ss, r, ss.issue[op.id]) for r in op.srcs]))
                          for op in by_unit.get((c, u), [])])
    lits = [v for _, _, a in issued for f, v in a if f == "lit"]
    litw = max([_sbits(v) for v in lits] + [1])
    shifts = [f for f, w in UNIT_FIELDS[c] if w == 0]
    amounts = {f: sorted({v for _, _, a in issued for g, v in a if g == f} or {0}) for f in shifts}
    width = {f: max(1, (len(v) - 1).bit_length()) for f, v in amounts.items()}
    cases = []
    for t, i, a in issued:
        a = [(f, f"{width[f]}'d{amounts[f].index(v)}" if f in shifts else lit(v, litw) if f == "lit" else v)
             for f, v in a]
        cases.append((t, " ".join(f"{n}_{f} = {v};" for f, v in a), i))
    am = {f: amounts.get(f, [0]) for f in ("s", "sha", "shb", "k")}
    ex, pd = _unit_datapath(c, n, am, width, litw)
    return {"n": n, "cls": c, "module": OPS[c].verilog and OPS[c].verilog + "_iter", "cases": cases, "ex": ex,
            "pd": pd,
            "fields": [(f, litw if f == "lit" else width.get(f, w), f in _SIGNED)
                       for f, w in UNIT_FIELDS[c]],
            "kw": max(op.p["kw"] for op in by_unit[(c, u)]) if c == "tred" else None}


def _unit_datapath(c: str, n: str, am: dict, width: dict, litw: int) -> tuple[list[str], int]:
    """(Verilog lines after unit n's operand fields, the product's dropped low bits) for class c."""
    sx = f"sx({n}_a)"
    # exact widths: |a|, |b| < 2^31 shifted left by at most la, lb; |lit| < 2^(litw - 1);
    # the rounding add and a left shift by up to ls after it
    la, lb, ls = (max(0, -min(am[f])) for f in ("sha", "shb", "s"))
    wx = max(32 + la, 32 + lb, litw) + 2
    wy = max(wx, max(am["s"])) + 1 + ls
    # the product register drops the bits below the smallest rounding shift's half
    pd = max(min(am["s"]) - 1, 0) if c == "mul" else 0
    ex = {"mul": _shift_mux(f"{n}_y", f"{n}_p", f"{n}_s1", [a - pd for a in am["s"]],
                            min(64, 65 - pd + max(0, pd - min(am["s"])))),
          "add": [f"wire [1:0]  {n}_k = {n}_qd + {{1'b0, {n}_w}};",
                  f"wire [31:0] {n}_ae = ({n}_tq & {n}_k[0]) ? {n}_b : {n}_a;",
                  f"wire        {n}_ne = {n}_tq ? {n}_k[1] : {n}_na;"]
          + _shift_mux(f"{n}_ta", f"sx({n}_ae)", f"{n}_sha", am["sha"], 32 + la)
          + _shift_mux(f"{n}_tbs", f"sx({n}_b)", f"{n}_shb", am["shb"], 32 + lb)
          + [f"wire signed [{31 + lb}:0] {n}_tb = {n}_ub ? {n}_tbs : {32 + lb}'sd0;",
             f"wire signed [{wx - 1}:0] {n}_x = ({n}_ne ? -{n}_ta : {n}_ta) + ({n}_nb ? -{n}_tb : {n}_tb) "
             f"+ $signed({n}_lit);",
             # the sum is registered before its rounding shift and saturation: two short
             # cycles (schedule.SHARED_LATENCY) instead of one long one
             f"reg  signed [{wx - 1}:0] {n}_xr;",
             f"/* verilator lint_off UNUSEDSIGNAL */ reg  [{width.get('s', 1) - 1}:0] {n}_s1; "
             "/* verilator lint_on UNUSEDSIGNAL */",  # not read with one rounding shift
             f"always @(posedge ap_clk) begin {n}_xr <= {n}_x; {n}_s1 <= {n}_s; end"]
          + _shift_mux(f"{n}_y", f"{n}_xr", f"{n}_s1", am["s"], min(wy, 64)),
          "div": _shift_mux(f"{n}_an", sx, f"{n}_k", am["k"]),
          "sqrt": _shift_mux(f"{n}_n", sx, f"{n}_k", am["k"])}.get(c, [])
    return ex, pd


def _shared_writes(hp: HwProgram, ss: SharedSchedule) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """Per cycle: the results that go into registers, and the units whose overflow flag counts."""
    writes: dict[int, list[str]] = {}
    flagged: dict[int, list[str]] = {}
    for op in hp.ops:
        for j in range(op.nres):
            ref = ("h", op.id, j)
            r = ss.ready[ref]
            if ref in ss.out_of:  # one register per value, shared by the outputs that are it
                writes.setdefault(r, []).append(f"out_{ss.out_of[ref]}_r <= {_bus(hp, ss, ref)};")
            elif ref in ss.reg_of:
                v = _bus(hp, ss, ref) if op.widths[j] == 32 else f"{{30'd0, {_bus(hp, ss, ref)}}}"
                writes.setdefault(r, []).append(f"r{ss.reg_of[ref]} <= {v};")
        if op.flag:
            flagged.setdefault(ss.ready[("h", op.id, 0)], []).append(f"{unit_class(op.kind)}{ss.unit[op.id]}_o")
    return writes, flagged
