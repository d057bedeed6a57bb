"""`mbforge simulate MODEL [--motion M] [--set K=V] [--q0 NAME=V] [--qd0 NAME=V] --out DIR`:
the double-precision reference run of a model, written as CSV and PNG plots.

A fully driven model is simulated kinematically (position, velocity and acceleration at
each time, no integration) and, when it has inertia and actuators, by inverse dynamics;
a model with free degrees of freedom is integrated forward (scipy's solve_ivp, `--method`,
`--rtol`, `--atol`) from a consistent state: the coordinates and rates given with `--q0`
and `--qd0` are held and the others solved from the constraints (from the model's guesses
and rest when nothing is given). Columns: t, the model's outputs, then q.<name>, qd.<name>
and qdd.<name> for every coordinate, the actuator forces, and for forward runs T, E and
V = E - T; then, last, the run's checks (CHECKS, see _checks): residual_phi and residual_vel
(|Phi| and |Phi_q qd + Phi_t|) and, for forward runs, energy_drift (T + V relative to t=0,
less the work done on the system when there is any). A warning names the first time a
coordinate, rate or acceleration leaves its declared range (range, vrange, arange).

"Fully driven" is decided by rank, not by counting equations (`solvers.mobility`: the SVD of
[Phi_q; C] at the consistent state of the start time): a closed loop with redundant
constraints (the Bricard linkage: 6 equations of rank 5) is integrated forward, and a driven
model with a redundant equation still runs kinematically.
"""
from __future__ import annotations

import io
import re
import sys
import warnings
from pathlib import Path

import numpy as np

from .columns import CHECKS, columns, csv_text, load as _load, pairs as _pairs  # noqa: F401

METHODS = ("DOP853", "RK45", "Radau", "BDF", "LSODA")
# bounds of the run's size: a million rows is a 0.3 GB CSV; 1e5 s of a mechanism's motion
# at the default tolerances is hours of integration (shown with progress on a terminal)
POINTS_MAX = 1_000_000
T_END_MAX = 1e5


def register(subparsers) -> None:
    from ..options import folder, number, whole

    p = subparsers.add_parser("simulate", help="simulate a model (kinematics and inverse dynamics, or forward "
                                               "dynamics) and write CSV and PNG plots")
    p.add_argument("model", help="a shipped example (e.g. stewart), a .py file with build() or a .urdf robot")
    p.add_argument("--motion", default=None, help="prescribed motion of examples that offer several "
                                                  "(stewart: heave, yaw, roll, pitch)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="set",
                   help="an option of the model's build() (repeatable), e.g. --set length=0.3")
    p.add_argument("--out", required=True, type=folder, help="output folder")
    p.add_argument("--points", type=whole(2, POINTS_MAX), default=None,
                   help=f"number of output times, 2 to {POINTS_MAX} (default 251; not with --device: --every)")
    p.add_argument("--t-end", type=number(-T_END_MAX, T_END_MAX, f"a number of seconds up to {T_END_MAX:g}"),
                   default=None, help="end time, after the model's start, up to 1e5 s (default: the model's "
                                      "time range)")
    p.add_argument("--q0", action="append", default=[], metavar="NAME=VALUE",
                   help="initial value of a coordinate, held while the others are solved from the "
                        "constraints (repeatable; forward dynamics)")
    p.add_argument("--qd0", action="append", default=[], metavar="NAME=VALUE",
                   help="initial rate of a coordinate, held while the others are solved from the "
                        "velocity constraints (repeatable; forward dynamics; the rest start at 0)")
    p.add_argument("--method", default="DOP853", choices=METHODS, help="integrator (scipy solve_ivp; default DOP853)")
    p.add_argument("--rtol", type=number(0, 1, "a positive number up to 1"), default=1e-10,
                   help="integrator relative tolerance, in (0, 1] (default 1e-10)")
    p.add_argument("--atol", type=number(0, 1, "a positive number up to 1"), default=1e-12,
                   help="integrator absolute tolerance, in (0, 1] (default 1e-12)")
    _register_device(p)
    p.set_defaults(func=cmd_simulate)


