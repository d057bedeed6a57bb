"""Applied forces and actuators, as generalized forces by the principle of virtual power.

A force F (world components) at a body point P does the virtual power dP = v_P . F, so its
generalized force is J_P^T F with J_P = d r_P / d q. A torque n (world components) on a body
gives W^T A^T n with w' = W qd the body-frame angular velocity. A scalar element acting on
a measure s(q) (a distance, an angle, a coordinate) with force f (positive when it pushes s
up) gives f grad s; a spring-damper pulls with f = -(k (s - s0) + c s_dot) and has potential
k (s - s0)^2 / 2.

An actuator is a force or torque whose value u is an unknown of inverse dynamics (and an
input of forward dynamics); it is kept apart as one column B[:, k] of the generalized
direction matrix, so that M qdd + Phi_q^T lambda = Q + B u.
"""
from __future__ import annotations

from ..ir import ZERO, Atom, add, as_atom, dot, mtv, mul, neg, sqrt, sub, time_derivative, vconst


class ForceElement:
    conservative = False

    def __init__(self, name: str):
        self.name = name

    def terms(self, ctx) -> tuple[dict[int, Atom], Atom]:
        """({coordinate index: generalized force}, potential energy)."""
        raise NotImplementedError


def _jtv(ctx, r, F) -> dict[int, Atom]:
    out: dict[int, Atom] = {}
    for (i, j), a in ctx.jac_q(r).entries.items():
        if F[i] is ZERO:
            continue
        out[j] = add(out.get(j, ZERO), mul(a, F[i]))
    return out


class PointForce(ForceElement):
    def __init__(self, name, body, local, force):
        super().__init__(name)
        self.body, self.local, self.force = body, local, vconst(force)

    def terms(self, ctx):
        return _jtv(ctx, self.body.point(self.local), self.force), ZERO


class BodyTorque(ForceElement):
    def __init__(self, name, body, torque):
        super().__init__(name)
        self.body, self.torque = body, vconst(torque)

    def terms(self, ctx):
        b = self.body
        n_body = mtv(b.rotation(), self.torque) if b.dim == 3 else self.torque
        out: dict[int, Atom] = {}
        for (i, j), a in ctx.jac_qd(b.omega()).entries.items():
            if n_body[i] is ZERO:
                continue
            out[j] = add(out.get(j, ZERO), mul(a, n_body[i]))
        return out, ZERO


class ScalarForce(ForceElement):
    """Force f(s, s_dot, t) along the measure s(q): generalized force f grad s."""

    def __init__(self, name, measure, force, potential=None):
        super().__init__(name)
        self.measure = as_atom(measure)
        self.force = force  # callable (s, s_dot) -> atom, or an atom
        self.potential = potential
        self.conservative = potential is not None

    def terms(self, ctx):
        s = self.measure
        sd = time_derivative(s, ctx.tangents)
        f = self.force(s, sd) if callable(self.force) else as_atom(self.force)
        g = ctx.grad(s)
        out = {j: mul(f, a) for j, a in g.items()}
        V = self.potential(s) if self.potential is not None else ZERO
        return out, as_atom(V)


def spring_damper(name, measure, k: float, c: float = 0.0, rest: float = 0.0) -> ScalarForce:
    """A linear spring k and damper c on the measure s: f = -(k (s - rest) + c s_dot)."""
    ck, cc, cr = as_atom(float(k)), as_atom(float(c)), as_atom(float(rest))

    def law(s, sd):
        return neg(add(mul(ck, sub(s, cr)), mul(cc, sd)))

    pot = (lambda s: mul(as_atom(0.5 * float(k)), mul(sub(s, cr), sub(s, cr)))) if k else (lambda s: ZERO)
    f = ScalarForce(name, measure, law, pot)
    f.conservative = c == 0.0
    return f


def distance(p1, p2) -> Atom:
    d = [sub(as_atom(b), as_atom(a)) for a, b in zip(p1, p2)]
    return sqrt(dot(d, d))


class Actuator:
    """One column of B: the generalized direction of the actuator's force or torque u."""

    def __init__(self, name: str, direction_fn, description: str = ""):
        self.name = name
        self._fn = direction_fn
        self.description = description

    def direction(self, ctx) -> dict[int, Atom]:
        return self._fn(ctx)


def measure_actuator(name: str, measure) -> Actuator:
    """u acts along the measure s(q) (power u s_dot): a torque on an angle, a force on a stroke."""
    s = as_atom(measure)
    return Actuator(name, lambda ctx: ctx.grad(s), "along a measure")


def pair_actuator(name: str, body_a, point_a, body_b, point_b, direction) -> Actuator:
    """u pushes body_b at point_b along `direction` (world components, unit) and body_a at
    point_a the opposite way: power u d . (v_b - v_a)."""
    dvec = vconst(direction)

    def fn(ctx):
        out = _jtv(ctx, body_b.point(point_b), dvec)
        for j, a in _jtv(ctx, body_a.point(point_a), dvec).items():
            out[j] = sub(out.get(j, ZERO), a)
        return out

    return Actuator(name, fn, "force pair along a direction")


__all__ = ["ForceElement", "PointForce", "BodyTorque", "ScalarForce", "spring_damper", "distance", "Actuator",
           "measure_actuator", "pair_actuator"]
