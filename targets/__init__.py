"""Target and board descriptions: what the pipeline generates for, and what the firmware
runs on. Data only; the stages read it (pipeline: targets; firmware and harness: boards).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    real: str  # element type of in[] and out[]: double, float or int32 (fixed point)
    fixed: bool  # built from the fixed-point plan
    use: str


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("c-double", "double", False, "host reference"),
    Target("c-float32", "float", False, "Cortex-M4F / M7 (single-precision FPU), bit-exact with the host build"),
    Target("c-fixed", "int32", True, "cores without an FPU (Cortex-M0/M3): Q formats and error bounds"),
    Target("hls-c", "int32", True, "HLS-ready C (Vitis HLS conventions), bit-exact with c-fixed"),
    Target("verilog", "int32", True, "pipelined or resource-shared RTL, bit-exact with c-fixed"),
)}


@dataclass(frozen=True)
class Board:
    env: str  # PlatformIO environment of the generated project
    mcu: str
    cpu: str
    fpu: str | None
    cpu_hz: int
    link: str  # the UART the host talks to
    counter: str  # what times a kernel call: SysTick (QEMU -icount) or DWT cycles
    qemu_machine: str | None  # None: a real board
    # emulated boards only: which of QEMU's `-serial` options (0 = the first) is the link
    # UART, and the `-icount shift` (one instruction = 2**shift ns of virtual time)
    qemu_serial: int | None = None
    icount_shift: int | None = None


BOARDS: dict[str, Board] = {b.env: b for b in (
    Board("emulated_f405", "STM32F405RG", "cortex-m4", "fpv4-sp-d16", 168_000_000, "USART2", "SysTick",
          "netduinoplus2", qemu_serial=1, icount_shift=5),
    # the Nucleo's PLL is set to the emulated board's clock, so both count alike
    Board("nucleo_f446re", "STM32F446RE", "cortex-m4", "fpv4-sp-d16", 168_000_000, "USART2 (ST-LINK VCP)", "DWT",
          None),
    # Arm's MPS2 FPGA image AN385: a Cortex-M3, no FPU (float and double run in software);
    # UART0 is QEMU's first serial. 25 MHz x 2**7 ns = 3.2 SysTick ticks per instruction.
    Board("emulated_an385", "MPS2 AN385", "cortex-m3", None, 25_000_000,
          "UART0 (CMSDK APB UART)", "SysTick", "mps2-an385", qemu_serial=0, icount_shift=7),
)}
