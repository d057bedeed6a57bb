"""Fixtures shared by the test files.

- `deadline`: a per-test SIGALRM deadline (DEADLINE s) on top of the link's own time-outs,
  so a firmware or emulator test that hangs fails instead of stalling the suite. Modules
  that talk to a device use it with `pytest.mark.usefixtures("deadline")`.
- `toy_firmware(env)`: the toy kernel's (tests/fixtures/toy) PlatformIO project and its
  ELF built for one board of mbforge.targets.BOARDS, built once per session and board
  and shared by every module that needs it (a test may regenerate it, identically, never edit it).

Layers: `pytest -m "not slow"` runs the generator's own tests in a few minutes; `slow` marks
what needs QEMU, a PlatformIO build or an RTL simulation (every test marked `firmware` or
`hdl` is also `slow`, added here) and what takes more than about 10 s.

Tools: `@pytest.mark.needs("yosys", modules=("pinocchio",), dists=("example-robot-data",))`
names the executables (Python modules, installed distributions: a data-only wheel has no
module) a test needs that scripts/bootstrap.sh installs. One missing skips the test
on a workstation and fails it when the environment variable CI is set (.ci/run sets it), so
CI never passes by skipping what the bootstrap should have installed.

The suite keeps mbforge's disk cache (mbforge.cache) in a folder of its own, made for the
session and removed after it, unless MBFORGE_CACHE_DIR is set: the user's cache is
neither read (a run exercises the cold paths) nor written. The cache's key file
(mbforge.cache.secret_path, ~/.config/mbforge/cache-key) is the user's own, made if missing.
"""
from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from helpers import TOY

if "MBFORGE_CACHE_DIR" not in os.environ:
    os.environ["MBFORGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="mbforge-test-cache-")
    atexit.register(shutil.rmtree, os.environ["MBFORGE_CACHE_DIR"], ignore_errors=True)

DEADLINE = 120  # seconds per test: a hang fails, a loaded machine does not


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(*tools, modules=(), dists=()): executables, Python modules and "
                            "distributions that scripts/bootstrap.sh installs; missing: skipped, or failed when CI "
                            "is set")


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("firmware") or item.get_closest_marker("hdl"):
            item.add_marker(pytest.mark.slow)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def pytest_runtest_setup(item):
    missing = []
    for mark in item.iter_markers("needs"):
        missing += [t for t in mark.args if shutil.which(t) is None]
        missing += [m for m in mark.kwargs.get("modules", ()) if importlib.util.find_spec(m) is None]
        missing += [d for d in mark.kwargs.get("dists", ()) if not _installed(d)]
    if missing:
        what = f"needs {', '.join(sorted(set(missing)))} (scripts/bootstrap.sh installs it)"
        if in_ci():
            pytest.fail(f"{what}: missing under CI", pytrace=False)
        pytest.skip(what)


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
