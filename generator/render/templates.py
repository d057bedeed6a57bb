"""jinja2 environment for the files mbforge writes (StrictUndefined: a missing field is
an error, never an empty string in generated code)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=None)
def _env(root: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(root),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        autoescape=False,
    )


def render_template(name: str, root: Path = TEMPLATE_DIR, **ctx) -> str:
    return _env(str(root)).get_template(name).render(**ctx)
