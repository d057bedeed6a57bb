"""Run a firmware ELF in QEMU, the board's link UART on a TCP socket.

    with Emulator(elf) as emu:        # the board the ELF was built for (else emulated_f405)
        link = Link(emu.url)          # socket://127.0.0.1:PORT
    Emulator(elf, board="emulated_an385")

The board (an emulated entry of mbforge.targets.BOARDS) gives the QEMU machine, the
`-serial` index of the link UART, the clock and the -icount shift:
  emulated_f405   -M netduinoplus2 (STM32F405, Cortex-M4F, 168 MHz), USART2 = serial 1
  emulated_an385  -M mps2-an385 (Cortex-M3, no FPU, 25 MHz), UART0 = serial 0
  emulated_an500  -M mps2-an500 (Cortex-M7, double FPU, 25 MHz), UART0 = serial 0
  emulated_an505  -M mps2-an505 (Cortex-M33, FPU, 20 MHz, secure), UART0 = serial 0
  emulated_microbit -M microbit (nRF51822, Cortex-M0, 16 MHz), UART0 = serial 0
Every firmware mbforge generates names its environment in a section that is not loaded
(.mbf.board); `board_of_elf` reads it, so an ELF starts on its own machine. An ELF
without that section runs as emulated_f405 (the default); a `board` that contradicts the
ELF's is refused.

Invariants:
- QEMU is always killed when the context exits, exceptions included (and, as a last
  resort, when the object is garbage-collected or Python exits, via weakref.finalize): no orphan processes.
  Started from the main thread on Linux, QEMU also dies with the Python process, even
  one killed by SIGKILL (PR_SET_PDEATHSIG).
- Start-up has a deadline: QEMU must report that it listens within `start_timeout`
  seconds, else EmulatorError with its stderr.
- `-icount shift=S` makes virtual time a function of the instruction count, so SysTick
  counts are deterministic. One instruction is 2**S ns, i.e. cpu_hz * 2**S / 1e9
  SysTick ticks: 5.376 on emulated_f405 (168 MHz, S = 5), 3.2 on emulated_an385 (25 MHz,
  S = 7; at S = 5 a tick would be 1.25 instructions, too coarse to count them), 3.2 on
  emulated_an500, 2.56 on emulated_an505 (20 MHz, S = 7), 4.096 on emulated_microbit
  (16 MHz, S = 8: at S = 7 the longest CALIB loop would not wrap SysTick). The
  firmware's CALIB request measures it, see mbforge.hil.harness.
- The serials before the link UART's are discarded; the link UART's is a TCP server
  that waits for one client before the guest starts, so no byte is sent to nobody.
"""
from __future__ import annotations

import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path

from mbforge.targets import BOARDS, EMULATED_BOARDS, Board, ticks_per_instruction

QEMU = "qemu-system-arm"
DEFAULT_BOARD = "emulated_f405"
# the default board's values
MACHINE = BOARDS[DEFAULT_BOARD].qemu_machine
ICOUNT_SHIFT = BOARDS[DEFAULT_BOARD].icount_shift
CPU_HZ = BOARDS[DEFAULT_BOARD].cpu_hz
TICKS_PER_INSTRUCTION = CPU_HZ * 2**ICOUNT_SHIFT / 1e9  # the expected value; CALIB measures it
BOARD_SECTION = ".mbf.board"


