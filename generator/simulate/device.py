"""`mbforge simulate MODEL --device ENV --target T --dt DT --t-end T --out DIR`: the model's
step kernel run over a horizon on a board (emulated here, or `--port` for a real one),
checked against the host.

    model -> step kernel (TARGET, and c-double) -> firmware -> QEMU / board
          -> SIM requests over the link (mbforge.hil.simulate) -> CSV, report.json, HTML

DIR/<model>.csv has the columns of the host `mbforge simulate` (simulate/columns.columns) at the
device's samples (every `--every` seconds): its states, with the outputs, accelerations,
energies and checks computed from them in double on the host. report.json holds the
real-time factor and work per step (hil.simulate.timing), and the device's divergence from
three references at every sample: the host reference (scipy at rtol 1e-9, projected at each
sample), the same step kernel in c-double on the host, and the device's own kernel compiled
on the host (the device's bits: bit-exact for float32 kernels, the host and the firmware
both compile without contraction and the step uses only correctly rounded operations and
mbforge's own sin/cos). The kernels and the firmware stay in DIR (kernel-*/, firmware/).

Everything the command line can refuse is refused before any file is written: a horizon
that is not a whole number of steps, a sample interval that is not a whole number of steps
or does not divide the horizon, a board QEMU cannot run.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

REFERENCE_RTOL, REFERENCE_ATOL = 1e-9, 1e-12
SAMPLES_DEFAULT = 250  # samples over the horizon when --every is not given (as simulate's 251 points)
LINK_TIMEOUT = 60.0  # seconds a SIM request may take (QEMU runs a request of many steps)


def _steps(span: float, dt: float, what: str) -> int:
    """span / dt as a whole number of steps; CLIError if it is not one (within 1e-9)."""
    from ..errors import CLIError

    k = round(span / dt)
    if k < 1 or abs(k * dt - span) > 1e-9 * max(dt, abs(span)):
        raise CLIError(f"{what} ({span:g} s) is not a whole number of steps of --dt {dt:g} s")
    return k


MAX_STEPS = 2_000_000  # steps of one device run (its host checks run step by step: minutes at this size)


def horizon(t0: float, t_end: float, dt: float, every: float | None) -> tuple[int, int]:
    """(steps, steps per sample) of the run from t0 to t_end; CLIError naming what is wrong."""
    from ..errors import CLIError

    if not t_end > t0:
        raise CLIError(f"--t-end {t_end:g}: the run would end before it starts (the model starts at t={t0:g})")
    steps = _steps(t_end - t0, dt, f"the horizon from t={t0:g} to --t-end {t_end:g}")
    if steps > MAX_STEPS:
        raise CLIError(f"--t-end {t_end:g}: {steps} steps of --dt {dt:g} s; a device run is checked step by step "
                       f"on the host (the same kernel, the double step, the reference), up to {MAX_STEPS:,} steps: "
                       f"a shorter horizon or a longer --dt")
    if every is None:  # the largest divisor of the horizon's steps giving at least SAMPLES_DEFAULT samples
        return steps, max(d for d in range(1, max(1, steps // SAMPLES_DEFAULT) + 1) if steps % d == 0)
    decim = _steps(every, dt, f"--every {every:g}")
    if steps % decim:
        raise CLIError(f"--every {every:g} s does not divide the horizon of {steps} steps of {dt:g} s")
    return steps, decim


def check_board(env: str, port: str | None) -> None:
    from ..errors import CLIError
    from mbforge.targets import BOARDS, EMULATED_BOARDS

    if env not in BOARDS:
        raise CLIError(f"--device {env!r}: no such board; boards: {', '.join(BOARDS)}")
    if port is None and not BOARDS[env].emulated:
        raise CLIError(f"--device {env} is not emulated here (QEMU runs {', '.join(EMULATED_BOARDS)}): "
                       f"give --port of the board")


def cmd_simulate_device(args) -> int:
    """`mbforge simulate --device`: every check of the command line first, then the run."""
    from ..errors import CLIError
    from ..examples import parse_options
    from ..kernels.common import independent_equations
    from ..kernels.step import StepOptions, initial_state
    from ..outdir import OutDir, OutDirError
    from .columns import load as _load, pairs as _pairs

    check_board(args.device, args.port)
    model, tag = _load(args.model, args.motion, parse_options(args.set))
    # the equations the step integrates: the model's, or over its independent coordinates (--reduced)
    eqs = independent_equations(model.equations(), bool(args.reduced), "step")
    lo, hi = eqs.ranges[eqs.t]
    t_end = hi if args.t_end is None else float(args.t_end)
    steps, decim = horizon(float(lo), t_end, args.dt, args.every)
    given = {k: getattr(args, k) for k in ("penalty", "solve") if getattr(args, k) is not None}  # else the kernel's
    opts = StepOptions(args.dt, args.integrator, args.iterations, **given, reduced=bool(args.reduced)).check(eqs)
    q0, qd0 = _pairs(args.q0, "--q0"), _pairs(args.qd0, "--qd0")
    t0, x0 = initial_state(eqs, opts.integrator, q0, qd0)
    try:
        OutDir(args.out).check_writable()
    except OutDirError as e:
        raise CLIError(str(e)) from None
    stem = model.name + (f"_{tag}" if tag else "")
    result = run_device(eqs, stem, OutDir(args.out), args.device, args.port, args.target, opts, t0, x0,
                        steps, decim, given=bool(q0 or qd0))
    print(result["summary"])
    return 0 if result["status"] == 0 else 1


def _kernels(eqs, opts, target: str, out):
    """(device kernel folder, c-double folder, device manifest): the step kernel generated
    for the device's target and in double, into out/kernel-<target>, out/kernel-c-double."""
    from ..kernels.builders import build_kernel
    from ..pipeline import generate

    kernel = build_kernel(eqs, "step", dt=opts.dt, integrator=opts.integrator, iterations=opts.iterations,
                          penalty=opts.penalty, solve=opts.solve, reduced=opts.reduced)
    folders = {}
    manifest = None
    for t in dict.fromkeys([target, "c-double"]):
        plan = generate(kernel, t)
        folders[t] = plan.write(out.sub(f"kernel-{t}"))
        manifest = manifest or plan.manifest
    return folders[target], folders["c-double"], manifest


