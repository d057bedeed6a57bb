"""Backends as a registry: one `Backend` subclass per target, looked up by name.

A backend has a `name` (the target's, from the records in mbforge.targets: the one list of
target names), a typed `Options` (a frozen dataclass; each field's metadata holds its help
text and its choices or bounds), `analyse` (the target's own analyses of the tape:
float32 error bounds, the fixed-point plan) and `render` (the files). The pipeline does
the same steps for every target and has no branch on its name.

Invariants: `resolve` is the only way from user options to an Options instance, so what
is generated, digested and recorded in the manifest is always the complete, validated
set (defaults applied); an option another target takes is refused as inapplicable, an
unknown one as unknown, a bad value with its choices. The command-line flags of
`mbforge generate` and `mbforge hdl` are built from these fields (`add_flags`), so help
texts and choices exist once.
"""
from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..lower.schedule import schedule
from ..targets import TARGETS, Target


class GenerateError(ValueError):
    """Options or a kernel that cannot produce a target's files (names the option)."""


class OptionError(GenerateError):
    """An option that the target does not take, or a value it does not accept."""


def option(default: Any, help: str, *, choices: tuple | None = None, kind: type | None = None,
           minimum: int | None = None, maximum: int | None = None, default_text: str | None = None):
    """A field of an Options dataclass with what the CLI and validation need to know.
    `kind` (int), `minimum` and `maximum` check numbers; a None default means "not set"
    and is always accepted; `default_text` says in the help what None means."""
    meta = {"help": help, "choices": choices, "kind": kind, "minimum": minimum, "maximum": maximum,
            "default_text": default_text}
    return field(default=default, metadata=meta)


def _spell(name: str, cli: bool) -> str:
    return f"--{name.replace('_', '-')}" if cli else f"option {name}"


@dataclass(frozen=True)
class Options:
    """Options every target takes."""
    params: str = option("fold", "model parameters as constants (fold) or as a runtime input port `params`",
                         choices=("fold", "runtime"))
    # "pressure": list scheduling for few live values (about 5% faster code, on the host and
    # the M4F alike); "fast": the lowering's depth-first order, generated in a quarter less time
    schedule: str = option("pressure", "pressure: order for few live values; fast: depth-first, quicker to generate",
                           choices=("pressure", "fast"))
    # "off" for a caller that validates its inputs itself (or a test of the op set on any
    # words): the kernel then never returns 2 and computes on whatever it is given
    input_check: str = option("on", "on: each input compared with its envelope before anything is computed "
                              "(status 2); off: no check", choices=("on", "off"))

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
            err = _check(f, getattr(self, f.name))
            if err:
                raise OptionError(f"option {f.name}={getattr(self, f.name)!r}: {err}")


def _check(f: dataclasses.Field, v: Any) -> str | None:
    """Why value v is not acceptable for option f (None if it is)."""
    m = f.metadata
    if v is None and f.default is None:
        return None
    if m["choices"] is not None and v not in m["choices"]:
        return f"must be one of {', '.join(map(str, m['choices']))}"
    lo = m["minimum"]
    if m["kind"] is int and (not isinstance(v, int) or isinstance(v, bool) or (lo is not None and v < lo)):
        return "must be a positive integer" if lo == 1 else "must be an integer" + ("" if lo is None else f" >= {lo}")
    if m["kind"] is int and m["maximum"] is not None and v > m["maximum"]:
        return f"must be at most {m['maximum']}"
    return None


@dataclass
class Analysis:
    """What a backend's analyses give: `plan` is for its renderer (the fixed-point
    program, ...); the per-element lists go into the manifest's groups (None: not
    applicable to the target)."""
    plan: Any = None
    in_frac_bits: list[int] | None = None
    out_frac_bits: list[int] | None = None
    out_error: list[float | None] | None = None
    # max |value| of each output over the domain (its enclosure; None: unbounded), against
    # which analysis.boundnotes judges out_error
    out_magnitude: list[float | None] | None = None

    def text(self) -> str | None:
        """The analysis as text (mbforge.cache keeps it), or None if its plan has no text."""
        from ..analysis.fixedpoint import FixedProgram, program_text

        if self.plan is not None and not isinstance(self.plan, FixedProgram):
            return None
        try:
            plan = None if self.plan is None else program_text(self.plan)
            return json.dumps({"plan": plan, "in": self.in_frac_bits, "out": self.out_frac_bits,
                               "error": self.out_error, "magnitude": self.out_magnitude})
        except (TypeError, ValueError):  # a value JSON does not hold (a numpy integer): not kept
            return None

    @classmethod
    def from_text(cls, tape, text: str) -> "Analysis":
        from ..analysis.fixedpoint import program_from_text

        d = json.loads(text)
        plan = None if d["plan"] is None else program_from_text(tape, d["plan"])
        return cls(plan, d["in"], d["out"], d["error"], d["magnitude"])


