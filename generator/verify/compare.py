"""The one comparison of a device's outputs with the double reference and a host model.

    c = compare(m, dev, ref=ref, host=host, tol=None)   # dev, ref, host: device.Evaluation

`dev` holds the device's raw outputs (the manifest's real type), `ref` the c-double
kernel's outputs on the same inputs *as the device saw them* (quantised, widened back
to double), so the error measured is the kernel's, not the input rounding's; `host` a
host build of the device's own C (bit-exact where the arithmetic is: fixed point, or
IEEE + - * / sqrt without contraction).

Error measures, per output group g (compare_groups):
  scale_g        = max |reference| over all vectors and elements of g (floor 1e-30)
  max_abs_error  = max |device - reference| over the same (NaN on either side: inf)
  max_rel_error  = max_abs_error / scale_g
Tolerance: `tol` (relative to scale) if given; else 1e-5 (float), 1e-12 (double); for
int32 the manifest's per-element error_bound (absolute) where given, else 1e-5 relative.
A float group that fails the relative test still passes when each element is within
max(1e-5 scale_g, its manifest float32 error_bound) ("relative_or_bound"): outputs that
vanish on consistent states (constraint residuals) have no scale of their own.

Also measured: status codes differing from the reference's; the worst ratio
|device - reference| / error_bound over the elements with a finite bound, over the
vectors whose device status is 0 (a saturated result is outside the bound's promise)
and whose reference is finite (bound_ratio; <= 1 means within the bounds); and
bit-exactness against the host model (raw bits, status included).

Statuses by class (status_checks): every vector's status must be one its label allows
(vectors.robustness); the classes are the labels' kinds, STATUS_CLASSES, in that order.

Bit-exact rules: outputs are not compared where both sides return status 2 (an input
outside the envelope: nothing computed, out[] left as the caller had it); a NaN equals a NaN of any sign and payload (NaN is a class: which bits a
NaN carries depends on the FPU and the C library, not on the kernel). A c-double kernel
cannot be bit-exact between the device and the host model: its sin/cos/atan2/... come
from the libm (newlib on the device, glibc on the host), which differ in the last bit.
So for double kernels bit differences are counted and reported with a note, and the host
comparison passes when the statuses are equal and every output is within
DOUBLE_HOST_TOL relative to its group's scale (the largest |host model| output of the
group, floor 1e-30); NaN against NaN passes, NaN against a number fails.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbforge.manifest import Manifest
from mbforge.reals import REFERENCE
from mbforge.verify.vectors import OFF_MANIFOLD, OUT_OF_ENVELOPE, from_raw

SCALE_FLOOR = 1e-30
MISMATCHES_LISTED = 10  # vectors named in a message list
DOUBLE_HOST_TOL = 1e-12  # double device vs host model, relative to each output group's scale
DOUBLE_NOTE = ("c-double kernel: the device's libm (newlib) and the host's (glibc) round sin/cos "
               "and other library functions differently in the last bit, so the host model "
               "cannot be bit-exact; required instead: equal statuses and every output within "
               f"{DOUBLE_HOST_TOL:g} of the host model relative to its group's scale")


class CompareError(ValueError):
    """The two kernels cannot be compared (another model, a reference that is not double)."""


def check_pair(device_m: Manifest, ref_m: Manifest, kernel_dir, ref_dir) -> None:
    """The reference is c-double and the same model and kernel as the device's."""
    if ref_m.real != REFERENCE.name:
        raise CompareError(f"reference {ref_dir} is a {ref_m.real} kernel (target {ref_m.target}); "
                           f"the reference must be c-double")
    if ref_m.model_digest != device_m.model_digest:
        raise CompareError(f"reference {ref_dir} is another model or kernel: model_digest "
                           f"{ref_m.model_digest} vs {device_m.model_digest} in {kernel_dir}")
    if (ref_m.n_in, ref_m.n_out) != (device_m.n_in, device_m.n_out):
        raise CompareError(f"reference has {ref_m.n_in} inputs/{ref_m.n_out} outputs, "
                           f"kernel {device_m.n_in}/{device_m.n_out}")


@dataclass
class GroupResult:
    name: str
    size: int
    max_abs_error: float
    max_rel_error: float
    scale: float
    tolerance: float
    tolerance_kind: str  # "relative" or "error_bound"
    passed: bool
    worst_element: str
    worst_vector: int

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "name"}


