"""The shipped examples by name, and models by name or by file for every command that takes
a MODEL argument.

`EXAMPLES` maps each example's name to its module; `load(name, **options)` builds one.
`load_model(spec, motion=None)` returns a Model from a shipped example's name, from a
Python file that defines `build()` or from a URDF file (model.urdf.from_urdf, `--set`
passing its options). Every failure to get a Model (unknown name, missing or
broken file, no build(), build() failing, exiting (sys.exit) or not returning a Model, a
motion the example does not offer) raises ModelFileError: one line naming the file or example and what is wrong, which
the CLI prints as is. Errors the model itself raises while it is built (ModelError,
ExpressionError) pass through unchanged: they name the model and the part.

This module sits with the examples, below every command: the CLI, `simulate`, `demo` and
`hdl` import it; it imports nothing of theirs.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

from ..ir import ExpressionError
from ..model.model import Model, ModelError


class ModelFileError(ModelError):
    """No Model could be had from what was named (an example name or a .py file)."""


EXAMPLES = {
    "fourbar": "mbforge.examples.fourbar",
    "slidercrank": "mbforge.examples.slidercrank",
    "pendulum_block": "mbforge.examples.pendulum_block",
    "slidercrank_disc": "mbforge.examples.slidercrank_disc",
    "stewart": "mbforge.examples.stewart",
    "stewart_relative": "mbforge.examples.stewart_relative",
    "sample_arm": "mbforge.examples.sample_arm",
    "spatial_chain": "mbforge.examples.spatial_chain",
    "bricard": "mbforge.examples.bricard",
    "andrews": "mbforge.examples.andrews",
    "governor": "mbforge.examples.governor",
    "pendulum": "mbforge.examples.pendulum",
    "nfourbar": "mbforge.examples.nfourbar",
    "chain": "mbforge.examples.chain",
    "delta": "mbforge.examples.delta",
}


def module(name: str):
    try:
        mod = EXAMPLES[name]
    except KeyError:
        raise KeyError(f"no example called {name!r}; known: {', '.join(sorted(EXAMPLES))}") from None
    return importlib.import_module(mod)


def motions(name: str) -> tuple[str, ...]:
    """The prescribed motions an example offers (empty if it has one or none)."""
    return tuple(getattr(module(name), "MOTIONS", ()))


def load(name: str, **options) -> Model:
    """The Model of a shipped example (options go to its build(), e.g. motion="yaw")."""
    mod = module(name)
    params = inspect.signature(mod.build).parameters
    bad = [k for k in options if k not in params]
    if bad:
        raise TypeError(f"example {name!r} takes no option {', '.join(bad)}; its options: "
                        f"{', '.join(params) or 'none'}")
    return mod.build(**options)


def default_motion(name: str) -> str | None:
    """The motion an example's build() takes when none is given (None if it takes none)."""
    p = inspect.signature(module(name).build).parameters.get("motion")
    return p.default if p is not None else None


def parse_options(pairs) -> dict:
    """`--set key=value` pairs as build() options: values read as Python literals (numbers,
    True/False/None, strings in quotes, tuples), anything else as a plain string. Options
    build() declares bool are made True/False when the model is loaded (_check_options)."""
    out: dict = {}
    for pair in pairs or ():
        key, eq, text = pair.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise ModelFileError(f"--set {pair!r}: expected KEY=VALUE with KEY a Python name")
        try:
            out[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            out[key] = text
    return out


# how --set may spell a yes/no option (after parse_options: True/1 or the text "true")
_BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False}


def _is_bool(p: inspect.Parameter) -> bool:
    """A yes/no option: annotated bool (also as the string of postponed annotations) or
    defaulting to True/False."""
    return p.annotation in (bool, "bool") or isinstance(p.default, bool)


def _check_options(build, options: dict, what: str) -> None:
    """Refuse options build() does not take; turn the values of its yes/no options into
    True/False in place (true/false/1/0, any case): a text such as "false" would otherwise
    reach build() as a non-empty, truthy string."""
    params = inspect.signature(build).parameters
    for k, v in options.items():
        if k in params and _is_bool(params[k]) and not isinstance(v, bool):
            word = str(v).strip().lower() if isinstance(v, (str, int)) else None
            if word not in _BOOL_WORDS:
                raise ModelFileError(f"{what}: option {k} is yes or no: --set {k}=true|false|1|0, got {v!r}")
            options[k] = _BOOL_WORDS[word]
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    known = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    bad = [k for k in options if k not in known]
    if bad:
        raise ModelFileError(f"{what} takes no option {', '.join(bad)} (--set); its options: "
                             f"{', '.join(known) or 'none'}")


