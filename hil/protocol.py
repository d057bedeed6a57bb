"""The mbforge serial link protocol: frames, message types, error codes, payloads.

This module is the single definition of the protocol: the firmware generator renders
these constants into the device's `mbf_config.h`, so host and device cannot drift apart.

Wire format. Every frame is `0x00 COBS(body) 0x00`; the leading delimiter closes
whatever partial frame a receiver holds, so after garbage or a truncated frame the next
good frame is answered normally. Empty frames (consecutive 0x00) are ignored.

    body = type u8 | seq u16 LE | len u16 LE | payload[len] | crc32 u32 LE

crc32 is IEEE 802.3 (zlib.crc32) over type..payload. Replies echo the request's seq.

Checks, in the order both ends apply them to a received frame (first failure wins):
  1. more encoded bytes than the receive buffer holds   -> ERR_OVERSIZE (3), frame
     discarded up to the next delimiter, one error reply
  2. decoded body shorter than the 5-byte header, or shorter than its len field says,
     or len > max payload                                -> ERR_LENGTH (2) / ERR_OVERSIZE (3)
  3. decoded body longer than its len field says          -> ERR_LENGTH (2)
  4. COBS block structure broken (length otherwise fine)  -> ERR_COBS (6)
  5. crc mismatch                                         -> ERR_CRC (1)
  6. unknown request type                                 -> ERR_TYPE (4)
  7. payload size wrong for the type                      -> ERR_PAYLOAD (5)
The seq in an ERROR reply is the frame's seq when at least 3 body bytes could be read
(unverified when the CRC failed), else SEQ_UNKNOWN. A decoded body that would not fit
the receiver's buffer is ERR_OVERSIZE when its len field exceeds the max payload, else
ERR_LENGTH (check 2 and 3 decide it, as for a body that fits).

Recovery. Requests have no side effects, so the host may send one again with the same
seq (after a timeout, an ERROR, or a reply lost to corruption); replies come in request
order. At every boot the device announces itself with an unsolicited HELLO reply of seq
SEQ_UNKNOWN (BOOT_SEQ) whose boot id differs from the previous boot's when its RAM
survived the reset: the host then knows every request in flight was lost.

Messages (payload layouts, all little-endian):
  HELLO  0x01 -> 0x81  protocol u8, real kind u8, n_in u16, n_out u16, counter kind u8,
                       counter Hz u32, max payload u16, rx buffer u16, digest char[64],
                       boot id u32, max batch u16, firmware version: len u8 + ASCII
  EVAL   0x02 -> 0x82  request: k vectors of n_in raw reals (1 <= k <= max batch; k = 1
                       when n_in = 0); reply: k records of status i32, work u32 (counter
                       ticks less the measured empty-call overhead), raw ticks u32,
                       n_out raw reals
  CALIB  0x03 -> 0x83  request: iterations u32; reply: instructions u32, raw ticks u32 of a
                       timed loop with a known instruction count (2 per iteration), so the
                       host can turn SysTick ticks into instructions under QEMU -icount
  SIM    0x04 -> 0x84  only in the firmware of a step kernel (manifest `step`): request: n_in
                       raw reals (the state, then the held inputs u), steps u32, decim u32,
                       budget u32 (work ticks a step may take); the device runs `steps`
                       steps, each timed as EVAL's call, its out[0:n_state] copied to
                       in[0:n_state] after it; reply: first non-zero status i32 and its
                       step u32 (1 = the request's first; 0, 0 if none), overruns u32 (steps whose work exceeded the
                       budget), wrapped u32 (steps longer than the counter can time), sum
                       of work u64, worst work u32 (of the steps that did not wrap), then
                       steps/decim samples, each the work u32 of the decim-th step and the
                       n_state raw reals of the state after it. steps >= 1, decim >= 1, steps % decim == 0 and the
                       samples must fit the max payload, else ERR_PAYLOAD. The reply is a
                       function of the payload alone, so the host chains requests, each
                       from the last sample of the previous reply (mbforge.hil.simulate)
  ERROR  0x7F          code u8, seq u16 (of the offending frame, or SEQ_UNKNOWN)
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from mbforge.hil import cobs
from mbforge.reals import REALS

PROTOCOL_VERSION = 2
DELIM = 0x00

HELLO, EVAL, CALIB, SIM = 0x01, 0x02, 0x03, 0x04
REPLY = 0x80  # reply type = request type | REPLY
HELLO_REPLY, EVAL_REPLY, CALIB_REPLY, SIM_REPLY = HELLO | REPLY, EVAL | REPLY, CALIB | REPLY, SIM | REPLY
ERROR = 0x7F

ERR_CRC, ERR_LENGTH, ERR_OVERSIZE, ERR_TYPE, ERR_PAYLOAD, ERR_COBS = 1, 2, 3, 4, 5, 6
ERROR_NAMES = {
    ERR_CRC: "bad CRC",
    ERR_LENGTH: "bad length or truncated frame",
    ERR_OVERSIZE: "oversize frame",
    ERR_TYPE: "unknown message type",
    ERR_PAYLOAD: "wrong payload size",
    ERR_COBS: "COBS error",
}
SEQ_UNKNOWN = 0xFFFF
BOOT_SEQ = SEQ_UNKNOWN  # the seq of the HELLO a device sends unasked when it boots

HEADER = struct.Struct("<BHH")  # type, seq, len
HEADER_LEN = HEADER.size  # 5
CRC_LEN = 4
OVERHEAD = HEADER_LEN + CRC_LEN  # body bytes besides the payload

REAL_NAMES = {r.code: name for name, r in REALS.items()}  # the HELLO's real kind byte (mbforge.reals)
COUNTER_NONE, COUNTER_SYSTICK, COUNTER_DWT = 0, 1, 2
COUNTER_NAMES = {COUNTER_NONE: "none", COUNTER_SYSTICK: "SysTick", COUNTER_DWT: "DWT"}

HELLO_FIXED = struct.Struct("<BBHHBIHH64sIH")
EVAL_REPLY_FIXED = struct.Struct("<iII")
CALIB_REQUEST = struct.Struct("<I")
CALIB_REPLY_FMT = struct.Struct("<II")
SIM_REQUEST_FIXED = struct.Struct("<III")  # steps, decim, budget (after the n_in reals)
SIM_REPLY_FIXED = struct.Struct("<iIIIQI")  # status, its step, overruns, wrapped, work sum, worst
ERROR_PAYLOAD = struct.Struct("<BH")
CALIB_INSTRUCTIONS_PER_ITERATION = 2  # `subs; bne` in the device's calibration loop


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def encode_body(ftype: int, seq: int, payload: bytes = b"") -> bytes:
    head = HEADER.pack(ftype, seq & 0xFFFF, len(payload)) + payload
    return head + struct.pack("<I", crc32(head))


def encode_frame(ftype: int, seq: int, payload: bytes = b"") -> bytes:
    """The bytes of one frame on the wire, delimiters included."""
    return bytes([DELIM]) + cobs.encode(encode_body(ftype, seq, payload)) + bytes([DELIM])


def max_frame_len(max_payload: int) -> int:
    """Encoded bytes (without delimiters) of the largest legal frame."""
    return cobs.max_encoded_len(OVERHEAD + max_payload)


@dataclass(frozen=True)
class Frame:
    type: int
    seq: int
    payload: bytes


@dataclass(frozen=True)
class BadFrame:
    """A frame that failed a check: `code` is the ERR_* the device would answer with."""
    code: int
    seq: int
    raw_len: int

    def describe(self) -> str:
        seq = "?" if self.seq == SEQ_UNKNOWN else str(self.seq)
        return f"{ERROR_NAMES.get(self.code, self.code)} (seq {seq}, {self.raw_len} encoded bytes)"


def parse_raw(raw: bytes, max_payload: int) -> Frame | BadFrame:
    """Check one frame's encoded bytes (between delimiters) as the device does."""
    body, complete = cobs.decode_prefix(raw)
    seq = struct.unpack_from("<H", body, 1)[0] if len(body) >= 3 else SEQ_UNKNOWN
    if len(body) < HEADER_LEN:
        return BadFrame(ERR_LENGTH, seq, len(raw))
    ftype, seq, plen = HEADER.unpack_from(body)
    if plen > max_payload:
        return BadFrame(ERR_OVERSIZE, seq, len(raw))
    if len(body) != OVERHEAD + plen:
        return BadFrame(ERR_LENGTH, seq, len(raw))
    if not complete:
        return BadFrame(ERR_COBS, seq, len(raw))
    (crc,) = struct.unpack_from("<I", body, HEADER_LEN + plen)
    if crc != crc32(body[:HEADER_LEN + plen]):
        return BadFrame(ERR_CRC, seq, len(raw))
    return Frame(ftype, seq, body[HEADER_LEN:HEADER_LEN + plen])


