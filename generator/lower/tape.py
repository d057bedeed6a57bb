"""Lowering an atom graph to a tape: the instructions a renderer prints, in SSA form.

This is the one place that decides what an operation costs, so op counts, the C
renderers, range analysis and the HDL scheduler all see the same instructions.

Atoms are built in canonical forms that make equal expressions meet (constants pulled
out of products, negations pushed outwards); those forms are not always the cheapest to
evaluate. Lowering first plans, for every needed atom, one instruction over operand atoms,
then rewrites the plan where the whole graph shows a cheaper way:
* `x + (-y)` is one `sub`; `c + y` with c < 0 is `y - |c|`;
* a scaled product c*(x*y) whose x*y nobody else needs is (c*x)*y when c*x is needed
  anyway or shared by several such products (one multiplication instead of two);
* a negation whose operand is needed nowhere else is folded into it (`-(x - y)` is
  `y - x`, `-(c*x)` is `(-c)*x`);
* `x**n` is a chain of multiplications through x**2, x**4, ... (shared when they exist);
* `sin(u)` and `cos(u)` of one argument are one `sincos` instruction with two results;
* constants are literals, not instructions.

Operands are tuples: ("in", k) the k-th input, ("c", value) a constant, ("t", i) the
result of an instruction. Every ("t", i) is written by exactly one instruction, before
it is read (SSA); `Tape.atoms[i]` is the atom it computes. The instructions' ops, and the
walk every analysis runs over a tape, are lower/tapeops.py.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field

from ..ir.atom import Atom, ExpressionError, add, const, mul, neg, power, sub
from ..ir.graph import gc_paused, topo
from ..ir.ops import OPS


@dataclass(frozen=True)
class Instr:
    op: str
    dst: tuple[int, ...]  # temp ids written (two for sincos: sin, cos)
    args: tuple[tuple, ...]


class TapeHints(ABC):
    """Sound enclosures of some temps over input boxes beyond what the tape's ops give
    (analysis.linear: a solve's values from its matrix alone); range analysis intersects
    them. `cut` (where the tape holds its one solve's data: analysis.solve_error) and
    `enclosed` (the per-box enclosures worked out so far) are None where there are none;
    `labels` {temp: what it is} name a value in a refusal (a pivot's joint) instead of its atom."""
    cut: tuple | None = None
    enclosed: dict | None = None
    labels: dict | None = None

    @abstractmethod
    def __call__(self, in_lo, in_hi) -> dict:
        """{temp: (lo, hi)}: (B,) arrays over the boxes in_lo, in_hi (B, n_in)."""

    @abstractmethod
    def key(self) -> tuple:
        """What the hints compute from beyond the tape, as frozen dataclasses (one per
        solve): their fields go into the key of a cached analysis (analysis.piececache.hints_key)."""


@dataclass
class Tape:
    inputs: list[Atom]
    outputs: list[tuple]
    instrs: list[Instr]
    atoms: dict[int, Atom] = field(default_factory=dict)
    # extra sound enclosures of some temps over input boxes (TapeHints); None: the ops' own
    hints: TapeHints | None = None
    # (output position, input position) pairs that hold one value in turn: a step kernel's
    # state, copied from out[] to in[] between calls, so fixed point gives both one format
    feedback: tuple = ()

    def counts(self) -> dict[str, int]:
        c = Counter(i.op for i in self.instrs)
        out = dict(sorted(c.items()))
        out["total"] = sum(c.values())
        return out

    def cone(self, roots) -> tuple[set[int], set[int]]:
        """(the temps, the inputs) the operands `roots` are computed from, roots included."""
        writer = {d: ins for ins in self.instrs for d in ins.dst}
        temps, inputs, stack = set(), set(), list(roots)
        while stack:
            kind, x = stack.pop()
            if kind == "in":
                inputs.add(x)
            elif kind == "t" and x not in temps:
                temps.add(x)
                stack.extend(writer[x].args)
        return temps, inputs


Plan = dict  # Atom -> (op, tuple of operand atoms)


def _default(a: Atom, plan: Plan) -> None:
    """The instruction that computes `a` from its own arguments (adds helpers to plan)."""
    op, args = a.op, a.args
    if op == "add":
        x, y = args
        if y.op == "neg":
            plan[a] = ("sub", (x, y.args[0]))
        elif x.op == "const" and x.value < 0:
            plan[a] = ("sub", (y, const(-x.value)))
        else:
            plan[a] = ("add", args)
    elif op == "pow":
        # binary powering: x**n = (x**(n//2))**2 (* x); the halves are atoms of their own
        base, n = args[0], a.value
        half = power(base, n // 2) if n > 3 else base
        if n == 2:
            plan[a] = ("mul", (base, base))
        elif n == 3:
            plan[a] = ("mul", (power(base, 2), base))
        elif n % 2 == 0:
            plan[a] = ("mul", (half, half))
        else:
            plan[a] = ("mul", (power(base, n - 1), base))
    elif op in OPS and OPS[op].arity and not OPS[op].valued:  # mul, div, atan2, neg, sqrt, sin...
        plan[a] = (op, args)  # one instruction of the same name
    else:
        raise ExpressionError(f"cannot lower {op!r} in {a}")


def _needed(outputs: list[Atom], plan: Plan) -> tuple[list[Atom], dict]:
    """Atoms to compute (operands first) and how many planned instructions read each."""
    order: list[Atom] = []
    readers: dict[Atom, int] = {}
    done: set[Atom] = set()
    opened: set[Atom] = set()
    get = plan.get
    for root in outputs:
        if not root.args or root in done:
            continue
        stack = [root]
        while stack:
            a = stack.pop()
            if a in done:
                continue
            if a in opened:  # its operands are done
                done.add(a)
                order.append(a)
                continue
            p = get(a)
            if p is None:
                _default(a, plan)
                p = plan[a]
            opened.add(a)
            stack.append(a)
            for x in reversed(p[1]):
                if x.args:
                    readers[x] = readers.get(x, 0) + 1
                    if x not in opened:
                        stack.append(x)
    return order, readers


def _rescale_products(order: list[Atom], plan: Plan, readers: dict, outs: set) -> bool:
    """c*(x*y) -> (c*x)*y where it saves the multiplication by c (see module doc)."""
    needed = set(order)
    cands = []
    count: Counter = Counter()
    for a in order:
        if a.op == "mul" and a.args[0].op == "const" and plan[a][0] == "mul":
            p = a.args[1]
            if p.op == "mul" and p.args[0].op != "const" and readers.get(p) == 1 and p not in outs:
                cands.append((a, p))
                for f in p.args:
                    count[(a.args[0].value, f)] += 1
    changed = False
    for a, p in cands:
        c = a.args[0]
        best = None
        for f, other in ((p.args[0], p.args[1]), (p.args[1], p.args[0])):
            cf = mul(c, f)
            score = 3 if cf in needed else count[(c.value, f)]
            if score >= 2 and (best is None or score > best[0]):
                best = (score, cf, other)
        if best is not None:
            _, cf, other = best
            plan[a] = ("mul", (cf, other))
            needed.add(cf)
            changed = True
    return changed


def _scaled(t: Atom):
    """(c, w) if t is c*w with c a number, else None."""
    if t.op == "mul" and t.args[0].op == "const":
        return t.args[0].value, t.args[1]
    return None


def _push_scales(order: list[Atom], plan: Plan, readers: dict, outs: set) -> bool:
    """c*(u +- v) -> (c*u) +- (c*v) when the sum has no other reader and both terms take
    the constant for free (constants, or scaled terms nobody else reads): one mul fewer."""
    needed = set(order)

    def absorbs(t: Atom) -> bool:
        if t.op == "const":
            return True
        if _scaled(t) is not None and readers.get(t) == 1 and t not in outs:
            return True
        return False

    changed = False
    for a in order:
        sc = _scaled(a)
        if sc is None or plan[a][0] != "mul" or plan[a][1][0].op != "const":
            continue
        c, s_ = sc
        if s_ not in plan or readers.get(s_) != 1 or s_ in outs:
            continue
        op, (u, v) = plan[s_] if plan[s_][0] in ("add", "sub") else (None, (None, None))
        if op is None or not (absorbs(u) and absorbs(v)):
            continue
        cu, cv = mul(const(c), u), mul(const(c), v)
        if cu in needed or cv in needed:
            continue
        plan[a] = (op, (cu, cv))
        changed = True
    return changed


def _factor_constants(order: list[Atom], plan: Plan, readers: dict, outs: set) -> bool:
    """c*x +- c*y -> c*(x +- y) when neither product has another reader: one mul fewer."""
    changed = False
    for a in order:
        op, args = plan[a]
        if op not in ("add", "sub"):
            continue
        u, v = args
        su, sv = _scaled(u), _scaled(v)
        if su is None or sv is None or su[0] != sv[0] and su[0] != -sv[0]:
            continue
        if readers.get(u) != 1 or readers.get(v) != 1 or u in outs or v in outs:
            continue
        x, y = su[1], sv[1]
        same = (su[0] == sv[0]) == (op == "add")  # c*x + c*y or c*x - (-c)*y
        inner = add(x, y) if same else sub(x, y)
        if inner.op == "const":
            continue
        plan[a] = ("mul", (const(su[0]), inner))
        changed = True
    return changed


@dataclass
class _NegFold:
    """The plan _fold_negations rewrites, and what the rewriting has made dead or replaced."""
    plan: Plan
    readers: dict
    outs: set
    dead: set = field(default_factory=set)
    replaced: dict = field(default_factory=dict)

    def negated(self, x: Atom, depth: int):
        """An instruction for -x over x's operands, no dearer than x's, or None."""
        if depth > 3 or self.readers.get(x) != 1 or x in self.outs or x not in self.plan:
            return None
        op, args = self.plan[x]
        if len(args) != 2:
            return None
        u, v = args
        if op == "sub":
            return ("sub", (v, u))
        if op == "mul":
            if u.op == "const":
                return ("mul", (const(-u.value), v))
            if v.op == "const":
                return ("mul", (const(-v.value), u))
            for f, g in ((u, v), (v, u)):
                nf = self.free(f, depth + 1)
                if nf is not None:
                    return ("mul", (nf, g))
        if op == "add":
            for f, g in ((u, v), (v, u)):
                nf = self.free(f, depth + 1)
                if nf is not None:
                    return ("sub", (nf, g))
        return None

    def free(self, f: Atom, depth: int):
        """An atom equal to -f that costs nothing more, or None."""
        if f.op == "const":
            return const(-f.value)
        if f.op == "neg":
            return f.args[0]
        ins = self.negated(f, depth)
        if ins is None:
            return None
        n = neg(f)
        if n in self.plan and self.readers.get(n):
            return None  # -f is computed anyway; folding would not save anything
        self.plan[n] = ins
        self.dead.add(f)
        self.replaced[f] = n
        return n


def _fold_negations(order: list[Atom], plan: Plan, readers: dict, outs: set) -> tuple[set[Atom], dict]:
    """A negation whose operand has no other reader is folded into that operand's own
    instruction: -(u - v) = v - u, -(c*x) = (-c)*x, -(u + v) = (-u) - v and -(x*y) =
    (-x)*y where -u or -x is itself free (recursively, a few levels deep).
    Returns the atoms no longer needed and {dead operand: the new atom computing its
    negation in its place}."""
    fold = _NegFold(plan, readers, outs)
    for a in order:
        if a in fold.dead or plan[a][0] != "neg":
            continue
        x = plan[a][1][0]
        ins = fold.negated(x, 0)
        if ins is not None:
            plan[a] = ins
            fold.dead.add(x)
    return fold.dead, fold.replaced


def lower(outputs: list[Atom], inputs: list[Atom] | None = None, keep=()) -> Tape:
    """keep: atoms the cost rewrites leave as they are, each one held by a temp (or its
    negation) when it is computed at all: the values an analysis replays by role
    (analysis.ldlback), which a constant factored out of a sum would leave uncomputed."""
    with gc_paused():
        return _lower(outputs, inputs, keep)


def _root_order(outputs: list[Atom]) -> list[Atom]:
    """Outputs in an order that keeps those over the same inputs together (so values they
    share are computed close to where they are used): groups of outputs with one input
    set, each next group the one overlapping most with the last (ties: first seen)."""
    # masks number symbols in creation order, which differs between processes; only
    # overlaps (bit counts) and first appearance decide below, and those do not
    groups: dict[int, list[Atom]] = {}
    for a in outputs:
        groups.setdefault(a.mask, []).append(a)
    keys = list(groups)
    if len(keys) <= 1:
        return list(outputs)
    by_input: dict[int, list[int]] = {}  # input position -> groups reading it
    for k in keys:
        m = k
        while m:
            low = m & -m
            by_input.setdefault(low.bit_length(), []).append(k)
            m ^= low
    rank = {k: i for i, k in enumerate(keys)}
    seq = [keys[0]]
    left = dict.fromkeys(keys[1:])
    while left:
        last = seq[-1]
        cands = set()
        m = last
        while m:
            low = m & -m
            cands.update(g for g in by_input[low.bit_length()] if g in left)
            m ^= low
        if cands:
            best = max(cands, key=lambda k: ((k & last).bit_count(), -(k ^ last).bit_count(), -rank[k]))
        else:
            best = next(iter(left))
        seq.append(best)
        del left[best]
    return [a for k in seq for a in groups[k]]


def _lower(outputs: list[Atom], inputs: list[Atom] | None, keep=()) -> Tape:
    outs = {a for a in outputs if a.args} | {a for a in keep if a.args}
    plan: Plan = {}
    if inputs is None:
        inputs = sorted({a for a in topo(outputs) if a.op == "sym"}, key=lambda a: a.value.name)
    roots = _root_order(outputs)
    order, readers = _needed(roots, plan)
    changed = False
    for rewrite in (_rescale_products, _push_scales, _factor_constants):
        # decided on the same reader counts: each rewrites only its own atom's instruction
        changed |= rewrite(order, plan, readers, outs)
    if changed:
        order, readers = _needed(roots, plan)
    dead, replaced = _fold_negations(order, plan, readers, outs)
    if dead:
        # a new negated atom takes the place of the operand it replaces: its own operands
        # come before that place and its one reader after it, so the order stays valid
        order = [replaced.get(a, a) for a in order if a not in dead or a in replaced]

    syms = {x for a in order for x in plan[a][1] if x.op == "sym"} | {a for a in outputs if a.op == "sym"}
    in_index = {a: k for k, a in enumerate(inputs)}
    missing = sorted(a.value.name for a in syms if a not in in_index)
    if missing:
        raise ExpressionError(f"outputs depend on symbols that are not inputs: {', '.join(missing)}")

    # sin/cos pairs over one argument
    trig: dict[Atom, dict[str, Atom]] = {}
    for a in order:
        if plan[a][0] in ("sin", "cos"):
            trig.setdefault(a.args[0], {})[a.op] = a

    tape = Tape(inputs=inputs, outputs=[], instrs=[])
    ref: dict[Atom, tuple] = {}

    def operand(x: Atom) -> tuple:
        if x.op == "const":
            return ("c", x.value)
        if x.op == "sym":
            return ("in", in_index[x])
        return ref[x]

    for a in order:
        if a in ref:
            continue
        op, args = plan[a]
        if op in ("sin", "cos") and len(trig[args[0]]) == 2:
            pair = trig[args[0]]
            i = len(tape.atoms)
            tape.atoms[i], tape.atoms[i + 1] = pair["sin"], pair["cos"]
            tape.instrs.append(Instr("sincos", (i, i + 1), (operand(args[0]),)))
            ref[pair["sin"]], ref[pair["cos"]] = ("t", i), ("t", i + 1)
            continue
        i = len(tape.atoms)
        tape.atoms[i] = a
        tape.instrs.append(Instr(op, (i,), tuple(operand(x) for x in args)))
        ref[a] = ("t", i)
    tape.outputs = [operand(a) for a in outputs]
    return tape


def op_counts(roots) -> dict[str, int]:
    """Operations by kind to compute `roots` after dead-atom elimination, counted on the
    same lowering the C renderers print (negations folded into subtractions, integer
    powers as multiplications, sin/cos of one argument as one sincos)."""
    return lower(list(roots), inputs=None).counts()


def describe(tape: Tape, ins) -> str:
    """`op computing <atom>` of an instruction, or what the hints call its result or its
    last operand (a divisor: an LDL^T pivot of a named joint), for an error line."""
    labels = (tape.hints.labels if tape.hints is not None else None) or {}
    for o in (("t", ins.dst[0]), ins.args[-1] if ins.args else None):
        if o is not None and o[0] == "t" and o[1] in labels:
            return f"{ins.op} computing {labels[o[1]]}"
    return f"{ins.op} computing {tape.atoms[ins.dst[0]]!r}"[:300] if ins.dst[0] in tape.atoms else ins.op

