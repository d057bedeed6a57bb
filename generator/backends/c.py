"""Straight-line C from a schedule: one renderer per floating-point precision.

Inputs and outputs are the arguments, work slots are locals, every emitted symbol carries
the kernel's prefix. The float32 dialect spells every literal and function in single
precision (`0.5f`, mbforge's own sin/cos, `sqrtf`), so nothing is promoted to double on a
Cortex-M4F; compile with -ffp-contract=off so host and device round alike.

A dialect with a `reach` (elements an instruction addresses from one base register: 256
floats for Thumb-2 VLDR/VSTR, whose offset is 8 bits times 4) reads and writes in[] and
out[] beyond it through window pointers in[] + m*reach made opaque to GCC by an empty asm:
folded back to in/out + constant, each access would cost an address instruction (about 860
per call on the Stewart joint kernel). The asm only hides a value; the C stays standard
for compilers without it (`#if defined(__GNUC__)`).

A dialect with `registers` prints the schedule through its register allocation
(lower.schedule.allocate): C variables w0 .. w{registers-1} never hold more values at once
than the target's registers, and what does not fit goes to a local array m[] at the points
the allocation chose (a store when a value first leaves, a load before a later read). GCC
then has nothing left to spill: its own spilling keeps a spilled value in memory for its
whole life, and reloads it at every read (about 1,000 loads more per call on the Stewart
joint kernel). A computed output leaves without a store and is read back from out[]. GCC
must not forward a stored value to its reload (it would keep it live): m[] is `volatile`
and out[] is read through a volatile lvalue, or, for c-double, an empty asm after the
store says the memory may have changed, so that x86 arithmetic can still read the reload
in place. Values are unchanged: the same operations on the same operands.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.atom import ExpressionError
from ..lower.schedule import FUSED, Schedule, allocate
from ..reals import REALS, Real
from .context import CHeaderContext, CSourceContext, KernelContext
from .render import render_context, render_template

# Every operation of a float kernel must round to single precision: its bounds count those
# roundings, the host must reproduce the device bit for bit, and sin/cos round k*2/pi to an
# integer by adding 1.5 * 2^23. x87 arithmetic (32-bit x86 without -mfpmath=sse) keeps
# extended precision: the four-bar's outputs came out up to 1.0 off. Refused at compile time.
_SINGLE_EVAL = """
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD > 0
#error "this kernel needs float arithmetic in single precision (FLT_EVAL_METHOD 0): on 32-bit x86, -msse2 -mfpmath=sse"
#endif
"""


# What each instruction looks like; {0}, {1} are operands, {p} the prefix.
_INFIX = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}", "neg": "-{0}"}


class CDialect:
    name = ""
    real: Real  # the kind it computes in (its C type names in[], out[] and the locals)
    prologue = ""  # C before the kernel's support code (a precondition the compiler checks)
    bit_checks = False  # the checks apart compare bit patterns (see bit_check)
    functions: dict[str, str] = {}
    includes: tuple[str, ...] = ()
    support_template: str | None = None
    reach: int | None = None  # see the module doc
    registers: int | None = None  # C variables the allocation may keep live (None: one per slot)
    checks_apart = False  # the envelope checks in a function of their own (see render_c)
    spill_barrier = False  # spill slots kept by an empty asm instead of volatile (see render_c)
    vector_checks = False  # checks apart compare two doubles at once (see _outside_function)
    constants = False  # constants take registers in the allocation (see render_c)
    fuse = False  # multiply-accumulates (lower.schedule.FUSED), one instruction on the core
    gcc_optimize: tuple[str, ...] = ("no-schedule-insns",)  # with registers (see _gcc_optimize)

    def literal(self, v: float) -> str:
        raise NotImplementedError

    def call(self, op: str, args: list[str], prefix: str) -> str:
        try:
            f = self.functions[op]
        except KeyError:
            raise ExpressionError(f"target {self.name} has no {op!r} (used by the model)") from None
        return f.format(*args, p=prefix)

    def check(self, sched: Schedule) -> None:
        """ExpressionError naming the first instruction, in schedule order, that this
        dialect cannot spell (what render_c would refuse)."""
        for ins in sched.order:
            if ins.op == "sincos":
                if "sincos" in self.functions or self.support_template:
                    continue
                needed = ("sin", "cos")
            else:
                needed = () if ins.op in _INFIX else (ins.op,)
            for op in needed:
                if op not in self.functions:
                    raise ExpressionError(f"target {self.name} has no {op!r} (used by the model)")


class DoubleC(CDialect):
    name = "c-double"
    real = REALS["double"]
    # x86-64 has 16 xmm registers; 14 leave GCC room for constants and the copies that
    # two-operand SSE needs (callgrind on the Stewart joint kernel: 13,629 -> 13,295)
    registers = 14
    checks_apart = True
    spill_barrier = True
    vector_checks = True
    # gcc -O2's SLP vectorizer pairs a few operations and pays for it in shuffles and
    # copies: 13,043 -> 12,675 instructions per call on the Stewart joint kernel
    gcc_optimize = ("no-schedule-insns", "no-tree-slp-vectorize")
    includes = ("math.h",)
    functions = {"sqrt": "sqrt({0})", "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})",
                 "atan2": "atan2({0}, {1})", "exp": "exp({0})", "log": "log({0})", "abs": "fabs({0})"}

    def literal(self, v: float) -> str:
        s = repr(float(v))
        if "e" not in s and "." not in s and "inf" not in s:
            s += ".0"
        return s


class Float32C(CDialect):
    name = "c-float32"
    real = REALS["float"]
    prologue = _SINGLE_EVAL
    bit_checks = True
    includes = ("float.h", "math.h", "stdint.h", "string.h")
    support_template = "c/mathf.c.j2"
    reach = 256
    # checks inlined, GCC keeps the compared inputs live and spills (Stewart joint kernel on
    # the emulated M4F: 11,945 instructions per call; apart 11,158, with ranges symmetric
    # about 0 compared by magnitude 10,762; without checks 9,775; compared as bit patterns,
    # see bit_check, 10,367)
    checks_apart = True
    # Of the 32 single registers of the Cortex-M4F FPU, 31 for the allocation, constants
    # included: GCC then does what the allocation says (within 1% of its instructions), and
    # best_schedule can choose by it. Before, 30 registers with constants left to GCC:
    # 10,367 instructions per call; constants in 30 / 31 / 32 registers: 10,437 / 10,408
    # / 10,433 (with the checks of the time)
    registers = 31
    constants = True
    # The M4F's VMLA / VMLS / VNMLS round the product before the sum, as separate VMUL and
    # VADD do, so the values are the same bit for bit; GCC never emits them (it would
    # contract to the fused VFMA, with one rounding, only with -ffp-contract=fast), so the
    # kernel says them in an asm statement (Stewart joint kernel on the emulated M4F: 1,015
    # of them; 10,099 -> 9,203 instructions per call). The target's option
    # multiply_accumulate (backends.registry.Float32Options) turns them off.
    fuse = True
    functions = {"sqrt": "sqrtf({0})", "sin": "{p}_sinf({0})", "cos": "{p}_cosf({0})",
                 "atan2": "{p}_atan2f({0}, {1})", "abs": "fabsf({0})"}

    def literal(self, v: float) -> str:
        f = float(np.float32(v))
        if not math.isfinite(f):
            raise ExpressionError(f"constant {v!r} does not fit in single precision")
        s = format(f, ".9g")
        if "e" not in s and "." not in s:
            s += ".0"
        return s + "f"


# GCC options for the kernel that follows, printed as a pragma (GCC only; other compilers
# ignore it). GCC's scheduling before register allocation (on at -O2 for ARM) hoists loads
# to hide their latency and undoes the allocation: 10,356 -> 10,676 instructions on the
# Stewart joint kernel.
def _gcc_optimize(options: tuple[str, ...]) -> str:
    quoted = ", ".join(f'"{o}"' for o in options)
    return f"""
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ({quoted})
#endif
"""


DIALECTS = {d.name: d for d in (DoubleC(), Float32C())}

CHECK_COMMENT = "/* an input outside its envelope range{}: status 2, nothing computed, out[] untouched */"


def _outward(v: float, up: bool, real: Real) -> float:
    """v in the kernel's precision, rounded away from the envelope's inside (so every real
    input within the envelope, rounded to nearest by the host, passes), finite."""
    t = np.dtype(real.dtype).type
    f = t(v)
    if (float(f) < v) if up else (float(f) > v):  # never for double: v is one already
        f = np.nextafter(f, t(np.inf if up else -np.inf))
    top = float(np.finfo(t).max)
    return min(max(float(f), -top), top)


def _bounds(dialect: CDialect, envelope: list[tuple[float, float]]) -> list[tuple[int, str, str]]:
    """(input, lo, hi) as literals of the kernel's precision, for every checked input."""
    out = []
    for k, (lo, hi) in enumerate(envelope):
        if not (math.isfinite(lo) and math.isfinite(hi)):  # unchecked (input_check off)
            continue
        a, b = (dialect.literal(_outward(v, up, dialect.real)) for v, up in ((lo, False), (hi, True)))
        out.append((k, a, b))
    return out


