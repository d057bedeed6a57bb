"""Fixed-point C (int32 words) from a schedule and its fixed-point plan.

The op set (backends.fixed.ops) is printed op by op with the shifts and integer literals
the plan fixed, through small static helpers (saturation, rounding shift, division, square root, sin/cos) that
are emitted only when used. The kernel first compares every input word with its
envelope range in words (rounded outward, so every real input within the envelope,
rounded to nearest, passes) and returns 2 without computing anything if one is outside;
else it returns 1 if an intermediate value saturated (the error bound does not hold),
else 0.
"""
from __future__ import annotations

import math

from ...analysis.fixedpoint import FixedProgram
from ...lower.schedule import Schedule
from ..c import CHECK_COMMENT
from ...reals import Real
from ..context import CHeaderContext, CSourceContext, KernelContext
from ..render import render_context, render_template
from .ops import INT32_MAX, INT32_MIN, OPS, lower_hw, trig_constants

def _lit64(v: int) -> str:
    return f"INT64_C({v})"


def fixed_statements(sched: Schedule, fx: FixedProgram, p: str, in_ref, out_ref,
                     m0: bool = False) -> tuple[list[str], list[str], dict]:
    """The statements of a fixed-point kernel, shared by the c-fixed, c-fixed-m0 and HLS
    renderers: (declarations, body, which helpers are used). in_ref(k) / out_ref(k) spell
    the k-th input and output (`in[k]`, `out[k]` in c-fixed; `in_k`, `*out_k` in HLS C);
    m0: products and divisions through the Cortex-M0 helpers (_M0Exprs), the same bits.

    The statements print the op set (backends.fixed.ops) in the schedule's order, one op
    per statement through the helper its table entry names, except the sin/cos
    polynomial: its ops (marked "of" their reduction) are the sincos helper's body, in
    int64, and the reduction prints as one call of it."""
    hp = lower_hw(fx, order=sched.order)
    slot = sched.slot
    temp_of = {ref: t for t, ref in hp.temps.items()}
    ex = (_M0Exprs if m0 else _FixedExprs)(p, lambda ref: f"w{slot[temp_of[ref]]}" if ref[0] == "h" else in_ref(ref[1]))
    value = {"add": ex.add, "mul": ex.mul, "div": ex.div, "sqrt": ex.sqrt, "tsel": ex.tsel}
    body: list[str] = []
    for k, o in sched.direct:
        if o[0] == "c":
            body.append(f"{out_ref(k)} = INT32_C({round(o[1] * 2.0 ** fx.out_bits[k])});")
        else:
            body.append(f"{out_ref(k)} = {ex.var(('in', o[1]))};")  # direct: an input or a constant
    stores: list[int] = []  # temps whose stores are due (a sincos stores after both results)
    for i, op in enumerate(hp.ops):
        if "of" in op.p:
            continue
        if op.kind == "tred":
            body.append(f"{ex.helper['tred']}({ex.var(op.srcs[0])}, {29 - op.p['sh']}, &ts, &tc);")
        else:
            t = temp_of[("h", op.id, 0)]
            body.append(f"w{slot[t]} = {value[op.kind](op)};")
            stores.append(t)
        nxt = hp.ops[i + 1] if i + 1 < len(hp.ops) else None
        if op.kind == "tsel" and nxt is not None and nxt.kind == "tsel" and nxt.srcs[2] == op.srcs[2]:
            continue
        for t in stores:
            for k in sched.stores.get(t, ()):
                body.append(f"{out_ref(k)} = w{slot[t]};")
        stores = []

    counts = hp.counts()
    used = {"div": "div" in counts, "sqrt": "sqrt" in counts, "trig": "tred" in counts}
    names = [f"w{i}" for i in range(sched.n_slots)]
    decls = [f"int32_t {', '.join(names[i:i + 12])};" for i in range(0, len(names), 12)]
    decls.append("uint32_t ovf = 0u;")
    if used["trig"]:
        decls.append("int32_t ts, tc;")
    return decls, body, used


