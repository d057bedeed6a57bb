"""`mbforge simulate MODEL [--motion M] --out DIR`: the double-precision reference run of a
model, written as CSV and PNG plots.

A fully driven model is simulated kinematically (position, velocity and acceleration at
each time, no integration) and, when it has inertia and actuators, by inverse dynamics;
a model with free degrees of freedom is integrated forward from its assembled guess at
rest. Columns: t, then the model's outputs (its coordinates if it declares none), then
the actuator forces; forward runs add T, V and E = T + V.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np


def register(subparsers) -> None:
    p = subparsers.add_parser("simulate", help="simulate a model (kinematics and inverse dynamics, or forward "
                                               "dynamics) and write CSV and PNG plots")
    p.add_argument("model", help="a shipped example (e.g. stewart) or a .py file with build()")
    p.add_argument("--motion", default=None, help="prescribed motion of examples that offer several "
                                                  "(stewart: heave, yaw, roll, pitch)")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--points", type=int, default=251, help="number of output times (default 251)")
    p.add_argument("--t-end", type=float, default=None, help="end time (default: the model's time range)")
    p.set_defaults(func=cmd_simulate)


def _load(spec: str, motion: str | None):
    """(model, motion tag): an example (with its motion; the default one when not given)
    or a .py file."""
    from ..examples import EXAMPLES, default_motion, load_model

    model = load_model(spec, motion)
    if spec in EXAMPLES and motion is None:
        motion = default_motion(spec)
    return model, motion


def cmd_simulate(args) -> int:
    from ..errors import CLIError
    from .solvers import AssemblyError, DynamicsError

    model, tag = _load(args.model, args.motion)
    if args.points < 2:
        raise CLIError("--points must be at least 2")
    try:
        result = simulate(model, args.out, points=args.points, t_end=args.t_end, tag=tag)
    except (AssemblyError, DynamicsError) as e:
        raise CLIError(str(e)) from None
    print(result["summary"])
    return 0


def simulate(model, out: Path, points: int = 251, t_end: float | None = None, tag: str | None = None) -> dict:
    """Run the reference simulation of `model` and write <name>[_tag].csv and .png in `out`.
    Returns {"csv": path, "png": path, "columns": [...], "data": array, "summary": str}."""
    from .solvers import Dynamics, Kinematics

    eqs = model.equations()
    lo, hi = eqs.ranges[eqs.t]
    hi = hi if t_end is None else float(t_end)
    times = np.linspace(lo, hi, points)
    kin = Dynamics(eqs) if eqs.M is not None else Kinematics(eqs)
    driven = len(eqs.phi) + len(eqs.nh) >= len(eqs.q)
    cols: dict[str, np.ndarray] = {"t": times}
    note = ""
    if driven:
        if isinstance(kin, Dynamics) and eqs.actuator_names:
            r = kin.inverse_motion(times)
            Q, QD, U = r["Q"], r["QD"], r["U"]
        else:
            Q, QD, _ = kin.motion(times)
            U = None
        mode = "kinematics" + (" + inverse dynamics" if U is not None else "")
    else:
        if not isinstance(kin, Dynamics):
            from .solvers import DynamicsError

            raise DynamicsError(f"{eqs.model}: has free degrees of freedom but no inertia: nothing to simulate")
        dt = (hi - lo) / (points - 1)
        traj = kin.forward(hi, t0=lo, dt=dt)
        Q, QD, U = traj.Q, traj.QD, None
        mode = "forward dynamics"
        note = f"; {traj.energy_report()}, constraint residual {traj.residual:.1e}"
    outs = kin.outputs(times, Q, QD)
    if not outs:
        outs = {s.value.name: Q[:, j] for j, s in enumerate(eqs.q)}
    cols.update(outs)
    if U is not None:
        for k, name in enumerate(eqs.actuator_names):
            cols[name] = U[:, k]
        peak = ", ".join(f"{n} {np.max(np.abs(U[:, k])):.6g}" for k, n in enumerate(eqs.actuator_names))
        note = f"; peak |actuator|: {peak}"
    if not driven:
        cols["T"] = traj.T
        cols["E"] = traj.E
        cols["V"] = traj.E - traj.T
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = model.name + (f"_{tag}" if tag else "")
    names = list(cols)
    data = np.column_stack([cols[k] for k in names])
    csv = out / f"{stem}.csv"
    np.savetxt(csv, data, delimiter=",", header=",".join(names), comments="", fmt="%.12g")
    png = out / f"{stem}.png"
    _plot(png, f"{stem}: {mode}", names, data)
    summary = (f"{stem}: {mode}, {points} points over [{lo:g}, {hi:g}] s{note} -> {csv}, {png}")
    return {"csv": csv, "png": png, "columns": names, "data": data, "summary": summary}


def _plot(path: Path, title: str, names: list[str], data: np.ndarray) -> None:
    """One panel per family of columns (f1..f6 together, L1_d..L6_d together, ...)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[int]] = {}
    for i, n in enumerate(names[1:], start=1):
        groups.setdefault(re.sub(r"\d+", "#", n), []).append(i)
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
        ax.set_title(key.replace("#", "k") if len(groups[key]) > 1 else key, fontsize=9)
        ax.set_xlabel("t [s]", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if len(groups[key]) > 1:
            ax.legend(fontsize=6, ncol=2)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
