"""Backward error of the articulated-body algorithm's articulated inertias (a fixed-base open
tree's forward-dynamics-aba), in fixed point (analysis.fixedpoint's plan) and float32
(analysis.floaterror's magnitude bounds): the inward pass's errors bounded as a
perturbation of the bodies' inertias, not propagated op by op.

Op by op, an articulated inertia's error reaches its parent's through the projection
I - U U^T / D, which multiplies it by about (|U| / D)^2 = ceiling / floor at every level:
spatial_chain's and Panda's c-fixed ABA were refused (a pivot's error 265 against its floor
0.23 at the base). The argument here:

Perturbed bodies. Read every computed articulated inertia I^_k as exact and define body
k's inertia I'_k = I^_k - sum over its children c of X_c^T Proj(I^_c) X_c, X_c the exact
motion to k's origin and Proj(I) = I - I S S^T I / (S^T I S) the exact projection; then the
exact ABA of the bodies I' computes exactly the I^_k, so the computed pivots D^_k =
S^T I^_k S are the exact LDL^T pivots of M' = sum_k J_k^T I'_k J_k (J_k body k's Jacobian
at its origin), factored leaves first. With the joint axes unit coordinate vectors,
U^ = I^ S and D^ are entries of I^ (no rounding), and the computed projection is
P^ = I^ - L^ U^T + (its roundings), L^ = U / D + eps, eps_i = U_i rho + (L^_i's rounding)
(rho: the reciprocal's rounding). So Delta_k = I'_k - I_k = E_k + sum_c X_c^T F_c X_c: E_k
the errors of I^_k when every P^ is exact but for its own rounding (a second pass with the
formats kept, the projections' errors cut: the moves' and sums' roundings and the
rotations' errors), F_c,ik = -eps_i U_k - (the product's rounding). Entries the tape
never computes (no value it computes reads them: the lowering keeps every role atom it
needs whole) are taken as the perturbed system's exact ones, Delta 0 there. In float32
every rounding is relative: |eps_i U_k| <= (2u + u^2) |U_i U_k| / D^ <= (2u + u^2)
sqrt(I^_ii I^_kk) whatever the pivot's range (I^ positive definite), and the product's
rounding u times that.

How much the bodies move. Per body, delta_k >= ||Delta_k||_2 (E's row sums, F by its
Frobenius norm, ||X_c||_2 <= 1 + |r_c|) and eta_k with |V^T Delta_k V| <= eta_k V^T I_k V
for every twist V: measured in the body's own inertia (W^T Delta W, W about I_k^-1/2,
bodyfloors.body_eta), so that a rod's roundings across its axis count against its inertia across
it, not against its inertia about its axis (spatial_chain: 1e-4 kg m^2; delta_k / mu_k,
mu_k the least eigenvalue of body k's spatial inertia, is the other, coarser bound).
Then x^T (M' - M) x = sum_k V_k^T Delta_k V_k (V_k = J_k x) lies within max_k eta_k x^T M
x, and ||M' - M|| <= sum_k |J_k|_F^2 delta_k (|J_k|_F^2 <= sum over the joints i above k of
1 + (their distance)^2, 1 for a slide): eta, with (1 - eta) M <= M' <= (1 + eta) M, is the
smaller of max_k eta_k and that norm over lambda (bodyfloors' eigenvalue floor).

What it gives. With eta < 1, every pivot D^_k >= (1 - eta) f_k (a Schur complement is
monotone) and within eta ceil_k of the exact one. Every computed articulated inertia is
within kappa_k of the exact I^A_k (2-norm, so entrywise): x^T I^A x is the least kinetic
energy (x 2) of the subtree with link k's twist x, and the perturbed bodies move every
such energy by at most the subtree's largest eta_b times itself, so kappa_k = top_k max_b
eta_b (top_k the subtree's spatial ceiling); a projection P^_c is within kappa_c + |F_c|
(Proj(I^A) is the articulated inertia with c's joint free: the same argument). Those are
the plan's error overrides of the inertias and projections (and den_floor of the pivots).
The reciprocals, multipliers and products stay far from their exact values (a pivot's
error over its floor squared) but their computed values do not, so their formats take
caps on the computed values (_Plan.value_cap: 1 / D^ <= 1 / ((1 - eta) f), and |U_i U_k /
D^| <= sqrt(I^_ii I^_kk), the perturbed inertias being positive definite). The bias pass
and the accelerations keep the op-by-op rules from there: an articulated inertia's error
no longer compounds level by level, but the outputs' bounds stay loose. Every body's
(delta, eta) is assumed, the plan run, both recomputed from its formats and accepted when
at most the assumed ones (else assumed twice as large): the same induction as
analysis.ldlback.

Sound when the tape computes the roles as replayed: the reciprocal 1 / D^, each
multiplier L^_i = r^ U_i (or U_i / D^ on a divided step), each product L^_i U_k and each
projection entry I^_ik - L^_i U_k one instruction each (bind checks the operands);
otherwise no backward bound (None) and the op-by-op bounds stand.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from .bodyfloors import body_eta
from .ldlback import TINY32, holders, one_temp, reads as ldl_reads

DELTA_START = 0.0  # the first pass assumes exact bodies; the next ones twice what a pass gives
ETA_MAX = 0.9  # the pivots keep a tenth of their floors: bounds exist (however loose) below it
ROUNDS = 8


def _six(blocks):
    """The 6 x 6 entries [[A, B], [B^T, C]] of three 3 x 3 blocks (atoms or None)."""
    A, B, C = blocks
    out = [[None] * 6 for _ in range(6)]
    for i in range(3):
        for k in range(3):
            out[i][k], out[3 + i][3 + k] = A[i][k], C[i][k]
            out[i][3 + k] = out[3 + k][i] = B[i][k]
    return out


@dataclass
class LinkRoles:
    """One link's atoms (6 x 6 as _six; vectors of 6) and its constants."""
    j: int
    parent: int | None
    IA: list  # the computed articulated inertia I^
    D: object
    iD: object
    U: list
    Us: list
    proj: list  # P^ (upper triangle as computed; the lower mirrors it), or None at the root
    prod: list  # the products L^_i U_k of the upper triangle
    divided: bool  # the multipliers are U_i / D (no reciprocal)
    floor: float  # f: the pivot's floor
    ceil: float  # the pivot's ceiling
    top: float  # the subtree's spatial ceiling (largest eigenvalue of its articulated inertia)
    scale: object  # bodyfloors.BodyScale of the link's own body: body_eta measures its perturbation
    jf2: float  # |J|_F^2 of the body's Jacobian at its origin
    x2: float  # (1 + the largest |offset| to the parent)^2: ||X||^2 of the move up
    subtree: tuple  # the links' j of its subtree (itself included)
    diag: tuple  # ceilings of the articulated inertia's diagonal (3 rotational, 3 the mass)


