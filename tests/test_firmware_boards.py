"""The boards added after the F405/AN385 pair, each a record of mbforge.targets.BOARDS.

Emulated twins (the link, frame and calibration checks they share with every emulated
board are in test_firmware_qemu.py, parametrised over the records); here what each is
for, through the real CLIs (`mbforge firmware --build`, `mbforge hil --emulate`):
- emulated_an500 (mps2-an500, Cortex-M7, FPv5 double FPU): the c-double four-bar
  kinematics runs on the device's FPU and agrees with the host double within 1e-12
  relative over 1000 vectors;
- emulated_an505 (mps2-an505, Cortex-M33) and emulated_microbit (nRF51, Cortex-M0, no
  FPU, no long multiply): the c-fixed four-bar kinematics passes, bit-exact with the host;
  instructions per call on the M0 are compared with the AN385 (M3).
Every test has a deadline (conftest.deadline)."""
import json
import struct
import subprocess

import pytest

from mbforge.firmware.cli import main as firmware_cli
from mbforge.hil.cli import main as hil_cli
from mbforge.targets import BOARDS

pytestmark = [pytest.mark.firmware, pytest.mark.usefixtures("deadline")]


@pytest.fixture(scope="module")
def fourbar(fourbar_kinematics):
    """The four-bar kinematics in c-fixed and c-double (conftest)."""
    return fourbar_kinematics


def build_and_run(fourbar, tmp_path, capsys, env, kernel, vectors, *extra):
    project = tmp_path / f"fw_{env}_{kernel}"
    assert firmware_cli(["--kernel", str(fourbar / kernel), "--out", str(project), "--build", "--env", env]) == 0
    capsys.readouterr()
    elf = project / ".pio" / "build" / env / "program.elf"
    report = tmp_path / f"{env}_{kernel}.json"
    args = ["--emulate", str(elf), "--kernel", str(fourbar / kernel), "--reference", str(fourbar / "c-double"),
            "--vectors", str(vectors), "--json", str(report), *extra]
    rc = hil_cli(args)
    out = capsys.readouterr()
    assert rc == 0, out
    assert "PASS" in out.out
    return elf, json.loads(report.read_text())


def test_emulated_twins_are_the_records_cores():
    an500, an505, mb = BOARDS["emulated_an500"], BOARDS["emulated_an505"], BOARDS["emulated_microbit"]
    assert (an500.qemu_machine, an500.cpu, an500.fpu) == ("mps2-an500", "cortex-m7", "fpv5-d16")
    assert (an505.qemu_machine, an505.cpu, an505.fpu) == ("mps2-an505", "cortex-m33", "fpv5-sp-d16")
    assert (mb.qemu_machine, mb.cpu, mb.fpu, mb.uart) == ("microbit", "cortex-m0", None, "nrf51_uart")
    # the 24-bit SysTick must wrap within the firmware's longest CALIB loop (8e6 instructions)
    for b in (an500, an505, mb):
        assert 8e6 * b.cpu_hz * 2**b.icount_shift / 1e9 > 2**24


def test_c_double_on_the_m7_agrees_with_the_host_double(fourbar, tmp_path, capsys):
    elf, r = build_and_run(fourbar, tmp_path, capsys, "emulated_an500", "c-double", 1000)
    attrs = subprocess.run(["arm-none-eabi-readelf", "-A", str(elf)], capture_output=True, text=True,
                           check=True).stdout
    assert "Tag_FP_arch: FPv5/FP-D16 for ARMv8" in attrs and "Tag_ABI_VFP_args: VFP registers" in attrs
    # double arithmetic in hardware: vmul.f64 etc., no soft-float __aeabi_dmul
    disasm = subprocess.run(["arm-none-eabi-objdump", "-d", str(elf)], capture_output=True, text=True,
                            check=True).stdout
    assert ".f64" in disasm and "<__aeabi_dmul>:" not in disasm
    assert r["passed"] and r["device"]["real"] == "double" and r["vectors"] >= 1000
    assert sorted(r["outputs"]) == ["Phi", "qd", "qdd"]
    for name, g in r["outputs"].items():
        # the harness's default for a double kernel: 1e-12 relative to the group's scale
        assert (g["tolerance_kind"], g["tolerance"]) == ("relative", 1e-12) and g["passed"], (name, g)
        assert g["max_rel_error"] < 1e-12
    print("an500 c-double", {k: g["max_rel_error"] for k, g in r["outputs"].items()}, r["work_per_call"])


@pytest.mark.parametrize("env", ["emulated_an505", "emulated_microbit", "emulated_an385"])
def test_c_fixed_passes_bit_exact(fourbar, tmp_path, capsys, env):
    _, r = build_and_run(fourbar, tmp_path, capsys, env, "c-fixed", 300, "--host-model")
    assert r["passed"] and r["device"]["real"] == "int32"
    assert r["host_model"]["elements_mismatched"] == 0
    w = r["work_per_call"]
    assert w["unit"] == "instructions" and w["counter_overflows"] == 0
    print(env, "c-fixed instructions per call", w["min"], w["median"], w["max"])
    # deterministic under -icount: AN385 (M3, SMULL) 1672, AN505 (M33) 1680; the M0 calls
    # __aeabi_lmul for each of the 64 multiplies: 6821 with libgcc's, 5556 with mbforge's
    assert w["median"] < {"emulated_microbit": 6000, "emulated_an505": 1800, "emulated_an385": 1800}[env]


