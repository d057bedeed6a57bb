"""Scheduling a tape into straight-line code: an order and work slots.

Outputs are stored as soon as they are computed, so they do not stay live to the end. A
value's slot is released after its last reader and reused by the next value (lowest free
slot first, so the result is deterministic). `peak_live` is the most values alive at once:
what the register allocator of the target has to hold.

`allocate` places that order in a given number of registers and spill slots (see its
Allocation): the C renderers with a register count print it, so that the compiler finds
at most that many values live at any point.
"""
from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass, field

from .tape import Instr, Tape


@dataclass
class Schedule:
    tape: Tape
    order: list[Instr]
    slot: dict[int, int]
    n_slots: int
    peak_live: int
    # temp id -> output positions stored right after it is computed
    stores: dict[int, list[int]] = field(default_factory=dict)
    # outputs that are inputs or constants (no instruction computes them)
    direct: list[tuple[int, tuple]] = field(default_factory=list)
    # allocate's results by (registers, constants, fuse): best_schedule's choice is not
    # allocated again by the renderer
    allocations: dict[tuple, "Allocation"] = field(default_factory=dict, repr=False, compare=False)


# Longest chain of missing operands (instructions) computed to finish a single-reader
# value's reader. 4 measured best on the Stewart joint kernel (allocation's loads + stores
# with 27 registers, per call: 1,910 without chains; 1,803 / 1,698 / 1,786 / 1,756 with
# 3 / 4 / 5 / 6; 1,892 with 12): longer chains start too much at once.
_CHAIN = 4


def depth_first_rank(tape: Tape) -> list[int]:
    """Each instruction's place in a depth-first walk from the outputs, in output order
    (operands before the instruction, left first): an alternative to the tape's order as
    order_for_pressure's last tie-break. Instructions no output needs come last."""
    instrs = tape.instrs
    n = len(instrs)
    prod = {d: k for k, ins in enumerate(instrs) for d in ins.dst}
    rank = [n + k for k in range(n)]
    step = 0
    for o in tape.outputs:
        if o[0] != "t" or rank[prod[o[1]]] < n:
            continue
        stack = [(prod[o[1]], False)]
        while stack:
            k, closing = stack.pop()
            if rank[k] < n:
                continue
            if closing:
                rank[k], step = step, step + 1
                continue
            stack.append((k, True))
            for a in reversed(instrs[k].args):
                if a[0] == "t" and rank[prod[a[1]]] >= n:
                    stack.append((prod[a[1]], False))
    return rank


def order_for_pressure(tape: Tape, longest: int = _CHAIN, rank: list[int] | None = None) -> list[Instr]:
    """List scheduling that keeps few values live: among the instructions whose operands
    are ready, take the one that frees the most values (operands read for the last time)
    less the values it creates; ties go to the one reading the most recent value (finish
    what was started), then to the tape order (deterministic). Inputs and constants live
    in memory and cost no register.

    A value with a single reader would otherwise wait, live, until the reader's other
    operands happen to be chosen: after each instruction whose result has one reader,
    that reader's missing operands (at most `longest` instructions, operands first) and the
    reader itself follow at once, and so on up the chain. `longest` is per target core (a
    backend's schedule_chain; _CHAIN by default). The last tie-break is `rank` (the tape's
    order when None), which decides much: shuffled, the Stewart joint kernel's loads and
    stores double."""
    return _PressureOrder(tape, longest, rank).run()


