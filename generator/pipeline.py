"""The pipeline from a kernel to a plan of files, the same steps for every target:

    kernel -> options resolved -> parameters -> lower (tape) -> schedule
           -> backend.check -> backend.analyse -> backend.render -> Plan {file name: text} + manifest

The backend renders from a typed context (backends.context.KernelContext, built here: the
kernel's names and documentation) and its typed analysis (backends.base.Analysis).
`generate` is pure: the same kernel, target and options give byte-identical files and the
same digests; `Plan.write` is the separate step that touches the disk. The target's
backend (backends.get_backend) holds everything that differs between targets; the options
are resolved (checked, defaults applied) before anything else, and the digest and the
manifest cover the resolved options, so leaving an option out and giving its default are
the same request.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

import numpy as np

from . import __version__, cache
from .analysis.boundnotes import bound_summary
from .analysis.piececache import hints_key
from .backends import Analysis, Backend, GenerateError, Options, backend_names, get_backend
from .backends.context import KernelContext
from .ir import Evaluator, ExpressionError, subs, topo
from .ir.graph import gc_paused
from .kernels import InPort, Kernel, OutPort
from .manifest import ERROR_BOUND_BASIS, MANIFEST_NAME, Group, Manifest
from .manifest import FORMAT as MANIFEST_FORMAT
from .names import is_c_symbol
from .outdir import OutDir, OutDirError, read_record

TARGETS = backend_names()
MOTION_NAME = "motion.json"
DOMAIN_NAME = "domain.json"

__all__ = ["GenerateError", "Plan", "TARGETS", "check_prefix", "generate", "kernel_digest", "resolve_options"]


@dataclass
class Plan:
    files: dict[str, str]
    manifest: Manifest
    # the backend's analyses and the schedule the files were printed from (for tools that
    # study the kernel further, as the benches do); not written
    analysis: Any = field(default=None, repr=False, compare=False)
    schedule: Any = field(default=None, repr=False, compare=False)
    # analysis.boundnotes' line on the outputs without a useful error bound (None: all useful)
    bound_warning: str | None = field(default=None, compare=False)

    def write(self, out_dir: str | Path | OutDir, force: bool = False) -> Path:
        """Write the files and manifest.json into out_dir through mbforge.outdir: all or
        nothing (the manifest moved in last, so a folder with a manifest has the files it
        describes), no write through a symlink, the files of an earlier kernel in the
        folder that this one does not write removed (only those its manifest lists), and
        a non-empty folder that holds no kernel refused unless force. GenerateError names
        the problem (out_dir a file, below a file, not writable, a name taken by a folder)."""
        try:
            out = out_dir if isinstance(out_dir, OutDir) else OutDir(out_dir)
            old = out.claim(kernel_folder_files, "a kernel folder (no manifest.json of mbforge)", force)
            texts = {**self.files, MANIFEST_NAME: self.manifest.to_json()}
            return out.write_files({n: t.encode() for n, t in texts.items()}, record=MANIFEST_NAME, old=old)
        except OutDirError as e:
            raise GenerateError(str(e)) from None


def kernel_folder_files(root: Path) -> list[str] | None:
    """The files a kernel folder's manifest lists (itself included); None when root holds
    no mbforge manifest (the names are checked by OutDir before anything is removed)."""
    d = read_record(root, MANIFEST_NAME)
    if d is None or d.get("format") != MANIFEST_FORMAT:
        return None
    lists = [d.get("sources") or [], d.get("headers") or []]
    if not all(isinstance(v, list) for v in lists):
        return None
    names = [*lists[0], *lists[1], d.get("motion"), d.get("domain")]
    return [MANIFEST_NAME, *(n for n in names if n is not None)]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def kernel_digest(k: Kernel, tape) -> str:
    """sha256 of what the kernel computes: its ports, ranges and tape (target-free)."""
    lines = [f"model {k.model} kernel {k.name}"]
    for p in k.inputs:
        lines.append(f"in {p.name} " + " ".join(f"{s.value.name}[{lo!r},{hi!r}]" for s, (lo, hi) in zip(p.symbols, p.ranges)))
    for p in k.outputs:
        lines.append(f"out {p.name} {p.shape} {p.pattern}")
    if k.domain:
        lines.append(f"domain {k.domain}")
    lines += [f"{i.op} {i.dst} {i.args}" for i in tape.instrs]
    lines.append(f"outputs {tape.outputs}")
    if tape.feedback:
        lines.append(f"feedback {tape.feedback}")
    return _sha("\n".join(lines))


def _analyse(backend: Backend, tape, boxes, model_digest: str) -> Analysis:
    """backend.analyse, kept in the disk cache (mbforge.cache) by the target and what the
    kernel computes over which boxes (model_digest holds the tape, the ports and the
    domain): the fixed-point and float32 analyses of a large kernel take most of a
    minute, and options such as the schedule or the prefix do not change them."""
    key = cache.key(backend.name, model_digest, repr(boxes), hints_key(tape.hints))
    hit = cache.load("analysis", key, ("text",))
    if hit is not None:
        try:
            return Analysis.from_text(tape, str(hit["text"]))
        except (ValueError, KeyError, TypeError, AttributeError):  # an entry of an older format
            cache.warn("analysis", key, "does not describe this kernel's analysis")
    analysis = backend.analyse(tape, boxes)
    text = analysis.text()
    if text is not None and analysis != Analysis():  # an empty analysis (c-double) costs nothing
        cache.store("analysis", key, text=np.array(text))
    return analysis


def _doc(groups, names) -> list[str]:
    out = []
    for g in groups:
        lo, hi = g.offset, g.offset + g.size - 1
        where = f"[{lo}]" if lo == hi else f"[{lo}..{hi}]"
        what = names.get(g.name, "")
        shape = "x".join(map(str, g.shape))
        sparse = f", sparse: {g.size} stored entries" if g.pattern is not None else ""
        out.append(f"{where:>12} {g.name} ({shape}{sparse}){what}")
    return out


def _out_doc(groups) -> list[str]:
    """Every output element on its own line: index, what it is, and (fixed point) its Q
    format and (reduced precision) its error bound, so the header alone says which entry
    of out[] is which."""
    out = _doc(groups, {})
    lines = []
    for g, head in zip(groups, out):
        lines.append(head)
        for k in range(g.size):
            what = f"{g.offset + k:>12}   {g.labels[k]}"
            if g.frac_bits is not None:
                f = g.frac_bits[k]
                what += f"  Q{31 - f}.{f}" if 0 <= f <= 31 else f"  frac_bits {f}"
            if g.error_bound is not None and g.error_bound[k] is not None:
                what += f"  +-{g.error_bound[k]:.3g}"
            lines.append(what)
    if any(g.error_bound is not None for g in groups):
        lines.append(f"+-: error bound {ERROR_BOUND_BASIS}")
    return lines


def _element_names(groups) -> list[str]:
    """A C identifier for every flat element: its label (a coordinate's, an actuator's or a
    constraint's name), or group_k where the label is no identifier (a matrix entry) or
    is not unique among the groups (the rows of Phi and gamma)."""
    labels = [lab for g in groups for lab in (g.labels or [None] * g.size)]
    seen = Counter(labels)
    return [lab if lab is not None and is_c_symbol(lab) and seen[lab] == 1 else f"{g.name}_{k}"
            for g in groups for k, lab in enumerate(g.labels or [None] * g.size)]


def _index_defines(macro: str, inputs, outputs) -> list[str]:
    """#defines of the header: the index of every element in in[] and out[] by name and,
    for fixed point, its fractional bits (the Q format a caller converts with)."""
    fixed = any(g.frac_bits is not None for g in inputs + outputs)
    lines = ["/* in[] and out[] indices by name" + ("; _FRAC: fractional bits of the element's Q format "
                                                 "(value = word / 2^FRAC)" if fixed else "") + " */"]
    for side, groups in (("IN", inputs), ("OUT", outputs)):
        for k, (name, f) in enumerate(_elements(groups)):
            lines.append(f"#define {macro}_{side}_{name} {k}")
            if f is not None:
                lines.append(f"#define {macro}_{side}_{name}_FRAC {f}")
    return lines


JUDGE_SAMPLES = 256  # states over the inputs' ranges where a kernel without test vectors is judged


def _magnitudes(kernel: Kernel, vectors, analysis: Analysis) -> list[float | None] | None:
    """What analysis.boundnotes judges each output's error bound against: its largest |value|
    in double at the kernel's test vectors (consistent states over the envelope or along the
    motion: the enclosure of a value behind a solve can be 10^4 times wider), else at
    JUDGE_SAMPLES states drawn over its inputs' ranges. None where the target has no bounds."""
    if analysis.out_error is None:
        return analysis.out_magnitude
    if not vectors:  # states drawn over the inputs' ranges (seeded): an enclosure behind a solve
        # is so wide that a bound 1,000 times the largest value would pass as useful
        lo, hi = np.array([r for p in kernel.inputs for r in p.ranges], dtype=float).T
        vectors = np.random.default_rng(0).uniform(lo, hi, (JUDGE_SAMPLES, len(lo)))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        y = np.abs(Evaluator(kernel.output_atoms, kernel.input_symbols)(np.array(vectors, dtype=float)))
    peak = np.where(np.isnan(y), -np.inf, y).max(axis=0)  # NaN or inf at every vector: None
    return [float(v) if math.isfinite(v) else None for v in peak]