# ---- real boards: the project's sources compiled and linked with Debian's toolchain -------------
REAL_BOARDS = [env for env, b in BOARDS.items() if not b.emulated]
# what each board's clock, link UART and counter set-up must put into the image: a register
# value only that board's set-up writes, its link UART's base address, its counter's registers
CLOCK_WORD = {
    # RCC_PLLCFGR: M 8 | N 168 << 6 | Q 7 << 24 | R 2 << 28 (HSI 16 MHz -> 168 MHz)
    "nucleo_f446re": 8 | 168 << 6 | 7 << 24 | 2 << 28,
    "disco_f407vg": 8 | 168 << 6 | 7 << 24 | 2 << 28,
    # RCC_PLL1DIVR: N 50 - 1 | (P 2 - 1) << 9 | (Q 4 - 1) << 16 | (R 2 - 1) << 24: 16 MHz x 50 / 2
    "nucleo_h743zi": 49 | 1 << 9 | 3 << 16 | 1 << 24,
    # RCC_CFGR: PLLSRC HSE << 16 | PLLMUL x9 (7) << 18 | PPRE1 /2 (4) << 8
    "bluepill_f103c8": 1 << 16 | 7 << 18 | 4 << 8,
    # RCC_PLLCFGR: HSI16 (2) | N 8 << 8 | PLLREN << 28 | R /2 (1) << 29
    "nucleo_g071rb": 2 | 8 << 8 | 1 << 28 | 1 << 29,
    # XOSC_CTRL: 1-15 MHz range (0xAA0) | ENABLE (0xFAB) << 12, the PLL_SYS's reference
    "pico": 0xAA0 | 0xFAB << 12,
}
FP_ARCH = {"fpv4-sp-d16": "VFPv4-D16", "fpv5-d16": "FPv5/FP-D16 for ARMv8"}
CPU_ARCH = {"cortex-m0plus": "v6S-M", "cortex-m3": "v7", "cortex-m4": "v7E-M", "cortex-m7": "v7E-M"}


def test_every_real_board_has_a_clock_check():
    assert sorted(CLOCK_WORD) == sorted(REAL_BOARDS)


@pytest.mark.parametrize("env", REAL_BOARDS)
def test_real_board_sources_compile_and_link(env, tmp_path):
    from helpers import TOY
    from helpers.builds import extra_script_linkflags, ini_build_flags

    from mbforge.firmware.project import generate_project

    b = BOARDS[env]
    project = generate_project(TOY, tmp_path / "proj")
    cflags = ini_build_flags(project, env)
    linkflags = extra_script_linkflags(project, env)
    assert f"-mcpu={b.cpu}" in linkflags and "-nostartfiles" in linkflags
    assert ("-mfloat-abi=hard" in linkflags and f"-mfpu={b.fpu}" in cflags) if b.fpu else "-mfloat-abi=soft" in linkflags
    elf = tmp_path / "firmware.elf"
    sources = sorted(str(p) for p in (project / "src").rglob("*.c"))
    # what the official platforms' bare-metal builders add (-Os, -mthumb, -mcpu, gc-sections),
    # then the project's own flags; our own sources must be warning-free
    cmd = ["arm-none-eabi-gcc", "-Os", "-mthumb", f"-mcpu={b.cpu}", *cflags, "-Wextra", "-Werror",
           f"-DF_CPU={b.cpu_hz}L", f"-I{project / 'src'}", *sources, "-T", str(project / b.ldscript),
           "-Wl,--gc-sections", *linkflags, "-o", str(elf), "-lc", "-lgcc", "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr

    def tool(name, *args):
        return subprocess.run([f"arm-none-eabi-{name}", *args, str(elf)], capture_output=True,
                              text=True, check=True).stdout

    symbols = {parts[2]: int(parts[0], 16) for parts in
               (line.split() for line in tool("nm").splitlines()) if len(parts) == 3}
    assert symbols["mbf_vectors"] == b.code_origin
    vectors = subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "--only-section=.isr_vector", str(elf),
                              "/dev/stdout"], capture_output=True, check=True).stdout
    assert len(vectors) == 4 * (16 + b.num_irq)
    sp, reset = struct.unpack_from("<II", vectors)
    assert sp == b.ram_origin + b.ram_kb * 1024 and reset == symbols["Reset_Handler"] | 1
    assert struct.unpack_from("<I", vectors, 4 * (16 + b.link_irq))[0] == symbols[b.irq_handler] | 1
    attrs = tool("readelf", "-A")
    assert f"Tag_CPU_arch: {CPU_ARCH[b.cpu]}\n" in attrs
    if b.fpu:
        assert "Tag_ABI_VFP_args: VFP registers" in attrs and f"Tag_FP_arch: {FP_ARCH[b.fpu]}" in attrs
    else:
        assert "Tag_FP_arch" not in attrs and "VFP" not in attrs
    text, data, bss = map(int, tool("size").splitlines()[1].split()[:3])
    assert 1000 < text + data < b.flash_kb * 1024 and data + bss + 4096 <= b.ram_kb * 1024
    disasm = tool("objdump", "-d")
    assert f"{CLOCK_WORD[env]:08x}" in disasm, "the board's clock set-up is not in the image"
    # the link UART's driver and registers are the record's
    macros = subprocess.run(["arm-none-eabi-gcc", "-E", "-dM", *cflags, f"-mcpu={b.cpu}", "-mthumb",
                             str(project / "src/mbf_board.h")], capture_output=True, text=True, check=True).stdout
    assert f"#define MBF_UART_BASE 0x{b.uart_base:08X}u" in macros
    assert f"#define MBF_UART_{b.uart.upper()} 1" in macros and f"#define MBF_LINK_IRQ {b.link_irq}u" in macros
    if b.counter == "DWT":  # cycles: DWT->CYCCNT, enabled through DEMCR
        assert "e0001000" in disasm
    else:  # Cortex-M0+ has no cycle counter: SysTick at the core clock
        assert b.cpu == "cortex-m0plus" and "e000e014" in disasm and "e0001000" not in disasm


