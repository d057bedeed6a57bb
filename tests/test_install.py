"""mbforge installed normally (not editable), as a user gets it from a wheel.

A wheel is built from a copy of the sources (so nothing of the checkout's build/ leaks in)
with the venv's own build backend (--no-build-isolation --no-index: no registry), and
installed into a fresh temporary venv. That venv sees the project venv's dependencies
through a .pth line (site-packages appended to sys.path; the .pth files there, among them
the editable install's finder, are not run), so nothing is downloaded. Every command then
runs from a directory outside the checkout with no PYTHONPATH, so any data file found by a
path that leaves the package (templates, the dev-platform, board manifests) fails here.

Checked first, without building: each package-data glob of pyproject.toml matches files and
together they take every file of a package folder that is not one of its modules; every
folder with an __init__.py is a listed package. Then (slow): the installed modules and data live in the temporary venv; `mbforge generate`
writes every target and `mbforge firmware` the project, byte for byte as the editable
install does in another process with another hash seed; an installed mbforge builds the
firmware with its own copy of the dev-platform.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from mbforge.targets import BOARDS

from helpers import ROOT
from helpers.packaging import package_folders, setuptools_config

VENV_BIN = Path(sys.executable).parent
TARGETS = ("c-double", "c-float32", "c-fixed", "c-fixed-m0", "hls-c", "verilog")
# what the wheel is built from: pyproject.toml maps these folders into the package
SOURCES = ("pyproject.toml", "README.md", "generator", "targets", "firmware", "hdl", "hil")



def data_files() -> dict[str, set[str]]:
    """Package -> the files of its folder (relative) that are not its modules: templates,
    board manifests, the dev-platform's builder script; sub-packages' folders left out."""
    folders = package_folders()
    out = {}
    for pkg, folder in folders.items():
        inner = [f for p, f in folders.items() if p.startswith(pkg + ".")]
        out[pkg] = {str(f.relative_to(folder)) for f in folder.rglob("*")
                    if f.is_file() and "__pycache__" not in f.parts and not any(f.is_relative_to(i) for i in inner)
                    and not (f.parent == folder and f.suffix == ".py")}
    return out


def test_package_data_globs_take_every_data_file_and_match_something():
    folders, globs = package_folders(), setuptools_config().get("package-data", {})
    shipped = {pkg: set() for pkg in folders}
    for pkg, patterns in globs.items():
        assert pkg in folders, f"package-data names {pkg}, which is not a listed package"
        for pattern in patterns:
            hits = {str(f.relative_to(folders[pkg])) for f in folders[pkg].glob(pattern) if f.is_file()}
            assert hits, f"package-data of {pkg}: {pattern!r} matches no file"
            shipped[pkg] |= hits
    missing = {pkg: sorted(files - shipped[pkg]) for pkg, files in data_files().items() if files - shipped[pkg]}
    assert not missing, f"files no package-data glob takes (the wheel would lack them): {missing}"
    assert data_files()["mbforge.backends"] >= {"templates/c/fixed.c.j2", "templates/verilog/ops.v.j2"}
    listed = set(folders.values())
    for root in setuptools_config()["package-dir"].values():
        for init in (ROOT / root).rglob("__init__.py"):
            assert "__pycache__" in init.parts or init.parent in listed, \
                f"{init.parent} is a package that pyproject.toml does not list"


def run(cmd, cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def clean_env(seed: str, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "MBFORGE"))}
    env.update(PYTHONHASHSEED=seed, **extra)
    return env


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin/ of a fresh venv with mbforge installed from a wheel."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", ".pio"))
        else:
            shutil.copy2(ROOT / name, src / name)
    env = clean_env("0")
    backend = subprocess.run([sys.executable, "-c", "import setuptools, wheel"], capture_output=True)
    if backend.returncode != 0:
        pytest.fail("the build backend (setuptools, wheel) is not in the venv: run scripts/bootstrap.sh")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", tmp / "dist", src], cwd=tmp, env=env)
    wheel, = (tmp / "dist").glob("mbforge-*.whl")

    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp, env=env)
    py = venv / "bin" / "python"
    purelib = Path(run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                       cwd=tmp, env=env).stdout.strip())
    # the project venv's dependencies, after the new venv's own packages
    (purelib / "zz_project_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel],
        cwd=tmp, env=env)
    return venv / "bin"


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A working directory outside the checkout."""
    cwd = tmp_path_factory.mktemp("elsewhere")
    assert ROOT not in cwd.parents
    return cwd


