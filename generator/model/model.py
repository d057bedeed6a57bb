"""The user-facing description of a mechanism: coordinates, bodies, joints, forces, drivers.

A Model collects named coordinates (each with its velocity and acceleration symbols and
declared ranges), named equations (kinematic constraints, driving constraints and
non-holonomic velocity constraints), bodies with their inertia, applied forces, actuators
and named outputs; `equations()` hands them, atomized, to the kernel builders and solvers.
Names are checked as they are added, so a bad model fails where it is written, with the
name of the model and of the offending coordinate, equation or body; every name is an
identifier (mbforge.names: it is printed into the generated code).

Each Model owns a symbol Scope: its coordinates (q, q_d, q_dd), parameters and t are
symbols of that scope, so two models in one process may use the same names (distinct
atoms, each parameter with its own model's value). Within a model a name is used once.

The coordinate families are in their own modules and all produce Body objects that joints
and forces use alike: reference-point bodies (bodies.Body2D, bodies.Body3D with Euler
parameters), natural coordinates (natural.*) and relative coordinates (relative.Relative).
"""
from __future__ import annotations

import math
from dataclasses import replace

from ..ir import (ONE, ZERO, Atom, ExpressionError, Scope, Sparse, add, as_atom, from_sympy, jacobian, sub, subs,
                  symbol, time_derivative, topo)
from ..names import is_name
from . import forces as _forces
from . import joints as _joints
from .bodies import Body, Body2D, Body3D, BodyError, Ground
from .envelope import Envelope, Quantity, Region, _cells as _env_cells, _range as _env_range
from .equations import Equations
from .errors import ModelError, check_name
from .relative import Relative

# the kernels that read the explicit joint tree (kernels/recursive.py), the only ones a
# floating base goes through
RECURSIVE = ("inverse-dynamics-rnea", "forward-dynamics-aba", "mass-matrix-crba", "frame-kinematics")


class _Context:
    """What bodies and forces need while the dynamic equations are built."""

    def __init__(self, model: "Model"):
        self.q = model.q
        self.qd = model.qd
        self.t = model.t
        self.tangents = model._tangents()
        self.gravity = model._gravity
        self.qdd = model.qdd
        self.index = {s: j for j, s in enumerate(model.q)}

    def jac_q(self, v) -> Sparse:
        return jacobian(v, self.q)

    def jac_qd(self, v) -> Sparse:
        return jacobian(v, self.qd)

    def grad(self, s: Atom) -> dict[int, Atom]:
        return {j: a for (_, j), a in jacobian([s], self.q).entries.items()}