def _parameters(kernel: Kernel, mode: str) -> Kernel:
    """Model parameters (symbols of kind param) the outputs depend on: folded in as their
    values, or appended as a runtime input port `params` with their declared ranges."""
    inputs = set(kernel.input_symbols)
    params = sorted({a for a in topo(kernel.output_atoms) if a.op == "sym" and a.value.kind == "param"
                     and a not in inputs}, key=lambda a: a.value.name)
    if not params:
        return kernel
    if mode == "fold":
        vals = {p: p.value.default for p in params}
        missing = [p.value.name for p, v in vals.items() if v is None]
        if missing:
            raise GenerateError(f"parameters without a value cannot be folded: {', '.join(missing)}")
        outs = [OutPort(p.name, p.shape, subs(p.atoms, vals), p.pattern) for p in kernel.outputs]
        return kernel.replace(outputs=outs)
    if mode == "runtime":
        port = InPort("params", params, [p.value.range or _default_range(p) for p in params])
        # lazy like the kernel's own: computed when read
        return kernel.replace(
            inputs=kernel.inputs + [port],
            domain=lambda: None if kernel.domain is None else [box + port.ranges for box in kernel.domain],
            motion=lambda: None if kernel.motion is None else
            [row + [p.value.default for p in params] for row in kernel.motion])
    raise AssertionError(mode)  # Options checks the mode