@pytest.mark.slow
def test_installed_modules_and_data_are_in_the_new_venv(installed, outside):
    code = ("import mbforge, mbforge.targets, mbforge.firmware.offline as o, mbforge.backends.render as r, "
            "mbforge.hdl, mbforge.hil, mbforge.verify.hostlib as h; "
            "print(mbforge.__file__); print(mbforge.targets.__file__); print(mbforge.hdl.__file__); "
            "print(mbforge.hil.__file__); print(h.__file__); print(r.__file__); print(o.PLATFORM_DIR); "
            "print(o.source_checkout()); print(o.default_home())")
    lines = run([installed / "python", "-c", code], cwd=outside, env=clean_env("1")).stdout.splitlines()
    venv = installed.parent
    *modules, platform, checkout, home = lines
    for path in (*modules, platform):
        assert Path(path).is_relative_to(venv), f"{path} is not in the installed venv {venv}"
    assert (Path(platform) / "platform.json").is_file() and (Path(platform) / "builder" / "main.py").is_file()
    # every board manifest of the local dev-platform, one per board record that has one
    assert {p.name for p in (Path(platform) / "boards").glob("*.json")} == {
        f"{b.pio_board}.json" for b in BOARDS.values() if b.pio_board}
    # every data file of the checkout's package folders, installed
    installed_root = Path(modules[0]).parent  # .../site-packages/mbforge
    absent = [f"{pkg}: {f}" for pkg, files in data_files().items() for f in sorted(files)
              if not installed_root.joinpath(*pkg.split(".")[1:], f).is_file()]
    assert not absent, f"not installed: {absent}"
    # an installed mbforge keeps its PlatformIO pieces outside the package
    assert checkout == "None" and not Path(home).is_relative_to(venv)


@pytest.mark.slow
def test_installed_cli_generates_every_target_like_the_editable_install(installed, outside):
    for target in TARGETS:
        args = ["generate", "fourbar", "--kernel", "kinematics", "--target", target]
        run([installed / "mbforge", *args, "--out", outside / "installed" / target], cwd=outside,
            env=clean_env("2"))
        run([VENV_BIN / "mbforge", *args, "--out", outside / "editable" / target], cwd=outside,
            env=clean_env("3"))
        got, want = tree(outside / "installed" / target), tree(outside / "editable" / target)
        assert "manifest.json" in want and len(want) >= 2, target
        assert got == want, f"{target}: the installed and the editable install differ"
    # the firmware project of a generated kernel, from the installed package's templates
    for which, seed in (("installed", "4"), ("editable", "5")):
        mbforge = installed / "mbforge" if which == "installed" else VENV_BIN / "mbforge"
        run([mbforge, "firmware", "--kernel", outside / which / "c-float32", "--out", outside / which / "fw"],
            cwd=outside, env=clean_env(seed))
    assert tree(outside / "installed" / "fw") == tree(outside / "editable" / "fw")


@pytest.mark.firmware
@pytest.mark.slow
def test_installed_mbforge_builds_firmware_with_its_own_dev_platform(installed, outside):
    # a PlatformIO home of its own, laid out as an installed user does (the project venv's
    # `pio` on PATH, as a user's would be); the dev-platform is the installed package's
    home = outside / "pio-home"
    env = clean_env("6", MBFORGE_PIO_HOME=str(home),
                    PATH=f"{installed}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    run([installed / "python", "-m", "mbforge.firmware.offline"], cwd=outside, env=env)
    package = installed.parent / "lib"

    def files() -> dict[str, bytes]:  # (byte code caches aside)
        return {k: v for k, v in tree(package).items() if "__pycache__" not in k}

    before = files()
    kernel = ROOT / "tests" / "fixtures" / "toy"
    out = run([installed / "mbforge", "firmware", "--kernel", kernel, "--out", outside / "toy_fw", "--build",
               "--env", "emulated_an385", "--soft-float"], cwd=outside, env=env, timeout=600).stdout
    elf = outside / "toy_fw" / ".pio" / "build" / "emulated_an385" / "program.elf"
    assert f"built {elf}" in out and elf.is_file()
    # PlatformIO's record of the platform it linked: the installed package's copy
    link = json.loads((home / "core" / "platforms" / "platform.pio-link").read_text())
    uri = link["spec"]["uri"]
    assert uri.startswith("symlink://") and Path(uri.removeprefix("symlink://")).is_relative_to(installed.parent)
    # and nothing was written into the installed package (PlatformIO only reads it)
    assert files() == before
