"""The toy kernel's firmware, built by `pio run -e emulated_f405` and run in QEMU
(netduinoplus2), talked to over a real TCP socket. One build and one emulator are
shared by the module; every test has a deadline (SIGALRM) on top of the link's own."""
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from mbforge.firmware.build import build
from mbforge.firmware.project import generate_project
from mbforge.firmware.qemu import Emulator, EmulatorError
from mbforge.hil import cobs
from mbforge.hil import protocol as P
from mbforge.hil.hostlib import load_kernel
from mbforge.hil.link import DeviceError, DigestMismatch, Link
from mbforge.manifest import Manifest

pytestmark = pytest.mark.firmware
TOY = Path(__file__).parent / "fixtures" / "toy"
DEADLINE = 60


@pytest.fixture(autouse=True)
def deadline():
    def expired(*_):
        raise TimeoutError(f"test exceeded its {DEADLINE} s deadline")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(DEADLINE)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def elf(tmp_path_factory):
    project = generate_project(TOY, tmp_path_factory.mktemp("toy_fw") / "proj")
    path = build(project, "emulated_f405")
    assert path.name == "program.elf"
    return path


@pytest.fixture(scope="module")
def emulator(elf):
    with Emulator(elf) as emu:
        yield emu


@pytest.fixture(scope="module")
def link(emulator):
    with Link(emulator.url, timeout=3.0) as link:
        link.hello()
        yield link


@pytest.fixture(scope="module")
def manifest():
    return Manifest.load(TOY)


def random_inputs(m, n, seed):
    r = np.array(m.input_ranges())
    rng = np.random.default_rng(seed)
    return (r[:, 0] + (r[:, 1] - r[:, 0]) * rng.random((n, m.n_in))).astype(np.float32)


def test_hello_reports_the_manifest(link, manifest):
    h = link.hello()
    assert h.digest == manifest.digest
    assert (h.protocol, h.real, h.n_in, h.n_out) == (P.PROTOCOL_VERSION, "float", 3, 3)
    assert h.counter == "SysTick" and h.counter_hz == 168_000_000
    assert h.firmware.startswith("mbforge-fw")
    link.check_digest(manifest.digest)
    with pytest.raises(DigestMismatch, match="refusing to compare"):
        link.check_digest("0" * 64)


def test_eval_equals_host_build_bit_for_bit(link, manifest):
    X = random_inputs(manifest, 300, seed=11)
    X[0] = [1.0, 2.0, 3.0]
    dev = link.eval_many(X)
    host_y, host_status = load_kernel(TOY)(X)
    assert np.array_equal(dev.outputs.view(np.uint32), host_y.view(np.uint32))
    assert np.array_equal(dev.status, host_status)
    assert dev.outputs[0].tolist() == [5.0, 0.5, -1.0]
    single = link.eval(X[5])
    assert single.status == 0 and np.array_equal(single.outputs.view(np.uint32), host_y[5].view(np.uint32))


def test_work_count_is_deterministic_and_nonzero(link, elf, manifest):
    X = random_inputs(manifest, 50, seed=5)
    first = link.eval_many(X, window=1)
    assert first.work.min() > 0
    assert len(set(first.work.tolist())) == 1 and len(set(first.ticks.tolist())) == 1
    assert first.ticks[0] > first.work[0]  # raw ticks include the call overhead
    with Emulator(elf) as emu2, Link(emu2.url, timeout=3.0) as other:
        second = other.eval_many(X, window=4)
        assert np.array_equal(first.work, second.work) and np.array_equal(first.ticks, second.ticks)


def test_calibration_gives_ticks_per_instruction(link, emulator):
    (i0, t0), (i1, t1) = link.calibrate(10_000), link.calibrate(110_000)
    assert (i0, i1) == (20_000, 220_000)
    slope = (t1 - t0) / (i1 - i0)
    assert slope == pytest.approx(emulator.ticks_per_instruction, rel=1e-4)  # 0.168 * 2**5
    # 3.5e6 iterations = 7e6 instructions = 37.6e6 ticks: more than SysTick's 24 bits
    assert link.calibrate(3_500_000) == (7_000_000, 0xFFFFFFFF)
    # toy_affine is 19 instructions, the empty kernel subtracted as overhead is 2
    work = link.eval(np.zeros(3, np.float32)).work
    assert round(work / slope) == 17


def check_pipelined_requests(link, manifest):
    """Several requests in flight: the same results as one at a time, nothing stray.
    (Shared with the other emulated boards' tests.)"""
    X = random_inputs(manifest, 120, seed=2)
    a = link.eval_many(X, window=1)
    before = link.stats.stray_replies
    b = link.eval_many(X, window=8)  # the receive ring holds several requests at once
    assert np.array_equal(a.outputs.view(np.uint32), b.outputs.view(np.uint32))
    assert link.stats.stray_replies == before