class _PressureOrder:
    """The state of one order_for_pressure: who produces and reads each value, what is
    still to place, and the heap of ready instructions by score."""

    def __init__(self, tape: Tape, longest: int, rank: list[int] | None):
        instrs = self.instrs = tape.instrs
        n = len(instrs)
        self.longest = longest
        self.ops = ops = [tuple(dict.fromkeys(a[1] for a in ins.args if a[0] == "t")) for ins in instrs]
        self.ndst = [len(ins.dst) for ins in instrs]
        nt = len(tape.atoms)  # temps are numbered 0 .. nt-1
        self.prod = prod = [0] * nt
        for k, ins in enumerate(instrs):
            for d in ins.dst:
                prod[d] = k
        self.readers = readers = [[] for _ in range(nt)]
        for k, vs in enumerate(ops):
            for v in vs:
                readers[v].append(k)
        self.remaining = [len(r) for r in readers]
        self.waiting = [len(vs) for vs in ops]
        self.born = [0] * nt  # value -> step at which it was computed
        self.last = rank if rank is not None else range(n)
        self.done = [False] * n
        self.order: list[Instr] = []
        self.heap = [self.score(k) for k in range(n) if self.waiting[k] == 0]
        heapq.heapify(self.heap)

    def score(self, k: int) -> tuple:
        """k's priority; heapq pops the smallest."""
        remaining, born = self.remaining, self.born
        kills = 0
        recent = -1
        for v in self.ops[k]:
            if remaining[v] == 1:
                kills += 1
            b = born[v]
            if b > recent:
                recent = b
        return (self.ndst[k] - kills, -recent, self.last[k], k)

    def place(self, k: int) -> None:
        """Append k to the order and queue what it makes ready or raises in priority."""
        remaining, waiting, readers, done, heap = self.remaining, self.waiting, self.readers, self.done, self.heap
        done[k] = True
        self.order.append(self.instrs[k])
        step = len(self.order)
        for v in self.ops[k]:
            remaining[v] -= 1
            if remaining[v] == 1:  # its last reader now frees it: better priority
                for r in readers[v]:
                    if not done[r]:
                        if waiting[r] == 0:
                            heapq.heappush(heap, self.score(r))
                        break
        for d in self.instrs[k].dst:
            self.born[d] = step
            for r in readers[d]:
                waiting[r] -= 1
                if waiting[r] == 0:
                    heapq.heappush(heap, self.score(r))

    def missing(self, r: int) -> list[int] | None:
        """Instructions still to place before r (operands first), None if over `longest`."""
        ops, prod, done = self.ops, self.prod, self.done
        out: list[int] = []
        opened: set[int] = set()
        stack = [(r, False)]
        while stack:
            k, closing = stack.pop()
            if closing:
                if k != r:
                    out.append(k)
                    if len(out) > self.longest:
                        return None
                continue
            if k in opened:  # reached again through another path: placed once, first
                continue
            opened.add(k)
            stack.append((k, True))
            for v in reversed(ops[k]):
                q = prod[v]
                if not done[q] and q not in opened:
                    stack.append((q, False))
        return out

    def run(self) -> list[Instr]:
        """Place everything: the best ready instruction, then its single-reader chain."""
        instrs, readers, done, heap = self.instrs, self.readers, self.done, self.heap
        while heap:
            sc = heapq.heappop(heap)
            k = sc[3]
            if done[k]:
                continue
            if self.score(k) != sc:  # stale: priorities only improve, the better entry is queued
                continue
            self.place(k)
            while len(instrs[k].dst) == 1 and len(readers[instrs[k].dst[0]]) == 1:
                r = readers[instrs[k].dst[0]][0]
                chain = None if done[r] else self.missing(r)
                if chain is None:
                    break
                for q in chain:
                    self.place(q)
                self.place(r)
                k = r
        if len(self.order) != len(instrs):  # pragma: no cover - the tape is SSA, so everything gets ready
            raise AssertionError("scheduling left instructions behind")
        return self.order


def schedule(tape: Tape, pressure: bool = True, chain: int | None = None, rank: list[int] | None = None) -> Schedule:
    order = order_for_pressure(tape, _CHAIN if chain is None else chain, rank) if pressure else list(tape.instrs)
    last_read: dict[int, int] = {}
    for pos, ins in enumerate(order):
        for a in ins.args:
            if a[0] == "t":
                last_read[a[1]] = pos
    stores: dict[int, list[int]] = {}
    direct: list[tuple[int, tuple]] = []
    for k, o in enumerate(tape.outputs):
        if o[0] == "t":
            stores.setdefault(o[1], []).append(k)
        else:
            direct.append((k, o))

    free: list[int] = []
    n_slots = 0
    slot: dict[int, int] = {}
    live = 0
    peak = 0
    for pos, ins in enumerate(order):
        # arguments read for the last time here release their slots first, so the result
        # may take one of them (a = a op b is fine in C)
        for a in dict.fromkeys(ins.args):
            if a[0] == "t" and last_read.get(a[1]) == pos:
                heapq.heappush(free, slot[a[1]])
                live -= 1
        for d in ins.dst:
            if free:
                slot[d] = heapq.heappop(free)
            else:
                slot[d] = n_slots
                n_slots += 1
            live += 1
        peak = max(peak, live)
        for d in ins.dst:  # results nobody reads again (outputs only) die at once
            if d not in last_read:
                heapq.heappush(free, slot[d])
                live -= 1
    return Schedule(tape, order, slot, n_slots, peak, stores, direct)


