"""jinja2 environment for the files mbforge writes (StrictUndefined: a missing field is
an error, never an empty string in generated code). The kernel templates are rendered
from a typed context (backends.context, `render_context`)."""
from __future__ import annotations

from functools import lru_cache

import jinja2
import numpy as np

from .. import cache
from .context import _Context


class _Bytecode(jinja2.BytecodeCache):
    """Compiled templates kept on disk between runs (compiling them costs a process more
    than generating a small kernel); the rendered text does not depend on it. They are
    code that runs, so they go through mbforge.cache: an entry not stored by this user
    for this template's source (jinja's own checksum) is never loaded."""

    def _key(self, bucket) -> str:
        return cache.key("jinja", bucket.key, bucket.checksum)

    def load_bytecode(self, bucket) -> None:
        hit = cache.load("jinja", self._key(bucket), ("code",))
        if hit is not None:
            bucket.bytecode_from_string(hit["code"].tobytes())

    def dump_bytecode(self, bucket) -> None:
        cache.store("jinja", self._key(bucket), code=np.frombuffer(bucket.bytecode_to_string(), dtype=np.uint8))


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    return None if cache.cache_root() is None else _Bytecode()


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


def render_context(name: str, ctx: _Context) -> str:
    """Render the kernel template `templates/<name>` of mbforge.backends from its render
    context (context.py): the context's fields are all the template reads."""
    return render_template(name, **ctx.variables())