def envelope_checks(dialect: CDialect, envelope: list[tuple[float, float]]) -> list[str]:
    """The statements at the top of a float kernel: each input compared against its
    envelope range; written `!(x >= lo && x <= hi)` so that a NaN fails too."""
    lines = [CHECK_COMMENT.format(" (NaN too)")]
    lines += [f"if (!(in[{k}] >= {a} && in[{k}] <= {b})) return 2;" for k, a, b in _bounds(dialect, envelope)]
    return lines


def _f32_bits(v: float) -> int:
    return int(np.array(v, dtype=np.float32).view(np.uint32))


def bit_check(lo: float, hi: float) -> tuple[str, list[int]]:
    """The test that an input is outside [lo, hi] (float32 values, lo <= hi), on its IEEE-754
    binary32 bit pattern {u} in unsigned integers, NaN and -0.0 taken as a float comparison
    takes them; with {0}, {1} the constants that follow. Cheaper than the FPU's compare on
    the Cortex-M4F (vcmp, then vmrs to move its flags):
      |x| <= c                      u << 1 <= bits(c) << 1 (the sign shifted out; a NaN's
                                    pattern is above every finite magnitude's)
      0 < lo, or hi < 0             u - bits(near end) <= bits(far end) - bits(near end): the
                                    patterns of one sign are ordered by magnitude, and any
                                    other pattern wraps past the width
      lo <= 0 <= hi otherwise       u << 1 <= bits(|lo|) << 1 if the sign is set, else that of hi"""
    if lo == -hi:
        return "{u} << 1 > {0}", [_f32_bits(abs(hi)) << 1]
    if lo > 0 or hi < 0:
        near, far = (_f32_bits(lo), _f32_bits(hi)) if lo > 0 else (_f32_bits(hi), _f32_bits(lo))
        return "{u} - {0} > {1}", [near, far - near]
    return "{u} << 1 > ({u} >> 31 ? {0} : {1})", [_f32_bits(abs(lo)) << 1, _f32_bits(abs(hi)) << 1]


