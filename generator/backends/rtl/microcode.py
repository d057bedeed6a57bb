"""The microcode variant: the shared variant's units driven by a microcode ROM, their
operands read from a register file in block RAM instead of wide multiplexers.

    HwProgram -> schedule (one issue a cycle, one write a cycle) -> ROM words -> microcode.v.j2

* Cycles as in the shared variant (rtl.schedule): cycle 0 is the first busy cycle, a unit
  issued in cycle t takes its operand fields during t and has its result in its output
  register from t + SHARED_LATENCY[kind] on, the cycle the result is written (its write
  cycle; a trig reduction's quadrant, its second result, one cycle later: the iterative
  unit holds it). The units are the shared variant's (templates/verilog/unit.v.j2, the
  iterative operators of ops.v.j2), so the fixed-point semantics are those of
  backends.fixed.ops through the same Verilog.
* One write port: a cycle writes at most one value, the write-back bus `wd` (a unit's
  result or an input word). The inputs the operations read are written first, one a
  cycle, in the order of their first reader. An operand is read in cycle t from `wd` (the
  value written in t), from `wd1` (written in t - 1) or from the register file (written
  before t - 1: its synchronous read is addressed in t - 1). The file has one copy per
  operand port (two, three when a quadrant select needs its quadrant), written alike, each
  one read port and one write port: a simple dual-port block RAM.
* Schedule: a list schedule in program order (the C schedule's order): each cycle, the
  lowest-numbered operation whose operands are written, whose unit is free (an iterative
  one: SHARED_INTERVAL) and whose write cycles are free. Registers: a value read two or
  more cycles after its write cycle gets a register from its write cycle to its last read,
  bound by the left-edge rule (the fewest for the schedule: the file's depth); a register
  is written again only after its last read (no read and write of one address in a cycle).
* The ROM holds one word per cycle 0 .. cycles: the write (enable, address, bus source,
  output register, whether its overflow flag counts), the register file's read addresses
  for the next cycle's issue, each operand port's source, a go bit per iterative unit and
  the issued unit's fields (shift indices, literals, signs), the units' fields overlaid
  (one unit issues a cycle). It is read synchronously at the next cycle's address, so its
  word for cycle t is in the register `uc` during t.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..fixed.ops import OPS, HwProgram
from .schedule import SHARED_INTERVAL, SHARED_LATENCY, _readers, default_units, unit_class
from .verilog import UNIT_FIELDS, _head, _sbits, _unit_datapath, _unit_inputs, lit

# the operand port (a register file copy) each unit field with an operand reads
PORT_OF = {("mul", "a"): 0, ("mul", "b"): 1, ("add", "a"): 0, ("add", "b"): 1, ("add", "qd"): 2,
           ("div", "a"): 0, ("div", "d"): 1, ("sqrt", "a"): 0, ("tred", "x"): 0}


@dataclass
class MicroSchedule:
    units: dict[str, int]
    issue: list[int]  # per op: cycle
    unit: list[int]  # per op: unit index in its class
    write: dict[tuple, int]  # value (an op's result or a loaded input) -> its write cycle
    reg_of: dict[tuple, int]  # value -> register file address (values read from the file)
    depth: int  # register file words
    cycles: int  # busy cycles 0 .. cycles - 1; ap_done in cycle `cycles`
    out_of: dict[tuple, int]  # computed value -> the output register that holds it
    lat: dict

    def source(self, ref: tuple, t: int) -> int:
        """Where an operand is read in cycle t: 1 the write bus, 2 its copy a cycle old, 0 the file."""
        d = t - self.write[ref]
        assert d >= 0, (ref, t)
        return 1 if d == 0 else 2 if d == 1 else 0


def schedule(hp: HwProgram, units: dict[str, int]) -> MicroSchedule:
    """Issue hp's operations one a cycle on `units`, one value written a cycle; bind registers."""
    lat, interval = dict(SHARED_LATENCY), dict(SHARED_INTERVAL)
    for op in hp.ops:
        if units.get(unit_class(op.kind), 0) < 1:
            raise ValueError(f"no unit for {op.kind} operations")
    readers = _readers(hp)
    first = {s[1]: min(r) for s, r in readers.items() if s[0] == "in"}
    write = {("in", k): t for t, k in enumerate(sorted(first, key=lambda k: (first[k], k)))}
    wbusy = set(write.values())
    issue, unit = _list_schedule(hp, units, lat, interval, write, wbusy)
    out_of: dict[tuple, int] = {}
    for k, o in enumerate(hp.outputs):
        if o[0] == "h" and o not in out_of:
            out_of[o] = k
    reg_of, depth = _bind_registers(hp, readers, issue, write)
    cycles = max(list(write.values()) + [0]) + 1
    return MicroSchedule(dict(units), issue, unit, write, reg_of, depth, cycles, out_of, lat)