@dataclass
class ABARoles:
    links: list  # [LinkRoles], leaves first (the inward pass's order)
    lam: float  # bodyfloors' eigenvalue floor of M

    def atoms(self) -> list:
        out = []
        for L in self.links:
            out += [a for row in L.IA for a in row if a is not None]
            out += [L.D, L.iD, *L.U, *L.Us]
            for M in (L.proj, L.prod):
                out += [a for row in M or [] for a in row if a is not None]
        return [a for a in out if a is not None and a.args]

    def bind(self, tape):
        """The roles as temps of the tape, or None when the tape is not made of them."""
        held, root, writer = holders(tape)

        def one(a):  # the rounding temp holding a (or -a); None: a constant, or not computed
            return one_temp(held, a)

        def reads(t, op, operands) -> bool:
            return ldl_reads(writer[t], op, operands, root)

        try:
            links = []
            for L in self.links:
                IA = [[one(a) for a in row] for row in L.IA]
                D, iD = one(L.D), one(L.iD)
                if D is None and L.D.args:  # every pivot reaches the outputs: absent, this is not its tape
                    return None
                U, Us = [one(a) for a in L.U], [one(a) for a in L.Us]
                if D is not None and not L.divided and (iD is None or not reads(iD, ("div",), [None, D])):
                    return None
                for u, us in zip(U, Us):
                    if us is not None and not reads(us, ("div",) if L.divided else ("mul",),
                                                    [u, D] if L.divided else [iD, u]):
                        return None
                proj = prod = None
                if L.proj is not None:
                    proj = [[one(a) for a in row] for row in L.proj]
                    prod = [[one(a) for a in row] for row in L.prod]
                    for i in range(6):
                        for k in range(i, 6):
                            p, m = proj[i][k], prod[i][k]
                            if m is not None and m not in (U[k], Us[i]) and not reads(m, ("mul",), [Us[i], U[k]]):
                                return None  # (m is U_k or L^_i: the other is 1, as U_i / D with U_i = D)
                            if p is not None and m is not None and p != m \
                                    and not reads(p, ("sub", "add"), [IA[i][k], m]):
                                return None  # (p == m: I^_ik is 0, the entry is -L^_i U_k, exact)
                links.append(SimpleNamespace(R=L, IA=IA, D=D, iD=iD, U=U, Us=Us, proj=proj, prod=prod))
        except LookupError:
            return None
        return _ABABound(self, links)


