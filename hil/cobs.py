"""Consistent Overhead Byte Stuffing (COBS): the byte stuffing of the serial link.

COBS rewrites a body so that it contains no 0x00 byte; 0x00 then delimits frames on the
wire and a receiver resynchronises at the next 0x00 whatever came before. The encoding
is a sequence of blocks `code, data[code - 1]`; each block but the last stands for its
data followed by one zero, except a block with code 0xFF (254 data bytes, no zero).

Invariants: `decode(encode(b)) == b` for every byte string b; `encode(b)` has no zero
byte and is at most `len(b) + len(b) // 254 + 1` bytes long (`max_encoded_len`).
The firmware's C decoder (firmware/templates/src/mbf_link.c.j2) has the same rules, in
particular the lenient handling of a block cut short (see `decode_prefix`).
"""
from __future__ import annotations


class CobsError(ValueError):
    """A byte string that is not a valid COBS encoding."""


def max_encoded_len(n: int) -> int:
    """Upper bound of len(encode(b)) for len(b) == n."""
    return n + n // 254 + 1


def encode(data: bytes) -> bytes:
    out = bytearray()
    block = bytearray()
    for byte in data:
        if byte == 0:
            out.append(len(block) + 1)
            out += block
            block.clear()
        else:
            block.append(byte)
            if len(block) == 254:
                out.append(0xFF)
                out += block
                block.clear()
    out.append(len(block) + 1)
    out += block
    return bytes(out)


def decode_prefix(raw: bytes) -> tuple[bytes, bool]:
    """Decode as much of `raw` as its block structure allows.

    Returns (decoded, complete). `complete` is False when the last block claims more
    bytes than remain (the frame was cut short, or a code byte was corrupted); the
    decoded bytes are then those present, which still lets a receiver read a frame
    header and say which request a damaged frame belonged to.
    """
    out = bytearray()
    i = 0
    n = len(raw)
    while i < n:
        code = raw[i]
        if code == 0:
            return bytes(out), False
        end = i + code
        if end > n:
            out += raw[i + 1:]
            return bytes(out), False
        out += raw[i + 1:end]
        i = end
        if code != 0xFF and i < n:
            out.append(0)
    return bytes(out), True


def decode(raw: bytes) -> bytes:
    """Strict decoding: raise CobsError unless `raw` is a complete COBS encoding."""
    data, complete = decode_prefix(raw)
    if not complete:
        raise CobsError(f"invalid COBS: a block overruns the end of the {len(raw)} bytes")
    return data