DEVICE_FLAGS = ("port", "target", "dt", "integrator", "iterations", "penalty", "solve", "reduced", "every")


def _register_device(p) -> None:
    """The flags of a run on a board (simulate/device.py); --dt is required with --device."""
    from ..kernels.options import penalty_ratio
    from ..kernels.step import INTEGRATORS
    from ..options import number, whole

    g = p.add_argument_group("on a device (the model's step kernel on a board, checked against the host)")
    g.add_argument("--device", default=None, metavar="ENV",
                   help="run on this board (an environment of `mbforge firmware`; emulated ones start in QEMU)")
    g.add_argument("--port", default=None, help="the serial port of a real board running the generated firmware")
    g.add_argument("--target", default=None, choices=("c-float32", "c-double", "c-fixed"),
                   help="the device kernel's target (default c-float32)")
    g.add_argument("--dt", type=number(0, 1, "a number of seconds in (0, 1]"), default=None, help="the time step [s]")
    g.add_argument("--integrator", default=None, choices=("auto", *INTEGRATORS),
                   help="the step's integrator (default auto: ali3p with constraints, rk4 without)")
    g.add_argument("--iterations", type=whole(1, 50), default=None, help="ali3p's Newton iterations per step")
    g.add_argument("--penalty", type=penalty_ratio, default=None,
                   help="ali3p's penalty ratio, 0 with rk4: exact multipliers (as mbforge generate --kernel step "
                        "--penalty; default the kernel's)")
    g.add_argument("--solve", default=None, choices=("auto", "kkt"),
                   help="rk4 --penalty 0: how the exact multipliers are solved (as mbforge generate --kernel step "
                        "--solve; default auto)")
    g.add_argument("--reduced", action="store_const", const=True, default=None,
                   help="step over the independent coordinates of the model's closed forms (Model.explicit; as "
                        "mbforge generate --kernel step --reduced); the CSV and the report hold every coordinate")
    g.add_argument("--every", type=number(0, T_END_MAX, "a number of seconds"), default=None,
                   help="sample interval [s], a multiple of --dt (default: about 250 samples over the horizon)")


def _device_or_host(args) -> bool:
    """True for a run on a device; CLIError for flags of the other kind."""
    from ..errors import CLIError

    if args.device is None:
        given = [f"--{f}" for f in DEVICE_FLAGS if getattr(args, f) is not None]
        if given:
            raise CLIError(f"{', '.join(given)} only with --device ENV (a run on a board)")
        return False
    if args.points is not None:
        raise CLIError("--points is the host run's: with --device the samples are every --every seconds")
    if args.dt is None:
        raise CLIError("--device needs the time step --dt (seconds)")
    args.target = args.target or "c-float32"
    args.integrator = args.integrator or "auto"
    return True


def cmd_simulate(args) -> int:
    from ..errors import CLIError
    from ..examples import parse_options
    from ..outdir import OutDir, OutDirError
    from ..reference.solvers import AssemblyError, DynamicsError

    if _device_or_host(args):
        from .device import cmd_simulate_device
        from ..reference.solvers import RedundantConstraintsWarning

        with warnings.catch_warnings(record=True) as caught:  # one line each, as the host run's
            warnings.simplefilter("always", RedundantConstraintsWarning)
            try:
                return cmd_simulate_device(args)
            finally:
                for w in caught:
                    if not issubclass(w.category, RedundantConstraintsWarning):
                        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
                for text in dict.fromkeys(str(w.message) for w in caught
                                          if issubclass(w.category, RedundantConstraintsWarning)):
                    print(f"mbforge simulate: warning: {text}", file=sys.stderr)
    try:  # before the run: a result that cannot be written is not computed
        OutDir(args.out).check_writable()
    except OutDirError as e:
        raise CLIError(str(e)) from None
    model, tag = _load(args.model, args.motion, parse_options(args.set))
    try:
        result = simulate(model, args.out, points=args.points or 251, t_end=args.t_end, tag=tag,
                          q0=_pairs(args.q0, "--q0"), qd0=_pairs(args.qd0, "--qd0"),
                          method=args.method, rtol=args.rtol, atol=args.atol)
    except (AssemblyError, DynamicsError) as e:
        raise CLIError(str(e)) from None
    for w in result["warnings"]:
        print(f"mbforge simulate: warning: {w}", file=sys.stderr)
    print(result["summary"])
    return 0


