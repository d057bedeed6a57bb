"""Host speed of the generated step kernel against MuJoCo (issue 27, item 6): the c-double
`step` kernel of mbforge and MuJoCo's `mj_step` on the same models, at the same accuracy,
timed in the same run.

    python -m bench.step [--cases pendulum,chain2,chain5,nfourbar4] [--horizon 2] [--tol 1e-4]
        [--repeat 5] [--json FILE]

Models (each written twice: the shipped mbforge example, and an MJCF built here from the
example's own constants): `pendulum` (a point mass on a massless 1 m rod, natural
coordinates in mbforge, one hinge in MuJoCo), `chainN` (the planar N-link chain of uniform
rods, relative coordinates in both), `nfourbarN` (the N-four-bar: natural coordinates and
its 2N + 1 distance equations in mbforge; in MuJoCo N + 1 hinged cranks, each coupler
hinged to the tip of its crank and closed on the next crank's tip by a `connect` equality).
MuJoCo needs every moving body's inertia above 1e-15: the components that planar motion
never sees (and the pendulum's point mass) get 1e-12.

Accuracy: the tip (pendulum: the mass; chain: the last link's end; N-four-bar: the last
crank's tip) every 20 ms over the horizon against mbforge's host integrator at tight
tolerance (Dynamics.forward, DOP853, rtol 1e-10, atol 1e-12); the error of a run is the
largest distance. Per engine and integrator the largest dt of LADDER whose error is within
--tol (searched from the largest dt down: the first that passes). MuJoCo: Euler (its
default, semi-implicit), RK4 and implicitfast; for the equality constraints of the
N-four-bar both its default soft constraints and the stiffest it takes (solref time
constant 2 dt, the least it allows, solimp 0.9999): its best setting is the one compared.
The pipeline stages the models have nothing for (contacts, actuators, sensors, limits,
springs, dampers, ...) are disabled in MuJoCo (UNUSED), which changes no motion here.
mbforge: each integrator its step kernel offers for the model.

Time: ns per step, the median of --repeat runs over the whole horizon from the initial
state (mbforge: a C loop feeding out[] back to in[], gcc -O2 like bench.host; MuJoCo:
mj_step(m, d, nstep) in its own C loop), so both include whatever their state needs.
Cost per simulated second = ns per step / dt. Ratios mbforge / MuJoCo: at equal accuracy
(each engine's best integrator at its largest passing dt) and at equal dt (per-step time
at mbforge's chosen dt, with MuJoCo's error there).

Also mbforge's own host integrator (`mbforge simulate`'s Dynamics.forward, scipy DOP853 in
Python) at the loosest rtol within each tolerance: CPU time per simulated second against
the step kernel's (class Host).

Measured 2026-12-05 (two cores shared with other sessions, load average about 6; MuJoCo
4.0.1), mbforge / MuJoCo CPU time per simulated second at equal accuracy (1e-3 m, 1e-4 m):
pendulum 0.036, 0.089 (ali3p at 5 and 2 ms against MuJoCo's RK4 at 20 ms); chain2 0.032 and
chain5 0.092 (RK4 in both at the same dt); nfourbar4 0.044, 0.095 and nfourbar10 0.103,
0.115 (ali3p at 5 and 1 ms against MuJoCo's Euler with its stiffest constraints at 5 to 10
and 2 ms). Tables and findings: docs/simulation.md.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import check_json, refuse_status, run

SAMPLE = 0.02  # the tip is compared every SAMPLE seconds; every dt of LADDER divides it
LADDER = (2e-2, 1e-2, 5e-3, 2e-3, 1e-3, 5e-4, 2e-4, 1e-4, 5e-5, 2e-5, 1e-5, 5e-6, 2e-6, 1e-6)
MJ_INTEGRATORS = ("Euler", "RK4", "implicitfast")
UNUSED = ("CONTACT", "ACTUATION", "SENSOR", "MIDPHASE", "FRICTIONLOSS", "LIMIT", "SPRING", "DAMPER", "CLAMPCTRL",
          "FILTERPARENT", "AUTORESET")
TINY = 1e-12  # MuJoCo's floor for a moving body's inertia components, where the motion never sees them


@dataclass
class Case:
    """One model in both engines. to_mujoco maps mbforge's (q, qd[, qdd]) to MuJoCo's
    joint angles (qpos, qvel[, qacc]); tip maps mbforge's Q (rows) to the tip's (x, y)."""

    name: str
    example: str
    options: dict
    mjcf: str
    site: str  # MuJoCo's site at the tip
    to_mujoco: object
    tip: object


def _body(name: str, pos: float, mass: float, com: float, izz: float, inner: str = "", site: float = 1.0) -> str:
    """A body hinged about z at (pos, 0, 0) in its parent, its inertia about its centre of
    mass at (com, 0, 0), a site `<name>_tip` at (site, 0, 0)."""
    return (f'<body name="{name}" pos="{pos!r} 0 0"><joint name="{name}" type="hinge" axis="0 0 1"/>'
            f'<inertial pos="{com!r} 0 0" mass="{mass!r}" diaginertia="{TINY} {max(izz, TINY)!r} {max(izz, TINY)!r}"/>'
            f'<site name="{name}_tip" pos="{site!r} 0 0"/>{inner}</body>')


def _mjcf(name: str, g: float, bodies: str, equality: str = "") -> str:
    return (f'<mujoco model="{name}"><option gravity="0 {-g!r} 0"/><worldbody>{bodies}</worldbody>'
            f'{equality}</mujoco>')


def _rod_angles(d, dd, ddd=None):
    """Angle from +x of rods along d (rows: x, y), its rate and acceleration, for rods of
    constant length: x y' - y x' = |d|^2 angle', x y'' - y x'' = |d|^2 angle''."""
    L2 = d[0] ** 2 + d[1] ** 2
    out = [np.arctan2(d[1], d[0]), (d[0] * dd[1] - d[1] * dd[0]) / L2]
    if ddd is not None:
        out.append((d[0] * ddd[1] - d[1] * ddd[0]) / L2)
    return out


