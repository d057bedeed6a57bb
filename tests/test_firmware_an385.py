"""The emulated_an385 board: `pio run -e emulated_an385` (Cortex-M3, -mfloat-abi=soft), run
in QEMU's mps2-an385 (a Cortex-M3 with no FPU, 25 MHz, CMSDK UART0 as the first serial)
over a real TCP socket. The toy float kernel checks the link, the frame checks and soft
float; the four-bar kinematics in c-fixed goes through the harness and both CLIs.
Builds and emulators are shared by the module; every test has a deadline (SIGALRM)."""
import configparser
import json
import re
import signal
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

# the frame makers and input sampler of the emulated_f405 tests, reused as they are
from test_firmware_qemu import (BAD_FRAMES, check_bad_frame, check_empty_frames,
                                check_pipelined_requests, random_inputs)

from mbforge.firmware import offline
from mbforge.firmware.build import build
from mbforge.firmware.cli import main as firmware_cli
from mbforge.firmware.project import generate_project
from mbforge.firmware.qemu import Emulator, EmulatorError, board_of_elf, qemu_command
from mbforge.hil import protocol as P
from mbforge.hil.cli import main as hil_cli
from mbforge.hil.hostlib import load_kernel
from mbforge.hil.link import Link
from mbforge.manifest import Manifest
from mbforge.targets import BOARDS

pytestmark = pytest.mark.firmware
TOY = Path(__file__).parent / "fixtures" / "toy"
ENV = "emulated_an385"
DEADLINE = 60
TICKS_PER_INSTRUCTION = 25e6 * 2**7 / 1e9  # 3.2: 25 MHz, -icount shift=7


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
def toy_project(tmp_path_factory):
    return generate_project(TOY, tmp_path_factory.mktemp("toy_an385") / "proj")


@pytest.fixture(scope="module")
def elf(toy_project):
    path = build(toy_project, ENV)
    assert path == toy_project / ".pio" / "build" / ENV / "program.elf"
    return path


@pytest.fixture(scope="module")
def emulator(elf):
    with Emulator(elf) as emu:  # the machine comes from the ELF
        yield emu


@pytest.fixture(scope="module")
def link(emulator):
    with Link(emulator.url, timeout=3.0) as link:
        link.hello()
        yield link


@pytest.fixture(scope="module")
def manifest():
    return Manifest.load(TOY)


@pytest.fixture(scope="module")
def fourbar(tmp_path_factory):
    """The four-bar kinematics in c-fixed, its c-double reference and the AN385 firmware."""
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    root = tmp_path_factory.mktemp("fourbar_an385")
    k = build_kernel(load("fourbar").equations(), "kinematics")
    generate(k, "c-fixed").write(root / "fixed")
    generate(k, "c-double").write(root / "double")
    project = generate_project(root / "fixed", root / "fw")
    return {"fixed": root / "fixed", "double": root / "double", "project": project,
            "elf": build(project, ENV)}


def tool(name, elf, *args):
    return subprocess.run([f"arm-none-eabi-{name}", *args, str(elf)], capture_output=True,
                          text=True, check=True).stdout


def test_the_board_is_data_and_picks_the_machine(elf, toy_project):
    b = BOARDS[ENV]
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(toy_project / "platformio.ini")
    env = ini[f"env:{ENV}"]
    assert (env["board"], env["board_build.ldscript"]) == ("mps2_an385_qemu", "ld/mps2_an385.ld")
    assert "-DMBF_BOARD_EMULATED_AN385" in env["build_flags"] and "-DMBF_COUNTER_SYSTICK" in env["build_flags"]
    board_json = json.loads((offline.PLATFORM_DIR / "boards" / "mps2_an385_qemu.json").read_text())["build"]
    assert (board_json["cpu"], board_json["float_abi"], "fpu" in board_json) == ("cortex-m3", "soft", False)
    assert (b.cpu, b.fpu, b.cpu_hz, b.counter, b.qemu_machine) == ("cortex-m3", None, 25_000_000, "SysTick",
                                                                    "mps2-an385")
    cmd = qemu_command(elf, 4321, board=ENV)
    assert cmd[cmd.index("-M") + 1] == "mps2-an385" and "shift=7" in cmd
    # UART0 is QEMU's first serial on mps2-an385: the link is the only -serial
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "-serial"] == [
        "tcp:127.0.0.1:4321,server=on,wait=on,nodelay=on"]
    # the default board is unchanged: netduinoplus2, USART2 = the second serial
    f405 = qemu_command(elf, 4321)
    assert f405[f405.index("-M") + 1] == "netduinoplus2" and f405.count("-serial") == 2 and "shift=5" in f405
    assert board_of_elf(elf) == ENV
    emu = Emulator(elf)
    assert (emu.board, emu.machine, emu.icount_shift) == (ENV, "mps2-an385", 7)
    assert emu.ticks_per_instruction == pytest.approx(TICKS_PER_INSTRUCTION)
    with pytest.raises(EmulatorError, match="built for emulated_an385.*not emulated_f405"):
        Emulator(elf, board="emulated_f405").start()
    with pytest.raises(EmulatorError, match="not an emulated board"):
        Emulator(elf, board="nucleo_f446re")