def _initial_state(kin, eqs, t0: float, q0: dict, qd0: dict):
    """Kinematics.initial, its refusals as one CLI line."""
    from ..errors import CLIError
    from ..reference.solvers import DynamicsError

    try:
        return kin.initial(t0, q0, qd0)
    except DynamicsError as e:
        raise CLIError(str(e)) from None


def _range_warnings(eqs, times, Q, QD, QDD) -> list[str]:
    """The first time each coordinate, rate or acceleration leaves its declared range."""
    out = []
    for kind, data, syms in (("coordinate", Q, eqs.q), ("rate", QD, eqs.qd), ("acceleration", QDD, eqs.qdd)):
        for j, (q, s) in enumerate(zip(eqs.q, syms)):
            lo, hi = eqs.ranges[s]
            bad = np.nonzero((data[:, j] < lo) | (data[:, j] > hi))[0]
            if bad.size:
                i = int(bad[0])
                out.append(f"{kind} {q.value.name} left its declared range ({lo:g}, {hi:g}) at t={times[i]:.6g} "
                           f"(value {data[i, j]:.6g})")
    return out


def _motion(kin, eqs, times, q0, qd0, method, rtol, atol):
    """(Q, QD, QDD, U, traj, mode, note): the driven motion (traj None) when the model is fully
    driven, by rank (`solvers.mobility`), else a forward run from a consistent state."""
    from ..errors import CLIError
    from ..reference.solvers import Dynamics, DynamicsError, mobility

    mob = mobility(eqs)
    if mob.driven:
        if q0 or qd0:
            raise CLIError(f"{eqs.model} is fully driven ({mob.describe()}): its motion is prescribed, "
                           "--q0/--qd0 do not apply")
        if isinstance(kin, Dynamics) and eqs.actuator_names:
            r = kin.inverse_motion(times)
            return r["Q"], r["QD"], r["QDD"], r["U"], None, "kinematics + inverse dynamics", ""
        Q, QD, QDD = kin.motion(times)
        return Q, QD, QDD, None, None, "kinematics", ""
    if not isinstance(kin, Dynamics):
        raise DynamicsError(f"{eqs.model}: has free degrees of freedom but no inertia: nothing to simulate "
                            f"({mob.describe()})")
    lo, hi = float(times[0]), float(times[-1])
    given = bool(q0 or qd0)
    if not given:  # the model's own initial state (Model.initial), if it declares one
        q0, qd0 = eqs.initial_q, eqs.initial_qd
    qs, qds = _initial_state(kin, eqs, lo, q0 or {}, qd0 or {})
    from ..progress import progress_bar

    with progress_bar(len(times) - 1, "simulate", "step") as update:
        traj = kin.forward(hi, q0=qs, qd0=qds, t0=lo, dt=(hi - lo) / (len(times) - 1), method=method, rtol=rtol,
                           atol=atol, progress=update)
    QDD = np.array([kin.accelerations(float(t), q, qd)[0] for t, q, qd in zip(traj.t, traj.Q, traj.QD)])
    mode = "forward dynamics" + (" from a given state" if given else "")
    note = f"; {traj.energy_report()}, constraint residual {traj.residual:.1e}"
    return traj.Q, traj.QD, QDD, None, traj, mode, note