def pendulum_case() -> Case:
    from mbforge.examples import pendulum as p

    xml = _mjcf("pendulum", p.G, _body("rod", 0.0, p.MASS, p.L, 0.0, site=p.L))

    def to_mujoco(*x):
        return [np.atleast_1d(a) for a in _rod_angles(*(np.asarray(v)[:2] for v in x))]

    return Case("pendulum", "pendulum", {}, xml, "rod_tip", to_mujoco, lambda Q: Q[:, :2])


def chain_case(n: int) -> Case:
    from mbforge.examples import chain as c

    inner = ""
    for k in reversed(range(n)):
        inner = _body(f"link{k}", c.LENGTH if k else 0.0, c.MASS, c.LENGTH / 2, c.MASS * c.LENGTH ** 2 / 12, inner,
                      site=c.LENGTH)

    def tip(Q):
        phi = np.cumsum(Q, axis=1)
        return c.LENGTH * np.stack([np.cos(phi).sum(axis=1), np.sin(phi).sum(axis=1)], axis=1)

    return Case(f"chain{n}", "chain", {"n": n}, _mjcf("chain", c.G, inner), f"link{n - 1}_tip",
                lambda *x: [np.asarray(v) for v in x], tip)


def nfourbar_case(n: int) -> Case:
    """Crank i hinged at (i, 0) (MuJoCo's angle: from +x), coupler i hinged at crank i's tip
    (angle relative to crank i), its end joined to crank i+1's tip; qpos order: crank0,
    coupler0, crank1, ..., crankN (MuJoCo's depth-first order)."""
    from mbforge.examples import nfourbar as f

    izz = f.MASS * f.L ** 2 / 12
    bodies = "".join(_body(f"crank{i}", float(i), f.MASS, f.L / 2, izz,
                           _body(f"coupler{i}", f.L, f.MASS, f.L / 2, izz, site=f.L) if i < n else "", site=f.L)
                     for i in range(n + 1))
    eq = "".join(f'<connect site1="coupler{i}_tip" site2="crank{i + 1}_tip"/>' for i in range(n))
    xml = _mjcf("nfourbar", f.G, bodies, f"<equality>{eq}</equality>")

    def to_mujoco(*x):
        P = [np.asarray(v, float).reshape(n + 1, 2).T for v in x]  # rows x, y of the points
        ground = np.stack([np.arange(n + 1.0), np.zeros(n + 1)])
        crank = _rod_angles(P[0] - ground, *P[1:])
        coupler = _rod_angles(np.diff(P[0], axis=1), *(np.diff(v, axis=1) for v in P[1:]))
        out = []
        for c, k in zip(crank, coupler):
            v = np.empty(2 * n + 1)
            v[0::2], v[1::2] = c, k - c[:-1]
            out.append(v)
        return out

    return Case(f"nfourbar{n}", "nfourbar", {"n": n}, xml, f"crank{n}_tip", to_mujoco,
                lambda Q: Q[:, 2 * n:2 * n + 2])


