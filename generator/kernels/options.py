"""The kernel builders' options, typed as the backends' are (mbforge.optionfields): one
frozen dataclass per builder that takes options; their fields are the flags of
`mbforge generate` and `mbforge hdl` (--method, --with-multipliers, --domain-steps,
--coordinates, --drivers, --frame, --dt, ...), checked before the kernel is built.

One option name means one thing across builders; where two builders give a name other
choices (`method`: forward-dynamics's factorizations, inverse-dynamics-reduced's
formulations) the flag takes the union and the builder's own Options refuses the others.
A flag given to a kernel whose builder does not take it is refused in one line.
`builder_args` is what the builder receives (a field may carry its builder's argument
name: `with_multipliers` is inverse-dynamics-reduced's `multipliers`).
"""
from __future__ import annotations

import argparse

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ..optionfields import OptionFields, check, option, spell
from ..options import number, whole
from ..reference.linearize import DRIVERS
from .common import KernelError
from ..domain.motion import DOMAIN_STEPS
from .dynamics import FORWARD_METHODS
from .reduced import REDUCED_METHODS
from .step import INTEGRATORS


class KernelOptionError(KernelError):
    """A kernel option its builder does not take, or a value it does not accept."""


@dataclass(frozen=True)
class KernelOptions(OptionFields):
    """The options of a builder that takes none (and the base of those that do)."""
    error: ClassVar[type[Exception]] = KernelOptionError
    # field name -> the builder's argument, where they differ
    args: ClassVar[Mapping[str, str]] = {}

    def builder_args(self) -> dict:
        return {self.args.get(k, k): v for k, v in self.as_dict().items()}


REDUCED_HELP = ("forward-dynamics, linearized-dynamics, step: over the independent coordinates of the model's "
                "closed forms (Model.explicit); the dependent coordinates follow from them (no singular positions "
                "of the rows they satisfy)")


@dataclass(frozen=True)
class ForwardDynamicsOptions(KernelOptions):
    method: str = option("auto", "forward-dynamics: ldlt (symmetric LDL^T) or lu (fixed pivots) or auto, the "
                         "cheaper kernel of the two; inverse-dynamics-reduced: projected (on the independent "
                         "coordinates) or full or auto", choices=FORWARD_METHODS)
    reduced: bool = option(False, REDUCED_HELP, kind=bool, default_text="default: off")


@dataclass(frozen=True)
class ReducedOptions(KernelOptions):
    args: ClassVar[Mapping[str, str]] = {"with_multipliers": "multipliers"}
    method: str = option("auto", ForwardDynamicsOptions.__dataclass_fields__["method"].metadata["help"],
                         choices=REDUCED_METHODS)
    with_multipliers: bool = option(False, "inverse-dynamics-reduced: the multipliers as a second output",
                                    kind=bool, default_text="default: off")
    domain_steps: int = option(DOMAIN_STEPS, "inverse-dynamics-reduced: boxes of the tube around the driven motion "
                               "(fewer: faster, looser bounds)", kind=int, minimum=1, maximum=10_000)


@dataclass(frozen=True)
class LinearizedOptions(KernelOptions):
    coordinates: str | None = option(None, "linearized-dynamics: the independent coordinates, comma-separated",
                                     default_text="default: chosen at generation time")
    velocities: str | None = option(None, "linearized-dynamics: the independent velocities, comma-separated",
                                    default_text="default: chosen at generation time")
    drivers: str = option("auto", "linearized-dynamics: drop or keep the driving constraints (auto: drop when "
                          "the model has actuators)", choices=DRIVERS)
    reduced: bool = option(False, REDUCED_HELP, kind=bool, default_text="default: off")


@dataclass(frozen=True)
class FrameOptions(KernelOptions):
    frame: str | None = option(None, "the frame of --kernel frame-kinematics (a URDF link's name)",
                               default_text="required")


def penalty_ratio(text: str) -> float:
    """--penalty: 0 (rk4's exact multipliers) or a ratio from 0.01 to 1e8."""
    v = number(-1.0, 1e8, "0 or a ratio from 0.01 to 1e8")(text)
    if not (v == 0 or v >= 1e-2):
        raise argparse.ArgumentTypeError(f"must be 0 or a ratio from 0.01 to 1e8, got {text}")
    return v