def test_the_elf_is_cortex_m3_soft_float_on_the_an385_memory_map(elf):
    attrs = tool("readelf", elf, "-A")
    assert 'Tag_CPU_name: "7-M"' in attrs and "Tag_CPU_arch: v7\n" in attrs
    assert "Tag_FP_arch" not in attrs and "VFP" not in attrs  # no FPU instructions, soft-float ABI
    disasm = tool("objdump", elf, "-d")
    assert not re.search(r"\tv(add|sub|mul|div|ldr|str|mov|cvt|sqrt|cmp)", disasm)
    # no FPU to enable: the reset handler neither touches CPACR (0xE000ED88, reached as
    # 0xE000E000 + 0xd88) nor sets CP10/CP11 (0xF00000)
    reset_handler = tool("objdump", elf, "-d", "--disassemble=Reset_Handler")
    assert "Reset_Handler>:" in reset_handler
    assert "0xd88" not in reset_handler and "0xf00000" not in reset_handler
    symbols = {parts[2]: int(parts[0], 16) for parts in
               (line.split() for line in tool("nm", elf).splitlines()) if len(parts) == 3}
    assert "__aeabi_fmul" in symbols or "__mulsf3" in symbols  # the float kernel runs in software
    assert symbols["mbf_vectors"] == 0
    out = elf.with_suffix(".vectors")
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "--only-section=.isr_vector", str(elf), str(out)],
                   check=True)
    vectors = out.read_bytes()
    assert len(vectors) == 4 * (16 + 32)
    sp, reset = struct.unpack_from("<II", vectors)
    assert sp == 0x20400000 and reset == symbols["Reset_Handler"] | 1
    assert struct.unpack_from("<I", vectors, 4 * 16)[0] == symbols["UART0RX_IRQHandler"] | 1  # IRQ 0
    # the board name is in the ELF but not loaded
    sections = tool("readelf", elf, "-S", "-W")
    line = next(x for x in sections.splitlines() if ".mbf.board" in x)
    assert not re.search(r"\s[WAX]+\s", line.split(".mbf.board", 1)[1])
    text, data, bss = map(int, tool("size", elf).splitlines()[1].split()[:3])
    assert 1000 < text < 64 * 1024 and data + bss < 64 * 1024


