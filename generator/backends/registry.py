"""The shipped backends, one per target, registered by name in the targets' order.

c-double and c-float32 are C dialects (backends.c); c-fixed, c-fixed-m0, hls-c and verilog print one
fixed-point plan (analysis.fixedpoint), so they share its analysis and status codes (1:
saturated; 2: an input outside its envelope, checked first, as every C target does).
The renderers are called through their own signatures; this module only adapts them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.fixerror import bound_over_boxes
from ..analysis.floaterror import float32_bounds, float32_bounds_boxes, float32_forms_boxes
from ..analysis.ranges import BoxRanges, analyse_domain
from ..lower.schedule import best_schedule
from ..reals import REALS
from .base import STATUS_ENVELOPE, Analysis, Backend, FixedAnalysis, Float32Analysis, GenerateError, Options, Rendered, option, register
from .c import DIALECTS, render_c
from .context import KernelContext
from .fixed.c import render_fixed
from .hls import render_hls
from .rtl.lower import CONST_PRODUCTS
from .rtl.schedule import DELAY_LINES, MEMORY_MIN
from .rtl.target import render_rtl


def output_magnitudes(tape, hull) -> list[float | None]:
    """max |value| of each output over the domain's enclosure (None where it is unbounded)."""
    mags = [hull.of(o).mag for o in tape.outputs]
    return [m if math.isfinite(m) else None for m in mags]


def _c_files(files: dict[str, str], ctx: KernelContext) -> Rendered:
    return Rendered(files, [ctx.source], [ctx.header])


class CBackend(Backend):
    """Straight-line C in a floating-point dialect."""

    def check(self, sched) -> None:
        DIALECTS[self.name].check(sched)

    def analyse(self, tape, boxes) -> Analysis:
        return Analysis()

    def render(self, sched, analysis, ctx, options) -> Rendered:
        return _c_files(render_c(sched, DIALECTS[self.name], ctx), ctx)


@register
class DoubleBackend(CBackend):
    name = "c-double"
    real = DIALECTS[name].real
    use = "host reference"
    # longer chains suit the host's 14 allocated registers (gcc -O2 x86-64, Stewart joint
    # kernel, callgrind instructions per call: chain 3: 13,033, 4: 12,883, 6: 12,676, 8: 12,673)
    schedule_chain = 8


@dataclass(frozen=True)
class Float32Options(Options):
    # Fewer instructions and bytes, the same bits; cycles on a real Cortex-M4 about even:
    # its TRM gives VMLA 3 cycles against 1 + 1 for VMUL and VADD, while code run from
    # flash waits for its fetch (STM32F4 at 168 MHz: 16 bytes per 6 cycles), which the
    # 4-byte VMLA halves against its pair. No board here to measure cycles on.
    multiply_accumulate: str = option(
        "on", "on: a product whose only reader is an add or sub computed with it as one chained "
        "multiply-accumulate on 32-bit ARM with an FPU (VMLA, VMLS, VNMLS: the same bits, fewer instructions, "
        "3 cycles each on a Cortex-M4); off: separate multiplications and additions", choices=("on", "off"))

    @property
    def fuse(self) -> bool:
        return self.multiply_accumulate == "on"


@register
class Float32Backend(CBackend):
    name = "c-float32"
    real = DIALECTS[name].real
    use = "Cortex-M4F / M7 (single-precision FPU), bit-exact with the host build"
    Options = Float32Options

    def schedule(self, tape, options):
        # the allocation is what arm-none-eabi-gcc does with it: choose among orders by it
        d = DIALECTS[self.name]
        if options.schedule != "pressure":
            return super().schedule(tape, options)
        return best_schedule(tape, d.registers, d.constants, options.fuse)

    def render(self, sched, analysis, ctx, options) -> Rendered:
        return _c_files(render_c(sched, DIALECTS[self.name], ctx, fuse=options.fuse), ctx)

    def notes(self, analysis):
        return ["Compile with -ffp-contract=off -fno-math-errno so that every machine rounds alike.",
                "Error bounds (+-) hold against double at the unrounded input (its rounding to float included)."]

    def analyse(self, tape, boxes) -> Float32Analysis:
        # outputs downstream of a divisor whose range reaches 0 get no finite bound.
        # Box by box (one vectorised pass), the largest over the boxes; with one box, its own
        per_box: list = []
        hull = analyse_domain(tape, boxes, strict=False, per_box=per_box)
        bounds = float32_bounds(tape, hull)
        if len(per_box) > 1:
            vec = BoxRanges.from_list(tape, per_box)
            bounds = [min(a, b) for a, b in zip(bounds, float32_bounds_boxes(tape, vec))]
        else:
            vec = BoxRanges.from_list(tape, per_box)
        bounds = [min(a, b) for a, b in zip(bounds, float32_forms_boxes(tape, vec))]
        return Float32Analysis(out_error=[b if math.isfinite(b) else None for b in bounds],
                               out_magnitude=output_magnitudes(tape, hull))


