"""Budgets before flashing: does a kernel fit a board's flash, RAM and loop period?

`kernel_budget(kernel_dir, board)` compiles the kernel's own sources for the board's core
(arm-none-eabi-gcc, the flags of the generated project, -fstack-usage) and reads:
  flash  text + data of the kernel objects (arm-none-eabi-size)
  ram    data + bss of the kernel objects
  stack  the kernel function's frame from its .su file (the deepest of the kernel's
         functions when it calls helpers: an upper bound, callees are static)
and estimates the cycles per call from the kernel's features (its manifest and its code
for the core: `features`) and the costs measured on the board's core (targets.op_costs,
written by bench.op_costs), so a budget exists before any build. `fits(budget)` adds what the mbforge runtime itself takes
(RUNTIME_FLASH, runtime_ram) and returns the one-line refusal or None.
`elf_budget(elf, project_dir, env)` reads the built image: its whole flash and RAM, and
the measured stack frames (.su files PlatformIO leaves beside the objects).

Invariants: nothing here writes into the kernel or project folders (objects go to a
temporary folder; their figures are kept in mbforge's cache, keyed by the kernel's files,
the compiler and its flags); the estimate depends only on the kernel's files and the board record; a
missing cross compiler is a BudgetError naming it, never a traceback.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from mbforge.manifest import Manifest
from mbforge.reals import REALS, soft_float
from mbforge.targets import Board

# What a call costs: a linear form in features of the kernel (FEATURES), with the
# instructions per unit of each measured on every emulated core for each real type
# (targets.op_costs, fitted by bench.op_costs to shipped kernels run in QEMU). The features
# come from the manifest (inputs, operations by class) and from the kernel's code compiled
# for the core (the instructions of its body, the calls of libgcc's soft-float routines
# and libm's sin/cos); one instruction is taken as one cycle.
FEATURES = ("call", "input", "body", "lin", "mul", "div", "sincos", "soft_add", "soft_mul", "soft_div",
            "soft_other", "libm")
OP_CLASS = {"add": "lin", "sub": "lin", "neg": "lin", "mul": "mul", "div": "div", "sqrt": "div",
            "sincos": "sincos", "sin": "sincos", "cos": "sincos", "atan2": "sincos"}
SOFT_CLASS = {"add": "soft_add", "sub": "soft_add", "rsub": "soft_add", "mul": "soft_mul", "div": "soft_div"}
LIBM = {"sin", "cos", "sinf", "cosf", "sqrt", "sqrtf", "atan2", "atan2f", "sincos", "sincosf"}


RUNTIME_FLASH = 6 * 1024  # startup, board support, link and server: ~4.5 KB measured, rounded up
LOOP_OVERHEAD_CYCLES = 150  # interrupt entry/exit and the loop app's bookkeeping per period


class BudgetError(RuntimeError):
    """The budget could not be worked out (no cross compiler, a kernel that does not compile)."""


@dataclass
class Budget:
    board: Board
    real: str
    flash: int  # bytes
    ram: int  # bytes
    stack: int | None  # bytes, the kernel call's frame
    ops: int
    cycles: int  # per call
    measured: bool = False  # cycles from a measurement (else the estimate from the code)
    body: int = 0  # instructions of the kernel function's compiled body (helpers apart)
    calls: dict = field(default_factory=dict)  # helper -> calls per kernel call

    @property
    def seconds_per_call(self) -> float:
        return self.cycles / self.board.cpu_hz

    @property
    def max_rate_hz(self) -> float:
        return self.board.cpu_hz / (self.cycles + LOOP_OVERHEAD_CYCLES)

    def line(self) -> str:
        how = "measured" if self.measured else \
            f"estimated: {self.body} instructions of code, {sum(self.calls.values())} helper calls"
        stack = f"{self.stack} B" if self.stack is not None else "?"
        return (f"{self.board.env}: kernel flash {self.flash} B, RAM {self.ram} B, stack {stack}; "
                f"{self.cycles} cycles/call ({how}) = {self.seconds_per_call * 1e6:.2f} us at "
                f"{self.board.cpu_hz / 1e6:g} MHz, loop rate up to {self.max_rate_hz:,.0f} Hz")


def fpu_kind(board: Board) -> str | None:
    """None, "sp" (single precision only) or "dp" (single and double)."""
    if not board.fpu:
        return None
    return "sp" if "sp" in board.fpu else "dp"


def needs_soft_float(real: str, board: Board) -> bool:
    """A float kernel on a core without an FPU, or a double kernel without a double FPU."""
    return soft_float(REALS[real], fpu_kind(board))


def helper_name(symbol: str, prefix: str) -> str:
    """A callee as the calibration names it: the kernel's own helpers without the kernel's
    prefix and GCC's clone suffixes (`fourbar_div.constprop.0` -> `div`), libgcc's as they are."""
    base = symbol.split(".", 1)[0]
    return base[len(prefix) + 1:] if base.startswith(prefix + "_") else base


def code_profile(obj: str | Path, function: str, prefix: str) -> tuple[int, dict[str, int]]:
    """(instructions of `function`'s body, calls per helper) from the object's disassembly
    (arm-none-eabi-objdump -dr: a call's target is its relocation)."""
    proc = subprocess.run([tool("objdump"), "-dr", str(obj)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BudgetError(f"arm-none-eabi-objdump failed: {proc.stderr.strip()}")
    inside, count, calls = False, 0, {}
    for line in proc.stdout.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head:
            inside = head.group(1) == function
        elif inside and re.match(r"^\s+[0-9a-f]+:\t[0-9a-f]{4}", line):
            count += 1
        elif inside and ("R_ARM_THM_CALL" in line or "R_ARM_THM_JUMP24" in line):
            name = helper_name(line.split()[-1], prefix)
            calls[name] = calls.get(name, 0) + 1
    return count, dict(sorted(calls.items()))


# the calibration record of a target whose code differs from its real type's (c-fixed-m0:
# c-fixed's values through other primitives); any other target takes its real type's
COST_KIND = {"c-fixed-m0": "int32-m0"}


def cost_kind(m: Manifest) -> str:
    """The key of the kernel's record in targets.op_costs: COST_KIND of its target, or its real type."""
    return COST_KIND.get(m.target, m.real)


def op_costs(board: Board, kind: str) -> dict:
    """The calibration record (targets.op_costs) of the board's core for this real type
    (or cost kind, cost_kind)."""
    from mbforge.targets import cost_board
    from mbforge.targets.op_costs import OP_COSTS

    return OP_COSTS[cost_board(board)][kind]


def features(m: Manifest, body: int, calls: dict[str, int]) -> dict[str, float]:
    """FEATURES of a kernel: 1 for the call, its inputs (each checked against its envelope),
    the instructions of its compiled body, its operations by class (an op of no class counts
    as four additions), its calls of libgcc's soft-float routines by kind and of libm."""
    f = dict.fromkeys(FEATURES, 0.0)
    f.update(call=1.0, input=float(m.n_in), body=float(body))
    for op, n in (m.ops or {}).items():
        if op != "total":
            f[OP_CLASS.get(op, "lin")] += n if op in OP_CLASS else 4 * n
    for name, n in calls.items():
        soft = re.fullmatch(r"__aeabi_[fd](\w+)", name)
        if soft:
            f[SOFT_CLASS.get(soft.group(1), "soft_other")] += n
        elif name in LIBM:
            f["libm"] += n
    return f


def estimate_cycles(m: Manifest, body: int, calls: dict[str, int], board: Board) -> int:
    """Cycles per call: the measured costs of the board's core (op_costs) times the kernel's
    features; one instruction taken as one cycle (the emulator counts instructions; a real
    core adds wait states and multi-cycle loads, branches and divisions)."""
    rec = op_costs(board, cost_kind(m))
    f = features(m, body, calls)
    return int(round(sum(rec.get(k, 0.0) * v for k, v in f.items())))


def machine_flags(board: Board) -> list[str]:
    flags = [f"-mcpu={board.cpu}", "-mthumb"]
    if board.fpu:
        flags += [f"-mfpu={board.fpu}", "-mfloat-abi=hard"]
    else:
        flags += ["-mfloat-abi=soft"]
    return flags


# the generated project's flags (platformio.ini.j2), -fstack-usage included
COMPILE_FLAGS = ["-O2", "-std=gnu11", "-ffp-contract=off", "-fno-math-errno", "-ffunction-sections",
                 "-fdata-sections", "-fstack-usage"]


def tool(name: str) -> str:
    path = shutil.which(f"arm-none-eabi-{name}")
    if not path:
        raise BudgetError(f"arm-none-eabi-{name} not found on PATH: install the Arm GNU toolchain "
                          f"(Debian: gcc-arm-none-eabi binutils-arm-none-eabi)")
    return path


def read_stack_usage(files) -> dict[str, int]:
    """function -> bytes from GCC .su files (lines `file:line:col:name<TAB>bytes<TAB>kind`)."""
    out: dict[str, int] = {}
    for f in files:
        for line in Path(f).read_text().splitlines():
            parts = line.split("\t")
            if len(parts) >= 2 and parts[1].strip().isdigit():
                name = parts[0].rsplit(":", 1)[-1]
                out[name] = max(out.get(name, 0), int(parts[1]))
    return out


def size_of(objects) -> tuple[int, int, int]:
    """(text, data, bss) summed over objects or one ELF (arm-none-eabi-size, Berkeley format)."""
    proc = subprocess.run([tool("size"), "-B", "-d", *map(str, objects)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BudgetError(f"arm-none-eabi-size failed: {proc.stderr.strip()}")
    text = data = bss = 0
    for line in proc.stdout.splitlines()[1:]:
        t, d, b = (int(v) for v in line.split()[:3])
        text, data, bss = text + t, data + d, bss + b
    return text, data, bss


@dataclass
class Compiled:
    """The kernel compiled for a core: flash, RAM, the call's stack, and its code profile."""
    flash: int
    ram: int
    stack: int | None
    body: int
    calls: dict


COMPILED_FIELDS = ("flash", "ram", "stack", "body", "call_names", "call_counts")


def compile_kernel(kernel_dir: str | Path, board: Board, m: Manifest) -> Compiled:
    """The kernel compiled for the board's core; kept in mbforge's cache under its sources,
    headers, compiler and flags (a large kernel takes gcc seconds per core, and `firmware`
    and `simulate --device` ask again for what an earlier command compiled)."""
    from mbforge import cache

    kernel_dir = Path(kernel_dir).resolve()  # the compiler runs in a temporary folder
    files = sorted(p for p in kernel_dir.rglob("*") if p.suffix in (".c", ".h") and p.is_file())
    k = cache.key("budget", _gcc_version(tool("gcc")), *machine_flags(board), *COMPILE_FLAGS, m.function, m.prefix,
                  *m.sources, *(x for p in files for x in (p.relative_to(kernel_dir).as_posix(), p.read_bytes())))
    hit = cache.load("budget", k, COMPILED_FIELDS)
    if hit is not None:
        calls = dict(zip(map(str, hit["call_names"]), map(int, hit["call_counts"])))
        stack = int(hit["stack"])
        return Compiled(int(hit["flash"]), int(hit["ram"]), None if stack < 0 else stack, int(hit["body"]), calls)
    c = _compile_kernel(kernel_dir, board, m)
    names = sorted(c.calls)
    cache.store("budget", k, flash=np.array(c.flash), ram=np.array(c.ram),
                stack=np.array(-1 if c.stack is None else c.stack), body=np.array(c.body),
                call_names=np.array(names, dtype=str), call_counts=np.array([c.calls[n] for n in names], dtype=np.int64))
    return c


@lru_cache(maxsize=None)
def _gcc_version(gcc: str) -> str:
    proc = subprocess.run([gcc, "--version"], capture_output=True, text=True)
    return gcc + "\n" + proc.stdout


def _compile_kernel(kernel_dir: Path, board: Board, m: Manifest) -> Compiled:
    gcc = tool("gcc")
    with tempfile.TemporaryDirectory(prefix="mbf_budget_") as tmp:
        objects = []
        for i, src in enumerate(m.sources):
            obj = Path(tmp) / f"k{i}.o"
            proc = subprocess.run([gcc, *machine_flags(board), *COMPILE_FLAGS, f"-I{kernel_dir}", "-c",
                                   str(kernel_dir / src), "-o", str(obj)], capture_output=True, text=True,
                                  cwd=tmp, timeout=600)
            if proc.returncode != 0:
                first = (proc.stderr.strip().splitlines() or ["?"])[0]
                raise BudgetError(f"the kernel's {src} does not compile for {board.cpu}: {first}")
            objects.append(obj)
        text, data, bss = size_of(objects)
        stacks = read_stack_usage(Path(tmp).glob("*.su"))
        body, calls = 0, {}
        for obj in objects:
            n, c = code_profile(obj, m.function, m.prefix)
            body, calls = body + n, {**calls, **{k: calls.get(k, 0) + v for k, v in c.items()}}
    stack = stacks.get(m.function)
    if stack is not None and len(stacks) > 1:
        stack = sum(stacks.values())  # helpers it may call: a bound, not the exact depth
    return Compiled(text + data, data + bss, stack, body, calls)


def kernel_budget(kernel_dir: str | Path, board: Board, manifest: Manifest | None = None) -> Budget:
    m = manifest or Manifest.load(Path(kernel_dir).resolve())
    c = compile_kernel(kernel_dir, board, m)
    return Budget(board=board, real=m.real, flash=c.flash, ram=c.ram, stack=c.stack,
                  ops=int((m.ops or {}).get("total", 0)), cycles=estimate_cycles(m, c.body, c.calls, board),
                  body=c.body, calls=c.calls)


def runtime_ram(max_payload: int, rx_buffer: int, stack_bytes: int) -> int:
    """Static RAM of the mbforge runtime: receive ring, three frame buffers, the stack."""
    return rx_buffer + 3 * (max_payload + 16) + stack_bytes + 256


def refusal(b: Budget, runtime_ram_bytes: int) -> str | None:
    """The one-line refusal when the kernel and the runtime do not fit the board, else None."""
    flash_cap, ram_cap = b.board.flash_kb * 1024, b.board.ram_kb * 1024
    need_flash = b.flash + RUNTIME_FLASH
    need_ram = b.ram + runtime_ram_bytes + (b.stack or 0)
    over = []
    if need_flash > flash_cap:
        over.append(f"flash {need_flash} B (kernel {b.flash} + runtime {RUNTIME_FLASH}) > {flash_cap} B")
    if need_ram > ram_cap:
        over.append(f"RAM {need_ram} B (kernel {b.ram} + stack {b.stack or 0} + runtime {runtime_ram_bytes}) "
                    f"> {ram_cap} B")
    if not over:
        return None
    return f"the kernel does not fit {b.board.env} ({b.board.mcu}): " + "; ".join(over)


def elf_budget(elf: str | Path, project_dir: str | Path, env: str) -> str:
    """One line on the built image: flash, RAM and the deepest measured stack frames."""
    text, data, bss = size_of([elf])
    build_dir = Path(project_dir) / ".pio" / "build" / env
    stacks = read_stack_usage(sorted(build_dir.rglob("*.su")))
    deepest = sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    frames = ", ".join(f"{name} {n} B" for name, n in deepest) or "no .su files"
    return f"{env} image: flash {text + data} B, RAM {data + bss} B (stack reserve included); largest frames: {frames}"

