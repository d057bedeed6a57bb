"""Compare a device's kernel with the double-precision reference, over the serial link.

    report = run(port_url, kernel_dir, reference_dir, vectors=1000, seed=0)

Steps: check the two manifests describe the same model and kernel (`model_digest`),
ask the device for HELLO and refuse a device whose digest is not the kernel manifest's;
draw `vectors` inputs uniformly within the kernel's domain (plus the manifest's motion
vectors, if any), then the labelled robustness set (vectors.robustness: out of envelope,
off-manifold); convert them to the device's type (rounded to nearest; a value the format
cannot hold is refused, never clipped); evaluate them on the device and evaluate the
*quantised* inputs, widened back to double, with the reference compiled on the host, so
the error measured is the kernel's, not the input rounding's (vectors.for_reference: an
input whose envelope is narrower than one unit of the device's format gets the
envelope's value, which the double reference accepts).

Statuses: every vector's status must be one its label allows (compare.status_checks): 0 inside
the domain, 2 out of the envelope, 0 or 1 off-manifold (no error bound there, so those
vectors, like the out-of-envelope ones, are left out of the error measures and of the
comparison with the reference's statuses; the host model is compared on all of them).

The vectors come from mbforge.verify.vectors, the device is a
mbforge.verify.device.Device (link.LinkDevice) and the measures are mbforge.verify.compare's: error per output group
against the tolerance (--tol relative to scale, else 1e-5 float, 1e-12 double, the
manifest's per-element error_bound for int32), status codes equal to the reference's,
and with host_model the device's raw outputs equal to a host build of the same
reduced-precision C bit for bit.

Work per call: the device's overhead-corrected counter ticks, over the domain's vectors (not the
robustness set's, which return at once or leave the bound's promise). With SysTick (the
emulated board under -icount) they are turned into instructions: the CALIB request
times a loop of a known instruction count at two lengths and the slope gives ticks per
instruction (cpu_hz * 2**shift / 1e9: 5.376 on emulated_f405, 168 MHz at shift 5; 3.2 on
emulated_an385, 25 MHz at shift 7); instructions = round(ticks / slope), exact while a
tick is less than half an instruction. With DWT they are processor cycles. Calls whose count wrapped
(raw ticks 0xFFFFFFFF) are left out of the statistics and counted as counter_overflows.

Persistence: every answer goes to the run database (mbforge.hil.rundb) as its frame
arrives, and the report is always made from the database (report_from_db), so a
resumed run, a run made in one go and `load_run` give the same report. The
`link` key of the report holds the link's events (retries, timeouts, stalls, bad
frames, CRC errors, error replies, lost replies, duplicates, resets, reconnects, batch
cuts) summed over the run's sessions, the most vectors per frame, the frames in flight
and the link time per vector.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbforge.hil.link import TICKS_OVERFLOW, Link, LinkDevice, LinkError, calibrate
from mbforge.hil.report import board_clock, board_name, progress_bar, vector_details
from mbforge.hil.rundb import RunDB, RunDBError, add_stats
from mbforge.manifest import Manifest
from mbforge.verify import hostlib
from mbforge.verify.compare import CompareError, GroupResult, compare, compare_groups, status_checks
from mbforge.verify.compare import check_pair as _check_pair
from mbforge.verify.device import Evaluation
from mbforge.verify.vectors import VectorError, distinct, draw, for_reference, from_raw, robustness, to_raw


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
    link: dict = field(default_factory=dict)  # LinkStats summed over sessions, batch, timing
    run: dict = field(default_factory=dict)  # the run database: path, state
    vectors_missing: int = 0  # never answered (an interrupted run's report)
    # per label (domain, motion, the robustness set's): vectors, expected and seen statuses
    statuses: list[dict] = field(default_factory=list)
    statuses_notes: list[str] = field(default_factory=list)  # robustness vectors left out, why
    robustness_vectors: int = 0  # evaluated after the `vectors` (domain, motion) ones
    # distinct ones among the `vectors` (on a kernel with an operating envelope the random
    # ones are drawn with replacement from its motion file's states: vectors.draw)
    distinct: int | None = None

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
            "link": self.link,
            "run": self.run,
            "vectors_missing": self.vectors_missing,
            "statuses": self.statuses,
            "statuses_notes": self.statuses_notes,
            "robustness_vectors": self.robustness_vectors,
            "distinct": self.distinct,
            **({"per_vector": self.per_vector} if self.per_vector is not None else {}),
        }

    def table(self) -> str:
        lines = [f"kernel {self.kernel} on {self.device['firmware']} "
                 f"({self.device['real']}, counter {self.device['counter']}): {self.vectors} vectors"
                 + (f" ({self.distinct} distinct)" if self.distinct is not None and self.distinct < self.vectors else "")
                 + (f" (+ {self.robustness_vectors} robustness vectors)" if self.robustness_vectors else "")]
        head = f"{'output':<16}{'max abs err':>13}{'max rel err':>13}{'scale':>12}{'tolerance':>12}  {'worst (vector)':<24}ok"
        lines += [head, "-" * len(head)]
        for g in self.outputs:
            tol = f"{g.tolerance:.1e}" + {"error_bound": "*", "relative_or_bound": "+"}.get(g.tolerance_kind, "")
            lines.append(f"{g.name:<16}{g.max_abs_error:>13.3e}{g.max_rel_error:>13.3e}{g.scale:>12.3e}"
                         f"{tol:>12}  {g.worst_element + ' (' + str(g.worst_vector) + ')':<24}"
                         f"{'yes' if g.passed else 'NO'}")
        if any(g.tolerance_kind == "error_bound" for g in self.outputs):
            lines.append("* per-element absolute error bound from the manifest (largest shown)")
        if any(g.tolerance_kind == "relative_or_bound" for g in self.outputs):
            lines.append("+ relative to the group's scale, or within each element's float32 error bound "
                         "from the manifest (outputs near 0 on consistent states)")
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
        for c in self.statuses:
            seen = ", ".join(f"{k}: {v}" for k, v in sorted(c["statuses"].items()))
            lines.append(f"status, {c['label']}: {c['vectors']} vectors, expected {c['expected']}, "
                         f"got {seen or '-'}{'' if c['passed'] else '  NO'}")
            lines += [f"  {f}" for f in c["failures"]]
        lines += [f"  ({t})" for t in self.statuses_notes]
        if self.host_model is not None:
            h = self.host_model
            lines.append(f"host model bit-exact: {h['vectors_mismatched']} vectors, "
                         f"{h['elements_mismatched']} elements differ")
            if h.get("note"):  # c-double: a tolerance replaces bit-exactness (compare.DOUBLE_NOTE)
                lines.append(f"note: {h['note']}; worst relative difference "
                             f"{h['max_rel_difference']:.3e}: {'within' if h['within_tolerance'] else 'NOT within'}")
        k = self.link
        if k:
            events = [f"{k.get(e, 0)} {e.replace('_', ' ')}" for e in
                      ("retries", "timeouts", "bad_frames", "error_replies", "lost_replies", "duplicates",
                       "resets", "reconnects", "batch_cuts") if k.get(e)]
            spv = k.get("seconds_per_vector")
            lines.append(f"link: up to {k.get('batch', 1)} vectors per frame, "
                         + (f"{spv * 1e3:.2f} ms per vector, " if spv else "")
                         + (", ".join(events) if events else "no faults"))
        if self.vectors_missing:
            lines.append(f"{self.vectors_missing} of {self.vectors + self.robustness_vectors} vectors not answered")
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


@dataclass
class _Setup:
    m: Manifest
    ref_m: Manifest
    reference: object
    device_model: object | None
    X_real: np.ndarray
    X_dev: np.ndarray
    X_used: np.ndarray
    n_nominal: int  # the first rows: inside the domain (draw); the rest: the robustness set
    labels: list[str]  # per row
    expected: list[tuple[int, ...]]  # per row, the statuses allowed
    notes: list[str]  # robustness vectors left out, why


def _setup(kernel_dir: Path, reference_dir: Path, vectors: int, seed: int, host_model: bool) -> _Setup:
    m = _load(kernel_dir)
    ref_m = _load(reference_dir)
    check_pair(m, ref_m, kernel_dir, reference_dir)
    try:
        reference = hostlib.load_kernel(reference_dir)
        device_model = hostlib.load_kernel(kernel_dir) if host_model else None
    except hostlib.HostLibError as e:
        raise HarnessError(str(e)) from None
    X_nom = input_vectors(m, kernel_dir, vectors, seed)
    try:
        rob = robustness(m, kernel_dir)
        X_real = np.vstack([X_nom, rob.X])
        X_dev = to_raw(m, X_real, "inputs")
    except VectorError as e:
        raise HarnessError(str(e)) from None
    X_used = from_raw(m, X_dev, "inputs")  # what the device actually computes on
    labels = ["domain"] * vectors + ["motion"] * (len(X_nom) - vectors) + rob.labels
    expected = [(0,)] * len(X_nom) + rob.expected
    return _Setup(m, ref_m, reference, device_model, X_real, X_dev, X_used, len(X_nom), labels, expected,
                  rob.notes)


def _options(port, kernel_dir, reference_dir, vectors, seed, tol, host_model) -> dict:
    return {"port": port, "kernel": str(Path(kernel_dir).resolve()),
            "reference": str(Path(reference_dir).resolve()), "vectors": vectors, "seed": seed,
            "tol": tol, "host_model": host_model}


def run(port: str, kernel_dir=None, reference_dir=None, *, vectors: int = 1000, seed: int = 0,
        tol: float | None = None, host_model: bool = False, timeout: float = 5.0,
        window: int | None = None, baudrate: int = 115200, batch: int | None = None,
        run_db: str | Path | None = None, resume: str | Path | None = None,
        on_progress=None) -> Report:
    """Evaluate the vectors on the device at `port` and compare. Each answer is stored in
    the run database `run_db` (a new file; None: kept in memory) as it arrives; with
    `resume` (an existing run database) the run's own options are used and only the
    vectors it lacks are evaluated. On an exception the database keeps what arrived and
    is marked "interrupted"; a new run that got no answer leaves no database."""
    t_start = time.monotonic()
    if resume is not None:
        try:
            db = RunDB.open(resume)
        except RunDBError as e:
            raise HarnessError(str(e)) from None
        o = db.get("options")
        kernel_dir, reference_dir = Path(o["kernel"]), Path(o["reference"])
        vectors, seed, tol, host_model = o["vectors"], o["seed"], o["tol"], o["host_model"]
    else:
        if vectors < 0:
            raise HarnessError(f"--vectors must be >= 0, got {vectors}")
        kernel_dir, reference_dir = Path(kernel_dir), Path(reference_dir)
        db = None
    try:
        S = _setup(kernel_dir, reference_dir, vectors, seed, host_model)
        m = S.m
        if db is None:
            try:
                db = RunDB.create(run_db if run_db is not None else ":memory:",
                                  _options(port, kernel_dir, reference_dir, vectors, seed, tol, host_model))
            except RunDBError as e:
                raise HarnessError(str(e)) from None
            db.set(digest=m.digest, reference_digest=S.ref_m.digest, model_digest=m.model_digest,
                   n=len(S.X_real))
        elif db.get("digest") != m.digest or db.get("n") != len(S.X_real):
            raise HarnessError(f"{db.path}: the kernel in {kernel_dir} changed since the run began "
                               f"(digest {m.digest}, the run's {db.get('digest')}): start a new run")
        with progress_bar(len(S.X_real)) as bar:  # drawn on a terminal only
            _evaluate(db, S, port, timeout=timeout, window=window, baudrate=baudrate, batch=batch,
                      on_progress=on_progress or bar)
        db.set(state="complete")
        report = report_from_db(db, S, tol=tol)
        report.seconds["total"] = time.monotonic() - t_start
        return report
    except BaseException:
        if db is not None:
            try:
                if resume is None and db.count() == 0:
                    db.discard()  # nothing to resume: the same command may simply run again
                    db = None
                else:
                    db.set(state="interrupted")
            except Exception:  # the database itself may be what failed
                pass
        raise
    finally:
        if db is not None:
            db.close()


def _evaluate(db: RunDB, S: _Setup, port: str, *, timeout, window, baudrate, batch, on_progress) -> None:
    """Evaluate the rows the run database lacks, storing each frame's rows as they arrive."""
    m = S.m
    n = len(S.X_dev)
    stored = db.load(n, S.X_dev.dtype, S.X_dev.dtype, m.n_in, m.n_out)
    done = stored["done"]
    if done.any() and not np.array_equal(stored["inputs"][done].view(np.uint8),
                                         S.X_dev[done].view(np.uint8)):
        raise HarnessError(f"{db.path}: the stored inputs differ from those drawn again from the run's "
                           f"options: refusing to resume")
    todo = np.flatnonzero(~done)
    t_dev = time.monotonic()
    t_eval = 0.0
    stats = None
    if len(todo):
        link = Link(port, timeout=timeout, baudrate=baudrate)
        try:
            info = link.hello()
            link.check_digest(m.digest, f"the manifest {Path(db.get('options')['kernel']) / 'manifest.json'}")
            if (info.real, info.n_in, info.n_out) != (m.real, m.n_in, m.n_out):
                raise HarnessError(f"device reports {info.real} kernel {info.n_in}->{info.n_out}, "
                                   f"manifest {m.real} {m.n_in}->{m.n_out}")
            X = S.X_dev[todo]

            def keep_rows(rows, res):  # rows of X: stored under the run's own numbers
                idx = todo[list(rows)]
                db.put(idx, rows, X, res.outputs, res.status, res.work, res.ticks, res.attempts)
                if on_progress:
                    on_progress(int(done.sum()) + int(idx.size), n)
                done[idx] = True

            board = LinkDevice(link, window=window, batch=batch, on_rows=keep_rows)
            if db.get("device") is None:
                db.set(device={"url": port, "firmware": info.firmware, "digest": info.digest,
                               "real": info.real, "counter": info.counter, "counter_hz": info.counter_hz},
                       work_unit=board.work_unit, ticks_per_unit=board.ticks_per_unit)
            t0 = time.monotonic()
            try:
                board.link.eval_many(X, window=window, batch=batch, on_rows=keep_rows)
            finally:
                t_eval = time.monotonic() - t0
                stats = link.stats.to_json() | {"batch": getattr(link, "last_batch", batch),
                                                 "window": getattr(link, "last_window", window),
                                                 "baud": baudrate}
        finally:
            link.close()
            if stats is not None:
                t = db.get("timing", {})
                db.set(link=add_stats(db.get("link", {}), {k: v for k, v in stats.items()
                                                           if k not in ("batch", "window", "baud")}),
                       link_setup={k: stats[k] for k in ("batch", "window", "baud")},
                       sessions=db.get("sessions", 0) + 1,
                       timing={"eval": t.get("eval", 0.0) + t_eval,
                               "device": t.get("device", 0.0) + time.monotonic() - t_dev,
                               "evaluated": t.get("evaluated", 0) + int(done.sum()) - int(n - len(todo))})


