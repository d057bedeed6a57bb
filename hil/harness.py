"""Compare a device's kernel with the double-precision reference, over the serial link.

    report = run(port_url, kernel_dir, reference_dir, vectors=1000, seed=0)

Steps: check the two manifests describe the same model and kernel (`model_digest`),
ask the device for HELLO and refuse a device whose digest is not the kernel manifest's;
draw `vectors` inputs uniformly within the manifest's declared ranges (plus the
manifest's motion vectors, if any); quantise them to the device's type (fixed point:
round to nearest, saturate); evaluate them on the device and evaluate the *quantised*
inputs, widened back to double, with the reference compiled on the host, so the error
measured is the kernel's, not the input rounding's.

Error measures, per output group g:
  scale_g        = max |reference| over all vectors and elements of g (floor 1e-30)
  max_abs_error  = max |device - reference| over the same
  max_rel_error  = max_abs_error / scale_g
The worst element is the one with the largest |device - reference| / scale of its group.
Tolerance: --tol (relative to scale) if given; else 1e-5 (float), 1e-12 (double); for
int32 the manifest's per-element error_bound (absolute) where given, else 1e-5
relative. Status codes must equal the reference's. With host_model, the device's raw
outputs must also equal a host build of the same reduced-precision C bit for bit.

Work per call: the device's overhead-corrected counter ticks. With SysTick (the
emulated board under -icount) they are turned into instructions: the CALIB request
times a loop of a known instruction count at two lengths and the slope gives ticks per
instruction (cpu_hz * 2**shift / 1e9: 5.376 on emulated_f405, 168 MHz at shift 5; 3.2 on
emulated_an385, 25 MHz at shift 7); instructions = round(ticks / slope), exact while a
tick is less than half an instruction. With DWT they are processor cycles. Calls whose count wrapped
(raw ticks 0xFFFFFFFF) are left out of the statistics and counted as counter_overflows.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbforge.hil import hostlib
from mbforge.hil.link import Link, LinkError
from mbforge.manifest import Manifest

DEFAULT_TOL = {"float": 1e-5, "double": 1e-12, "int32": 1e-5}
SCALE_FLOOR = 1e-30
CALIB_ITERATIONS = (10_000, 110_000)
TICKS_OVERFLOW = 0xFFFFFFFF  # the device's count wrapped (24-bit SysTick): no count


class HarnessError(RuntimeError):
    """The comparison cannot be made (mismatched kernels, bad inputs, ...)."""


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


@dataclass
class Report:
    kernel: str
    device: dict
    vectors: int
    outputs: list[GroupResult]
    work_per_call: dict
    raw_ticks: dict
    status_mismatches: int
    host_model: dict | None
    passed: bool
    seconds: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "kernel": self.kernel,
            "device": self.device,
            "vectors": self.vectors,
            "outputs": {g.name: g.to_json() for g in self.outputs},
            "work_per_call": self.work_per_call,
            "raw_ticks": self.raw_ticks,
            "status_mismatches": self.status_mismatches,
            "host_model": self.host_model,
            "passed": self.passed,
            "seconds": self.seconds,
        }

    def table(self) -> str:
        lines = [f"kernel {self.kernel} on {self.device['firmware']} "
                 f"({self.device['real']}, counter {self.device['counter']}): {self.vectors} vectors"]
        head = f"{'output':<16}{'max abs err':>13}{'max rel err':>13}{'scale':>12}{'tolerance':>12}  {'worst (vector)':<24}ok"
        lines += [head, "-" * len(head)]
        for g in self.outputs:
            tol = f"{g.tolerance:.1e}" + ("*" if g.tolerance_kind == "error_bound" else "")
            lines.append(f"{g.name:<16}{g.max_abs_error:>13.3e}{g.max_rel_error:>13.3e}{g.scale:>12.3e}"
                         f"{tol:>12}  {g.worst_element + ' (' + str(g.worst_vector) + ')':<24}"
                         f"{'yes' if g.passed else 'NO'}")
        if any(g.tolerance_kind == "error_bound" for g in self.outputs):
            lines.append("* per-element absolute error bound from the manifest (largest shown)")
        w = self.work_per_call
        lines.append(f"work per call ({w['unit']}): min {w['min']}, median {w['median']}, max {w['max']}"
                     + (f"  [{w['ticks_per_unit']:.4f} ticks each]" if w.get("ticks_per_unit") else ""))
        r = self.raw_ticks
        lines.append(f"raw counter ticks per call: min {r['min']}, median {r['median']}, max {r['max']}")
        if w["counter_overflows"]:
            lines.append(f"{w['counter_overflows']} calls took longer than the counter can time")
        if self.status_mismatches:
            lines.append(f"status differs from the reference in {self.status_mismatches} vectors")
        if self.host_model is not None:
            h = self.host_model
            lines.append(f"host model bit-exact: {h['vectors_mismatched']} vectors, "
                         f"{h['elements_mismatched']} elements differ")
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)


def _load(kernel_dir) -> Manifest:
    try:
        return hostlib.load_manifest(kernel_dir)
    except hostlib.HostLibError as e:
        raise HarnessError(str(e)) from None


def check_pair(device_m: Manifest, ref_m: Manifest, kernel_dir, ref_dir) -> None:
    if ref_m.real != "double":
        raise HarnessError(f"reference {ref_dir} is a {ref_m.real} kernel (target {ref_m.target}); "
                           f"the reference must be c-double")
    if ref_m.model_digest != device_m.model_digest:
        raise HarnessError(f"reference {ref_dir} is another model or kernel: model_digest "
                           f"{ref_m.model_digest} vs {device_m.model_digest} in {kernel_dir}")
    if (ref_m.n_in, ref_m.n_out) != (device_m.n_in, device_m.n_out):
        raise HarnessError(f"reference has {ref_m.n_in} inputs/{ref_m.n_out} outputs, "
                           f"kernel {device_m.n_in}/{device_m.n_out}")


def _companion(kernel_dir, name: str, key: str, what: str) -> np.ndarray:
    """The array `key` of a JSON file beside the manifest (the domain or the motion)."""
    path = Path(kernel_dir) / name
    try:
        return np.array(json.loads(path.read_text())[key], dtype=np.float64)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HarnessError(f"{what} file {path}: {e}") from None


def input_vectors(m: Manifest, kernel_dir: Path, n: int, seed: int) -> np.ndarray:
    """n random vectors inside the kernel's domain (its boxes, when the manifest names a
    domain file, else the declared ranges), then the motion vectors if any."""
    rng = np.random.default_rng(seed)
    if m.domain:
        boxes = _companion(kernel_dir, m.domain, "boxes", "domain")
        if boxes.ndim != 3 or boxes.shape[1:] != (m.n_in, 2):
            raise HarnessError(f"domain file {Path(kernel_dir) / m.domain}: boxes of shape {boxes.shape[1:]}, "
                               f"kernel takes {m.n_in} inputs")
        pick = boxes[rng.integers(0, len(boxes), n)]
        lo, hi = pick[:, :, 0], pick[:, :, 1]
    else:
        ranges = np.array(m.input_ranges(), dtype=np.float64).reshape(-1, 2)
        lo, hi = ranges[:, 0], ranges[:, 1]
    X = lo + (hi - lo) * rng.random((n, m.n_in))
    if m.motion:
        motion = _companion(kernel_dir, m.motion, "vectors", "motion")
        if motion.size and motion.reshape(len(motion), -1).shape[1] != m.n_in:
            raise HarnessError(f"motion file {Path(kernel_dir) / m.motion}: vectors of {motion.shape[-1]} values, "
                               f"kernel takes {m.n_in}")
        X = np.vstack([X, motion.reshape(-1, m.n_in)]) if motion.size else X
    return X


def _stats(a: np.ndarray) -> dict:
    if a.size == 0:
        return {"min": 0, "median": 0, "max": 0}
    return {"min": int(a.min()), "median": float(np.median(a)), "max": int(a.max())}


def calibrate(link: Link) -> float | None:
    """SysTick ticks per instruction, from two CALIB loops (None without a counter)."""
    if link.info.counter == "none":
        return None
    (i0, t0), (i1, t1) = (link.calibrate(n) for n in CALIB_ITERATIONS)
    if i1 <= i0 or t1 <= t0:
        return None
    return (t1 - t0) / (i1 - i0)


def compare_groups(m: Manifest, Yd: np.ndarray, Yr: np.ndarray, tol: float | None) -> list[GroupResult]:
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
        if tol is None and m.real == "int32" and g.error_bound is not None:
            bound = np.asarray(g.error_bound, dtype=np.float64)
            passed = bool(np.all(err <= bound))
            tolerance, kind = float(bound.max(initial=0.0)), "error_bound"
        else:
            tolerance, kind = (tol if tol is not None else DEFAULT_TOL[m.real]), "relative"
            passed = max_abs / scale <= tolerance
        results.append(GroupResult(g.name, g.size, max_abs, max_abs / scale, scale, tolerance, kind,
                                   passed, names[g.offset + e] if g.size else g.name, int(v)))
    return results


def run(port: str, kernel_dir, reference_dir, *, vectors: int = 1000, seed: int = 0,
        tol: float | None = None, host_model: bool = False, timeout: float = 5.0,
        window: int | None = None, baudrate: int = 115200) -> Report:
    t_start = time.monotonic()
    kernel_dir, reference_dir = Path(kernel_dir), Path(reference_dir)
    m = _load(kernel_dir)
    ref_m = _load(reference_dir)
    check_pair(m, ref_m, kernel_dir, reference_dir)
    try:
        reference = hostlib.load_kernel(reference_dir)
        device_model = hostlib.load_kernel(kernel_dir) if host_model else None
    except hostlib.HostLibError as e:
        raise HarnessError(str(e)) from None

    X_real = input_vectors(m, kernel_dir, vectors, seed)
    X_dev = hostlib.to_raw(m, X_real, "inputs")
    X_used = hostlib.from_raw(m, X_dev, "inputs")  # what the device actually computes on

    t_dev = time.monotonic()
    with Link(port, timeout=timeout, baudrate=baudrate) as link:
        info = link.hello()
        link.check_digest(m.digest, f"the manifest {kernel_dir / 'manifest.json'}")
        if (info.real, info.n_in, info.n_out) != (m.real, m.n_in, m.n_out):
            raise HarnessError(f"device reports {info.real} kernel {info.n_in}->{info.n_out}, "
                               f"manifest {m.real} {m.n_in}->{m.n_out}")
        tpi = calibrate(link) if info.counter == "SysTick" else None
        t_eval = time.monotonic()
        batch = link.eval_many(X_dev, window=window)
        t_eval = time.monotonic() - t_eval
    t_dev = time.monotonic() - t_dev

    Y_ref, status_ref = reference(X_used)
    Y_dev = hostlib.from_raw(m, batch.outputs, "outputs")
    groups = compare_groups(m, Y_dev, Y_ref, tol)
    status_mismatches = int(np.count_nonzero(batch.status != status_ref))

    host = None
    if device_model is not None:
        Y_host, status_host = device_model(X_dev)
        bits = np.dtype(f"<u{Y_host.dtype.itemsize}")
        diff = batch.outputs.view(bits) != Y_host.view(bits)
        host = {"vectors_mismatched": int(np.count_nonzero(diff.any(axis=1) | (batch.status != status_host))),
                "elements_mismatched": int(np.count_nonzero(diff))}

    overflow = batch.ticks == TICKS_OVERFLOW
    ticks = batch.work[~overflow].astype(np.int64)
    if tpi:
        work = np.rint(ticks / tpi).astype(np.int64)
        unit = "instructions"
    else:
        work = ticks
        unit = {"DWT": "cycles", "SysTick": "ticks"}.get(info.counter, "none")
    work_stats = _stats(work) | {"unit": unit, "ticks_per_unit": tpi, "ticks": _stats(ticks),
                                 "counter_overflows": int(np.count_nonzero(overflow))}
    passed = all(g.passed for g in groups) and status_mismatches == 0 and \
        (host is None or host["vectors_mismatched"] == 0)
    device = {"url": port, "firmware": info.firmware, "digest": info.digest, "real": info.real,
              "counter": info.counter, "counter_hz": info.counter_hz}
    return Report(m.function, device, len(X_real), groups, work_stats,
                  _stats(batch.ticks[~overflow].astype(np.int64)),
                  status_mismatches, host, passed,
                  {"total": time.monotonic() - t_start, "device": t_dev, "eval": t_eval,
                   "vectors_per_second": len(X_real) / t_eval if t_eval > 0 else None})


__all__ = ["run", "Report", "GroupResult", "HarnessError", "LinkError", "input_vectors",
           "compare_groups", "calibrate"]
