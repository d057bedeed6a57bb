"""Cycle schedules of a hardware program (backends.fixed.ops) for the two RTL variants.

Cycle 0 is the cycle in which a kernel's inputs are on its ports (the accept cycle of the
pipelined variant, the first busy cycle of the shared one). An operator issued in cycle t
reads its operands during t; its result is in the operator's output register from cycle
t + LATENCY[kind] on (for one cycle: the operators are free-running pipelines). LATENCY is
the op table's (backends.fixed.ops.OPS), from which ops.v.j2's pipelines are generated.

* `pipeline`: every operator its own instance, a new input vector every clock. Values
  read later than they are ready go through delay lines: one shift register per value
  (an input included), as long as its last reader needs, tapped by every reader. The
  start cycles minimise the delay-line bits (sum of width x length) exactly, by a linear
  program between ASAP and ALAP (scipy's HiGHS; deterministic for one scipy version),
  with ASAP and ALAP themselves as fallbacks. `delay_plan` then builds the lines: shift
  registers, or (delay_lines=memory) ring buffers in memories for the long segments. The latency is the critical path: max over
  outputs of the ASAP ready cycle (at least 1). Outputs either all leave in that cycle
  (aligned: values finished early are held) or each in the cycle it is computed (early:
  out_k_ap_vld marks it; no holding), which is what makes large kernels cheap.
* `shared`: a fixed number of units per operator class (at most K multipliers), a list
  schedule in program order (the C schedule's register-pressure order, so the values live
  at once stay few) under the units' issue limits; then registers: a value read only in
  the cycle it appears is taken from the unit's output (bypass), an output lives in its
  output register, anything else in a register of a shared pool bound by the left-edge
  rule (the fewest registers for the schedule), preferring a register already read by
  the same unit inputs (smaller input multiplexers), then one the same unit wrote before
  (smaller write multiplexers). The shared variant's divider, square root and
  trigonometric reduction are iterative (ops.v.j2 *_iter: one datapath stepped in place, not a
  pipeline): SHARED_LATENCY gives their latency there, SHARED_INTERVAL the cycles from one
  issue on a unit to the next (the result register is written in the cycle the next
  operation loads, so interval = latency - 1); every other unit takes an operation per cycle.

Both are deterministic: ties go to the lower op id.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..fixed.ops import LATENCY, HwProgram  # noqa: F401 (LATENCY: the op table's, re-exported)

CLASSES = ("mul", "add", "div", "sqrt", "tred", "tsel")
# the shared variant's iterative units (ops.v.j2): the divider and the square root take the
# pipeline's latency (the same steps, one per cycle, on one stage); the reduction runs its
# three products through one multiplier, so it takes 6 cycles instead of 3
# an adder (and a quadrant selection on it) registers its sum before the rounding shift
# and the saturation, for a shorter clock period: 2 cycles
SHARED_LATENCY = dict(LATENCY, tred=6, add=2, tsel=2)
# the shared variant issues a quadrant selection (tsel) on an adder: +-sv or +-cv, shifted
# and saturated, is a sum of one term whose operand and sign the quadrant picks
UNIT_CLASS = {"tsel": "add"}


def unit_class(kind: str) -> str:
    """The class of the shared variant's unit an operation of `kind` is issued on."""
    return UNIT_CLASS.get(kind, kind)


SHARED_INTERVAL = {"div": SHARED_LATENCY["div"] - 1, "sqrt": SHARED_LATENCY["sqrt"] - 1,
                   "tred": SHARED_LATENCY["tred"] - 1}


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
    latency: int  # cycles from the accept cycle to the cycle the outputs are valid (ap_done)
    ready: dict[tuple, int]
    depth: dict[tuple, int]  # delay-line length per value (0: none)
    delay_bits: int
    policy: str
    lat: dict = field(default_factory=lambda: dict(LATENCY))
    out_cycle: list[int] = field(default_factory=list)  # per output: the cycle it is on its port
    outputs: str = "aligned"
    taps: dict = field(default_factory=dict)  # per value: the delays its readers (and holding) read, ascending


def _ready(hp: HwProgram, lat: dict, ref: tuple, start) -> int:
    return 0 if ref[0] != "h" else start[ref[1]] + lat[hp.ops[ref[1]].kind]


def _values(hp: HwProgram) -> list[tuple]:
    return [("in", k) for k in range(hp.n_in)] + [("h", op.id, j) for op in hp.ops for j in range(op.nres)]