class FixedBackend(Backend):
    """A printer of the fixed-point plan: Q formats chosen over the domain's boxes."""
    real = REALS["int32"]
    status = {"1": ("saturated: an intermediate value left its format; outputs computed, "
                    "the error bound does not hold (an input off the consistent states)",
                    "if an intermediate value saturated: outputs computed, their error bound does not hold"),
              "2": STATUS_ENVELOPE}

    def notes(self, analysis):
        return ["value = int32 / 2**frac_bits; formats and error bounds are in manifest.json",
                "Error bounds (+-) hold against double at the unrounded input (its rounding to the Q format included)."]

    def analyse(self, tape, boxes) -> FixedAnalysis:
        boxes = [list(b) for b in boxes]
        for k, a in enumerate(tape.inputs):  # no Q format holds an unbounded input
            if not all(math.isfinite(float(lo)) and math.isfinite(float(hi)) for lo, hi in (b[k] for b in boxes)):
                raise GenerateError(f"input {getattr(a.value, 'name', a)}: its range is unbounded; target "
                                    f"{self.name} (fixed point) needs a finite range: declare one on the model")
        per_box: list = []
        hull = analyse_domain(tape, boxes, per_box=per_box)
        fx = bound_over_boxes(tape, hull, per_box)
        return FixedAnalysis(plan=fx, in_frac_bits=fx.in_bits, out_frac_bits=fx.out_bits, out_error=fx.out_error,
                             out_magnitude=output_magnitudes(tape, hull))


@register
class FixedCBackend(FixedBackend):
    name = "c-fixed"
    use = "cores without an FPU (Cortex-M0/M3): Q formats and error bounds"
    m0 = False  # products and divisions with Cortex-M0 primitives (backends.fixed.c._M0Exprs)

    def render(self, sched, analysis: FixedAnalysis, ctx, options) -> Rendered:
        return _c_files(render_fixed(sched, analysis.plan, ctx, self.real, self.name, m0=self.m0), ctx)


@register
class FixedM0Backend(FixedCBackend):
    """c-fixed's plan (Q formats, bounds, bits) printed with Cortex-M0 primitives: only
    how products and divisions are computed differs (backends.fixed.c._M0Exprs)."""
    name = "c-fixed-m0"
    use = "c-fixed for the Cortex-M0/M0+ (no 64-bit product, no divider): the same bits, fewer instructions"
    m0 = True


@register
class HlsBackend(FixedBackend):
    name = "hls-c"
    use = "HLS-ready C (Vitis HLS conventions), bit-exact with c-fixed"

    def render(self, sched, analysis: FixedAnalysis, ctx, options) -> Rendered:
        return _c_files(render_hls(sched, analysis.plan, ctx), ctx)


SHARED_UNITS_MAX = 256


@dataclass(frozen=True)
class VerilogOptions(Options):
    variant: str = option("pipelined", "pipelined: one vector per cycle; shared: a few operators reused; "
                          "microcode: one operator per class under a microcode ROM, operands from a register file "
                          "in block RAM", choices=("pipelined", "shared", "microcode"))
    # a shared design of more units than a kernel has operations is a pipelined one spelled
    # long (--multipliers 1000 wrote 2.2 MB of Verilog for 33 multiplications)
    multipliers: int = option(4, "multipliers of the shared variant", kind=int, minimum=1, maximum=SHARED_UNITS_MAX)
    adders: int | None = option(None, "adders of the shared variant", kind=int, minimum=1, maximum=SHARED_UNITS_MAX,
                                default_text="default: as multipliers")
    # the iterative divider takes 19 cycles a division: one serialises a kernel's divisions
    dividers: int = option(1, "dividers of the shared variant (at most one per division)", kind=int, minimum=1,
                           maximum=SHARED_UNITS_MAX)
    # yosys maps every `*` to DSP blocks; a part with few of them needs the rest in LUTs,
    # and a fit report that counts them there (rtl.verilog.dsp_products)
    dsp: int | None = option(None, "multipliers built for DSP blocks (32 x 32 products; the rest as LUT multipliers)",
                             kind=int, minimum=0, maximum=100000, default_text="default: all")
    outputs: str = option("early", "pipelined variant: early: each output on its port (out_k_ap_vld) in the cycle "
                          "it is computed, fewer registers; aligned: all in the ap_done cycle",
                          choices=("early", "aligned"))
    # memory: a pipeline's long delay lines as ring buffers in block RAM (few flip-flops, some
    # block RAMs); ffs: every delay line a shift register (no memories, for a device without them)
    delay_lines: str = option("memory", "pipelined variant: memory: delay lines of delay_memory_min cycles or more "
                              "as ring buffers in memories (block RAM); ffs: all shift registers of flip-flops",
                              choices=DELAY_LINES)
    delay_memory_min: int = option(MEMORY_MIN, "pipelined variant, delay_lines=memory: the shortest delay line segment "
                                   "put in a memory (cycles)", kind=int, minimum=2)
    # a product by +-2^k is a shift, by +-2^p +-2^q a shift-add: no multiplier (rtl.lower.shift_constants)
    const_products: str = option("auto", "products by a literal: shift-add: +-2^k as shifts and +-2^p +-2^q "
                                 "as shift-adds; shift: only +-2^k; multiply: all as multipliers; auto: shift-add "
                                 "pipelined, multiply shared and microcode (fewer LUTs there)",
                                 choices=CONST_PRODUCTS)


@register
class VerilogBackend(FixedBackend):
    name = "verilog"
    use = "pipelined or resource-shared RTL, bit-exact with c-fixed"
    Options = VerilogOptions

    def render(self, sched, analysis: FixedAnalysis, ctx, options) -> Rendered:
        files, sources, headers = render_rtl(analysis.plan, sched, ctx, options)
        return Rendered(files, sources, headers)