def test_sources_are_warning_free_and_refuse_a_hard_float_build(toy_project, tmp_path):
    src = toy_project / "src"
    sources = sorted(str(f) for f in src.rglob("*.c"))
    flags = ["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-mcpu=cortex-m3", "-mthumb",
             "-DMBF_BOARD_EMULATED_AN385", "-DMBF_COUNTER_SYSTICK", f"-I{src}"]
    link = ["-nostartfiles", "-Wl,--gc-sections", "--specs=nano.specs", "-T", str(toy_project / "ld/mps2_an385.ld"),
            "-o", str(tmp_path / "w.elf"), "-lc", "-lm", "-lgcc"]
    ok = subprocess.run(["arm-none-eabi-gcc", *flags, "-mfloat-abi=soft", *sources, *link],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    # the board's data (fpu None) and the float ABI must agree
    bad = subprocess.run(["arm-none-eabi-gcc", *flags, "-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard",
                          "-c", str(src / "main.c"), "-o", str(tmp_path / "main.o")], capture_output=True, text=True)
    assert bad.returncode != 0 and "this board has no FPU" in bad.stderr


def test_hello_reports_the_manifest_and_the_25_mhz_clock(link, manifest):
    h = link.hello()
    assert h.digest == manifest.digest
    assert (h.protocol, h.real, h.n_in, h.n_out) == (P.PROTOCOL_VERSION, "float", 3, 3)
    assert h.counter == "SysTick" and h.counter_hz == 25_000_000
    assert h.firmware.startswith("mbforge-fw")


def test_soft_float_eval_equals_host_build_bit_for_bit(link, manifest):
    X = random_inputs(manifest, 300, seed=11)
    X[0] = [1.0, 2.0, 3.0]
    dev = link.eval_many(X)
    host_y, host_status = load_kernel(TOY)(X)
    assert np.array_equal(dev.outputs.view(np.uint32), host_y.view(np.uint32))
    assert np.array_equal(dev.status, host_status)
    assert dev.outputs[0].tolist() == [5.0, 0.5, -1.0]


def test_calibration_and_instruction_counts_are_exact_and_deterministic(link, elf, manifest):
    (i0, t0), (i1, t1) = link.calibrate(10_000), link.calibrate(110_000)
    assert (i0, i1) == (20_000, 220_000)
    slope = (t1 - t0) / (i1 - i0)
    assert slope == pytest.approx(TICKS_PER_INSTRUCTION, rel=1e-6)
    # 24-bit SysTick: 5.24e6 instructions at 3.2 ticks each
    instructions, ticks = link.calibrate(2_500_000)
    assert instructions == 5_000_000 and ticks == pytest.approx(16_000_000, abs=100)
    assert link.calibrate(3_000_000) == (6_000_000, 0xFFFFFFFF)
    # soft float takes input-dependent paths, so compare vector by vector, across boots
    X = random_inputs(manifest, 40, seed=5)
    first = link.eval_many(X, window=1)
    assert first.work.min() > 0 and (first.ticks > first.work).all()
    # a tick is less than half an instruction: every count is a whole number of them
    frac = first.work / slope - np.rint(first.work / slope)
    assert np.abs(frac).max() <= 1 / slope + 1e-9
    again = link.eval_many(X, window=4)
    with Emulator(elf) as emu2, Link(emu2.url, timeout=3.0) as other:
        second = other.eval_many(X, window=4)
    for run in (again, second):
        assert np.array_equal(first.work, run.work) and np.array_equal(first.ticks, run.ticks)


def test_pipelined_requests_lose_and_repeat_nothing(link, manifest):
    check_pipelined_requests(link, manifest)


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_bad_frame_gets_one_error_then_next_frame_is_answered(link, name):
    check_bad_frame(link, name)


def test_empty_frames_get_no_reply(link):
    check_empty_frames(link)


def test_fixed_fourbar_kinematics_is_bit_exact_and_within_bound(fourbar):
    from mbforge.hil.harness import run

    with Emulator(fourbar["elf"]) as emu:
        assert emu.machine == "mps2-an385"
        rep = run(emu.url, fourbar["fixed"], fourbar["double"], vectors=300, host_model=True)
    assert rep.passed, rep.table()
    assert rep.device["real"] == "int32" and rep.device["counter_hz"] == 25_000_000
    assert rep.host_model == {"vectors_mismatched": 0, "elements_mismatched": 0}
    assert [g.name for g in rep.outputs] == ["qd", "qdd", "Phi"]
    assert all(g.tolerance_kind == "error_bound" and g.passed for g in rep.outputs)
    w = rep.work_per_call
    assert w["unit"] == "instructions" and w["counter_overflows"] == 0
    assert w["ticks_per_unit"] == pytest.approx(TICKS_PER_INSTRUCTION, rel=1e-6)
    assert 500 < w["min"] <= w["median"] <= w["max"] < 20_000
    fourbar["work_per_call"] = w  # compared with the CLI's run below


def test_cli_builds_for_the_board_and_hil_emulates_the_elfs_machine(fourbar, tmp_path, capsys):
    assert firmware_cli(["--kernel", str(fourbar["fixed"]), "--out", str(fourbar["project"]),
                         "--build", "--env", ENV]) == 0
    out, err = capsys.readouterr()
    assert f"built {fourbar['elf']}" in out and "no FPU" not in err  # an int32 kernel: no note
    report = tmp_path / "report.json"
    args = ["--emulate", str(fourbar["elf"]), "--kernel", str(fourbar["fixed"]),
            "--reference", str(fourbar["double"]), "--vectors", "300", "--host-model"]
    assert hil_cli([*args, "--json", str(report)]) == 0, capsys.readouterr()
    assert "PASS" in capsys.readouterr().out
    r = json.loads(report.read_text())
    assert r["passed"] and r["device"]["counter_hz"] == 25_000_000
    assert r["host_model"]["elements_mismatched"] == 0
    if "work_per_call" in fourbar:  # the same vectors on another boot: the same counts
        assert r["work_per_call"] == fourbar["work_per_call"]
    assert hil_cli([*args, "--board", "emulated_f405"]) == 2
    assert "built for emulated_an385" in capsys.readouterr().err


def test_cli_says_a_float_kernel_runs_in_software(toy_project, elf, capsys):
    assert firmware_cli(["--kernel", str(TOY), "--out", str(toy_project), "--build", "--env", ENV]) == 0
    err = capsys.readouterr().err
    assert "emulated_an385 (cortex-m3) has no FPU" in err and "software floating point" in err
