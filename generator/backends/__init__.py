"""Backends: one per target, looked up by name (`get_backend`); see base.py."""
from .base import (Analysis, Backend, GenerateError, OptionError, Options, Rendered, backend_names,
                   get_backend, register)

__all__ = ["Analysis", "Backend", "GenerateError", "OptionError", "Options", "Rendered", "backend_names",
           "get_backend", "register"]
