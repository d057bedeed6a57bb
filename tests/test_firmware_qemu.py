"""The toy kernel's firmware on every emulated board of mbforge.targets.BOARDS, built by
`pio run -e ENV` and run in QEMU (the board's machine), talked to over a real TCP socket.
The checks that are the same on every board are one set, parametrised over the board
records (the expected clock, machine and ticks per instruction come from the record);
tests of one board's particulars stay with that board (emulated_f405 here,
emulated_an385 in test_firmware_an385.py). One build per board is shared by the session
(conftest.toy_firmware), one emulator per board by the module; every test has a deadline
(conftest.deadline) on top of the link's own."""
import random
import socket
import time

import numpy as np
import pytest

from mbforge.firmware.project import CALIB_MAX_ITERATIONS
from mbforge.firmware.qemu import Emulator, EmulatorError, board_of_elf, qemu_command
from mbforge.hil import cobs
from mbforge.hil import protocol as P
from mbforge.verify.hostlib import load_kernel
from mbforge.hil.link import DeviceError, DigestMismatch, Link
from mbforge.manifest import Manifest
from mbforge.targets import BOARDS, EMULATED_BOARDS

from helpers import TOY

pytestmark = [pytest.mark.firmware, pytest.mark.usefixtures("deadline")]


@pytest.fixture(scope="module", params=EMULATED_BOARDS)
def board(request):
    return BOARDS[request.param]


@pytest.fixture(scope="module")
def elf(board, toy_firmware):
    _, path = toy_firmware(board.env)
    assert path.name == "program.elf" and path.parent.name == board.env
    return path


@pytest.fixture(scope="module")
def emulator(elf, board):
    with Emulator(elf) as emu:  # the machine comes from the ELF
        assert (emu.board, emu.machine) == (board.env, board.qemu_machine)
        yield emu


@pytest.fixture(scope="module")
def link(emulator):
    with Link(emulator.url, timeout=3.0) as link:
        link.hello()
        yield link


@pytest.fixture(scope="module")
def manifest():
    return Manifest.load(TOY)


def ticks_per_instruction(board) -> float:
    return board.cpu_hz * 2**board.icount_shift / 1e9


def random_inputs(m, n, seed):
    r = np.array(m.input_ranges())
    rng = np.random.default_rng(seed)
    return (r[:, 0] + (r[:, 1] - r[:, 0]) * rng.random((n, m.n_in))).astype(np.float32)


# ---- every emulated board -------------------------------------------------------------------------
def test_qemu_command_and_elf_follow_the_board_record(board, elf):
    assert board_of_elf(elf) == board.env
    cmd = qemu_command(elf, 4321, board=board.env)
    assert cmd[cmd.index("-M") + 1] == board.qemu_machine and f"shift={board.icount_shift}" in cmd
    # the serials before the link UART's are discarded; the link UART's is the TCP server
    serials = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-serial"]
    assert serials == ["null"] * board.qemu_serial + ["tcp:127.0.0.1:4321,server=on,wait=on"]
    emu = Emulator(elf)
    assert (emu.board, emu.machine, emu.icount_shift) == (board.env, board.qemu_machine, board.icount_shift)
    assert emu.ticks_per_instruction == pytest.approx(ticks_per_instruction(board))
    other = next(env for env in EMULATED_BOARDS if env != board.env)
    with pytest.raises(EmulatorError, match=f"built for {board.env}.*not {other}"):
        Emulator(elf, board=other).start()
    with pytest.raises(EmulatorError, match="not an emulated board"):
        Emulator(elf, board="nucleo_f446re")


def test_hello_reports_the_manifest_and_the_boards_clock(link, manifest, board):
    h = link.hello()
    assert h.digest == manifest.digest
    assert (h.protocol, h.real, h.n_in, h.n_out) == (P.PROTOCOL_VERSION, "float", 3, 3)
    assert h.counter == board.counter == "SysTick" and h.counter_hz == board.cpu_hz
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


def test_calibration_gives_the_boards_ticks_per_instruction(link, board):
    tpi = ticks_per_instruction(board)  # 5.376 on emulated_f405, 3.2 on emulated_an385
    (i0, t0), (i1, t1) = link.calibrate(10_000), link.calibrate(110_000)
    assert (i0, i1) == (20_000, 220_000)
    assert (t1 - t0) / (i1 - i0) == pytest.approx(tpi, rel=1e-6)
    # a CALIB loop is 2 instructions per iteration; SysTick counts 24 bits: just below
    # that a count is exact, just above it saturates
    below, above = int(0.9 * 2**23 / tpi), int(1.1 * 2**23 / tpi)
    instructions, ticks = link.calibrate(below)
    assert instructions == 2 * below and ticks == pytest.approx(2 * below * tpi, abs=100)
    assert link.calibrate(above) == (2 * above, 0xFFFFFFFF)
    # the firmware's longest loop saturates SysTick on every board (so CALIB can show it)
    assert link.calibrate(CALIB_MAX_ITERATIONS) == (2 * CALIB_MAX_ITERATIONS, 0xFFFFFFFF)