def _budget_note(kernel_dir: Path, env: str, m) -> str | None:
    """The firmware's budget on the board (`mbforge firmware`'s check: ProjectError, one line,
    when kernel and link buffers do not fit its RAM or flash); the note to print when there
    is no budget (no cross compiler: the build will say what it says), else None."""
    from mbforge.firmware import budget as B
    from mbforge.firmware.cli import check_budget
    from mbforge.targets import BOARDS

    try:
        check_budget(str(kernel_dir), BOARDS[env], m)
    except B.BudgetError as e:
        return f"mbforge simulate: note: no budget: {e}"
    return None


def _checked_build(dev_dir: Path, env: str, port: str | None, m, out) -> Path | None:
    """The firmware project written to out/firmware and built (its ELF; None for a board at
    `port`, which runs what was flashed), while the budget check compiles the kernel alone
    for the board's core beside the build (both take seconds for a large kernel): its
    refusal, when the kernel does not fit, is the error, whatever the build did; a note on
    soft floating point first."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from mbforge.firmware.build import build
    from mbforge.firmware.cli import soft_float_note
    from mbforge.firmware.project import generate_project

    soft = soft_float_note(m.real, env)
    if soft:
        print(f"mbforge simulate: note: {soft}", file=sys.stderr)
    with ThreadPoolExecutor(max_workers=1) as pool:
        fits = pool.submit(_budget_note, dev_dir, env, m)
        try:
            proj = generate_project(dev_dir, out.sub("firmware"))
            elf = build(proj, env) if port is None else None
        except (KeyboardInterrupt, SystemExit):
            raise  # the budget's compiler was interrupted too: nothing of it to report
        except BaseException:
            fits.result()  # a kernel that does not fit: its refusal rather than the build's error
            raise
        note = fits.result()
    if note:
        print(note, file=sys.stderr)
    return elf


def _device_run(elf: Path | None, env: str, port: str | None, m, x_raw, steps: int, decim: int, dt: float):
    """(DeviceRun, timing dict, device dict): the built firmware run in QEMU (or the board
    at `port`), SIM requests over the link."""
    from mbforge.firmware.qemu import Emulator
    from mbforge.hil.link import Link
    from mbforge.hil.simulate import budget_ticks, run_horizon, timing, work_scale
    from mbforge.targets import BOARDS

    from ..progress import progress_bar

    def on(url: str):
        with Link(url, timeout=LINK_TIMEOUT) as link:
            info = link.hello()
            link.check_digest(m.digest)
            unit, per = work_scale(link)
            hz = BOARDS[env].cpu_hz
            with progress_bar(steps, "simulate on the device", "step") as bar:
                run = run_horizon(link, x_raw, steps, decim, budget_ticks(dt, hz, per), progress=bar)
            device = {"firmware": info.firmware, "board": env, "port": port, "real": info.real,
                      "counter": info.counter, "counter_hz": info.counter_hz, "requests": run.requests,
                      "link": link.stats.to_json()}
            return run, timing(run, dt, hz, unit, per, info.counter_hz), device

    if port is not None:
        return on(port)
    with Emulator(elf, board=env) as emu:
        return on(emu.url)


def _split(m, X: np.ndarray) -> dict[str, np.ndarray]:
    """The state groups of rows X (real values) by name: q, qd, (qdd, lambda), (t)."""
    return {g.name: X[:, g.offset:g.offset + g.size] for g in m.outputs}


def _host_runs(m, dev_dir: Path, dbl_dir: Path, x: np.ndarray, steps: int, decim: int) -> dict:
    """The chain on the host (HostKernel.steps, up to a failed step): the device's kernel
    (its bits) and the c-double one."""
    from mbforge.verify import hostlib
    from mbforge.verify.vectors import to_raw

    same, same_failed, same_status = hostlib.load_kernel(dev_dir).steps(to_raw(m, x[None, :], "inputs")[0],
                                                                        steps, decim)
    double, dbl_failed, dbl_status = hostlib.load_kernel(dbl_dir).steps(x, steps, decim)
    return {"same": same, "same_status": same_status, "same_failed_step": _one_based(same_failed),
            "double": double, "double_status": dbl_status, "double_failed_step": _one_based(dbl_failed)}


def _one_based(i: int | None) -> int | None:
    return None if i is None else i + 1


def _bits(m, device: np.ndarray, host: np.ndarray) -> dict:
    """How the device's raw states differ from the host build of the same kernel, over the
    samples both have (the host's run stops at a failed step)."""
    from mbforge.hil.simulate import ulp_distance

    k = min(len(device), len(host))
    device, host = device[:k], host[:k]

    if m.real_kind.fixed:
        d = np.abs(device.astype(np.int64) - host.astype(np.int64))
        unit = "raw units"
    else:
        d = ulp_distance(device, host)
        unit = "ulp"
    first = np.argwhere(d > 0)
    return {"elements_differing": int(np.count_nonzero(d)), "max_difference": int(d.max(initial=0)),
            "unit": unit, "bit_exact": not d.any(),
            "first_differing_sample": int(first[0][0]) + 1 if first.size else None, "samples_compared": k}


def _max_abs(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """(max |a - b|, the sample where it is) over rows; NaN anywhere counts as infinite."""
    e = np.abs(a - b).max(axis=1, initial=0.0)
    e = np.where(np.isnan(e), np.inf, e)
    i = int(np.argmax(e))
    return float(e[i]), i


def _reference(dyn, eqs, t0: float, t_end: float, every: float, x0: np.ndarray):
    """The accurate host run (scipy, rtol 1e-9), at the device's sample times."""
    n = len(eqs.q)
    return dyn.forward(t_end, q0=x0[:n], qd0=x0[n:2 * n], t0=t0, dt=every, rtol=REFERENCE_RTOL,
                       atol=REFERENCE_ATOL)


def _device_traj(dyn, times, Q, QD, ref):
    """A Trajectory of the device's states (energies and residuals computed in double)."""
    from ..reference.solvers import DynamicsError, Trajectory

    pn, vn = dyn.residual_norms(times, Q, QD)
    tr = Trajectory(t=times, Q=Q, QD=QD, residual=float(pn.max()), vresidual=float(vn.max()),
                    phi_norm=pn, vel_norm=vn)
    try:
        ev = np.array([dyn.energy(t, q, qd) for t, q, qd in zip(times, Q, QD)])
    except DynamicsError:  # no energy expressions: no drift to report
        return tr
    # the work done on the system (if any) is the reference's: the device's run has no other
    tr.T, tr.E, tr.W = ev[:, 0], ev[:, 0] + ev[:, 1], ref.W
    tr.drift_abs = float(np.max(np.abs(tr.E - tr.E[0] - (tr.W if tr.W is not None else 0.0))))
    scale = float(np.max(tr.T))
    tr.drift = tr.drift_abs / scale if scale > 0 else tr.drift_abs
    return tr


def run_device(eqs, stem: str, out, env: str, port: str | None, target: str, opts, t0: float, x0: np.ndarray,
               steps: int, decim: int, given: bool = False) -> dict:
    """Generate, build, run on the device and on the host, write DIR/<stem>.csv, report.json
    and report.html; the report (a dict, with "summary" and "status")."""
    from mbforge.firmware.build import BuildError
    from mbforge.firmware.project import ProjectError
    from mbforge.firmware.qemu import EmulatorError
    from mbforge.verify.hostlib import HostLibError
    from mbforge.hil.link import LinkError
    from mbforge.verify.vectors import from_raw, to_raw

    from ..errors import CLIError
    from ..outdir import OutDirError
    from .columns import columns, csv_text
    from ..reference.solvers import Dynamics

    dt, every = opts.dt, opts.dt * decim
    try:
        dev_dir, dbl_dir, m = _kernels(eqs, opts, target, out)
        x = np.array(m.step_start(t0, x0))
        x_raw = to_raw(m, x[None, :], "inputs")[0]
        elf = _checked_build(dev_dir, env, port, m, out)
        run, timing, device = _device_run(elf, env, port, m, x_raw, steps, decim, dt)
        host = _host_runs(m, dev_dir, dbl_dir, x, run.steps, decim)
    except (BuildError, ProjectError, EmulatorError, LinkError, HostLibError, OutDirError) as e:
        raise CLIError(str(e)) from None
    n_state = m.step["n_state"]
    # the samples before the first failed step (all of them when none failed); sample 0: the start
    good = (run.fail_step - 1) // decim if run.status else len(run.samples)
    first = from_raw(m, x_raw[None, :n_state], "outputs")
    S = np.vstack([first, from_raw(m, run.samples[:good], "outputs")])
    times = t0 + every * np.arange(len(S))
    D = np.full_like(S, np.nan)  # the c-double step's states; NaN after a step of its own failed
    D[:1 + len(host["double"][:good])] = np.vstack([x[None, :n_state], host["double"][:good]])
    S, D = S + m.step_offset(), D + m.step_offset()  # physical states (Manifest.step_offset)
    g, gd = _split(m, S), _split(m, D)
    if eqs.reduced_from is not None:  # every coordinate from the closed forms; judged in the full model
        from ..model.reduce import expand

        g["q"], g["qd"] = expand(eqs, times, g["q"], g["qd"])
        gd["q"], gd["qd"] = expand(eqs, times, gd["q"], gd["qd"])
        nz = len(eqs.q)
        x0 = np.concatenate(expand(eqs, times[:1], x0[None, :nz], x0[None, nz:2 * nz]), axis=1)[0]
        eqs = eqs.reduced_from
    Q, QD = g["q"], g["qd"]
    dyn = Dynamics(eqs)
    ref = _reference(dyn, eqs, t0, float(times[-1]), every, x0)
    QDD = np.array([dyn.accelerations(float(t), q, qd)[0] for t, q, qd in zip(times, Q, QD)])
    traj = _device_traj(dyn, times, Q, QD, ref)
    cols = columns(dyn, eqs, times, Q, QD, QDD, None, traj)
    names = list(cols)
    data = np.column_stack([cols[k] for k in names])
    result = _result(m, stem, env, target, run, timing, device, host, ref, g, gd, traj, times, every, given)
    result |= {"horizon_steps": steps, "t_end_asked": t0 + steps * dt}  # t_end: the last sample's
    from mbforge.hil.report import render_simulation

    html = render_simulation(result, times, [s.value.name for s in eqs.q], Q, ref.Q, gd["q"])
    files = {f"{stem}.csv": csv_text(names, data),
             "report.json": (json.dumps(result, indent=1, sort_keys=True) + "\n").encode(),
             "report.html": html.encode()}
    try:
        out.write_files(files)
    except OutDirError as e:
        raise CLIError(str(e)) from None
    result["summary"] = _summary(result, out.path / f"{stem}.csv")
    return result


def _result(m, stem, env, target, run, timing, device, host, ref, g, gd, traj, times, every, given) -> dict:
    n = len(g["q"][0])
    e_ref_q, at_q = _max_abs(g["q"], ref.Q)
    e_ref_qd, at_qd = _max_abs(g["qd"], ref.QD)
    e_dbl_q, _ = _max_abs(g["q"], gd["q"])
    e_dbl_qd, _ = _max_abs(g["qd"], gd["qd"])
    d_ref_q, _ = _max_abs(gd["q"], ref.Q)
    status_text = m.status_codes.get(str(run.status), "unknown status")
    return {
        "model": stem, "kernel": m.function, "target": target, "board": env, "digest": m.digest,
        "step": m.step, "t0": float(times[0]), "t_end": float(times[-1]), "dt": m.step["dt"],
        "steps": run.steps, "every": every, "samples": len(times), "start": "given" if given else "model",
        "status": run.status, "status_text": status_text, "failed_step": run.fail_step or None,
        "device": device, "timing": timing,
        "divergence": {
            "reference": {"what": f"scipy DOP853 at rtol {REFERENCE_RTOL:g}, atol {REFERENCE_ATOL:g}, projected "
                                  "onto the constraints at every sample",
                          "q_max_abs": e_ref_q, "q_worst_t": float(times[at_q]),
                          "qd_max_abs": e_ref_qd, "qd_worst_t": float(times[at_qd]),
                          "q_end_abs": float(np.abs(g["q"][-1] - ref.Q[-1]).max())},
            "double_step": {"what": "the same step kernel in c-double on the host",
                            "q_max_abs": e_dbl_q, "qd_max_abs": e_dbl_qd,
                            "double_vs_reference_q_max_abs": d_ref_q, "status": host["double_status"],
                            "failed_step": host["double_failed_step"]},
            "host_same_kernel": _bits(m, run.samples, host["same"]) | {"status": host["same_status"],
                                                                       "failed_step": host["same_failed_step"]},
        },
        "per_step_error_bound": _per_step_bounds(m),
        "constraint_residual_max": float(np.max(traj.phi_norm)),
        "velocity_residual_max": float(np.max(traj.vel_norm)),
        "energy_drift_max_abs": traj.drift_abs, "energy_drift_of_max_T": traj.drift,
        "coordinates": n,
    }


def _per_step_bounds(m) -> dict:
    """The kernel's own sound bound of one step's rounding (its per-evaluation error bound,
    largest over each state group's elements; None where the target gives none). A bound
    on one step from an exact input, not on the trajectory: the divergence over the
    horizon is measured (divergence)."""
    out = {"what": "one step's rounding against the exact step at the same input (sound, per step); "
                   "not a bound on the trajectory"}
    for g in m.outputs:
        b = g.error_bound
        out[g.name] = None if not b or any(v is None for v in b) else float(max(b))
    return out


def _summary(r: dict, csv: Path) -> str:
    t, d = r["timing"], r["divergence"]
    rtf = f"{t['real_time_factor']:.1f}x real time" if t["real_time_factor"] else "real time unknown"
    per = f"{t['mean_per_step']:.0f} {t['unit']}/step (worst {t['worst_per_step']:.0f})" if t["mean_per_step"] else ""
    bits = d["host_same_kernel"]
    same = "bit-exact with the host build" if bits["bit_exact"] else \
        f"{bits['elements_differing']} elements differ from the host build (max {bits['max_difference']} {bits['unit']})"
    status = "" if r["status"] == 0 else f"; FAILED: status {r['status']} ({r['status_text']}) at step {r['failed_step']}"
    of = f" of {r['horizon_steps']}" if r.get("horizon_steps", r["steps"]) != r["steps"] else ""
    return (f"{r['model']} on {r['board']} ({r['target']}, {r['step']['integrator']}, dt {r['dt']:g} s): {r['steps']}"
            f"{of} steps, sampled to t={r['t_end']:g} s, {rtf} at {t['cpu_hz'] / 1e6:g} MHz, {per}, {t['overruns']} overruns; "
            f"max |q - reference| {d['reference']['q_max_abs']:.2e}, |q - double step| "
            f"{d['double_step']['q_max_abs']:.2e}; {same}; constraint residual {r['constraint_residual_max']:.1e}"
            + (f", energy drift {r['energy_drift_of_max_T']:.1e} of max T" if r["energy_drift_of_max_T"] is not None
               else "") + f"{status} -> {csv}")
