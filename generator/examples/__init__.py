"""Shipped example mechanisms, runnable by name (`mbforge ... fourbar`)."""
from __future__ import annotations

import importlib

EXAMPLES = {
    "fourbar": "mbforge.examples.fourbar",
}


def load(name: str):
    """The Model of a shipped example."""
    try:
        mod = EXAMPLES[name]
    except KeyError:
        raise KeyError(f"no example called {name!r}; known: {', '.join(sorted(EXAMPLES))}") from None
    return importlib.import_module(mod).build()
