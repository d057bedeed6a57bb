"""Host side of the loop app (`mbforge firmware --app loop --rate HZ`): read its window reports.

    with Link(url) as link:
        windows = read_windows(link, seconds=1.0)         # LoopWindow per closed window
        windows = read_windows(link, seconds=1.0, inputs=x)  # stream one input vector first

A LOOP request (type LOOP) carries nothing or one input vector (the kernel's real type,
used from the next period on); the reply is the oldest closed window not yet sent
(LOOP_REPLY, 13 u32: the window, how many more are queued, how many a full queue dropped)
followed by the last outputs. Figures are SysTick ticks: `worst` and `median` per call,
start latency min/max (their difference is the jitter of the start time). A period is
`period` ticks for 1/rate s of the board's clock, so a count of ticks is ticks / (period
* rate) s on that clock: on a real board ticks are cycles; under QEMU -icount they are
virtual time (a fixed number per instruction: 3.2 on the AN385, 5.376 on the F405), and
the period is the ticks of as many instructions as the board has cycles in 1/rate s
(one instruction taken as one cycle), so times and overruns are the board's, not the
emulator's. `mbforge hil --loop SECONDS` prints one line per window (loop_command).

Windows are 0.1 s of device time; the device queues closed windows (firmware.project.
LOOP_QUEUE) and the host asks again at once while some are queued, so none is skipped
when the emulator runs faster than real time. Invariants: a window is reported once (by
its index), in order; a reply of the wrong size or a device that does not run the loop app
is a LinkError with one line, never a traceback.
"""
from __future__ import annotations

import struct
import sys
import time
from dataclasses import dataclass

import numpy as np

from mbforge.hil import protocol as P
from mbforge.hil.link import DeviceError, Link, LinkError
from mbforge.reals import REALS

LOOP = 0x10  # mbforge.firmware.project.LOOP_TYPE
LOOP_REPLY = struct.Struct("<13I")  # 52 bytes: firmware.project.LOOP_REPLY_FIXED
POLL = 0.02  # seconds between LOOP requests


@dataclass(frozen=True)
class LoopWindow:
    index: int  # the window's number since boot (1 = the first; 0: none closed yet)
    periods: int
    overruns: int
    worst: int  # ticks per call
    median: int
    latency_min: int  # ticks from the period's start to the handler
    latency_max: int
    rate_hz: int
    period: int  # ticks
    total_periods: int
    total_overruns: int
    queued: int  # closed windows still waiting on the device after this one
    lost: int  # windows a full queue dropped since boot

    @property
    def jitter(self) -> int:
        return self.latency_max - self.latency_min

    def us(self, ticks: int) -> float:
        """Microseconds on the board's clock: a period is 1/rate s."""
        return ticks / (self.period * self.rate_hz) * 1e6

    def line(self, cpu_hz: int) -> str:
        """One line on the board's clock (cpu_hz: the device's counter_hz), cycles included."""
        def t(ticks):
            return f"{self.us(ticks):.1f} us ({ticks * cpu_hz / (self.period * self.rate_hz):,.0f} cycles)"

        return (f"window {self.index}: {self.periods} periods of {self.us(self.period):.0f} us at {self.rate_hz} Hz, "
                f"{self.overruns} overruns, call worst {t(self.worst)} median {t(self.median)}, "
                f"start jitter {self.us(self.jitter):.2f} us")


def decode(frame: P.Frame) -> LoopWindow:
    if len(frame.payload) < LOOP_REPLY.size:
        raise LinkError(f"LOOP reply of {len(frame.payload)} bytes, expected at least {LOOP_REPLY.size}: "
                        f"is the device running the loop app?")
    return LoopWindow(*LOOP_REPLY.unpack_from(frame.payload))


def request(link: Link, inputs=None) -> LoopWindow:
    payload = b"" if inputs is None else np.ascontiguousarray(
        inputs, dtype=REALS[(link.info or link.hello()).real].dtype).tobytes()
    try:
        return decode(link.request(LOOP, payload, what="LOOP"))
    except DeviceError as e:
        raise LinkError(f"the device does not answer LOOP requests ({e}): build it with "
                        f"`mbforge firmware --app loop --rate HZ`") from None


def read_windows(link: Link, seconds: float, inputs=None, windows: int | None = None) -> list[LoopWindow]:
    """The windows the device closes within `seconds` (or until `windows` of them), in order."""
    out: list[LoopWindow] = []
    first = request(link, inputs)
    seen = first.index + first.queued  # windows closed before (or while) the inputs arrived
    end = time.monotonic() + seconds
    while time.monotonic() < end and (windows is None or len(out) < windows):
        w = request(link)
        if w.index > seen:
            if w.index != seen + 1:
                raise LinkError(f"loop windows {seen + 1} to {w.index - 1} were dropped on the device "
                                f"({w.lost} in all): the host read too slowly")
            out.append(w)
            seen = w.index
        if not w.queued:
            time.sleep(POLL)
    return out


def loop_command(url: str, seconds: float, timeout: float, kernel: str | None = None) -> int:
    """`mbforge hil --loop SECONDS`: print the windows; exit 0 if none overran, 1 if some did."""
    if not seconds > 0:
        print(f"mbforge hil: error: --loop must be a number of seconds > 0, got {seconds}", file=sys.stderr)
        return 2
    with Link(url, timeout=timeout) as link:
        info = link.hello()
        if kernel:
            from mbforge.manifest import Manifest
            link.check_digest(Manifest.load(kernel).digest)
        ws = read_windows(link, seconds)
    print(f"loop app: {info.real} kernel, {info.n_in} -> {info.n_out}, times on the board's "
          f"{info.counter_hz / 1e6:g} MHz clock")
    if ws and ws[0].period * ws[0].rate_hz != info.counter_hz:
        print(f"emulated: SysTick counts the emulator's virtual time, {ws[0].period * ws[0].rate_hz / info.counter_hz:g} "
              f"ticks per instruction; the ticks are not cycles: times are instructions at one per cycle")
    for w in ws:
        print(w.line(info.counter_hz))
    if not ws:
        print("no window closed: run longer (--loop SECONDS)", file=sys.stderr)
        return 2
    overruns = sum(w.overruns for w in ws)
    print(f"{len(ws)} windows, {sum(w.periods for w in ws)} periods, {overruns} overruns")
    return 1 if overruns else 0