class _ABABound:
    """ABARoles bound to temps; iterate is the plan's (or the float32 pass's) driver."""

    def __init__(self, R: ABARoles, links):
        self.R, self.links = R, links
        self.by_j = {b.R.j: b for b in links}

    def _eta(self, st: dict) -> float:
        """A bound on the perturbation's share of M, (1 - eta) M <= M' <= (1 + eta) M: the
        smaller of ||M' - M|| / lambda <= sum_k |J_k|_F^2 delta_k / lambda (lambda M's
        eigenvalue floor) and the largest body's eta_k (x^T (M' - M) x = sum_k V_k^T
        Delta_k V_k >= -sum_k eta_k V_k^T I_k V_k >= -max_k eta_k x^T M x, V_k = J_k x)."""
        norm = sum(b.R.jf2 * st[b.R.j][0] for b in self.links) / self.R.lam
        return min(norm, max(st[b.R.j][1] for b in self.links))

    def _kappa(self, st: dict) -> dict | None:
        """{j: the bound on every entry of I^_j's error}, or None when a body's eta reaches 1:
        x^T I^A_j x is the least kinetic energy (x 2) of the subtree with link j's twist x,
        and the perturbed bodies move every energy by at most eta_b times its own, so
        ||I^_j - I^A_j|| <= (the subtree's largest eta_b) top_j."""
        if not all(st[b.R.j][1] < 1 for b in self.links):
            return None
        return {b.R.j: b.R.top * max(st[j][1] for j in b.R.subtree) for b in self.links}

    def overrides(self, st: dict) -> tuple[dict, dict, dict]:
        """({temp: error bound} of the inertias, pivots and projections, {pivot temp: floor},
        {temp: a bound on its computed value} of the reciprocals, multipliers and products).
        A projection P^_c is within kappa_c (Proj is the articulated inertia with c's joint
        free: the same energy argument) plus |F_c| <= delta_parent / x2_c of the exact one.
        The reciprocal, multipliers and products are far from the exact ones (a pivot's
        error over its floor squared) but their computed values are not: 1 / D^ <= 1 / ((1 -
        eta) f), and the perturbed inertias are positive definite (eta_b < 1), so
        |U_i U_k / D^| <= sqrt(I^_ii I^_kk): their formats take these caps."""
        kappa, eta = self._kappa(st), self._eta(st)
        over, floor, cap = {}, {}, {}

        def put(d, t, v):
            if t is not None:
                d[t] = min(d.get(t, np.inf), v)

        for b in self.links:
            k = kappa[b.R.j] * (1 + 1e-9)
            for row in b.IA:
                for t in row:
                    put(over, t, k)
            put(over, b.D, min(k, eta * b.R.ceil * (1 + 1e-9)))
            if b.D is None:
                continue
            f1 = (1 - eta) * b.R.floor * (1 - 1e-9)
            floor[b.D] = f1
            put(cap, b.iD, 1.0 / f1)
            grow = 1.0 + 2.0 ** -30 / f1 * b.R.ceil * (1 + eta) * 2  # the reciprocal's rounding, relative
            ii = [b.R.diag[i] * (1 + 1e-9) + k for i in range(6)]
            u_max = [np.sqrt(ii[i] * (b.R.ceil * (1 + eta) + k)) for i in range(6)]
            us = [np.sqrt(ii[i] / f1) * grow for i in range(6)]
            for i in range(6):
                put(cap, b.Us[i], us[i])
            if b.proj is None:
                continue
            pk = kappa[b.R.j] + st[b.R.parent][0] / b.R.x2
            for i in range(6):
                for j in range(i, 6):
                    put(cap, b.prod[i][j], np.sqrt(ii[i] * ii[j]) * grow + u_max[j] * us[i] * 2.0 ** -29)
                    if b.proj[i][j] != b.prod[i][j]:
                        put(over, b.proj[i][j], pk * (1 + 1e-9))
        return over, floor, {t: v * (1 + 1e-9) for t, v in cap.items()}

    def deltas(self, local, mag, again, assumed: dict, rel=None) -> dict:
        """{j: (a bound on ||Delta_j||_2, eta_j)} from the pass's formats: the inertias'
        errors with every projection cut to its own rounding (again), entry by entry, plus
        the children's F moved up (by norm). assumed: the state the pass ran under (its
        kappa caps the diagonals the float32 multipliers' relative errors are charged on)."""
        cut = {t: 0.0 for b in self.links if b.proj is not None for row in b.proj for t in row if t is not None}
        errs = again(cut)

        def d(t):
            return 0.0 if t is None else float(np.max(local(t)))

        def m(t):
            return 0.0 if t is None else float(np.max(mag(t)))

        E, moved = {}, {b.R.j: 0.0 for b in self.links}
        for b in self.links:
            E[b.R.j] = np.array([[float(np.max(errs(t))) if t is not None else 0.0 for t in row] for row in b.IA])
        kappa = self._kappa(assumed) if rel is not None else None
        for b in self.links:
            if b.proj is None:
                continue
            rho = 0.0 if b.R.divided else d(b.iD)
            eps = [m(u) * rho + d(us) for u, us in zip(b.U, b.Us)]
            if kappa is not None:  # float32: every rounding relative, |U_i U_k| / D^ <= sqrt(I^_ii I^_kk)
                ii = [b.R.diag[i] * (1 + 1e-9) + kappa[b.R.j] for i in range(6)]
                r2 = (1 + rel) ** (1 if b.R.divided else 2) - 1  # the multiplier's relative error
            F = np.zeros((6, 6))
            for i in range(6):
                for k in range(i, 6):
                    if b.prod[i][k] is None and b.proj[i][k] is None:
                        continue
                    F[i, k] = F[k, i] = eps[i] * m(b.U[k]) + d(b.prod[i][k])
                    if kappa is not None:  # eps_i U_k and the product's rounding, relative
                        f = (r2 + rel * (1 + r2)) * np.sqrt(ii[i] * ii[k]) * (1 + 1e-9) + 4 * TINY32
                        F[i, k] = F[k, i] = min(F[i, k], f)
            # ||X^T F X|| <= ||X||^2 |F|_F, and so is the part of it the computed entries hold
            moved[b.R.parent] += b.R.x2 * float(np.sqrt((F * F).sum()))
        return {b.R.j: body_eta(b.R.scale, E[b.R.j], moved[b.R.j]) for b in self.links}

    def iterate(self, make, run_rules, hooks, again, rel=None):
        """The plan's (or the float32 pass's) driver, as ldlback.iterate: (the accepted state,
        None), (None, why) when no bound is proven, or (None, None) when a rounding has no
        local rule (then the op-by-op bounds). again(s, overrides) -> errs: the pass
        again with s's formats kept under other overrides; rel is not needed: every rounding
        is charged as local() gives it."""
        st = {b.R.j: (DELTA_START, DELTA_START) for b in self.links}
        eta = 0.0
        for _ in range(ROUNDS):
            if self._kappa(st) is None or self._eta(st) > ETA_MAX:
                break
            s = make()
            s.override, s.den_floor, s.value_cap = self.overrides(st)
            run_rules(s)
            local, errs, mag = hooks(s)
            try:
                new = self.deltas(local, mag, lambda over: again(s, over), st, rel)
            except LookupError:  # an instruction without a local error rule: the op-by-op bounds
                return None, None
            eta = self._eta(new)
            if all(new[j][0] <= st[j][0] and new[j][1] <= st[j][1] for j in new):
                return s, None
            # assume twice what this pass gave; near the limit, as much as the limit allows
            grow = min(2.0, 0.99 * ETA_MAX / eta) if eta > 0 else 2.0
            if not grow > 1.0:
                break
            st = {j: (max(st[j][0], grow * new[j][0]), max(st[j][1], grow * new[j][1])) for j in new}
        return None, (f"the articulated-body pass's roundings perturb M by {eta:.3g} of itself (against the floor "
                      f"of its smallest eigenvalue, {self.R.lam:.3g}, or its bodies' own inertias): the pivots "
                      "are not proven positive, no bound")


