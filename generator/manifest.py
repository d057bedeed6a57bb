"""The kernel manifest: the one description of a generated kernel that the firmware
generator, the HIL harness and the HDL benches read (none of them imports the model).

A kernel is `int <function>(const <real> *in, <real> *out)` over flat arrays in the
order given here. Each input/output group has a name, a shape and an offset into the flat
array. Matrix outputs may be sparse: `pattern` lists the (row, col) of every stored entry
in storage order; entries not listed are structural zeros. For fixed-point kernels
(`real_kind.fixed`: "int32") every element has a number of fractional bits: value = int / 2**f.

Invariants: offsets are contiguous and in order; `size` == prod(shape) for dense groups
and == len(pattern) for sparse ones; n_in/n_out are the sums of the sizes.

Integrity: `files` maps every file the manifest describes (sources, headers, the motion
and domain files) to the sha256 of its bytes, so a consumer can refuse a kernel edited
after generation (`check_files`: the firmware generator and `mbforge hil` do). A manifest
written before `files` existed (None) is still read; it cannot be checked.

`load_dir` is the one way a consumer (firmware project, host library, harness, HDL
benches) opens a kernel folder. The real kinds (`real`) are the records of mbforge.reals.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .names import is_c_symbol, is_file_name
from .outdir import OutDirError, interrupted, read_path
from .reals import REAL_KINDS, REALS, Real

FORMAT = "mbforge-kernel/1"
MANIFEST_NAME = "manifest.json"
# what the error bounds hold against (Manifest.error_bound_basis, the header's +- column)
ERROR_BOUND_BASIS = ("against double at the unrounded input: the rounding of each input to the kernel's "
                     "type is included; proved against exact arithmetic, over the whole domain")


class ManifestError(ValueError):
    """A manifest that is missing, malformed or inconsistent."""


@dataclass
class Group:
    name: str
    shape: list[int]
    offset: int
    size: int
    # inputs: declared range per element [[lo, hi], ...]; outputs: None
    range: list[list[float]] | None = None
    # inputs of a kernel over an operating envelope: the verified cover's enclosure of each
    # element (the hull of its boxes; range analysis and the check use it); None otherwise
    enclosure: list[list[float]] | None = None
    # inputs: the range the kernel checks each element against ([[lo, hi], ...]; status 2
    # outside it, see status_codes); None: an older manifest or an output
    envelope: list[list[float]] | None = None
    # sparse matrix outputs: [[row, col], ...] in storage order; None means dense
    pattern: list[list[int]] | None = None
    # fixed point only: fractional bits per element
    frac_bits: list[int] | None = None
    # error bound per element (reduced-precision targets; None: no finite bound, e.g.
    # downstream of a divisor whose range reaches 0), see ERROR_BOUND_BASIS
    error_bound: list[float | None] | None = None
    # what each element is (an input's symbol; an output's coordinate, actuator, constraint,
    # "row/col" of a matrix entry)
    labels: list[str] | None = None


@dataclass
class Manifest:
    model: str
    prefix: str
    kernel: str
    function: str
    target: str
    real: str
    digest: str  # sha256 of (model, kernel, target, options)
    model_digest: str  # sha256 of (model, kernel): equal for every target of one kernel
    sources: list[str]
    headers: list[str]
    inputs: list[Group]
    outputs: list[Group]
    status_codes: dict[str, str] = field(default_factory=lambda: {"0": "ok"})
    ops: dict[str, int] = field(default_factory=dict)
    peak_live: int | None = None
    options: dict = field(default_factory=dict)
    # optional file (relative to the manifest) with input vectors along a driven motion
    motion: str | None = None
    # optional file with the kernel's input domain, {"boxes": [[[lo, hi], ...], ...]}, when
    # it is a union of boxes inside the declared ranges (formats and bounds hold there)
    domain: str | None = None
    # the operating envelope the domain covers (Envelope.to_json, its source: "model" or
    # the --envelope file, and the cover's box count), when the model declares one
    envelope: dict | None = None
    # sha256 (hex) of every described file, by name (described_files); None: an older
    # manifest without hashes
    files: dict[str, str] | None = None
    # reduced-precision targets: what the outputs' error_bound holds against (ERROR_BOUND_BASIS)
    error_bound_basis: str | None = None
    # step kernels (`--kernel step`): {"integrator", "dt", "iterations", "state": the input
    # groups that form the state, in order (the outputs repeat them: out[0:n_state] is the
    # next in[0:n_state]), "n_state", "time": t among the state, "inputs_held": groups held
    # over a step (u)}; ali3p adds "alpha" (the penalty) and "converged"; None otherwise
    step: dict | None = None
    format: str = FORMAT

    @property
    def n_in(self) -> int:
        return sum(g.size for g in self.inputs)

    @property
    def n_out(self) -> int:
        return sum(g.size for g in self.outputs)

    @property
    def real_kind(self) -> Real:
        """The record of the kernel's real kind (KeyError for a name check() refuses)."""
        return REALS[self.real]

    def step_offset(self) -> list[float]:
        """What the step kernel's state holds less than the physical state, per element:
        the positions are carried as q - q_offset (kernels.step), the rest as they are.
        physical = state + step_offset(); zeros for a record without q_offset."""
        st = self.step or {}
        off = [float(v) for v in st.get("q_offset") or []]
        return off + [0.0] * (int(st.get("n_state", 0)) - len(off))

    def step_start(self, t0: float, state) -> list[float]:
        """A step kernel's first input vector (real values) from the physical state (the
        state's layout without t): t0 appended when t is part of the state, the positions
        less q_offset, the held inputs u at 0. ValueError when the sizes disagree."""
        x = [float(v) for v in state] + ([float(t0)] if self.step["time"] else [])
        if len(x) != self.step["n_state"]:
            raise ValueError(f"step kernel state of {self.step['n_state']} reals, initial state of {len(x)}")
        return [a - b for a, b in zip(x, self.step_offset())] + [0.0] * (self.n_in - len(x))

    def described_files(self) -> list[str]:
        """The kernel folder's files this manifest describes (relative names)."""
        return [*self.sources, *self.headers, *(f for f in (self.motion, self.domain) if f)]

    def with_file_hashes(self, files: dict[str, str | bytes]) -> "Manifest":
        """A copy whose `files` holds the sha256 of every described file, taken from
        `files` {name: text or bytes} (the text is hashed as the UTF-8 bytes written)."""
        missing = [n for n in self.described_files() if n not in files]
        if missing:
            raise ManifestError(f"no contents for described file(s) {', '.join(missing)}")
        return dataclasses.replace(self, files={n: sha256_hex(files[n]) for n in self.described_files()})

    def check_files(self, kernel_dir: str | Path) -> None:
        """Every described file still has the hash the manifest records; ManifestError
        names the first one that changed or is missing. No-op for an older manifest."""
        if self.files is None:
            return
        for name in self.described_files():
            try:
                path = read_path(kernel_dir, name, f"manifest of {kernel_dir}")
            except OutDirError as e:
                raise ManifestError(str(e)) from None
            try:
                data = path.read_bytes()
            except OSError as e:
                raise ManifestError(f"{path}: cannot read a file the manifest describes ({e.strerror})") from None
            if sha256_hex(data) != self.files[name]:
                left = interrupted(kernel_dir)
                if left:
                    raise ManifestError(f"{path} is not the file the manifest describes: an earlier write into "
                                        f"{kernel_dir} was interrupted ({left} is still there); generate the "
                                        "kernel again")
                raise ManifestError(f"{path} changed since it was generated (its sha256 is not the "
                                    f"manifest's): regenerate the kernel instead of editing it")

    def to_json(self) -> str:
        d = asdict(self)
        d["n_in"] = self.n_in
        d["n_out"] = self.n_out
        return json.dumps(d, indent=1, sort_keys=True) + "\n"

    def check(self) -> None:
        if self.format != FORMAT:
            raise ManifestError(f"manifest format {self.format!r}, expected {FORMAT!r}")
        if self.real not in REAL_KINDS:
            raise ManifestError(f"manifest real type {self.real!r} is not one of {REAL_KINDS}")
        self._check_names()
        for kind, groups in (("input", self.inputs), ("output", self.outputs)):
            offset = 0
            for g in groups:
                if g.offset != offset:
                    raise ManifestError(f"{kind} {g.name!r} starts at {g.offset}, expected {offset}")
                expect = len(g.pattern) if g.pattern is not None else _prod(g.shape)
                if g.size != expect:
                    raise ManifestError(f"{kind} {g.name!r} has size {g.size}, expected {expect}")
                for attr in ("range", "enclosure", "envelope", "frac_bits", "error_bound", "labels"):
                    v = getattr(g, attr)
                    if v is not None and len(v) != g.size:
                        raise ManifestError(f"{kind} {g.name!r}: {attr} has {len(v)} entries, size is {g.size}")
                offset += g.size
        if self.files is not None:
            if not isinstance(self.files, dict) or sorted(self.files) != sorted(self.described_files()):
                raise ManifestError(f"manifest files map lists {sorted(self.files) if isinstance(self.files, dict) else self.files!r}, "
                                    f"expected the described files {sorted(self.described_files())}")
            bad = [n for n, h in self.files.items() if not _is_sha256(h)]
            if bad:
                raise ManifestError(f"manifest files map: {bad[0]!r} has no sha256 (64 lowercase hex digits)")
        if self.step is not None:
            self._check_step()
        if self.real_kind.fixed:
            for g in self.inputs + self.outputs:
                if g.frac_bits is None:
                    raise ManifestError(f"fixed-point kernel: {g.name!r} has no frac_bits")

    def _check_step(self) -> None:
        """A step kernel's state: its first input groups, repeated by the outputs in order
        (the firmware's SIM loop copies out[0:n_state] back into in[0:n_state])."""
        st = self.step
        names = st.get("state") if isinstance(st, dict) else None
        if not isinstance(names, list) or not names or not isinstance(st.get("n_state"), int):
            raise ManifestError("manifest step record: expected a dict with a list `state` and an int `n_state`")
        head = [(g.name, g.size) for g in self.inputs[:len(names)]]
        outs = [(g.name, g.size) for g in self.outputs]
        if [n for n, _ in head] != names or outs != head or sum(k for _, k in head) != st["n_state"]:
            raise ManifestError(f"manifest step record: state {names} ({st['n_state']} reals) is not the first "
                                f"input groups {head} repeated by the outputs {outs}")
        off = st.get("q_offset")
        if off is not None and not (isinstance(off, list) and len(off) == head[0][1]
                                    and all(isinstance(v, (int, float)) for v in off)):
            raise ManifestError(f"manifest step record: q_offset must be a number per element of {head[0][0]!r}")
        if not (isinstance(st.get("dt"), (int, float)) and st["dt"] > 0):
            raise ManifestError(f"manifest step record: dt {st.get('dt')!r} is not a positive number")

    def _check_names(self) -> None:
        """What the firmware generator and the host library print into C and file paths:
        a crafted manifest must not put code into a build nor a path outside a folder."""
        for what in ("function", "prefix"):
            if not is_c_symbol(getattr(self, what)):
                raise ManifestError(f"manifest {what} {getattr(self, what)!r} is not a C identifier")
        for what in ("digest", "model_digest"):
            if not _is_sha256(getattr(self, what)):
                raise ManifestError(f"manifest {what} {getattr(self, what)!r} is not a sha256 (64 lowercase hex digits)")
        for what in ("sources", "headers"):
            if not isinstance(getattr(self, what), list):
                raise ManifestError(f"manifest {what} {getattr(self, what)!r} is not a list of file names")
        bad = [n for n in self.described_files() if not is_file_name(n)]
        if bad:
            raise ManifestError(f"manifest names the file {bad[0]!r}: expected a file of the kernel folder "
                                "(letters, digits, _ . -, no path)")

    @classmethod
    def from_dict(cls, d: dict) -> "Manifest":
        d = dict(d)
        d.pop("n_in", None)
        d.pop("n_out", None)
        try:
            d["inputs"] = [Group(**g) for g in d["inputs"]]
            d["outputs"] = [Group(**g) for g in d["outputs"]]
            m = cls(**d)
        except (KeyError, TypeError) as e:
            raise ManifestError(f"malformed manifest: {e}") from None
        m.check()
        return m

    @classmethod
    def load(cls, path: str | Path) -> "Manifest":
        path = Path(path)
        if path.is_dir():
            path = path / MANIFEST_NAME
        try:
            d = json.loads(path.read_text())
        except FileNotFoundError:
            raise ManifestError(f"no manifest at {path}") from None
        except json.JSONDecodeError as e:
            raise ManifestError(f"{path}: not JSON ({e})") from None
        return cls.from_dict(d)

    def input_ranges(self) -> list[list[float]]:
        """Declared [lo, hi] for every flat input element."""
        out: list[list[float]] = []
        for g in self.inputs:
            out.extend(g.range if g.range is not None else [[-1.0, 1.0]] * g.size)
        return out

    def flat_names(self, kind: str = "outputs") -> list[str]:
        """A readable name for every flat element, e.g. 'Phi_q[2,3]', led by its label where
        the group has labels ('u_motor1 (u[0])'): what the reports and messages show."""
        names: list[str] = []
        for g in getattr(self, kind):
            if g.labels is not None:
                where = [f"{g.name}[{i},{j}]" for i, j in g.pattern] if g.pattern is not None else \
                    [f"{g.name}[{k}]" for k in range(g.size)]
                names += [w if lab == w else f"{lab} ({w})" for lab, w in zip(g.labels, where)]
            elif g.pattern is not None:
                names += [f"{g.name}[{i},{j}]" for i, j in g.pattern]
            elif len(g.shape) == 1:
                names += [f"{g.name}[{i}]" for i in range(g.size)]
            elif len(g.shape) == 2:
                names += [f"{g.name}[{i},{j}]" for i in range(g.shape[0]) for j in range(g.shape[1])]
            else:
                names += [f"{g.name}[{k}]" for k in range(g.size)]
        return names


def load_dir(kernel_dir: str | Path) -> Manifest:
    """The manifest of a generated kernel folder; ManifestError names the folder when it
    is not one (no manifest.json) or its manifest is malformed."""
    kernel_dir = Path(kernel_dir)
    if not (kernel_dir / MANIFEST_NAME).is_file():
        raise ManifestError(f"no {MANIFEST_NAME} in {kernel_dir}: is it a generated kernel directory?")
    try:
        return Manifest.load(kernel_dir)
    except ManifestError as e:
        raise ManifestError(f"{kernel_dir}: {e}") from None


def sha256_hex(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _is_sha256(h) -> bool:
    return isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
