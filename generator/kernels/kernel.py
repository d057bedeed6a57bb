"""Kernel, InPort, OutPort: what a device computes, as named input and output ports over
atoms; KernelInfo: what a builder found out on the way, for reports and checks.

A builder gets `domain`, `motion` and `envelope` from the domain stage (mbforge.domain) as
one Domain value and builds the kernel with it (with_domain: a new Kernel).

Invariants (checked on construction): every input is a symbol, no symbol is an input
twice, every domain box has one range per flat input. Everything after the kernels stage
(lower, analysis, backends, firmware, harness) reads the ports, `motion` and `domain`;
nothing downstream reads `info`, so two kernels that differ only there generate the
same files.

`motion` and `domain` may be given as a zero-argument callable instead of a list: the
kernel calls it once, on first access, and keeps the result (checked then like a list
given on construction), so work that only verification or range analysis needs is not
paid by a caller that never reads them. `Kernel.replace` keeps them unevaluated (and
shared: the copy does not compute them a second time).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..ir import Atom, ExpressionError, Sparse


@dataclass
class KernelInfo:
    """What a builder knows about the kernel it built, beyond its ports.

    solves:         the factorizations of its linear solves by name ({"Phi_q": LUFactor},
                    {"KKT": ...}, {"G": ...}); each keeps its matrix, pivots and samples
    report:         their report (pivots, fill, op counts; the reduced kernel adds its
                    choice and the weighted costs)
    derived_ranges: input symbols whose declared range the builder derived (actuator
                    inputs without one: the force envelope along the motion)
    multipliers:    names of the entries of the multipliers output (lambda or mu), if any
    method:         the formulation chosen among several ("projected" or "full" for the
                    reduced inverse dynamics; "" where there is one)
    enclosures:     range-analysis hints of its solves (analysis.linear.LUEnclosure), bound
                    to the lowered tape by the pipeline
    """

    solves: dict = field(default_factory=dict)
    report: str = ""
    derived_ranges: list[str] = field(default_factory=list)
    multipliers: list[str] = field(default_factory=list)
    method: str = ""
    enclosures: list = field(default_factory=list)

    def divisor_ranges(self) -> list[tuple[Atom, float, float]]:
        """(divisor, min, max) of every division of the solves over their samples (see
        the factors' divisor_ranges): computed on demand, nothing in the pipeline needs it."""
        return [d for F in self.solves.values() for d in F.divisor_ranges()]


@dataclass
class InPort:
    name: str
    symbols: list[Atom]
    # what the kernel's analysis takes for each symbol: the declared range, or the
    # enclosure a verified cover of the envelope gives (Domain.ranges, Kernel.with_domain)
    ranges: list[tuple[float, float]]
    # the declared range of each symbol where `ranges` holds a cover's enclosure instead
    declared: list[tuple[float, float]] | None = None

    @property
    def shape(self) -> list[int]:
        return [len(self.symbols)]


@dataclass
class OutPort:
    name: str
    shape: list[int]
    atoms: list[Atom]
    pattern: list[tuple[int, int]] | None = None  # sparse matrices: stored entries
    # what each element is (a coordinate, a constraint, "row/col" of a matrix entry), for
    # headers and reports; None: name[k] / name[i,j]
    labels: list[str] | None = None

    @classmethod
    def vector(cls, name: str, atoms: list[Atom], labels: list[str] | None = None) -> "OutPort":
        return cls(name, [len(atoms)], list(atoms), labels=None if labels is None else list(labels))

    @classmethod
    def sparse(cls, name: str, m: Sparse, rows: list[str] | None = None, cols: list[str] | None = None) -> "OutPort":
        labels = None
        if rows is not None and cols is not None:
            labels = [f"{rows[i]}/{cols[j]}" for i, j in m.pattern]
        return cls(name, list(m.shape), m.values(), m.pattern, labels)

    def element_labels(self) -> list[str]:
        if self.labels is not None:
            return list(self.labels)
        if self.pattern is not None:
            return [f"{self.name}[{i},{j}]" for i, j in self.pattern]
        return [f"{self.name}[{k}]" for k in range(len(self.atoms))]

    def __post_init__(self):
        if self.labels is not None and len(self.labels) != len(self.atoms):
            raise ExpressionError(f"output {self.name}: {len(self.labels)} labels for {len(self.atoms)} elements")


@dataclass
class Kernel:
    model: str
    name: str
    inputs: list[InPort]
    outputs: list[OutPort]
    description: str = ""
    # input vectors along a driven motion, for verification
    motion: list[list[float]] | None = None
    # where the kernel is meant to run, when that is much smaller than the box of the
    # declared ranges: a union of boxes (each [(lo, hi)] per flat input). Range analysis
    # (fixed-point formats, error bounds, pivots) and test vectors use it; None = the box.
    domain: list[list[tuple[float, float]]] | None = None
    info: KernelInfo = field(default_factory=KernelInfo)
    # the operating envelope `domain` covers (Envelope.to_json + source and box count)
    envelope: dict | None = None
    # step kernels: the integrator, dt, iterations and state layout (Manifest.step)
    step: dict | None = None
    # what a refused range analysis means physically (pipeline: put before its message); no bytes change
    analysis_note: str | None = None

    def tape(self):
        """The kernel lowered to its tape (what every target prints), with the range-analysis
        hints of its solves bound (info.enclosures)."""
        from ..analysis.linear import bind_hints
        from ..lower import lower
        keep = [a for e in self.info.enclosures for a in e.keep()]
        t = lower(self.output_atoms, self.input_symbols, keep)
        bind_hints(t, self.info.enclosures)
        if self.step:
            t.feedback = tuple((k, k) for k in range(int(self.step["n_state"])))
            if self.info.enclosures:  # the unconstrained steps (kernels.step._explicit): their pivots' floors
                _periodic_hints(t)
        return t

    def __post_init__(self):
        seen: set[Atom] = set()
        for p in self.inputs:
            for s in p.symbols:
                if not s.is_symbol:
                    raise ExpressionError(f"kernel {self.name}: input {p.name} holds {s}, not a symbol")
                if s in seen:
                    raise ExpressionError(f"kernel {self.name}: symbol {s} appears twice among the inputs")
                seen.add(s)
        if not isinstance(self.__dict__["_domain"], _Lazy):
            self._check_domain(self.domain)

    def _check_domain(self, domain) -> None:
        if domain is not None:
            n = sum(len(p.symbols) for p in self.inputs)
            for k, box in enumerate(domain):
                if len(box) != n:
                    raise ExpressionError(f"kernel {self.name}: domain box {k} has {len(box)} ranges for {n} inputs")

    def without_unused_inputs(self) -> "Kernel":
        """The kernel without the input ports no output depends on (t of a time-independent
        model): a controller need not pass them, and the device never checks them against a
        driven motion's range. A port some output reaches is kept whole (the layout of q is
        the model's); motion and domain lose the dropped columns (lazily)."""
        reach = 0
        for a in self.output_atoms:
            reach |= a.mask
        keep, cols, off = [], [], 0
        for p in self.inputs:
            n = len(p.symbols)
            if any(s.mask & reach for s in p.symbols):
                keep.append(p)
                cols += range(off, off + n)
            off += n
        if len(keep) == len(self.inputs):
            return self
        motion, domain = self.__dict__["_motion"], self.__dict__["_domain"]

        def pick(rows):
            return None if rows is None else [[r[c] for c in cols] for r in rows]

        return self.replace(inputs=keep, motion=lambda: pick(motion.get() if isinstance(motion, _Lazy) else motion),
                            domain=lambda: pick(domain.get() if isinstance(domain, _Lazy) else domain))

    def with_domain(self, domain) -> "Kernel":
        """A copy of the kernel serving `domain` (mbforge.domain.Domain): its boxes, vectors
        and envelope record, and its ports' ranges the domain's where it gives them (the
        declared ones kept in InPort.declared)."""
        inputs = self.inputs
        if domain.ranges is not None:
            inputs, off = [], 0
            for p in self.inputs:
                n = len(p.symbols)
                inputs.append(InPort(p.name, p.symbols, list(domain.ranges[off:off + n]), p.declared or list(p.ranges)))
                off += n
        return self.replace(inputs=inputs, domain=domain.boxes, motion=domain.motion, envelope=domain.envelope)

    def replace(self, **changes) -> "Kernel":
        """dataclasses.replace that leaves a lazy motion or domain unevaluated."""
        kept = {f: self.__dict__["_" + f] for f in _LAZY_FIELDS if f not in changes}
        return dataclasses.replace(self, **kept, **changes)

    @property
    def input_ranges(self) -> list[tuple[float, float]]:
        """The declared range of every flat input."""
        return [r for p in self.inputs for r in p.ranges]

    def input_envelope(self) -> list[tuple[float, float]]:
        """The range each flat input is checked against on the device (status 2 outside):
        the hull of the domain's boxes (min lo, max hi per input), the declared range when
        domain is None. The generated check, the manifest's `envelope` and the host's
        out-of-envelope vectors all read it here."""
        if not self.domain:
            return [(float(lo), float(hi)) for lo, hi in self.input_ranges]
        return [(float(min(b[i][0] for b in self.domain)), float(max(b[i][1] for b in self.domain)))
                for i in range(len(self.domain[0]))]

    @property
    def input_symbols(self) -> list[Atom]:
        return [s for p in self.inputs for s in p.symbols]

    @property
    def output_atoms(self) -> list[Atom]:
        return [a for p in self.outputs for a in p.atoms]


class _Lazy:
    """A zero-argument callable evaluated once; copies of a kernel share it."""

    __slots__ = ("fn", "value", "done")

    def __init__(self, fn):
        self.fn, self.value, self.done = fn, None, False

    def get(self):
        if not self.done:
            self.value, self.done, self.fn = self.fn(), True, None
        return self.value


_LAZY_FIELDS = ("motion", "domain")


def _lazy_field(name: str) -> property:
    key = "_" + name

    def get(self):
        v = self.__dict__[key]
        if isinstance(v, _Lazy):
            first = not v.done
            v = v.get()
            if first and name == "domain":
                self._check_domain(v)
        return v

    def set(self, v):
        self.__dict__[key] = _Lazy(v) if callable(v) and not isinstance(v, _Lazy) else v

    return property(get, set, doc=f"Kernel.{name}: a list or None (a callable given for it is evaluated on first access)")


# after @dataclass: its __init__ assigns through these properties (defaults stay None)
for _name in _LAZY_FIELDS:
    setattr(Kernel, _name, _lazy_field(_name))


MAX_ANGLES = 2  # periodic hints for at most this many angles: chain n = 3 (3) took over 400 s


def _periodic_hints(t) -> None:
    """A step kernel's joint angles analysed over one period (analysis.periodic), its
    solves' hints kept inside; nothing when it has no such angle."""
    from ..analysis.periodic import PeriodicHints, periodic_angles
    angles, free = periodic_angles(t)
    if 0 < len(angles) <= MAX_ANGLES:
        t.hints = PeriodicHints(t, t.hints, angles, free)
