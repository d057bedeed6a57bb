"""Pure tests of the link protocol: COBS, CRC, frames, the host's frame decoder and the
host Link's deadlines (against a local socket that never answers)."""
import random
import socket
import struct
import threading
import time
import zlib

import pytest

from mbforge.hil import cobs
from mbforge.hil import protocol as P
from mbforge.hil.link import Link, LinkError, LinkTimeout


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\x00\x00", b"\x01", b"\x11\x00\x22", bytes(range(1, 254)), bytes(range(1, 255)) * 1,
    bytes([1] * 254), bytes([1] * 255), bytes([7] * 508) + b"\x00", b"\x00" + bytes([9] * 600),
])
def test_cobs_round_trip_edges(data):
    enc = cobs.encode(data)
    assert 0 not in enc
    assert len(enc) <= cobs.max_encoded_len(len(data))
    assert cobs.decode(enc) == data


def test_cobs_round_trip_random():
    rng = random.Random(1)
    for _ in range(500):
        n = rng.randrange(0, 700)
        data = bytes(rng.choice([0, 0, rng.randrange(256)]) for _ in range(n))
        enc = cobs.encode(data)
        assert 0 not in enc and cobs.decode(enc) == data
        assert len(enc) <= cobs.max_encoded_len(n)


def test_cobs_known_vectors():
    assert cobs.encode(b"\x11\x22\x00\x33") == b"\x03\x11\x22\x02\x33"
    assert cobs.encode(b"\x00") == b"\x01\x01"
    assert cobs.encode(b"") == b"\x01"


def test_cobs_cut_block_is_incomplete():
    enc = cobs.encode(b"\x01\x02\x03\x04")
    data, complete = cobs.decode_prefix(enc[:-1])
    assert (data, complete) == (b"\x01\x02\x03", False)
    with pytest.raises(cobs.CobsError):
        cobs.decode(enc[:-1])


def test_crc32_is_ieee():
    assert P.crc32(b"123456789") == 0xCBF43926
    assert P.crc32(b"abc") == zlib.crc32(b"abc")


def test_crc_nibble_table_matches_zlib():
    from mbforge.firmware.project import crc32_nibble_table

    table = crc32_nibble_table()

    def nibble_crc(data):
        crc = 0xFFFFFFFF
        for b in data:
            crc ^= b
            crc = (crc >> 4) ^ table[crc & 15]
            crc = (crc >> 4) ^ table[crc & 15]
        return crc ^ 0xFFFFFFFF

    for data in (b"", b"123456789", bytes(range(256))):
        assert nibble_crc(data) == zlib.crc32(data)


def frames_of(data, max_payload=64):
    return P.FrameDecoder(max_payload).feed(data)


def test_frame_round_trip_and_layout():
    wire = P.encode_frame(P.EVAL, 0x1234, b"\x00\x01\x02")
    assert wire[0] == 0 and wire[-1] == 0 and 0 not in wire[1:-1]
    body = cobs.decode(wire[1:-1])
    assert body[:5] == bytes([P.EVAL, 0x34, 0x12, 3, 0])
    assert struct.unpack("<I", body[-4:])[0] == zlib.crc32(body[:-4])
    assert frames_of(wire) == [P.Frame(P.EVAL, 0x1234, b"\x00\x01\x02")]


def test_decoder_byte_by_byte_and_empty_frames():
    wire = b"\x00\x00\x00" + P.encode_frame(P.HELLO, 7) + b"\x00\x00" + P.encode_frame(P.HELLO, 8)
    dec = P.FrameDecoder(64)
    out = []
    for b in wire:
        out += dec.feed(bytes([b]))
    assert out == [P.Frame(P.HELLO, 7, b""), P.Frame(P.HELLO, 8, b"")]


def test_decoder_bad_crc():
    body = bytearray(P.encode_body(P.EVAL, 5, b"abcd"))
    body[-1] ^= 0x40
    [bad] = frames_of(b"\x00" + cobs.encode(bytes(body)) + b"\x00")
    assert bad == P.BadFrame(P.ERR_CRC, 5, bad.raw_len)