def _default_range(p) -> tuple[float, float]:
    v = p.value.default
    if v is None:
        raise GenerateError(f"parameter {p.value.name} has neither a value nor a range")
    d = abs(v) * 0.1 or 0.1
    return (v - d, v + d)


def resolve_options(target: str, options: dict | Options | None = None, *, cli: bool = False) -> Options:
    """The target's complete options (defaults applied); GenerateError names an unknown or
    inapplicable option, or a bad value with its choices (as `--flag`s when `cli`)."""
    return get_backend(target).resolve(options, cli=cli)


def generate(kernel: Kernel, target: str, prefix: str | None = None, options: dict | Options | None = None,
             stages=None, require_bounds: bool = False) -> Plan:
    """The plan of files for `kernel` on `target`. stages: called with the name of each step
    as it ends ("lower", "analysis", "render", "motion"), to time them (progress.Stages.mark).
    require_bounds: GenerateError when an output's error bound is missing or useless
    (analysis.boundnotes) instead of `Plan.bound_warning`."""
    backend = get_backend(target)
    opts = backend.resolve(options)
    with gc_paused():
        kernel = _parameters(kernel, opts.params)
        plan = _generate(kernel, backend, prefix, opts, stages or (lambda _name: None))
    if require_bounds and plan.bound_warning:
        raise GenerateError(f"{plan.manifest.function} ({target}): {plan.bound_warning} (--require-bounds)")
    return plan


