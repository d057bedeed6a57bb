"""Shipped example mechanisms, runnable by name (`mbforge ... fourbar`).

Each module has `build(**options) -> Model`; models with several prescribed motions take
`motion` (see MOTIONS).
"""
from __future__ import annotations

import importlib
import inspect

EXAMPLES = {
    "fourbar": "mbforge.examples.fourbar",
    "slidercrank": "mbforge.examples.slidercrank",
    "pendulum_block": "mbforge.examples.pendulum_block",
    "slidercrank_disc": "mbforge.examples.slidercrank_disc",
    "stewart": "mbforge.examples.stewart",
    "stewart_relative": "mbforge.examples.stewart_relative",
}


def module(name: str):
    try:
        mod = EXAMPLES[name]
    except KeyError:
        raise KeyError(f"no example called {name!r}; known: {', '.join(sorted(EXAMPLES))}") from None
    return importlib.import_module(mod)


def motions(name: str) -> tuple[str, ...]:
    """The prescribed motions an example offers (empty if it has one or none)."""
    return tuple(getattr(module(name), "MOTIONS", ()))


def load(name: str, **options):
    """The Model of a shipped example (options go to its build(), e.g. motion="yaw")."""
    mod = module(name)
    params = inspect.signature(mod.build).parameters
    bad = [k for k in options if k not in params]
    if bad:
        raise TypeError(f"example {name!r} takes no option {', '.join(bad)}; its options: "
                        f"{', '.join(params) or 'none'}")
    return mod.build(**options)
