"""The model and kernel flags of `mbforge generate` and `mbforge hdl` (the model, --kernel,
--envelope, --set and the kernel builders' options: --method, --frame, --dt, ... from
kernels.options), defined and read once here so the two commands cannot drift (no import
of mbforge.cli: hdl's CLI imports this)."""
from __future__ import annotations

from .errors import CLIError
from .domain.states import RESIDUAL as STATE_RESIDUAL
from .model.model import RECURSIVE


def add_model_flags(p) -> None:
    """The model and kernel flags (read by model_kernel): one definition for generate and hdl."""
    from .kernels.builders import BUILDERS
    from .kernels.options import flag_fields, takers
    from .optionfields import add_flags

    p.add_argument("model", help="a shipped example (e.g. fourbar), a .py file with build() or a .urdf robot")
    p.add_argument("--kernel", default="equations", choices=sorted(BUILDERS),
                   help="what the kernel computes (default equations)")
    p.add_argument("--envelope", default=None, metavar="FILE.json",
                   help="operating envelope overriding the model's: {\"quantities\": {name: {\"range\": [lo, hi], "
                        "\"rate\": [..], \"accel\": [..], \"cells\": n}}, \"inputs\": {actuator: [lo, hi]}}")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the model's build() (repeatable), e.g. --set motion=yaw")
    add_flags(p.add_argument_group("kernel options (each for the kernels named)"), flag_fields(), takers())


def model_kernel(args, mark=lambda _name: None, equations: bool = True):
    """(equations, kernel) from the model and kernel flags of add_model_flags: the one reading
    of them, shared by generate and hdl so the two cannot drift. equations=False: a caller
    that reads only the kernel gets the model itself in place of the equations where the
    kernel is recursive (it is built from the model: its M(q) equations, 2 s of the 30-joint
    chain's, would go unused)."""
    from .examples import load_model, parse_options
    from .kernels.builders import build_kernel

    options = kernel_options(args)  # refused before any work
    model = load_model(args.model, options=parse_options(args.set))
    mark("model build")
    # a floating base goes to the recursive kernels as the model itself (equations() refuses it)
    floating = getattr(model, "floating_base", None) is not None and args.kernel in RECURSIVE
    unused = not equations and args.kernel in RECURSIVE and args.envelope is None
    eqs = model if floating or unused else model.equations()
    mark("equations")
    if args.envelope is not None and not floating:
        eqs.envelope = override_envelope(eqs, args.envelope)
    kernel = build_kernel(eqs, args.kernel, options)
    mark("kernel")
    if args.envelope is not None and kernel.envelope is None:  # its builder reads no envelope
        raise CLIError(f"--envelope {args.envelope}: --kernel {args.kernel} is not built over an operating "
                       "envelope (it serves the driven motion or the declared ranges)")
    return eqs, kernel


def motion_only(eqs, kernel) -> str | None:
    """A note when the kernel serves only the tube around the example's driven motion
    because the model has no operating envelope (none declared, or --set envelope=False):
    any other state returns status 2, which a user would otherwise learn only on the device."""
    if eqs.envelope or kernel.envelope is not None or kernel.motion is None or kernel.domain is None:
        return None
    if kernel.step and eqs.phi and not kernel.step.get("alpha"):  # rk4 --penalty 0: domain.states' cover
        return (f"note: {kernel.model} {kernel.name} serves the {len(kernel.domain)} boxes of states within "
                f"{STATE_RESIDUAL:g} of its constraints over the declared ranges (domain.states), not a motion; "
                "a state outside their hull returns status 2 (out of domain), one inside it but farther off the "
                "constraints gets no bound")
    return (f"note: {kernel.model} {kernel.name} has no operating envelope: it serves only the "
            f"{len(kernel.domain)} boxes around the example's driven motion, and any other state returns "
            "status 2 (out of domain); an operating envelope (Model.operate; the shipped Stewart models declare "
            "one unless --set envelope=False), narrowed with --envelope FILE.json, makes it serve a workspace")


def override_envelope(eqs, path: str):
    """The model's envelope with the ranges of the --envelope file; ModelError naming the
    file and key otherwise (the model must declare the quantities it overrides)."""
    from .model.envelope import load_override
    from .model.errors import ModelError

    if not eqs.envelope:
        raise ModelError(f"--envelope {path}: model {eqs.model} declares no operating envelope to override "
                         "(Model.operate)")
    return eqs.envelope.override(load_override(path), path, list(eqs.actuator_names))


def kernel_options(args):
    """The kernel options given as flags, resolved for --kernel (kernels.options): a flag its
    builder does not take is refused in one line naming the kernels that take it."""
    from .kernels.options import KernelOptionError, flag_fields, resolve

    given = {f.name: getattr(args, f.name) for f in flag_fields() if getattr(args, f.name, None) is not None}
    try:
        return resolve(args.kernel, given, cli=True)
    except KernelOptionError as e:
        raise CLIError(str(e)) from None
