"""The model layer's error, in a module of its own so that model.py, joints.py and
relative.py all import it from here and none of them imports another back."""
from __future__ import annotations

from ..names import is_name


class ModelError(ValueError):
    """A mechanism description that is inconsistent (names the model and the part)."""


def check_name(model, what: str, name) -> str:
    """name, if it may reach generated code (mbforge.names: an identifier); else ModelError
    naming the model, what holds the name (`what`, e.g. "constraint") and the name."""
    if not is_name(name):
        owner = f"{model.name}: " if model is not None else ""
        raise ModelError(f"{owner}{what} name {name!r} is not an identifier (a letter, then letters, digits "
                         "and _): names are printed into the generated code")
    return name
