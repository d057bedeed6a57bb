"""The lowered tape's ops, as data, in one place, and the one interpreter every analysis runs.

`TAPE_OPS[name]` describes an instruction `Instr.op` of lower/tape.py: its arity, the
values it writes (`results`: two for sincos), how it evaluates in double over numpy
arrays (`np`), whether float32 rounds its result (`exact`: neg is not rounded) and the
fixed-point ops (backends.fixed.ops.OPS kinds, whose latencies the RTL schedules) it
lowers to. Ops the analyses do not know yet (tan, exp, log, abs: the atom functions
lowered as one instruction) are here too: c-double prints them, the analyses refuse them.

Every analysis of a tape is a `Rules` (its own rule per op) run by `run`, the one walk
over the instructions:

    analysis.ranges.RANGE_RULES        enclosures (interval and affine) over boxes
    analysis.fixedpoint.PLAN_RULES     fixed-point formats and magnitude error bounds
    analysis.fixerror.FORM_RULES       fixed-point first-order error forms
    analysis.floaterror.BOUND_RULES    float32 magnitude error bounds
    analysis.floaterror.FORM_RULES     float32 first-order error forms
    analysis.aligned.ADJOINT_RULES     float32 / fixed rounding floor (reverse sweep)
    backends.fixed.ops.LOWER_RULES     tape instruction -> fixed-point ops

Adding an op is one `TapeOp` entry below plus its rule in each of those tables that
should support it (a table without it refuses the op in one line naming the analysis);
tests/test_tapeops.py checks every table's keys against this one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..ir.atom import ExpressionError
from ..ir.ops import OPS


@dataclass(frozen=True)
class TapeOp:
    name: str
    arity: int
    np: Callable  # (*operand arrays) -> tuple of result arrays (one per result), double
    results: tuple[str, ...] = ("",)  # names of the values written: ("sin", "cos") for sincos
    exact: bool = False  # float32 does not round its result (neg)
    hw: tuple[str, ...] = ()  # fixed-point ops it lowers to (backends.fixed.ops.OPS); () none yet


def _atom(name: str) -> Callable:
    f = OPS[name].np
    return lambda *a: (f(*a),)


_TABLE = (
    TapeOp("add", 2, _atom("add"), hw=("add",)),
    TapeOp("sub", 2, lambda a, b: (np.subtract(a, b),), hw=("add",)),
    TapeOp("neg", 1, _atom("neg"), exact=True, hw=("add",)),
    TapeOp("mul", 2, _atom("mul"), hw=("mul",)),
    TapeOp("div", 2, _atom("div"), hw=("div",)),
    TapeOp("sqrt", 1, _atom("sqrt"), hw=("sqrt",)),
    TapeOp("sin", 1, _atom("sin"), results=("sin",), hw=("tred", "mul", "add", "tsel")),
    TapeOp("cos", 1, _atom("cos"), results=("cos",), hw=("tred", "mul", "add", "tsel")),
    TapeOp("sincos", 1, lambda x: (np.sin(x), np.cos(x)), results=("sin", "cos"), hw=("tred", "mul", "add", "tsel")),
    TapeOp("atan2", 2, _atom("atan2")),  # atan2(y, x)
    TapeOp("tan", 1, _atom("tan")),
    TapeOp("exp", 1, _atom("exp")),
    TapeOp("log", 1, _atom("log")),
    TapeOp("abs", 1, _atom("abs")),
)

TAPE_OPS: dict[str, TapeOp] = {o.name: o for o in _TABLE}


@dataclass(frozen=True)
class Rules:
    """One analysis: `table[op](state, ins)` handles instruction ins (state is the
    analysis' own); `refuse(tape, ins)` is the one line for an op it has no rule for."""
    table: dict
    refuse: Callable


def run(tape, rules: Rules, state, instrs=None, *, section=None, release=None) -> None:
    """THE walk over a tape: each instruction (of `instrs`, default the tape's, in the
    tape's order) dispatched to its rule. `section`: the instruction indices to run (the
    others are passed over); `release(temp)`: called for each temp before the first
    instruction after its last read (analyses whose per-temp state is their memory)."""
    dead = last_reads(tape) if release is not None else None
    table = rules.table
    for i, ins in enumerate(tape.instrs if instrs is None else instrs):
        if dead is not None and i:
            for t in dead[i - 1]:
                release(t)
        if section is not None and i not in section:
            continue
        rule = table.get(ins.op)
        if rule is None:
            raise ExpressionError(rules.refuse(tape, ins))
        rule(state, ins)


def last_reads(tape) -> list[list[int]]:
    """Per instruction, the temps read (or written) for the last time there."""
    last: dict[int, int] = {}
    for i, ins_ in enumerate(tape.instrs):
        for d in ins_.dst:
            last[d] = i
        for kind, v in ins_.args:
            if kind == "t":
                last[v] = i
    out: list[list[int]] = [[] for _ in tape.instrs]
    for t, i in last.items():
        out[i].append(t)
    return out
