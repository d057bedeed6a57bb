"""Budgets before flashing: does a kernel fit a board's flash, RAM and loop period?

`kernel_budget(kernel_dir, board)` compiles the kernel's own sources for the board's core
(arm-none-eabi-gcc, the flags of the generated project, -fstack-usage) and reads:
  flash  text + data of the kernel objects (arm-none-eabi-size)
  ram    data + bss of the kernel objects
  stack  the kernel function's frame from its .su file (the deepest of the kernel's
         functions when it calls helpers: an upper bound, callees are static)
and estimates the cycles per call from the manifest's op counts (OP_CYCLES, times a
factor for software floating point or fixed-point multiplies), so a budget exists
before any build. `fits(budget)` adds what the mbforge runtime itself takes
(RUNTIME_FLASH, runtime_ram) and returns the one-line refusal or None.
`elf_budget(elf, project_dir, env)` reads the built image: its whole flash and RAM, and
the measured stack frames (.su files PlatformIO leaves beside the objects).

Invariants: nothing here writes into the kernel or project folders (objects go to a
temporary folder); the estimate depends only on the manifest and the board record; a
missing cross compiler is a BudgetError naming it, never a traceback.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mbforge.manifest import Manifest
from mbforge.targets import Board

# Cycles per operation on a core with hardware support for the kernel's real type
# (Cortex-M4F/M7 single precision: add/mul 1, div/sqrt 14; libm calls for the rest).
# An estimate for planning, not a measurement: `mbforge hil` measures instructions per call.
OP_CYCLES = {"add": 1, "sub": 1, "mul": 1, "neg": 1, "div": 14, "sqrt": 14, "sincos": 120,
             "sin": 80, "cos": 80, "atan2": 150, "exp": 100, "log": 100}
OTHER_OP_CYCLES = 4
LOAD_STORE_FACTOR = 2.0  # operands and results through memory: straight-line code spills
SOFT_FLOAT_FACTOR = {"float": 25.0, "double": 50.0}  # libgcc's soft-float routines per op
FIXED_FACTOR = {True: 3.0, False: 8.0}  # c-fixed: with / without a 32x32->64 multiply (M0)

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
    measured: bool = False  # cycles from a measurement (else the op-count estimate)

    @property
    def seconds_per_call(self) -> float:
        return self.cycles / self.board.cpu_hz

    @property
    def max_rate_hz(self) -> float:
        return self.board.cpu_hz / (self.cycles + LOOP_OVERHEAD_CYCLES)

    def line(self) -> str:
        how = "measured" if self.measured else f"estimated from {self.ops} ops"
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
    kind = fpu_kind(board)
    return (real == "float" and kind is None) or (real == "double" and kind != "dp")


def has_long_multiply(board: Board) -> bool:
    return board.cpu not in ("cortex-m0", "cortex-m0plus", "cortex-m1")


def estimate_cycles(m: Manifest, board: Board) -> tuple[int, int]:
    """(ops, cycles per call) from the manifest's op counts for this board's core."""
    ops = {k: v for k, v in (m.ops or {}).items() if k != "total"}
    total = int(m.ops.get("total", sum(ops.values()))) if m.ops else sum(ops.values())
    cycles = sum(OP_CYCLES.get(k, OTHER_OP_CYCLES) * n for k, n in ops.items()) * LOAD_STORE_FACTOR
    if m.real == "int32":
        cycles *= FIXED_FACTOR[has_long_multiply(board)]
    elif needs_soft_float(m.real, board):
        cycles *= SOFT_FLOAT_FACTOR[m.real]
    return total, int(round(cycles)) + 20  # + the call itself


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


def kernel_budget(kernel_dir: str | Path, board: Board, manifest: Manifest | None = None) -> Budget:
    kernel_dir = Path(kernel_dir).resolve()  # the compiler runs in a temporary folder
    m = manifest or Manifest.load(kernel_dir)
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
    ops, cycles = estimate_cycles(m, board)
    stack = stacks.get(m.function)
    if stack is not None and len(stacks) > 1:
        stack = sum(stacks.values())  # helpers it may call: a bound, not the exact depth
    return Budget(board=board, real=m.real, flash=text + data, ram=data + bss, stack=stack,
                  ops=ops, cycles=cycles)


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

