"""`mbforge firmware --library`: the kernel as a PlatformIO library inside a user's own
project. The user project here is what the README shows: its own platformio.ini (the
library by `lib_deps = symlink://...`, the board's linker script from the library's ld/)
and its own main.c, which calls the kernel and then mbf_serve(). It is built with
`pio run` for emulated_f405 and emulated_an385 and must pass `mbforge hil` in QEMU
against the double reference; its kernel call at start-up is checked in the ELF."""
import json
import subprocess

import pytest
from conftest import FIXTURES, TOY

from mbforge.firmware.build import build
from mbforge.firmware.cli import main as firmware_cli
from mbforge.firmware.project import plan_project
from mbforge.hil.cli import main as hil_cli
from mbforge.targets import BOARDS

pytestmark = [pytest.mark.firmware, pytest.mark.usefixtures("deadline")]
TOY_DOUBLE = FIXTURES / "toy_double"
ENVS = ("emulated_f405", "emulated_an385")

USER_MAIN = """\
#include "mbforge.h"

static mbf_real_t x[MBF_N_IN], y[MBF_N_OUT];
volatile int first_status = -1;

int main(void)
{
    x[0] = 1.0f;
    first_status = MBF_KERNEL(x, y); /* the user's own call of the kernel */
    mbf_serve();                     /* then serve the link for `mbforge hil` */
}
"""


def user_ini(lib: str) -> str:
    envs = []
    for env in ENVS:
        b = BOARDS[env]
        envs.append(f"""
[env:{env}]
platform = symlink://${{sysenv.MBFORGE_PLATFORM_DIR}}
platform_packages = toolchain-gccarmnoneeabi@symlink://${{sysenv.MBFORGE_TOOLCHAIN_DIR}}
board = {b.pio_board}
board_build.ldscript = {lib}/{b.ldscript}
build_flags = -O2 -ffp-contract=off -DMBF_BOARD_{env.upper()} -DMBF_COUNTER_{b.counter.upper()}
lib_deps = symlink://{lib}
""")
    return "".join(envs)


@pytest.fixture(scope="module")
def user_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("library")
    assert firmware_cli(["--library", "--kernel", str(TOY), "--out", str(root / "toylib")]) == 0
    proj = root / "app"
    (proj / "src").mkdir(parents=True)
    (proj / "platformio.ini").write_text(user_ini("../toylib"))
    (proj / "src" / "main.c").write_text(USER_MAIN)
    return root


def test_the_library_holds_the_runtime_and_only_the_kernels_files():
    plan = plan_project(TOY, library=True)
    meta = json.loads(plan["library.json"])
    assert meta["name"] == "mbforge-toy_affine" and meta["build"]["libArchive"] is False
    assert "platformio.ini" not in plan and "src/main.c" not in plan
    kernel = sorted(n for n in plan if "/kernel/" in n)
    assert kernel == ["include/kernel/toy.h", "src/kernel/manifest.json", "src/kernel/toy.c", "src/kernel/toy.h"]
    assert plan["src/kernel/toy.c"] == (TOY / "toy.c").read_bytes()
    assert {"include/mbforge.h", "include/mbf_config.h", "include/mbf_board.h", "src/mbf_serve.c",
            "src/mbf_board.c", "src/mbf_link.c", "src/mbf_startup.c"} <= set(plan)
    assert "void mbf_serve(void)\n{" in plan["src/mbf_serve.c"].decode()
    assert "int main(void)" not in plan["src/mbf_serve.c"].decode()
    assert all(b.ldscript in plan for b in BOARDS.values())
    assert plan == plan_project(TOY, library=True)  # byte-identical for the same kernel


def test_library_goes_without_build(tmp_path, capsys):
    assert firmware_cli(["--library", "--build", "--kernel", str(TOY), "--out", str(tmp_path / "l")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--library" in err and "drop --build" in err


@pytest.mark.parametrize("env", ENVS)
def test_a_user_project_with_the_library_passes_hil(user_project, env, tmp_path, capsys):
    elf = build(user_project / "app", env)
    symbols = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    names = {line.split()[-1] for line in symbols.splitlines()}
    assert {"main", "mbf_serve", "toy_affine", "mbf_vectors", "Reset_Handler"} <= names
    # main() calls the kernel itself before serving
    main = subprocess.run(["arm-none-eabi-objdump", "-d", "--disassemble=main", str(elf)],
                          capture_output=True, text=True, check=True).stdout
    assert "<toy_affine>" in main and "<mbf_serve>" in main
    report = tmp_path / "r.json"
    code = hil_cli(["--emulate", str(elf), "--kernel", str(TOY), "--reference", str(TOY_DOUBLE),
                    "--vectors", "100", "--json", str(report)])
    assert code == 0, capsys.readouterr()
    r = json.loads(report.read_text())
    assert r["passed"] and r["device"]["counter_hz"] == BOARDS[env].cpu_hz
