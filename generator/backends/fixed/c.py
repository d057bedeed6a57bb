"""Fixed-point C (int32 words) from a schedule and its fixed-point plan.

Each instruction is printed with the shifts and integer literals the plan fixed, through
small static helpers (saturation, rounding shift, division, square root, sin/cos) that
are emitted only when used. The kernel returns 1 if any result saturated (an input
outside its declared range), else 0.
"""
from __future__ import annotations

from ...analysis.fixedpoint import FixedProgram
from ...lower.schedule import Schedule
from ..render import render_template
from .ops import trig_constants

def _lit64(v: int) -> str:
    return f"INT64_C({v})"


def fixed_statements(sched: Schedule, fx: FixedProgram, p: str, in_ref, out_ref) -> tuple[list[str], list[str], dict]:
    """The statements of a fixed-point kernel, shared by the c-fixed and HLS renderers:
    (declarations, body, which helpers are used). in_ref(k) / out_ref(k) spell the k-th
    input and output (`in[k]`, `out[k]` in c-fixed; `in_k`, `*out_k` in HLS C)."""
    slot = sched.slot
    by_dst = {ins.dst: ins for ins in fx.instrs}

    def var(o) -> str:
        kind, v = o
        return f"w{slot[v]}" if kind == "t" else in_ref(v)

    def wide(o, shift: int) -> str:
        """operand as int64 multiplied by 2^shift (rounded if shift < 0)"""
        x = f"(int64_t){var(o)}"
        if shift == 0:
            return x
        if shift > 0:
            return f"{x} * ((int64_t)1 << {shift})"
        return f"{p}_rsh({x}, {-shift})"

    body: list[str] = []
    for k, o in sched.direct:
        if o[0] == "c":
            body.append(f"{out_ref(k)} = INT32_C({round(o[1] * 2.0 ** fx.out_bits[k])});")
        else:
            body.append(f"{out_ref(k)} = {var(o)};")
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
        else:  # the planner rejects anything else first
            raise AssertionError(op)
        for dd in ins.dst:
            for k in sched.stores.get(dd, ()):
                body.append(f"{out_ref(k)} = w{slot[dd]};")

    names = [f"w{i}" for i in range(sched.n_slots)]
    decls = [f"int32_t {', '.join(names[i:i + 12])};" for i in range(0, len(names), 12)]
    decls.append("uint32_t ovf = 0u;")
    if used["trig"]:
        decls.append("int32_t ts, tc;")
    return decls, body, used


def render_fixed(sched: Schedule, fx: FixedProgram, ctx: dict) -> dict[str, str]:
    p = ctx["prefix"]
    decls, body, used = fixed_statements(sched, fx, p, lambda k: f"in[{k}]", lambda k: f"out[{k}]")
    body.append("if (ovf) return 1;")
    support = render_template("c/fixed.c.j2", p=p, div=used["div"], sqrt=used["sqrt"],
                              trig=trig_constants() if used["trig"] else None)
    common = dict(ctx, real="int32_t", target="c-fixed")
    c_text = render_template("c/kernel.c.j2", **common, includes=[], support=support, decls=decls, body=body)
    h_text = render_template("c/kernel.h.j2", **common)
    return {ctx["header"]: h_text, ctx["source"]: c_text}
