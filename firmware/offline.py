"""Lay out the PlatformIO pieces that let `pio run` work with no registry.

PlatformIO would download its build engine (tool-scons) and a toolchain; here neither can
be fetched, so we build both locally (facts in shared/notes/offline-toolchain.md):
  <home>/core/packages/tool-scons/   PyPI's SCons as a PlatformIO package (.piopm included,
                                     without it PlatformIO tries the network)
  <home>/toolchain-gccarmnoneeabi/   bin/ symlinks to Debian's /usr/bin/arm-none-eabi-*
The dev-platform for emulated boards is not copied: it is package data of mbforge.firmware
(firmware/platform, found through importlib.resources, so an installed mbforge has it too)
and is referenced as symlink://. Its board manifests (platform/boards/*.json) are the
records of mbforge.targets.BOARDS in PlatformIO's form (Board.board_manifest; a test
checks they agree). Idempotent: existing, up-to-date pieces are left alone.

<home> is MBFORGE_PIO_HOME if set; else <checkout>/.mbforge-pio when mbforge runs from its
source checkout (the editable install scripts/bootstrap.sh makes); else, for an installed
mbforge, $XDG_CACHE_HOME/mbforge/pio (~/.cache/mbforge/pio). The package directory itself
is never written.
"""
from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import shutil
import sys
from pathlib import Path

SCONS_VERSION = "4.41101.0"  # PlatformIO's spelling of SCons 4.11.1
# a real directory: PlatformIO reads the dev-platform from disk (mbforge is never zipped)
PACKAGE_ROOT = Path(str(importlib.resources.files("mbforge.firmware")))
PLATFORM_DIR = PACKAGE_ROOT / "platform"
TOOLCHAIN_PREFIX = "arm-none-eabi-"


class OfflineError(RuntimeError):
    """A piece of the offline set-up cannot be made here (no SCons, no cross compiler)."""


def source_checkout() -> Path | None:
    """The checkout this package runs from (an editable install), else None."""
    root = PACKAGE_ROOT.parent
    if PACKAGE_ROOT.name == "firmware" and (root / "pyproject.toml").is_file() and (root / "generator").is_dir():
        return root
    return None


def default_home() -> Path:
    """Where the offline pieces live (see the module's docstring)."""
    env = os.environ.get("MBFORGE_PIO_HOME")
    if env:
        return Path(env).resolve()
    checkout = source_checkout()
    if checkout is not None:
        return checkout / ".mbforge-pio"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mbforge" / "pio"


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def layout_scons(core: Path) -> Path:
    try:
        import SCons  # the PyPI wheel, installed by the bootstrap (the `offline` extra)
    except ImportError:
        raise OfflineError("SCons is not installed: pip install 'mbforge[offline]' (scripts/bootstrap.sh does)") from None

    pkg = core / "packages" / "tool-scons"
    src = Path(SCons.__file__).resolve().parent
    dst = pkg / "SCons"
    pkg.mkdir(parents=True, exist_ok=True)
    if not (dst / "__init__.py").exists():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    _write_if_changed(
        pkg / "scons.py",
        "import os, sys\n"
        "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
        "import SCons.Script\n"
        "SCons.Script.main()\n",
    )
    _write_if_changed(pkg / "package.json", json.dumps({"name": "tool-scons", "version": SCONS_VERSION}) + "\n")
    piopm = {
        "type": "tool",
        "name": "tool-scons",
        "version": SCONS_VERSION,
        "spec": {"owner": "platformio", "id": 8427, "name": "tool-scons",
                 "requirements": "~" + SCONS_VERSION, "uri": None},
    }
    _write_if_changed(pkg / ".piopm", json.dumps(piopm) + "\n")
    return pkg


def layout_toolchain(home: Path) -> Path:
    gcc = shutil.which(TOOLCHAIN_PREFIX + "gcc")
    if gcc is None:
        raise OfflineError("arm-none-eabi-gcc not found: install gcc-arm-none-eabi (scripts/bootstrap.sh does)")
    bindir = Path(gcc).resolve().parent
    pkg = home / "toolchain-gccarmnoneeabi"
    (pkg / "bin").mkdir(parents=True, exist_ok=True)
    for tool in sorted(bindir.glob(TOOLCHAIN_PREFIX + "*")):
        link = pkg / "bin" / tool.name
        if not link.is_symlink() or os.readlink(link) != str(tool):
            if link.exists() or link.is_symlink():
                link.unlink()
            link.symlink_to(tool)
    _write_if_changed(
        pkg / "package.json",
        json.dumps({"name": "toolchain-gccarmnoneeabi", "version": "1.120201.0",
                    "description": "Debian's arm-none-eabi GCC, linked for offline PlatformIO"}) + "\n",
    )
    return pkg


def layout(home: Path | None = None) -> Path:
    home = home or default_home()
    core = home / "core"
    core.mkdir(parents=True, exist_ok=True)
    layout_scons(core)
    layout_toolchain(home)
    return home


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, help="checkout whose .mbforge-pio/ to fill")
    args = ap.parse_args(argv)
    home = (args.root / ".mbforge-pio") if args.root else None
    try:
        print(f"[bootstrap] offline PlatformIO pieces in {layout(home)}")
    except OfflineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
