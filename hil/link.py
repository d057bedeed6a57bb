"""Host side of the serial link (protocol: mbforge.hil.protocol).

    with Link("socket://127.0.0.1:4321") as link:     # or "/dev/ttyACM0"
        hello = link.hello()
        status, work, ticks, y = link.eval(x)
        results = link.eval_many(X, window=4)
    Y, status, work = LinkDevice(link).eval(X)     # as a device.Device

Invariants:
- Nothing blocks for ever: each serial read waits at most `read_timeout`; a request not
  answered within `timeout` seconds of its first send (or of the last reconnection or
  device boot), nor to one last copy sent then, raises LinkTimeout naming the request,
  the port and what was received.
- Every request is idempotent and keeps its seq: it is sent again, with the same seq,
  at once when a frame was shown damaged or lost: the device answered ERROR (it received
  a damaged copy), a bad frame arrived (the request it most likely answered: the one its
  seq names, else the oldest unanswered), a reply was lost (replies come in request order,
  so a reply to a later request means the earlier one's is gone), or the device announced
  a boot (everything in flight was lost); and after a silent wait, which doubles each time
  (at most `retries` times). An ERROR for a request that arrived intact (unknown type, wrong payload
  size: both are checked after the CRC) is final: DeviceError.
- Under sustained damage EVAL frames carry fewer vectors (Pace: halved on damage, grown
  back after clean replies): a shorter frame is more often whole.
- A reply is matched to its request by seq; a second reply to an answered request (a
  duplicate after a resend) is dropped and counted, never taken as another answer, so
  every request is answered exactly once.
- Every recovery is counted in `stats` (LinkStats.to_json for reports).
- A device that reboots into another kernel (digest, type or sizes differ from the
  first HELLO) raises DigestMismatch: results of two kernels are never mixed.
- Values travel as raw little-endian bits: eval() takes and returns numpy arrays of the
  device's real type, so results can be compared bit for bit.
"""
from __future__ import annotations

import select
import socket
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np
import serial

from mbforge.hil import protocol as P
from mbforge.reals import REALS
from mbforge.verify.device import Evaluation

HELLO_RESEND = 0.05  # seconds: first resend of HELLO (a booting board drops what it gets)
CALIB_ITERATIONS = (10_000, 110_000)
TICKS_OVERFLOW = 0xFFFFFFFF  # the device's count wrapped (24-bit SysTick): no count
RETRIES = 12  # resends of one request after silent waits before its last try (within its timeout)
RECENT = 4096  # answered seqs remembered to tell duplicates from strays
READ_CHUNK, READ_PAUSE = 256, 0.001  # a short read mid-frame: let bytes gather this long


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
    requests: int = 0  # frames sent, resends included
    retries: int = 0  # resends (any cause)
    timeouts: int = 0  # resends because no reply came in time
    stalls: int = 0  # of those, waits in which not one byte arrived
    bad_frames: int = 0  # received frames that failed their checks
    crc_errors: int = 0  # of those, bad CRC
    error_replies: int = 0  # ERROR frames: the device got a damaged request
    device_errors: dict = field(default_factory=dict)  # ERROR name -> count
    lost_replies: int = 0  # resends because a later request was answered first
    duplicates: int = 0  # second replies to answered requests, dropped
    stray_replies: int = 0  # replies matching no request, dropped
    resets: int = 0  # device boots announced after the first handshake
    reconnects: int = 0  # the port was reopened after the connection broke
    batch_cuts: int = 0  # EVAL frames made smaller after damage (Pace)
    last_bad: list = field(default_factory=list)

    def to_json(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "last_bad"}
        d["device_errors"] = dict(sorted(self.device_errors.items()))
        return d


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
    attempts: np.ndarray | None = None  # int32 [N]: sends of the frame that carried the row