# ---- Cortex-M0: mbforge's __aeabi_lmul (mbf_board.c) ---------------------------------------------
def mul_kernel(path):
    """An int32 kernel of 64-bit products: a signed 32x32 one and a 64x64 one, each returned as
    its low and high words (written by hand: the expected bits come from Python's integers)."""
    from helpers import TOY

    path.mkdir()
    (path / "mul.h").write_text("#include <stdint.h>\nint mb_mul(const int32_t *in, int32_t *out);\n")
    (path / "mul.c").write_text(
        '#include "mul.h"\n'
        "int mb_mul(const int32_t *in, int32_t *out)\n{\n"
        "    const int64_t p = (int64_t)in[0] * in[1];\n"
        "    const uint64_t x = ((uint64_t)(int64_t)in[0] << 17) ^ (uint32_t)in[1];\n"
        "    const uint64_t y = (uint64_t)(int64_t)in[1] * 3u + (uint32_t)in[0];\n"
        "    const uint64_t q = x * y;\n"
        "    out[0] = (int32_t)(uint32_t)p; out[1] = (int32_t)((uint64_t)p >> 32);\n"
        "    out[2] = (int32_t)(uint32_t)q; out[3] = (int32_t)(q >> 32);\n"
        "    return 0;\n}\n")
    m = json.loads((TOY / "manifest.json").read_text())
    m.pop("files", None)  # hand-written: no generation hashes to check
    m.update(function="mb_mul", real="int32", target="c-fixed32", sources=["mul.c"], headers=["mul.h"],
             inputs=[{"name": "a", "shape": [2], "offset": 0, "size": 2, "range": [[-1, 1], [-1, 1]],
                      "frac_bits": [31, 31]}],
             outputs=[{"name": "r", "shape": [4], "offset": 0, "size": 4, "frac_bits": [0, 0, 0, 0],
                       "error_bound": [0, 0, 0, 0]}])
    (path / "manifest.json").write_text(json.dumps(m))
    return path


def expected_products(a: int, b: int) -> list[int]:
    m64 = (1 << 64) - 1
    p = (a * b) & m64
    x = ((a << 17) & m64) ^ (b & 0xFFFFFFFF)
    y = (b * 3 + (a & 0xFFFFFFFF)) & m64
    q = (x * y) & m64
    return [w - (1 << 32) if w >= 1 << 31 else w for w in (p & 0xFFFFFFFF, p >> 32, q & 0xFFFFFFFF, q >> 32)]


def test_m0_long_multiply_gives_the_exact_bits(tmp_path):
    import numpy as np

    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil.link import Link

    project = generate_project(mul_kernel(tmp_path / "mul"), tmp_path / "fw")
    elf = build(project, "emulated_microbit")
    # the firmware's own __aeabi_lmul, not libgcc's (which also has __muldi3)
    nm = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    assert " T __aeabi_lmul" in nm and "__muldi3" not in nm
    edges = [-2**31, 2**31 - 1, -1, 0, 1, 0xFFFF, 0x10000, -0x10000, -0xFFFF, 0x7FFF8000, -0x7FFF8001, 12345]
    rng = np.random.default_rng(3)
    pairs = [(a, b) for a in edges for b in edges] + rng.integers(-2**31, 2**31, (300, 2)).tolist()
    X = np.array(pairs, dtype=np.int32)
    with Emulator(elf) as emu, Link(emu.url, timeout=3.0) as link:
        dev = link.eval_many(X)
    got = dev.outputs.astype(np.int64).tolist()
    assert got == [expected_products(int(a), int(b)) for a, b in pairs]
