"""jinja2 environment for the files mbforge writes (StrictUndefined: a missing field is
an error, never an empty string in generated code)."""
from __future__ import annotations

import os
from functools import lru_cache

import jinja2

from ..cache import cache_root


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept on disk between runs (compiling them costs a process more
    than generating a small kernel); the rendered text does not depend on it."""
    root = cache_root()
    if root is None:
        return None
    path = os.path.join(root, "jinja")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(path)


@lru_cache(maxsize=None)
def _env(package: str) -> jinja2.Environment:
    # PackageLoader finds the templates through the installed package (importlib), so a
    # non-editable install renders exactly what the source tree does
    return jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        autoescape=False,
    )


def render_template(name: str, package: str = "mbforge.backends", **ctx) -> str:
    """Render `templates/<name>` of `package` (StrictUndefined)."""
    return _env(package).get_template(name).render(**ctx)