def case(name: str) -> Case:
    """The case called `name` (pendulum, chainN, nfourbarN); ValueError for another name."""
    if name == "pendulum":
        return pendulum_case()
    for prefix, make in (("chain", chain_case), ("nfourbar", nfourbar_case)):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return make(int(name[len(prefix):]))
    raise ValueError(name)


def equations(c: Case):
    from mbforge.examples import load

    return load(c.example, **c.options).equations()


def start(eqs, integrator: str = "rk4") -> np.ndarray:
    """The model's own initial state (q, qd and what the integrator carries), consistent with
    its constraints: what the step kernel starts from."""
    from mbforge.kernels.step import initial_state

    return np.asarray(initial_state(eqs, integrator)[1], float)


def reference(c: Case, horizon: float) -> np.ndarray:
    """The tip every SAMPLE seconds, by the host integrator at tight tolerance."""
    from mbforge.reference import Dynamics

    eqs = equations(c)
    n = len(eqs.q)
    x = start(eqs)
    traj = Dynamics(eqs).forward(horizon, x[:n], x[n:], dt=SAMPLE, rtol=1e-10, atol=1e-12)
    return c.tip(traj.Q)


# ---- MuJoCo ---------------------------------------------------------------------------

def mujoco_model(c: Case, integrator: str, dt: float, stiff: bool):
    """MuJoCo's model of the case at this dt; stiff: the equality constraints as hard as
    MuJoCo takes them (solref time constant 2 dt, its least, and solimp 0.9999)."""
    import mujoco

    m = mujoco.MjModel.from_xml_string(c.mjcf)
    m.opt.timestep = dt
    # the stages these models have nothing for, off (its best case; the physics unchanged)
    for flag in UNUSED:
        m.opt.disableflags |= getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag}")
    m.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    if stiff:
        m.eq_solref[:] = (2 * dt, 1.0)
        m.eq_solimp[:] = (0.9999, 0.9999, 0.001, 0.5, 2.0)
    return m


class MuJoCo:
    """mj_step on a case from mbforge's initial state (q0, qd0), for one integrator and
    constraint setting at one dt."""

    def __init__(self, c: Case, integrator: str, dt: float, stiff: bool, q0, qd0):
        import mujoco

        self.mj, self.m = mujoco, mujoco_model(c, integrator, dt, stiff)
        self.d = mujoco.MjData(self.m)
        self.site = mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_SITE, c.site)
        self.qpos, self.qvel = c.to_mujoco(q0, qd0)

    def _reset(self):
        self.mj.mj_resetData(self.m, self.d)
        self.d.qpos[:], self.d.qvel[:] = self.qpos, self.qvel
        self.mj.mj_forward(self.m, self.d)

    def _tip(self):  # mj_step leaves site_xpos at its last step's start (RK4: its last stage)
        self.mj.mj_kinematics(self.m, self.d)
        return self.d.site_xpos[self.site, :2].copy()

    def tips(self, horizon: float) -> np.ndarray:
        """The tip every SAMPLE seconds over the horizon."""
        per = round(SAMPLE / self.m.opt.timestep)
        self._reset()
        out = [self._tip()]
        for _ in range(round(horizon / SAMPLE)):
            self.mj.mj_step(self.m, self.d, nstep=per)
            out.append(self._tip())
        return np.array(out)

    def ns(self, steps: int, repeat: int) -> float:
        """ns per step: median of `repeat` runs of `steps` steps from the start in mj_step's
        own loop (nstep)."""
        times = []
        for _ in range(repeat):
            self._reset()
            a = time.perf_counter_ns()
            self.mj.mj_step(self.m, self.d, nstep=steps)
            times.append((time.perf_counter_ns() - a) / steps)
        return statistics.median(times)


