"""Run a firmware ELF in QEMU's netduinoplus2 (STM32F405) with USART2 on a TCP socket.

    with Emulator(elf) as emu:
        link = Link(emu.url)          # socket://127.0.0.1:PORT

Invariants:
- QEMU is always killed when the context exits, exceptions included (and, as a last
  resort, when the object is garbage-collected or Python exits, via weakref.finalize): no orphan processes.
- Start-up has a deadline: QEMU must report that it listens within `start_timeout`
  seconds, else EmulatorError with its stderr.
- `-icount shift=ICOUNT_SHIFT` makes virtual time a function of the instruction count,
  so SysTick counts are deterministic. The processor clock is 168 MHz, so one
  instruction is 2**shift ns = 0.168 * 2**shift SysTick ticks (5.376 at shift 5; the
  firmware's CALIB request measures it, see mbforge.hil.harness).
- Serial 0 (USART1) is discarded; serial 1 (USART2, the board link) is a TCP server
  that waits for one client before the guest starts, so no byte is sent to nobody.
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

from mbforge.targets import BOARDS

QEMU = "qemu-system-arm"
MACHINE = BOARDS["emulated_f405"].qemu_machine
ICOUNT_SHIFT = 5
CPU_HZ = BOARDS["emulated_f405"].cpu_hz
TICKS_PER_INSTRUCTION = CPU_HZ * 2**ICOUNT_SHIFT / 1e9  # the expected value; CALIB measures it


class EmulatorError(RuntimeError):
    """QEMU is missing, did not start, or stopped."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def qemu_command(elf: Path, port: int, icount_shift: int = ICOUNT_SHIFT) -> list[str]:
    return [
        QEMU, "-M", MACHINE, "-nographic", "-monitor", "none",
        "-serial", "null",
        # nodelay: the guest writes byte by byte; with Nagle and delayed ACKs each reply
        # would wait ~40 ms
        "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on",
        "-icount", f"shift={icount_shift}",
        "-kernel", str(elf),
    ]


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class Emulator:
    def __init__(self, elf: str | Path, *, icount_shift: int = ICOUNT_SHIFT,
                 start_timeout: float = 10.0, port: int | None = None):
        self.elf = Path(elf)
        self.icount_shift = icount_shift
        self.start_timeout = start_timeout
        self.port = port
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.boot_seconds: float | None = None

    @property
    def url(self) -> str:
        if self.port is None or self.proc is None:
            raise EmulatorError("emulator not started")
        return f"socket://127.0.0.1:{self.port}"

    @property
    def ticks_per_instruction(self) -> float:
        return CPU_HZ * 2**self.icount_shift / 1e9

    def start(self) -> "Emulator":
        if not self.elf.is_file():
            raise EmulatorError(f"no firmware at {self.elf}: build it first (mbforge.firmware.build)")
        with open(self.elf, "rb") as f:
            if f.read(4) != b"\x7fELF":
                raise EmulatorError(f"{self.elf} is not an ELF file")
        if shutil.which(QEMU) is None:
            raise EmulatorError(f"{QEMU} not found: install qemu-system-arm (scripts/bootstrap.sh does)")
        last = ""
        fixed = self.port
        for _attempt in range(3):  # a port picked free can be taken before QEMU binds it
            port = fixed or free_port()
            self._log = tempfile.TemporaryFile(mode="w+b")
            t0 = time.monotonic()
            proc = subprocess.Popen(qemu_command(self.elf, port, self.icount_shift),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=self._log, start_new_session=True)
            self.proc, self.port = proc, port
            # kills QEMU if this object is dropped or Python exits without stop()
            self._finalizer = weakref.finalize(self, _kill, proc)
            if self._wait_listening(t0):
                self.boot_seconds = time.monotonic() - t0
                return self
            last = self._stderr()
            self.stop()
            if fixed or "Address already in use" not in last:
                break
        raise EmulatorError(f"QEMU did not start within {self.start_timeout:.0f} s "
                            f"({' '.join(qemu_command(self.elf, self.port or 0, self.icount_shift))}): "
                            f"{last.strip() or 'no output'}")

    def _wait_listening(self, t0: float) -> bool:
        # with wait=on QEMU prints "QEMU waiting for connection on: ..." once it listens
        while time.monotonic() - t0 < self.start_timeout:
            if self.proc.poll() is not None:
                return False
            if "waiting for connection" in self._stderr():
                return True
            time.sleep(0.005)
        return False

    def _stderr(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            _kill(self.proc)
            self._finalizer.detach()
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "Emulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