def _list_schedule(hp, units, lat, interval, write, wbusy) -> tuple[list[int], list[int]]:
    """(issue cycle, unit) per op; fills `write` with each result's write cycle."""
    n = len(hp.ops)
    issue, unit = [-1] * n, [-1] * n
    free_at: dict[tuple, int] = {}
    left = set(range(n))
    t = 0
    while left:
        for i in sorted(left):
            op = hp.ops[i]
            if any(s not in write or write[s] > t for s in op.srcs):
                continue
            c = unit_class(op.kind)
            u = next((u for u in range(units[c]) if free_at.get((c, u), 0) <= t), None)
            slots = [t + lat[op.kind] + j for j in range(op.nres)]
            if u is None or any(s in wbusy for s in slots):
                continue
            issue[i], unit[i] = t, u
            free_at[(c, u)] = t + interval.get(c, 1)
            for j, s in enumerate(slots):
                write[("h", i, j)] = s
                wbusy.add(s)
            left.discard(i)
            break  # one issue a cycle
        t += 1
    return issue, unit


def _bind_registers(hp, readers, issue, write) -> tuple[dict[tuple, int], int]:
    """Left-edge binding of the values read from the file: live from the write cycle to the
    cycle of the last read's address (its reader's issue - 1)."""
    spans = []
    for ref, w in write.items():
        far = [issue[c] for c in readers.get(ref, ()) if issue[c] - w >= 2]
        if far:
            spans.append((w, max(far) - 1, ref))
    spans.sort(key=lambda s: (s[0], s[1], s[2][0], s[2][1:]))
    free_after: list[int] = []  # per register: its last read cycle
    reg_of = {}
    for s, e, ref in spans:
        r = next((r for r, end in enumerate(free_after) if end < s), None)
        if r is None:
            r = len(free_after)
            free_after.append(e)
        free_after[r] = e
        reg_of[ref] = r
    return reg_of, max(len(free_after), 1)


_VLIT = re.compile(r"(\d+)'s?([bhd])([0-9a-fA-F]+)")


def field_value(v) -> int:
    """A unit field's value as _unit_inputs gives it (an int, or a Verilog literal) as an int."""
    if isinstance(v, int):
        return v
    m = _VLIT.fullmatch(v)
    assert m, v
    return int(m.group(3), {"b": 2, "h": 16, "d": 10}[m.group(2)])


def default_micro_units(hp: HwProgram, dividers: int) -> dict[str, int]:
    """One unit per class (one issue a cycle: a second multiplier would never be busy),
    dividers as asked (an iterative divider takes a division every SHARED_INTERVAL cycles)."""
    return default_units(hp, 1, 1, dividers)


class _Rom:
    """The ROM word's fields: (name, low bit, width) laid out in order, and the words by cycle.
    Fields placed with `overlay` share bits with the other units' (one unit issues a cycle)."""

    def __init__(self):
        self.at: dict[str, tuple[int, int]] = {}
        self.width = 0
        self.words: dict[int, int] = {}

    def add(self, name: str, w: int, base: int | None = None) -> int:
        lo = self.width if base is None else base
        self.at[name] = (lo, w)
        self.width = max(self.width, lo + w)
        return lo + w

    def set(self, t: int, name: str, v: int) -> None:
        lo, w = self.at[name]
        assert t >= 0 and (v < 0 or v >> w == 0), (name, t, v)  # a negative literal: its two's complement
        self.words[t] = self.words.get(t, 0) | ((v & ((1 << w) - 1)) << lo)


