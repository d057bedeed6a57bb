"""The package as pyproject.toml maps it: import name -> folder, the modules' files, and
the package-data globs."""
from __future__ import annotations

import tomllib
from pathlib import Path

from . import ROOT


def setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def package_folders() -> dict[str, Path]:
    """Each package of [tool.setuptools] packages -> its folder, by the longest mapped prefix
    of package-dir (mbforge.ir -> generator/ir, mbforge.hil -> hil)."""
    cfg = setuptools_config()
    mapped = cfg.get("package-dir", {})
    out = {}
    for pkg in cfg["packages"]:
        parts = pkg.split(".")
        head = next((i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in mapped), 0)
        base = ROOT / mapped[".".join(parts[:head])] if head else ROOT
        out[pkg] = base.joinpath(*parts[head:])
    return out


def modules(folders: dict[str, Path]) -> dict[str, Path]:
    """Module name -> file, for every .py file directly in each package's folder."""
    out = {}
    for pkg, folder in folders.items():
        for f in sorted(folder.glob("*.py")):
            out[pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"] = f
    return out
