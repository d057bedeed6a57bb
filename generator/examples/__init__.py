"""Shipped example mechanisms, runnable by name (`mbforge ... fourbar`).

Each module has `build(**options) -> Model`; models with several prescribed motions take
`motion` (see MOTIONS). The registry and the loader every command uses (`load_model`: an
example's name or a .py file defining build(); failures raise ModelFileError, a
ModelError) live in loader.py.
"""
from .loader import EXAMPLES, ModelFileError, default_motion, load, load_model, module, motions, parse_options

__all__ = ["EXAMPLES", "ModelFileError", "default_motion", "load", "load_model", "module", "motions",
           "parse_options"]