def _unit_plan(c: str, ops: list, issued: dict) -> dict:
    """One unit's fields: per field its kind (port p, rom, port-or-rom, go, zero) and width."""

    rows = [a for op in ops for a in issued[op.id]]
    lits = [v for f, v in rows if f == "lit"]
    litw = max([_sbits(v) for v in lits] + [1])
    amounts = {f: sorted({v for g, v in rows if g == f} or {0}) for f, w in UNIT_FIELDS[c] if w == 0}
    width = {f: max(1, (len(v) - 1).bit_length()) for f, v in amounts.items()}
    plan = {}
    for f, w0 in UNIT_FIELDS[c]:
        w = litw if f == "lit" else width.get(f, w0)
        vals = [v for g, v in rows if g == f]
        port = any(isinstance(v, str) and v.startswith("@") for v in vals)
        const = any(not (isinstance(v, str) and v.startswith("@")) for v in vals)
        kind = ("go" if f == "go" else "port+rom" if port and const else "port" if port
                else "rom" if const else "zero")
        plan[f] = (kind, w)
    return {"plan": plan, "amounts": amounts, "width": width, "litw": litw}


def _field_int(f: str, v, amounts: dict) -> int:
    return amounts[f].index(v) if f in amounts else field_value(v)


def _write_sources(hp: HwProgram, ms: MicroSchedule) -> tuple[list[tuple[str, str]], dict[tuple, int]]:
    """The write bus's sources ((value, overflow flag) per index) and each value's index."""
    srcs: list[tuple[str, str]] = []
    at: dict[tuple, int] = {}
    for c in ms.units:
        for u in range(ms.units[c]):
            n = f"{c}{u}"
            at[(c, u, 0)] = len(srcs)
            srcs.append((f"{n}_q", "1'b0" if c == "tred" else f"{n}_o"))
            if c == "tred":
                at[(c, u, 1)] = len(srcs)
                srcs.append((f"{{30'd0, {n}_q1}}", "1'b0"))
    index = {}
    for ref in sorted(ms.write, key=lambda r: ms.write[r]):
        if ref[0] == "in":
            index[ref] = len(srcs)
            srcs.append((f"in_{ref[1]}", "1'b0"))
        else:
            op = hp.ops[ref[1]]
            index[ref] = at[(unit_class(op.kind), ms.unit[op.id], ref[2])]
    return srcs, index


def _layout(hp: HwProgram, ms: MicroSchedule, plans: dict, n_src: int, ports: int) -> _Rom:
    """The ROM's fields: write, read addresses, operand sources, go bits, then the units' fields overlaid."""
    rom = _Rom()
    aw = max(1, (ms.depth - 1).bit_length())
    rom.add("we", 1)
    rom.add("wa", aw)
    rom.add("ws", max(1, (n_src - 1).bit_length()))
    rom.add("ow", max(1, len(hp.outputs).bit_length()))
    rom.add("fe", 1)
    for p in range(ports):
        rom.add(f"ra{p}", aw)
        rom.add(f"rs{p}", 2)
    for n, pl in plans.items():
        if pl["plan"].get("go"):
            rom.add(f"{n}_go", 1)
    base = rom.width
    for n, pl in plans.items():
        at = base
        for f, (kind, w) in pl["plan"].items():
            if kind == "rom":
                at = rom.add(f"{n}_{f}", w, at)
            elif kind == "port+rom":
                at = rom.add(f"{n}_{f}k", 1, at)
                at = rom.add(f"{n}_{f}c", w, at)
    return rom


def _fill(hp: HwProgram, ms: MicroSchedule, rom: _Rom, plans: dict, issued: dict, index: dict) -> None:
    """Every cycle's word: writes, then each issue's go, fields, operand sources and read addresses."""
    for ref, w in ms.write.items():
        rom.set(w, "ws", index[ref])
        if ref in ms.reg_of:
            rom.set(w, "we", 1)
            rom.set(w, "wa", ms.reg_of[ref])
        if ref in ms.out_of:
            rom.set(w, "ow", ms.out_of[ref] + 1)
        if ref[0] == "h" and ref[2] == 0 and hp.ops[ref[1]].flag:
            rom.set(w, "fe", 1)
    for op in hp.ops:
        c, t = unit_class(op.kind), ms.issue[op.id]
        n = f"{c}{ms.unit[op.id]}"
        pl = plans[n]
        for f, v in issued[op.id]:
            kind = pl["plan"][f][0]
            if isinstance(v, str) and v.startswith("@"):
                src, p = op.srcs[int(v[1:])], PORT_OF[(c, f)]
                s = ms.source(src, t)
                rom.set(t, f"rs{p}", s)
                if s == 0:
                    rom.set(t - 1, f"ra{p}", ms.reg_of[src])
            elif kind == "go":
                rom.set(t, f"{n}_go", 1)
            elif kind == "port+rom":
                rom.set(t, f"{n}_{f}k", 1)
                rom.set(t, f"{n}_{f}c", _field_int(f, v, pl["amounts"]))
            else:
                rom.set(t, f"{n}_{f}", _field_int(f, v, pl["amounts"]))


