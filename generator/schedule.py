"""Scheduling a tape into straight-line code: an order and work slots.

Outputs are stored as soon as they are computed, so they do not stay live to the end. A
value's slot is released after its last reader and reused by the next value (lowest free
slot first, so the result is deterministic). `peak_live` is the most values alive at once:
what the register allocator of the target has to hold.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from .ir.tape import Instr, Tape


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


def schedule(tape: Tape) -> Schedule:
    order = list(tape.instrs)
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
