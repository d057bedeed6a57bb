"""Run a step kernel over a horizon on the device (SIM requests), and the same kernel on the host.

    run = run_horizon(link, x0, steps=2000, decim=10, budget=ticks)   # DeviceRun
    states, failed, status = hostlib.load_kernel(kernel_dir).steps(x0, 2000, 10)   # the same on the host

A step kernel (manifest `step`) maps its inputs, the state then the held inputs u, to the
next state: out[0:n_state] is the next in[0:n_state]. A SIM request runs `steps` steps on the
device and returns the state after every decim-th one (mbforge.hil.protocol). The horizon
is cut into requests of as many samples as one reply holds (the device's max payload, from
its HELLO), the first ones smaller (1, 2, 4, ... samples: the link learns the device's reply
time from them, so a long request is not resent as lost while the device works). Each
request starts from the last sample of the previous reply, raw bits, so the chained run is
the one the device would make in one go, and a request sent again (the link's retries) is
answered the same.

Work per step: the device's overhead-corrected counter ticks, summed and the worst of each
request; with SysTick under QEMU -icount they are turned into instructions by the CALIB
slope (link.calibrate), with DWT they are cycles. The real-time factor is the simulated
time over the device time at the board's clock (`cpu_hz`), counting one cycle per
instruction under QEMU (a bound from below on a Cortex-M's time: wait states and
multi-cycle instructions add to it, as in hil/report.py). An overrun is a step whose work
exceeded dt at the board's clock; the device counts them against the budget in ticks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mbforge.hil import protocol as P
from mbforge.hil.link import Link, LinkError, calibrate
from mbforge.reals import REALS


@dataclass
class DeviceRun:
    samples: np.ndarray  # [steps // decim, n_state] of the device's real type: the state after each decim-th step
    sample_work: np.ndarray  # [steps // decim] uint32: the work ticks of those steps (0xFFFFFFFF: wrapped)
    status: int  # the first non-zero status (0: every step ok)
    fail_step: int  # its step, counted from 1 over the horizon (0: none)
    steps: int  # run: the horizon's, or up to the end of the request in which a step failed
    work_ticks: int  # summed over the steps whose count did not wrap
    worst_ticks: int
    overruns: int
    wrapped: int
    requests: int


def sim_payload(x: np.ndarray, steps: int, decim: int, budget: int) -> bytes:
    """A SIM request: the inputs (raw reals), steps, decim, budget ticks."""
    return np.ascontiguousarray(x).tobytes() + P.SIM_REQUEST_FIXED.pack(steps, decim, min(budget, 0xFFFFFFFF))


def decode_sim(payload: bytes, samples: int, n_state: int, dtype) -> tuple[tuple, np.ndarray, np.ndarray]:
    """(fixed fields, [samples] work ticks, [samples, n_state] states) of a SIM reply;
    LinkError if it is not one."""
    rec = np.dtype([("work", "<u4"), ("state", np.dtype(dtype), (n_state,))])
    want = P.SIM_REPLY_FIXED.size + samples * rec.itemsize
    if len(payload) != want:
        raise LinkError(f"SIM reply of {len(payload)} bytes, expected {want} ({samples} samples of {n_state})")
    fixed = P.SIM_REPLY_FIXED.unpack_from(payload)
    r = np.frombuffer(payload, dtype=rec, offset=P.SIM_REPLY_FIXED.size, count=samples)
    return fixed, r["work"].copy(), r["state"].reshape(samples, n_state).copy()


PACE_SHARE = 0.25  # a SIM request runs at most this share of the link's reply timeout
PROBE_STEPS = 512  # steps of the request that measures the device's pace before a horizon
PROBE_RESEND = 2.0  # seconds before the probe is sent again (it runs up to PROBE_STEPS steps)


def _pace(link: Link, x: np.ndarray, decim: int, budget: int) -> float:
    """Seconds per step of a SIM request on this device and link, from one short request
    (a pure function of its payload: it changes nothing); LinkError when one sample (decim
    steps) would not answer within half the link's reply timeout: a horizon sampled that
    sparsely cannot be streamed from this device."""
    if not link.timeout:
        return 0.0
    k = min(decim, PROBE_STEPS)
    t0 = time.monotonic()
    link.request(P.SIM, sim_payload(x, k, k, budget), what=f"SIM of {k} steps (the device's pace)",
                 resend_every=PROBE_RESEND)
    pace = (time.monotonic() - t0) / k
    if decim * pace > link.timeout / 2:
        raise LinkError(f"one sample every {decim} steps would take about {decim * pace:.3g} s on this device "
                        f"({pace:.2g} s per step over the link, measured), more than half the link's reply "
                        f"timeout of {link.timeout:g} s: sample more often (--every: at most every "
                        f"{max(1, int(link.timeout / 2 / pace))} steps) or run a shorter horizon")
    return pace


def run_horizon(link: Link, x0, steps: int, decim: int, budget: int = 0xFFFFFFFF, progress=None) -> DeviceRun:
    """Run `steps` steps (a multiple of decim) on the device from the raw inputs x0, as few
    SIM requests as its max payload allows, and no request after one in which a step failed
    (the state after a failed step is no state); progress(done, steps) after each."""
    info = link.info or link.hello()
    dtype = np.dtype(REALS[info.real].dtype)
    x = np.array(x0, dtype=dtype).reshape(-1)
    n_state = info.n_out
    if x.size != info.n_in or not 0 < n_state <= info.n_in:
        raise LinkError(f"the device's kernel takes {info.n_in} inputs and gives {n_state}: not a step kernel "
                        f"for a state of {x.size} inputs")
    if steps <= 0 or decim <= 0 or steps % decim:
        raise ValueError(f"steps ({steps}) must be a positive multiple of decim ({decim})")
    per = P.sim_samples_for(info.real, n_state, info.max_payload)
    if per == 0:
        raise LinkError(f"one state of {n_state} reals does not fit the device's max payload {info.max_payload}")
    pace = _pace(link, x, decim, budget)  # seconds per step on this device and link (measured)
    out, works, done, req = [], [], 0, 0
    status = fail_step = work = worst = overruns = wrapped = 0
    while done < steps:
        # samples per request: up to the payload, doubling from 1, and no more steps than
        # answer within a quarter of the link's reply timeout at the pace measured so far
        in_time = max(1, int(link.timeout * PACE_SHARE / (decim * pace))) if link.timeout else per
        k = min(per, 1 << min(req, 16), (steps - done) // decim, in_time)
        t_req = time.monotonic()
        # sent again only once overdue: the device runs every copy it gets (a request is a
        # pure function of its payload), so early copies of a long request queue whole runs
        frame = link.request(P.SIM, sim_payload(x, k * decim, decim, budget),
                             what=f"SIM of steps {done + 1}..{done + k * decim}",
                             resend_every=min(link.timeout, 0.25 + 2 * k * decim * pace) if link.timeout else None)
        pace = max(pace, (time.monotonic() - t_req) / (k * decim))
        (st, st_step, over, wrap, w, wst), W, S = decode_sim(frame.payload, k, n_state, dtype)
        if st and not status:
            status, fail_step = st, done + st_step
        work, worst, overruns, wrapped = work + w, max(worst, wst), overruns + over, wrapped + wrap
        out.append(S)
        works.append(W)
        x[:n_state] = S[-1]
        done, req = done + k * decim, req + 1
        if progress:
            progress(done, steps)
        if status:
            break
    return DeviceRun(np.vstack(out), np.concatenate(works), status, fail_step, done, work, worst, overruns, wrapped, req)


def work_scale(link: Link) -> tuple[str, float]:
    """(unit, ticks per unit) of the device's work counts: instructions with a SysTick
    calibrated by CALIB, else cycles (DWT) or raw ticks."""
    info = link.info or link.hello()
    if info.counter == "SysTick":
        slope = calibrate(link)
        if slope:
            return "instructions", slope
    return ("cycles" if info.counter == "DWT" else "ticks"), 1.0


def timing(run: DeviceRun, dt: float, cpu_hz: int, unit: str, ticks_per_unit: float,
           counter_hz: int | None = None) -> dict:
    """Work per step (mean over all steps, median over the sampled ones, worst) and the
    real-time factor at the board's clock (one cycle per instruction); with counter_hz also
    the one of the counter's own time (under QEMU -icount its virtual time: 2**shift ns per
    instruction, slower than the board)."""
    counted = run.steps - run.wrapped
    sampled = run.sample_work[run.sample_work != 0xFFFFFFFF] / ticks_per_unit
    mean = run.work_ticks / ticks_per_unit / counted if counted else None
    worst = run.worst_ticks / ticks_per_unit if counted else None
    device_s = run.work_ticks / ticks_per_unit / cpu_hz if counted else None
    return {"unit": unit, "ticks_per_unit": ticks_per_unit, "mean_per_step": mean, "worst_per_step": worst,
            "median_per_sampled_step": float(np.median(sampled)) if sampled.size else None,
            "budget_per_step": dt * cpu_hz, "overruns": run.overruns, "wrapped": run.wrapped,
            "device_seconds": device_s, "simulated_seconds": run.steps * dt, "cpu_hz": cpu_hz,
            "real_time_factor": (run.steps * dt / device_s) if device_s else None,
            "real_time_factor_counter": (run.steps * dt * counter_hz / run.work_ticks)
            if counter_hz and run.work_ticks else None}


def budget_ticks(dt: float, cpu_hz: int, ticks_per_unit: float) -> int:
    """A step's budget in the device's work ticks: dt at the board's clock."""
    return int(min(0xFFFFFFFF, np.floor(dt * cpu_hz * ticks_per_unit)))


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Units in the last place between two float arrays of the same type (ordered ints)."""
    a, b = np.asarray(a), np.asarray(b)
    ity = {4: np.int32, 8: np.int64}[a.dtype.itemsize]

    def ordered(v):
        i = v.view(ity).astype(np.int64)
        return np.where(i < 0, np.iinfo(ity).min - i, i)

    return np.abs(ordered(a) - ordered(b))
