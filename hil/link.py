"""Host side of the serial link (protocol: mbforge.hil.protocol).

    with Link("socket://127.0.0.1:4321") as link:     # or "/dev/ttyACM0"
        hello = link.hello()
        status, work, ticks, y = link.eval(x)
        results = link.eval_many(X, window=4)
    Y, status, work = LinkDevice(link).eval(X)     # as a device.Device

Invariants:
- Nothing blocks for ever: each serial read waits at most `read_timeout`, and each
  request has an overall deadline of `timeout` seconds, after which LinkTimeout names
  the request, the port and what was received instead.
- A reply is matched to its request by seq; a reply whose seq is not in flight
  (a late duplicate, a stray) is dropped and counted, never taken as another answer,
  so no result is lost or counted twice.
- Frames that fail their checks are counted in `stats` and skipped; an ERROR reply for
  a request in flight raises DeviceError naming the code.
- Values travel as raw little-endian bits: eval() takes and returns numpy arrays of the
  device's real type, so results can be compared bit for bit.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import serial

from mbforge.hil import protocol as P
from mbforge.hil.device import Evaluation

HELLO_RESEND = 0.05  # seconds
CALIB_ITERATIONS = (10_000, 110_000)
TICKS_OVERFLOW = 0xFFFFFFFF  # the device's count wrapped (24-bit SysTick): no count


class LinkError(RuntimeError):
    """The link or the device misbehaved."""


class LinkTimeout(LinkError):
    """No (valid) reply within the deadline."""


class DeviceError(LinkError):
    """The device answered a request with an ERROR frame."""

    def __init__(self, code: int, seq: int, request: str):
        self.code, self.seq = code, seq
        super().__init__(f"device rejected {request} (seq {seq}): error {code}, "
                         f"{P.ERROR_NAMES.get(code, 'unknown error')}")


class DigestMismatch(LinkError):
    """The device runs another kernel than the manifest describes."""


@dataclass
class LinkStats:
    bad_frames: int = 0
    stray_replies: int = 0
    requests: int = 0
    last_bad: list = field(default_factory=list)


@dataclass(frozen=True)
class EvalResult:
    status: int
    work: int
    ticks: int
    outputs: np.ndarray

    def __iter__(self):  # allows `status, work, ticks, y = link.eval(x)`
        return iter((self.status, self.work, self.ticks, self.outputs))


@dataclass
class BatchResult:
    status: np.ndarray  # int32 [N]
    work: np.ndarray  # uint32 [N]
    ticks: np.ndarray  # uint32 [N]
    outputs: np.ndarray  # [N, n_out] of the device's real type


class Link:
    def __init__(self, url: str, *, timeout: float = 5.0, baudrate: int = 115200,
                 read_timeout: float = 0.05):
        self.url = url
        self.timeout = timeout
        try:
            self.port = serial.serial_for_url(url, baudrate=baudrate, timeout=read_timeout,
                                              write_timeout=timeout)
        except (serial.SerialException, OSError, ValueError) as e:
            raise LinkError(f"cannot open {url}: {e}") from None
        self.decoder = P.FrameDecoder()
        self.stats = LinkStats()
        self._seq = 0
        self._frames: deque = deque()
        self.info: P.Hello | None = None

    # ---- plumbing ------------------------------------------------------------------
    def close(self) -> None:
        self.port.close()

    def __enter__(self) -> "Link":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def next_seq(self) -> int:
        seq = self._seq
        self._seq = (self._seq + 1) % P.SEQ_UNKNOWN  # 0xFFFF is reserved for "unknown"
        return seq

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes (for tests of the device's frame checks)."""
        try:
            self.port.write(data)
            self.port.flush()
        except (serial.SerialException, OSError) as e:
            raise LinkError(f"write to {self.url} failed: {e}") from None

    def send(self, ftype: int, payload: bytes = b"", seq: int | None = None) -> int:
        seq = self.next_seq() if seq is None else seq
        self.send_bytes(P.encode_frame(ftype, seq, payload))
        self.stats.requests += 1
        return seq

    def read_frame(self, deadline: float, what: str) -> P.Frame:
        """The next good frame before `deadline` (time.monotonic()); bad ones are counted."""
        while True:
            while self._frames:
                item = self._frames.popleft()
                if isinstance(item, P.Frame):
                    return item
                self.stats.bad_frames += 1
                self.stats.last_bad = (self.stats.last_bad + [item.describe()])[-5:]
            if time.monotonic() > deadline:
                bad = f", {self.stats.bad_frames} corrupted frame(s) so far" if self.stats.bad_frames else ""
                raise LinkTimeout(f"no reply to {what} from {self.url} within {self.timeout:g} s{bad}")
            try:
                data = self.port.read(max(1, self.port.in_waiting))
            except (serial.SerialException, OSError) as e:
                raise LinkError(f"read from {self.url} failed while awaiting {what}: {e}") from None
            if data:
                self._frames.extend(self.decoder.feed(data))

    def request(self, ftype: int, payload: bytes = b"", what: str | None = None,
                resend_every: float | None = None) -> P.Frame:
        """Send one request and return its reply (ERROR -> DeviceError).

        With `resend_every`, an idempotent request is sent again (with a new seq) when
        no reply came for that long; a reply to any of the copies answers it."""
        what = what or f"request type 0x{ftype:02X}"
        sent = [self.send(ftype, payload)]
        deadline = time.monotonic() + self.timeout
        rejected = None
        while True:
            wait_until = deadline if resend_every is None else min(deadline, time.monotonic() + resend_every)
            try:
                frame = self.read_frame(wait_until, f"{what} seq {sent[-1]}")
            except LinkTimeout:
                if time.monotonic() >= deadline:
                    if rejected is not None:
                        raise rejected from None
                    raise
                sent.append(self.send(ftype, payload))
                continue
            if frame.seq not in sent:
                self.stats.stray_replies += 1
                continue
            if frame.type == P.ERROR:
                code = frame.payload[0] if frame.payload else 0
                rejected = DeviceError(code, frame.seq, what)
                if resend_every is None or time.monotonic() >= deadline:
                    raise rejected
                # an idempotent request copy mangled while the board booted: ask again
                self.stats.bad_frames += 1
                sent.append(self.send(ftype, payload))
                continue
            if frame.type != ftype | P.REPLY:
                raise LinkError(f"{what} seq {frame.seq}: reply of type 0x{frame.type:02X}, "
                                f"expected 0x{ftype | P.REPLY:02X}")
            return frame

    # ---- messages ------------------------------------------------------------------
    def hello(self) -> P.Hello:
        # resent while unanswered: a board that is still booting drops what arrives
        # before its UART is enabled (QEMU starts the guest when we connect)
        frame = self.request(P.HELLO, what="HELLO", resend_every=HELLO_RESEND)
        try:
            self.info = P.Hello.unpack(frame.payload)
        except ValueError as e:
            raise LinkError(f"bad HELLO reply from {self.url}: {e}") from None
        self.decoder.max_payload = max(self.info.max_payload, P.ERROR_PAYLOAD.size)
        return self.info

    def check_digest(self, digest: str, source: str = "the manifest") -> None:
        info = self.info or self.hello()
        if info.digest != digest:
            raise DigestMismatch(f"the device at {self.url} runs kernel digest {info.digest}, "
                                 f"but {source} has digest {digest}: refusing to compare "
                                 f"(flash the firmware generated from that kernel)")

    def _dtype(self) -> np.dtype:
        info = self.info or self.hello()
        return np.dtype(P.REAL_DTYPES[info.real])

    def encode_inputs(self, x) -> bytes:
        info = self.info or self.hello()
        arr = np.ascontiguousarray(x, dtype=self._dtype()).reshape(-1)
        if arr.size != info.n_in:
            raise ValueError(f"input vector has {arr.size} elements, the device's kernel takes {info.n_in}")
        return arr.tobytes()

    def decode_eval(self, frame: P.Frame) -> EvalResult:
        info = self.info
        size = P.EVAL_REPLY_FIXED.size + info.n_out * self._dtype().itemsize
        if len(frame.payload) != size:
            raise LinkError(f"EVAL reply of {len(frame.payload)} bytes, expected {size}")
        status, work, ticks = P.EVAL_REPLY_FIXED.unpack_from(frame.payload)
        y = np.frombuffer(frame.payload, dtype=self._dtype(), offset=P.EVAL_REPLY_FIXED.size).copy()
        return EvalResult(status, work, ticks, y)

    def eval(self, x) -> EvalResult:
        return self.decode_eval(self.request(P.EVAL, self.encode_inputs(x), what="EVAL"))

    def calibrate(self, iterations: int) -> tuple[int, int]:
        """(instructions, raw ticks) of the device's timed loop of `iterations`."""
        frame = self.request(P.CALIB, P.CALIB_REQUEST.pack(iterations), what="CALIB")
        return P.CALIB_REPLY_FMT.unpack(frame.payload)

    def default_window(self) -> int:
        """Requests to keep in flight. A socket (QEMU) applies back-pressure, so several
        are safe up to the device's receive ring; a real UART may overrun while the
        device times a kernel with interrupts masked, so one at a time there."""
        info = self.info or self.hello()
        if not self.url.startswith("socket://"):
            return 1
        frame = P.max_frame_len(info.n_in * self._dtype().itemsize) + 2
        return max(1, min(8, info.rx_buffer // frame - 1))

    def eval_many(self, X, *, window: int | None = None, progress=None) -> BatchResult:
        """Evaluate every row of X, keeping up to `window` requests in flight."""
        info = self.info or self.hello()
        dtype = self._dtype()
        X = np.ascontiguousarray(X, dtype=dtype).reshape(-1, info.n_in) if info.n_in else \
            np.zeros((len(X), 0), dtype=dtype)
        n = len(X)
        window = max(1, window or self.default_window())
        status = np.zeros(n, dtype=np.int32)
        work = np.zeros(n, dtype=np.uint32)
        ticks = np.zeros(n, dtype=np.uint32)
        Y = np.zeros((n, info.n_out), dtype=dtype)
        in_flight: dict[int, tuple[int, float]] = {}  # seq -> (row, deadline)
        done = np.zeros(n, dtype=bool)
        next_row = 0
        completed = 0
        while completed < n:
            while next_row < n and len(in_flight) < window:
                seq = self.send(P.EVAL, X[next_row].tobytes())
                in_flight[seq] = (next_row, time.monotonic() + self.timeout)
                next_row += 1
            oldest_seq = next(iter(in_flight))
            row0, deadline = in_flight[oldest_seq]
            frame = self.read_frame(deadline, f"EVAL seq {oldest_seq} (vector {row0})")
            if frame.seq not in in_flight:
                self.stats.stray_replies += 1
                continue
            row, _ = in_flight.pop(frame.seq)
            if frame.type == P.ERROR:
                raise DeviceError(frame.payload[0] if frame.payload else 0, frame.seq,
                                  f"EVAL of vector {row}")
            if frame.type != P.EVAL_REPLY:
                raise LinkError(f"EVAL seq {frame.seq}: reply type 0x{frame.type:02X}")
            if done[row]:  # cannot happen with unique in-flight seqs; guard all the same
                raise LinkError(f"vector {row} answered twice")
            r = self.decode_eval(frame)
            status[row], work[row], ticks[row], Y[row] = r.status, r.work, r.ticks, r.outputs
            done[row] = True
            completed += 1
            if progress:
                progress(completed, n)
        return BatchResult(status, work, ticks, Y)


def calibrate(link: Link) -> float | None:
    """SysTick ticks per instruction, from two CALIB loops (None without a counter)."""
    if link.info.counter == "none":
        return None
    (i0, t0), (i1, t1) = (link.calibrate(n) for n in CALIB_ITERATIONS)
    if i1 <= i0 or t1 <= t0:
        return None
    return (t1 - t0) / (i1 - i0)


class LinkDevice:
    """The kernel on the device behind `link` as a device.Device.

    work: with a SysTick counter, instructions (ticks / the CALIB slope, rounded: exact
    while a tick is less than half an instruction); with DWT, processor cycles; -1 for a
    call whose count wrapped; None without a counter. `batch` keeps the last raw
    BatchResult (counter ticks included) for reports."""

    def __init__(self, link: Link, *, window: int | None = None, calibrated: bool = True):
        self.link = link
        self.window = window
        info = link.info or link.hello()
        self.ticks_per_unit = calibrate(link) if calibrated and info.counter == "SysTick" else None
        self.work_unit = "instructions" if self.ticks_per_unit else \
            {"DWT": "cycles", "SysTick": "ticks"}.get(info.counter)
        self.name = f"{info.firmware} at {link.url}"
        self.batch: BatchResult | None = None
        self.progress = None  # callable(done, total), e.g. report.progress_bar's

    def eval(self, raw_inputs) -> Evaluation:
        self.batch = b = self.link.eval_many(raw_inputs, window=self.window, progress=self.progress)
        if self.work_unit is None:
            return Evaluation(b.outputs, b.status, None)
        work = b.work.astype(np.int64)
        if self.ticks_per_unit:
            work = np.rint(work / self.ticks_per_unit).astype(np.int64)
        work[b.ticks == TICKS_OVERFLOW] = -1
        return Evaluation(b.outputs, b.status, work)


def unpack_error(frame: P.Frame) -> tuple[int, int]:
    """(code, seq) of an ERROR frame's payload."""
    return P.ERROR_PAYLOAD.unpack(frame.payload)


__all__ = ["Link", "LinkError", "LinkTimeout", "DeviceError", "DigestMismatch",
           "EvalResult", "BatchResult", "unpack_error", "calibrate", "LinkDevice"]