def compare_groups(m: Manifest, Yd: np.ndarray, Yr: np.ndarray, tol: float | None) -> list[GroupResult]:
    """Per output group: the device's real values Yd against the reference's Yr."""
    names = m.flat_names("outputs")
    results = []
    for g in m.outputs:
        sl = slice(g.offset, g.offset + g.size)
        err = np.abs(Yd[:, sl] - Yr[:, sl])
        err = np.where(np.isnan(err), np.inf, err)  # a NaN on either side is a failure
        scale = max(float(np.max(np.abs(Yr[:, sl]), initial=0.0)), SCALE_FLOOR)
        max_abs = float(err.max(initial=0.0))
        if err.size:
            v, e = np.unravel_index(int(np.argmax(err)), err.shape)
        else:
            v, e = 0, 0
        judged = m.real_kind.judged if tol is None and g.error_bound is not None else "relative"
        if judged == "error_bound":
            bound = np.asarray(g.error_bound, dtype=np.float64)
            passed = bool(np.all(err <= bound))
            tolerance, kind = float(bound.max(initial=0.0)), "error_bound"
        else:
            tolerance, kind = (tol if tol is not None else m.real_kind.tolerance), "relative"
            passed = max_abs / scale <= tolerance
            if not passed and judged == "relative_or_bound":
                # an output that is ~0 on consistent states (a constraint residual) has no
                # scale to be relative to: an element within the manifest's sound float32
                # bound passes (the bound is absolute, per element)
                bound = np.array([b if b is not None else 0.0 for b in g.error_bound], dtype=np.float64)
                passed = bool(np.all(err <= np.maximum(tolerance * scale, bound)))
                kind = "relative_or_bound"
        results.append(GroupResult(g.name, g.size, max_abs, max_abs / scale, scale, tolerance, kind,
                                   passed, names[g.offset + e] if g.size else g.name, int(v)))
    return results


def bound_ratio(m: Manifest, Yd: np.ndarray, status: np.ndarray, Yr: np.ndarray) -> float:
    """max |Yd - Yr| / error_bound over elements with a finite bound, vectors with device
    status 0 and a finite reference (0.0 when there are none)."""
    return float(row_bound_ratios(m, Yd, status, Yr).max(initial=0.0))


@dataclass
class BitExact:
    vectors_mismatched: int
    elements_mismatched: int
    mismatches: list[str]  # the first few, "vector k: name = device, host model value"
    # double kernels only (see the module docstring): the tolerance rule that replaces
    # bit-exactness, its worst relative difference and verdict, and why
    tolerance: float | None = None
    max_rel_difference: float | None = None
    within_tolerance: bool | None = None
    note: str | None = None

    @property
    def equal(self) -> bool:
        return self.vectors_mismatched == 0

    @property
    def passed(self) -> bool:
        """Bit-exact, or (double kernels) within the tolerance rule."""
        return self.equal if self.within_tolerance is None else self.within_tolerance

    def to_json(self) -> dict:
        d = {"vectors_mismatched": self.vectors_mismatched, "elements_mismatched": self.elements_mismatched}
        if self.within_tolerance is not None:
            d |= {"tolerance": self.tolerance, "max_rel_difference": self.max_rel_difference,
                  "within_tolerance": self.within_tolerance, "passed": self.passed, "note": self.note}
        return d


def _bits(a: np.ndarray) -> np.ndarray:
    """Comparable raw words: floats by their bit pattern, integers by value (a device may
    hand back int32 words widened to Python ints)."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        bits = np.ascontiguousarray(a).view(np.dtype(f"<u{a.dtype.itemsize}")).copy()
        bits[np.isnan(a)] = 0x7FF8 << (8 * a.dtype.itemsize - 16)  # one word for every NaN
        return bits
    return a.astype(np.int64)


def bit_exact(Yd, sd, Yh, sh, names, *, status_name: str = "status", rows=None) -> BitExact:
    """Device raw outputs and statuses against the host model's, bit for bit. `names`:
    the output elements' names for the messages; `rows`: the vector numbers to report
    (default 0..N-1)."""
    Yd, Yh = np.asarray(Yd), np.asarray(Yh)
    n = len(Yh)
    if len(Yd) != n:
        raise ValueError(f"{len(Yd)} device results for {n} host model results")
    if n == 0:
        return BitExact(0, 0, [])
    Yd, Yh = _bits(Yd).reshape(n, -1), _bits(Yh).reshape(n, -1)
    sd, sh = np.asarray(sd, dtype=np.int64), np.asarray(sh, dtype=np.int64)
    diff = Yd != Yh
    bad_status = sd != sh
    diff[(sd == 2) & (sh == 2)] = False  # status 2: nothing computed, the outputs mean nothing
    bad_rows = diff.any(axis=1) | bad_status
    rows = list(range(n)) if rows is None else list(rows)
    msgs: list[str] = []
    for r in np.flatnonzero(bad_rows):
        if len(msgs) >= MISMATCHES_LISTED:
            break
        k = rows[r]
        if bad_status[r]:
            msgs.append(f"vector {k}: {status_name} {sd[r]}, host model {sh[r]}")
        for j in np.flatnonzero(diff[r]):
            msgs.append(f"vector {k}: {names[j]} = {Yd[r, j]}, host model {Yh[r, j]}")
    return BitExact(int(np.count_nonzero(bad_rows)), int(np.count_nonzero(diff)), msgs)


def host_within_tolerance(m: Manifest, exact: BitExact, Yd, sd, Yh, sh) -> BitExact:
    """The double kernels' host rule (module docstring) added to a bit-exact count."""
    Yd, Yh = np.asarray(Yd, dtype=np.float64), np.asarray(Yh, dtype=np.float64)
    worst = 0.0
    for g in m.outputs:
        sl = slice(g.offset, g.offset + g.size)
        d, h = Yd[:, sl], Yh[:, sl]
        both_nan = np.isnan(d) & np.isnan(h)
        err = np.where(both_nan, 0.0, np.abs(d - h))
        err = np.where(np.isnan(err), np.inf, err)
        scale = max(float(np.max(np.where(np.isfinite(h), np.abs(h), 0.0), initial=0.0)), SCALE_FLOOR)
        worst = max(worst, float(err.max(initial=0.0)) / scale)
    ok = worst <= DOUBLE_HOST_TOL and bool(np.all(np.asarray(sd) == np.asarray(sh)))
    exact.tolerance, exact.max_rel_difference, exact.within_tolerance = DOUBLE_HOST_TOL, worst, ok
    exact.note = DOUBLE_NOTE
    return exact


