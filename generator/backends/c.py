"""Straight-line C from a schedule: one renderer per floating-point precision.

Inputs and outputs are the arguments, work slots are locals, every emitted symbol carries
the kernel's prefix. The float32 dialect spells every literal and function in single
precision (`0.5f`, mbforge's own sin/cos, `sqrtf`), so nothing is promoted to double on a
Cortex-M4F; compile with -ffp-contract=off so host and device round alike.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.atom import ExpressionError
from ..lower.schedule import Schedule
from .render import render_template

# What each instruction looks like; {0}, {1} are operands, {p} the prefix.
_INFIX = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}", "neg": "-{0}"}


class CDialect:
    name = ""
    real = ""
    functions: dict[str, str] = {}
    includes: tuple[str, ...] = ()
    support_template: str | None = None

    def literal(self, v: float) -> str:
        raise NotImplementedError

    def call(self, op: str, args: list[str], prefix: str) -> str:
        try:
            f = self.functions[op]
        except KeyError:
            raise ExpressionError(f"target {self.name} has no {op!r} (used by the model)") from None
        return f.format(*args, p=prefix)

    def check(self, sched: Schedule) -> None:
        """ExpressionError naming the first instruction, in schedule order, that this
        dialect cannot spell (what render_c would refuse)."""
        for ins in sched.order:
            if ins.op == "sincos":
                if "sincos" in self.functions or self.support_template:
                    continue
                needed = ("sin", "cos")
            else:
                needed = () if ins.op in _INFIX else (ins.op,)
            for op in needed:
                if op not in self.functions:
                    raise ExpressionError(f"target {self.name} has no {op!r} (used by the model)")


class DoubleC(CDialect):
    name = "c-double"
    real = "double"
    includes = ("math.h",)
    functions = {"sqrt": "sqrt({0})", "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})",
                 "atan2": "atan2({0}, {1})", "exp": "exp({0})", "log": "log({0})", "abs": "fabs({0})"}

    def literal(self, v: float) -> str:
        s = repr(float(v))
        if "e" not in s and "." not in s and "inf" not in s:
            s += ".0"
        return s


class Float32C(CDialect):
    name = "c-float32"
    real = "float"
    includes = ("math.h",)
    support_template = "c/mathf.c.j2"
    functions = {"sqrt": "sqrtf({0})", "sin": "{p}_sinf({0})", "cos": "{p}_cosf({0})",
                 "abs": "fabsf({0})"}

    def literal(self, v: float) -> str:
        f = float(np.float32(v))
        if not math.isfinite(f):
            raise ExpressionError(f"constant {v!r} does not fit in single precision")
        s = format(f, ".9g")
        if "e" not in s and "." not in s:
            s += ".0"
        return s + "f"


DIALECTS = {d.name: d for d in (DoubleC(), Float32C())}

CHECK_COMMENT = "/* an input outside its envelope range{}: status 2, nothing computed, out[] untouched */"


def _outward(v: float, up: bool, real: str) -> float:
    """v in the kernel's precision, rounded away from the envelope's inside (so every real
    input within the envelope, rounded to nearest by the host, passes), finite."""
    if real == "float":
        f = np.float32(v)
        if (float(f) < v) if up else (float(f) > v):
            f = np.nextafter(f, np.float32(np.inf if up else -np.inf))
        top = float(np.finfo(np.float32).max)
    else:
        f, top = v, float(np.finfo(np.float64).max)
    return min(max(float(f), -top), top)


def envelope_checks(dialect: CDialect, envelope: list[tuple[float, float]]) -> list[str]:
    """The statements at the top of a float kernel: each input compared against its
    envelope range; written `!(x >= lo && x <= hi)` so that a NaN fails too."""
    lines = [CHECK_COMMENT.format(" (NaN too)")]
    for k, (lo, hi) in enumerate(envelope):
        a, b = (dialect.literal(_outward(v, up, dialect.real)) for v, up in ((lo, False), (hi, True)))
        lines.append(f"if (!(in[{k}] >= {a} && in[{k}] <= {b})) return 2;")
    return lines


def render_c(sched: Schedule, dialect: CDialect, ctx: dict) -> dict[str, str]:
    """Files {name: text} for the kernel; ctx has prefix, function, header and doc fields."""
    p = ctx["prefix"]
    slot = sched.slot
    tape = sched.tape

    def opnd(a: tuple) -> str:
        kind, v = a
        if kind == "t":
            return f"w{slot[v]}"
        if kind == "in":
            return f"in[{v}]"
        lit = dialect.literal(v)
        return f"({lit})" if lit.startswith("-") else lit

    body: list[str] = []
    for k, o in sched.direct:
        body.append(f"out[{k}] = {opnd(o)};")
    for ins in sched.order:
        args = [opnd(a) for a in ins.args]
        if ins.op == "sincos":
            s, c = (f"w{slot[d]}" for d in ins.dst)
            if "sincos" in dialect.functions:
                body.append(dialect.functions["sincos"].format(*args, s, c, p=p) + ";")
            elif dialect.support_template:
                body.append(f"{p}_sincosf({args[0]}, &{s}, &{c});")
            else:  # the argument's slot may be one of the results': read it first
                pair = [f"{s} = {dialect.call('sin', args, p)};", f"{c} = {dialect.call('cos', args, p)};"]
                body.extend(reversed(pair) if s == args[0] else pair)
        else:
            rhs = _INFIX[ins.op].format(*args) if ins.op in _INFIX else dialect.call(ins.op, args, p)
            body.append(f"w{slot[ins.dst[0]]} = {rhs};")
        for d in ins.dst:
            for k in sched.stores.get(d, ()):
                body.append(f"out[{k}] = w{slot[d]};")

    decls = []
    names = [f"w{i}" for i in range(sched.n_slots)]
    for i in range(0, len(names), 12):
        decls.append(f"{dialect.real} {', '.join(names[i:i + 12])};")

    support = ""
    if dialect.support_template and any(i.op in ("sin", "cos", "sincos") for i in tape.instrs):
        support = render_template(dialect.support_template, p=p)

    common = dict(ctx, real=dialect.real, target=dialect.name)
    c_text = render_template("c/kernel.c.j2", **common, includes=list(dialect.includes), support=support,
                             checks=envelope_checks(dialect, ctx["envelope"]), decls=decls, body=body)
    h_text = render_template("c/kernel.h.j2", **common)
    return {ctx["header"]: h_text, ctx["source"]: c_text}