def _bit_checks(name: str, bounds: dict[int, tuple[str, str]]) -> tuple[list[str], list[str]]:
    """The body of a float kernel's _outside function as bit_check tests. A constant that
    several tests use is a variable the compiler cannot see through (an empty asm), so it
    stays in a register and is compared against the shifted pattern in one instruction
    (arm-none-eabi-gcc folds a literal into a shift and a compare: 4 instructions a test)."""
    tests = []
    for k in sorted(bounds):
        lo, hi = (float(v.rstrip("f")) for v in bounds[k])
        tests.append((k, *bit_check(lo, hi)))
    uses: dict[int, int] = {}
    for _, _, consts in tests:
        for c in consts:
            uses[c] = uses.get(c, 0) + 1
    shared = {c: f"k{i}" for i, c in enumerate(sorted(c for c, n in uses.items() if n > 1))}
    lines = []
    if shared:
        lines += [f"    uint32_t {v} = 0x{c:08X}u;" for c, v in shared.items()]
        lines += ["#if defined(__GNUC__)", *(f'    __asm__("" : "+r"({v}));' for v in shared.values()), "#endif"]
    bits = f"{name}_bits"
    for k, test, consts in tests:
        args = [shared.get(c, f"0x{c:08X}u") for c in consts]
        if "{u} >> 31" in test:  # the pattern read twice: once from memory
            cond = test.format(*args, u="u")
            line = f"{{ const uint32_t u = {bits}(in + {k}); if ({cond}) return 1; }}"
        else:
            line = f"if ({test.format(*args, u=f'{bits}(in + {k})')}) return 1;"
        lines.append(f"    {line}  /* in[{k}] in [{bounds[k][0]}, {bounds[k][1]}] */")
    return [f"static inline uint32_t {bits}(const float *x)", "{", "    uint32_t u;",
            "    memcpy(&u, x, sizeof u);", "    return u;", "}", ""], lines


