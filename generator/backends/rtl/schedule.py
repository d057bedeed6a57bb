"""Cycle schedules of a hardware program (backends.fixed.ops) for the two RTL variants.

Cycle 0 is the cycle in which a kernel's inputs are on its ports (the accept cycle of the
pipelined variant, the first busy cycle of the shared one). An operator issued in cycle t
reads its operands during t; its result is in the operator's output register from cycle
t + LATENCY[kind] on (for one cycle: the operators are free-running pipelines). LATENCY is
the op table's (backends.fixed.ops.OPS), from which ops.v.j2's pipelines are generated.

* `pipeline`: every operator its own instance, a new input vector every clock. Each op
  starts as soon as its operands are ready (ASAP) or as late as its readers allow (ALAP),
  whichever needs fewer delay-line bits; values read later than they are ready go
  through delay lines (one shift register per value, tapped by its readers). The latency
  is the critical path: max over outputs of the ready cycle (at least 1).
* `shared`: a fixed number of units per operator class (at most K multipliers), a list
  schedule in program order (the C schedule's register-pressure order, so the values live
  at once stay few) under the units' issue limits; then registers: a value read only in
  the cycle it appears is taken from the unit's output (bypass), an output lives in its
  output register, anything else in a register of a shared pool bound by the left-edge
  rule (the fewest registers for the schedule), preferring a register the same unit
  wrote before (smaller write multiplexers).

Both are deterministic: ties go to the lower op id.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..fixed.ops import LATENCY, HwProgram  # noqa: F401 (LATENCY: the op table's, re-exported)

CLASSES = ("mul", "add", "div", "sqrt", "tred", "tsel")


def _readers(hp: HwProgram) -> dict[tuple, list[int]]:
    rd: dict[tuple, list[int]] = {}
    for op in hp.ops:
        for s in dict.fromkeys(op.srcs):
            rd.setdefault(s, []).append(op.id)
    return rd


def _width(hp: HwProgram, ref: tuple) -> int:
    return 32 if ref[0] == "in" else hp.ops[ref[1]].widths[ref[2]]


@dataclass
class PipeSchedule:
    start: list[int]
    latency: int  # cycles from the accept cycle to the cycle the outputs are valid
    ready: dict[tuple, int]
    depth: dict[tuple, int]  # delay-line length per value (0: none)
    delay_bits: int
    policy: str
    lat: dict = field(default_factory=lambda: dict(LATENCY))


def pipeline(hp: HwProgram, lat: dict | None = None) -> PipeSchedule:
    lat = dict(LATENCY, **(lat or {}))
    n = len(hp.ops)

    def rdy(ref, start):
        return 0 if ref[0] == "in" else start[ref[1]] + lat[hp.ops[ref[1]].kind]

    asap = [0] * n
    for op in hp.ops:  # ops are in topological order
        asap[op.id] = max((rdy(s, asap) for s in op.srcs), default=0)
    out_refs = [o for o in hp.outputs if o[0] != "c"]
    T = max([rdy(o, asap) for o in out_refs] + [1])
    readers = _readers(hp)
    alap = [0] * n
    is_out = {o for o in out_refs}
    for op in reversed(hp.ops):
        late = [T - lat[op.kind]] if any(("h", op.id, j) in is_out for j in range(op.nres)) else []
        for j in range(op.nres):
            late += [alap[r] - lat[op.kind] for r in readers.get(("h", op.id, j), ())]
        alap[op.id] = min(late) if late else asap[op.id]

    def cost(start):
        depth: dict[tuple, int] = {}
        refs = [("in", k) for k in range(hp.n_in)] + [("h", op.id, j) for op in hp.ops for j in range(op.nres)]
        bits = 0
        for ref in refs:
            r = rdy(ref, start)
            need = max((start[c] - r for c in readers.get(ref, ())), default=0)
            if ref in is_out:
                need = max(need, T - r)
            depth[ref] = need
            bits += need * _width(hp, ref)
        return bits, depth

    best = None
    for name, start in (("asap", asap), ("alap", alap)):
        bits, depth = cost(start)
        if best is None or bits < best[0]:
            best = (bits, depth, name, start)
    bits, depth, name, start = best
    ready = {("h", op.id, j): start[op.id] + lat[op.kind] for op in hp.ops for j in range(op.nres)}
    ready.update({("in", k): 0 for k in range(hp.n_in)})
    return PipeSchedule(list(start), T, ready, depth, bits, name, lat)


@dataclass
class SharedSchedule:
    units: dict[str, int]  # class -> number of units
    issue: list[int]  # per op: cycle
    unit: list[int]  # per op: unit index within its class
    cycles: int  # busy cycles: ops issue and results appear in 0 .. cycles - 1
    ready: dict[tuple, int]
    # where a reader finds a value: per (ref, cycle) -> ("bus", cls, unit, j) | ("reg", r) |
    # ("out", k) | ("in", k)
    reg_of: dict[tuple, int]  # value -> pool register
    out_of: dict[tuple, int]  # value -> output register (first output it is)
    n_regs: int
    lat: dict = field(default_factory=lambda: dict(LATENCY))

    def source(self, ref: tuple, t: int) -> tuple:
        if ref[0] == "in":
            return ref
        if self.ready[ref] == t:
            return ("bus", ref)
        if ref in self.out_of:
            return ("out", self.out_of[ref])
        return ("reg", self.reg_of[ref])


def default_units(hp: HwProgram, multipliers: int, adders: int | None = None) -> dict[str, int]:
    counts = hp.counts()
    units = {"mul": multipliers, "add": adders if adders is not None else multipliers}
    for c in ("div", "sqrt", "tred", "tsel"):
        if counts.get(c):
            units[c] = 1
    return {c: units[c] for c in CLASSES if counts.get(c) and c in units}


def shared(hp: HwProgram, units: dict[str, int], lat: dict | None = None) -> SharedSchedule:
    lat = dict(LATENCY, **(lat or {}))
    n = len(hp.ops)
    for op in hp.ops:
        if units.get(op.kind, 0) < 1:
            raise ValueError(f"no unit for {op.kind} operations")
    readers = _readers(hp)
    waiting = [len({s for s in op.srcs if s[0] == "h"}) for op in hp.ops]
    est = [0] * n
    issue = [-1] * n
    unit = [-1] * n
    pending: list[tuple[int, int]] = [(0, op.id) for op in hp.ops if waiting[op.id] == 0]
    heapq.heapify(pending)
    ready_q: dict[str, list[int]] = {c: [] for c in units}
    done = 0
    t = 0
    while done < n:
        while pending and pending[0][0] <= t:
            _, i = heapq.heappop(pending)
            heapq.heappush(ready_q[hp.ops[i].kind], i)
        for c, q in ready_q.items():
            for u in range(units[c]):
                if not q:
                    break
                i = heapq.heappop(q)
                issue[i], unit[i] = t, u
                done += 1
                r = t + lat[c]
                op = hp.ops[i]
                for j in range(op.nres):
                    for rd in readers.get(("h", i, j), ()):
                        est[rd] = max(est[rd], r)
                for rd in dict.fromkeys(x for j in range(op.nres) for x in readers.get(("h", i, j), ())):
                    waiting[rd] -= len({s for s in hp.ops[rd].srcs if s[0] == "h" and s[1] == i})
                    if waiting[rd] == 0:
                        heapq.heappush(pending, (max(est[rd], t + 1), rd))
        t += 1
    ready = {("h", op.id, j): issue[op.id] + lat[op.kind] for op in hp.ops for j in range(op.nres)}
    ready.update({("in", k): 0 for k in range(hp.n_in)})
    cycles = max([r + 1 for r in ready.values()] + [1])

    out_of: dict[tuple, int] = {}
    for k, o in enumerate(hp.outputs):
        if o[0] == "h" and o not in out_of:
            out_of[o] = k
    # pool registers for values read after the cycle they appear (outputs excepted)
    intervals = []
    for op in hp.ops:
        for j in range(op.nres):
            ref = ("h", op.id, j)
            last = max((issue[c] for c in readers.get(ref, ())), default=-1)
            if last > ready[ref] and ref not in out_of:
                intervals.append((ready[ref] + 1, last, op.id, ref))
    intervals.sort()
    busy: list[tuple[int, int]] = []  # (end, reg)
    free: list[int] = []
    writers: dict[int, set] = {}
    reg_of: dict[tuple, int] = {}
    n_regs = 0
    for s, e, i, ref in intervals:
        while busy and busy[0][0] < s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        who = (hp.ops[i].kind, unit[i])
        pick = None
        if free:
            for r in sorted(free)[:64]:
                if who in writers.get(r, ()):
                    pick = r
                    break
            if pick is None:
                pick = heapq.heappop(free)
            else:
                free.remove(pick)
                heapq.heapify(free)
        else:
            pick = n_regs
            n_regs += 1
        writers.setdefault(pick, set()).add(who)
        reg_of[ref] = pick
        heapq.heappush(busy, (e, pick))
    return SharedSchedule(dict(units), issue, unit, cycles, ready, reg_of, out_of, n_regs, lat)
