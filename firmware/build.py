"""Build a generated project with PlatformIO, offline.

`build(project_dir, env="emulated_f405") -> Path` runs the venv's `pio run -e ENV` with
the environment the generated platformio.ini expects:
  MBFORGE_PLATFORM_DIR   firmware/platform (mbforge's local dev-platform)
  MBFORGE_TOOLCHAIN_DIR  <home>/toolchain-gccarmnoneeabi (Debian's arm-none-eabi-*)
  PLATFORMIO_CORE_DIR    <home>/core (holds the offline tool-scons)
with <home> = mbforge.firmware.offline.default_home() (filled by scripts/bootstrap.sh, or
by `python -m mbforge.firmware.offline` for an installed mbforge). These are set only for the child
process; the generated files never contain them (they stay byte-identical everywhere).
The environments are the boards of mbforge.targets.BOARDS: the emulated ones
(emulated_f405, emulated_an385) build offline with the local dev-platform into
program.elf; the official `nucleo_f446re` environment needs the PlatformIO registry (here
it fails with PlatformIO's own message) and names its output firmware.elf.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mbforge.firmware import offline
from mbforge.firmware.project import ENVIRONMENTS
from mbforge.targets import BOARDS

PIO_TIMEOUT = 600.0


class BuildError(RuntimeError):
    """The firmware could not be built (missing pieces, compiler errors, time-out)."""


def pio_executable() -> Path:
    """The `pio` installed beside this Python (the venv's), else the one on PATH."""
    here = Path(sys.executable).parent / "pio"
    if here.is_file():
        return here
    from shutil import which

    found = which("pio")
    if not found:
        raise BuildError("PlatformIO's `pio` not found: run scripts/bootstrap.sh")
    return Path(found)


def offline_environment(home: Path | None = None) -> dict[str, str]:
    """The variables `pio run` needs here; BuildError naming what is missing."""
    home = Path(home) if home else offline.default_home()
    core = home / "core"
    toolchain = home / "toolchain-gccarmnoneeabi"

    missing = [str(p) for p in (core / "packages" / "tool-scons" / ".piopm",
                                toolchain / "package.json",
                                toolchain / "bin" / "arm-none-eabi-gcc",
                                offline.PLATFORM_DIR / "platform.json")
               if not p.exists()]
    if missing:
        raise BuildError("offline PlatformIO pieces missing (" + ", ".join(missing)
                         + "): run scripts/bootstrap.sh in a checkout, or `python -m mbforge.firmware.offline`"
                         " for an installed mbforge")
    env = dict(os.environ)
    env.update({
        "MBFORGE_PLATFORM_DIR": str(offline.PLATFORM_DIR),
        "MBFORGE_TOOLCHAIN_DIR": str(toolchain),
        "PLATFORMIO_CORE_DIR": str(core),
        # no update checks, telemetry or prompts: there is no network to ask
        "PLATFORMIO_SETTING_ENABLE_TELEMETRY": "No",
        "PLATFORMIO_SETTING_CHECK_PLATFORMIO_INTERVAL": "3650",
        "PLATFORMIO_SETTING_CHECK_PLATFORMS_INTERVAL": "3650",
        "PLATFORMIO_SETTING_CHECK_LIBRARIES_INTERVAL": "3650",
        "PLATFORMIO_SETTING_CHECK_PRUNE_SYSTEM_THRESHOLD": "0",
        "PLATFORMIO_NO_ANSI": "true",
    })
    return env


def _check_env(env: str) -> None:
    if env not in BOARDS:
        raise BuildError(f"unknown environment {env!r}: the project has {', '.join(ENVIRONMENTS)}")


def elf_path(project_dir: str | Path, env: str = "emulated_f405") -> Path:
    _check_env(env)
    # mbforge's local platform has no uploader and names its output program.elf (ststm32: firmware.elf)
    name = "program.elf" if BOARDS[env].pio_board else "firmware.elf"
    return Path(project_dir) / ".pio" / "build" / env / name


def build(project_dir: str | Path, env: str = "emulated_f405", *, home: Path | None = None,
          verbose: bool = False, timeout: float = PIO_TIMEOUT) -> Path:
    project_dir = Path(project_dir).resolve()
    _check_env(env)
    if not (project_dir / "platformio.ini").is_file():
        raise BuildError(f"no platformio.ini in {project_dir}: generate the project first (mbforge firmware)")
    cmd = [str(pio_executable()), "run", "-d", str(project_dir), "-e", env]
    if verbose:
        cmd.append("-v")
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=offline_environment(home), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(f"`pio run -e {env}` took more than {timeout:.0f} s; stopped") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
        raise BuildError(f"`pio run -e {env}` failed in {project_dir} (exit {proc.returncode}):\n{tail}")
    elf = elf_path(project_dir, env)
    if not elf.is_file():
        raise BuildError(f"`pio run -e {env}` succeeded but {elf} is missing")
    build.last_seconds = time.monotonic() - t0  # type: ignore[attr-defined]
    return elf