class _FixedExprs:
    """The C expression of each op kind (add, mul, div, sqrt, tsel) through the kernel's helpers;
    var(ref) spells an operand."""

    def __init__(self, p: str, var):
        self.p, self.var = p, var
        self.helper = {k: f"{p}_{o.c_helper}" for k, o in OPS.items()}
        self.rsh, self.sat = f"{p}_rsh", self.helper["add"]

    def wide(self, x: str, shift: int) -> str:
        """x as int64 multiplied by 2^shift (rounded if shift < 0)"""
        if shift == 0:
            return x
        if shift > 0:
            return f"{x} * ((int64_t)1 << {shift})"
        return f"{self.rsh}({x}, {-shift})"

    def add(self, op) -> str:
        pr, var = op.p, self.var
        if pr.get("form") == "neg":
            return f"{self.p}_neg({var(op.srcs[0])}, &ovf)"
        terms = [self.wide(f"(int64_t){var(s_)}", sh) for s_, sh in zip(op.srcs, pr["sh"])]
        if "lit_at" in pr:  # a sub's literal second is written with its own sign
            terms.insert(pr["lit_at"], _lit64(-pr["lit"] if pr["form"] == "sub" and pr["lit_at"] == 1 else pr["lit"]))
        sign = " - " if pr["form"] == "sub" else " + "
        return f"{self.sat}({self.rsh}({sign.join(terms)}, {pr['s']}), &ovf)"

    def mul(self, op) -> str:
        var = self.var
        if "lit" in op.p:
            prod = f"(int64_t){var(op.srcs[0])} * INT32_C({op.p['lit']})"
        else:
            prod = f"(int64_t){var(op.srcs[0])} * {var(op.srcs[1])}"
        return f"{self.sat}({self.rsh}({prod}, {op.p['s']}), &ovf)"

    def div(self, op) -> str:
        pr, var = op.p, self.var
        if "nlit" in pr:
            n, k = _lit64(pr["lit"]), pr["lk"]
            if k:
                n = f"{n} * ((int64_t)1 << {k})" if k > 0 else f"{self.rsh}({n}, {-k})"
            return f"{self.helper['div']}({n}, {var(op.srcs[0])}, &ovf)"
        return f"{self.helper['div']}({self.wide(f'(int64_t){var(op.srcs[0])}', pr['k'])}, {var(op.srcs[1])}, &ovf)"

    def sqrt(self, op) -> str:
        return f"{self.helper['sqrt']}({self.wide(f'(int64_t){self.var(op.srcs[0])}', op.p['k'])}, &ovf)"

    def tsel(self, op) -> str:
        return f"{self.sat}({self.rsh}({'ts' if op.p['which'] == 'sin' else 'tc'}, {op.p['sh']}), &ovf)"


class _M0Exprs(_FixedExprs):
    """c-fixed-m0: the values of _FixedExprs, computed as the Cortex-M0 does them cheaply.

    * a product: four 16-bit partial products (the M0 multiplies 32 x 32 -> 32 only; an
      int64 product is libgcc's __aeabi_lmul); by a literal 2^m with m <= s, a rounding
      shift of the word (exact: rsh(a 2^m, s) = rsh(a, s - m));
    * a sum: in int32, exact unless an int32 step overflows, when it jumps to c-fixed's
      int64 expression (_sum32);
    * a division: a 64/32 shift-subtract routine where the quotient fits 32 bits (else
      c-fixed's helper, on __aeabi_uldivmod);
    * a square root: digit by digit on 32-bit words where the root fits 31 bits."""

    def mul(self, op) -> str:
        a, lit, s = self.var(op.srcs[0]), op.p.get("lit"), op.p["s"]
        if lit is not None and lit > 0 and lit & (lit - 1) == 0 and 0 <= s - (lit.bit_length() - 1) <= 31:
            k = s - (lit.bit_length() - 1)
            return a if k == 0 else f"{self.p}_rs({a}, {k})"
        b = f"INT32_C({lit})" if lit is not None else self.var(op.srcs[1])
        if 0 < s < 63 and b == a:  # a square: one middle partial product
            return f"{self.p}_sqrrs({a}, {s}, &ovf)"
        if 0 < s < 63:
            return f"{self.p}_mulrs({a}, {b}, {s}, &ovf)"
        return f"{self.sat}({self.rsh}({self.p}_mul64({a}, {b}), {s}), &ovf)"

    def add(self, op) -> str:
        fast = self._sum32(op)
        if fast is None:
            return super().add(op)
        # a step that overflows jumps to o: c-fixed's int64 expression (rare, not on a fast path)
        return f"({{ __label__ o; int32_t ft = {fast}; if (0) {{ o: ft = {super().add(op)}; }} ft; }})"

    def _sum32(self, op) -> str | None:
        """rsh(lit + sum sign_i align(a_i, sh_i), s) in int32 steps jumping to o on overflow,
        from rsh(L + H 2^s, s) = rsh(L, s) + H: the terms with sh_i >= s (and the literal's
        part above 2^s) are added after the rounding shift, unshifted by s; None where a
        shift or a literal part does not fit that scheme (c-fixed's expression alone)."""
        pr, p = op.p, self.p
        s, lit = pr["s"], pr["lit"]
        lo, hi = (lit % (1 << s), lit >> s) if s >= 0 else (0, 0)
        if not (0 <= s <= 31 and lo < 2 ** 31 and INT32_MIN <= hi <= INT32_MAX):
            return None
        low, high = ([f"INT32_C({lo})"] if lo else []), []
        for src, sh, sg in zip(op.srcs, pr["sh"], pr["sign"]):
            a, k = self.var(src), (sh - s if sh >= s else sh)
            if not -31 <= k <= 31:
                return None
            t = a if k == 0 else f"{p}_AD({a}, {a}, o)" if k == 1 else f"{p}_SL({a}, {k}, o)" if k > 0 \
                else f"{p}_rs({a}, {-k})"
            (high if sh >= s else low).append((sg, t))
        acc = self._fold(low, "0")
        if s > 0 and acc != "0":
            acc = f"{p}_rs({acc}, {s})"
        return self._fold(high + ([(1, f"INT32_C({hi})")] if hi else []), acc)

    def _fold(self, terms, start: str) -> str:
        """start + the signed terms, each step an int32 add or sub jumping to o on overflow"""
        acc = start
        for t in terms:
            sg, x = t if isinstance(t, tuple) else (1, t)
            if acc == "0" and sg > 0:
                acc = x
            else:
                acc = f"{self.p}_{'AD' if sg > 0 else 'SB'}({acc}, {x}, o)"
        return acc

    def div(self, op) -> str:
        return super().div(op).replace(f"{self.helper['div']}(", f"{self.p}_div_m0(", 1)

    def sqrt(self, op) -> str:
        return super().sqrt(op).replace(f"{self.helper['sqrt']}(", f"{self.p}_sqrt_m0(", 1)


