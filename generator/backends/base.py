"""Backends as a registry: one `Backend` subclass per target, looked up by name.

A backend is the one record of its target: a `name`, the `real` kind of in[] and out[]
(a record of mbforge.reals), one line of `use` (the --target help), a typed `Options` (a frozen dataclass; each field's metadata holds its help
text and its choices or bounds), `analyse` (the target's own analyses of the tape:
float32 error bounds, the fixed-point plan) and `render` (the files). The pipeline does
the same steps for every target and has no branch on its name.

Invariants: `resolve` is the only way from user options to an Options instance, so what
is generated, digested and recorded in the manifest is always the complete, validated
set (defaults applied); an option another target takes is refused as inapplicable, an
unknown one as unknown, a bad value with its choices. The command-line flags of
`mbforge generate` and `mbforge hdl` are built from these fields (`add_flags`), so help
texts and choices exist once (mbforge.optionfields, shared with the kernel builders' options).
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ..analysis.fixedpoint import FixedProgram, program_from_text, program_text
from ..lower.schedule import schedule
from ..optionfields import OptionFields, check, option, spell
from ..reals import Real
from .context import KernelContext


class GenerateError(ValueError):
    """Options or a kernel that cannot produce a target's files (names the option)."""


class OptionError(GenerateError):
    """An option that the target does not take, or a value it does not accept."""


@dataclass(frozen=True)
class Options(OptionFields):
    """Options every target takes."""
    error: ClassVar[type[Exception]] = OptionError
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


@dataclass
class Analysis:
    """What a target's analyses give (c-double: nothing): the per-element lists go into the
    manifest's groups (None: not applicable to the target). A subclass per kind of result;
    `text` and `from_text` keep any of them in the disk cache (pipeline._analyse)."""
    in_frac_bits: list[int] | None = None
    out_frac_bits: list[int] | None = None
    out_error: list[float | None] | None = None
    # max |value| of each output over the domain (its enclosure; None: unbounded), against
    # which analysis.boundnotes judges out_error
    out_magnitude: list[float | None] | None = None
    kind: ClassVar[str] = "none"

    def plan_text(self) -> str | None:
        """The renderer's plan as text (None: the analysis has no plan)."""
        return None

    def text(self) -> str | None:
        """The analysis as text (mbforge.cache keeps it), or None if a value has no text."""
        try:
            return json.dumps({"kind": self.kind, "plan": self.plan_text(), "in": self.in_frac_bits,
                               "out": self.out_frac_bits, "error": self.out_error, "magnitude": self.out_magnitude})
        except (TypeError, ValueError):  # a value JSON does not hold (a numpy integer): not kept
            return None

    @staticmethod
    def from_text(tape, text: str) -> Analysis:
        """The analysis of `tape` that `text` holds; KeyError for a kind of another version."""
        d = json.loads(text)
        cls = {c.kind: c for c in (Analysis, Float32Analysis, FixedAnalysis)}[d["kind"]]
        extra = {} if d["plan"] is None else {"plan": program_from_text(tape, d["plan"])}
        return cls(in_frac_bits=d["in"], out_frac_bits=d["out"], out_error=d["error"],
                   out_magnitude=d["magnitude"], **extra)


@dataclass
class Float32Analysis(Analysis):
    """c-float32: error bounds against double (None: no finite bound)."""
    kind: ClassVar[str] = "float32"


@dataclass(kw_only=True)
class FixedAnalysis(Analysis):
    """The fixed-point targets: the plan their renderers print (Q formats, error bounds)."""
    plan: FixedProgram
    kind: ClassVar[str] = "fixed"

    def plan_text(self) -> str:
        return program_text(self.plan)


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
    """A target: its facts, options, analyses and renderer. Subclasses set `name`, `real`,
    `use` and, when they take more options, `Options`."""
    name: ClassVar[str]
    real: ClassVar[Real]  # the element type of in[] and out[]
    use: ClassVar[str]  # what the target is for, one line (`mbforge generate --help`)
    Options: ClassVar[type[Options]] = Options
    # status codes beyond "0: ok": {code: (manifest text, header text)}; every C target
    # checks its inputs against the envelope first (status 2)
    status: ClassVar[dict[str, tuple[str, str]]] = {"2": STATUS_ENVELOPE}
    # the pressure schedule's chain length for this target's core (None: lower.schedule's)
    schedule_chain: ClassVar[int | None] = None

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
            known = f"{what} of {self.name}: " + ", ".join(spell(n, cli).removeprefix("option ") for n in mine)
            if takers:
                raise OptionError(f"{spell(k, cli)} does not apply to {target} (only to "
                                  f"{', '.join(takers)}); {known}")
            raise OptionError(f"unknown {spell(k, cli)} for {target}; {known}")
        for k, v in given.items():
            err = check(mine[k], v)
            if err:
                shown = f"{spell(k, True)} {v}" if cli else f"option {k}={v!r}"
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
    def render(self, sched, analysis: Analysis, ctx: KernelContext, options: Options) -> Rendered:
        """The files. ctx: the kernel's names and documentation (pipeline builds it)."""


_REGISTRY: dict[str, Backend] = {}


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator: one instance of cls under its name (the registration order is the
    targets' order); cls must state its facts."""
    missing = [a for a in ("name", "real", "use") if not hasattr(cls, a)]
    if missing:
        raise TypeError(f"backend {cls.__name__}: no {', '.join(missing)}")
    if cls.name in _REGISTRY:
        raise TypeError(f"two backends for target {cls.name!r}")
    _REGISTRY[cls.name] = cls()
    return cls