class Model:
    def __init__(self, name: str):
        if not is_name(name):
            raise ModelError(f"model name {name!r} must be an identifier (it prefixes every emitted C symbol)")
        self.name = name
        self.scope = Scope(name)  # the model's symbols: names are unique here, not process-wide
        self.t = self.scope.new("t", "t")
        self.q: list[Atom] = []
        self.qd: list[Atom] = []
        self.qdd: list[Atom] = []
        self.guess: dict[Atom, float] = {}
        self.initial_q: dict[str, float] = {}  # Model.initial: the state simulations start from
        self.initial_qd: dict[str, float] = {}
        self.ranges: dict[Atom, tuple[float, float]] = {self.t: (0.0, 1.0)}
        self.phi: list[Atom] = []
        self.phi_names: list[str] = []
        self.driving: list[bool] = []
        self.nh: list[Atom] = []
        self.nh_names: list[str] = []
        self.bodies: list[Body] = []
        self.forces: list[_forces.ForceElement] = []
        self.actuators: list[_forces.Actuator] = []
        self.outputs: dict[str, Atom] = {}
        self.params: list[Atom] = []
        self._gravity = None
        self._names: set[str] = set()
        self._eq_names: set[str] = set()
        self._tang = None
        self._relative = None
        # explicit joint tree (relative.TreeJoint, parents first; from_urdf sets it): the
        # recursive kernels read it instead of the bases and points
        self.joint_tree: tuple | None = None
        # its free-flying root (relative.FloatingBase; from_urdf(floating=True)): only the
        # recursive kernels take it, equations() refuses
        self.floating_base = None
        # mimic joints (from_urdf(mimic=True)): coordinate -> (source coordinate, multiplier,
        # offset), each also held by its constraint mimic_<name>; the recursive kernels
        # substitute them instead of solving the constraints
        self.mimic: dict[Atom, tuple[Atom, float, float]] = {}
        self.explicit_coords: dict[Atom, Atom] = {}  # dependent coordinate -> atom in the others
        self.explicit_measures: dict[str, Atom] = {}  # actuator -> its measure in the independent coordinates
        self.explicit_guards: list[tuple[str, Atom, float]] = []  # (what, atom, smallest value allowed)
        self.envelope = Envelope()

    # ---- coordinates -------------------------------------------------------------------
    def coordinate(self, name: str, guess: float = 0.0, range=(-1.0, 1.0), vrange=(-1.0, 1.0),
                   arange=(-1.0, 1.0)) -> Atom:
        """Add a generalized coordinate; returns its symbol (velocity name_d, accel name_dd)."""
        check_name(self, "coordinate", name)
        if name in self._names:
            raise ModelError(f"{self.name}: coordinate {name!r} is defined twice")
        for r, what in ((range, "range"), (vrange, "velocity range"), (arange, "acceleration range")):
            if not (len(r) == 2 and r[0] < r[1]):
                raise ModelError(f"{self.name}: coordinate {name!r} has an empty {what} {r!r}")
        if not range[0] <= guess <= range[1]:
            raise ModelError(f"{self.name}: coordinate {name!r}: guess {guess} is outside its range {range!r}")
        for n in (name, name + "_d", name + "_dd"):  # all three free before any is made
            if n in self.scope:
                raise ModelError(f"{self.name}: coordinate {name!r}: the name {n!r} is taken "
                                 f"(by a symbol of kind {self.scope.get(n).value.kind!r})")
        self._names.add(name)
        q = self.scope.new(name, "q")
        qd = self.scope.new(name + "_d", "qd")
        qdd = self.scope.new(name + "_dd", "qdd")
        self.q.append(q)
        self.qd.append(qd)
        self.qdd.append(qdd)
        self.guess[q] = float(guess)
        self.ranges[q] = (float(range[0]), float(range[1]))
        self.ranges[qd] = (float(vrange[0]), float(vrange[1]))
        self.ranges[qdd] = (float(arange[0]), float(arange[1]))
        self._tang = None
        return q

    def explicit(self, q: Atom, expr) -> None:
        """Give coordinate `q` in closed form: q = expr, an expression of the model's other
        (independent) coordinates, parameters and t, which must satisfy the constraints
        wherever the independent coordinates do. The equations keep q as a coordinate (every
        solver and kernel works as before); kernels over the independent coordinates
        (inverse-dynamics-reduced) substitute q, its velocity and acceleration (by the chain
        rule) from expr. `expr` may use coordinates made explicit before (they are
        substituted here); a coordinate that an earlier explicit expression uses cannot be
        made explicit afterwards (define it first)."""
        if not (isinstance(q, Atom) and q in self.guess):
            raise ModelError(f"{self.name}: explicit needs a coordinate of this model, got {q!r}")
        name = q.value.name
        if q in self.explicit_coords:
            raise ModelError(f"{self.name}: coordinate {name!r} is made explicit twice")
        e = self._closed_form(expr, f"explicit coordinate {name!r}")
        if e.mask & q.mask:
            raise ModelError(f"{self.name}: explicit coordinate {name!r} is given in terms of itself")
        users = [d.value.name for d, x in self.explicit_coords.items() if x.mask & q.mask]
        if users:
            raise ModelError(f"{self.name}: coordinate {name!r} is used by the explicit expression(s) of "
                             f"{', '.join(users)}: make it explicit before them")
        dep = [d for d in self.explicit_coords if e.mask & d.mask]
        if dep:
            e = subs(e, {d: self.explicit_coords[d] for d in dep})
        self.explicit_coords[q] = e

    def explicit_measure(self, actuator: str, expr) -> None:
        """Give an actuator's measure in closed form: an expression m of the independent
        coordinates (those not made explicit), parameters and t whose rate times the
        actuator's force is its power wherever the constraints hold (a linear actuator's
        length, up to a constant). Kernels over the independent coordinates
        (inverse-dynamics-reduced) then take the actuator's virtual power along them as
        grad m, a short expression, instead of differentiating through the explicit
        coordinates' closed forms: the same numbers, checked at the kernel's samples, in a
        form whose range analysis is tight (the Stewart platform's leg lengths)."""
        if actuator not in {a.name for a in self.actuators}:
            known = ", ".join(a.name for a in self.actuators) or "none"
            raise ModelError(f"{self.name}: explicit_measure names no actuator {actuator!r} (actuators: {known})")
        if actuator in self.explicit_measures:
            raise ModelError(f"{self.name}: the measure of actuator {actuator!r} is given twice")
        self.explicit_measures[actuator] = self._closed_form(expr, f"measure of actuator {actuator!r}")

    def _closed_form(self, expr, what: str) -> Atom:
        """expr as an atom of the coordinates, parameters and t (ModelError naming `what`)."""
        try:
            e = self._atom(expr)
        except ExpressionError as err:
            raise ModelError(f"{self.name}: {what}: {err}") from None
        self._check_symbols(e, self._mask(self.q + [self.t] + self.params), what)
        return e

    def explicit_guard(self, what: str, expr, minimum: float) -> None:
        """Require `expr` (an expression of the independent coordinates, e.g. the pivot a
        closed form divides by) to stay >= minimum wherever the explicit coordinates are
        used: covers built from the closed forms (domain.explicit_cover) prove it over each
        cell, or split the cell, or refuse naming `what`."""
        e = self._closed_form(expr, f"explicit guard {what!r}")
        dep = [d for d in self.explicit_coords if e.mask & d.mask]
        if dep:
            e = subs(e, {d: self.explicit_coords[d] for d in dep})
        self.explicit_guards.append((str(what), e, float(minimum)))

    # ---- operating envelope ----------------------------------------------------------
    def operate(self, quantity, range, rate=(0.0, 0.0), accel=(0.0, 0.0), equation=None, cells: int = 1) -> Atom:
        """Declare where the mechanism operates along one independent quantity: a
        coordinate of the model (`quantity` its symbol), or a named quantity theta tied to
        the coordinates by `equation(theta)` -> an expression g(q, theta) that is 0 (e.g. a
        crank angle in natural coordinates: lambda th: xB * sin(th) - yB * cos(th)).
        theta sweeps `range` at any rate in `rate` and acceleration in `accel`; kernels
        serve every consistent state reachable so (domain.cover). Returns theta."""
        if isinstance(quantity, Atom):
            if quantity not in self.guess:
                raise ModelError(f"{self.name}: operate needs a coordinate of this model or a name, got {quantity!r}")
            if equation is not None:
                raise ModelError(f"{self.name}: operate({quantity.value.name}): a coordinate needs no equation")
            name = quantity.value.name
        else:
            name = str(quantity)
            check_name(self, "operating quantity", name)
            if equation is None:
                raise ModelError(f"{self.name}: operate({name!r}): a named quantity needs equation=lambda theta: ...")
        if any(q.name == name for q in self.envelope.quantities):
            raise ModelError(f"{self.name}: operating quantity {name!r} is declared twice")
        where = f"{self.name}: operate({name})"
        rng = _env_range(range, f"{where}: range", fixed_ok=False)
        rate, accel = _env_range(rate, f"{where}: rate"), _env_range(accel, f"{where}: accel")
        cells = _env_cells(cells, f"{where}: cells")
        try:
            th = self.scope.new(f"env_{name}", "input")
            thd = self.scope.new(f"env_{name}_d", "input")
            thdd = self.scope.new(f"env_{name}_dd", "input")
        except ExpressionError as e:
            raise ModelError(f"{where}: {e}") from None
        if isinstance(quantity, Atom):
            g = sub(quantity, th)
        else:
            try:
                g = self._atom(equation(th))
            except ExpressionError as e:
                raise ModelError(f"{where}: equation: {e}") from None
            self._check_symbols(g, self._mask(self.q + self.params + [th]), f"operating quantity {name!r}")
            if not g.mask & th.mask or not g.mask & self._mask(self.q):
                raise ModelError(f"{where}: the equation must involve both theta and the coordinates")
        qty = Quantity(name, th, thd, thdd, g, rng, rate, accel, cells)
        self.envelope = replace(self.envelope, quantities=self.envelope.quantities + (qty,))
        return th

    def operate_region(self, name: str, expr) -> None:
        """Restrict the operating envelope to the states where `expr` <= 0, `expr` an
        expression of the operating quantities (coordinates declared with operate, or the
        thetas operate returned), e.g. a cylinder of radius 0.3 about z:
        P_x**2 + P_y**2 - 0.09. The cover leaves out the cells proven outside the region
        (a singular corner outside it no longer stops a kernel) and draws its samples in it."""
        check_name(self, "operating region", str(name))
        if any(r.name == name for r in self.envelope.regions):
            raise ModelError(f"{self.name}: operate_region({name!r}) is declared twice")
        where = f"{self.name}: operate_region({name})"
        qs = self.envelope.quantities
        if not qs:
            raise ModelError(f"{where}: declare the operating quantities first (Model.operate)")
        try:
            e = self._atom(expr)
        except ExpressionError as err:
            raise ModelError(f"{where}: {err}") from None
        coords = {q.value.name: q for q in self.q}
        e = subs(e, {coords[x.name]: x.theta for x in qs if x.name in coords})  # a coordinate by its theta
        thetas = self._mask([x.theta for x in qs])
        if e.mask & ~thetas:
            names = ", ".join(x.name for x in qs)
            raise ModelError(f"{where}: the expression may use only the operating quantities ({names})")
        if not e.mask & thetas:
            raise ModelError(f"{where}: the expression uses no operating quantity")
        self.envelope = replace(self.envelope, regions=self.envelope.regions + (Region(str(name), e),))

    def operate_input(self, actuator: str, range) -> None:
        """The range of an actuator's force (or torque) over the operating envelope."""
        names = [a.name for a in self.actuators]
        if actuator not in names:
            raise ModelError(f"{self.name}: operate_input: no actuator {actuator!r} (actuators: "
                             f"{', '.join(names) or 'none'}; declare it first)")
        inputs = dict(self.envelope.inputs)
        inputs[actuator] = _env_range(range, f"{self.name}: operate_input({actuator})")
        self.envelope = replace(self.envelope, inputs=inputs)

    def parameter(self, name: str, value: float, range=None) -> Atom:
        """A model parameter (a length, a mass, a stiffness...): folded into the generated
        code as the constant `value`, or kept as a runtime input (generate option
        params="runtime") that may vary within `range` (default: value +- 10%)."""
        check_name(self, "parameter", name)
        if name in self._names:
            raise ModelError(f"{self.name}: {name!r} is defined twice")
        value = float(value)
        if range is None:
            d = abs(value) * 0.1 or 0.1
            range = (value - d, value + d)
        if not (len(range) == 2 and range[0] <= value <= range[1] and range[0] < range[1]):
            raise ModelError(f"{self.name}: parameter {name!r}: value {value} is not inside its range {range!r}")
        try:
            p = self.scope.new(name, "param", default=value, range=range)
        except ExpressionError as e:
            raise ModelError(f"{self.name}: parameter {name!r}: {e}") from None
        self._names.add(name)
        self.params.append(p)
        self.ranges[p] = (float(range[0]), float(range[1]))
        return p

    def initial(self, q: dict | None = None, qd: dict | None = None) -> None:
        """The initial state simulations start from, by coordinate name: these values are held
        and the other coordinates and rates solved from the constraints (as --q0/--qd0 do;
        rates not named start at 0). Command-line --q0/--qd0 replace them."""
        known = {s.value.name for s in self.q}
        for what, given in (("q", q or {}), ("qd", qd or {})):
            for name, v in given.items():
                if name not in known:
                    raise ModelError(f"{self.name}: initial {what}: no coordinate {name!r}")
                if not math.isfinite(float(v)):
                    raise ModelError(f"{self.name}: initial {what} of {name} is {v}, not a finite number")
        self.initial_q = {k: float(v) for k, v in (q or {}).items()}
        self.initial_qd = {k: float(v) for k, v in (qd or {}).items()}

    def time_range(self, lo: float, hi: float) -> None:
        if not lo < hi:
            raise ModelError(f"{self.name}: empty time range ({lo}, {hi})")
        self.ranges[self.t] = (float(lo), float(hi))

    def _tangents(self) -> dict[Atom, Atom]:
        """{q: qd, t: 1}: the chain rule of d/dt."""
        if self._tang is None:
            self._tang = {**dict(zip(self.q, self.qd)), self.t: ONE}
        return self._tang

    def rate(self, expr) -> Atom:
        """d/dt of an expression of q and t (atoms in q, qd, t): e.g. a leg's extension rate."""
        return time_derivative(as_atom(expr), self._tangents())

    def _mask(self, syms) -> int:
        m = 0
        for s in syms:
            m |= s.mask
        return m

    def _check_symbols(self, e: Atom, allowed: int, what: str) -> None:
        if e.mask & ~allowed:
            bad = sorted(self._foreign(a) for a in topo([e]) if a.is_symbol and not a.mask & allowed)
            raise ModelError(f"{self.name}: {what} depends on {', '.join(bad)}, which are not "
                             "coordinates or parameters of this model (or t)")

    def _foreign(self, s: Atom) -> str:
        """A symbol of another scope by name, and by model when it has one."""
        owner = s.value.scope
        return f"{s.value.name} (of model {owner!r})" if owner else s.value.name

    def _new_equation(self, expr, name: str, what: str) -> Atom:
        if not name or not isinstance(name, str):
            raise ModelError(f"{self.name}: a {what} needs a name")
        check_name(self, what, name)
        if name in self._eq_names:
            raise ModelError(f"{self.name}: equation {name!r} is defined twice")
        try:
            e = self._atom(expr)
        except ExpressionError as err:
            raise ModelError(f"{self.name}: {what} {name!r}: {err}") from None
        return e

    def _atom(self, expr) -> Atom:
        """An atom from an atom, a number or a sympy expression in t and the coordinate names
        (name, name_d for velocities)."""
        if isinstance(expr, Atom) or not hasattr(expr, "free_symbols"):
            return as_atom(expr)
        known = {s.value.name: s for s in self.q + self.qd + [self.t] + self.params}
        mapping = {}
        for s in expr.free_symbols:
            mapping[s] = known[s.name] if s.name in known else symbol(s.name)
        return from_sympy(expr, mapping)

    # ---- equations ---------------------------------------------------------------------
    def constraint(self, expr, name: str, driving: bool = False) -> None:
        """Add the equation expr = 0 (holonomic: a function of q and t)."""
        what = "driving constraint" if driving else "constraint"
        e = self._new_equation(expr, name, what)
        self._check_symbols(e, self._mask(self.q + [self.t] + self.params), f"{what} {name!r}")
        if e.is_const:
            raise ModelError(f"{self.name}: {what} {name!r} is the constant {e.value!r}: "
                             "it constrains nothing")
        self._eq_names.add(name)
        self.phi.append(e)
        self.phi_names.append(name)
        self.driving.append(bool(driving))

    def drive(self, expr, name: str) -> None:
        """A driving constraint expr(q, t) = 0 (same algebra as a constraint; the expression
        may be written with the engine or in sympy, with t and the coordinate names)."""
        self.constraint(expr, name, driving=True)

    def drive_coordinate(self, q: Atom, law, name: str | None = None) -> None:
        """Drive a coordinate along a function of time: q - law(t) = 0."""
        if not (isinstance(q, Atom) and q in self.guess):
            raise ModelError(f"{self.name}: drive_coordinate needs a coordinate of this model, got {q!r}")
        self.drive(sub(q, self._atom(law)), name or f"drive_{q.value.name}")

    def velocity_constraint(self, expr, name: str) -> None:
        """A non-holonomic constraint C(q, t) qd + c(q, t) = 0 (linear in the velocities)."""
        e = self._new_equation(expr, name, "velocity constraint")
        self._check_symbols(e, self._mask(self.q + self.qd + [self.t] + self.params), f"velocity constraint {name!r}")
        C = jacobian([e], self.qd)
        if not C.entries:
            raise ModelError(f"{self.name}: velocity constraint {name!r} does not involve any velocity")
        qdmask = self._mask(self.qd)
        for (_, j), a in C.entries.items():
            if a.mask & qdmask:
                raise ModelError(f"{self.name}: velocity constraint {name!r} is not linear in the velocities "
                                 f"(its coefficient of {self.qd[j].value.name} depends on velocities)")
        self._eq_names.add(name)
        self.nh.append(e)
        self.nh_names.append(name)

    # ---- bodies ------------------------------------------------------------------------
    def _add_body(self, body: Body) -> None:
        check_name(self, "body", body.name)
        if any(b.name == body.name for b in self.bodies):
            raise ModelError(f"{self.name}: body {body.name!r} is defined twice")
        self.bodies.append(body)

    def ground(self, dim: int = 3, name: str = "ground") -> Ground:
        return Ground(self, name, dim)

    def body2d(self, name: str, x, y, theta, mass: float = 0.0, com=None, inertia=None, at=None) -> Body2D:
        """A planar body in reference-point coordinates (x, y, theta): atoms or numbers."""
        b = Body2D(self, name, x, y, theta)
        return self._inertia(b, mass, com, inertia, at)

    def body3d(self, name: str, r, e, mass: float = 0.0, com=None, inertia=None, at=None,
               normalize: bool = True) -> Body3D:
        """A spatial body in reference-point coordinates: r (3) and Euler parameters e (4)."""
        b = Body3D(self, name, r, e, normalize)
        return self._inertia(b, mass, com, inertia, at)

    def _inertia(self, b: Body, mass, com, inertia, at):
        try:
            return b.set_inertia(mass, com, inertia, at)
        except BodyError as e:
            raise ModelError(f"{self.name}: {e}") from None

    def relative(self):
        """The model's trees of bases and points (relative coordinates)."""
        if self._relative is None:
            self._relative = Relative(self)
        return self._relative

    @property
    def relative_trees(self) -> Relative | None:
        """The relative trees when the model has them (relative() was called), else None."""
        return self._relative

    @property
    def gravity_vector(self) -> list[float] | None:
        """The uniform gravity (world components), None when none was set."""
        return self._gravity

    def context(self) -> _Context:
        """What actuators and force elements read to give their generalized forces
        (Actuator.direction, Force.terms)."""
        return _Context(self)

    # ---- joints (any coordinate family) -----------------------------------------------
    def revolute2d(self, b1, p1, b2, p2, name):
        return _joints.revolute2d(self, b1, p1, b2, p2, name)

    def prismatic2d(self, b1, p1, b2, p2, normal, name, angle=0.0):
        return _joints.prismatic2d(self, b1, p1, b2, p2, normal, name, angle)

    def spherical(self, b1, p1, b2, p2, name):
        return _joints.spherical(self, b1, p1, b2, p2, name)

    def cardan(self, b1, p1, a1, b2, p2, a2, name):
        return _joints.cardan(self, b1, p1, a1, b2, p2, a2, name)

    def revolute(self, b1, p1, a1, b2, p2, a2, name):
        return _joints.revolute(self, b1, p1, a1, b2, p2, a2, name)

    def cylindrical(self, b1, p1, a1, b2, p2, a2, name, normals=None):
        return _joints.cylindrical(self, b1, p1, a1, b2, p2, a2, name, normals)

    def prismatic(self, b1, p1, a1, b2, p2, a2, name, normals=None):
        return _joints.prismatic(self, b1, p1, a1, b2, p2, a2, name, normals)

    def joint(self, kind, b1, p1, b2, p2, name, axis1=None):
        """A joint kind of the trees (model.joint_kinds) closed between two bodies (joints.of_kind)."""
        return _joints.of_kind(self, kind, b1, p1, b2, p2, name, axis1)

    # ---- forces ------------------------------------------------------------------------
    def _force_name(self, name: str) -> str:
        check_name(self, "force or actuator", name)
        if any(f.name == name for f in self.forces) or any(a.name == name for a in self.actuators):
            raise ModelError(f"{self.name}: force or actuator {name!r} is defined twice")
        return name

    def gravity(self, g) -> None:
        """Uniform gravity (world components), acting on every body with mass."""
        self._gravity = [float(x) for x in g]

    def force(self, name: str, body: Body, local, F) -> None:
        """A force F (world components; atoms in q, qd, t allowed) at a body point."""
        self.forces.append(_forces.PointForce(self._force_name(name), body, local, F))

    def torque(self, name: str, body: Body, n) -> None:
        """A torque on a body (world components; a 1-vector in 2-D)."""
        self.forces.append(_forces.BodyTorque(self._force_name(name), body, n))

    def scalar_force(self, name: str, measure, force, potential=None) -> None:
        """A force f along the measure s(q): f may be an atom or a callable (s, s_dot) -> atom."""
        self.forces.append(_forces.ScalarForce(self._force_name(name), measure, force, potential))

    def spring_damper(self, name: str, measure=None, k: float = 0.0, c: float = 0.0, rest: float = 0.0,
                      between=None) -> None:
        """Linear spring-damper on a measure, or between two body points:
        between=(body1, point1, body2, point2) uses their distance."""
        if between is not None:
            b1, p1, b2, p2 = between
            measure = _forces.distance(b1.point(p1), b2.point(p2))
        if measure is None:
            raise ModelError(f"{self.name}: spring-damper {name!r} needs a measure or two points")
        self.forces.append(_forces.spring_damper(self._force_name(name), measure, k, c, rest))

    def generalized_force(self, name: str, q: Atom, value) -> None:
        """A generalized force acting directly on coordinate q."""
        self.forces.append(_forces.ScalarForce(self._force_name(name), q, as_atom(value)))

    def actuator(self, name: str, measure) -> None:
        """An actuator (unknown of inverse dynamics) acting along the measure s(q)."""
        self.actuators.append(_forces.measure_actuator(self._force_name(name), measure))

    def actuator_pair(self, name: str, body_a, point_a, body_b, point_b, direction) -> None:
        """An actuator force pushing body_b at point_b along `direction` and body_a back."""
        self.actuators.append(_forces.pair_actuator(self._force_name(name), body_a, point_a, body_b, point_b,
                                                    direction))

    def output(self, name: str, expr) -> None:
        """A named quantity (function of q, qd, t) that simulations report."""
        check_name(self, "output", name)
        if name in self.outputs:
            raise ModelError(f"{self.name}: output {name!r} is defined twice")
        e = self._atom(expr)
        self._check_symbols(e, self._mask(self.q + self.qd + [self.t] + self.params), f"output {name!r}")
        self.outputs[name] = e

    # ---- equations ---------------------------------------------------------------------
    def equations(self) -> Equations:
        if self.floating_base is not None:
            raise ModelError(f"{self.name}: a floating base has no equations in M(q) form here: only the "
                             f"recursive kernels take it ({', '.join(RECURSIVE)})")
        if not self.q:
            raise ModelError(f"{self.name}: the model has no coordinates")
        M = Q = None
        T = V = None
        conservative = True
        n = len(self.q)
        ctx = _Context(self)
        inertial = [b for b in self.bodies if b.has_inertia]
        inertial_force = None
        if inertial or self.forces:
            Md: dict = {}
            Qd: dict = {}
            Fd: dict = {}  # M qdd - Q, each body's share in its cheapest form
            T = V = ZERO
            for b in inertial:
                try:
                    bm, bq, bt, bv = b.inertia_terms(ctx)
                    bf = b.inertial_force(ctx, bm, bq)
                except BodyError as e:
                    raise ModelError(f"{self.name}: {e}") from None
                for k, a in bm.items():
                    Md[k] = add(Md.get(k, ZERO), a)
                for k, a in bq.items():
                    Qd[k] = add(Qd.get(k, ZERO), a)
                for k, a in bf.items():
                    Fd[k] = add(Fd.get(k, ZERO), a)
                T = add(T, bt)
                V = add(V, bv)
            for f in self.forces:
                fq, fv = f.terms(ctx)
                for k, a in fq.items():
                    Qd[k] = add(Qd.get(k, ZERO), a)
                    Fd[k] = sub(Fd.get(k, ZERO), a)
                V = add(V, fv)
                conservative = conservative and f.conservative
            M = Sparse((n, n), Md)
            Q = [Qd.get(j, ZERO) for j in range(n)]
            inertial_force = [Fd.get(j, ZERO) for j in range(n)]
            self._check_inertia(M)
        B = Sparse((n, len(self.actuators)),
                   {(j, k): a for k, act in enumerate(self.actuators) for j, a in act.direction(ctx).items()})
        for k, act in enumerate(self.actuators):
            if not any(c == k for (_, c) in B.entries):
                raise ModelError(f"{self.name}: actuator {act.name!r} acts on no coordinate")
        return Equations(model=self.name, q=list(self.q), qd=list(self.qd), qdd=list(self.qdd),
                         t=self.t, phi=list(self.phi), phi_names=list(self.phi_names),
                         ranges=dict(self.ranges), guess=dict(self.guess), M=M, Q=Q,
                         driving=list(self.driving), nh=list(self.nh), nh_names=list(self.nh_names),
                         actuator_names=[a.name for a in self.actuators], B=B, T=T, V=V,
                         conservative=conservative, outputs=dict(self.outputs), params=list(self.params),
                         explicit=dict(self.explicit_coords), measures=dict(self.explicit_measures),
                         explicit_guards=list(self.explicit_guards),
                         inertial=inertial_force,
                         envelope=self.envelope, initial_q=dict(self.initial_q),
                         initial_qd=dict(self.initial_qd), source=self)

    def _check_inertia(self, M: Sparse) -> None:
        """A coordinate with no inertia that no equation involves has no defined acceleration."""
        with_mass = {j for (_, j) in M.entries}
        used = self._mask(self.phi + self.nh)
        lost = [q.value.name for j, q in enumerate(self.q)
                if j not in with_mass and not (q.mask | self.qd[j].mask) & used]
        if lost:
            raise ModelError(f"{self.name}: coordinate(s) {', '.join(lost)} have no inertia and appear in no "
                             "equation: give the body that moves them a mass, or constrain them")
