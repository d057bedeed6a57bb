"""The emulated_an385 board's particulars: `pio run -e emulated_an385` (Cortex-M3,
-mfloat-abi=soft) run in QEMU's mps2-an385 (a Cortex-M3 with no FPU, 25 MHz, CMSDK UART0 as
the first serial). The link, frame, calibration and bit-exactness checks it shares with
the other emulated boards are in test_firmware_qemu.py (parametrised over the board
records); here: the ELF is soft float on the AN385 memory map, the sources refuse a
hard-float build, and the four-bar kinematics in c-fixed goes through the harness and
both CLIs. Builds are shared by the session (conftest.toy_firmware); every test has a
deadline (conftest.deadline)."""
import configparser
import json
import re
import struct
import subprocess

import pytest

from mbforge.firmware.build import build
from mbforge.firmware.cli import main as firmware_cli
from mbforge.firmware.project import generate_project
from mbforge.firmware.qemu import Emulator
from mbforge.hil.cli import main as hil_cli
from mbforge.targets import BOARDS

from helpers import TOY

pytestmark = [pytest.mark.firmware, pytest.mark.usefixtures("deadline")]
ENV = "emulated_an385"
TICKS_PER_INSTRUCTION = 25e6 * 2**7 / 1e9  # 3.2: 25 MHz, -icount shift=7


@pytest.fixture(scope="module")
def toy_project(toy_firmware):
    return toy_firmware(ENV)[0]


@pytest.fixture(scope="module")
def elf(toy_firmware):
    project, path = toy_firmware(ENV)
    assert path == project / ".pio" / "build" / ENV / "program.elf"
    return path


@pytest.fixture(scope="module")
def fourbar(fourbar_kinematics, tmp_path_factory):
    """The four-bar kinematics in c-fixed, its c-double reference (conftest) and the AN385 firmware."""
    fixed, double = fourbar_kinematics / "c-fixed", fourbar_kinematics / "c-double"
    project = generate_project(fixed, tmp_path_factory.mktemp("fourbar_an385") / "fw")
    return {"fixed": fixed, "double": double, "project": project, "elf": build(project, ENV)}


def tool(name, elf, *args):
    return subprocess.run([f"arm-none-eabi-{name}", *args, str(elf)], capture_output=True,
                          text=True, check=True).stdout


def test_the_board_record_is_a_cortex_m3_without_fpu(toy_project):
    b = BOARDS[ENV]
    assert (b.cpu, b.fpu, b.cpu_hz, b.counter, b.qemu_machine, b.qemu_serial, b.icount_shift) == (
        "cortex-m3", None, 25_000_000, "SysTick", "mps2-an385", 0, 7)
    assert b.cpu_hz * 2**b.icount_shift / 1e9 == pytest.approx(TICKS_PER_INSTRUCTION)
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(toy_project / "platformio.ini")
    env = ini[f"env:{ENV}"]
    assert (env["board"], env["board_build.ldscript"]) == ("mps2_an385_qemu", "ld/mps2_an385.ld")
    assert "-DMBF_BOARD_EMULATED_AN385" in env["build_flags"] and "-DMBF_COUNTER_SYSTICK" in env["build_flags"]
    assert b.board_manifest()["build"]["float_abi"] == "soft" and "fpu" not in b.board_manifest()["build"]


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


def test_cli_builds_a_float_kernel_in_software_only_when_asked(toy_project, elf, capsys):
    # without --soft-float: refused in one line, nothing built
    assert firmware_cli(["--kernel", str(TOY), "--out", str(toy_project), "--build", "--env", ENV]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "refusing to build" in err and "--soft-float" in err
    assert "emulated_an385 (cortex-m3) has no FPU" in err and "software floating point" in err
    assert firmware_cli(["--kernel", str(TOY), "--out", str(toy_project), "--build", "--env", ENV,
                         "--soft-float"]) == 0
    err = capsys.readouterr().err
    assert "emulated_an385 (cortex-m3) has no FPU" in err and "instructions per multiply, measured" in err