class FrameDecoder:
    """Incremental splitter: feed wire bytes, get Frames and BadFrames.

    Bounded: at most `max_raw` encoded bytes are kept for one frame; a longer frame is
    dropped up to the next delimiter and reported once as ERR_OVERSIZE.
    """

    def __init__(self, max_payload: int = 0xFFFF):
        self.max_payload = max_payload
        self.max_raw = max_frame_len(max_payload)
        self._raw = bytearray()
        self._oversize = False

    @property
    def partial(self) -> int:
        """Encoded bytes held of a frame not yet closed by its delimiter."""
        return len(self._raw)

    def feed(self, data: bytes) -> list[Frame | BadFrame]:
        out: list[Frame | BadFrame] = []
        for chunk_i, chunk in enumerate(bytes(data).split(b"\x00")):
            if chunk_i > 0:  # a delimiter came before this chunk: close the frame
                out.extend(self._close())
            if self._oversize:
                continue
            self._raw += chunk
            if len(self._raw) > self.max_raw:
                self._oversize = True
        return out

    def _close(self) -> list[Frame | BadFrame]:
        raw, oversize = bytes(self._raw), self._oversize
        self._raw.clear()
        self._oversize = False
        if oversize:
            head, _ = cobs.decode_prefix(raw[:8])
            seq = struct.unpack_from("<H", head, 1)[0] if len(head) >= 3 else SEQ_UNKNOWN
            return [BadFrame(ERR_OVERSIZE, seq, len(raw))]
        if not raw:
            return []
        return [parse_raw(raw, self.max_payload)]