# ---- mbforge ----------------------------------------------------------------------------

STEP_C = r"""
#include <stdint.h>
#include <string.h>
#include <time.h>
int bench_kernel(const double *in, double *out);
/* k samples of `per` steps from x[0..n_in) (the state, then the held inputs), out[] fed back
   as the next in[] (two buffers, swapped); after each sample its state into S (if S). ns
   elapsed; -1 - s if a step of sample s returned a nonzero status (stopped there). */
double step_run(const double *x, double *S, int64_t n_state, int64_t n_in, int64_t k, int64_t per)
{
    double a[n_in], b[n_in], *in = a, *out = b, *sw;
    struct timespec t0, t1;
    int bad = 0;
    memcpy(a, x, n_in * sizeof *x);
    memcpy(b, x, n_in * sizeof *x);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t s = 0; s < k; s++) {
        for (int64_t i = 0; i < per; i++) {
            bad |= bench_kernel(in, out);
            sw = in; in = out; out = sw;
        }
        if (bad)
            return -1.0 - s;
        if (S)
            memcpy(S + s * n_state, in, n_state * sizeof *x);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
}
"""


class Stepper:
    """mbforge's c-double step kernel of a case, generated at this dt and compiled on the
    host (gcc with bench.host's flags) behind step_run."""

    def __init__(self, c: Case, integrator: str, dt: float, tmp: Path):
        from mbforge.kernels.step import step_kernel
        from mbforge.pipeline import generate

        from .cbuild import mbforge_kernel
        from .host import CFLAGS

        self.case, self.eqs = c, equations(c)
        plan = generate(step_kernel(self.eqs, dt=dt, integrator=integrator), "c-double")
        self.step = plan.manifest.step
        k = mbforge_kernel(plan)
        name = f"{c.name}_{integrator}_{dt:g}".replace(".", "_").replace("-", "m")
        src, so = tmp / f"{name}.c", tmp / f"{name}.so"
        src.write_text(k.source + STEP_C)
        subprocess.run(["gcc", *CFLAGS, str(src), "-o", str(so), "-lm", "-shared", "-fPIC"], check=True)
        self.lib = ctypes.CDLL(str(so))
        self.lib.step_run.restype = ctypes.c_double
        self.x = np.zeros(k.n_in)  # the held inputs (u) at 0
        self.offset = np.array(plan.manifest.step_offset())  # positions carried as q - offset
        self.x[:self.step["n_state"]] = start(self.eqs, self.step["integrator"]) - self.offset

    def _run(self, S, k: int, per: int) -> float:
        P = ctypes.POINTER(ctypes.c_double)
        return self.lib.step_run(self.x.ctypes.data_as(P), None if S is None else S.ctypes.data_as(P),
                                 ctypes.c_int64(self.step["n_state"]), ctypes.c_int64(len(self.x)),
                                 ctypes.c_int64(k), ctypes.c_int64(per))

    def tips(self, horizon: float) -> tuple[np.ndarray, float | None]:
        """The tip every SAMPLE seconds over the horizon, and the time of the first step that
        returned a nonzero status (None: none did; the tips stop before it)."""
        k, nq = round(horizon / SAMPLE), len(self.eqs.q)
        S = np.zeros((k + 1, self.step["n_state"]))
        S[0] = self.x[:len(S[0])]
        r = self._run(S[1:], k, round(SAMPLE / self.step["dt"]))
        S += self.offset
        if r >= 0:
            return self.case.tip(S[:, :nq]), None
        s = int(-(r + 1))  # the sample in which a step failed
        return self.case.tip(S[:s + 1, :nq]), SAMPLE * (s + 1)

    def ns(self, steps: int, repeat: int) -> float:
        times = [self._run(None, 1, steps) for _ in range(repeat)]
        if min(times) < 0:
            refuse_status(f"{self.case.name} step ({self.step['integrator']}, dt {self.step['dt']:g})")
        return statistics.median(times) / steps


