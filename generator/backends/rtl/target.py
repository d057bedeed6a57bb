"""The `verilog` target: a kernel's fixed-point program as one of three variants
(pipelined, shared: rtl/verilog.py; microcode: rtl/microcode.py), with rtl.json (the
description: latency, interval, units, registers) and the <top>.vh header.

Its own module so that the variants' renderers, which share pieces of rtl/verilog.py,
are imported by it and never import it back.
"""
from __future__ import annotations

import json
from collections import Counter

from ..context import KernelContext, VerilogContext
from ..fixed.c import envelope_words
from ..fixed.ops import LATENCY, HwProgram
from .microcode import default_micro_units, render_microcode, schedule as micro_schedule
from .schedule import SHARED_LATENCY, default_units, delay_plan, pipeline, shared, unit_class
from .verilog import _ops_file, dsp_products, params_header, render_pipelined, render_shared


def render_verilog(hp: HwProgram, ctx: VerilogContext, options) -> tuple[dict[str, str], dict]:
    """(files, rtl description) for the kernel; rtl.json holds the description. `options`:
    the verilog backend's resolved Options (variant, multipliers, adders), checked there."""
    o = {"variant": options.variant, "multipliers": options.multipliers, "adders": options.adders}
    top = f"{ctx.common.function}_hw"
    counts = hp.counts()
    desc = {"top": top, "variant": o["variant"], "n_in": hp.n_in, "n_out": len(hp.outputs),
            "inputs": [f"in_{k}" for k in range(hp.n_in)], "outputs": [f"out_{k}" for k in range(len(hp.outputs))],
            "protocol": "ap_ctrl_hs", "hw_ops": counts,
            "products_as_shifts": sum(op.kind == "add" and op.p.get("form") == "mul" for op in hp.ops), "operator_latency": dict(LATENCY if o["variant"] == "pipelined" else SHARED_LATENCY)}
    if o["variant"] == "pipelined":
        ps = pipeline(hp, outputs=options.outputs)
        plan = delay_plan(hp, ps, options.delay_lines, options.delay_memory_min)
        dsp = dsp_products(hp, options.dsp)
        text = render_pipelined(hp, ps, ctx, top, plan, None if options.dsp is None else dsp)
        # delay_line_bits: every bit of delay the schedule needs; of those, delay_line_ff_bits
        # are flip-flops (the counter of the memories included), the rest in memories
        desc.update(latency=ps.latency, interval=1, critical_path=ps.latency, schedule_policy=ps.policy,
                    delay_line_bits=ps.delay_bits, delay_lines=plan.mode, delay_line_ff_bits=plan.ff_bits,
                    delay_line_memory_bits=plan.memory_bits,
                    delay_memories=[f"{m['depth']}x{m['width']}" for m in plan.memories],
                    outputs_timing=ps.outputs, output_cycles=ps.out_cycle,
                    multipliers=counts.get("mul", 0), dsp_multipliers=len(dsp),
                    lut_multipliers=counts.get("mul", 0) - len(dsp),
                    # an operator per operation (the shared variant's `units` are what it shares);
                    # no register file, so no `registers`: the delay lines' bits are above
                    units=dict(sorted(Counter(unit_class(op.kind) for op in hp.ops).items())))
    elif o["variant"] == "microcode":
        units = default_micro_units(hp, options.dividers)
        ms = micro_schedule(hp, units)
        text, figures = render_microcode(hp, ms, ctx, top, options.dsp)
        n_dsp = 1 if options.dsp is None else min(1, options.dsp)
        desc.update(latency=ms.cycles + 1, interval=ms.cycles + 2, cycles=ms.cycles, units=units,
                    multipliers=units.get("mul", 0), dsp_multipliers=min(units.get("mul", 0), n_dsp),
                    lut_multipliers=units.get("mul", 0) - min(units.get("mul", 0), n_dsp),
                    registers=ms.depth, **figures)
    else:
        units = default_units(hp, o["multipliers"], o["adders"], options.dividers)
        ss = shared(hp, units)
        text = render_shared(hp, ss, ctx, top, options.dsp)
        n_mul = units.get("mul", 0)
        n_dsp = n_mul if options.dsp is None else min(n_mul, options.dsp)
        desc.update(latency=ss.cycles + 1, interval=ss.cycles + 2, cycles=ss.cycles, units=units,
                    multipliers=n_mul, dsp_multipliers=n_dsp, lut_multipliers=n_mul - n_dsp, registers=ss.n_regs)
    files = {f"{top}.v": text, f"{top}_ops.v": _ops_file(ctx.common, top, hp, o["variant"]),
             f"{top}.vh": params_header(ctx.common, top, desc),
             "rtl.json": json.dumps(desc, indent=1, sort_keys=True) + "\n"}
    return files, desc


def render_rtl(fx, sched, ctx: KernelContext, options) -> tuple[dict[str, str], list[str], list[str]]:
    """The `verilog` target: (files, sources, headers) for the pipeline's manifest."""
    from .lower import const_products, lower_hw, shift_constants

    hp, _ = shift_constants(lower_hw(fx, order=sched.order), const_products(options.const_products, options.variant))
    files, desc = render_verilog(hp, VerilogContext(ctx, envelope_words(ctx.envelope, fx.in_bits)), options)
    top = desc["top"]
    return files, [f"{top}.v", f"{top}_ops.v"], [f"{top}.vh"]
