"""Backends: one per target, looked up by name (`get_backend`).

    base.py      the abstract Backend, its typed Options, the `register` decorator
    registry.py  the shipped backends (c-double, c-float32, c-fixed, c-fixed-m0, hls-c, verilog)
    c.py, fixed/, hls.py, rtl/   their printers; templates/ their jinja2 templates

Importing this package registers the shipped backends; the lookups below read the
registry that `register` fills. A backend class is its target's one record (name, real
kind, use, options): there is no other list of targets.
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping

from . import registry  # noqa: F401  (registers the shipped backends)
from .. import optionfields
from .base import (_REGISTRY, Analysis, Backend, FixedAnalysis, Float32Analysis, GenerateError, OptionError, Options,
                   Rendered, register)


def get_backend(name: str) -> Backend:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise OptionError(f"unknown target {name!r}; known: {', '.join(backend_names())}") from None


def backend_names() -> tuple[str, ...]:
    """Every target, in the order the backends were registered (registry.py)."""
    return tuple(_REGISTRY)


def all_option_fields() -> dict[str, tuple[dataclasses.Field, tuple[str, ...]]]:
    """Every option of every backend: {name: (field, names of the targets that take it)}.
    One option name means one thing: the same field wherever it appears."""
    out: dict[str, tuple[dataclasses.Field, list[str]]] = {}
    for n in backend_names():
        for f in _REGISTRY[n].Options.fields():
            if f.name in out:
                if out[f.name][0].metadata != f.metadata or out[f.name][0].default != f.default:
                    raise TypeError(f"option {f.name} means two things ({out[f.name][1][0]}, {n})")
                out[f.name][1].append(n)
            else:
                out[f.name] = (f, [n])
    return {k: (f, tuple(ts)) for k, (f, ts) in out.items()}



def add_flags(parser: argparse.ArgumentParser, fields, *, applies: Mapping[str, tuple[str, ...]] | None = None) -> None:
    """One flag per option field (mbforge.optionfields.add_flags); `applies`: the targets
    that take each option, said in the help of those not every target takes."""
    scope = None
    if applies is not None:
        scope = {n: f"target {', '.join(ts)} only" for n, ts in applies.items() if len(ts) < len(backend_names())}
    optionfields.add_flags(parser, fields, scope)


__all__ = ["Analysis", "Backend", "FixedAnalysis", "Float32Analysis", "GenerateError", "OptionError", "Options", "Rendered", "add_flags",
           "all_option_fields", "backend_names", "get_backend", "register"]