# ---- mbforge's host integrator -----------------------------------------------------------

RTOLS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10)  # its ladder: loosest first


class Host:
    """mbforge's host integrator (`mbforge simulate`: Dynamics.forward, scipy DOP853 in
    Python, the state projected on the constraints at every sample) at one rtol (atol
    rtol / 100): what a user runs on a PC instead of a step kernel."""

    def __init__(self, c: Case, rtol: float):
        from mbforge.reference import Dynamics

        self.case, self.rtol = c, rtol
        self.eqs = equations(c)
        self.dyn = Dynamics(self.eqs)
        self.x = start(self.eqs)

    def _run(self, horizon: float):
        n = len(self.eqs.q)
        return self.dyn.forward(horizon, self.x[:n], self.x[n:], dt=SAMPLE, rtol=self.rtol, atol=self.rtol / 100)

    def tips(self, horizon: float) -> np.ndarray:
        return self.case.tip(self._run(horizon).Q)

    def ms_per_simulated_s(self, horizon: float, repeat: int) -> float:
        """CPU time of a run over the horizon per simulated second (median of repeat)."""
        times = []
        for _ in range(repeat):
            t0 = time.process_time()
            self._run(horizon)
            times.append(time.process_time() - t0)
        return statistics.median(times) / horizon * 1e3


def host_rows(c: Case, horizon: float, ref: np.ndarray, tols: list[float], repeat: int) -> dict:
    """Per tolerance the loosest rtol of RTOLS within it and its CPU time per simulated
    second; `ladder`: every rtol tried (down to the first within the smallest tolerance)."""
    rows, timed = [], {}
    for rtol in RTOLS:
        rows.append({"rtol": rtol, "error": _error(Host(c, rtol).tips(horizon), ref)})
        if rows[-1]["error"] <= min(tols):
            break
    out = {"ladder": rows}
    for tol in tols:
        r = next((r for r in rows if r["error"] <= tol), None)
        if r:
            if r["rtol"] not in timed:
                timed[r["rtol"]] = Host(c, r["rtol"]).ms_per_simulated_s(horizon, min(repeat, 3))
            out[f"{tol:g}"] = dict(r, ms_per_simulated_s=timed[r["rtol"]])
    return out


# ---- the comparison ---------------------------------------------------------------------

MAX_TIMED = 200_000  # steps per timed run at most (from the start: the horizon's first part)


def _error(tips: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.linalg.norm(tips - ref[:len(tips)], axis=1)))


def ladder(at, tol: float) -> list[dict]:
    """Runs at(dt) down LADDER until one is within tol; their rows ({dt, error, ...})."""
    rows = []
    for dt in LADDER:
        rows.append(at(dt))
        if rows[-1]["error"] <= tol:
            break
    return rows