def load_model(spec: str, motion: str | None = None, options: dict | None = None) -> Model:
    """The Model of a shipped example (with `motion`, for examples that offer several) or of
    a Python file defining build(); `options` go to build() as keyword arguments (`--set`)."""
    options = dict(options or {})
    if spec in EXAMPLES:
        _check_options(module(spec).build, options, f"example {spec!r}")
        if motion is not None:
            offered = motions(spec)
            if not offered:
                raise ModelFileError(f"example {spec!r} has no motions to choose from (drop --motion)")
            if motion not in offered:
                raise ModelFileError(f"example {spec!r} has no motion {motion!r}; its motions: {', '.join(offered)}")
            if "motion" in options and options["motion"] != motion:
                raise ModelFileError(f"example {spec!r}: --motion {motion} and --set motion={options['motion']} "
                                     "disagree; give one")
            options["motion"] = motion
        return _call_build(lambda: load(spec, **options), f"example {spec!r}", Path(module(spec).__file__))
    path = Path(spec)
    if path.suffix not in (".py", ".urdf"):
        raise ModelFileError(f"no example called {spec!r} and not a .py or .urdf file; examples: "
                             f"{', '.join(sorted(EXAMPLES))}")
    if motion is not None:
        raise ModelFileError(f"model file {spec}: --motion applies to shipped examples only")
    if not path.is_file():
        raise ModelFileError(f"model file {spec} does not exist")
    if path.suffix == ".urdf":
        return _from_urdf(path, spec, options)
    return _from_file(path, spec, options)


def _from_urdf(path: Path, spec: str, options: dict) -> Model:
    """A URDF robot (model.urdf.from_urdf); `options` are from_urdf's keyword options."""
    from ..model.urdf import from_urdf

    _check_options(from_urdf, options, f"URDF file {spec}: from_urdf()")
    return _call_build(lambda: from_urdf(path, **options), f"URDF file {spec}", path)


def _from_file(path: Path, spec: str, options: dict) -> Model:
    mod_spec = importlib.util.spec_from_file_location(f"mbforge_user_{path.stem}", path)
    mod = importlib.util.module_from_spec(mod_spec)
    # the file's folder is importable while it loads and builds, so a model can import a
    # module next to it (its parameters, a shared body library)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        return _build_from(mod, mod_spec, path, spec, options)
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass


def _build_from(mod, mod_spec, path: Path, spec: str, options: dict) -> Model:
    try:
        mod_spec.loader.exec_module(mod)
    except (ModelError, ExpressionError):
        raise
    except SyntaxError as e:
        where = f"at line {e.lineno}" if e.lineno is not None else "in the file"
        raise ModelFileError(f"model file {spec}: syntax error {where}: {e.msg}") from None
    except SystemExit as e:  # sys.exit() while it loads: an error, not the command's end
        raise ModelFileError(f"model file {spec} called sys.exit({e.code!r}) while it loaded{_where(e, path)}; "
                             "a model file defines build() and returns") from None
    except Exception as e:  # the user's module failed on import: say where, not a traceback
        raise ModelFileError(f"model file {spec} failed to load: {type(e).__name__}: {e}{_where(e, path)}") from None
    build = getattr(mod, "build", None)
    if not callable(build):
        raise ModelFileError(f"model file {spec} defines no build() returning a Model")
    _check_options(build, options, f"model file {spec}: build()")
    return _call_build(lambda: build(**options), f"model file {spec}", path)


def _call_build(build, what: str, path: Path) -> Model:
    """build()'s Model; ModelFileError (one line: what, the error, its line in `path`) for
    anything else it raises or returns, sys.exit() included. The model's own errors
    (ModelError, ExpressionError) pass: they name the model and the part."""
    try:
        model = build()
    except (ModelError, ExpressionError):
        raise
    except SystemExit as e:
        raise ModelFileError(f"{what}: build() called sys.exit({e.code!r}){_where(e, path)}; "
                             "build() must return a Model") from None
    except Exception as e:
        raise ModelFileError(f"{what}: build() failed: {type(e).__name__}: {e}{_where(e, path)}") from None
    if not isinstance(model, Model):
        raise ModelFileError(f"{what}: build() returned {type(model).__name__}, not a Model")
    return model


def _where(e: BaseException, path: Path) -> str:
    """' (line N)' of the innermost frame of the user's file in e's traceback, if any."""
    line = None
    tb = e.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == path.resolve():
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (line {line})" if line is not None else ""
