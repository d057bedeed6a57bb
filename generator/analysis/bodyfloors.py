"""Proven floors of an open tree's joint pivots, constant over the whole configuration
space (range analysis hints of the forward-dynamics kernels).

Interval arithmetic cannot see that a pivot of a mass matrix's LDL^T stays positive: over
sample_arm's joint ranges its second pivot is enclosed in [-1e6, 1e6], and the Weyl floors
of analysis.definite need cells too fine in 5 angles to be affordable. The tree gives a
floor directly. In relative coordinates M = sum_b J_b^T I_b J_b, body b's twist J_b qd the
sum of the joint twists S_j qd_j of the joints between it and the ground. Factored leaves
first (every joint after the joints of its subtree: kernels.dynamics), the pivot of joint
k is the Schur complement of M's block over k and its descendants,
    min over the descendants' rates of qd^T M qd, qd_k = 1, every other rate 0,
which is S_k^T I^A_k S_k, the articulated inertia's D_k (the ABA computes the same
number). Every body's term is >= 0, and body k's own twist is S_k whatever its
descendants do (its parent stands still), so pivot_k >= S_k^T I_k S_k: body k's moment
of inertia about its joint axis (revolute) or its mass (prismatic). In the ABA,
I^A_k = I_k + the children's articulated inertias less their projections (each positive
semidefinite), so D_k >= S_k^T I_k S_k too. Hence 1 / pivot_k lies in [0, 1 / floor].

Ceilings: pivot_k <= M_kk (a Schur complement of a positive definite matrix is at most
its diagonal entry), and M_kk, the subtree's composite inertia about joint k's axis, is
at most sum over its bodies of (lambda_max of the body's inertia about its centre of mass
+ its mass x (its distance from joint k's point)^2), the distance at most the lengths of
the link offsets between them, each prismatic joint's largest slide over its declared
range (Link.slide; none declared: no ceiling), plus the centre's offset; a prismatic
joint's M_kk is the subtree's mass. The multipliers L_ik = S_ik / S_kk of the active (Schur
complement, positive definite) matrix S have |S_ik| <= sqrt(S_ii S_kk), so
|L_ik| <= sqrt(ceiling_i / floor_k).

The solve: with every joint revolute and every body's inertia about its centre of mass
positive definite (lambda_min mu_b), M's smallest eigenvalue is at least
lambda = min_b mu_b / c_b: qd_k = axis_k . (w_k - w_parent), so qd_k^2 <= 2 |w_k|^2 +
2 |w_parent|^2 (|w_k|^2 alone at a root), and |w_b|^2 <= mu_b^-1 w_b^T Icom_b w_b <=
mu_b^-1 (body b's share of qd^T M qd; in a planar tree every w_b lies along b's axis, and
mu_b is b's inertia about that axis through its centre: _planar); summed, |qd|^2 <= max_b (c_b / mu_b) qd^T M qd with
c_b = 2 (1 at a root) + 2 x its children (eigen_floor weights the split per joint instead
of halves: the largest floor of that family). Then for M x = b, with y = L^-1 P b the forward
substitution and D the pivots, b^T M^-1 b = sum_k y_k^2 / D_k <= |b|^2 / lambda: so
|y_k| <= |b| sqrt(ceiling_k / lambda), |y_k / D_k| <= |b| / sqrt(floor_k lambda) and
|x_i| <= |b| / lambda, |b| read from the range analysis' enclosures of b (lazy hints).
With prismatic joints (eigen_floor_mixed): a slide's rate is the relative velocity of the
centres of mass of its body c and its parent p less the parent's turning, qd_k a =
v_c - v_p - w_p x (c_c - c_p), so qd_k^2 <= 3 |v_c|^2 + 3 |v_p|^2 + 3 d^2 |w_p|^2 (d the
largest distance of the two centres, by the offsets and the slide's range; at the ground
qd_k^2 = |v_c|^2); each body's charges A |w|^2 + B |v|^2 are at most max(A / mu, B / m)
times its kinetic energy (x 2), so lambda >= 1 / max over the bodies of max(A / mu, B / m).

A joint whose body has no inertia about its axis gets no floor (the refusal then names
it: kernels.dynamics).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..lower.tape import TapeHints
from .definite import _temps
from .linear import _locate

MARGIN = 1e-9  # relative: the model's inertia numbers against the atoms' folded constants

__all__ = ["link_floor", "diagonal_ceilings", "eigen_floor", "ConstantEnclosure"]


def link_floor(L) -> float:
    """S^T I S of link L's own body at its origin (kernels.recursive.Link): its inertia
    about its revolute axis or its mass along a prismatic one, plus each revolute child's
    least share (_child_floor), less a rounding margin; 0 when it has none."""
    a = np.asarray(L.axis, dtype=float)
    v = float(a @ np.asarray(L.I, dtype=float) @ a) if L.joint.revolute else float(L.m)
    for c in L.children if L.joint.revolute else ():
        v += _child_floor(a, c) if c.joint.revolute else 0.0
    return max(0.0, v * (1 - MARGIN))


DIVIDE_RATIO = 256.0  # a pivot's ceiling over its floor beyond which its step divides


def divides(L, ceil: float) -> bool:
    """Whether link L's pivot, proven in [link_floor(L), ceil], spans more than DIVIDE_RATIO:
    a fixed-point reciprocal's format then spans it too, and its rounding times |E| (or |U|)
    perturbs M sqrt(ratio) times more than a quotient's own rounding, so the multipliers
    divide by the pivot instead (kernels.dynamics' LDL^T, kernels.recursive's ABA); a
    division costs a multiply more per multiplier, so it is kept to these steps."""
    f = link_floor(L)
    return 0 < f and ceil > DIVIDE_RATIO * f


def _child_floor(a, c) -> float:
    """A lower bound of child c's kinetic energy (x 2) when its parent turns at unit rate
    about a (through the parent's origin, the grandparent still) and c's own rate is free:
    c's angular velocity a + b t keeps its part across b (b: c's axis in the parent's
    axes), so at least mu_c |a x b|^2. When c's centre of mass lies on c's own axis it does
    not move with c's angle: its velocity a x x (x its position from the parent's origin)
    whatever t, and m_c |a x x|^2 adds."""
    b = np.asarray(c.fixed, dtype=float) @ np.asarray(c.axis, dtype=float)
    v = max(0.0, _mu(c)) * max(0.0, float(np.cross(a, b) @ np.cross(a, b)) * (1 - 1e-12) - 1e-15)
    m, h = float(c.m), np.asarray(c.h, dtype=float)
    if m > 0 and not np.cross(np.asarray(c.axis, dtype=float), h).any():  # exactly on the axis
        x = np.asarray(c.r, dtype=float) + np.asarray(c.fixed, dtype=float) @ (h / m)
        v += m * max(0.0, float(np.cross(a, x) @ np.cross(a, x)) * (1 - 1e-12) - 1e-15)
    return v


def _icom(L) -> np.ndarray:
    """L's body's inertia about its centre of mass, in link axes."""
    m, h, I = float(L.m), np.asarray(L.h, dtype=float), np.asarray(L.I, dtype=float)
    return I - (m * (float(h @ h) / m ** 2 * np.eye(3) - np.outer(h, h) / m ** 2) if m > 0 else 0.0)


def _mu(L) -> float:
    """A lower bound of the smallest eigenvalue of L's body's inertia about its centre."""
    Icom = _icom(L)
    return float(np.linalg.eigvalsh(Icom)[0]) - 1e-12 * float(np.abs(Icom).sum())


def _planar(links) -> bool:
    """Every joint revolute about one world direction (each child's axis, placed in its
    parent's axes, parallel to the parent's; the roots' placed axes parallel): then every
    body's angular velocity lies along its own axis, and only its inertia about that axis
    through its centre of mass (_mu_axis) enters the kinetic energy: a planar chain of
    thin rods has no principal inertia floor but this one."""
    def placed(L):
        return np.asarray(L.fixed, dtype=float) @ np.asarray(L.axis, dtype=float)

    roots = [placed(L) for L in links if L.parent is None]
    for L in links:
        ref = np.asarray(L.parent.axis, dtype=float) if L.parent is not None else roots[0]
        b = placed(L)
        if not L.joint.revolute or np.linalg.norm(np.cross(ref, b)) > 1e-12 * np.linalg.norm(ref) * np.linalg.norm(b):
            return False
    return True


def _mu_axis(L) -> float:
    """L's body's inertia about its (unit) joint axis through its centre of mass, less a margin."""
    Icom = _icom(L)
    a = np.asarray(L.axis, dtype=float)
    a = a / np.linalg.norm(a)
    return float(a @ Icom @ a) - 1e-12 * float(np.abs(Icom).sum())


def _body_reach(L) -> tuple[float, float, float]:
    """(mass, lambda_max of the inertia about the centre of mass, the centre's distance
    from the link origin) of link L's own body."""
    m, h, I = float(L.m), np.asarray(L.h, dtype=float), np.asarray(L.I, dtype=float)
    if m <= 0:
        return 0.0, float(np.linalg.eigvalsh(I)[-1]) if I.any() else 0.0, 0.0
    c = h / m
    Icom = I - m * (float(c @ c) * np.eye(3) - np.outer(c, c))
    return m, float(np.linalg.eigvalsh(Icom)[-1]), float(np.linalg.norm(c))


def composite_bounds(links: list) -> tuple[dict, dict]:
    """({coordinate: the rotational ceiling (any axis through the link origin) of its
    subtree's composite inertia}, {coordinate: its subtree's mass}): diagonal_ceilings
    for all-revolute trees (inf where a prismatic joint moves bodies below)."""
    rot, mass = {}, {}
    for L in links:
        total, bound, stack = 0.0, 0.0, [(L, 0.0)]
        while stack:
            b, reach = stack.pop()
            m, lam, c = _body_reach(b)
            total += m
            bound += lam + m * (reach + c) ** 2
            stack += [(ch, reach + _offset(ch)) for ch in b.children]
        rot[L.j], mass[L.j] = bound * (1 + 1e-9) + 1e-300, total * (1 + 1e-9) + 1e-300
    return rot, mass


def _offset(L) -> float:
    """The largest distance of link L's origin from its parent's: its offset, plus its
    slide along its axis for a prismatic joint (inf without a declared range)."""
    d = float(np.linalg.norm(L.r))
    return d if L.joint.revolute else d + float(np.linalg.norm(L.axis)) * L.slide


def diagonal_ceilings(links: list) -> dict:
    """{coordinate: an upper bound of M's diagonal entry over every configuration (inf
    when a prismatic joint below it moves its bodies)}: see the module docstring."""
    rot, mass = composite_bounds(links)
    return {L.j: rot[L.j] if L.joint.revolute else mass[L.j] for L in links}


def eigen_floor(links: list, limit: list | None = None) -> float:
    """A lower bound of the tree's M's smallest eigenvalue over every configuration, or 0
    (a prismatic joint, a body without inertia about some axis): see the module docstring,
    with each joint's split of |w_k - w_parent|^2 weighted (Young: <= (1 + t)|w_k|^2 +
    (1 + 1/t)|w_parent|^2 for any t > 0) so that the bodies of least inertia carry the
    least of it: the largest lambda for which weights exist, by bisection (t = 1 for every
    joint, the unweighted floor, is always among them). limit (a list) gets (the links
    whose bodies have the least principal inertia about their centres of mass, within 1%,
    that inertia, what it is, its unit): what a refusal names, the floor being at most it
    (with slides, eigen_floor_mixed names the bodies whose charge sets the floor, and their
    inertia or mass)."""
    if not all(L.joint.revolute for L in links):
        return eigen_floor_mixed(links, limit)
    planar = _planar(links)
    mu = {}
    for L in links:
        mu[L] = _mu_axis(L) if planar else _mu(L)
        if not mu[L] > 0:
            return 0.0
    order, stack = [], [L for L in links if L.parent is None]
    while stack:  # parents first
        L = stack.pop()
        order.append(L)
        stack += L.children

    def feasible(lam: float) -> bool:
        """Weights exist with c_b <= mu_b / lam for every body: leaves first, each joint's t
        as large as its body allows (its parent then carries the least, 1 + 1/t)."""
        up = {}
        for L in reversed(order):
            room = mu[L] / lam - sum(up[c] for c in L.children)  # left for L's own joint
            if L.parent is None:
                if room < 1.0:
                    return False
            elif room <= 1.0:
                return False
            else:
                up[L] = 1.0 + 1.0 / (room - 1.0)
        return True

    lo = min(mu[L] / ((1 if L.parent is None else 2) + 2 * len(L.children)) for L in links)
    hi = min(mu.values())
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
    if limit is not None:
        least = min(mu.values())
        limit.append((sorted((L for L in links if mu[L] <= 1.01 * least), key=lambda x: x.j), least,
                      "inertia about its joint's axis through its centre of mass (a planar tree)" if planar
                      else "least principal inertia about its centre of mass", "kg m^2"))
    return max(0.0, lo * (1 - 1e-9))


def eigen_floor_mixed(links: list, limit: list | None = None) -> float:
    """eigen_floor of a tree with prismatic joints (module docstring): each joint's rate
    charged to its body's and its parent's angular velocity and centre-of-mass velocity,
    halves and thirds (no weights); 0 where a charged body has no inertia or mass, or a
    slide has no declared range."""
    omega = {L: 0.0 for L in links}
    vel = {L: 0.0 for L in links}
    for L in links:
        p = L.parent
        if L.joint.revolute:
            omega[L] += 1.0 if p is None else 2.0
            if p is not None:
                omega[p] += 2.0
        elif p is None:
            vel[L] += 1.0 / _a2(L)  # from the ground: v_c = a qd, w = 0
        else:
            d = _com_offset(L) + _offset(L) + _com_offset(p)
            a2 = _a2(L)
            vel[L] += 3.0 / a2
            vel[p] += 3.0 / a2
            omega[p] += 3.0 * d * d / a2
    worst, charge = 0.0, {}
    for L in links:
        m, mu = float(L.m), _mu(L)
        c = max(omega[L] / mu if omega[L] > 0 else 0.0, vel[L] / m if vel[L] > 0 else 0.0) \
            if (omega[L] == 0 or mu > 0) and (vel[L] == 0 or m > 0) else np.inf
        charge[L] = (c, omega[L] / mu >= vel[L] / m if m > 0 and mu > 0 else vel[L] == 0)
        worst = max(worst, c)
    if not np.isfinite(worst) or worst <= 0:
        return 0.0
    if limit is not None:  # the bodies whose charge sets the floor, and what of theirs does
        top = sorted((L for L in links if charge[L][0] >= 0.99 * worst), key=lambda x: x.j)
        turn = charge[top[0]][1]
        limit.append((top, _mu(top[0]) if turn else float(top[0].m),
                      "least principal inertia about its centre of mass" if turn else "mass",
                      "kg m^2" if turn else "kg"))
    return (1.0 / worst) * (1 - 1e-9)


def _a2(L) -> float:
    a = np.asarray(L.axis, dtype=float)
    return float(a @ a)


def _com_offset(L) -> float:
    """The distance of link L's body's centre of mass from its origin (0 without mass)."""
    m = float(L.m)
    return float(np.linalg.norm(np.asarray(L.h, dtype=float))) / m if m > 0 else 0.0


@dataclass(frozen=True)
class FloorKey:
    """What the hints compute from beyond the tape (analysis.piececache)."""
    hints: tuple  # (temp, lo, hi)
    rhs: tuple  # b's tape (its instructions, as text)
    scaled: tuple  # (temp, factor)


@dataclass
class ConstantEnclosure:
    """Enclosures of some atoms of a kernel, bound to the temps of a tape that hold them
    (or their negation): constant [lo, hi] (a pivot's floor and ceiling, its reciprocal's
    bounds) and |atom| <= factor x |b|, b the solve's right-hand side (the solution)."""

    atoms: list  # [(atom, lo, hi)]
    missing: list = field(default_factory=list)  # the joints left without a floor (for the refusal line)
    rhs: list = field(default_factory=list)  # b's atoms
    scaled: list = field(default_factory=list)  # [(atom, factor)]
    labels: list = field(default_factory=list)  # [(atom, what it is)]: for refusal lines
    roles: object = None  # analysis.ldlback.LDLRoles: the solve's backward error (c-fixed and c-float32)
    # applied to `atoms` and `labels` after the kernel was built (kernels.step: the shifted
    # positions), or None; not with `scaled` or `roles`, whose atoms it does not reach
    rewrite: object = None

    def keep(self) -> list:
        """The atoms the tape must hold as they are for the backward error's replay."""
        return self.roles.atoms() if self.roles is not None else []

    def bind(self, tape):
        located = _locate(tape)
        got: dict = {}
        atoms, labels_ = self.atoms, self.labels
        if self.rewrite is not None:
            assert not self.scaled and self.roles is None, "a rewrite reaches only the atoms and labels"
            atoms = [(a, lo, hi) for a, (_, lo, hi) in zip(self.rewrite([a for a, _, _ in atoms]), atoms)]
            labels_ = list(zip(self.rewrite([a for a, _ in labels_]), [t for _, t in labels_]))
        for a, lo, hi in atoms:
            for t, sign in _temps(located, a):
                l, h = (lo, hi) if sign > 0 else (-hi, -lo)
                ol, oh = got.get(t, (-np.inf, np.inf))
                got[t] = (max(l, ol), min(h, oh))
        scaled: dict = {}
        for a, f in self.scaled:
            for t, _ in _temps(located, a):
                scaled[t] = min(f, scaled.get(t, np.inf))
        labels = {t: text for a, text in labels_ for t, _ in _temps(located, a)}
        # a temp negated by a neg instruction holds -atom: the same enclosure, mirrored (the
        # formats of a neg follow its operand's, so an enclosure of the neg alone does not reach them)
        for ins in tape.instrs:
            t, a = ins.dst[0], ins.args[0] if ins.op == "neg" else None
            if a is not None and a[0] == "t" and (t in got or t in scaled):
                if t in got:
                    l, h = got[t]
                    ol, oh = got.get(a[1], (-np.inf, np.inf))
                    got[a[1]] = (max(-h, ol), min(-l, oh))
                if t in scaled:
                    scaled[a[1]] = min(scaled[t], scaled.get(a[1], np.inf))
        if not got and not scaled and not labels:
            return None
        sub = None
        if scaled:
            from ..lower import lower
            sub = lower(list(self.rhs), list(tape.inputs))
        h = _ConstantHints(tuple(sorted(got.items())), sub, tuple(sorted(scaled.items())))
        h.labels = labels
        h.backward = self.roles.bind(tape) if self.roles is not None else None
        return h


class _ConstantHints(TapeHints):
    def __init__(self, hints, sub, scaled):
        self.hints, self.sub, self.scaled = hints, sub, scaled

    def key(self) -> tuple:
        text = () if self.sub is None else (tuple(f"{i.op} {i.dst} {i.args}" for i in self.sub.instrs)
                                             + (repr(self.sub.outputs),))
        return (FloorKey(tuple((t, lo, hi) for t, (lo, hi) in self.hints), text, self.scaled),)

    def __call__(self, in_lo, in_hi) -> dict:
        B = len(in_lo)
        out = {t: (np.full(B, lo), np.full(B, hi)) for t, (lo, hi) in self.hints}
        if self.sub is None:
            return out
        from .ranges import analyse_boxes
        vec = analyse_boxes(self.sub, np.asarray(in_lo, float), np.asarray(in_hi, float), strict=False)
        norm = np.zeros(B)
        for o in self.sub.outputs:  # |b| per box, rounded up
            norm = norm + vec.magnitude(o) ** 2
        norm = np.nextafter(np.sqrt(norm), np.inf) * (1 + 1e-12)
        for t, f in self.scaled:
            m = np.nextafter(f * norm, np.inf)
            lo, hi = out.get(t, (-m, m))
            out[t] = (np.maximum(lo, -m), np.minimum(hi, m))
        return out


@dataclass
class BodyScale:
    """A body's spatial inertia S at its link origin as body_eta reads it."""
    mu: float  # a floor of S's least eigenvalue
    W: np.ndarray  # |W|, W about S^-1/2
    w2: float  # ||W||_2^2
    g: float  # a floor of the least eigenvalue of W^T S W (about 1)


def spatial_inertia(L) -> np.ndarray:
    """Link L's body's spatial inertia at its origin, link axes: [n; f] = [[I, h^], [h^T, m]] [w; v]."""
    m, h, I = float(L.m), np.asarray(L.h, dtype=float), np.asarray(L.I, dtype=float)
    H = np.array([[0.0, -h[2], h[1]], [h[2], 0.0, -h[0]], [-h[1], h[0], 0.0]])
    return np.block([[I, H], [H.T, m * np.eye(3)]])


def body_scale(L) -> BodyScale | None:
    """Link L's body's BodyScale, or None when its spatial inertia is not positive definite."""
    S6 = spatial_inertia(L)
    mu = float(np.linalg.eigvalsh(S6)[0]) - 1e-12 * float(np.abs(S6).sum())
    if not mu > 0:
        return None
    w, V = np.linalg.eigh(S6)
    W = (V / np.sqrt(np.maximum(w, mu))) @ V.T  # about S6^-1/2
    G = W.T @ S6 @ W
    g = float(np.linalg.eigvalsh(G)[0]) - 1e-12 * float(np.abs(G).sum())
    if not g > 0:
        return None
    return BodyScale(mu * (1 - 1e-9), np.abs(W), float(np.linalg.norm(W, 2)) ** 2 * (1 + 1e-9), g)


def body_eta(R, E: np.ndarray, moved: float) -> tuple[float, float]:
    """(delta, eta) of a body perturbed by Delta with |Delta| <= E entry by entry plus a part
    of norm at most moved: delta >= ||Delta||_2 (E's row sums), and eta with |V^T Delta V| <=
    eta V^T I_b V for every twist V. For any W, V^T Delta V <= ||W^T Delta W|| |W^-1 V|^2
    and |W^-1 V|^2 <= V^T I_b V / g (g the least eigenvalue of W^T I_b W), ||W^T Delta W||
    <= rho(|W|^T E |W|) + ||W||^2 moved: with W = I_b^-1/2 an error along the body's stiff
    directions counts as little as it is against them (a rod's roundings across its axis
    against its inertia across it, not against its inertia about its axis, mu); W = 1
    gives delta / mu."""
    delta = (float(E.sum(1).max()) + moved) * (1 + 1e-9)
    A = R.W @ E @ R.W
    rho = float(A.sum(1).max())
    v = np.abs(np.linalg.eigh(A)[1][:, -1]) + 1e-6  # Collatz-Wielandt: max (A v)_i / v_i, any v > 0
    rho = min(rho, float(np.max(A @ v / v)))
    eta = min(delta / R.mu, (rho * (1 + 1e-9) + R.w2 * moved) / R.g)
    return delta, eta * (1 + 1e-9)
