"""`mbforge firmware --library`: the kernel as a PlatformIO library inside a user's own
project. The user project here is what the README shows: its own platformio.ini (the
library by `lib_deps = symlink://...`, the board's linker script from the library's ld/)
and its own main.c, which calls the kernel and then mbf_serve(). It is built with
`pio run` for emulated_f405 and emulated_an385 and must pass `mbforge hil` in QEMU
against the double reference; its kernel call at start-up is checked in the ELF."""
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mbforge.firmware.build import build
from mbforge.firmware.cli import main as firmware_cli
from mbforge.firmware.project import plan_project
from mbforge.hil.cli import main as hil_cli
from mbforge.targets import BOARDS

from helpers import FIXTURES, TOY

pytestmark = [pytest.mark.firmware, pytest.mark.usefixtures("deadline")]
TOY_DOUBLE = FIXTURES / "toy_double"
ENVS = ("emulated_f405", "emulated_an385")

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_section() -> str:
    text = README.read_text()
    return text.split("## Your own firmware: the library and the loop app", 1)[1].split("\n## ", 1)[0]


def fenced(section: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", section, re.S | re.M)


USER_MAIN = fenced(readme_section(), "c")[0]  # the README's main.c is the one built here


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


def test_the_readme_section_commands_work(tmp_path):
    """The README's commands, in order, in a fresh folder: generate, --library, the user
    project (its platformio.ini and main.c from the README), build, hil, the loop app."""
    section = readme_section()
    (ini,) = fenced(section, "ini")
    bindir = Path(sys.executable).parent
    commands = [c for block in fenced(section, "sh") for c in block.splitlines() if c.strip()]
    assert len(commands) == 7
    for line in commands:
        if "build(" in line:  # the library exists: write the user's project as the README shows it
            (tmp_path / "out/myapp/src").mkdir(parents=True)
            (tmp_path / "out/myapp/platformio.ini").write_text(ini)
            (tmp_path / "out/myapp/src/main.c").write_text(USER_MAIN)
        argv = shlex.split(line.split("   #", 1)[0])
        argv[0] = str(bindir / Path(argv[0]).name)
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        if "--reference" in line:
            assert "PASS" in proc.stdout
        if "--loop" in line:
            assert "0 overruns" in proc.stdout and "periods of 1000 us at 1000 Hz" in proc.stdout
        if "--library" in line:
            assert (tmp_path / "out/kernel-lib/library.json").is_file()


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