def _unit_context(c: str, u: int, pl: dict, rom: _Rom, ops: list, lut: bool) -> dict:
    """One unit's template values: its fields as wires of the ROM word and the operand ports,
    then the shared variant's datapath (verilog._unit_datapath, templates/verilog/unit.v.j2)."""

    n = f"{c}{u}"

    def sl(name):
        lo, w = rom.at[name]
        return f"uc[{lo + w - 1}:{lo}]" if w > 1 else f"uc[{lo}]"
    wires = []
    for f, (kind, w) in pl["plan"].items():
        port = f"opd{PORT_OF.get((c, f), 0)}" + ("[1:0]" if w == 2 and f == "qd" else "")
        expr = {"go": lambda: sl(f"{n}_go"), "rom": lambda: sl(f"{n}_{f}"), "zero": lambda: f"{w}'d0",
                "port": lambda: port,
                "port+rom": lambda: f"{sl(f'{n}_{f}k')} ? {sl(f'{n}_{f}c')} : {port}"}[kind]()
        wires.append((w, f, expr))
    am = {f: pl["amounts"].get(f, [0]) for f in ("s", "sha", "shb", "k")}
    ex, pd = _unit_datapath(c, n, am, pl["width"], pl["litw"])
    return {"n": n, "cls": c, "module": OPS[c].verilog and OPS[c].verilog + "_iter", "ex": ex, "pd": pd, "lut": lut,
            "fields": [(f, w, False) for f, (_, w) in pl["plan"].items()], "wires": wires,
            "kw": max(op.p["kw"] for op in ops) if c == "tred" else None}


def render_microcode(hp: HwProgram, ms: MicroSchedule, ctx, top: str, dsp: int | None = None) -> tuple[str, dict]:
    """(the kernel module's text, the ROM's and the register file's figures for rtl.json)."""
    from ..context import VerilogMicrocodeContext
    from ..render import render_context

    ports = 3 if any(op.kind == "tsel" for op in hp.ops) else 2
    issued = {op.id: _unit_inputs(op, [f"@{k}" for k in range(len(op.srcs))]) for op in hp.ops}
    by_unit: dict[str, list] = {}
    for op in hp.ops:
        by_unit.setdefault(f"{unit_class(op.kind)}{ms.unit[op.id]}", []).append(op)
    plans = {f"{c}{u}": _unit_plan(c, by_unit.get(f"{c}{u}", []), issued)
             for c in ms.units for u in range(ms.units[c])}
    wsrc, index = _write_sources(hp, ms)
    rom = _layout(hp, ms, plans, len(wsrc), ports)
    _fill(hp, ms, rom, plans, issued, index)
    units = [_unit_context(c, u, plans[f"{c}{u}"], rom, by_unit.get(f"{c}{u}", []),
                           c == "mul" and dsp is not None and u >= dsp)
             for c in ms.units for u in range(ms.units[c])]
    C = ms.cycles
    hexw = (rom.width + 3) // 4
    ctl = [(name, lo + w - 1, lo, w) for name, (lo, w) in rom.at.items()
           if name in ("we", "wa", "ws", "ow", "fe") or name[:2] in ("ra", "rs")]
    outputs = [lit(o[1], 32) if o[0] == "c" else f"in_{o[1]}" if o[0] == "in" else f"out_{ms.out_of[o]}_r"
               for o in hp.outputs]
    text = render_context("verilog/microcode.v.j2", VerilogMicrocodeContext(
        _head(ctx, top, hp, "microcode", any(u["lut"] for u in units)), pcw=max(1, C.bit_length()), C=C,
        uw=rom.width, words=[f"{rom.width}'h{rom.words.get(t, 0):0{hexw}x}" for t in range(C + 1)], ctl=ctl,
        ports=ports, aw=rom.at["wa"][1], depth=ms.depth, units=units, wsrc=wsrc, wsw=rom.at["ws"][1],
        out_regs=sorted({k for k in ms.out_of.values()}), oww=rom.at["ow"][1], outputs=outputs))
    return text, {"rom_words": C + 1, "rom_width": rom.width, "register_file_depth": ms.depth,
                  "register_file_copies": ports}
