"""Board descriptions: what the firmware runs on. Data only; the firmware generator, the
QEMU runner and the harness read it. (A target's facts are its backend class:
mbforge.backends.registry.)
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Board:
    """Everything about one board, in one record: the firmware generator (mbforge.firmware.
    project), the offline dev-platform's board manifests (firmware/platform/boards/, checked
    against board_manifest() by a test), the QEMU runner and the CLIs read it from here."""
    env: str  # PlatformIO environment of the generated project
    mcu: str
    cpu: str
    fpu: str | None
    cpu_hz: int
    link: str  # the UART the host talks to
    counter: str  # what times a kernel call: SysTick (QEMU -icount) or DWT cycles
    # memory map (the generated linker script): code at code_origin, RAM at 0x20000000
    code_origin: int
    flash_kb: int
    ram_kb: int
    code_note: str  # what the code region is, for the linker script's header
    # firmware: the link UART's driver in src/mbf_board.c ("stm32_usart": F1/F4 USART,
    # "stm32h7_usart": the H7/G0 USART with ISR/RDR/TDR, "cmsdk_uart", "nrf51_uart", "pl011"),
    # the vector table's external interrupts and the link UART's receive interrupt
    uart: str
    num_irq: int
    link_irq: int
    irq_handler: str
    ldscript: str  # in the generated project
    # PlatformIO: the board id of mbforge's local dev-platform (None: the official ststm32
    # platform's board of the same name as env), and that board manifest's mcu/name/url
    pio_board: str | None
    pio_mcu: str | None = None
    pio_name: str | None = None
    pio_url: str | None = None
    # emulated boards only: QEMU's machine, which of its `-serial` options (0 = the first)
    # is the link UART, and the `-icount shift` (one instruction = 2**shift ns of virtual time)
    # the link's default baud rate (firmware and `mbforge hil --port`; QEMU ignores it)
    baud: int = 115200
    qemu_machine: str | None = None  # None: a real board
    qemu_serial: int | None = None
    icount_shift: int | None = None
    # the link UART's registers (its driver adds the offsets) and where RAM starts
    uart_base: int = 0x40004000
    ram_origin: int = 0x20000000
    # real boards: the official PlatformIO platform whose board id is env
    pio_platform: str = "ststm32"

    @property
    def emulated(self) -> bool:
        return self.qemu_machine is not None

    @property
    def has_vtor(self) -> bool:
        """Whether the vector table can be moved (VTOR): not on the Cortex-M0."""
        return self.cpu != "cortex-m0"

    @property
    def ticks_per_cycle(self) -> Fraction:
        """SysTick ticks per modelled processor cycle: 1 on a real board; under QEMU, where
        SysTick counts virtual time, the ticks of one instruction (taken as one cycle)."""
        return ticks_per_instruction(self.cpu_hz, self.icount_shift) if self.emulated else Fraction(1)

    def board_manifest(self) -> dict | None:
        """The PlatformIO board manifest (boards/<pio_board>.json) of the local dev-platform;
        None for a board of the official platform."""
        if self.pio_board is None:
            return None
        build = {"cpu": self.cpu, "f_cpu": f"{self.cpu_hz}L", "mcu": self.pio_mcu,
                 "float_abi": "hard" if self.fpu else "soft"}
        if self.fpu:
            build["fpu"] = self.fpu
        return {"build": build, "frameworks": [], "name": self.pio_name,
                "upload": {"maximum_ram_size": self.ram_kb * 1024, "maximum_size": self.flash_kb * 1024},
                "url": self.pio_url, "vendor": "mbforge"}


def ticks_per_instruction(cpu_hz: int, icount_shift: int) -> Fraction:
    """SysTick ticks per instruction under QEMU -icount shift=S: an instruction takes 2**S ns
    of virtual time and SysTick counts at cpu_hz (5.376 on the F405 at S = 5)."""
    return Fraction(cpu_hz * 2**icount_shift, 10**9)


def _mps2(image: str, cpu: str, fpu: str | None, cpu_hz: int, what: str, **differ) -> "Board":
    """An Arm MPS2 FPGA image as QEMU's mps2-<image> emulates it: CMSDK UART0 (QEMU's first
    serial, RX IRQ 0 of 32 unless `differ` says otherwise), 4 MB of ZBT SSRAM for the image
    and 4 MB of RAM, SysTick under -icount shift=7."""
    fields = dict(env=f"emulated_{image}", mcu=f"MPS2 {image.upper()}", cpu=cpu, fpu=fpu, cpu_hz=cpu_hz,
                  link="UART0 (CMSDK APB UART)", counter="SysTick",
                  code_origin=0x00000000, flash_kb=4096, ram_kb=4096,
                  code_note="ZBT SSRAM1 at 0 (the image, vector table first: the\n * core fetches it there at reset)",
                  uart="cmsdk_uart", num_irq=32, link_irq=0, irq_handler="UART0RX_IRQHandler",
                  ldscript=f"ld/mps2_{image}.ld", pio_board=f"mps2_{image}_qemu", pio_mcu=image,
                  pio_name=f"Arm MPS2 {image.upper()} ({what}) as emulated by qemu-system-arm -M mps2-{image}",
                  pio_url="https://www.qemu.org/docs/master/system/arm/mps2.html",
                  qemu_machine=f"mps2-{image}", qemu_serial=0, icount_shift=7)
    return Board(**{**fields, **differ})


_STM32_FLASH = "flash at 0x08000000 (aliased at 0, where the core\n * fetches the vector table at reset)"

BOARDS: dict[str, Board] = {b.env: b for b in (
    Board(env="emulated_f405", mcu="STM32F405RG", cpu="cortex-m4", fpu="fpv4-sp-d16", cpu_hz=168_000_000,
          link="USART2", counter="SysTick",
          code_origin=0x08000000, flash_kb=1024, ram_kb=128, code_note=_STM32_FLASH,
          uart="stm32_usart", num_irq=82, link_irq=38, irq_handler="USART2_IRQHandler",
          ldscript="ld/stm32f405rg.ld",
          pio_board="netduinoplus2_qemu", pio_mcu="stm32f405rgt6",
          pio_name="STM32F405 (Cortex-M4F) as emulated by qemu-system-arm -M netduinoplus2",
          pio_url="https://www.qemu.org/docs/master/system/arm/stm32.html",
          # USART2 is QEMU's second serial on netduinoplus2
          qemu_machine="netduinoplus2", qemu_serial=1, icount_shift=5, uart_base=0x40004400),
    # the Nucleo's PLL is set to the emulated board's clock, so both count alike
    Board(env="nucleo_f446re", mcu="STM32F446RE", cpu="cortex-m4", fpu="fpv4-sp-d16", cpu_hz=168_000_000,
          link="USART2 (ST-LINK VCP)", counter="DWT",
          code_origin=0x08000000, flash_kb=512, ram_kb=128, code_note=_STM32_FLASH,
          uart="stm32_usart", num_irq=97, link_irq=38, irq_handler="USART2_IRQHandler",
          ldscript="ld/stm32f446re.ld",
          # the ST-LINK/V2-1 virtual COM port takes it; 42 MHz APB1 / 921600 = 45.6 -> BRR 46 (-0.9 %)
          pio_board=None, baud=921_600, uart_base=0x40004400),
    # Nucleo-144 H743ZI: Cortex-M7 with double FPU; PLL1 from the 64 MHz HSI to 400 MHz
    # (VOS1), AHB 200 MHz, APB1 100 MHz; the ST-LINK/V3 VCP is USART3 on PD8/PD9
    Board(env="nucleo_h743zi", mcu="STM32H743ZI", cpu="cortex-m7", fpu="fpv5-d16", cpu_hz=400_000_000,
          link="USART3 (ST-LINK VCP, PD8/PD9)", counter="DWT",
          code_origin=0x08000000, flash_kb=2048, ram_kb=128,
          code_note="flash at 0x08000000 (the boot address)", uart="stm32h7_usart",
          num_irq=150, link_irq=39, irq_handler="USART3_IRQHandler", ldscript="ld/stm32h743zi.ld",
          pio_board=None, uart_base=0x40004800),
    # STM32F4DISCOVERY (F407VG): Cortex-M4F; the F446's PLL set-up (HSI, 168 MHz, APB1 42 MHz).
    # Its ST-LINK/V2 (board revisions before MB997D) has no virtual COM port: USART2 on
    # PA2 (TX) / PA3 (RX) goes to a 3.3 V USB-serial adapter.
    Board(env="disco_f407vg", mcu="STM32F407VG", cpu="cortex-m4", fpu="fpv4-sp-d16", cpu_hz=168_000_000,
          link="USART2 (PA2/PA3, USB-serial adapter)", counter="DWT",
          code_origin=0x08000000, flash_kb=1024, ram_kb=128, code_note=_STM32_FLASH,
          uart="stm32_usart", num_irq=82, link_irq=38, irq_handler="USART2_IRQHandler",
          ldscript="ld/stm32f407vg.ld", pio_board=None, uart_base=0x40004400),
    # Blue Pill (STM32F103C8): Cortex-M3, no FPU; PLL x9 from the 8 MHz crystal = 72 MHz,
    # APB2 72 MHz. No ST-LINK VCP (its only USB is the MCU's native USB, which mbforge does
    # not drive): USART1 on PA9 (TX) / PA10 (RX) to a USB-serial adapter.
    Board(env="bluepill_f103c8", mcu="STM32F103C8", cpu="cortex-m3", fpu=None, cpu_hz=72_000_000,
          link="USART1 (PA9/PA10, USB-serial adapter)", counter="DWT",
          code_origin=0x08000000, flash_kb=64, ram_kb=20, code_note=_STM32_FLASH,
          uart="stm32_usart", num_irq=43, link_irq=37, irq_handler="USART1_IRQHandler",
          ldscript="ld/stm32f103c8.ld", pio_board=None, uart_base=0x40013800),
    # Nucleo-G071RB: Cortex-M0+, no FPU, no DWT cycle counter (SysTick times a call); PLL
    # from the 16 MHz HSI to 64 MHz; the ST-LINK VCP is USART2 on PA2/PA3
    Board(env="nucleo_g071rb", mcu="STM32G071RB", cpu="cortex-m0plus", fpu=None, cpu_hz=64_000_000,
          link="USART2 (ST-LINK VCP)", counter="SysTick",
          code_origin=0x08000000, flash_kb=128, ram_kb=36, code_note="flash at 0x08000000 (the boot address)",
          uart="stm32h7_usart", num_irq=32, link_irq=28, irq_handler="USART2_IRQHandler",
          ldscript="ld/stm32g071rb.ld", pio_board=None, uart_base=0x40004400),
    # Raspberry Pi Pico (RP2040): Cortex-M0+ (core 0 only), no FPU, no DWT; XOSC 12 MHz and
    # PLL_SYS to 125 MHz; UART0 (PL011) on GP0 (TX) / GP1 (RX) to a USB-serial adapter (the
    # Pico's USB is native USB: no USB stack here). Flash is XIP at 0x10000000; its first 256
    # bytes are the second-stage bootloader (boot2), which mbforge does not supply.
    Board(env="pico", mcu="RP2040", cpu="cortex-m0plus", fpu=None, cpu_hz=125_000_000,
          link="UART0 (GP0/GP1, USB-serial adapter)", counter="SysTick",
          code_origin=0x10000100, flash_kb=2048 - 1, ram_kb=256,
          code_note="XIP flash after the 256-byte boot2 at 0x10000000\n * (boot2 is not supplied: link only)",
          uart="pl011", num_irq=26, link_irq=20, irq_handler="UART0_IRQHandler",
          ldscript="ld/rp2040.ld", pio_board=None, uart_base=0x40034000, pio_platform="raspberrypi"),
    # Arm's MPS2 FPGA image AN385: a Cortex-M3, no FPU (float and double run in software);
    # UART0 is QEMU's first serial. 25 MHz x 2**7 ns = 3.2 SysTick ticks per instruction.
    # QEMU and the MPS2 board load the image into SSRAM1, so "flash" is RAM here too.
    # UARTn RX interrupt is 2n, TX 2n + 1 (UART0 RX is IRQ 0, checked in QEMU), 32 IRQs.
    _mps2("an385", "cortex-m3", None, 25_000_000, "Cortex-M3, no FPU"),
    # Arm's MPS2 FPGA image AN500: a Cortex-M7 with single- and double-precision FPU (FPv5-D16)
    # at 25 MHz, the AN385's CMSDK UART0 (first serial, RX IRQ 0) and memory map
    _mps2("an500", "cortex-m7", "fpv5-d16", 25_000_000, "Cortex-M7, double-precision FPU"),
    # Arm's MPS2 FPGA image AN505 (SSE-200 IoT kit): a Cortex-M33 with FPU (single precision)
    # at 20 MHz, booting in the secure state from 0x10000000 (the secure alias of ZBT SSRAM1);
    # RAM is the secure alias of SSRAM2/3, UART0 the secure alias 0x50200000 (RX IRQ 32, 92 IRQs).
    _mps2("an505", "cortex-m33", "fpv5-sp-d16", 20_000_000, "Cortex-M33, FPU", code_origin=0x10000000,
          code_note="ZBT SSRAM1, secure alias at 0x10000000 (the image, vector\n * table first: the secure core "
                    "fetches it there at reset)",
          num_irq=92, link_irq=32, uart_base=0x50200000, ram_origin=0x38000000),
    # BBC micro:bit (v1): nRF51822, a Cortex-M0 at 16 MHz with no FPU and no long multiply;
    # 256 KiB flash at 0, 16 KiB RAM. The nRF51 UART (0x40002000, IRQ 2) is QEMU's first
    # serial (on the board: P0.24/P0.25 to the interface chip's USB serial). The real nRF51 has
    # no SysTick; QEMU's does count. 16 MHz x 2**8 ns = 4.096 ticks per instruction (at
    # shift 7 the firmware's longest CALIB loop would not wrap the 24-bit count).
    Board(env="emulated_microbit", mcu="nRF51822", cpu="cortex-m0", fpu=None, cpu_hz=16_000_000,
          link="UART0 (nRF51 UART)", counter="SysTick",
          code_origin=0x00000000, flash_kb=256, ram_kb=16,
          code_note="flash at 0 (vector table first)",
          uart="nrf51_uart", num_irq=32, link_irq=2, irq_handler="UART0_IRQHandler",
          ldscript="ld/nrf51822.ld",
          pio_board="microbit_qemu", pio_mcu="nrf51822",
          pio_name="BBC micro:bit (nRF51822, Cortex-M0) as emulated by qemu-system-arm -M microbit",
          pio_url="https://www.qemu.org/docs/master/system/arm/nrf.html",
          qemu_machine="microbit", qemu_serial=0, icount_shift=8, uart_base=0x40002000),
)}
EMULATED_BOARDS: tuple[str, ...] = tuple(env for env, b in BOARDS.items() if b.emulated)

# the Cortex-M0+ runs the M0's instruction set (ARMv6-M): the same code, the same counts
_SAME_ISA = {"cortex-m0plus": "cortex-m0"}


def cost_board(board: Board) -> str:
    """The emulated board whose measured per-operation costs (targets.op_costs) serve this
    board: itself, or the emulated twin of its core (same CPU and FPU; the M0+ takes the
    M0's). Counts are instructions: the ISA decides them, the clock does not."""
    cpu = _SAME_ISA.get(board.cpu, board.cpu)
    for env in EMULATED_BOARDS:
        b = BOARDS[env]
        if b.cpu == cpu and (b.fpu is None) == (board.fpu is None) and ("sp" in (b.fpu or "")) == ("sp" in (board.fpu or "")):
            return env
    raise KeyError(f"no emulated board measures the costs of {board.env}'s core ({board.cpu}, {board.fpu})")