@dataclass(frozen=True)
class StepKernelOptions(KernelOptions):
    # the builder checks them against the model (kernels.step.StepOptions.check)
    dt: float | None = option(None, "the time step [s]", kind=float, default_text="required",
                              parse=number(0, 1e3, "a time step in seconds > 0"))
    integrator: str = option("auto", "ali3p: index-3 augmented Lagrangian with projections (closed loops; auto's "
                             "choice with constraints); rk4: classic Runge-Kutta (auto's choice without constraints; "
                             "with constraints on the projected accelerations, then a coordinate projection); euler "
                             "(semi-implicit): unconstrained models; see docs/kernels.md", choices=("auto", *INTEGRATORS))
    iterations: int | None = option(None, "ali3p's Newton iterations per step; rk4 with constraints: refinements "
                                    "of the accelerations", kind=int, minimum=1, maximum=50,
                                    default_text="default: the fewest that converge along the reference run, up to 8",
                                    parse=whole(1, 50))
    penalty: float = option(1e3, "ali3p's (and constrained rk4's) penalty as the ratio of dt^2/4 alpha Phi_q^T "
                            "Phi_q to M; 0 with rk4: exact multipliers, no penalty (independent constraints; "
                            "c-fixed over the near-consistent states)", kind=float, minimum=0.0, maximum=1e8,
                            default_text="default 1e3", parse=penalty_ratio)
    solve: str = option("auto", "rk4 --penalty 0: how the exact multipliers are solved; auto: M, then "
                        "Phi_q M^-1 Phi_q^T (LDL^T each) where M is definite and the constraints independent, else "
                        "the KKT matrix [M A^T; A 0]; kkt: the KKT matrix always (fixed point: fewer nested pivots "
                        "to prove)", choices=("auto", "kkt"))
    reduced: bool = option(False, REDUCED_HELP, kind=bool, default_text="default: off")


KERNEL_OPTIONS: dict[str, type[KernelOptions]] = {
    "forward-dynamics": ForwardDynamicsOptions,
    "inverse-dynamics-reduced": ReducedOptions,
    "linearized-dynamics": LinearizedOptions,
    "frame-kinematics": FrameOptions,
    "step": StepKernelOptions,
}


def options_class(kernel: str) -> type[KernelOptions]:
    return KERNEL_OPTIONS.get(kernel, KernelOptions)


def resolve(kernel: str, given: Mapping | KernelOptions | None = None, *, cli: bool = False) -> KernelOptions:
    """The kernel's complete options (defaults applied); KernelOptionError names an option
    the builder does not take (and the kernels that do) or a bad value with its choices."""
    cls = options_class(kernel)
    if isinstance(given, KernelOptions):
        if type(given) is not cls:
            raise KernelOptionError(f"{type(given).__name__} are not the options of kernel {kernel}")
        return given
    given = dict(given or {})
    mine = {f.name: f for f in cls.fields()}
    for k, v in given.items():
        if k not in mine:
            takers = [n for n, c in KERNEL_OPTIONS.items() if k in c.names()]
            what = f"--kernel {kernel}" if cli else f"kernel {kernel}"
            raise KernelOptionError(f"{spell(k, cli)} goes with --kernel {' or '.join(takers)}, not {what}"
                                    if takers else f"unknown {spell(k, cli)} for {what}")
        err = check(mine[k], v)
        if err:
            raise KernelOptionError(f"{spell(k, True)} {v}: {err}" if cli else f"option {k}={v!r}: {err}")
    return cls(**given)


def flag_fields() -> list:
    """One field per option name over every builder, for add_flags: a name several builders
    take with other choices gets their union (the builder's own Options checks its own)."""
    out: dict[str, dataclasses.Field] = {}
    for cls in KERNEL_OPTIONS.values():
        for f in cls.fields():
            if f.name not in out:
                out[f.name] = f
                continue
            seen = out[f.name]
            if seen.metadata["kind"] != f.metadata["kind"] or seen.default != f.default:
                raise TypeError(f"kernel option {f.name} means two things")
            if seen.metadata["choices"] != f.metadata["choices"]:
                union = tuple(dict.fromkeys((*seen.metadata["choices"], *f.metadata["choices"])))
                merged = dataclasses.field(default=seen.default, metadata={**seen.metadata, "choices": union})
                merged.name = f.name
                out[f.name] = merged
    return list(out.values())


def takers() -> dict[str, str]:
    """For each option name, the kernels that take it, as the help says it."""
    out: dict[str, list[str]] = {}
    for kernel, cls in KERNEL_OPTIONS.items():
        for n in cls.names():
            out.setdefault(n, []).append(kernel)
    return {n: f"--kernel {' or '.join(ks)}" for n, ks in out.items()}


__all__ = ["FrameOptions", "ForwardDynamicsOptions", "KERNEL_OPTIONS", "KernelOptionError", "KernelOptions",
           "LinearizedOptions", "ReducedOptions", "StepKernelOptions", "flag_fields", "options_class", "resolve", "takers"]