def _taps(hp, lat, start, readers, hold) -> dict[tuple, tuple[int, ...]]:
    """Per value: the delays (> 0) at which its readers take it, or its holding ends."""
    taps = {}
    for ref in _values(hp):
        r = _ready(hp, lat, ref, start)
        taps[ref] = tuple(sorted(({start[c] - r for c in readers.get(ref, ())} | {hold.get(ref, r) - r}) - {0}))
    return taps


def _delay_bits(hp, lat, start, readers, hold) -> tuple[int, dict]:
    """Delay-line bits of a schedule: one shift register per value, as long as its last
    reader needs (or until `hold[ref]`, the cycle an aligned output leaves)."""
    depth: dict[tuple, int] = {}
    bits = 0
    for ref, t in _taps(hp, lat, start, readers, hold).items():
        depth[ref] = t[-1] if t else 0
        bits += depth[ref] * _width(hp, ref)
    return bits, depth


def _min_register_starts(hp, lat, asap, alap, readers, hold) -> list[int] | None:
    """Start cycles that minimise the delay-line bits exactly: a linear program over the
    start cycles s_i and the last-use cycles D_v of values, min sum w_v (D_v - ready_v)
    subject to s_j >= ready_v and D_v >= s_j for every reader j of v, D_v >= hold_v.
    Every constraint is a difference of two variables, so the constraint matrix is
    totally unimodular and a simplex vertex is integral (checked; None if not)."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    n = len(hp.ops)
    vals = [v for v in _values(hp) if v in readers or v in hold]
    col = {v: n + i for i, v in enumerate(vals)}
    nv = n + len(vals)
    c = np.zeros(nv)
    lo = np.zeros(nv)
    hi = np.full(nv, np.inf)
    rows, cols, coef, rhs = [], [], [], []

    def le(i, j, b):  # x_i - x_j <= b
        k = len(rhs)
        rows.extend((k, k))
        cols.extend((i, j))
        coef.extend((1.0, -1.0))
        rhs.append(b)

    for op in hp.ops:
        lo[op.id], hi[op.id] = asap[op.id], alap[op.id]
    for v in vals:
        w = _width(hp, v)
        d = col[v]
        c[d] += w
        if v[0] == "h":
            i, L = v[1], lat[hp.ops[v[1]].kind]
            c[i] -= w
            le(i, d, -L)  # D_v >= ready_v
            for j in readers.get(v, ()):
                le(i, j, -L)  # s_j >= ready_v
        for j in readers.get(v, ()):
            le(j, d, 0)  # D_v >= s_j
        if v in hold:
            lo[d] = hold[v]
    A = coo_matrix((coef, (rows, cols)), shape=(len(rhs), nv)).tocsr()
    res = linprog(c, A_ub=A, b_ub=np.array(rhs), bounds=np.column_stack([lo, hi]), method="highs-ds")
    if res.status != 0 or res.x is None:
        return None
    x = res.x[:n]
    s = np.round(x)
    if np.abs(x - s).max() > 1e-6:
        return None
    start = [int(t) for t in s]
    for op in hp.ops:
        if any(start[op.id] < _ready(hp, lat, r, start) for r in op.srcs):
            return None
    return start


def pipeline(hp: HwProgram, lat: dict | None = None, outputs: str = "aligned",
             min_registers: bool = True) -> PipeSchedule:
    """outputs: "aligned" (every output on its port in the cycle `latency`) or "early"
    (each output in the cycle it is computed; its out_k_ap_vld says when).
    min_registers=False: only the ASAP/ALAP choice (the schedule before the linear program,
    kept for the bench's side-by-side count)."""
    if outputs not in ("aligned", "early"):
        raise ValueError(f"outputs={outputs!r}: must be aligned or early")
    lat = dict(LATENCY, **(lat or {}))
    n = len(hp.ops)
    asap = [0] * n
    for op in hp.ops:  # ops are in topological order
        asap[op.id] = max((_ready(hp, lat, s, asap) for s in op.srcs), default=0)
    out_refs = [o for o in hp.outputs if o[0] != "c"]
    T = max([_ready(hp, lat, o, asap) for o in out_refs] + [1])
    readers = _readers(hp)
    alap = [0] * n
    is_out = set(out_refs)
    for op in reversed(hp.ops):
        late = [T - lat[op.kind]]
        for j in range(op.nres):
            late += [alap[r] - lat[op.kind] for r in readers.get(("h", op.id, j), ())]
        alap[op.id] = min(late)
    hold = {o: T for o in is_out} if outputs == "aligned" else {}

    cands = [("asap", asap), ("alap", alap)]
    best_lp = _min_register_starts(hp, lat, asap, alap, readers, hold) if min_registers else None
    if best_lp is not None:
        cands.insert(0, ("min-registers", best_lp))
    best = None
    for name, start in cands:
        bits, depth = _delay_bits(hp, lat, start, readers, hold)
        if best is None or bits < best[0]:
            best = (bits, depth, name, start)
    bits, depth, name, start = best
    ready = {v: _ready(hp, lat, v, start) for v in _values(hp)}
    out_cycle = [T if outputs == "aligned" else (ready[o] if o[0] != "c" else 0) for o in hp.outputs]
    taps = _taps(hp, lat, start, readers, hold)
    return PipeSchedule(list(start), T, ready, depth, bits, name, lat, out_cycle, outputs, taps)


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
    lat: dict = field(default_factory=lambda: dict(SHARED_LATENCY))

    def source(self, ref: tuple, t: int) -> tuple:
        if ref[0] == "in":
            return ref
        if self.ready[ref] == t:
            return ("bus", ref)
        if ref in self.out_of:
            return ("out", self.out_of[ref])
        return ("reg", self.reg_of[ref])


def default_units(hp: HwProgram, multipliers: int, adders: int | None = None, dividers: int = 1) -> dict[str, int]:
    """Units per class of the shared variant: at most as many dividers as divisions (a
    divider more would never be issued on); one square root and one trig reduction."""
    counts = hp.counts()
    units = {"mul": multipliers, "add": adders if adders is not None else multipliers}
    for c in ("div", "sqrt", "tred"):
        if counts.get(c):
            units[c] = min(dividers, counts[c]) if c == "div" else 1
    need = {unit_class(k) for k in counts if counts[k]}
    return {c: units[c] for c in CLASSES if c in need and c in units}


def shared(hp: HwProgram, units: dict[str, int], lat: dict | None = None,
           interval: dict | None = None) -> SharedSchedule:
    """Schedule hp on `units` shared operators and pool the registers its values wait in."""
    lat = dict(SHARED_LATENCY, **(lat or {}))
    interval = dict(SHARED_INTERVAL, **(interval or {}))
    for op in hp.ops:
        if units.get(unit_class(op.kind), 0) < 1:
            raise ValueError(f"no unit for {op.kind} operations")
    readers = _readers(hp)
    issue, unit = _list_schedule(hp, units, lat, interval, readers)
    ready = {("h", op.id, j): issue[op.id] + lat[op.kind] for op in hp.ops for j in range(op.nres)}
    ready.update({("in", k): 0 for k in range(hp.n_in)})
    cycles = max([r + 1 for r in ready.values()] + [1])

    out_of: dict[tuple, int] = {}
    for k, o in enumerate(hp.outputs):
        if o[0] == "h" and o not in out_of:
            out_of[o] = k
    reg_of, n_regs = _pool_registers(hp, readers, issue, unit, ready, out_of)
    return SharedSchedule(dict(units), issue, unit, cycles, ready, reg_of, out_of, n_regs, lat)


def _list_schedule(hp: HwProgram, units: dict[str, int], lat: dict, interval: dict,
                   readers: dict) -> tuple[list[int], list[int]]:
    """(issue cycle, unit) of each operation: each cycle, the ready ones in id order on the free units."""
    free_at: dict[tuple, int] = {}  # (class, unit) -> first cycle it takes an operation
    n = len(hp.ops)
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
            heapq.heappush(ready_q[unit_class(hp.ops[i].kind)], i)
        for c, q in ready_q.items():
            for u in range(units[c]):
                if not q:
                    break
                if free_at.get((c, u), 0) > t:
                    continue
                free_at[(c, u)] = t + interval.get(c, 1)
                i = heapq.heappop(q)
                issue[i], unit[i] = t, u
                done += 1
                op = hp.ops[i]
                r = t + lat[op.kind]
                for j in range(op.nres):
                    for rd in readers.get(("h", i, j), ()):
                        est[rd] = max(est[rd], r)
                for rd in dict.fromkeys(x for j in range(op.nres) for x in readers.get(("h", i, j), ())):
                    waiting[rd] -= len({s for s in hp.ops[rd].srcs if s[0] == "h" and s[1] == i})
                    if waiting[rd] == 0:
                        heapq.heappush(pending, (max(est[rd], t + 1), rd))
        t += 1
    return issue, unit


def _pool_registers(hp: HwProgram, readers: dict, issue: list[int], unit: list[int], ready: dict,
                    out_of: dict) -> tuple[dict[tuple, int], int]:
    """Pool registers for values read after the cycle they appear (outputs excepted): (reg_of, n_regs)."""
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
    ports: dict[int, set] = {}  # register -> the unit operand inputs (class, unit, position) reading it
    for s, e, i, ref in intervals:
        while busy and busy[0][0] < s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        who = (unit_class(hp.ops[i].kind), unit[i])
        mine = {(unit_class(hp.ops[c].kind), unit[c], k) for c in readers.get(ref, ()) if issue[c] > ready[ref]
                for k, x in enumerate(hp.ops[c].srcs) if x == ref}
        if free:
            # the free register whose readers are most alike (its value joins the fewest new
            # unit input multiplexers), then one the same unit wrote (fewer write multiplexers)
            pick = min(sorted(free), key=lambda r: (-len(mine & ports.get(r, set())), who not in writers.get(r, ())))
            free.remove(pick)
            heapq.heapify(free)
        else:
            pick = n_regs
            n_regs += 1
        writers.setdefault(pick, set()).add(who)
        ports.setdefault(pick, set()).update(mine)
        reg_of[ref] = pick
        heapq.heappush(busy, (e, pick))
    return reg_of, n_regs


# delay_lines=memory: a segment of a delay line this long or longer is a ring buffer in a
# memory (block RAM on an FPGA), a shorter one stays a shift register of flip-flops. A block
# RAM moves 16 bits a cycle on an iCE40 (256 x 16), whatever the delay, so short segments
# cost block RAMs for few bits: from 16 cycles the four-bar kinematics (const_products=multiply) keeps 6,286 delay
# flip-flop bits in 34 block RAMs (from 12: 3,726 in 46; from 18: 7,886 in 28; from 20: 10,222 in 20).
MEMORY_MIN = 16
MEMORY_MIN_WIDTH = 16
DELAY_LINES = ("memory", "ffs")


@dataclass
class DelayPlan:
    """How a pipelined schedule's delay lines are built. A value's line is cut at the delays
    its readers tap; each segment between two taps is either a flip-flop shift register
    (chains: value, from delay a to delay b) or a part of a ring buffer (memories). The ring
    buffers of one segment length L share one memory, as wide as their values together, of
    depth N (a power of two >= L): written every cycle at the counter's low bits, read at
    the counter minus L - 1 into the memory's output register (block RAM's own), so the
    value read is L cycles old. One counter (pointer_bits wide) addresses every memory."""
    mode: str
    chains: list[tuple[tuple, int, int]]
    memories: list[dict]  # {"length": L, "depth": N, "width": W, "parts": [(value, from delay)]}
    ff_bits: int  # the shift registers' bits and the counter's
    memory_bits: int  # depth x width of the memories
    pointer_bits: int


def delay_plan(hp: HwProgram, ps: PipeSchedule, mode: str = "memory", min_length: int = MEMORY_MIN) -> DelayPlan:
    if mode not in DELAY_LINES:
        raise ValueError(f"delay_lines={mode!r}: must be one of {', '.join(DELAY_LINES)}")
    if min_length < 2:  # a memory's output register is one cycle already
        raise ValueError(f"delay_memory_min={min_length}: must be at least 2")
    segments = [(ref, a, t) for ref in _values(hp) for a, t in zip((0,) + ps.taps.get(ref, ()), ps.taps.get(ref, ()))]
    width: dict[int, int] = {}
    if mode == "memory":
        for ref, a, b in segments:
            if b - a >= min_length:
                width[b - a] = width.get(b - a, 0) + _width(hp, ref)
    # a memory narrower than a block RAM's 16-bit port (a quadrant's 2 bits alone) is left to
    # flip-flops: yosys maps it to depth x width of them, more than its shift register
    mem_len = {L for L, w in width.items() if w >= MEMORY_MIN_WIDTH}
    chains: list[tuple[tuple, int, int]] = []
    groups: dict[int, list[tuple[tuple, int]]] = {}
    for ref, a, b in segments:
        if b - a in mem_len:
            groups.setdefault(b - a, []).append((ref, a))
        elif chains and chains[-1][0] == ref and chains[-1][2] == a:
            chains[-1] = (ref, chains[-1][1], b)
        else:
            chains.append((ref, a, b))
    memories = [{"length": L, "depth": 1 << (L - 1).bit_length(), "width": sum(_width(hp, r) for r, _ in parts),
                 "parts": parts} for L, parts in sorted(groups.items())]
    pointer = max([(m["depth"] - 1).bit_length() for m in memories] + [0])
    ff = sum((b - a) * _width(hp, r) for r, a, b in chains) + pointer
    return DelayPlan(mode, chains, memories, ff, sum(m["depth"] * m["width"] for m in memories), pointer)