# C guarantees 63 significant characters of an identifier; the prefix also names files
PREFIX_MAX = 63


def check_prefix(prefix: str, where: str = "--prefix") -> str:
    """The prefix of every emitted C symbol (and of the file names): a C identifier."""
    hint = "" if where == "--prefix" else "; name the C symbols with --prefix"
    if not is_c_symbol(prefix):
        raise GenerateError(f"{where} {prefix!r} is not a C identifier (letters, digits and _, "
                            f"not starting with a digit, not a C keyword){hint}")
    if len(prefix) > PREFIX_MAX:
        raise GenerateError(f"{where} {prefix[:20]}... has {len(prefix)} characters; at most {PREFIX_MAX}{hint}")
    return prefix


def _groups(kernel: Kernel, envelope) -> tuple[list[Group], list[Group]]:
    """The manifest's input and output groups (offsets into in[] and out[])."""
    inputs, off = [], 0
    for p in kernel.inputs:
        inputs.append(Group(p.name, p.shape, off, len(p.symbols), range=[list(r) for r in p.declared or p.ranges],
                            enclosure=None if p.declared is None else [list(r) for r in p.ranges],
                            envelope=[list(r) for r in envelope[off:off + len(p.symbols)]],
                            labels=[s.value.name for s in p.symbols]))
        off += len(p.symbols)
    outputs, off = [], 0
    for p in kernel.outputs:
        pat = [list(ij) for ij in p.pattern] if p.pattern is not None else None
        outputs.append(Group(p.name, p.shape, off, len(p.atoms), pattern=pat, labels=p.element_labels()))
        off += len(p.atoms)
    return inputs, outputs


def _kernel_context(kernel: Kernel, backend: Backend, sched, analysis: Analysis, options: Options, prefix: str,
                    digest: str, inputs: list[Group], outputs: list[Group], envelope, status: dict,
                    weak: str | None) -> KernelContext:
    """The kernel's names and documentation that every target's files print (status: the
    codes beyond 0 the kernel returns, {code: (manifest text, header text)}; weak: the line
    on outputs without a useful error bound, analysis.boundnotes)."""
    function = f"{prefix}_{kernel.name.replace('-', '_')}"
    checked = envelope if options.input_check == "on" else [(-math.inf, math.inf)] * len(envelope)
    counts = sched.tape.counts()  # the scheduled tape is the kernel's (lower.schedule)
    in_names = {p.name: " = " + ", ".join(s.value.name for s in p.symbols) for p in kernel.inputs}
    return KernelContext(
        version=__version__, model=kernel.model, kernel=kernel.name, digest=digest,
        prefix=prefix, function=function, header=f"{prefix}.h", source=f"{prefix}.c",
        guard=f"{prefix.upper()}_H", macro=function.upper(),
        n_in=sum(g.size for g in inputs), n_out=sum(g.size for g in outputs),
        description=kernel.description or kernel.name,
        in_doc=_doc(inputs, in_names), out_doc=_out_doc(outputs),
        defines=_index_defines(function.upper(), inputs, outputs),
        status=[("0", "on success")] + [(code, text) for code, (_, text) in status.items()],
        ops_line=f"{counts['total']} operations ({', '.join(f'{k} {v}' for k, v in counts.items() if k != 'total')}), "
                 f"peak {sched.peak_live} live values",
        notes=backend.notes(analysis) + ([f"Error bounds: {weak}."] if weak else []),
        envelope=checked,
        in_elems=_elements(inputs), out_elems=_elements(outputs),
    )


