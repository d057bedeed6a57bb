"""The `mbforge` command line: one subcommand per pipeline stage, plus the demo."""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from .errors import CLIError


def cmd_generate(args) -> int:
    from .progress import Stages, process_age

    # from the process' start when known (the interpreter and the imports are part of the command)
    stages = Stages(process_age() or 0.0) if args.verbose else None
    mark = stages.mark if stages else (lambda _name: None)
    from .backends import all_option_fields
    from .ir.graph import gc_paused
    from .modelflags import model_kernel
    from .pipeline import check_prefix, generate, resolve_options

    mark("import")
    if args.prefix is not None:
        check_prefix(args.prefix)
    # only the flags given: a flag of another target is refused, a default is the backend's
    given = {name: getattr(args, name) for name in all_option_fields() if getattr(args, name) is not None}
    options = resolve_options(args.target, given, cli=True)
    with gc_paused():  # atoms make no reference cycles: the collector's passes over them find nothing
        _eqs, kernel = model_kernel(args, mark, equations=False)
        plan = generate(kernel, args.target, prefix=args.prefix, options=options, stages=mark,
                        require_bounds=args.require_bounds)
        out = plan.write(args.out, force=args.force)
        mark("write")
    m = plan.manifest
    if plan.bound_warning:
        print(f"mbforge generate: warning: {m.function} ({m.target}): {plan.bound_warning}", file=sys.stderr)
    print(f"{m.function} ({m.target}): {m.n_in} inputs, {m.n_out} outputs, "
          f"{m.ops['total']} operations, peak {m.peak_live} live -> {out}")
    if stages:
        if kernel.info.report:  # the solve's report: pivots, where they were chosen, their proof
            print("\n".join(f"mbforge generate: {line}" for line in kernel.info.report.splitlines()), file=sys.stderr)
        stages.report("generate")
    return 0


def _register_generate(sub) -> None:
    from .backends import add_flags, all_option_fields
    from .modelflags import add_model_flags
    from .options import folder
    from .backends import get_backend
    from .pipeline import TARGETS

    p = sub.add_parser("generate", help="generate a kernel's C, header and manifest")
    add_model_flags(p)
    p.add_argument("--target", default="c-double", choices=TARGETS,
                   help="; ".join(f"{n}: {get_backend(n).use}" for n in TARGETS) + " (default c-double)")
    p.add_argument("--prefix", default=None, help="prefix of emitted C symbols (default: model name)")
    fields = all_option_fields()
    add_flags(p, [f for f, _ in fields.values()], applies={n: ts for n, (_, ts) in fields.items()})
    p.add_argument("--out", required=True, type=folder, help="directory for the files and manifest.json")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out that holds no kernel (same-named files replaced)")
    p.add_argument("--require-bounds", action="store_true",
                   help="refuse (write nothing) a kernel with an output whose error bound is missing or at least "
                        "its largest magnitude (c-float32 and the fixed-point targets; otherwise a warning)")
    p.add_argument("--verbose", action="store_true",
                   help="print the kernel's report (a solve's pivots, where they were chosen and their proof over the "
                        "envelope) and the command's wall time by stage (import, model build, ..., write) to stderr")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run the envelope analysis on the dask.distributed cluster of this scheduler, e.g. "
                        "tcp://host:8786 (default $MBFORGE_DASK_SCHEDULER, else this machine: docs/cluster.md)")
    p.set_defaults(func=cmd_generate)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """`mbforge` and its subcommands, each registered by its stage. command="generate": that
    subcommand alone, parsed the same, without importing the other stages (firmware, HIL:
    about 0.1 s of a generate command)."""
    from .options import OneLineParser

    ap = OneLineParser(prog="mbforge", description="multibody models to real-time code")
    sub = ap.add_subparsers(dest="command", required=True)
    _register_generate(sub)
    if command == "generate":
        return ap
    from .demo import register as register_demo
    from .firmware import cli as fw_cli
    from .hdl import cli as hdl_cli
    from .hil import cli as hil_cli
    from .simulate import cli as model_cli

    for register in (fw_cli.register, hil_cli.register, model_cli.register, hdl_cli.register, register_demo):
        register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run one command; argv None: the process' own arguments, and the process ends after."""
    code = _main(argv)
    if argv is None:
        # the interpreter exits next: its last collection would scan every atom still alive
        # (about 0.1 s after a Stewart platform) and free nothing that exit does not free
        import gc

        gc.freeze()
    return code


def _main(argv: list[str] | None) -> int:
    from .ir import ExpressionError
    from .manifest import ManifestError
    from .model import ModelError
    from .outdir import OutDirError
    from .pipeline import GenerateError
    from .reference.solvers import AssemblyError, DynamicsError

    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    # SIGTERM and SIGHUP stop a command as Ctrl-C does, once (hil installs its own while it runs)
    before = _stop_on_signals() if threading.current_thread() is threading.main_thread() else {}
    try:
        from .analysis import parallel

        parallel.jobs()  # a bad $MBFORGE_JOBS (or _LOCAL_WORK) is refused up front, whether or not this run needs workers
        parallel.local_work()
        if args.command == "generate":
            parallel.use_scheduler(args.scheduler)  # a named scheduler is reached before any work
        return args.func(args) or 0
    except (CLIError, ModelError, ExpressionError, ManifestError, GenerateError, AssemblyError, DynamicsError,
            OutDirError) as e:
        print(f"mbforge {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # kernels are written all or nothing, so nothing is half-written
        signum = getattr(e, "signum", signal.SIGINT)
        how = "" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})"
        print(f"mbforge {args.command}: interrupted{how}", file=sys.stderr)
        before = {}  # the later signals stay ignored until the process ends: a second Ctrl-C
        return 128 + signum  # a few ms after the first would otherwise kill it by the signal
    finally:
        from .analysis import parallel

        parallel.close()  # the local cluster's workers end with the command
        for s, h in before.items():
            signal.signal(s, h)


class _Stopped(KeyboardInterrupt):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop_on_signals() -> dict:
    """Handlers that stop the command at the first of SIGINT, SIGTERM, SIGHUP and ignore the
    ones after it (an impatient second Ctrl-C would otherwise interrupt the clean-up and
    its one line with a traceback). A SIGINT the process was started ignoring stays ignored."""
    def stop(signum, _frame):
        for s in handled:
            signal.signal(s, signal.SIG_IGN)
        raise _Stopped(signum)
    handled = [signal.SIGTERM, signal.SIGHUP]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        handled.append(signal.SIGINT)
    return {s: signal.signal(s, stop) for s in handled}


if __name__ == "__main__":
    sys.exit(main())