STATUS_CLASSES = ("domain", "motion", OUT_OF_ENVELOPE, OFF_MANIFOLD)  # labels' kinds, reported in this order


def status_checks(labels, expected, status, rows, *, status_name: str = "status") -> list[dict]:
    """Per class of label (STATUS_CLASSES, in order; a label's kind is its text before
    ":"): the vectors, the statuses expected and seen, the first few vectors outside the
    expectation with their full label. labels, expected (the statuses allowed), status:
    per vector; rows: the vector numbers to report."""
    rows = list(rows)
    out = []
    for cls in STATUS_CLASSES:
        idx = [i for i, lab in enumerate(labels) if lab.split(":")[0] == cls.split(":")[0]]
        if not idx:
            continue
        seen: dict[str, int] = {}
        failures = []
        for i in idx:
            s_ = int(status[i])
            seen[str(s_)] = seen.get(str(s_), 0) + 1
            if s_ not in expected[i] and len(failures) < MISMATCHES_LISTED:  # per class
                failures.append(f"vector {int(rows[i])} ({labels[i]}): {status_name} {s_}")
        allowed = sorted({e for i in idx for e in expected[i]})
        text = " or ".join(map(str, allowed)) + (", no bound check" if cls == OFF_MANIFOLD else "")
        out.append({"label": cls, "vectors": len(idx), "expected": text, "statuses": seen,
                    "failures": failures, "passed": not failures})
    return out


@dataclass
class Comparison:
    groups: list[GroupResult]  # empty without a reference
    status_mismatches: int | None  # against the reference's statuses
    worst_bound_ratio: float | None  # see bound_ratio; None without a reference
    host: BitExact | None  # None without a host model


def compare(m: Manifest, dev, ref=None, host=None, tol: float | None = None) -> Comparison:
    """dev, host: (raw outputs, status, ...) of the device and of the host model; ref:
    (float64 outputs, status, ...) of the double reference on the inputs the device saw."""
    groups, status_mm, ratio, exact = [], None, None, None
    Yd_raw, sd = dev[0], np.asarray(dev[1])
    if ref is not None:
        Yd = from_raw(m, Yd_raw, "outputs")
        Yr = np.asarray(ref[0], dtype=np.float64)
        groups = compare_groups(m, Yd, Yr, tol)
        status_mm = int(np.count_nonzero(sd != np.asarray(ref[1])))
        ratio = bound_ratio(m, Yd, sd, Yr)
    if host is not None:
        exact = bit_exact(Yd_raw, sd, host[0], host[1], m.flat_names("outputs"))
        if not m.real_kind.host_bit_exact:
            exact = host_within_tolerance(m, exact, Yd_raw, sd, host[0], host[1])
    return Comparison(groups, status_mm, ratio, exact)


def row_bound_ratios(m: Manifest, Yd: np.ndarray, status: np.ndarray, Yr: np.ndarray) -> np.ndarray:
    """Per vector, max |Yd - Yr| / error_bound over its elements with a finite bound and a
    finite reference (0.0 when none); -inf where the device status is not 0 (bound_ratio is
    their largest)."""
    bound = np.array([b if b is not None else np.inf
                      for g in m.outputs for b in (g.error_bound or [None] * g.size)], dtype=np.float64)
    Yd, Yr = np.atleast_2d(Yd), np.atleast_2d(Yr)
    if bound.size == 0:
        return np.zeros(len(Yd))
    e = np.where(np.isfinite(Yr), np.abs(Yd - Yr), 0.0)
    fin = np.isfinite(bound)
    # an exact output (bound 0) must match exactly; rounding dust of 1e-300 aside
    ratio = np.where(fin, e / np.where(fin, np.maximum(bound, 1e-300), 1.0), 0.0).max(axis=1)
    return np.where(np.asarray(status) == 0, ratio, -np.inf)