# Chain lengths best_schedule tries (the Stewart joint kernel's allocation in 31 registers
# with constants, loads + stores per call, tape's order / depth-first rank: chain 3 2,274 /
# 2,242, 4 2,146 / 2,012, 5 2,256 / 2,160, 6 2,223 / 2,315)
_CHAINS = (3, 4, 5, 6)


def best_schedule(tape: Tape, registers: int, constants: bool = False, fuse: bool = False) -> Schedule:
    """Of the pressure schedules with each of _CHAINS and either last tie-break (the tape's
    order, depth_first_rank), the one whose allocation in `registers` takes the fewest
    operations, loads and stores (operations vary with `fuse`: how many multiply-accumulates
    the order allows); the first of equals (deterministic). Worth it where the allocation
    is what the compiler does (arm-none-eabi-gcc with constants in registers: within 1% of
    the instructions); the price is 8 schedules and allocations (about 1 s for the
    Stewart's). Schedules equal to one already allocated are not allocated again: a rank
    in the tape's order breaks ties as the tape's order does (a URDF chain's ABA is
    depth-first already: half of the 30-joint chain's eight are skipped), and two chain
    lengths may give one order."""
    rank = depth_first_rank(tape)
    in_tape_order = all(a < b for a, b in zip(rank, rank[1:]))
    best, cost = None, None
    seen: set[tuple] = set()
    for r in (None,) if in_tape_order else (None, rank):
        for chain in _CHAINS:
            s = schedule(tape, True, chain, r)
            key = tuple(map(id, s.order))  # the tape's own Instr objects
            if key in seen:
                continue
            seen.add(key)
            a = allocate(s, registers, constants, fuse)
            if cost is None or a.ops + a.loads + a.spills < cost:
                best, cost = s, a.ops + a.loads + a.spills
    return best


@dataclass
class Allocation:
    """The schedule's values placed in `registers` C variables (r0 ..) and spill memory
    (m[0] ..): `steps` in program order, each one of
      ("ld", reg, (kind, k))                   a register loaded from in[k], a spill slot m[k]
                                               (kind "m"), an output written before, out[k],
                                               or a constant k (kind "c")
      ("st", slot, reg)                        a register's value kept in a spill slot
      ("op", instr, operands, dst regs)        operands: ("r", reg) or ("c", value)
    Every register holds at most one value at a time and no more than `registers` are live,
    so a compiler that keeps each C variable in a machine register spills nothing itself."""
    steps: list[tuple]
    registers: int
    used: int  # registers 0 .. used-1 appear in steps (free ones are taken lowest first)
    n_spill: int
    loads: int
    spills: int
    ops: int = 0  # ("op", ...) steps: the schedule's instructions less the fused multiplications


# A value that is already in memory (an input, or a value stored before) leaves a register
# for the price of one later load; one computed here costs a store as well. Weighing the
# distance to its next read by 2 for the first kind: 1,935 -> 1,910 loads and stores per
# call on the Stewart joint kernel with 27 registers.
_CLEAN_WEIGHT = 2


def _doubled(ins: Instr) -> Instr:
    """`mul(2, x)` as `add(x, x)`, else ins."""
    if ins.op == "mul" and ("c", 2.0) in ins.args and len(ins.args) == 2:
        x = ins.args[1] if ins.args[0] == ("c", 2.0) else ins.args[0]
        return dataclasses.replace(ins, op="add", args=(x, x))
    return ins


# Multiply-accumulate instructions, rounded as the multiplication and the addition apart
# (chained, as the Cortex-M4F's VMLA, VMLS and VNMLS are): args (acc, a, b)
FUSED = {"mla": "acc + a*b", "mls": "acc - a*b", "nmls": "a*b - acc"}


