"""Fixtures shared by the test files.

- `deadline`: a per-test SIGALRM deadline (DEADLINE s) on top of the link's own time-outs,
  so a firmware or emulator test that hangs fails instead of stalling the suite. Modules
  that talk to a device use it with `pytest.mark.usefixtures("deadline")`.
- `toy_firmware(env)`: the toy kernel's (tests/fixtures/toy) PlatformIO project and its
  ELF built for one board of mbforge.targets.BOARDS, built once per session and board
  and shared by every module that needs it (a test may regenerate it, identically, never edit it).

The suite keeps mbforge's disk cache (mbforge.cache) in a folder of its own, made for the
session and removed after it, unless MBFORGE_CACHE_DIR is set: the user's cache is
neither read (a run exercises the cold paths) nor written. The cache's key file
(mbforge.cache.secret_path, ~/.config/mbforge/cache-key) is the user's own, made if missing.
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

if "MBFORGE_CACHE_DIR" not in os.environ:
    os.environ["MBFORGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="mbforge-test-cache-")
    atexit.register(shutil.rmtree, os.environ["MBFORGE_CACHE_DIR"], ignore_errors=True)

FIXTURES = Path(__file__).parent / "fixtures"
TOY = FIXTURES / "toy"
DEADLINE = 120  # seconds per test: a hang fails, a loaded machine does not


@pytest.fixture
def deadline():
    def expired(*_):
        raise TimeoutError(f"test exceeded its {DEADLINE} s deadline")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(DEADLINE)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="session")
def fourbar_kinematics(tmp_path_factory) -> Path:
    """A folder with the four-bar kinematics kernel generated once per session for the
    targets the firmware tests run: <folder>/c-fixed, c-float32, c-double. Read only."""
    from mbforge.examples import load
    from mbforge.kernels.builders import build_kernel
    from mbforge.pipeline import generate

    root = tmp_path_factory.mktemp("fourbar_kinematics")
    k = build_kernel(load("fourbar").equations(), "kinematics")
    for target in ("c-fixed", "c-float32", "c-double"):
        generate(k, target).write(root / target)
    return root


@pytest.fixture(scope="session")
def toy_firmware(tmp_path_factory):
    """toy_firmware(env) -> (project dir, ELF): the toy kernel's firmware for one board."""
    from mbforge.firmware.build import build
    from mbforge.firmware.project import generate_project

    built: dict[str, tuple[Path, Path]] = {}

    def get(env: str) -> tuple[Path, Path]:
        if env not in built:
            project = generate_project(TOY, tmp_path_factory.mktemp(f"toy_{env}") / "proj")
            built[env] = (project, build(project, env))
        return built[env]

    return get