def _outside_function(name: str, dialect: CDialect, envelope: list[tuple[float, float]],
                      noinline: bool = True) -> list[str]:
    """`static int name(in)`: 1 if an input is outside its envelope range (NaN too), else 0.
    Called, not inlined: inlined, GCC keeps the compared inputs live into the computation,
    and where the registers are short it spills them (x86-64 gcc -O2, Stewart joint kernel:
    checks 3,576 instructions per call; apart 939). With GCC's vector extension, two
    neighbouring inputs per comparison (SSE2 cmplepd on x86-64; 939 -> 657), one comparison
    of their magnitudes where both ranges are symmetric about 0 (657 -> 363). `noinline`
    False (float, a kernel that does not spill): inlined, its integer compares leave the
    floating-point registers alone."""
    bounds = {k: (a, b) for k, a, b in _bounds(dialect, envelope)}
    symmetric = {k for k, (a, b) in bounds.items() if float(a.rstrip("f")) == -float(b.rstrip("f"))}
    pairs, single = [], []
    k, n = 0, len(envelope)
    while k < n:
        if k in bounds and k + 1 in bounds:
            pairs.append(k)
            k += 2
        else:
            if k in bounds:
                single.append(k)
            k += 1

    fabs = dialect.functions["abs"]  # fabs({0}), fabsf({0})

    def scalar(ks):  # a range symmetric about 0: one comparison of the magnitude
        return [f"    if (!({fabs.format(f'in[{k}]')} <= {bounds[k][1]})) return 1;"
                if k in symmetric else
                f"    if (!(in[{k}] >= {bounds[k][0]} && in[{k}] <= {bounds[k][1]})) return 1;" for k in ks]

    def table(i):
        cells = [f"{{{bounds[k][i]}, {bounds[k + 1][i]}}}" for k in pairs]
        return [f"        {', '.join(cells[j:j + 4])}," for j in range(0, len(cells), 4)]

    lines = ["#if defined(__GNUC__)", "__attribute__((noinline))", "#endif"] if noinline else []
    lines += [f"static {'' if noinline else 'inline '}int {name}(const {dialect.real.c_type} *restrict in)", "{"]
    if len(pairs) > 1 and dialect.vector_checks:  # doubles: two to a 16-byte SSE2 register
        # a range symmetric about 0: |x| <= hi (the sign bit cleared), one comparison
        sym = [k in symmetric and k + 1 in symmetric for k in pairs]
        lines += ["#if defined(__GNUC__)",
                  "    typedef double v2 __attribute__((vector_size(16)));",
                  "    typedef long long m2 __attribute__((vector_size(16)));"]
        if not all(sym):
            lines += [f"    static const v2 lo[{len(pairs)}] = {{", *table(0), "    };"]
        lines += [f"    static const v2 hi[{len(pairs)}] = {{", *table(1), "    };",
                  "    m2 ok = {-1, -1};", "    v2 x;"]
        if any(sym):
            lines.append("    const m2 magnitude = {0x7fffffffffffffffLL, 0x7fffffffffffffffLL};")
        lines += [f"    __builtin_memcpy(&x, in + {k}, sizeof x); "
                  + (f"x = (v2)((m2)x & magnitude); ok &= x <= hi[{i}];" if sym[i]
                     else f"ok &= (x >= lo[{i}]) & (x <= hi[{i}]);")
                  for i, k in enumerate(pairs)]
        lines += ["    if (!(ok[0] & ok[1])) return 1;", *scalar(single), "#else",
                  *scalar(sorted(bounds)), "#endif"]
    elif dialect.bit_checks:
        helper, tests = _bit_checks(name, bounds)
        lines = helper + lines + tests
    else:
        lines += scalar(sorted(bounds))
    return lines + ["    return 0;", "}", ""]