def compare(c: Case, tols: list[float], horizon: float, repeat: int, tmp: Path) -> dict:
    """Per engine and integrator its ladder; per tolerance the largest dt within it, ns per
    step there and CPU time per simulated second; the ratios mbforge / MuJoCo."""
    from mbforge.kernels.step import StepError

    eqs = equations(c)
    n, x, ref = len(eqs.q), start(eqs), reference(c, horizon)
    runs: dict = {}  # (engine, integrator, dt) -> Stepper or MuJoCo, for timing

    def mbforge_at(integ):
        def at(dt):
            try:
                s = Stepper(c, integ, dt, tmp)
            except StepError as e:
                return {"dt": dt, "error": math.inf, "note": str(e)}
            tips, failed = s.tips(horizon)
            runs["mbforge", integ, dt] = s
            row = {"dt": dt, "error": _error(tips, ref) if failed is None else math.inf,
                   "iterations": s.step["iterations"]}
            if failed is not None:
                row["note"] = f"a step returned a nonzero status (input outside its envelope) before t = {failed:g} s"
            return row
        return at

    def mujoco_at(integ):
        def at(dt):
            best = None
            for stiff in ((False, True) if "<equality>" in c.mjcf else (False,)):
                sim = MuJoCo(c, integ, dt, stiff, x[:n], x[n:])
                err = _error(sim.tips(horizon), ref)
                if best is None or err < best["error"]:
                    best, runs["MuJoCo", integ, dt] = {"dt": dt, "error": err, "stiff": stiff}, sim
            return best
        return at

    ladders = {("mbforge", i): ladder(mbforge_at(i), min(tols)) for i in (["ali3p"] if eqs.phi else ["rk4", "euler"])}
    ladders.update({("MuJoCo", i): ladder(mujoco_at(i), min(tols)) for i in MJ_INTEGRATORS})
    timed: dict = {}

    def ns(engine, integ, dt):
        if (engine, integ, dt) not in runs:
            mujoco_at(integ)(dt)
        key = (engine, integ, dt)
        if key not in timed:
            timed[key] = runs[key].ns(min(round(horizon / dt), MAX_TIMED), repeat)
        return timed[key]

    host = host_rows(c, horizon, ref, tols, repeat)
    out = {"ladders": {f"{e} {i}": rows for (e, i), rows in ladders.items()}, "host": host["ladder"],
           "tolerances": {}}
    for tol in tols:
        out["tolerances"][f"{tol:g}"] = _at_tolerance(tol, ladders, host, ns, mujoco_at)
    return out


def _at_tolerance(tol: float, ladders: dict, host: dict, ns, mujoco_at) -> dict:
    """compare's row of one tolerance: per engine and integrator the largest dt of its
    ladder within it (ns per step there, `ns(engine, integrator, dt)`, and CPU time per
    simulated second), each engine's best, their ratio, the host's, and MuJoCo at
    mbforge's best dt (`mujoco_at(integrator)(dt)` runs one off its ladder)."""
    chosen = {}
    for (e, i), rows in ladders.items():
        r = next((r for r in rows if r["error"] <= tol), None)
        if r:
            t = ns(e, i, r["dt"])
            chosen[e, i] = dict(r, ns_per_step=t, ms_per_simulated_s=t / r["dt"] * 1e-6)
    best = {e: min(((i, r) for (e2, i), r in chosen.items() if e2 == e), key=lambda ir: ir[1]["ms_per_simulated_s"],
                   default=None) for e in ("mbforge", "MuJoCo")}
    res = {"runs": {f"{e} {i}": r for (e, i), r in chosen.items()},
           "best": {e: (b and {"integrator": b[0], **b[1]}) for e, b in best.items()}}
    if best["mbforge"] and best["MuJoCo"]:
        res["ratio_equal_accuracy"] = (best["mbforge"][1]["ms_per_simulated_s"]
                                       / best["MuJoCo"][1]["ms_per_simulated_s"])
    if best["mbforge"] and f"{tol:g}" in host:
        h = host[f"{tol:g}"]
        res["host"] = {**h, "ratio": best["mbforge"][1]["ms_per_simulated_s"] / h["ms_per_simulated_s"]}
    if best["mbforge"]:
        dt, mine = best["mbforge"][1]["dt"], best["mbforge"][1]["ns_per_step"]
        eq = {}
        for i in MJ_INTEGRATORS:
            row = next((r for r in ladders["MuJoCo", i] if r["dt"] == dt), None) or mujoco_at(i)(dt)
            eq[i] = {"error": row["error"], "ns_per_step": ns("MuJoCo", i, dt), "ratio": mine / ns("MuJoCo", i, dt)}
        res["equal_dt"] = {"dt": dt, "MuJoCo": eq}
    return res