def envelope_words(envelope: list[tuple[float, float]], in_bits: list[int]) -> list[tuple[int | None, int | None]]:
    """Per input, the envelope's bounds as int32 words, rounded outward: (floor(lo 2^f),
    ceil(hi 2^f)); None for a side at or beyond the int32 range (no word is outside it)."""
    out = []
    for (lo, hi), f in zip(envelope, in_bits):
        if not (math.isfinite(lo) and math.isfinite(hi)):  # unchecked (input_check off)
            out.append((None, None))
            continue
        lw, hw = math.floor(lo * 2.0 ** f), math.ceil(hi * 2.0 ** f)
        out.append((lw if lw > INT32_MIN else None, hw if hw < INT32_MAX else None))
    return out


def envelope_checks(envelope, in_bits, in_ref) -> list[str]:
    """The statements at the top of a fixed-point kernel: each input word against its
    envelope range in words (envelope_words); in_ref(k) spells the k-th input."""
    lines = [CHECK_COMMENT.format(" (in words, rounded outward)")]
    for k, (lw, hw) in enumerate(envelope_words(envelope, in_bits)):
        x = in_ref(k)
        cond = [c for c in (lw is not None and f"{x} < INT32_C({lw})", hw is not None and f"{x} > INT32_C({hw})") if c]
        if cond:
            lines.append(f"if ({' || '.join(cond)}) return 2;")
    return lines


def render_fixed(sched: Schedule, fx: FixedProgram, ctx: KernelContext, real: Real, target: str,
                 m0: bool = False) -> dict[str, str]:
    """The files of a fixed-point C target (its name `target`, its real kind's record `real`,
    both its backend's): c-fixed's, or with m0 the same statements with the Cortex-M0
    helpers (c-fixed-m0's)."""
    p = ctx.prefix
    decls, body, used = fixed_statements(sched, fx, p, lambda k: f"in[{k}]", lambda k: f"out[{k}]", m0=m0)
    body.append("if (ovf) return 1;")
    support = render_template("c/fixed.c.j2", p=p, div=used["div"], sqrt=used["sqrt"], m0=m0,
                              trig=trig_constants() if used["trig"] else None)
    head = CHeaderContext(ctx, real=real.c_type, target=target)
    checks = envelope_checks(ctx.envelope, fx.in_bits, lambda k: f"in[{k}]")
    source = CSourceContext(head, includes=[], support=support, checks=checks, decls=decls, body=body)
    return {ctx.header: render_context("c/kernel.h.j2", head), ctx.source: render_context("c/kernel.c.j2", source)}