# GCC (or clang) for 32-bit ARM with a hardware FPU: the "t" register class and VFP's
# chained multiply-accumulates (AArch64 has neither: its FMADD is fused)
_ARM32_FP = "defined(__GNUC__) && defined(__arm__) && defined(__ARM_FP)"



def _fused_macros(P: str) -> str:
    """{P}_MLA(d, a, b): d = d + a*b with the product rounded first (likewise MLS, NMLS;
    lower.schedule.FUSED); one VFP instruction on 32-bit ARM with single precision, plain C
    elsewhere (the same roundings when compiled with -ffp-contract=off)."""
    forms = {"MLA": ("vmla", "(d) + (a) * (b)"), "MLS": ("vmls", "(d) - (a) * (b)"),
             "NMLS": ("vnmls", "(a) * (b) - (d)")}
    arm = [f'#define {P}_{k}(d, a, b) __asm__("{insn}.f32 %0, %1, %2" : "+t"(d) : "t"(a), "t"(b))'
           for k, (insn, _) in forms.items()]
    c = [f"#define {P}_{k}(d, a, b) ((d) = {expr})" for k, (_, expr) in forms.items()]
    return "\n".join(["", f"#if {_ARM32_FP} && (__ARM_FP & 4)", *arm,
                      "#else", *c, "#endif", ""])


def _hot_first(alloc) -> dict[int, int]:
    """Spill slot -> its place in m[]: the most loaded and stored first, so that they are in
    reach of the stack pointer (Stewart inverse-dynamics-reduced in float32: 785 slots; in
    allocation order, every access past the 256th float cost GCC an address instruction)."""
    uses: dict[int, int] = {}
    for st in alloc.steps:
        if st[0] == "ld" and st[2][0] == "m":
            uses[st[2][1]] = uses.get(st[2][1], 0) + 1
        elif st[0] == "st":
            uses[st[1]] = uses.get(st[1], 0) + 1
    return {v: k for k, v in enumerate(sorted(range(alloc.n_spill), key=lambda v: (-uses.get(v, 0), v)))}


def render_c(sched: Schedule, dialect: CDialect, ctx: KernelContext, fuse: bool | None = None) -> dict[str, str]:
    """Files {name: text} for the kernel; ctx: its names and documentation (pipeline).
    `fuse`: multiply-accumulates where the dialect has them (default: dialect.fuse)."""
    fuse = dialect.fuse if fuse is None else fuse and dialect.fuse
    em = _Emitter(dialect, sched.slot, ctx.prefix)
    body = [f"{em.elem('out', k)} = {em.opnd(o)};" for k, o in sched.direct]
    keep_macro = ""
    if dialect.registers:
        alloc = allocate(sched, dialect.registers, constants=dialect.constants, fuse=fuse)
        # outputs read back (kept by the empty asm, as spill slots are, or read as volatile)
        reread = {st[2][1] for st in alloc.steps if st[0] == "ld" and st[2][0] == "out"}
        keep = f"{ctx.prefix.upper()}_KEEP" if dialect.spill_barrier and (alloc.n_spill or reread) else None
        body += _allocated_body(sched, alloc, em, keep, reread)
        n_vars, n_spill, spills = alloc.used, alloc.n_spill, alloc.n_spill > 0
        keep_macro = _register_macros(ctx.prefix.upper(), dialect, alloc, keep)
    else:
        body += _slot_body(sched, em)
        n_vars, n_spill, spills, keep = sched.n_slots, 0, True, None  # without an allocation: spills unknown
    decls = _declarations(dialect, n_vars, len(sched.tape.inputs), len(sched.tape.outputs), n_spill, keep)
    support, checks = _support_and_checks(sched, dialect, ctx, spills)
    if dialect.registers:
        support += keep_macro + _gcc_optimize(dialect.gcc_optimize)
    head = CHeaderContext(ctx, real=dialect.real.c_type, target=dialect.name)
    source = CSourceContext(head, includes=list(dialect.includes), support=support, checks=checks, decls=decls,
                            body=body)
    return {ctx.header: render_context("c/kernel.h.j2", head), ctx.source: render_context("c/kernel.c.j2", source)}


