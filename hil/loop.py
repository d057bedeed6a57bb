"""Host side of the loop app (`mbforge firmware --app loop --rate HZ`): read its window reports.

    with Link(url) as link:
        windows = read_windows(link, seconds=1.0)         # LoopWindow per closed window
        windows = read_windows(link, seconds=1.0, inputs=x)  # stream one input vector first

A LOOP request (type LOOP) carries nothing or one input vector (the kernel's real type,
used from the next period on); the reply is the last closed window (LOOP_REPLY, 11 u32)
followed by the last outputs. Figures are SysTick ticks at the processor clock (under
QEMU -icount, a function of the instructions run, so deterministic): `worst` and `median`
cycles per call, start latency min/max (their difference is the jitter of the start time).
`mbforge hil --loop SECONDS` prints one line per window (loop_command).

Windows are 0.1 s of device time; a poll returns the last closed one, so windows that
close between two polls (the emulator can run faster than real time) are skipped.
Invariants: a window is reported once (by its index), in order; a reply of the wrong
size or a device that does not run the loop app is a LinkError with one line, never a
traceback.
"""
from __future__ import annotations

import struct
import sys
import time
from dataclasses import dataclass

import numpy as np

from mbforge.hil import protocol as P
from mbforge.hil.link import DeviceError, Link, LinkError

LOOP = 0x10  # mbforge.firmware.project.LOOP_TYPE
LOOP_REPLY = struct.Struct("<11I")
POLL = 0.02  # seconds between LOOP requests


@dataclass(frozen=True)
class LoopWindow:
    index: int  # windows closed since boot (1 = the first)
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

    @property
    def jitter(self) -> int:
        return self.latency_max - self.latency_min

    def line(self) -> str:
        return (f"window {self.index}: {self.periods} periods at {self.rate_hz} Hz ({self.period} ticks), "
                f"{self.overruns} overruns, cycles/call worst {self.worst} median {self.median}, "
                f"start jitter {self.jitter} ticks ({self.latency_min}..{self.latency_max})")


def decode(frame: P.Frame) -> LoopWindow:
    if len(frame.payload) < LOOP_REPLY.size:
        raise LinkError(f"LOOP reply of {len(frame.payload)} bytes, expected at least {LOOP_REPLY.size}: "
                        f"is the device running the loop app?")
    return LoopWindow(*LOOP_REPLY.unpack_from(frame.payload))


def request(link: Link, inputs=None) -> LoopWindow:
    payload = b"" if inputs is None else np.ascontiguousarray(
        inputs, dtype=P.REAL_DTYPES[(link.info or link.hello()).real]).tobytes()
    try:
        return decode(link.request(LOOP, payload, what="LOOP"))
    except DeviceError as e:
        raise LinkError(f"the device does not answer LOOP requests ({e}): build it with "
                        f"`mbforge firmware --app loop --rate HZ`") from None


def read_windows(link: Link, seconds: float, inputs=None, windows: int | None = None) -> list[LoopWindow]:
    """The windows the device closes within `seconds` (or until `windows` of them), in order."""
    out: list[LoopWindow] = []
    seen = request(link, inputs).index  # windows closed before (or while) the inputs arrived
    end = time.monotonic() + seconds
    while time.monotonic() < end and (windows is None or len(out) < windows):
        w = request(link)
        if w.index > seen:  # windows closed between two polls are not kept: the last one is
            out.append(w)
            seen = w.index
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
    print(f"loop app: {info.real} kernel, {info.n_in} -> {info.n_out}, counter {info.counter_hz} Hz")
    for w in ws:
        print(w.line())
    if not ws:
        print("no window closed: run longer (--loop SECONDS)", file=sys.stderr)
        return 2
    overruns = sum(w.overruns for w in ws)
    print(f"{len(ws)} windows, {sum(w.periods for w in ws)} periods, {overruns} overruns")
    return 1 if overruns else 0