def _finite(v):
    """The report with a failed run's error (inf) as null: JSON has no infinity."""
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _print(name: str, res: dict, horizon: float) -> None:
    for tol, r in res["tolerances"].items():
        print(f"\n{name}: tip within {tol} m of the reference over {horizon:g} s")
        print(f"  {'engine':<8} {'integrator':<13} {'dt':>7} {'error':>9} {'ns/step':>9} {'ms/sim s':>10}")
        for key, rows in res["ladders"].items():
            run_ = r["runs"].get(key)
            if run_:
                extra = " (stiff constraints)" if run_.get("stiff") else ""
                print(f"  {key.split()[0]:<8} {key.split()[1]:<13} {run_['dt']:>7g} {run_['error']:>9.2e} "
                      f"{run_['ns_per_step']:>9.0f} {run_['ms_per_simulated_s']:>10.4f}{extra}")
            else:
                print(f"  {key.split()[0]:<8} {key.split()[1]:<13} no dt down to {rows[-1]['dt']:g} within {tol}"
                      f" (best {min(row['error'] for row in rows):.2e})")
                notes = [row for row in rows if "note" in row]
                for row in notes[:3]:
                    print(f"  {'':<22} dt {row['dt']:g}: {row['note']}")
                if len(notes) > 3:
                    print(f"  {'':<22} (and at {len(notes) - 3} smaller dt; all in --json)")
        b = r["best"]
        if "ratio_equal_accuracy" in r:
            print(f"  equal accuracy: mbforge {b['mbforge']['integrator']} / MuJoCo {b['MuJoCo']['integrator']}, "
                  f"CPU time per simulated second: {r['ratio_equal_accuracy']:.3f}")
        if "host" in r:
            h = r["host"]
            print(f"  mbforge's host integrator (scipy DOP853, rtol {h['rtol']:g}): error {h['error']:.2e}, "
                  f"{h['ms_per_simulated_s']:.1f} ms/sim s; the step kernel / it: {h['ratio']:.5f}")
        elif r["best"]["mbforge"]:
            print(f"  mbforge's host integrator: no rtol down to {RTOLS[-1]:g} within {tol}")
        if "equal_dt" in r:
            e = r["equal_dt"]
            print(f"  equal dt {e['dt']:g}: ns per step mbforge / MuJoCo " + ", ".join(
                f"{i} {v['ratio']:.3f} (its error {v['error']:.1e})" for i, v in e["MuJoCo"].items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="pendulum,chain2,chain5,nfourbar4")
    ap.add_argument("--horizon", type=float, default=2.0)
    ap.add_argument("--tol", default="1e-3,1e-4", help="tip tolerances [m], comma-separated")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    check_json(ap, args.json)
    from mbforge.examples import load
    from mbforge.model.errors import ModelError

    try:
        cases = [case(n) for n in args.cases.split(",")]
        for c in cases:
            load(c.example, **c.options)
    except ModelError as e:
        ap.error(f"--cases: {e}")
    except ValueError as e:
        ap.error(f"--cases: no case {str(e)!r}; cases are pendulum, chainN, nfourbarN (N a number)")
    try:
        tols = sorted((float(t) for t in args.tol.split(",")), reverse=True)
    except ValueError:
        ap.error(f"--tol: not a list of numbers: {args.tol}")
    if not tols or min(tols) <= 0 or not args.horizon > 0 or args.repeat < 1:
        ap.error("--tol, --horizon and --repeat must be positive")
    if abs(args.horizon / SAMPLE - round(args.horizon / SAMPLE)) > 1e-9:
        ap.error(f"--horizon must be a multiple of {SAMPLE:g} s")
    import mujoco

    from .host import CFLAGS

    print(f"mbforge's c-double step kernel (gcc {' '.join(CFLAGS)}) against MuJoCo {mujoco.__version__} mj_step; "
          f"ms/sim s: CPU time per simulated second; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            report[c.name] = compare(c, tols, args.horizon, args.repeat, Path(tmp))
            _print(c.name, report[c.name], args.horizon)
    if args.json:
        Path(args.json).write_text(json.dumps(_finite(report), indent=1))
    return 0


if __name__ == "__main__":
    run("step", main)
