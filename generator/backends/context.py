"""The render contexts: what the templates of each backend family read, as frozen
dataclasses instead of dicts, so a field a template needs is named, typed and required.

    KernelContext       the kernel's names and documentation (every target; the pipeline builds it)
    CHeaderContext      templates/c/kernel.h.j2         (c-double, c-float32, c-fixed)
    CSourceContext      templates/c/kernel.c.j2
    HlsHeaderContext    templates/hls/kernel.h.j2       (hls-c)
    HlsSourceContext    templates/hls/kernel.c.j2
    VerilogContext      what the Verilog printer takes (verilog)
    VerilogHeadContext  templates/verilog/head.v.j2     (ports, functions, the envelope check)
    VerilogPipelinedContext  templates/verilog/pipelined.v.j2
    VerilogSharedContext     templates/verilog/shared.v.j2
    VerilogMicrocodeContext  templates/verilog/microcode.v.j2

A template receives `variables()`: the fields, those of a nested context merged in (its
names are the template's names); jinja2's StrictUndefined still refuses a missing one.
"""
from __future__ import annotations

from dataclasses import dataclass, fields


class _Context:
    def variables(self) -> dict:
        """The template's variables: each field, a nested context's fields in its place."""
        out: dict = {}
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if isinstance(v, _Context):
                out.update(v.variables())
            else:
                out[f.name] = v
        return out


@dataclass(frozen=True)
class KernelContext(_Context):
    """The kernel's names and documentation, the same for every target (pipeline)."""
    version: str
    model: str
    kernel: str  # the kernel's name
    digest: str
    prefix: str  # of every emitted C symbol and of the file names
    function: str  # the kernel's C function
    header: str  # file names
    source: str
    guard: str  # the header's include guard
    macro: str  # the prefix of the header's #defines
    n_in: int
    n_out: int
    description: str
    in_doc: list[str]  # the header comment's lines for in[] and out[]
    out_doc: list[str]
    defines: list[str]  # #define lines of the element indices (and Q formats)
    status: list[tuple[str, str]]  # (code, text) of every status the kernel returns
    ops_line: str
    notes: list[str]  # the backend's lines for the header comment
    envelope: list[tuple[float, float]]  # the range each input is checked against
    # (element name, fractional bits or None) of every flat input and output, in order
    in_elems: list[tuple[str, int | None]]
    out_elems: list[tuple[str, int | None]]


@dataclass(frozen=True)
class CHeaderContext(_Context):
    common: KernelContext
    real: str  # the C type of in[] and out[]
    target: str


@dataclass(frozen=True)
class CSourceContext(_Context):
    head: CHeaderContext
    includes: list[str]
    support: str  # helpers and macros before the function
    checks: list[str]  # the envelope checks (status 2)
    decls: list[str]
    body: list[str]


@dataclass(frozen=True)
class HlsHeaderContext(_Context):
    common: KernelContext
    top: str  # the HLS top function
    params: str  # its parameter list


@dataclass(frozen=True)
class HlsSourceContext(_Context):
    head: HlsHeaderContext
    support: str
    ops: str  # the loop forms of division and square root
    pragmas: list[str]
    checks: list[str]
    decls: list[str]
    body: list[str]
    call: str  # the C ABI wrapper's call of the top function


@dataclass(frozen=True)
class VerilogContext(_Context):
    common: KernelContext
    # (low, high) input words of the envelope check (fixed.c.envelope_words; None: no bound)
    env_words: list[tuple[int | None, int | None]]


@dataclass(frozen=True)
class VerilogHeadContext(_Context):
    """Ports and the envelope check of a Verilog kernel module."""
    version: str
    model: str
    kernel: str
    digest: str
    variant: str
    top: str
    n_in: int
    n_out: int
    env: str  # the expression true when an input word is outside its envelope
    in_doc: list[str]  # each input port's comment: its element, Q format and checked range
    out_doc: list[str]
    lut_mul: bool = False  # a multiplier is built of LUTs (--dsp): the mul_lut function is needed


@dataclass(frozen=True)
class VerilogPipelinedContext(_Context):
    """One vector per cycle: operators in stages, delay lines between them (rtl.schedule)."""
    head: VerilogHeadContext
    ops: list[dict]  # per operator: its kind, module, operands and result (render_pipelined)
    delays: list[dict]  # shift-register delay lines
    memories: list[dict]  # delay lines as ring buffers in memories
    pointer_bits: int  # of the memories' shared write pointer
    L: int  # latency in cycles
    flags: dict[int, list[str]]  # cycle -> saturation flags that become valid then
    outputs: list[tuple[str, str]]  # (value, its valid signal) per output


@dataclass(frozen=True)
class VerilogSharedContext(_Context):
    """A few operator units reused under a cycle counter (rtl.schedule.shared)."""
    head: VerilogHeadContext
    pcw: int  # bits of the cycle counter
    C: int  # cycles of one vector
    regs: list[str]  # register declarations, 16 a line
    units: list[dict]  # per unit: its class, module, input multiplexers by cycle
    writes: list[tuple[int, str]]  # cycle -> register writes
    flagged: list[tuple[int, str]]  # cycle -> saturation flags
    outputs: list[str]  # what drives each output


@dataclass(frozen=True)
class VerilogMicrocodeContext(_Context):
    """The shared variant's units under a microcode ROM, operands from a register file in
    block RAM (rtl.microcode)."""
    head: VerilogHeadContext
    pcw: int  # bits of the cycle counter
    C: int  # cycles of one vector (the ROM has C + 1 words)
    uw: int  # bits of a ROM word
    words: list[str]  # the ROM's words as Verilog literals, cycle 0 first
    ctl: list[tuple[str, int, int, int]]  # control fields of the word: (name, high bit, low bit, width)
    ports: int  # operand ports (register file copies)
    aw: int  # register file address bits
    depth: int  # register file words
    units: list[dict]  # per unit: its fields as wires, its datapath (unit.v.j2)
    wsrc: list[tuple[str, str]]  # the write bus's sources: (value, overflow flag)
    wsw: int  # bits of the write bus's source index
    out_regs: list[int]  # outputs held in registers
    oww: int  # bits of the output register index
    outputs: list[str]  # what drives each output


__all__ = ["CHeaderContext", "CSourceContext", "HlsHeaderContext", "HlsSourceContext", "KernelContext",
           "VerilogContext", "VerilogHeadContext", "VerilogMicrocodeContext", "VerilogPipelinedContext",
           "VerilogSharedContext"]
