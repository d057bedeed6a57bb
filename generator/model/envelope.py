"""Where a mechanism operates: its operating envelope, declared in its independent
quantities (Model.operate, Model.operate_input) and overridden from JSON (`mbforge
generate --envelope FILE.json`).

A quantity is an independent variable theta of the mechanism with a range, a rate range
and an acceleration range; an equation g(q, theta) = 0 ties it to the coordinates (a
coordinate itself: g = q - theta; a crank angle in natural coordinates:
xB sin(theta) - yB cos(theta) = 0). With the kinematic constraints, the quantities'
equations fix the configuration; domain.cover encloses every consistent state (q, qd,
qdd) reachable with theta, theta', theta'' anywhere in their ranges. Inputs are the
actuator forces' ranges. `cells` is how many equal parts the cover starts from along a
quantity (split further where the enclosure fails). A region (Model.operate_region) keeps
the states of the quantities where its expression is <= 0 (a cylinder, a disc of angles):
cells proven outside every point of it are left out of the cover, samples outside it drawn
again; cells it cuts stay whole (sound: the cover still holds every state of the region).

Invariants: every range is non-empty (lo < hi, or lo == hi for a fixed rate); a quantity's
symbols (theta, theta_d, theta_dd) live in the model's scope with kind "input" and the names
env_<name>, env_<name>_d, env_<name>_dd; `to_json` / `override` round-trip.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..ir.atom import Atom
from .errors import ModelError


@dataclass(frozen=True)
class Quantity:
    name: str
    theta: Atom  # the quantity's symbol, and those of its rate and acceleration
    theta_d: Atom
    theta_dd: Atom
    equation: Atom  # g(q, theta) = 0
    range: tuple[float, float]
    rate: tuple[float, float]
    accel: tuple[float, float]
    cells: int = 1


@dataclass(frozen=True)
class Region:
    name: str
    expr: Atom  # of the quantities' thetas: the region is where expr <= 0


@dataclass(frozen=True)
class Envelope:
    quantities: tuple[Quantity, ...] = ()
    inputs: dict = field(default_factory=dict)  # actuator name -> (lo, hi)
    source: str = "model"  # "model" or the override file's name
    regions: tuple[Region, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.quantities)

    def to_json(self) -> dict:
        """The envelope as the manifest records it and --envelope reads it."""
        out = {"quantities": {q.name: {"range": list(q.range), "rate": list(q.rate), "accel": list(q.accel),
                                       "cells": q.cells} for q in self.quantities},
               "inputs": {k: list(v) for k, v in sorted(self.inputs.items())}}
        if self.regions:  # recorded, not read back: a region is an expression of the model's
            out["regions"] = {r.name: f"{r.expr} <= 0" for r in self.regions}
        return out

    def override(self, data, where: str, actuators: list[str]) -> "Envelope":
        """A copy with the ranges of `data` (parsed JSON: {"quantities": {name: {"range": [lo, hi],
        "rate": .., "accel": .., "cells": n}}, "inputs": {actuator: [lo, hi]}}) replacing the
        model's; one ModelError naming the key for anything else."""
        if not isinstance(data, dict) or set(data) - {"quantities", "inputs", "regions"}:
            raise ModelError(f"{where}: an envelope is an object with \"quantities\" and/or \"inputs\"")
        if "regions" in data and data["regions"] != self.to_json().get("regions"):
            raise ModelError(f"{where}: regions: a region is an expression of the model (Model.operate_region); "
                             f"an envelope file may only repeat the model's own ({self.to_json().get('regions', {})})")
        by_name = {q.name: q for q in self.quantities}
        qs = dict(by_name)
        for name, spec in (data.get("quantities") or {}).items():
            if name not in by_name:
                known = ", ".join(by_name) or "none"
                raise ModelError(f"{where}: quantities.{name}: the model declares no quantity {name!r} "
                                 f"(known: {known})")
            if not isinstance(spec, dict) or set(spec) - {"range", "rate", "accel", "cells"}:
                raise ModelError(f"{where}: quantities.{name}: expected keys range, rate, accel, cells")
            q = by_name[name]
            kw = {k: _range(spec[k], f"{where}: quantities.{name}.{k}", fixed_ok=k != "range")
                  for k in ("range", "rate", "accel") if k in spec}
            if "cells" in spec:
                kw["cells"] = _cells(spec["cells"], f"{where}: quantities.{name}.cells")
            qs[name] = replace(q, **kw)
        inputs = dict(self.inputs)
        for name, r in (data.get("inputs") or {}).items():
            if name not in actuators:
                raise ModelError(f"{where}: inputs.{name}: the model has no actuator {name!r} "
                                 f"(actuators: {', '.join(actuators) or 'none'})")
            inputs[name] = _range(r, f"{where}: inputs.{name}")
        return Envelope(tuple(qs[q.name] for q in self.quantities), inputs, Path(where).name, self.regions)


def load_override(path: str) -> dict:
    """The parsed JSON of an --envelope file; ModelError naming the file otherwise."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise ModelError(f"--envelope {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ModelError(f"--envelope {path}: cannot read it ({e})") from None
    except json.JSONDecodeError as e:
        raise ModelError(f"--envelope {path}: not JSON ({e.msg} at line {e.lineno})") from None


def _range(r, where: str, fixed_ok: bool = True) -> tuple[float, float]:
    ok = isinstance(r, (list, tuple)) and len(r) == 2 and all(isinstance(x, (int, float)) for x in r)
    if ok:
        lo, hi = float(r[0]), float(r[1])
        ok = math.isfinite(lo) and math.isfinite(hi) and (lo < hi or (fixed_ok and lo == hi))
    if not ok:
        raise ModelError(f"{where}: expected [lo, hi] with finite lo {'<=' if fixed_ok else '<'} hi, got {r!r}")
    return lo, hi


def _cells(n, where: str) -> int:
    if not (isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 4096):
        raise ModelError(f"{where}: expected a whole number of cells in 1..4096, got {n!r}")
    return n