def test_work_counts_are_whole_instructions_and_the_same_on_every_boot(link, elf, manifest, board):
    X = random_inputs(manifest, 40, seed=5)
    first = link.eval_many(X, window=1)
    assert first.work.min() > 0 and (first.ticks > first.work).all()  # raw ticks include the call overhead
    # a tick is less than an instruction: every count is a whole number of instructions
    per = first.work / ticks_per_instruction(board)
    assert np.abs(per - np.rint(per)).max() <= 1 / ticks_per_instruction(board) + 1e-9
    again = link.eval_many(X, window=4)
    with Emulator(elf) as emu2, Link(emu2.url, timeout=3.0) as other:
        second = other.eval_many(X, window=4)
    for run in (again, second):  # vector by vector: soft float takes input-dependent paths
        assert np.array_equal(first.work, run.work) and np.array_equal(first.ticks, run.ticks)


def test_pipelined_requests_lose_and_repeat_nothing(link, manifest):
    """Several requests in flight: the same results as one at a time, nothing stray."""
    X = random_inputs(manifest, 120, seed=2)
    a = link.eval_many(X, window=1)
    before = link.stats.stray_replies
    b = link.eval_many(X, window=8)  # the receive ring holds several requests at once
    assert np.array_equal(a.outputs.view(np.uint32), b.outputs.view(np.uint32))
    assert link.stats.stray_replies == before


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


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_bad_frame_gets_one_error_then_next_frame_is_answered(link, name):
    make, code, seq_known = BAD_FRAMES[name]
    bad_seq, good_seq = link.next_seq(), link.next_seq()
    link.send_bytes(make(bad_seq) + good_eval_frame(good_seq))
    deadline = time.monotonic() + 3.0
    err = link.read_frame(deadline, f"the ERROR reply to {name}", since=bad_seq)
    assert err.type == P.ERROR
    got_code, got_seq = P.ERROR_PAYLOAD.unpack(err.payload)
    if code is not None:
        assert got_code == code, P.ERROR_NAMES.get(got_code)
    if seq_known:
        assert got_seq == bad_seq == err.seq
    reply = link.read_frame(deadline, f"the EVAL reply after {name}", since=bad_seq)
    assert (reply.type, reply.seq) == (P.EVAL_REPLY, good_seq)
    assert np.frombuffer(reply.payload[12:], np.float32).tolist() == [5.0, 0.5, -1.0]


def test_empty_frames_get_no_reply(link):
    seq = link.next_seq()
    link.send_bytes(b"\x00" * 10 + good_eval_frame(seq))
    reply = link.read_frame(time.monotonic() + 3.0, "EVAL after empty frames", since=seq)
    assert (reply.type, reply.seq) == (P.EVAL_REPLY, seq)


def test_a_late_reply_to_an_earlier_request_is_dropped_as_stray(link):
    """A resent request's duplicate reply may arrive after its transaction ended: a raw
    read `since` a seq skips it (and counts it) instead of taking it for the answer."""
    old, new = link.next_seq(), link.next_seq()
    link.send_bytes(good_eval_frame(old) + good_eval_frame(new))
    before = link.stats.stray_replies
    reply = link.read_frame(time.monotonic() + 3.0, "the newer EVAL", since=new)
    assert (reply.type, reply.seq) == (P.EVAL_REPLY, new) and link.stats.stray_replies == before + 1


def test_device_error_names_the_code(link):
    with pytest.raises(DeviceError, match="wrong payload size"):
        link.request(P.EVAL, b"\x00\x00", what="EVAL")


# ---- emulated_f405 (Cortex-M4F): what holds there only ---------------------------------------------
@pytest.fixture(scope="module")
def f405_elf(toy_firmware):
    return toy_firmware("emulated_f405")[1]


def test_f405_toy_kernel_costs_17_instructions_whatever_the_input(f405_elf):
    """With the FPU the toy kernel takes one path: every vector costs the same."""
    with Emulator(f405_elf) as emu, Link(emu.url, timeout=3.0) as link:
        X = random_inputs(Manifest.load(TOY), 50, seed=5)
        run = link.eval_many(X, window=1)
        assert len(set(run.work.tolist())) == 1 and len(set(run.ticks.tolist())) == 1
        # toy_affine is 19 instructions, the empty kernel subtracted as overhead is 2
        assert round(link.eval(np.zeros(3, np.float32)).work / emu.ticks_per_instruction) == 17


# ---- the emulator's life cycle (one board suffices: no board data involved) ------------------------
def test_emulator_is_killed_on_exception(f405_elf):
    with pytest.raises(RuntimeError, match="boom"):
        with Emulator(f405_elf) as emu:
            proc = emu.proc
            raise RuntimeError("boom")
    assert proc.poll() is not None


def test_emulator_reports_a_qemu_that_does_not_start(f405_elf):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        emu = Emulator(f405_elf, port=port, start_timeout=5)
        with pytest.raises(EmulatorError, match="QEMU did not start.*Address already in use"):
            emu.start()
        assert not emu.alive()


def test_emulator_refuses_a_file_that_is_not_an_elf(tmp_path):
    bogus = tmp_path / "program.elf"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(EmulatorError, match="not an ELF"):
        Emulator(bogus).start()