@dataclass
class Rendered:
    """A backend's files, and which of them are sources and headers (for the manifest)."""
    files: dict[str, str]
    sources: list[str]
    headers: list[str]


# code 2, the same on every target that checks its inputs (manifest text, header text)
STATUS_ENVELOPE = ("input outside its envelope (inputs[].envelope; NaN included): nothing computed, "
                   "outputs untouched",
                   "if an input is outside its envelope range (NaN too): nothing computed, out[] untouched")


class Backend(ABC):
    """A target: its options, its analyses, its renderer. Subclasses set `name` (a key of
    mbforge.targets.TARGETS) and, when they take more options, `Options`."""
    name: ClassVar[str]
    Options: ClassVar[type[Options]] = Options
    # status codes beyond "0: ok": {code: (manifest text, header text)}; every C target
    # checks its inputs against the envelope first (status 2)
    status: ClassVar[dict[str, tuple[str, str]]] = {"2": STATUS_ENVELOPE}
    # the pressure schedule's chain length for this target's core (None: lower.schedule's)
    schedule_chain: ClassVar[int | None] = None

    @property
    def target(self) -> Target:
        return TARGETS[self.name]

    @property
    def real(self) -> str:
        return self.target.real

    def resolve(self, given: Mapping | Options | None = None, *, cli: bool = False) -> Options:
        """The complete options: `given` checked, defaults applied. `cli` words the errors
        as the flags of `mbforge generate` (`--variant`) instead of option names."""
        if isinstance(given, Options):
            if type(given) is not self.Options:
                raise OptionError(f"{type(given).__name__} are not the options of target {self.name} "
                                  f"({self.Options.__name__})")
            return given
        given = dict(given or {})
        mine = {f.name: f for f in self.Options.fields()}
        for k in given:
            if k in mine:
                continue
            takers = [b.name for b in _REGISTRY.values() if k in b.Options.names()]
            what = "flags" if cli else "options"
            target = f"--target {self.name}" if cli else f"target {self.name}"
            known = f"{what} of {self.name}: " + ", ".join(_spell(n, cli).removeprefix("option ") for n in mine)
            if takers:
                raise OptionError(f"{_spell(k, cli)} does not apply to {target} (only to "
                                  f"{', '.join(takers)}); {known}")
            raise OptionError(f"unknown {_spell(k, cli)} for {target}; {known}")
        for k, v in given.items():
            err = _check(mine[k], v)
            if err:
                shown = f"{_spell(k, True)} {v}" if cli else f"option {k}={v!r}"
                raise OptionError(f"{shown}: {err}")
        return self.Options(**given)

    def notes(self, analysis: Analysis) -> list[str]:
        """Lines for the header's comment."""
        return []

    def schedule(self, tape, options: Options):
        """The order and slots of the tape's instructions for this target (lower.schedule;
        options.schedule "fast": the tape's order)."""
        return schedule(tape, options.schedule == "pressure", chain=self.schedule_chain)

    def check(self, sched) -> None:
        """Refuse, naming it, what the target cannot express, before any analysis runs
        (an analysis would refuse it too, in its own terms)."""

    @abstractmethod
    def analyse(self, tape, boxes: list) -> Analysis:
        """The target's analyses of the tape over the input boxes."""

    @abstractmethod
    def render(self, sched, analysis: Analysis, ctx: dict, options: Options) -> Rendered:
        """The files. ctx: the kernel's names and documentation (see pipeline)."""


_REGISTRY: dict[str, Backend] = {}


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator: one instance of cls under its name, which must be a target's."""
    if cls.name not in TARGETS:
        raise TypeError(f"backend {cls.__name__}: no target called {cls.name!r} in mbforge.targets")
    if cls.name in _REGISTRY:
        raise TypeError(f"two backends for target {cls.name!r}")
    _REGISTRY[cls.name] = cls()
    return cls
