"""Compare a device's kernel with the double-precision reference, over the serial link.

    report = run(port_url, kernel_dir, reference_dir, vectors=1000, seed=0)

Steps: check the two manifests describe the same model and kernel (`model_digest`),
ask the device for HELLO and refuse a device whose digest is not the kernel manifest's;
draw `vectors` inputs uniformly within the manifest's declared ranges (plus the
manifest's motion vectors, if any); quantise them to the device's type (fixed point:
round to nearest, saturate); evaluate them on the device and evaluate the *quantised*
inputs, widened back to double, with the reference compiled on the host, so the error
measured is the kernel's, not the input rounding's.

The vectors come from mbforge.hil.vectors, the device is a device.Device
(link.LinkDevice) and the measures are mbforge.hil.compare's: error per output group
against the tolerance (--tol relative to scale, else 1e-5 float, 1e-12 double, the
manifest's per-element error_bound for int32), status codes equal to the reference's,
and with host_model the device's raw outputs equal to a host build of the same
reduced-precision C bit for bit.

Work per call: the device's overhead-corrected counter ticks. With SysTick (the
emulated board under -icount) they are turned into instructions: the CALIB request
times a loop of a known instruction count at two lengths and the slope gives ticks per
instruction (cpu_hz * 2**shift / 1e9: 5.376 on emulated_f405, 168 MHz at shift 5; 3.2 on
emulated_an385, 25 MHz at shift 7); instructions = round(ticks / slope), exact while a
tick is less than half an instruction. With DWT they are processor cycles. Calls whose count wrapped
(raw ticks 0xFFFFFFFF) are left out of the statistics and counted as counter_overflows.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbforge.hil import hostlib
from mbforge.hil.report import board_clock, board_name, progress_bar, vector_details
from mbforge.hil.compare import CompareError, GroupResult, compare, compare_groups
from mbforge.hil.compare import check_pair as _check_pair
from mbforge.hil.link import TICKS_OVERFLOW, Link, LinkDevice, LinkError, calibrate
from mbforge.hil.vectors import VectorError, draw, from_raw, to_raw
from mbforge.manifest import Manifest


class HarnessError(RuntimeError):
    """The comparison cannot be made (mismatched kernels, bad inputs, ...)."""


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
    per_vector: dict | None = None  # report.vector_details: what the HTML report plots

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
            **({"per_vector": self.per_vector} if self.per_vector is not None else {}),
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
        env, hz = board_clock({"device": self.device})
        if hz and w["unit"] in ("instructions", "cycles"):  # report.py states the rule
            lines.append(f"  at {hz / 1e6:g} MHz ({env}): min {w['min'] / hz * 1e6:.3f}, median "
                         f"{w['median'] / hz * 1e6:.3f}, max {w['max'] / hz * 1e6:.3f} us")
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
            if h.get("note"):  # c-double: a tolerance replaces bit-exactness (compare.DOUBLE_NOTE)
                lines.append(f"note: {h['note']}; worst relative difference "
                             f"{h['max_rel_difference']:.3e}: {'within' if h['within_tolerance'] else 'NOT within'}")
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)


def _load(kernel_dir) -> Manifest:
    try:
        return hostlib.load_manifest(kernel_dir, check_files=True)
    except hostlib.HostLibError as e:
        raise HarnessError(str(e)) from None


def check_pair(device_m: Manifest, ref_m: Manifest, kernel_dir, ref_dir) -> None:
    try:
        _check_pair(device_m, ref_m, kernel_dir, ref_dir)
    except CompareError as e:
        raise HarnessError(str(e)) from None


def input_vectors(m: Manifest, kernel_dir: Path, n: int, seed: int) -> np.ndarray:
    """n random vectors inside the kernel's domain, then the motion vectors (vectors.draw)."""
    try:
        return draw(m, kernel_dir, n, seed)
    except VectorError as e:
        raise HarnessError(str(e)) from None


def _stats(a: np.ndarray) -> dict:
    if a.size == 0:
        return {"min": 0, "median": 0, "max": 0}
    return {"min": int(a.min()), "median": float(np.median(a)), "max": int(a.max())}


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
    X_dev = to_raw(m, X_real, "inputs")
    X_used = from_raw(m, X_dev, "inputs")  # what the device actually computes on

    t_dev = time.monotonic()
    with Link(port, timeout=timeout, baudrate=baudrate) as link:
        info = link.hello()
        link.check_digest(m.digest, f"the manifest {kernel_dir / 'manifest.json'}")
        if (info.real, info.n_in, info.n_out) != (m.real, m.n_in, m.n_out):
            raise HarnessError(f"device reports {info.real} kernel {info.n_in}->{info.n_out}, "
                               f"manifest {m.real} {m.n_in}->{m.n_out}")
        board = LinkDevice(link, window=window)
        t_eval = time.monotonic()
        with progress_bar(len(X_dev)) as board.progress:
            dev = board.eval(X_dev)
        t_eval = time.monotonic() - t_eval
    t_dev = time.monotonic() - t_dev

    ref = reference.eval(X_used)
    c = compare(m, dev, ref=ref,
                host=device_model.eval(X_dev) if device_model is not None else None, tol=tol)
    groups, status_mismatches = c.groups, c.status_mismatches
    host = c.host.to_json() if c.host is not None else None

    batch, tpi = board.batch, board.ticks_per_unit
    overflow = batch.ticks == TICKS_OVERFLOW
    ticks = batch.work[~overflow].astype(np.int64)
    work = dev.work[~overflow] if dev.work is not None else ticks
    work_stats = _stats(work) | {"unit": board.work_unit or "none", "ticks_per_unit": tpi, "ticks": _stats(ticks),
                                 "counter_overflows": int(np.count_nonzero(overflow))}
    passed = all(g.passed for g in groups) and status_mismatches == 0 and (c.host is None or c.host.passed)
    device = {"url": port, "firmware": info.firmware, "digest": info.digest, "real": info.real,
              "counter": info.counter, "counter_hz": info.counter_hz,
              "board": getattr(info, "board", None) or getattr(info, "env", None) or board_name(info.firmware)}
    details = vector_details(m, X_used, vectors, from_raw(m, dev.outputs, "outputs"), dev.status,
                             ref.outputs, ref.status, dev.work, groups)
    return Report(m.function, device, len(X_real), groups, work_stats,
                  _stats(batch.ticks[~overflow].astype(np.int64)),
                  status_mismatches, host, passed,
                  {"total": time.monotonic() - t_start, "device": t_dev, "eval": t_eval,
                   "vectors_per_second": len(X_real) / t_eval if t_eval > 0 else None}, details)


__all__ = ["run", "Report", "GroupResult", "HarnessError", "LinkError", "input_vectors",
           "compare_groups", "calibrate", "check_pair"]