class EmulatorError(RuntimeError):
    """QEMU is missing, did not start, or stopped."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def emulated_board(env: str) -> Board:
    """The entry of targets.BOARDS for an environment QEMU can run; EmulatorError if none."""
    b = BOARDS.get(env)
    if b is None or not b.emulated:
        raise EmulatorError(f"{env!r} is not an emulated board: QEMU runs {', '.join(EMULATED_BOARDS)}")
    return b


def board_of_elf(elf: str | Path) -> str | None:
    """The environment named by the ELF's .mbf.board section; None if the file is not a
    32-bit little-endian ELF or has no such section (never raises)."""
    try:
        data = Path(elf).read_bytes()
        if data[:6] != b"\x7fELF\x01\x01":
            return None
        shoff, = struct.unpack_from("<I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x2E)

        def section(i: int) -> tuple[int, int, int]:  # (name offset, file offset, size)
            name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIIIII", data, shoff + i * shentsize)
            return name, offset, size

        _, strtab, _ = section(shstrndx)
        want = BOARD_SECTION.encode() + b"\0"
        for i in range(shnum):
            name, offset, size = section(i)
            if data[strtab + name:strtab + name + len(want)] == want:
                return data[offset:offset + size].split(b"\0", 1)[0].decode("ascii") or None
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def qemu_command(elf: Path, port: int, icount_shift: int | None = None, board: str = DEFAULT_BOARD,
                 monitor_port: int | None = None) -> list[str]:
    b = emulated_board(board)
    shift = b.icount_shift if icount_shift is None else icount_shift
    monitor = "none" if monitor_port is None else f"tcp:127.0.0.1:{monitor_port},server=on,wait=off"
    return [
        QEMU, "-M", b.qemu_machine, "-nographic", "-monitor", monitor,
        *["-serial", "null"] * b.qemu_serial,
        # Nagle on (no nodelay): the guest writes byte by byte and QEMU sends each write,
        # so without it every byte is a TCP segment and QEMU's CPU, not the link, limits
        # throughput (Stewart joint kernel: 14 -> 23 vectors/s). mbforge.hil.link acks at
        # once (TCP_QUICKACK), so a reply never waits for a delayed ACK.
        "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on",
        "-icount", f"shift={shift}",
        "-kernel", str(elf),
    ]


def _die_with_parent() -> None:
    """In the QEMU child: be killed when the process that started it dies, even by
    SIGKILL (Linux prctl PR_SET_PDEATHSIG; elsewhere a no-op). The signal follows the
    *thread* that started the child, so it is only asked for from the main thread."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class Emulator:
    def __init__(self, elf: str | Path, *, board: str | None = None, icount_shift: int | None = None,
                 start_timeout: float = 10.0, port: int | None = None, monitor: bool = False):
        """board: an emulated environment of targets.BOARDS; None: the one the ELF names,
        else emulated_f405. icount_shift: None for the board's. monitor: give QEMU a
        monitor on a TCP port (monitor_command, e.g. "system_reset" for fault tests)."""
        self.elf = Path(elf)
        self.elf_board = board_of_elf(self.elf)
        self.board = board or self.elf_board or DEFAULT_BOARD
        b = emulated_board(self.board)
        self.machine = b.qemu_machine
        self.cpu_hz = b.cpu_hz
        self.icount_shift = b.icount_shift if icount_shift is None else icount_shift
        self.start_timeout = start_timeout
        self.port = port
        self.monitor_port = free_port() if monitor else None
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
        return float(ticks_per_instruction(self.cpu_hz, self.icount_shift))

    def command(self, port: int) -> list[str]:
        return qemu_command(self.elf, port, self.icount_shift, self.board, self.monitor_port)

    def monitor_command(self, command: str, timeout: float = 5.0) -> str:
        """Run one QEMU monitor command (the Emulator must have monitor=True); its output."""
        if self.monitor_port is None or not self.alive():
            raise EmulatorError("no QEMU monitor: start the Emulator with monitor=True")
        with socket.create_connection(("127.0.0.1", self.monitor_port), timeout=timeout) as s:
            out = b""
            while b"(qemu)" not in out:
                out += s.recv(4096) or b"(qemu)"
            s.sendall(command.encode() + b"\n")
            out = b""
            while out.count(b"(qemu)") < 1:
                chunk = s.recv(4096)
                if not chunk:
                    break
                out += chunk
        return out.decode(errors="replace")

    def start(self) -> "Emulator":
        if not self.elf.is_file():
            raise EmulatorError(f"no firmware at {self.elf}: build it first (`mbforge firmware --kernel DIR --out DIR --build`)")
        with open(self.elf, "rb") as f:
            if f.read(4) != b"\x7fELF":
                raise EmulatorError(f"{self.elf} is not an ELF file")
        if self.elf_board and self.elf_board != self.board:
            raise EmulatorError(f"{self.elf} was built for {self.elf_board} "
                                f"({BOARDS[self.elf_board].qemu_machine if self.elf_board in BOARDS else 'unknown'}), "
                                f"not {self.board} ({self.machine}): drop the board or build for it")
        if shutil.which(QEMU) is None:
            raise EmulatorError(f"{QEMU} not found: install qemu-system-arm (scripts/bootstrap.sh does)")
        last = ""
        fixed = self.port
        for _attempt in range(3):  # a port picked free can be taken before QEMU binds it
            port = fixed or free_port()
            self._log = tempfile.TemporaryFile(mode="w+b")
            t0 = time.monotonic()
            proc = subprocess.Popen(self.command(port),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=self._log, start_new_session=True,
                                    preexec_fn=_die_with_parent if threading.current_thread()
                                    is threading.main_thread() else None)
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
                            f"({' '.join(self.command(self.port or 0))}): "
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

    def exit_note(self) -> str:
        """'' while QEMU runs; once it has exited, its status and last words (e.g. "qemu:
        fatal: Lockup: can't escalate 3 to HardFault" for an image that is no firmware), so
        that a link error caused by a dead emulator says so."""
        if self.proc is None or self.proc.poll() is None:
            return ""
        words = [l for l in self._stderr().splitlines() if l.strip() and "waiting for connection" not in l]
        return f"QEMU exited with status {self.proc.returncode}" + (f": {words[0].strip()}" if words else "")

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
