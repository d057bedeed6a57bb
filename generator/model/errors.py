"""The model layer's error, in a module of its own so that model.py, joints.py and
relative.py all import it from here and none of them imports another back."""
from __future__ import annotations


class ModelError(ValueError):
    """A mechanism description that is inconsistent (names the model and the part)."""