def test_decoder_truncated_frame_then_good_frame():
    good = P.encode_frame(P.EVAL, 9, b"\x01\x02\x03\x04\x05\x06")
    truncated = good[:-4]  # no trailing delimiter: the next frame's leading 0 closes it
    out = frames_of(truncated + P.encode_frame(P.HELLO, 10))
    assert out[0].code == P.ERR_LENGTH and out[0].seq == 9
    assert out[1] == P.Frame(P.HELLO, 10, b"")


def test_decoder_short_body_is_length_error():
    body = P.encode_body(P.EVAL, 3, b"xyz")[:-2]  # valid COBS of a body that lost 2 bytes
    [bad] = frames_of(b"\x00" + cobs.encode(body) + b"\x00")
    assert (bad.code, bad.seq) == (P.ERR_LENGTH, 3)
    [bad] = frames_of(b"\x00\x02\x05\x00")  # 1 byte body: no header, no seq
    assert (bad.code, bad.seq) == (P.ERR_LENGTH, P.SEQ_UNKNOWN)


def test_decoder_broken_cobs_with_consistent_length():
    enc = bytearray(cobs.encode(P.encode_body(P.EVAL, 0x0101, b"\x05\x06")))
    last_code = max(i for i in range(len(enc)) if _is_code(enc, i))
    enc[last_code] += 3  # the last block now claims 3 bytes that are not there
    [bad] = frames_of(b"\x00" + bytes(enc) + b"\x00")
    assert (bad.code, bad.seq) == (P.ERR_COBS, 0x0101)


def _is_code(enc, i):
    """Is enc[i] a block's code byte?"""
    j = 0
    while j < len(enc):
        if j == i:
            return True
        j += enc[j]
    return False


def test_decoder_oversize_frame_is_dropped_once():
    big = P.encode_frame(P.EVAL, 4, bytes(range(1, 200)) * 3)
    out = frames_of(big + P.encode_frame(P.HELLO, 5), max_payload=64)
    assert [type(f) for f in out] == [P.BadFrame, P.Frame]
    assert (out[0].code, out[0].seq) == (P.ERR_OVERSIZE, 4)
    assert out[1].seq == 5


def test_decoder_garbage_between_frames():
    rng = random.Random(3)
    garbage = bytes(rng.randrange(1, 256) for _ in range(40))
    out = frames_of(P.encode_frame(P.HELLO, 1) + garbage + P.encode_frame(P.HELLO, 2))
    assert isinstance(out[0], P.Frame) and isinstance(out[1], P.BadFrame) and out[2].seq == 2
    assert len(out) == 3


def test_hello_pack_unpack():
    h = P.Hello(P.PROTOCOL_VERSION, "float", 3, 2, "SysTick", 168_000_000, 96, 1024, "ab" * 32, "fw 1",
                boot_id=7, max_batch=20)
    assert P.Hello.unpack(h.pack()) == h
    assert len(h.pack()) == P.hello_payload_len("fw 1")


def test_hello_of_another_protocol_is_refused():
    h = P.Hello(1, "float", 3, 2, "SysTick", 168_000_000, 96, 1024, "ab" * 32, "fw 1")
    with pytest.raises(ValueError, match="link protocol 1"):
        P.Hello.unpack(h.pack())


@pytest.fixture
def silent_server():
    """A TCP server that accepts and reads but never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    stop = threading.Event()

    def serve():
        srv.settimeout(5)
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        conn.settimeout(0.05)
        while not stop.is_set():
            try:
                if conn.recv(256) == b"":
                    break
            except socket.timeout:
                pass
            except OSError:
                break
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield f"socket://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    srv.close()
    t.join(5)


def test_link_times_out_with_a_clear_message(silent_server):
    t0 = time.monotonic()
    with Link(silent_server, timeout=0.3) as link:
        with pytest.raises(LinkTimeout, match=r"no reply to HELLO seq \d+ from socket://127\.0\.0\.1:\d+ within 0\.3 s"):
            link.hello()
    assert time.monotonic() - t0 < 2.0


def test_link_open_failure_is_a_link_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(LinkError, match="cannot open"):
        Link(f"socket://127.0.0.1:{port}", timeout=0.5)