def _fused(order: list[Instr], stores: dict[int, list[int]]) -> list[Instr]:
    """The order with each `mul` whose only reader is an add or sub merged into that reader
    as one FUSED instruction, where the reader's other operand (the accumulator) is read
    for the last time there (the instruction overwrites it). The multiplication moves to
    the reader's place; its result is neither an output nor read elsewhere. Values are
    unchanged: both roundings remain."""
    reads: dict[tuple, int] = {}
    for ins in order:
        for a in ins.args:
            reads[a] = reads.get(a, 0) + 1
    made = {d: (p, ins) for p, ins in enumerate(order) for d in ins.dst}
    plan: dict[int, tuple[int, Instr]] = {}  # reader position -> (mul position, fused)
    for j, ins in enumerate(order):
        if ins.op not in ("add", "sub") or len(ins.args) != 2:
            continue
        best = None
        for side, m in enumerate(ins.args):
            if m[0] != "t" or reads[m] != 1 or m[1] in stores:
                continue
            i, mul = made[m[1]]
            acc = ins.args[1 - side]
            if mul.op != "mul" or len(mul.args) != 2 or acc == m or acc in mul.args:
                continue
            op = "mla" if ins.op == "add" else ("mls" if side == 1 else "nmls")
            if best is None or i > best[0]:  # the latest product: its operands live least longer
                best = (i, Instr(op, ins.dst, (acc, *mul.args)))
        if best:
            plan[j] = best
    while True:  # the accumulator must be read last where it is overwritten
        moved = {i for i, _ in plan.values()}
        out = [(j, plan[j][1] if j in plan else ins) for j, ins in enumerate(order) if j not in moved]
        last = {}
        for j, ins in out:
            for a in ins.args:
                last[a] = j
        bad = [j for j, ins in out if j in plan and last[ins.args[0]] != j]
        if not bad:
            return [ins for _, ins in out]
        for j in bad:  # dropping moves reads earlier: the others stay valid
            del plan[j]


def allocate(sched: Schedule, registers: int, constants: bool = False, fuse: bool = False) -> Allocation:
    """Furthest-next-use register allocation (Belady) over the schedule's order: when all
    registers are taken, the value read again last leaves (distances to values already in
    memory weighed by _CLEAN_WEIGHT); a computed value is stored when it first leaves, an
    input is read again from in[]. With `constants`, constant operands take registers too
    (loaded as ("ld", reg, ("c", value))), as inputs do, and 2*x is taken as x + x (both
    exact; no register for the 2). With `fuse`, multiply-accumulates as _fused makes them;
    the result takes the accumulator's register. Deterministic: ties go to the highest
    register number, free registers and spill slots are taken lowest first. Kept in
    sched.allocations (the steps are not to be changed by the caller)."""
    done = sched.allocations.get((registers, constants, fuse))
    if done is None:
        done = sched.allocations[registers, constants, fuse] = _allocate(sched, registers, constants, fuse)
    return done


def _allocate(sched: Schedule, registers: int, constants: bool, fuse: bool) -> Allocation:
    order = [_doubled(ins) for ins in sched.order] if constants else sched.order
    if fuse:  # the accumulator's register is the result's: every operand must have one
        if not constants:
            raise ValueError("allocate: fuse needs constants in registers")
        order = _fused(order, sched.stores)
    kinds = ("t", "in", "c") if constants else ("t", "in")
    uses, next_use, first_use, last_use = _register_uses(order, kinds)
    # a computed output is in out[] already: it leaves a register without a store
    ra = _Registers(registers, {("t", d): ks[0] for d, ks in sched.stores.items()})
    for p, ins in enumerate(order):
        ra.pos = p
        ra.load(uses[p], next_use[p])
        operands = tuple(("r", ra.where[a]) if a[0] in kinds else a for a in ins.args)
        ra.release([a for a in uses[p] if last_use[a] == p])  # the register is free for the result
        dst = ra.results(ins, operands, first_use)
        ra.steps.append(("op", ins, operands, tuple(dst)))
        for d, r in zip(ins.dst, dst):  # results only stored to out[] die at once
            if ("t", d) not in last_use:
                ra.drop(("t", d))
    steps = ra.steps
    return Allocation(steps, registers, _registers_used(steps), ra.n_mem, ra.loads, ra.spills,
                      sum(st[0] == "op" for st in steps))


_NEVER = 1 << 60  # the next use of a value read no more


def _register_uses(order: list[Instr], kinds: tuple) -> tuple:
    """Per instruction its distinct register operands and the next use of each after it;
    each value's first use and its last."""
    uses = [list(dict.fromkeys(a for a in ins.args if a[0] in kinds)) for ins in order]
    nxt: dict[tuple, int] = {}
    next_use: list[list[int]] = [[] for _ in order]
    for p in range(len(order) - 1, -1, -1):
        next_use[p] = [nxt.get(a, _NEVER) for a in uses[p]]
        for a in uses[p]:
            nxt[a] = p
    last_use: dict[tuple, int] = {}
    for p, us in enumerate(uses):
        for a in us:
            last_use[a] = p
    return uses, next_use, nxt, last_use


