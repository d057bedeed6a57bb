"""jinja2 environment for the files mbforge writes (StrictUndefined: a missing field is
an error, never an empty string in generated code)."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import jinja2

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept on disk between runs (compiling them costs a process more
    than generating a small kernel); the rendered text does not depend on it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "mbforge", "jinja")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(path)


@lru_cache(maxsize=None)
def _env(root: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(root),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        autoescape=False,
    )


def render_template(name: str, root: Path = TEMPLATE_DIR, **ctx) -> str:
    return _env(str(root)).get_template(name).render(**ctx)