def report_from_db(db: RunDB, S: _Setup | None = None, tol=None) -> Report:
    """The report of the rows stored in `db` (all of them in a complete run)."""
    o = db.get("options")
    if S is None:
        S = _setup(Path(o["kernel"]), Path(o["reference"]), o["vectors"], o["seed"], o["host_model"])
        tol = o["tol"]
    m = S.m
    n = len(S.X_dev)
    st = db.load(n, S.X_dev.dtype, S.X_dev.dtype, m.n_in, m.n_out)
    done = st["done"]
    rows = np.flatnonzero(done)
    device = db.get("device") or {"url": o["port"], "firmware": "?", "digest": m.digest, "real": m.real,
                                  "counter": "none", "counter_hz": 0}
    tpi, unit = db.get("ticks_per_unit"), db.get("work_unit")
    overflow = st["ticks"][rows] == TICKS_OVERFLOW
    work_all = st["work"][rows].astype(np.int64)
    if tpi:
        work_all = np.rint(work_all / tpi).astype(np.int64)
    work_all[overflow] = -1
    # errors and statuses against the reference over the domain's vectors; the robustness
    # set is judged by its expected statuses alone; the host model over every vector
    nom = rows < S.n_nominal
    dev_all = Evaluation(st["outputs"][rows], st["status"][rows], work_all if unit else None)
    dev = Evaluation(dev_all.outputs[nom], dev_all.status[nom], None if dev_all.work is None else dev_all.work[nom])
    ref = S.reference.eval(for_reference(m, Path(o["kernel"]), S.X_used[rows[nom]]))
    c = compare(m, dev, ref=ref, tol=tol)
    if S.device_model is not None:
        c.host = compare(m, dev_all, host=S.device_model.eval(S.X_dev[rows])).host
    groups, status_mismatches = c.groups, c.status_mismatches
    host = c.host.to_json() if c.host is not None else None
    statuses = status_checks([S.labels[r] for r in rows], [S.expected[r] for r in rows], dev_all.status, rows)
    timed = ~overflow & nom  # work per call over the domain's vectors (status 2 returns at once)
    ticks = st["work"][rows][timed].astype(np.int64)
    work = work_all[timed] if unit else ticks
    work_stats = _stats(work) | {"unit": unit or "none", "ticks_per_unit": tpi, "ticks": _stats(ticks),
                                 "counter_overflows": int(np.count_nonzero(overflow))}
    missing = n - len(rows)
    passed = missing == 0 and all(g.passed for g in groups) and status_mismatches == 0 and \
        (c.host is None or c.host.passed) and all(k["passed"] for k in statuses)
    timing = db.get("timing", {})
    link = dict(db.get("link", {}))
    link.update(db.get("link_setup", {}))
    link["sessions"] = db.get("sessions", 0)
    evaluated = timing.get("evaluated", 0)
    link["seconds_per_vector"] = timing["eval"] / evaluated if evaluated else None
    link["attempts_max"] = int(st["attempts"][rows].max()) if len(rows) else 0
    link["vectors_resent"] = int(np.count_nonzero(st["attempts"][rows] > 1))
    device = dict(device)
    device.setdefault("board", board_name(device.get("firmware")))
    details = vector_details(m, S.X_used[rows[nom]], o["vectors"], from_raw(m, dev.outputs, "outputs"), dev.status,
                             ref.outputs, ref.status, dev.work, groups)
    r = Report(m.function, device, S.n_nominal, groups, work_stats,
               _stats(st["ticks"][rows][timed].astype(np.int64)),
               status_mismatches, host, passed,
               {"device": timing.get("device"), "eval": timing.get("eval"),
                "vectors_per_second": evaluated / timing["eval"] if timing.get("eval") else None}, details)
    r.link, r.run, r.vectors_missing = link, {"path": db.path, "state": db.get("state")}, missing
    r.statuses, r.statuses_notes, r.robustness_vectors = statuses, list(S.notes), n - S.n_nominal
    r.distinct = distinct(S.X_dev[:S.n_nominal])
    return r


__all__ = ["run", "load_run", "Report", "GroupResult", "HarnessError", "LinkError", "input_vectors",
           "compare_groups", "calibrate", "check_pair"]


def load_run(path) -> dict:
    """The report (Report.to_json()) of a stored run, made again from the database and the
    reference kernel folder it names; the run may be incomplete (then `vectors_missing`
    says how many were never answered and `passed` is False)."""
    db = RunDB.open(path)
    try:
        return report_from_db(db).to_json()
    finally:
        db.close()
