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

from ..analysis.fixedpoint import FixedProgram
from ..lower.schedule import Schedule
from .fixed.c import envelope_checks, fixed_statements
from .fixed.ops import trig_constants
from .context import HlsHeaderContext, HlsSourceContext, KernelContext
from .render import render_context, render_template


def render_hls(sched: Schedule, fx: FixedProgram, ctx: KernelContext) -> dict[str, str]:
    p = ctx.prefix
    n_in, n_out = len(fx.tape.inputs), len(fx.tape.outputs)
    top = f"{ctx.function}_hw"
    decls, body, used = fixed_statements(sched, fx, p, lambda k: f"in_{k}", lambda k: f"*out_{k}")
    params = ", ".join([f"int32_t in_{k}" for k in range(n_in)] + [f"int32_t *out_{k}" for k in range(n_out)])
    call = ", ".join([f"in[{k}]" for k in range(n_in)] + [f"&out[{k}]" for k in range(n_out)])
    pragmas = ["interface mode=ap_ctrl_hs port=return"]
    pragmas += [f"interface mode=ap_none port=in_{k}" for k in range(n_in)]
    pragmas += [f"interface mode=ap_vld port=out_{k}" for k in range(n_out)]
    pragmas.append("pipeline II=1")
    support = render_template("c/fixed.c.j2", p=p, div=False, sqrt=False, m0=False,
                              trig=trig_constants() if used["trig"] else None)
    ops = render_template("hls/ops.c.j2", p=p, div=used["div"], sqrt=used["sqrt"])
    head = HlsHeaderContext(ctx, top=top, params=params)
    checks = envelope_checks(ctx.envelope, fx.in_bits, lambda k: f"in_{k}")
    source = HlsSourceContext(head, support=support, ops=ops, pragmas=pragmas, checks=checks, decls=decls,
                              body=body, call=call)
    return {ctx.header: render_context("hls/kernel.h.j2", head), ctx.source: render_context("hls/kernel.c.j2", source)}
