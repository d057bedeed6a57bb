"""What a host run and a device run write alike: the model loaded from the command line,
NAME=VALUE pairs, the CSV's columns and text (simulate/cli.py and simulate/device.py)."""
from __future__ import annotations

import io

import numpy as np


def load(spec: str, motion: str | None, options: dict):
    """(model, motion tag): an example (with its motion; the default one when not given)
    or a .py or .urdf file."""
    from ..examples import EXAMPLES, default_motion, load_model

    model = load_model(spec, motion, options)
    if spec in EXAMPLES and motion is None:
        motion = default_motion(spec)
    return model, motion


def pairs(items, flag: str) -> dict[str, float]:
    from ..errors import CLIError

    out = {}
    for item in items:
        name, eq, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = None
        if not eq or not name or value is None or not np.isfinite(value):
            raise CLIError(f"{flag} {item!r}: expected NAME=NUMBER")
        out[name.strip()] = value
    return out


# the last columns of every CSV, checks of the run rather than its motion (not plotted)
CHECKS = ("residual_phi", "residual_vel", "energy_drift")


def _checks(kin, times, Q, QD, traj) -> dict[str, np.ndarray]:
    """residual_phi = |Phi| and residual_vel = |Phi_q qd + Phi_t| (with the velocity
    constraints' rows) at each output time: of a forward run, before the state is projected
    back onto the constraints there (what the integrator alone kept over one output
    interval); of a driven motion, at its solution. energy_drift (forward runs of a model with
    energy): T + V - (T + V at t0), less the work W of non-conservative forces, actuators and
    drivers when any acts (the balance's residual)."""
    if traj is None:
        phi, vel = kin.residual_norms(times, Q, QD)
        return {"residual_phi": phi, "residual_vel": vel}
    out = {"residual_phi": traj.phi_norm, "residual_vel": traj.vel_norm}
    if traj.E is not None:
        out["energy_drift"] = traj.E - traj.E[0] - (traj.W if traj.W is not None else 0.0)
    return out


def columns(kin, eqs, times, Q, QD, QDD, U, traj) -> dict[str, np.ndarray]:
    """The CSV's columns of a run (module docstring), in order: also those of a device's
    run (`mbforge simulate --device`, with the device's states in Q, QD and traj)."""
    cols: dict[str, np.ndarray] = {"t": times}
    cols.update(kin.outputs(times, Q, QD))
    for prefix, data in (("q", Q), ("qd", QD), ("qdd", QDD)):
        for j, s in enumerate(eqs.q):
            cols[f"{prefix}.{s.value.name}"] = data[:, j]
    if U is not None:
        for k, name in enumerate(eqs.actuator_names):
            cols[name] = U[:, k]
    if traj is not None:
        cols["T"] = traj.T
        cols["E"] = traj.E
        cols["V"] = traj.E - traj.T
    cols.update(_checks(kin, times, Q, QD, traj))
    return cols


def csv_text(names: list[str], data: np.ndarray) -> bytes:
    text = io.StringIO()
    np.savetxt(text, data, delimiter=",", header=",".join(names), comments="", fmt="%.12g")
    return text.getvalue().encode()