def _registers_used(steps: list[tuple]) -> int:
    """How many registers the steps touch (the highest number, plus one)."""
    return 1 + max((r for st in steps for r in ((st[1],) if st[0] == "ld" else (st[2],) if st[0] == "st"
                                                else (*st[3], *(o[1] for o in st[2] if o[0] == "r")))), default=-1)


class _Registers:
    """allocate's state: which value each register holds and when it is read next, the
    spill slots, and the steps so far."""

    def __init__(self, registers: int, outs: dict):
        self.where: dict[tuple, int] = {}  # value -> register
        self.held: dict[int, tuple] = {}  # register -> value
        self.when: dict[tuple, int] = {}  # value in a register -> its next use
        self.mem: dict[tuple, int] = {}  # computed value -> spill slot
        self.free_regs = list(range(registers))
        heapq.heapify(self.free_regs)
        self.free_mem: list[int] = []
        self.n_mem = 0
        self.steps: list[tuple] = []
        self.loads = self.spills = 0
        self.outs = outs  # computed output -> its out[] position
        self.pos = 0  # the instruction being placed (read by cost)

    def victim(self, protect) -> int:
        """The register whose value (not in protect) is read again last, distances to values
        already in memory weighed by _CLEAN_WEIGHT; of equals the highest register. (The
        loop written out: allocation's innermost, a max with a key costs twice as much.)"""
        pos, when, mem, outs = self.pos, self.when, self.mem, self.outs
        best, far = -1, 0
        for r, v in self.held.items():
            if v in protect:
                continue
            d = when[v] - pos
            if v[0] != "t" or v in mem or v in outs:
                d *= _CLEAN_WEIGHT
            if best < 0 or d > far or (d == far and r > best):
                best, far = r, d
        return best

    def take(self, protect) -> int:
        """A free register, else the victim, stored first if it exists nowhere else."""
        if self.free_regs:
            return heapq.heappop(self.free_regs)
        r = self.victim(protect)
        v = self.held.pop(r)
        del self.where[v], self.when[v]
        if v[0] == "t" and v not in self.mem and v not in self.outs:
            if self.free_mem:
                s = heapq.heappop(self.free_mem)
            else:
                s, self.n_mem = self.n_mem, self.n_mem + 1
            self.mem[v] = s
            self.steps.append(("st", s, r))
            self.spills += 1
        return r

    def load(self, us: list, next_uses: list[int]) -> None:
        """Bring the operands us into registers (none pushes out another), noting their next uses."""
        protect = set(us)
        for a, nu in zip(us, next_uses):
            if a not in self.where:
                r = self.take(protect)
                src = a if a[0] in ("in", "c") else ("out", self.outs[a]) if a in self.outs else ("m", self.mem[a])
                self.steps.append(("ld", r, src))
                self.loads += 1
                self.where[a], self.held[r] = r, a
            self.when[a] = nu

    def release(self, dead: list) -> None:
        """Free the registers and spill slots of values read for the last time."""
        for a in dead:
            r = self.where.pop(a)
            del self.held[r], self.when[a]
            heapq.heappush(self.free_regs, r)
            if a in self.mem:
                heapq.heappush(self.free_mem, self.mem.pop(a))

    def results(self, ins: Instr, operands: tuple, first_use: dict) -> list[int]:
        """The registers ins's results take (a fused one the accumulator's)."""
        dst = []
        for d in ins.dst:  # a second result (sincos) must not push out the first
            v = ("t", d)
            if ins.op in FUSED:  # into the accumulator's register (_fused: read last here)
                r = operands[0][1]
                self.free_regs.remove(r)
                heapq.heapify(self.free_regs)
            else:
                r = self.take({("t", x) for x in ins.dst})
            dst.append(r)
            self.where[v], self.held[r], self.when[v] = r, v, first_use.get(v, _NEVER)
        return dst

    def drop(self, v) -> None:
        """Free the register of a value nobody reads."""
        r = self.where.pop(v)
        del self.held[r], self.when[v]
        heapq.heappush(self.free_regs, r)