def test_pipelined_requests_lose_and_repeat_nothing(link, manifest):
    check_pipelined_requests(link, manifest)


def good_eval_frame(seq):
    return P.encode_frame(P.EVAL, seq, np.array([1, 2, 3], np.float32).tobytes())


def corrupt_crc(seq):
    body = bytearray(P.encode_body(P.EVAL, seq, np.zeros(3, np.float32).tobytes()))
    body[-2] ^= 0x01
    return b"\x00" + cobs.encode(bytes(body)) + b"\x00"


def broken_cobs(seq):
    enc = bytearray(cobs.encode(P.encode_body(P.HELLO, seq)))
    i, last = 0, 0
    while i < len(enc):
        last, i = i, i + enc[i]
    enc[last] += 2
    return b"\x00" + bytes(enc) + b"\x00"


GARBAGE = bytes(random.Random(7).randrange(1, 256) for _ in range(37))

BAD_FRAMES = {
    # name: (bytes given the seq, expected error code or None for "any", seq known)
    "wrong_crc": (corrupt_crc, P.ERR_CRC, True),
    "truncated": (lambda s: good_eval_frame(s)[:-5], P.ERR_LENGTH, True),
    "oversize": (lambda s: P.encode_frame(P.EVAL, s, bytes(range(1, 251)) * 4), P.ERR_OVERSIZE, True),
    "garbage": (lambda s: GARBAGE, None, False),
    "unknown_type": (lambda s: P.encode_frame(0x55, s, b"\x01"), P.ERR_TYPE, True),
    "wrong_payload_size": (lambda s: P.encode_frame(P.EVAL, s, b"\x01\x02\x03\x04\x05"), P.ERR_PAYLOAD, True),
    "hello_with_payload": (lambda s: P.encode_frame(P.HELLO, s, b"\x01"), P.ERR_PAYLOAD, True),
    "broken_cobs": (broken_cobs, P.ERR_COBS, True),
}


def check_bad_frame(link, name):
    """One bad frame of kind `name` gets one ERROR reply; the good frame after it is
    answered normally. (Shared with the other emulated boards' tests.)"""
    make, code, seq_known = BAD_FRAMES[name]
    bad_seq, good_seq = link.next_seq(), link.next_seq()
    link.send_bytes(make(bad_seq) + good_eval_frame(good_seq))
    deadline = time.monotonic() + 3.0
    err = link.read_frame(deadline, f"the ERROR reply to {name}")
    assert err.type == P.ERROR
    got_code, got_seq = P.ERROR_PAYLOAD.unpack(err.payload)
    if code is not None:
        assert got_code == code, P.ERROR_NAMES.get(got_code)
    if seq_known:
        assert got_seq == bad_seq == err.seq
    reply = link.read_frame(deadline, f"the EVAL reply after {name}")
    assert (reply.type, reply.seq) == (P.EVAL_REPLY, good_seq)
    assert np.frombuffer(reply.payload[12:], np.float32).tolist() == [5.0, 0.5, -1.0]


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_bad_frame_gets_one_error_then_next_frame_is_answered(link, name):
    check_bad_frame(link, name)


def check_empty_frames(link):
    seq = link.next_seq()
    link.send_bytes(b"\x00" * 10 + good_eval_frame(seq))
    reply = link.read_frame(time.monotonic() + 3.0, "EVAL after empty frames")
    assert (reply.type, reply.seq) == (P.EVAL_REPLY, seq)


def test_empty_frames_get_no_reply(link):
    check_empty_frames(link)


def test_device_error_names_the_code(link):
    with pytest.raises(DeviceError, match="wrong payload size"):
        link.request(P.EVAL, b"\x00\x00", what="EVAL")


def test_emulator_is_killed_on_exception(elf):
    with pytest.raises(RuntimeError, match="boom"):
        with Emulator(elf) as emu:
            proc = emu.proc
            raise RuntimeError("boom")
    assert proc.poll() is not None


def test_emulator_reports_a_qemu_that_does_not_start(elf):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        emu = Emulator(elf, port=port, start_timeout=5)
        with pytest.raises(EmulatorError, match="QEMU did not start.*Address already in use"):
            emu.start()
        assert not emu.alive()


def test_emulator_refuses_a_file_that_is_not_an_elf(tmp_path):
    bogus = tmp_path / "program.elf"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(EmulatorError, match="not an ELF"):
        Emulator(bogus).start()
