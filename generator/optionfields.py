"""Typed options as frozen dataclasses, one definition for the backends' options (targets)
and the kernel builders' options (kernels.options): each field's metadata holds its help
text and its choices or bounds, so validation, the error messages and the command-line
flags of `mbforge generate` come from the field and exist once.

    option()        a field with its help, choices, kind and bounds
    OptionFields    the base of an options dataclass: fields, names, as_dict, checked values
    check()         why a value is not acceptable for a field (None if it is)
    spell()         a field's name as a flag (`--delay-lines`) or as an option
    add_flags()     one argparse flag per field
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import Any, ClassVar


def option(default: Any, help: str, *, choices: tuple | None = None, kind: type | None = None,
           minimum: float | None = None, maximum: float | None = None, default_text: str | None = None,
           parse: Callable[[str], Any] | None = None):
    """A field of an options dataclass with what the CLI and validation need to know.
    `kind` (int, float or bool), `minimum` and `maximum` check values; a None default
    means "not set" and is always accepted; `default_text` says in the help what None
    means; `parse` is the flag's argparse type where it words its own refusal."""
    meta = {"help": help, "choices": choices, "kind": kind, "minimum": minimum, "maximum": maximum,
            "default_text": default_text, "parse": parse}
    return field(default=default, metadata=meta)


def spell(name: str, cli: bool) -> str:
    return f"--{name.replace('_', '-')}" if cli else f"option {name}"


def check(f: dataclasses.Field, v: Any) -> str | None:
    """Why value v is not acceptable for option field f (None if it is)."""
    m = f.metadata
    if v is None and f.default is None:
        return None
    if m["choices"] is not None and v not in m["choices"]:
        return f"must be one of {', '.join(map(str, m['choices']))}"
    lo, hi, kind = m["minimum"], m["maximum"], m["kind"]
    if kind is bool and not isinstance(v, bool):
        return "must be true or false"
    if kind is int and (not isinstance(v, int) or isinstance(v, bool) or (lo is not None and v < lo)):
        return "must be a positive integer" if lo == 1 else "must be an integer" + ("" if lo is None else f" >= {lo}")
    if kind is float and (not isinstance(v, (int, float)) or isinstance(v, bool) or v != v
                          or (lo is not None and v < lo)):
        return "must be a number" + ("" if lo is None else f" >= {lo:g}")
    if kind in (int, float) and hi is not None and v > hi:
        return f"must be at most {hi}"
    return None


@dataclasses.dataclass(frozen=True)
class OptionFields:
    """The base of a frozen options dataclass of option() fields; a value no field accepts
    raises `error` (the subclass family's error class) naming the option."""
    error: ClassVar[type[Exception]] = ValueError

    @classmethod
    def fields(cls) -> tuple[dataclasses.Field, ...]:
        return dataclasses.fields(cls)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            err = check(f, getattr(self, f.name))
            if err:
                raise self.error(f"option {f.name}={getattr(self, f.name)!r}: {err}")


def add_flags(parser: argparse.ArgumentParser, fields: Iterable[dataclasses.Field], scope: Mapping[str, str] | None = None) -> None:
    """One flag per option field, with its help and choices. Flags default to None (not
    given), so that a caller can tell a given flag from a default and refuse it where it
    does not apply; the help shows the option's own default and `scope[name]` (where it
    applies) when given. A bool field is a switch (`--with-multipliers`)."""
    for f in fields:
        m = f.metadata
        default = m["default_text"] or f"default {f.default}"
        if m.get("maximum") is not None and m["kind"] is int:
            default += f"; {m['minimum']} to {m['maximum']}"
        where = f"; {scope[f.name]}" if scope and scope.get(f.name) else ""
        help = f"{m['help']} ({default}{where})"
        if m["kind"] is bool:
            parser.add_argument(spell(f.name, True), dest=f.name, default=None, action="store_const", const=True,
                                help=help)
            continue
        kind = m.get("parse") or m["kind"] or str
        metavar = None if m["choices"] else "N" if m["kind"] is int else "X" if m["kind"] is float else None
        parser.add_argument(spell(f.name, True), dest=f.name, default=None, choices=m["choices"], type=kind,
                            metavar=metavar, help=help)


__all__ = ["OptionFields", "add_flags", "check", "option", "spell"]
