"""The pipeline from a kernel to a plan of files:

    kernel -> lower (tape) -> schedule -> render(target) -> Plan {file name: text}

`generate` is pure: the same kernel, target and options give byte-identical files and the
same digests; `Plan.write` is the separate step that touches the disk.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import json
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .ir import subs, topo
from .lower import lower
from .ir.graph import gc_paused
from .kernels import InPort, Kernel, OutPort
from .manifest import MANIFEST_NAME, Group, Manifest
from .analysis.fixedpoint import bound_over_boxes
from .analysis.floaterror import float32_bounds
from .analysis.ranges import analyse_domain
from .backends.c import DIALECTS, render_c
from .backends.fixed.c import render_fixed
from .backends.hls import render_hls
from .backends.rtl.verilog import render_rtl
from .lower.schedule import schedule
from .targets import TARGETS as TARGET_INFO

TARGETS = tuple(TARGET_INFO)
REAL = {name: t.real for name, t in TARGET_INFO.items()}
FIXED_TARGETS = tuple(name for name, t in TARGET_INFO.items() if t.fixed)  # one plan, three renderers
MOTION_NAME = "motion.json"
DOMAIN_NAME = "domain.json"


class GenerateError(ValueError):
    """Options that cannot produce a kernel (names the option)."""


@dataclass
class Plan:
    files: dict[str, str]
    manifest: Manifest

    def write(self, out_dir: str | Path) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (out / name).write_text(text)
        (out / MANIFEST_NAME).write_text(self.manifest.to_json())
        return out


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
    return _sha("\n".join(lines))


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


PARAM_MODES = ("fold", "runtime")
SCHEDULES = ("pressure", "fast")


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
        return dataclasses.replace(kernel, outputs=outs)
    if mode == "runtime":
        port = InPort("params", params, [p.value.range or _default_range(p) for p in params])
        domain = None if kernel.domain is None else [box + port.ranges for box in kernel.domain]
        return dataclasses.replace(kernel, inputs=kernel.inputs + [port], domain=domain,
                                   motion=None if kernel.motion is None else
                                   [row + [p.value.default for p in params] for row in kernel.motion])
    raise GenerateError(f"option params={mode!r}: must be one of {', '.join(PARAM_MODES)}")


def _default_range(p) -> tuple[float, float]:
    v = p.value.default
    if v is None:
        raise GenerateError(f"parameter {p.value.name} has neither a value nor a range")
    d = abs(v) * 0.1 or 0.1
    return (v - d, v + d)


def generate(kernel: Kernel, target: str, prefix: str | None = None, options: dict | None = None) -> Plan:
    with gc_paused():
        kernel = _parameters(kernel, (options or {}).get("params", "fold"))
        return _generate(kernel, target, prefix, options)


def _generate(kernel: Kernel, target: str, prefix: str | None, options: dict | None) -> Plan:
    if target not in TARGETS:
        raise GenerateError(f"unknown target {target!r}; known: {', '.join(TARGETS)}")
    options = dict(options or {})
    prefix = prefix or kernel.model
    function = f"{prefix}_{kernel.name.replace('-', '_')}"
    tape = lower(kernel.output_atoms, kernel.input_symbols)
    mode = options.get("schedule", "pressure")
    if mode not in SCHEDULES:
        raise GenerateError(f"option schedule={mode!r}: must be one of {', '.join(SCHEDULES)}")
    # "pressure": list scheduling for few live values (about 5% faster code, on the host and
    # the M4F alike); "fast": the lowering's depth-first order, generated in a quarter less time
    sched = schedule(tape, pressure=mode == "pressure")

    model_digest = kernel_digest(kernel, tape)
    digest = _sha(json.dumps({"model": model_digest, "target": target, "prefix": prefix,
                              "options": options, "version": __version__}, sort_keys=True))
    inputs, off = [], 0
    for p in kernel.inputs:
        inputs.append(Group(p.name, p.shape, off, len(p.symbols), range=[list(r) for r in p.ranges]))
        off += len(p.symbols)
    outputs, off = [], 0
    for p in kernel.outputs:
        pat = [list(ij) for ij in p.pattern] if p.pattern is not None else None
        outputs.append(Group(p.name, p.shape, off, len(p.atoms), pattern=pat))
        off += len(p.atoms)

    real = REAL[target]
    source, header = f"{prefix}.c", f"{prefix}.h"
    counts = tape.counts()
    in_names = {p.name: " = " + ", ".join(s.value.name for s in p.symbols) for p in kernel.inputs}
    ctx = dict(
        version=__version__, model=kernel.model, kernel=kernel.name, digest=digest,
        prefix=prefix, function=function, header=header, source=source,
        guard=f"{prefix.upper()}_H", macro=function.upper(),
        n_in=off and sum(g.size for g in inputs), n_out=sum(g.size for g in outputs),
        description=kernel.description or kernel.name,
        in_doc=_doc(inputs, in_names), out_doc=_doc(outputs, {}),
        status=[("0", "on success")] + ([("1", "if a value saturated (an input outside its declared range)")]
                                          if real == "int32" else []),
        ops_line=f"{counts['total']} operations ({', '.join(f'{k} {v}' for k, v in counts.items() if k != 'total')}), "
                 f"peak {sched.peak_live} live values",
        notes=["Compile with -ffp-contract=off -fno-math-errno so that every machine rounds alike."]
        if real == "float" else [],
    )
    status_codes = {"0": "ok"}
    boxes = kernel.domain or [kernel.input_ranges]
    sources, headers = [source], [header]
    if target in FIXED_TARGETS:
        per_box: list = []
        fx = bound_over_boxes(tape, analyse_domain(tape, boxes, per_box=per_box), per_box)
        for g in inputs:
            g.frac_bits = fx.in_bits[g.offset:g.offset + g.size]
        for g in outputs:
            g.frac_bits = fx.out_bits[g.offset:g.offset + g.size]
            g.error_bound = fx.out_error[g.offset:g.offset + g.size]
        ctx["notes"] = ["value = int32 / 2**frac_bits; formats and error bounds are in manifest.json"]
        if target == "c-fixed":
            files = render_fixed(sched, fx, ctx)
        elif target == "hls-c":
            files = render_hls(sched, fx, ctx)
        else:
            try:
                files, sources, headers = render_rtl(fx, sched, ctx, options)
            except ValueError as e:
                raise GenerateError(f"--target verilog: {e}") from None
        status_codes["1"] = "saturated: an input outside its declared range"
    else:
        files = render_c(sched, DIALECTS[target], ctx)
        if real == "float":
            # outputs downstream of a divisor whose range reaches 0 get no finite bound.
            # The hull of the domain first (one analysis); box by box only if that fails
            hull = [(min(b[i][0] for b in boxes), max(b[i][1] for b in boxes)) for i in range(len(boxes[0]))]
            bounds = float32_bounds(tape, analyse_domain(tape, [hull], strict=False))
            if len(boxes) > 1 and not all(math.isfinite(b) for b in bounds):
                bounds = float32_bounds(tape, analyse_domain(tape, boxes, strict=False))
            bounds = [b if math.isfinite(b) else None for b in bounds]
            for g in outputs:
                g.error_bound = bounds[g.offset:g.offset + g.size]
    motion = domain = None
    if kernel.motion:
        files[MOTION_NAME] = json.dumps({"kernel": function, "vectors": kernel.motion}) + "\n"
        motion = MOTION_NAME
    if kernel.domain:
        files[DOMAIN_NAME] = json.dumps({"kernel": function, "boxes": kernel.domain}) + "\n"
        domain = DOMAIN_NAME
    manifest = Manifest(
        model=kernel.model, prefix=prefix, kernel=kernel.name, function=function,
        target=target, real=real, digest=digest, model_digest=model_digest,
        sources=sources, headers=headers, inputs=inputs, outputs=outputs,
        status_codes=status_codes, ops=counts, peak_live=sched.peak_live, options=options,
        motion=motion, domain=domain,
    ).with_file_hashes(files)
    manifest.check()
    return Plan(files, manifest)
