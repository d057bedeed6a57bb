"""HLS-ready C (Vitis HLS conventions) from a schedule and its fixed-point plan.

The top function `<function>_hw(int32_t in_0, ..., int32_t *out_0, ...)` carries the
interface pragmas (ap_ctrl_hs on the return, ap_none on every scalar input, ap_vld on
every output pointer) and `pipeline II=1`; its body is the c-fixed target's, statement
for statement (the same shifts, literals and rounding). The helpers are the c-fixed
ones (fixed.c.j2: saturation, rounding shift, negation, sin/cos), except division and
square root, which are rewritten with loops of fixed trip count (unrolled) computing the
same integers, the algorithms of the RTL operators. `<function>(in, out)` wraps the top
function in the C ABI of the other targets, so the host model, the firmware harness and
a C simulation call it alike; the port names are those Vitis HLS gives the RTL, the same
as mbforge's Verilog kernel (render.verilog).
"""
from __future__ import annotations

from ..passes.fixedpoint import FixedProgram
from ..schedule import Schedule
from .fixed import trig_constants
from .templates import render_template


def _lit64(v: int) -> str:
    return f"INT64_C({v})"


def render_hls(sched: Schedule, fx: FixedProgram, ctx: dict) -> dict[str, str]:
    p = ctx["prefix"]
    slot = sched.slot
    by_dst = {ins.dst: ins for ins in fx.instrs}
    n_in, n_out = len(fx.tape.inputs), len(fx.tape.outputs)
    top = f"{ctx['function']}_hw"

    def var(o) -> str:
        kind, v = o
        return f"w{slot[v]}" if kind == "t" else f"in_{v}"

    def wide(o, shift: int) -> str:
        x = f"(int64_t){var(o)}"
        if shift == 0:
            return x
        if shift > 0:
            return f"{x} * ((int64_t)1 << {shift})"
        return f"{p}_rsh({x}, {-shift})"

    body: list[str] = []
    for k, o in sched.direct:
        if o[0] == "c":
            body.append(f"*out_{k} = INT32_C({round(o[1] * 2.0 ** fx.out_bits[k])});")
        else:
            body.append(f"*out_{k} = {var(o)};")
    used = {"div": False, "sqrt": False, "trig": False}
    for ins in sched.order:
        f = by_dst[ins.dst]
        pr = f.params
        op = f.op
        d = f"w{slot[ins.dst[0]]}"
        if op in ("add", "sub"):
            terms = [_lit64(v) if kind == "lit" else wide(o, v) for o, (kind, v) in zip(f.args, pr["align"])]
            sign = " + " if op == "add" else " - "
            body.append(f"{d} = {p}_sat({p}_rsh({sign.join(terms)}, {pr['s']}), &ovf);")
        elif op == "neg":
            body.append(f"{d} = {p}_neg({var(f.args[0])}, &ovf);")
        elif op == "mul":
            if "lit" in pr:
                x = f.args[1] if pr["const_first"] else f.args[0]
                prod = f"(int64_t){var(x)} * INT32_C({pr['lit']})"
            else:
                prod = f"(int64_t){var(f.args[0])} * {var(f.args[1])}"
            body.append(f"{d} = {p}_sat({p}_rsh({prod}, {pr['s']}), &ovf);")
        elif op == "div":
            used["div"] = True
            num, den = f.args
            k = pr["k"]
            if "lit" in pr:
                n = _lit64(pr["lit"]) if k == 0 else (f"{_lit64(pr['lit'])} * ((int64_t)1 << {k})" if k > 0
                                                      else f"{p}_rsh({_lit64(pr['lit'])}, {-k})")
            else:
                n = wide(num, k)
            body.append(f"{d} = {p}_div({n}, {var(den)}, &ovf);")
        elif op == "sqrt":
            used["sqrt"] = True
            body.append(f"{d} = {p}_sqrt({wide(f.args[0], pr['k'])}, &ovf);")
        elif op in ("sin", "cos", "sincos"):
            used["trig"] = True
            body.append(f"{p}_sincos({var(f.args[0])}, {pr['fx']}, &ts, &tc);")
            picks = {"sin": ["ts"], "cos": ["tc"], "sincos": ["ts", "tc"]}[op]
            for dst, src, fo in zip(ins.dst, picks, pr["fo"]):
                body.append(f"w{slot[dst]} = {p}_sat({p}_rsh({src}, {30 - fo}), &ovf);")
        else:  # the planner refuses anything else first
            raise AssertionError(op)
        for dd in ins.dst:
            for k in sched.stores.get(dd, ()):
                body.append(f"*out_{k} = w{slot[dd]};")

    names = [f"w{i}" for i in range(sched.n_slots)]
    decls = [f"int32_t {', '.join(names[i:i + 12])};" for i in range(0, len(names), 12)]
    decls.append("uint32_t ovf = 0u;")
    if used["trig"]:
        decls.append("int32_t ts, tc;")
    params = ", ".join([f"int32_t in_{k}" for k in range(n_in)] + [f"int32_t *out_{k}" for k in range(n_out)])
    call = ", ".join([f"in[{k}]" for k in range(n_in)] + [f"&out[{k}]" for k in range(n_out)])
    pragmas = ["interface mode=ap_ctrl_hs port=return"]
    pragmas += [f"interface mode=ap_none port=in_{k}" for k in range(n_in)]
    pragmas += [f"interface mode=ap_vld port=out_{k}" for k in range(n_out)]
    pragmas.append("pipeline II=1")
    support = render_template("c/fixed.c.j2", p=p, div=False, sqrt=False,
                              trig=trig_constants() if used["trig"] else None)
    ops = render_template("hls/ops.c.j2", p=p, div=used["div"], sqrt=used["sqrt"])
    common = dict(ctx, top=top, params=params)
    c_text = render_template("hls/kernel.c.j2", **common, support=support, ops=ops, pragmas=pragmas,
                             decls=decls, body=body, call=call)
    h_text = render_template("hls/kernel.h.j2", **common)
    return {ctx["header"]: h_text, ctx["source"]: c_text}
