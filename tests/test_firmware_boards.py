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
import subprocess

import pytest

from mbforge.firmware.cli import main as firmware_cli
from mbforge.hil.cli import main as hil_cli
from mbforge.targets import BOARDS

pytestmark = [pytest.mark.firmware, pytest.mark.usefixtures("deadline")]


@pytest.fixture(scope="module")
def fourbar(tmp_path_factory):
    """The four-bar kinematics in c-fixed and c-double."""
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    root = tmp_path_factory.mktemp("fourbar_boards")
    k = build_kernel(load("fourbar").equations(), "kinematics")
    generate(k, "c-fixed").write(root / "fixed")
    generate(k, "c-double").write(root / "double")
    return root


def build_and_run(fourbar, tmp_path, capsys, env, kernel, vectors, *extra):
    project = tmp_path / f"fw_{env}_{kernel}"
    assert firmware_cli(["--kernel", str(fourbar / kernel), "--out", str(project), "--build", "--env", env]) == 0
    capsys.readouterr()
    elf = project / ".pio" / "build" / env / "program.elf"
    report = tmp_path / f"{env}_{kernel}.json"
    args = ["--emulate", str(elf), "--kernel", str(fourbar / kernel), "--reference", str(fourbar / "double"),
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
    elf, r = build_and_run(fourbar, tmp_path, capsys, "emulated_an500", "double", 1000)
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
    _, r = build_and_run(fourbar, tmp_path, capsys, env, "fixed", 300, "--host-model")
    assert r["passed"] and r["device"]["real"] == "int32"
    assert r["host_model"]["elements_mismatched"] == 0
    w = r["work_per_call"]
    assert w["unit"] == "instructions" and w["counter_overflows"] == 0
    print(env, "c-fixed instructions per call", w["min"], w["median"], w["max"])
