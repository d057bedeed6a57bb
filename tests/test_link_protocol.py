"""Pure tests of the link protocol: COBS, CRC, frames, the host's frame decoder and the
host Link's deadlines (against a local socket that never answers)."""
import random
import socket
import struct
import threading
import time
import zlib
from pathlib import Path

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


# ---- the firmware's parser and the Python decoder agree (differential fuzz) ---------------------------
FUZZ_HARNESS = r"""
#include <stdio.h>
#include "mbf_link.h"
void mbf_uart_putc(uint8_t byte) { putchar(byte); }
int main(void)
{
    int c;
    mbf_frame_t f;
    while ((c = getchar()) != EOF) {
        if (mbf_link_feed((uint8_t)c, &f)) { /* a good frame: echo what the parser saw */
            uint8_t *p = mbf_link_tx_payload();
            p[0] = f.type;
            mbf_put_u16(p + 1, f.len);
            mbf_link_send(0x55, f.seq, p, 3);
        }
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def host_parser(tmp_path_factory):
    """The firmware's mbf_link.c, generated for a kernel whose max payload is 1212 bytes
    (above the 245 where the buffers of COBS-decoded and raw frames differ by a block),
    compiled for the host with the sanitizers; (executable, max payload)."""
    import json
    import shutil
    import subprocess

    from mbforge.firmware.project import plan_project

    root = tmp_path_factory.mktemp("parser")
    kernel = root / "k"
    shutil.copytree(Path(__file__).parent / "fixtures" / "toy", kernel)
    m = json.loads((kernel / "manifest.json").read_text())
    m["outputs"][0].update(shape=[300], size=300)
    m["n_out"] = 300
    (kernel / "manifest.json").write_text(json.dumps(m))
    plan = plan_project(kernel)
    src = root / "src"
    for name in ("mbf_config.h", "mbf_link.h", "mbf_link.c"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(plan[f"src/{name}"])
    for name, data in plan.items():
        if name.startswith("src/kernel/"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
    (src / "mbf_board.h").write_text("#include <stdint.h>\nvoid mbf_uart_putc(uint8_t byte);\n")
    (src / "fuzz.c").write_text(FUZZ_HARNESS)
    exe = root / "parser"
    subprocess.run(["gcc", "-std=c11", "-O1", "-g", "-Wall", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", "-I", str(src), str(src / "mbf_link.c"), str(src / "fuzz.c"),
                    "-o", str(exe)], check=True)
    text = (src / "mbf_config.h").read_text()
    max_payload = int(text.split("#define MBF_MAX_PAYLOAD")[1].split()[0].rstrip("u"))
    assert max_payload >= 245
    return exe, max_payload


def _fuzz_frames(rng: random.Random, max_payload: int) -> bytes:
    raw_max = P.max_frame_len(max_payload)
    out = bytearray()
    for _ in range(3000):
        kind = rng.randrange(9)
        seq = rng.randrange(0x10000)
        plen = rng.randrange(0, max_payload + 1) if rng.random() < 0.3 else rng.randrange(0, 40)
        payload = bytes(rng.randrange(256) for _ in range(plen))
        body = bytearray(P.encode_body(rng.choice([1, 2, 3, 0x55]), seq, payload))
        if kind == 0:  # good
            enc = cobs.encode(bytes(body))
        elif kind == 1:  # bytes flipped
            enc = bytearray(cobs.encode(bytes(body)))
            for _ in range(rng.randrange(1, 4)):
                enc[rng.randrange(len(enc))] ^= rng.randrange(1, 256)
            enc = bytes(enc).replace(b"\x00", b"\x01")
        elif kind == 2:  # truncated
            enc = cobs.encode(bytes(body))[:rng.randrange(0, len(body))]
        elif kind == 3:  # a body longer than its len says, up to and past the buffers
            extra = rng.randrange(1, raw_max + 300)
            body += bytes(rng.randrange(256) for _ in range(extra))
            enc = cobs.encode(bytes(body))
        elif kind == 4:  # len field beyond the max payload
            body[3:5] = (max_payload + rng.randrange(1, 3000)).to_bytes(2, "little")
            enc = cobs.encode(bytes(body))
        elif kind == 5:  # oversize on the wire
            enc = bytes(rng.randrange(1, 256) for _ in range(raw_max + rng.randrange(1, 50)))
        elif kind == 6:  # garbage
            enc = bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 60)))
        elif kind == 7:  # a raw frame of exactly the buffer's size, or one more
            enc = bytes(rng.randrange(1, 256) for _ in range(raw_max + rng.randrange(-2, 2)))
        else:  # short bodies around the header size
            enc = cobs.encode(bytes(body[:rng.randrange(0, 8)]))
        out += b"\x00" + enc + (b"\x00" * rng.randrange(1, 3))
    return bytes(out)


def _expected(stream: bytes, max_payload: int) -> list:
    out = []
    for item in P.FrameDecoder(max_payload).feed(stream):
        if isinstance(item, P.Frame):
            out.append(("ok", item.seq, item.type, len(item.payload)))
        else:
            out.append(("err", item.code, item.seq))
    return out


def _device(exe, stream: bytes) -> list:
    import subprocess

    replies = subprocess.run([str(exe)], input=stream, capture_output=True, check=True).stdout
    out = []
    for f in P.FrameDecoder().feed(replies):
        assert isinstance(f, P.Frame), f
        if f.type == 0x55:
            out.append(("ok", f.seq, f.payload[0], int.from_bytes(f.payload[1:3], "little")))
        else:
            assert f.type == P.ERROR
            code, seq = P.ERROR_PAYLOAD.unpack(f.payload)
            out.append(("err", code, seq))
    return out


@pytest.mark.needs("gcc")  # (host_parser builds with it)
@pytest.mark.parametrize("seed", range(3))
def test_c_parser_and_python_decoder_agree_on_every_frame(host_parser, seed):
    exe, max_payload = host_parser
    stream = _fuzz_frames(random.Random(seed), max_payload)
    expected = _expected(stream, max_payload)
    assert len(expected) > 2500 and {e[1] for e in expected if e[0] == "err"} >= {1, 2, 3, 6}
    assert _device(exe, stream) == expected


@pytest.mark.needs("gcc")
def test_long_body_at_a_large_max_payload_is_a_length_error(host_parser):
    """The case that disagreed: a body longer than its len field whose decoding overflows
    the device's body buffer is ERR_LENGTH on both sides (the len field is legal)."""
    exe, max_payload = host_parser
    good = P.encode_body(P.EVAL, 77, b"\x01" * 12)
    # zeros cost no COBS overhead: the frame fits the raw buffer, its decoding not the body's
    body = good + b"\x00" * (P.OVERHEAD + max_payload + 3 - len(good))
    stream = b"\x00" + cobs.encode(body) + b"\x00"
    assert len(cobs.encode(body)) <= P.max_frame_len(max_payload)
    assert _expected(stream, max_payload) == _device(exe, stream) == [("err", P.ERR_LENGTH, 77)]
