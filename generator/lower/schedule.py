"""Scheduling a tape into straight-line code: an order and work slots.

Outputs are stored as soon as they are computed, so they do not stay live to the end. A
value's slot is released after its last reader and reused by the next value (lowest free
slot first, so the result is deterministic). `peak_live` is the most values alive at once:
what the register allocator of the target has to hold.
"""
from __future__ import annotations

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


def order_for_pressure(tape: Tape) -> list[Instr]:
    """List scheduling that keeps few values live: among the instructions whose operands
    are ready, take the one that frees the most values (operands read for the last time)
    less the values it creates; ties go to the one reading the most recent value (finish
    what was started), then to the tape order (deterministic). Inputs and constants live
    in memory and cost no register."""
    instrs = tape.instrs
    n = len(instrs)
    ops = [tuple(dict.fromkeys(a[1] for a in ins.args if a[0] == "t")) for ins in instrs]
    ndst = [len(ins.dst) for ins in instrs]
    nt = len(tape.atoms)  # temps are numbered 0 .. nt-1
    readers: list[list[int]] = [[] for _ in range(nt)]
    for k, vs in enumerate(ops):
        for v in vs:
            readers[v].append(k)
    remaining = [len(r) for r in readers]
    waiting = [len(vs) for vs in ops]
    born = [0] * nt  # value -> step at which it was computed

    def score(k: int) -> tuple:
        kills = 0
        recent = -1
        for v in ops[k]:
            if remaining[v] == 1:
                kills += 1
            b = born[v]
            if b > recent:
                recent = b
        return (ndst[k] - kills, -recent, k)  # heapq pops the smallest

    heap = [(ndst[k], 1, k) for k in range(n) if waiting[k] == 0]
    heapq.heapify(heap)
    done = [False] * n
    order: list[Instr] = []
    push, pop = heapq.heappush, heapq.heappop
    step = 0
    while heap:
        sc = pop(heap)
        k = sc[2]
        if done[k]:
            continue
        if score(k) != sc:  # stale: priorities only improve, the better entry is queued
            continue
        done[k] = True
        order.append(instrs[k])
        step += 1
        for v in ops[k]:
            remaining[v] -= 1
            if remaining[v] == 1:  # its last reader now frees it: better priority
                for r in readers[v]:
                    if not done[r]:
                        if waiting[r] == 0:
                            push(heap, score(r))
                        break
        for d in instrs[k].dst:
            born[d] = step
            for r in readers[d]:
                waiting[r] -= 1
                if waiting[r] == 0:
                    push(heap, score(r))
    if len(order) != n:  # pragma: no cover - the tape is SSA, so everything gets ready
        raise AssertionError("scheduling left instructions behind")
    return order


def schedule(tape: Tape, pressure: bool = True) -> Schedule:
    order = order_for_pressure(tape) if pressure else list(tape.instrs)
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