@dataclass(frozen=True)
class Hello:
    protocol: int
    real: str
    n_in: int
    n_out: int
    counter: str
    counter_hz: int
    max_payload: int
    rx_buffer: int
    digest: str
    firmware: str
    boot_id: int = 0
    max_batch: int = 1

    @classmethod
    def unpack(cls, payload: bytes) -> "Hello":
        need = HELLO_FIXED.size + 1
        if payload and payload[0] != PROTOCOL_VERSION:  # first: other versions have other sizes
            raise ValueError(f"device speaks link protocol {payload[0]}, this host {PROTOCOL_VERSION}: "
                             f"regenerate and flash the firmware with this mbforge")
        if len(payload) < need:
            raise ValueError(f"HELLO reply of {len(payload)} bytes, expected at least {need}")
        proto, real, n_in, n_out, counter, hz, maxp, rxbuf, digest, boot, batch = \
            HELLO_FIXED.unpack_from(payload)
        vlen = payload[HELLO_FIXED.size]
        version = payload[need:need + vlen].decode("ascii", "replace")
        return cls(proto, REAL_NAMES.get(real, f"unknown({real})"), n_in, n_out,
                   COUNTER_NAMES.get(counter, f"unknown({counter})"), hz, maxp, rxbuf,
                   digest.decode("ascii", "replace"), version, boot, max(1, batch))

    def pack(self) -> bytes:
        counter = {v: k for k, v in COUNTER_NAMES.items()}[self.counter]
        fw = self.firmware.encode("ascii")
        return HELLO_FIXED.pack(self.protocol, REALS[self.real].code, self.n_in, self.n_out, counter,
                                self.counter_hz, self.max_payload, self.rx_buffer,
                                self.digest.encode("ascii"), self.boot_id, self.max_batch) + \
            bytes([len(fw)]) + fw


def hello_payload_len(firmware_version: str) -> int:
    return HELLO_FIXED.size + 1 + len(firmware_version.encode("ascii"))


BATCH_PAYLOAD = 2048  # bytes of EVAL reply a batch aims at (device RAM: ~3 such buffers)
MAX_BATCH = 32


def max_batch_for(real: str, n_in: int, n_out: int) -> int:
    """Vectors per EVAL frame: as many as fit BATCH_PAYLOAD (at least 1, at most MAX_BATCH)."""
    size = REALS[real].size
    if n_in == 0:
        return 1
    per = max(n_in * size, EVAL_REPLY_FIXED.size + n_out * size)
    return max(1, min(MAX_BATCH, BATCH_PAYLOAD // per))


def max_payload_for(real: str, n_in: int, n_out: int, firmware_version: str, max_batch: int = 1,
                    n_state: int = 0) -> int:
    """The device's max payload: room for its largest request and reply (with n_state, a
    step kernel's: a SIM request and a reply of at least one sample)."""
    size = REALS[real].size
    sim = (n_in * size + SIM_REQUEST_FIXED.size, SIM_REPLY_FIXED.size + sim_sample_len(real, n_state)) \
        if n_state else ()
    return max(max_batch * n_in * size, max_batch * (EVAL_REPLY_FIXED.size + n_out * size),
               hello_payload_len(firmware_version), CALIB_REQUEST.size, CALIB_REPLY_FMT.size, *sim)


def sim_sample_len(real: str, n_state: int) -> int:
    """Bytes of one SIM sample: the step's work u32, then the state."""
    return 4 + n_state * REALS[real].size


def sim_samples_for(real: str, n_state: int, max_payload: int) -> int:
    """Samples one SIM reply can carry within the device's max payload (0: none fits)."""
    return max(0, (max_payload - SIM_REPLY_FIXED.size) // sim_sample_len(real, n_state))