class _Emitter:
    """How one kernel spells array elements, operands and instructions in C."""

    def __init__(self, dialect: CDialect, slot, p: str):
        self.dialect, self.slot, self.p, self.r = dialect, slot, p, dialect.reach

    def elem(self, array: str, k: int) -> str:
        """Element k of in/out/m, through its window pointer beyond the reach."""
        r = self.r
        m = k // r if r else 0
        return f"{array}{m}[{k - m * r}]" if m else f"{array}[{k}]"

    def opnd(self, a: tuple) -> str:
        kind, v = a
        if kind == "t":
            return f"w{self.slot[v]}"
        if kind == "in":
            return self.elem("in", v)
        lit = self.dialect.literal(v)
        return f"({lit})" if lit.startswith("-") else lit

    def statement(self, ins, args: list[str], dst: list[str]) -> list[str]:
        """The C statements of one instruction on operand texts `args` into variables `dst`."""
        dialect, p = self.dialect, self.p
        if ins.op == "sincos":
            s, c = dst
            if "sincos" in dialect.functions:
                return [dialect.functions["sincos"].format(*args, s, c, p=p) + ";"]
            if dialect.support_template:
                return [f"{p}_sincosf({args[0]}, &{s}, &{c});"]
            # the argument's variable may be one of the results': read it first
            pair = [f"{s} = {dialect.call('sin', args, p)};", f"{c} = {dialect.call('cos', args, p)};"]
            return list(reversed(pair)) if s == args[0] else pair
        if ins.op in FUSED:  # the result overwrites the accumulator (allocate)
            assert args[0] == dst[0], (ins, args, dst)
            return [f"{p.upper()}_{ins.op.upper()}({', '.join(args)});"]
        rhs = _INFIX[ins.op].format(*args) if ins.op in _INFIX else dialect.call(ins.op, args, p)
        return [f"{dst[0]} = {rhs};"]


def _slot_body(sched: Schedule, em: _Emitter) -> list[str]:
    """The body with one variable per schedule slot (no allocation)."""
    body: list[str] = []
    for ins in sched.order:
        body.extend(em.statement(ins, [em.opnd(a) for a in ins.args], [f"w{sched.slot[d]}" for d in ins.dst]))
        for d in ins.dst:
            for k in sched.stores.get(d, ()):
                body.append(f"{em.elem('out', k)} = w{sched.slot[d]};")
    return body


def _allocated_body(sched: Schedule, alloc, em: _Emitter, keep: str | None, reread: set) -> list[str]:
    """The body through the register allocation: its loads, stores and operations in order."""
    body: list[str] = []
    spill, elem, P = _hot_first(alloc), em.elem, em.p.upper()
    for step in alloc.steps:
        if step[0] == "ld":
            _, reg, (kind, v) = step
            if kind == "out" and keep:
                src = elem("out", v)
            elif kind == "out":  # volatile: GCC would forward the stored value and keep it live
                src = f"*(volatile {em.dialect.real.c_type} *)&{elem('out', v)}"
            elif kind == "c":
                body.append(f"w{reg} = {em.opnd((kind, v))}; {P}_REG(w{reg});")
                continue
            else:
                src = elem("in", v) if kind == "in" else elem("m", spill[v])
            body.append(f"w{reg} = {src};")
        elif step[0] == "st":
            slot_ref = elem("m", spill[step[1]])
            body.append(f"{slot_ref} = w{step[2]};" + (f" {keep}({slot_ref});" if keep else ""))
        else:
            _, ins, operands, dst = step
            args = [f"w{v}" if kind == "r" else em.opnd((kind, v)) for kind, v in operands]
            body.extend(em.statement(ins, args, [f"w{r}" for r in dst]))
            for d, reg in zip(ins.dst, dst):
                for k in sched.stores.get(d, ()):
                    o = elem("out", k)
                    body.append(f"{o} = w{reg};" + (f" {keep}({o});" if keep and k in reread else ""))
    return body


