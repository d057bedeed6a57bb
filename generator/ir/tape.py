"""Lowering an atom graph to a tape: the instructions a renderer prints, in SSA form.

This is the one place that decides what an operation costs, so op counts, the C
renderers, range analysis and the HDL scheduler all see the same instructions:
* `x + (-y)` is one `sub`; `-(x - y)` whose `x - y` is needed nowhere else is `sub(y, x)`;
* `x**n` is a chain of multiplications that reuses `x**2` etc. when those exist anyway;
* `sin(u)` and `cos(u)` of one argument are one `sincos` instruction with two results;
* constants are literals, not instructions.

Operands are tuples: ("in", k) the k-th input, ("c", value) a constant, ("t", i) the
result of an instruction. Every ("t", i) is written by exactly one instruction, before
it is read (SSA); `Tape.atoms[i]` is the atom it computes.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .atom import Atom, ExpressionError, power
from .graph import topo

BINARY = ("add", "sub", "mul", "div", "atan2")
UNARY = ("neg", "sqrt", "sin", "cos", "tan", "exp", "log", "abs")


@dataclass(frozen=True)
class Instr:
    op: str
    dst: tuple[int, ...]  # temp ids written (two for sincos: sin, cos)
    args: tuple[tuple, ...]


@dataclass
class Tape:
    inputs: list[Atom]
    outputs: list[tuple]
    instrs: list[Instr]
    atoms: dict[int, Atom] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        c = Counter(i.op for i in self.instrs)
        out = dict(sorted(c.items()))
        out["total"] = sum(c.values())
        return out


def lower(outputs: list[Atom], inputs: list[Atom] | None = None) -> Tape:
    order = topo(outputs)
    if inputs is None:
        inputs = [a for a in order if a.op == "sym"]
        inputs.sort(key=lambda a: a.value.name)
    in_index = {a: k for k, a in enumerate(inputs)}
    missing = [a.value.name for a in order if a.op == "sym" and a not in in_index]
    if missing:
        raise ExpressionError(f"outputs depend on symbols that are not inputs: {', '.join(sorted(missing))}")

    # 1. which atoms are read, and by how many readers (after folding negations)
    def reads(a: Atom) -> tuple[Atom, ...]:
        if a.op == "add" and a.args[1].op == "neg":
            return (a.args[0], a.args[1].args[0])
        return a.args

    readers: Counter = Counter()
    needed: set[Atom] = set()
    for a in outputs:
        if a.args:
            needed.add(a)
    out_set = set(needed)
    for a in reversed(order):
        if a in needed:
            for x in reads(a):
                if x.args:
                    readers[x] += 1
                    needed.add(x)

    # 2. sin/cos pairs over one argument
    trig: dict[Atom, dict[str, Atom]] = {}
    for a in order:
        if a in needed and a.op in ("sin", "cos"):
            trig.setdefault(a.args[0], {})[a.op] = a

    # 3. -(u - v) whose u - v nobody else reads is printed as v - u: one instruction
    fused = {
        a.args[0]
        for a in needed
        if a.op == "neg" and a.args[0].op == "add" and a.args[0].args[1].op == "neg"
        and readers[a.args[0]] == 1 and a.args[0] not in out_set
    }

    tape = Tape(inputs=inputs, outputs=[], instrs=[])
    ref: dict[Atom, tuple] = {}

    def operand(x: Atom) -> tuple:
        if x.op == "const":
            return ("c", x.value)
        if x.op == "sym":
            return ("in", in_index[x])
        return ref[x]

    def emit(op: str, args, atom: Atom | None) -> tuple:
        i = len(tape.atoms)
        tape.atoms[i] = atom
        tape.instrs.append(Instr(op, (i,), tuple(args)))
        return ("t", i)

    def pow_step(lhs: tuple, rhs: tuple, base: Atom, e: int) -> tuple:
        pe = power(base, e)
        if pe not in ref:
            ref[pe] = emit("mul", (lhs, rhs), pe)
        return ref[pe]

    for a in order:
        if a not in needed or a in ref or a in fused:
            continue
        op = a.op
        if op == "add":
            x, y = a.args
            if y.op == "neg":
                ref[a] = emit("sub", (operand(x), operand(y.args[0])), a)
            else:
                ref[a] = emit("add", (operand(x), operand(y)), a)
        elif op == "neg":
            x = a.args[0]
            if x in fused:
                u, v = x.args[0], x.args[1].args[0]
                ref[a] = emit("sub", (operand(v), operand(u)), a)
            else:
                ref[a] = emit("neg", (operand(x),), a)
        elif op == "mul" or op == "div" or op == "atan2":
            ref[a] = emit(op, (operand(a.args[0]), operand(a.args[1])), a)
        elif op == "pow":
            # binary powering from the top bit; x**e computed elsewhere anyway is reused
            base, n = a.args[0], a.value
            x = operand(base)
            r, e = x, 1
            for bit in bin(n)[3:]:
                r, e = pow_step(r, r, base, 2 * e), 2 * e
                if bit == "1":
                    r, e = pow_step(r, x, base, e + 1), e + 1
            ref[a] = r
        elif op in ("sin", "cos"):
            pair = trig[a.args[0]]
            if len(pair) == 2:
                i = len(tape.atoms)
                tape.atoms[i] = pair["sin"]
                tape.atoms[i + 1] = pair["cos"]
                tape.instrs.append(Instr("sincos", (i, i + 1), (operand(a.args[0]),)))
                ref[pair["sin"]] = ("t", i)
                ref[pair["cos"]] = ("t", i + 1)
            else:
                ref[a] = emit(op, (operand(a.args[0]),), a)
        elif op in UNARY:
            ref[a] = emit(op, (operand(a.args[0]),), a)
        else:
            raise ExpressionError(f"cannot lower {op!r} in {a}")
    tape.outputs = [operand(a) for a in outputs]
    return tape