def simulate(model, out: Path, points: int = 251, t_end: float | None = None, tag: str | None = None,
             q0: dict | None = None, qd0: dict | None = None, method: str = "DOP853", rtol: float = 1e-10,
             atol: float = 1e-12) -> dict:
    """Run the reference simulation of `model` and write <name>[_tag].csv and .png in `out`.
    Returns {"csv": path, "png": path, "columns": [...], "data": array, "summary": str,
    "warnings": [str]}."""
    from ..errors import CLIError
    from ..reference.solvers import Dynamics, Kinematics, RedundantConstraintsWarning

    eqs = model.equations()
    lo, hi = eqs.ranges[eqs.t]
    hi = hi if t_end is None else float(t_end)
    if not hi > lo:
        raise CLIError(f"--t-end {hi:g}: the run would end before it starts ({eqs.model} starts at t={lo:g})")
    times = np.linspace(lo, hi, points)
    kin = Dynamics(eqs) if eqs.M is not None else Kinematics(eqs)
    with warnings.catch_warnings(record=True) as caught:  # redundancy found on the way: one warning line
        warnings.simplefilter("always", RedundantConstraintsWarning)
        Q, QD, QDD, U, traj, mode, note = _motion(kin, eqs, times, q0, qd0, method, rtol, atol)
    cols = columns(kin, eqs, times, Q, QD, QDD, U, traj)
    if U is not None:
        peak = ", ".join(f"{n} {np.max(np.abs(U[:, k])):.6g}" for k, n in enumerate(eqs.actuator_names))
        note = f"; peak |actuator|: {peak}"
    found = [str(w.message) for w in caught if issubclass(w.category, RedundantConstraintsWarning)]
    found += _range_warnings(eqs, times, Q, QD, QDD)
    stem = model.name + (f"_{tag}" if tag else "")
    names = list(cols)
    data = np.column_stack([cols[k] for k in names])
    text = csv_text(names, data)
    # the plot shows the outputs (the coordinates when the model declares none), forces and
    # energies; rates and accelerations are in the CSV
    shown = [n for n in names if not n.startswith(("qd.", "qdd.")) and n not in CHECKS]
    if any(not n.startswith("q.") for n in shown[1:] if n not in eqs.actuator_names and n not in ("T", "E", "V")):
        shown = [n for n in shown if not n.startswith("q.")]
    image = _plot(f"{stem}: {mode}", shown, data[:, [names.index(n) for n in shown]])
    csv, png = _write(out, {f"{stem}.csv": text, f"{stem}.png": image})
    summary = (f"{stem}: {mode}, {points} points over [{lo:g}, {hi:g}] s{note} -> {csv}, {png}")
    return {"csv": csv, "png": png, "columns": names, "data": data, "summary": summary, "warnings": found}


def _write(out, files: dict[str, bytes]) -> list[Path]:
    """The files written into `out` through mbforge.outdir (both or neither, no write
    through a symlink); CLIError, one line, when they cannot be."""
    from ..errors import CLIError
    from ..outdir import OutDir, OutDirError

    try:
        root = OutDir(out).write_files(files)
    except OutDirError as e:
        raise CLIError(str(e)) from None
    return [root / name for name in files]


def _panels(names: list[str]) -> dict[str, list[int]]:
    """{panel title: column indices}: the columns after t grouped by family (f1..f6, L1_d..L6_d),
    each panel titled with the names it holds ("f1 .. f6", never a pattern like "fk")."""
    families: dict[str, list[int]] = {}
    for i, n in enumerate(names[1:], start=1):
        families.setdefault(re.sub(r"\d+", "#", n), []).append(i)
    return {names[c[0]] if len(c) == 1 else f"{names[c[0]]}, {names[c[1]]}" if len(c) == 2
            else f"{names[c[0]]} .. {names[c[-1]]}": c for c in families.values()}


def _plot(title: str, names: list[str], data: np.ndarray) -> bytes:
    """The PNG: one panel per family of columns (f1..f6 together, L1_d..L6_d together, ...)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _panels(names)
    keys = list(groups)
    ncol = 3 if len(keys) > 4 else min(2, len(keys))
    nrow = -(-len(keys) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 2.6 * nrow), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        for i in groups[key]:
            ax.plot(data[:, 0], data[:, i], label=names[i], lw=1.2)
        vals = data[:, groups[key]]
        lo, hi = float(np.min(vals)), float(np.max(vals))
        if hi - lo < 1e-9 * max(1.0, abs(lo), abs(hi)):  # constant up to rounding noise
            mid = (lo + hi) / 2
            pad = max(abs(mid) * 0.05, 1e-3)
            ax.set_ylim(mid - pad, mid + pad)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("t [s]", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if len(groups[key]) > 1:
            ax.legend(fontsize=6, ncol=2)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    return image.getvalue()