def _register_macros(P: str, dialect: CDialect, alloc, keep: str | None) -> str:
    """The KEEP, REG and fused-operation macros the allocated body uses."""
    text = ""
    if keep:
        # x86 arithmetic reads an operand from memory: a reload read once folds into it
        # (a volatile load never does). The empty asm says the slot may have changed, so
        # GCC cannot forward the stored value instead (Stewart joint kernel: 13,614 ->
        # 12,883 instructions per call)
        text = "\n".join(["", "#if defined(__GNUC__)", f'#define {keep}(x) __asm__("" : "+m"(x))',
                           "#else", f"#define {keep}(x) ((void)0)", "#endif", ""])
    if dialect.constants:
        # a constant loaded into a variable stays there: the empty asm hides its value,
        # so GCC neither folds it back into each use nor loads it again (the constraint
        # is the architecture's floating-point register class; elsewhere, no hint)
        # (AArch64 defines __ARM_FP too, but its class is "w": "t" does not compile there)
        reg = f"{P}_REG"
        text += "\n".join([
            "", f"#if {_ARM32_FP}", f'#define {reg}(x) __asm__("" : "+t"(x))',
            "#elif defined(__GNUC__) && defined(__aarch64__)", f'#define {reg}(x) __asm__("" : "+w"(x))',
            "#elif defined(__GNUC__) && defined(__SSE_MATH__)",  # floats in SSE registers (not x87)
            f'#define {reg}(x) __asm__("" : "+x"(x))', "#else", f"#define {reg}(x) ((void)0)", "#endif", ""])
    if any(st[0] == "op" and st[1].op in FUSED for st in alloc.steps):
        text += _fused_macros(P)
    return text


def _declarations(dialect: CDialect, n_vars: int, n_in: int, n_out: int, n_spill: int,
                  keep: str | None) -> list[str]:
    """The variables w0.., twelve a line, the spill slots m[], then the window pointers beyond the reach."""
    names = [f"w{i}" for i in range(n_vars)]
    decls = [f"{dialect.real.c_type} {', '.join(names[i:i + 12])};" for i in range(0, len(names), 12)]
    if n_spill:
        decls.append(f"{'' if keep else 'volatile '}{dialect.real.c_type} m[{n_spill}];")
    r = dialect.reach
    windows = []
    if r:
        windows = [("const ", "in", m) for m in range(1, (n_in - 1) // r + 1)]
        windows += [("", "out", m) for m in range(1, (n_out - 1) // r + 1)]
    if r and n_spill:  # spill slots beyond the reach too (the most used ones are first)
        windows += [("" if keep else "volatile ", "m", m) for m in range(1, (n_spill - 1) // r + 1)]
    for const, array, m in windows:
        decls.append(f"{const}{dialect.real.c_type} *{array}{m} = {array} + {m * r};")
    if windows:
        decls.append("#if defined(__GNUC__)  /* window bases stay in registers (see mbforge.backends.c) */")
        decls.extend(f'__asm__("" : "+r"({array}{m}));' for _, array, m in windows)
        decls.append("#endif")
    return decls


def _support_and_checks(sched: Schedule, dialect: CDialect, ctx: KernelContext, spills: bool):
    """The support code before the kernel (math, checks apart) and the kernel's envelope checks."""
    support = dialect.prologue
    if dialect.support_template and any(i.op in ("sin", "cos", "sincos", "atan2") for i in sched.tape.instrs):
        support += render_template(dialect.support_template, p=ctx.prefix)
    checks = envelope_checks(dialect, ctx.envelope)
    # bit-pattern compares (bit_check) are apart always, inlined where the kernel does not spill
    if len(checks) > 1 and ((dialect.checks_apart and spills) or dialect.bit_checks):
        support += "\n".join(["", *_outside_function(f"{ctx.function}_outside", dialect, ctx.envelope,
                                                       noinline=dialect.checks_apart and spills)])
        checks = [checks[0], f"if ({ctx.function}_outside(in)) return 2;"]
    return support, checks