def aba_roles(tree, pivots: dict, floors) -> ABARoles | None:
    """The roles of kernels.recursive.aba's inward pass (pivots: its per-link atoms; floors:
    the subtrees' rotational ceilings and masses, M's eigenvalue floor), or None when they do
    not fit the argument: an axis that is not a unit coordinate vector, a body without
    spatial inertia, no eigenvalue floor."""
    from .bodyfloors import _offset, body_scale, link_floor
    rot, mass, lam = floors
    if not lam > 0:
        return None
    sub = {}
    for L in reversed(tree.links):  # leaves first
        sub[L.j] = (L.j,) + tuple(j for c in L.children for j in sub[c.j])
    dist = {}  # (ancestor j, link k): the largest distance of k's origin from j's joint point
    for L in tree.links:  # parents first
        dist[(L.j, L.j)] = 0.0
        a = L.parent
        while a is not None:
            dist[(a.j, L.j)] = dist[(a.j, L.parent.j)] + _offset(L)
            a = a.parent
    out = []
    for L in reversed(tree.links):
        got = pivots[L]
        a = np.abs(np.asarray(L.axis, dtype=float))
        if sorted(a.tolist()) != [0.0, 0.0, 1.0]:
            return None
        sc = body_scale(L)
        f = link_floor(L)
        if sc is None or not f > 0:
            return None
        jf2, p = 0.0, L
        while p is not None:
            jf2 += 1.0 + dist[(p.j, L.j)] ** 2 if p.joint.revolute else 1.0
            p = p.parent
        ceil = rot[L.j] if L.joint.revolute else mass[L.j]
        proj = prod = None
        if "proj" in got:
            proj, prod = _six(got["proj"]), _six(got["prod"])
        out.append(LinkRoles(L.j, L.parent.j if L.parent is not None else None, _six(got["IA"]), got["D"],
                             got["iD"], [*got["U"][0], *got["U"][1]], [*got["Us"][0], *got["Us"][1]]
                             if "Us" in got else [None] * 6, proj, prod, bool(got.get("divided")), f, ceil,
                             (rot[L.j] + mass[L.j]) * (1 + 1e-9), sc,
                             jf2 * (1 + 1e-9),
                             (1.0 + _offset(L)) ** 2 * (1 + 1e-9), sub[L.j], (rot[L.j],) * 3 + (mass[L.j],) * 3))
    return ABARoles(out, float(lam))