def _elements(groups) -> list[tuple[str, int | None]]:
    """(name, fractional bits or None) of every flat element of the groups."""
    frac = [f for g in groups for f in (g.frac_bits or [None] * g.size)]
    return list(zip(_element_names(groups), frac))


def _analysed(kernel: Kernel, backend: Backend, tape, model_digest: str) -> Analysis:
    """_analyse over the kernel's domain; a refusal led by the kernel's analysis_note (what
    it means physically), which replaces the analysis' suggestion of an input to narrow."""
    try:
        return _analyse(backend, tape, kernel.domain or [kernel.input_ranges], model_digest)
    except ExpressionError as e:
        if kernel.analysis_note is None:
            raise
        found = str(e).split("; narrow the envelope")[0]
        raise ExpressionError(f"{kernel.analysis_note}; the analysis: {found}") from None


def _generate(kernel: Kernel, backend: Backend, prefix: str | None, options: Options, mark) -> Plan:
    prefix = check_prefix(prefix) if prefix is not None else check_prefix(kernel.model, "the model name")
    tape = kernel.tape()
    sched = backend.schedule(tape, options)
    mark("lower")

    model_digest = kernel_digest(kernel, tape)
    resolved = options.as_dict()
    digest = _sha(json.dumps({"model": model_digest, "target": backend.name, "prefix": prefix,
                              "options": resolved, "version": __version__}, sort_keys=True))
    envelope = kernel.input_envelope()
    inputs, outputs = _groups(kernel, envelope)
    backend.check(sched)
    analysis = _analysed(kernel, backend, tape, model_digest)
    for attr, groups, values in (("frac_bits", inputs, analysis.in_frac_bits),
                                 ("frac_bits", outputs, analysis.out_frac_bits),
                                 ("error_bound", outputs, analysis.out_error)):
        if values is not None:
            for g in groups:
                setattr(g, attr, values[g.offset:g.offset + g.size])
    mark("analysis")
    vectors = kernel.motion  # a lazy kernel computes them here
    mark("motion")
    weak = bound_summary([lab for g in outputs for lab in g.labels], analysis.out_error,
                         _magnitudes(kernel, vectors, analysis))

    # with input_check off the kernel compares nothing and never returns 2
    status = {c: t for c, t in backend.status.items() if c != "2" or options.input_check == "on"}
    ctx = _kernel_context(kernel, backend, sched, analysis, options, prefix, digest, inputs, outputs, envelope,
                          status, weak)
    function = ctx.function
    out = backend.render(sched, analysis, ctx, options)
    mark("render")
    files = out.files
    motion = domain = None
    if vectors:
        files[MOTION_NAME] = json.dumps({"kernel": function, "vectors": vectors}) + "\n"
        motion = MOTION_NAME
    if kernel.domain:
        files[DOMAIN_NAME] = json.dumps({"kernel": function, "boxes": kernel.domain}) + "\n"
        domain = DOMAIN_NAME
    manifest = Manifest(
        model=kernel.model, prefix=prefix, kernel=kernel.name, function=function,
        target=backend.name, real=backend.real.name, digest=digest, model_digest=model_digest,
        sources=out.sources, headers=out.headers, inputs=inputs, outputs=outputs,
        status_codes={"0": "ok", **{code: text for code, (text, _) in status.items()}},
        ops=tape.counts(), peak_live=sched.peak_live, options=resolved, motion=motion, domain=domain,
        envelope=kernel.envelope, step=kernel.step,
        error_bound_basis=ERROR_BOUND_BASIS if analysis.out_error is not None else None,
    ).with_file_hashes(files)
    manifest.check()
    return Plan(files, manifest, analysis, sched, weak)