@dataclass
class _Pending:
    index: int
    ftype: int
    payload: bytes
    what: str
    wait: float  # seconds until the next resend; doubles after each silent timeout
    base: float  # the first wait: also the wait of the last try
    sent_at: float = 0.0  # the last copy
    first_sent: float = 0.0  # the first copy since the device last booted
    deadline: float = 0.0
    attempts: int = 0
    silent: int = 0  # resends after a silent timeout (at most Link.retries)
    last_try: bool = False  # the copy sent at the deadline went out

    def restart(self, now: float, timeout: float) -> None:
        """A new deadline and budget: the device (or the connection to it) started afresh."""
        self.deadline, self.last_try, self.silent = now + timeout, False, 0


@dataclass
class Pace:
    """Vectors per EVAL frame, adapted to the link's noise as TCP adapts its window: from
    one, doubled after each clean reply (to a frame sent once) up to `most`; halved on a
    sign of damage (a bad frame, an ERROR for a damaged request, a lost reply), once per
    round (a damaged frame sent before the last cut carried the old size); then one more
    after each clean reply. A long frame under noise is rarely whole: smaller ones get through."""
    most: int
    size: int = 1
    doubling: bool = True
    cut_at: float = float("-inf")
    cuts: int = 0

    def clean(self) -> None:
        self.size = min(self.most, self.size * 2 if self.doubling else self.size + 1)

    def damaged(self, first_sent: float) -> None:
        if first_sent <= self.cut_at:
            return
        self.size, self.doubling = max(1, self.size // 2), False
        self.cut_at = time.monotonic()
        self.cuts += 1


class Link:
    def __init__(self, url: str, *, timeout: float = 5.0, baudrate: int = 115200,
                 read_timeout: float = 0.05, retries: int = RETRIES, reconnect: float | None = None):
        """reconnect: seconds to keep trying to reopen a port whose connection broke
        (a QEMU restarted, a USB link re-enumerated); default `timeout`, 0 to fail at once."""
        self.url = url
        self.timeout = timeout
        self.baudrate = baudrate
        self.read_timeout = read_timeout
        self.retries = retries
        self.reconnect_for = timeout if reconnect is None else reconnect
        self.port = self._open()
        self.decoder = P.FrameDecoder()
        self.stats = LinkStats()
        self._seq = 0
        self._frames: deque = deque()
        self._recent: OrderedDict[int, None] = OrderedDict()
        self.info: P.Hello | None = None
        self.on_event = None  # callable(name: str) for progress displays; optional
        self._latency = 0.0  # recent longest send-to-reply time of a request sent once

    def _open(self):
        try:
            port = serial.serial_for_url(self.url, baudrate=self.baudrate, timeout=self.read_timeout,
                                         write_timeout=self.timeout)
        except (serial.SerialException, OSError, ValueError) as e:
            raise LinkError(f"cannot open {self.url}: {e}") from None
        if self.url.startswith("socket://"):
            # pyserial's socket in_waiting is 0 or 1: reads wait in select() here and
            # then take everything that arrived (timeout 0), not one byte per call
            port.timeout = 0
        return port

    def _read_some(self, until: float) -> bytes:
        if self.port.timeout == 0:
            wait = max(0.0, min(self.read_timeout, until - time.monotonic()))
            ready, _, _ = select.select([self.port.fileno()], [], [], wait)
            if not ready:
                return b""
            data = self.port.read(1 << 16)
            # acknowledge at once: a sender that coalesces small writes (Nagle: QEMU's
            # serial socket) then sends the rest of a reply without waiting ~40 ms
            # for a delayed ACK (Linux resets quick-ack mode, so after every read)
            sock = getattr(self.port, "_socket", None)
            if sock is not None and hasattr(socket, "TCP_QUICKACK"):
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                except OSError:
                    pass
            return data
        return self.port.read(max(1, self.port.in_waiting))

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

    def _reconnect(self, why: str) -> None:
        """Reopen the port until `reconnect_for` s have passed; LinkError if it stays shut."""
        try:
            self.port.close()
        except (serial.SerialException, OSError):
            pass
        deadline = time.monotonic() + self.reconnect_for
        while True:
            try:
                self.port = self._open()
                break
            except LinkError:
                if time.monotonic() >= deadline:
                    raise LinkError(f"{why}; reopening {self.url} failed for {self.reconnect_for:g} s") from None
                time.sleep(0.1)
        self.decoder = P.FrameDecoder(self.decoder.max_payload)
        self._frames.clear()
        self.stats.reconnects += 1

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes (also for tests of the device's frame checks)."""
        try:
            self.port.write(data)
            self.port.flush()
        except (serial.SerialException, OSError) as e:
            if self.reconnect_for <= 0:
                raise LinkError(f"write to {self.url} failed: {e}") from None
            self._reconnect(f"write to {self.url} failed: {e}")
            self.send_bytes(data)

    def send(self, ftype: int, payload: bytes = b"", seq: int | None = None) -> int:
        seq = self.next_seq() if seq is None else seq
        self.send_bytes(P.encode_frame(ftype, seq, payload))
        self.stats.requests += 1
        return seq

    def _poll(self, until: float, what: str):
        """The next decoded item (Frame or BadFrame) before `until`, else None.
        A broken connection is reopened (its loss counted) when allowed."""
        while not self._frames:
            if time.monotonic() > until:
                return None
            try:
                data = self._read_some(until)
            except (serial.SerialException, OSError, ValueError) as e:
                if self.reconnect_for <= 0:
                    raise LinkError(f"read from {self.url} failed while awaiting {what}: {e}") from None
                self._reconnect(f"read from {self.url} failed while awaiting {what}: {e}")
                return "reconnected"
            if data:
                self._got_bytes = True
                self._frames.extend(self.decoder.feed(data))
                if len(data) < READ_CHUNK and not self._frames and self.decoder.partial:
                    # mid-frame, a few bytes at a time (QEMU, many USB CDC stacks): let
                    # the rest gather rather than spend a read on each piece
                    time.sleep(READ_PAUSE)
        return self._frames.popleft()

    def _bad(self, item: P.BadFrame) -> None:
        self.stats.bad_frames += 1
        if item.code == P.ERR_CRC:
            self.stats.crc_errors += 1
        self.stats.last_bad = (self.stats.last_bad + [item.describe()])[-5:]

    def read_frame(self, deadline: float, what: str, since: int | None = None) -> P.Frame:
        """The next good frame before `deadline` (time.monotonic()); bad ones are counted.
        With `since` (a seq), replies to requests sent before it are dropped as strays: a
        late duplicate of a resent request may still be on its way when a transaction ends."""
        while True:
            item = self._poll(deadline, what)
            if item is None:
                bad = f", {self.stats.bad_frames} corrupted frame(s) so far" if self.stats.bad_frames else ""
                raise LinkTimeout(f"no reply to {what} from {self.url} within {self.timeout:g} s{bad}")
            if isinstance(item, P.Frame):
                if since is not None and item.seq != P.SEQ_UNKNOWN and 0 < (since - item.seq) % P.SEQ_UNKNOWN < P.SEQ_UNKNOWN // 2:
                    self.stats.stray_replies += 1
                    continue
                return item
            if isinstance(item, P.BadFrame):
                self._bad(item)

    def _boot(self, frame: P.Frame) -> None:
        """The device announced a boot: check it still runs the same kernel."""
        try:
            info = P.Hello.unpack(frame.payload)
        except ValueError as e:
            raise LinkError(f"bad HELLO from {self.url}: {e}") from None
        old = self.info
        if old is not None:
            if (info.digest, info.real, info.n_in, info.n_out) != (old.digest, old.real, old.n_in, old.n_out):
                raise DigestMismatch(f"the device at {self.url} rebooted into kernel digest {info.digest} "
                                     f"({info.real} {info.n_in}->{info.n_out}), it ran {old.digest}: "
                                     f"refusing to mix the results of two kernels")
            self.stats.resets += 1
        self._set_info(info)

    def _set_info(self, info: P.Hello) -> None:
        self.info = info
        self.decoder.max_payload = max(info.max_payload, P.ERROR_PAYLOAD.size)

    def _remember(self, seq: int) -> None:
        self._recent[seq] = None
        self._recent.move_to_end(seq)
        if len(self._recent) > RECENT:
            self._recent.popitem(last=False)

    def transact(self, requests, on_reply, *, window: int = 1, first_wait: float | None = None,
                 pace: "Pace | None" = None) -> None:
        """Send every (ftype, payload, what) of `requests` (an iterable, read as the window
        allows: a generator may size each request by `pace`), at most `window` in flight,
        and call on_reply(index, frame, attempts) exactly once per request with its good
        reply, recovering from every fault listed in the module's invariants."""
        _Transfer(self, requests, on_reply, window, first_wait, pace).run()

    def _first_wait(self, size: int) -> float:
        """First resend of a request of `size` payload bytes: after its transfer time at the
        baud rate (both ways, the largest reply) plus a margin, never more than `timeout`."""
        reply = self.info.max_payload if self.info else 0
        wire = (size + reply + 2 * P.OVERHEAD + 8) * 10 / self.baudrate
        return min(self.timeout, 0.25 + 2 * wire)

    def request(self, ftype: int, payload: bytes = b"", what: str | None = None,
                resend_every: float | None = None) -> P.Frame:
        """Send one request and return its reply, resending it (same seq) as needed."""
        what = what or f"request type 0x{ftype:02X}"
        got = []
        self.transact([(ftype, payload, what)], lambda i, f, a: got.append(f), first_wait=resend_every)
        return got[0]

    # ---- messages ------------------------------------------------------------------
    def hello(self) -> P.Hello:
        # resent while unanswered: a board that is still booting drops what arrives
        # before its UART is enabled (QEMU starts the guest when we connect)
        frame = self.request(P.HELLO, what="HELLO", resend_every=HELLO_RESEND)
        try:
            info = P.Hello.unpack(frame.payload)
        except ValueError as e:
            raise LinkError(f"bad HELLO reply from {self.url}: {e}") from None
        if self.info is not None and info.boot_id != self.info.boot_id:
            self.stats.resets += 1  # a boot whose announcement was lost
        self._set_info(info)
        return self.info

    def check_digest(self, digest: str, source: str = "the manifest") -> None:
        info = self.info or self.hello()
        if info.digest != digest:
            raise DigestMismatch(f"the device at {self.url} runs kernel digest {info.digest}, "
                                 f"but {source} has digest {digest}: refusing to compare "
                                 f"(flash the firmware generated from that kernel)")

    def _dtype(self) -> np.dtype:
        info = self.info or self.hello()
        return np.dtype(REALS[info.real].dtype)

    def encode_inputs(self, x) -> bytes:
        info = self.info or self.hello()
        arr = np.ascontiguousarray(x, dtype=self._dtype()).reshape(-1)
        if arr.size != info.n_in:
            raise ValueError(f"input vector has {arr.size} elements, the device's kernel takes {info.n_in}")
        return arr.tobytes()

    def decode_eval(self, frame: P.Frame, k: int = 1) -> list[EvalResult]:
        """The k records of an EVAL reply."""
        info = self.info
        rec = P.EVAL_REPLY_FIXED.size + info.n_out * self._dtype().itemsize
        if len(frame.payload) != k * rec:
            raise LinkError(f"EVAL reply of {len(frame.payload)} bytes, expected {k} x {rec}")
        out = []
        for v in range(k):
            status, work, ticks = P.EVAL_REPLY_FIXED.unpack_from(frame.payload, v * rec)
            y = np.frombuffer(frame.payload, dtype=self._dtype(), count=info.n_out,
                              offset=v * rec + P.EVAL_REPLY_FIXED.size).copy()
            out.append(EvalResult(status, work, ticks, y))
        return out

    def eval(self, x) -> EvalResult:
        return self.decode_eval(self.request(P.EVAL, self.encode_inputs(x), what="EVAL"))[0]

    def calibrate(self, iterations: int) -> tuple[int, int]:
        """(instructions, raw ticks) of the device's timed loop of `iterations`."""
        frame = self.request(P.CALIB, P.CALIB_REQUEST.pack(iterations), what="CALIB")
        return P.CALIB_REPLY_FMT.unpack(frame.payload)

    def default_batch(self) -> int:
        info = self.info or self.hello()
        return max(1, info.max_batch)

    def default_window(self, batch: int | None = None) -> int:
        """Frames to keep in flight. A socket (QEMU) applies back-pressure, so several
        are safe while the device's receive ring holds all but the one it works on (that
        one was read out of the ring before its work began); a real UART may overrun
        while the device times a kernel with interrupts masked, so one at a time there."""
        info = self.info or self.hello()
        if not self.url.startswith("socket://"):
            return 1
        batch = batch or self.default_batch()
        frame = P.max_frame_len(batch * info.n_in * self._dtype().itemsize) + 2
        return max(1, min(8, info.rx_buffer // frame + 1))

    def eval_many(self, X, *, window: int | None = None, batch: int | None = None,
                  progress=None, on_rows=None) -> BatchResult:
        """Evaluate every row of X, `batch` rows per frame (default the device's maximum),
        up to `window` frames in flight. on_rows(rows, BatchResult), if given, is called
        as each frame's rows arrive (to persist them); progress(done, n) likewise."""
        info = self.info or self.hello()
        dtype = self._dtype()
        X = np.ascontiguousarray(X, dtype=dtype).reshape(-1, info.n_in) if info.n_in else \
            np.zeros((len(X), 0), dtype=dtype)
        n = len(X)
        if batch is None and window and self.url.startswith("socket://"):
            # as many vectors per frame as keep `window - 1` frames within the receive ring
            size = self._dtype().itemsize * info.n_in
            batch = next((b for b in range(info.max_batch, 0, -1)
                          if (window - 1) * (P.max_frame_len(b * size) + 2) <= info.rx_buffer), 1)
        batch = max(1, min(batch or self.default_batch(), info.max_batch))
        if info.n_in == 0:
            batch = 1
        window = max(1, window or self.default_window(batch))
        self.last_batch, self.last_window = batch, window  # for reports
        res = BatchResult(np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.uint32),
                          np.zeros(n, dtype=np.uint32), np.zeros((n, info.n_out), dtype=dtype),
                          np.zeros(n, dtype=np.int32))
        pace = Pace(batch)
        spans: list[range] = []  # the rows of each request, as the pace sized it

        def requests():
            s = 0
            while s < n:
                rows = range(s, min(n, s + pace.size))
                spans.append(rows)
                yield P.EVAL, X[rows.start:rows.stop].tobytes(), f"EVAL of vectors {rows.start}..{rows.stop - 1}"
                s = rows.stop

        done = np.zeros(n, dtype=bool)
        count = [0]

        def on_reply(i: int, frame: P.Frame, attempts: int) -> None:
            rows = spans[i]
            if done[rows.start]:  # transact answers each request once; guard all the same
                raise LinkError(f"vector {rows.start} answered twice")
            for r, rec in zip(rows, self.decode_eval(frame, len(rows))):
                res.status[r], res.work[r], res.ticks[r], res.outputs[r] = rec.status, rec.work, rec.ticks, rec.outputs
                res.attempts[r] = attempts
            done[rows.start:rows.stop] = True
            count[0] += len(rows)
            if on_rows:
                on_rows(rows, res)
            if progress:
                progress(count[0], n)

        try:
            self.transact(requests(), on_reply, window=window, pace=pace)
        finally:
            self.stats.batch_cuts += pace.cuts
        return res


class _Transfer:
    """One Link.transact(): the requests in flight (in order of last send) and the answer
    to each event. A sign that a frame was damaged (a bad frame, an ERROR reply, a reply
    shown lost) resends at once at the same wait; only a silent timeout doubles the wait.
    At a request's deadline one last copy goes out before it is given up."""

    def __init__(self, link: Link, requests, on_reply, window: int, first_wait, pace: Pace | None):
        self.link, self.on_reply, self.window, self.pace = link, on_reply, max(1, window), pace
        self.first_wait = first_wait
        self.source = iter(requests)
        self.more, self.count = True, 0
        self.pending: OrderedDict[int, _Pending] = OrderedDict()

    def run(self) -> None:
        link = self.link
        while True:
            self.fill()
            if not self.pending:
                return
            seq, p = next(iter(self.pending.items()))
            link._got_bytes = False
            item = link._poll(min(p.sent_at + p.wait, p.deadline), f"{p.what} seq {seq}")
            if item is None:
                link.stats.timeouts += 1
                if not link._got_bytes:
                    link.stats.stalls += 1
                self.resend(seq, p, "no reply in time", silent=True)
            elif item == "reconnected":  # a restarted device announces its boot; else the waits resend
                for q in self.pending.values():
                    q.restart(time.monotonic(), link.timeout)
            elif isinstance(item, P.BadFrame):
                link._bad(item)
                self.damaged(item.seq, f"corrupted reply ({item.describe()})")
            elif item.type == P.HELLO_REPLY and item.seq == P.BOOT_SEQ:
                self.boot(item)
            elif item.type == P.ERROR:
                self.error(item)
            else:
                self.reply(item)

    def fill(self) -> None:
        """Send new requests while the window has room."""
        link = self.link
        while self.more and len(self.pending) < self.window:
            try:
                ftype, payload, what = next(self.source)
            except StopIteration:
                self.more = False
                return
            # waits adapt to the replies seen: a loaded host or a slow device is no
            # reason to resend (each duplicate costs the device link time)
            wait = self.first_wait if self.first_wait is not None else link._first_wait(len(payload))
            wait = max(wait, 3 * link._latency)
            p = _Pending(self.count, ftype, payload, what, wait, wait)
            self.count += 1
            seq = link.next_seq()
            self.pending[seq] = p
            self.transmit(seq, p)
            p.first_sent = p.sent_at
            p.deadline = p.sent_at + link.timeout

    def transmit(self, seq: int, p: _Pending) -> None:
        self.link.send(p.ftype, p.payload, seq)
        p.attempts += 1
        p.sent_at = time.monotonic()

    def resend(self, seq: int, p: _Pending, why: str, *, silent: bool = False) -> None:
        link = self.link
        now = time.monotonic()
        if now >= p.deadline or p.silent >= link.retries:
            if p.last_try:
                bad = f", {link.stats.bad_frames} corrupted frame(s) so far" if link.stats.bad_frames else ""
                raise LinkTimeout(f"no reply to {p.what} seq {seq} from {link.url} within {link.timeout:g} s "
                                  f"({p.attempts} attempts, last failure: {why}{bad})")
            # a last copy: the loss may have been the previous copy's alone
            p.last_try, p.deadline = True, now + p.base
        if silent:
            p.silent += 1
            p.wait = min(p.wait * 2, link.timeout)
        link.stats.retries += 1
        self.pending.move_to_end(seq)
        self.transmit(seq, p)

    def damaged(self, seq: int, why: str) -> None:
        """A frame was damaged on the way: resend the request it most likely belonged to,
        the one its seq names, else (the seq unknown or itself damaged) the oldest
        unanswered, whose reply comes next; none if it names an answered request (a
        damaged duplicate)."""
        if seq not in self.pending:
            if seq in self.link._recent or not self.pending:
                return
            seq = next(iter(self.pending))
        p = self.pending[seq]
        if self.pace:
            self.pace.damaged(p.first_sent)
        self.resend(seq, p, why)

    def error(self, frame: P.Frame) -> None:
        stats = self.link.stats
        stats.error_replies += 1
        code = frame.payload[0] if frame.payload else 0
        name = P.ERROR_NAMES.get(code, f"error {code}")
        stats.device_errors[name] = stats.device_errors.get(name, 0) + 1
        if frame.seq in self.pending and code in (P.ERR_TYPE, P.ERR_PAYLOAD):
            # checked after the CRC: the request arrived intact and is wrong
            raise DeviceError(code, frame.seq, self.pending[frame.seq].what)
        self.damaged(frame.seq, f"device error: {name}")

    def boot(self, frame: P.Frame) -> None:
        """The device announced a boot: everything in flight was lost; send it again."""
        link = self.link
        link._boot(frame)
        if link.on_event:
            link.on_event("reset")
        for seq, p in list(self.pending.items()):
            p.restart(time.monotonic(), link.timeout)
            if p.ftype == P.HELLO:
                # a HELLO sent while the board booted may still be answered: give it
                # its (short) wait from now rather than a duplicate at once
                p.sent_at = time.monotonic()
            else:
                self.resend(seq, p, "the device rebooted")
            p.first_sent = p.sent_at  # the copies sent before the boot are gone

    def reply(self, frame: P.Frame) -> None:
        link = self.link
        if frame.seq not in self.pending:
            if frame.seq in link._recent:
                link.stats.duplicates += 1
            else:
                link.stats.stray_replies += 1
            return
        p = self.pending[frame.seq]
        if frame.type != p.ftype | P.REPLY:
            raise LinkError(f"{p.what} seq {frame.seq}: reply of type 0x{frame.type:02X}, "
                            f"expected 0x{p.ftype | P.REPLY:02X}")
        # replies come in request order: a request whose last copy went before this
        # one's first lost its reply (or its request); later copies may yet be answered
        for seq, q in list(self.pending.items()):
            if seq == frame.seq:
                break
            if q.sent_at < p.first_sent:
                link.stats.lost_replies += 1
                if self.pace:
                    self.pace.damaged(q.first_sent)
                self.resend(seq, q, "reply lost")
        if p.attempts == 1:
            link._latency = max(time.monotonic() - p.sent_at, 0.9 * link._latency)
            if self.pace:
                self.pace.clean()
        self.on_reply(p.index, frame, p.attempts)
        del self.pending[frame.seq]
        link._remember(frame.seq)


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

    def __init__(self, link: Link, *, window: int | None = None, calibrated: bool = True,
                 batch: int | None = None, on_rows=None):
        self.link = link
        self.window = window
        self.batch_size = batch
        self.on_rows = on_rows
        info = link.info or link.hello()
        self.ticks_per_unit = calibrate(link) if calibrated and info.counter == "SysTick" else None
        self.work_unit = "instructions" if self.ticks_per_unit else \
            {"DWT": "cycles", "SysTick": "ticks"}.get(info.counter)
        self.name = f"{info.firmware} at {link.url}"
        self.batch: BatchResult | None = None

    def eval(self, raw_inputs) -> Evaluation:
        self.batch = b = self.link.eval_many(raw_inputs, window=self.window, batch=self.batch_size,
                                             on_rows=self.on_rows)
        if self.work_unit is None:
            return Evaluation(b.outputs, b.status, None)
        return Evaluation(b.outputs, b.status, self.work_of(b.work, b.ticks))

    def work_of(self, work: np.ndarray, ticks: np.ndarray) -> np.ndarray | None:
        """Work per call in `work_unit` from the device's counts (-1: the count wrapped)."""
        if self.work_unit is None:
            return None
        w = np.asarray(work).astype(np.int64)
        if self.ticks_per_unit:
            w = np.rint(w / self.ticks_per_unit).astype(np.int64)
        w[np.asarray(ticks) == TICKS_OVERFLOW] = -1
        return w


def unpack_error(frame: P.Frame) -> tuple[int, int]:
    """(code, seq) of an ERROR frame's payload."""
    return P.ERROR_PAYLOAD.unpack(frame.payload)


__all__ = ["Link", "LinkError", "LinkTimeout", "DeviceError", "DigestMismatch", "LinkStats",
           "EvalResult", "BatchResult", "unpack_error", "calibrate", "LinkDevice"]
