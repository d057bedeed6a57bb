"""Backward error of an open tree's LDL^T solve (forward dynamics), in fixed point
(analysis.fixedpoint's plan) and float32 (analysis.floaterror's magnitude bounds, each
rounding at most u times its result's enclosure): the factorisation's errors bounded as a
perturbation of M, not propagated op by op.

Op-by-op propagation through the elimination multiplies the largest |L| by the smallest
1/D as if together: on sample_arm the root pivot's error bound reached 26 against its
floor 0.02 and the kernel was refused. The argument here (Higham's for Cholesky, with
absolute fixed-point roundings):

Factorisation. Read every computed quantity as exact and name the local errors: the
reciprocal r_k = 1/D_k + rho_k, the multiplier L_bk = E_b r_k + mu_bk (E_b the computed
active entry (b, k) at step k; on a divided step, L_bk = E_b / D_k + mu_bk and z_k = y_k /
D_k + its rounding, rho_k = 0), so L_bk = E_b / D_k + eps_bk with |eps_bk| <= |E_b| rho_k
+ mu_bk; each Schur update S_ab <- S_ab - L_ak E_b adds its product's and its
subtraction's roundings (sigma_abk). Substituting E_b = D_k (L_bk - eps_bk), the computed
L (unit lower) and D (the computed pivots) satisfy L D L^T = M^ + dM exactly, M^ the
computed M, with |dM_ab| <= sum over the steps k before both of (|L_ak D_k| |eps_bk| +
sigma_abk) and |dM_bk| <= D_k |eps_bk| + (the same sums). With Delta = M^ - M + dM and
||Delta||_2 <= eta lambda (lambda: bodyfloors' floor of M's smallest eigenvalue; the
norm bounded by the row sums of the entrywise bound), (1 - eta) M <= M + Delta <= (1 +
eta) M, and the same holds for every Schur complement (monotone, homogeneous). After
steps 0..k-1 the computed active matrix is exactly the Schur complement of M plus the
perturbation of those steps alone (its bound is at most eta's), so by induction over the
steps, with eta < 1: the computed pivot D_k >= (1 - eta) f_k > 0 (f_k its body floor),
D_k <= (1 + eta) top_k, every active entry within eta sqrt(top_i top_j) of its exact
value (eta top_i on the diagonal), every multiplier within 2 eta / (1 - eta) sqrt(top_b /
f_k) of its exact value, and |L_ak D_k| <= sqrt((M + Delta)_aa D_k) <= (1 + eta)
sqrt(top_a top_k) <= |E_a| + D_k |eps_ak|. The format plan uses these bounds for these
temps (overrides, instead of the propagated errors), for the value before the temp's own
rounding so that no bound leans on itself: an active entry before its rounding is the
entry of a Schur complement of M perturbed by the other roundings alone (a subset of
Delta's terms), a reciprocal's 1/D_k moves by at most eta / ((1 - eta) f_k), a
multiplier's product E_b r_k is the stage's exact multiplier E_b / D_k (within 2 eta /
(1 - eta) sqrt(top_b / f_k) of M's) plus E_b rho_k. Each value then fits its format, so
every local rounding is at most the half ulp the formats give. eta and the reciprocals'
rho are assumed, the plan run, both recomputed from the chosen formats: accepted when
they are at most the assumed ones (the induction over the steps then holds), else
assumed larger and the plan run again. A multiplier computed before the elimination (a
leaf's constant pivot folded into it) has |eps| <= its own error + (E's error + |E| eta)
/ ((1 - eta) f_k), E then read before the elimination too.

M's own errors. Entry by entry against lambda, M^ - M is most of Delta (sample_arm float32:
0.09 of the floor's 0.1). Where M comes from CRBA (bodies), its composite inertias are
read as the exact ones of perturbed bodies, as analysis.ababack reads the articulated
inertias: body k's Delta_k is its composite inertia's error when its children's are exact
but for their own rounding (a pass with the composite inertias of every other depth's
parity cut), M' = sum_k J_k^T (I_k + Delta_k) J_k lies within eta_M M (eta_M the largest
bodyfloors.body_eta, each perturbation measured in its body's own inertia), and the
entries' remaining errors (the forces carried up to the ancestors' rows, with every
composite inertia exact but for its own rounding) join the factor's against lambda: eta =
eta_M + (their row sums) / lambda, when smaller (sample_arm float32: 0.029 against 0.104).
Every use of eta below reads only (1 - eta) M <= M + Delta <= (1 + eta) M; the solve's
||Delta x|| is taken in M's norm, ||Delta x||_{M^-1} <= eta ||x||_M.

Solve. The forward substitution's roundings give L y = b^ + e exactly (each rounding of
y_i's chain adds to y_i); z_k = r_k y_k + its rounding = y_k / D_k + e_z,k with |e_z,k| <=
rho_k |y_k| + its rounding; the back substitution x = z - L^T x + e_x. So
(M + Delta) x^ = b^ + e + L D (e_z + e_x), and with M x = b,
x^ - x = (M + Delta)^-1 (b^ - b + e - Delta x) + L^-T (e_z + e_x), where
||(M + Delta)^-1|| <= 1 / ((1 - eta) lambda), ||x|| <= ||b|| / lambda, ||L^-T|| <=
sqrt(max D / lambda_min(M + Delta)), and |y_k| <= ||b^ + e|| sqrt(D_k / lambda_min(M +
Delta)) (b^T A^-1 b = sum y_k^2 / D_k). Every solution entry's error is at most that
2-norm; the plan keeps the smaller of it and the propagated bound. ||b|| / lambda is far
above the accelerations of an arm (sample_arm: 1.6e7 rad/s^2 from b's enclosure, |qdd|
<= 1.7e3): where the kernel knows a bound E of ||b||_{M^-1} = sqrt(b^T M^-1 b) over a
box (Energy: the bias forces bounded body by body, kernels.recursive.bias_energy_bound,
and the actuators' |B u| / sqrt(lambda)), ||x|| <= ||x||_M / sqrt(lambda) <= E /
sqrt(lambda) and |y_k| <= sqrt(D_k) ||b^ + e||_{(M + Delta)^-1} <= sqrt(D_k / (1 - eta))
(E + ||b^ - b + e|| / sqrt(lambda)) instead (sample_arm 5.4e3 / sqrt(lambda) = 9.3e4).

The tape holds these atoms when the factor's products read their operands as computed
(factor_ldlt's `kept`: ir.mul_kept, where mul would move a constant factor of an operand
out of the product) and the lowering leaves them whole (lower's `keep`: LDLRoles.atoms).
Sound when the tape computes exactly these atoms: every instruction after M's entries
and b (not in their cone) must be one of the roles replayed here, each role atom held by
one temp (sign aside); otherwise no backward treatment (bind returns None) and the
op-by-op bounds stand.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import ZERO, add, mul, sub
from .bodyfloors import body_eta
from .definite import _temps
from .linear import _locate

ETA_START = 1e-6  # the first assumed ||Delta|| / lambda: a 32-bit plan of a well-scaled M lands near it
TINY32 = 2.0 ** -126  # float32's underflow: a rounding's absolute floor (per multiplier, generously)
ETA_MAX = 0.5  # beyond it the pivots' floors are too eroded to be worth a bound: iterate gives none
ROUNDS = 8


@dataclass
class Energy:
    """What bounds ||b||_{M^-1} = sqrt(b^T M^-1 b) of the first solve (b = B u + Q, no
    force elements) over a box: bias(qd_max) for the bias forces
    (kernels.recursive.bias_energy_bound), ||B u|| / sqrt(lam) for the actuators'."""
    qd: list  # the rate symbols, by coordinate
    u: list  # the actuator symbols
    Babs: np.ndarray  # |B|, coordinates x actuators
    bias: object  # qd_max (per coordinate: numbers or arrays over the boxes) -> bound
    lam: float

    def __call__(self, qd_max: list, u_max: list):
        bu = sum(sum(self.Babs[i, j] * u_max[j] for j in range(len(self.u))) ** 2
                 for i in range(self.Babs.shape[0])) ** 0.5 if self.u else 0.0
        return (self.bias(qd_max) + bu / np.sqrt(self.lam)) * (1 + 1e-9)


@dataclass
class SolveRoles:
    """One right-hand side's solve with the factor: fwd {i: [atoms of y_i's chain]}; z {k:
    z_k}; back {k: [atoms of x_k's chain after z_k]}; x the solution."""
    rhs: list
    fwd: dict
    z: dict
    back: dict
    x: list

    def atoms(self) -> list:
        out = list(self.rhs) + list(self.z.values()) + list(self.x)
        for ch in list(self.fwd.values()) + list(self.back.values()):
            out += ch
        return out


@dataclass
class LDLRoles:
    """The atoms of an open tree's LDL^T factor and its solves (kernels.dynamics._tree_factor),
    by role, and the tree's floors. steps: [(k, pivot, recip, {b: L_bk}, [(a, b, u, new)], {b:
    E_b})]; solves: the first is the forward dynamics' (M qdd = b); more (the linearized
    dynamics' columns) may read its solution."""
    n: int
    entries: dict  # (i, j), i >= j -> M's atom
    steps: list
    solves: list  # [SolveRoles]
    top: dict
    floor: dict
    lam: float
    lam_what: str = ""  # what sets lam (the body of least inertia), for the refusal line
    energy: Energy | None = None  # bounds sqrt(b^T M^-1 b) of the first solve (None: unknown)
    bodies: list | None = None  # [(j, odd depth, composite inertia 6 x 6 atoms, BodyScale)]: M by CRBA

    def atoms(self) -> list:
        """Every atom of the roles (lower's keep: each held by a temp)."""
        out = list(self.entries.values())
        for *_, IC, _ in self.bodies or ():
            out += [a for row in IC for a in row if a is not None and a.args]
        for k, piv, rec, low, ups, E in self.steps:
            out += [piv, *low.values(), *E.values(), *(a for *_, u, nw in ups for a in (u, nw))]
            out += [rec] if rec is not None else []
        for sv in self.solves:
            out += sv.atoms()
        return out

    def bind(self, tape):
        """The roles as temps of the tape, or None when the tape is not made of them."""
        try:
            return _bind(self, tape)
        except LookupError:
            return None


def build_roles(F, solves, top, floor, lam, lam_what: str = "", energy: Energy | None = None,
                bodies: list | None = None) -> LDLRoles:
    """The roles of factor F's (LDL^T, 1 x 1 pivots) solves of M x = rhs for each (rhs, x) of
    solves, replayed as factor_ldlt and LDLFactor.solve build them (the same atoms)."""
    act = {(i, j): a for (i, j), a in F.A.entries.items() if i >= j}
    mul = F.product
    steps = []
    for st in F.steps:
        (k,) = st.idx
        nb = sorted(st.lower)
        E = {i: act.get((max(i, k), min(i, k)), ZERO) for i in nb}
        ups = []
        for a_, i in enumerate(nb):
            (li,) = st.lower[i]
            for j in nb[a_:]:
                key = (max(i, j), min(i, j))
                u = mul(li, E[j])
                act[key] = new = sub(act.get(key, ZERO), u)
                ups.append((i, j, u, new))
        steps.append((k, st.pivot, None if st.divided else st.recip, {i: ls[0] for i, ls in st.lower.items()}, ups, E))
    entries = {(i, j): a for (i, j), a in F.A.entries.items() if i >= j}
    return LDLRoles(F.n, entries, steps, [_solve_roles(F, rhs, x) for rhs, x in solves], dict(top), dict(floor),
                    float(lam), lam_what, energy, bodies)


def _solve_roles(F, rhs, x) -> SolveRoles:
    mul = F.product
    y = list(rhs)
    fwd = {i: [] for i in range(F.n)}
    for st in F.steps:
        (k,) = st.idx
        for i, (l,) in st.lower.items():
            p = mul(l, y[k])
            y[i] = sub(y[i], p)
            fwd[i] += [p, y[i]]
    z, back = {}, {}
    for st in F.steps:
        (k,) = st.idx
        z[k] = acc = add(ZERO, F.scaled(st, y[k]))  # as LDLFactor.solve builds it
        chain = []
        for i, (l,) in st.lower.items():
            p = mul(l, x[i])
            acc = sub(acc, p)
            chain += [p, acc]
        back[k] = chain
    return SolveRoles(list(rhs), fwd, z, back, list(x))


def holders(tape):
    """(held, root, writer) of a tape, what binding roles to it reads: held(a) the set of
    temps whose instruction's rounding makes atom a or -a (root: through neg instructions;
    empty for a constant or an atom the tape does not compute); writer {temp: instruction}."""
    loc = _locate(tape)
    writer = {ins.dst[0]: ins for ins in tape.instrs}

    def root(t):
        while writer[t].op == "neg" and writer[t].args[0][0] == "t":
            t = writer[t].args[0][1]
        return t

    def held(a) -> set:
        return {root(t) for t, _ in _temps(loc, a)} if a is not None and a.args else set()

    return held, root, writer


def one_temp(held, a):
    """The one temp holding atom a (held: holders' first), None for a constant or an atom
    the tape does not compute (exact, in a perturbed system's reading); LookupError: two."""
    ts = held(a)
    if len(ts) > 1:
        raise LookupError(a)
    return ts.pop() if ts else None


def reads(ins, ops, operands, root) -> bool:
    """ins is one of ops reading exactly these temps (through negations; None: a literal),
    in this order for a quotient."""
    got = [root(o[1]) if o[0] == "t" else None for o in ins.args]
    if ins.op == "div":
        return "div" in ops and got == list(operands)
    return ins.op in ops and sorted(got, key=str) == sorted(operands, key=str)


def _bind(R: LDLRoles, tape):
    held, root, writer = holders(tape)

    def need(a):  # the one temp holding a; None for a constant (or a divided step's reciprocal)
        if a is None or not a.args:
            return None
        ts = held(a)
        if len(ts) != 1:
            raise LookupError(a)
        return ts.pop()

    upstream = [o for o in (need(a) for a in list(R.entries.values()) + R.solves[0].rhs) if o is not None]
    needed = tape.cone(("t", t) for t in upstream)[0]
    steps, ends = [], {}
    for k, piv, rec, low, ups, E in R.steps:
        steps.append((k, need(piv), need(rec), {b: need(l) for b, l in low.items()},
                      [(a, b, need(u), need(new)) for a, b, u, new in ups]))
        ends[k] = {b: need(e) for b, e in E.items()}
        for b, t in steps[-1][3].items():  # L_bk = fl(E_b r_k) or fl(E_b / D_k), or computed before the elimination
            if t is None or t in needed:
                continue
            if not (reads(writer[t], ("mul",), [ends[k][b], steps[-1][2]], root) if rec is not None
                    else reads(writer[t], ("div",), [ends[k][b], steps[-1][1]], root)):
                return None
    solves = [SolveRoles([need(a) for a in sv.rhs], {i: [need(a) for a in ch] for i, ch in sv.fwd.items()},
                         {k: need(a) for k, a in sv.z.items()}, {k: [need(a) for a in ch] for k, ch in sv.back.items()},
                         [need(a) for a in sv.x]) for sv in R.solves]
    B = _Bound(R, steps, solves, {ij: need(a) for ij, a in R.entries.items()})
    B.upstream, B.ends = needed, ends
    B.bodies = None
    try:  # the composite inertias' temps
        B.bodies = [(j, odd, [[one_temp(held, a) for a in row] for row in IC], sc)
                    for j, odd, IC, sc in R.bodies or ()] or None
    except LookupError:
        pass
    at = {a: ("in", k) for k, a in enumerate(tape.inputs)}  # the energy's rates and actuators among the inputs
    B.energy_in = None
    if R.energy is not None and all(a in at for a in R.energy.qd + R.energy.u):
        B.energy_in = ([at[a] for a in R.energy.qd], [at[a] for a in R.energy.u])
    # the later solves' right-hand sides (they may read the first solution): computed as the
    # tape says, their errors propagated; only the factor's and the solves' roles are replayed
    later = tape.cone(("t", t) for sv in solves[1:] for t in sv.rhs if t is not None)[0] if solves[1:] else set()
    read = {a[1] for ins in tape.instrs for a in ins.args if a[0] == "t"}
    B.read_x = [any(t in read for t in sv.x if t is not None) for sv in solves]
    B.alias = {}  # root temp -> the temps holding its negation
    for ins in tape.instrs:
        if ins.op == "neg" and ins.args[0][0] == "t":
            B.alias.setdefault(root(ins.args[0][1]), []).append(ins.dst[0])
    known = B.role_temps()
    for ins in tape.instrs:
        d = ins.dst[0]
        if d not in needed and d not in known and d not in later and ins.op != "neg":
            return None  # an instruction of the solve this replay does not know: no backward bound
    return B


class _Bound:
    """LDLRoles bound to temps (None: a constant, exact). Used by fixedpoint's plan:
    overrides(eta) -> {temp: error bound}; settle(s, eta) -> the eta the plan's formats
    give (and the solution's bound, kept for finish)."""

    def __init__(self, R, steps, solves, entries):
        self.R, self.steps, self.solves, self.entries = R, steps, solves, entries
        # M's entries and b keep their propagated errors: eta is computed from them
        self.upstream = {t for t in list(entries.values()) + solves[0].rhs if t is not None}
        self.read_x = [False] * len(solves)

    def finish(self, err: dict, sols) -> None:
        """Each solution's temps (and their negations) in err {temp: bound} get at most its bound."""
        for sv, sol in zip(self.solves, sols):
            for x in sv.x:
                for t in [x] + self.alias.get(x, []) if x is not None else []:
                    err[t] = np.minimum(err[t], sol)

    def role_temps(self) -> set:
        out = set()
        for k, piv, rec, low, ups in self.steps:
            out |= {piv, rec, *low.values(), *(t for *_, u, nw in ups for t in (u, nw))}
        for sv in self.solves:
            for ch in list(sv.fwd.values()) + list(sv.back.values()):
                out |= set(ch)
            out |= set(sv.z.values())
        return out - {None}

    def floors(self, eta: float) -> dict:
        """{temp: a floor of the computed |pivot|}: (1 - eta) f_k (module doc)."""
        out = {}
        for k, piv, *_ in self.steps:
            for t in [piv] + self.alias.get(piv, []) if piv is not None else []:
                out[t] = (1 - eta) * self.R.floor[k] * (1 - 1e-9)
        return out

    def iterate(self, make, run_rules, hooks, again=None, rel: float | None = None):
        """The plan's (or the float32 pass's) driver: module iterate."""
        return iterate(self, make, run_rules, hooks, rel, again)

    def overrides(self, eta: float, rho: dict | None, sols: list | None = None) -> dict:
        """{temp: bound on |computed - exact|, before its own rounding} of the factor's
        quantities, given ||Delta|| <= eta lambda over the steps before (module doc): an
        active entry's value before its rounding is an entry of the Schur complement of M
        perturbed by the other roundings alone, and a multiplier's product E_b r_k is the
        stage's exact multiplier plus E_b rho_k (rho: the reciprocals' roundings assumed,
        checked by settle; None: the multipliers keep their propagated errors), and the
        solutions other instructions read at most their bounds sols assumed (checked too)."""
        top, fl = self.R.top, self.R.floor
        out: dict = {}

        def put(t, v):
            if t is not None and t not in self.upstream:
                out[t] = min(out.get(t, np.inf), v)

        for k, piv, rec, low, ups in self.steps:
            put(piv, eta * top[k])
            put(rec, eta / ((1 - eta) * fl[k]))
            for b, t in low.items() if rho is not None else ():
                put(t, 2 * eta / (1 - eta) * np.sqrt(top[b] / fl[k]) + (1 + eta) * np.sqrt(top[b] * top[k]) * rho[k])
            for a, b, u, nw in ups:
                put(nw, eta * np.sqrt(top[a] * top[b]))
        for sv, sol, read in zip(self.solves, sols or [], self.read_x):
            for t in sv.x if read and sol is not None else ():
                put(t, float(np.max(sol)))
        return {t: v * (1 + 1e-9) for t, v in out.items()}

    def _bodies(self, again) -> tuple:
        """(eta_M, WT) for M computed by CRBA: its composite inertias read as exact ones of
        perturbed bodies (as analysis.ababack reads the articulated inertias), M' =
        sum_k J_k^T (I_k + Delta_k) J_k within eta_M M, eta_M the largest body's eta
        (bodyfloors.body_eta), and WT the entries' errors when every composite inertia is
        exact but for its own rounding (the forces carried up to the ancestors' rows). Delta_k:
        the errors of body k's composite inertia when its children's are exact but for their
        own rounding, from a pass with every composite inertia at the other parity of depth
        cut (a pass cuts the children of every link it measures, never the link)."""
        cut = {}
        for j, odd, IC, sc in self.bodies:
            cut.setdefault(odd, {}).update({t: 0.0 for row in IC for t in row if t is not None})
        by = {odd: again(c) for odd, c in cut.items()}
        every = again({t: 0.0 for c in cut.values() for t in c})
        eta_b = 0.0
        for j, odd, IC, sc in self.bodies:
            errs = by.get(not odd)
            E = np.array([[float(np.max(errs(t))) if t is not None and errs is not None else 0.0 for t in row]
                          for row in IC])
            eta_b = max(eta_b, body_eta(sc, E, 0.0)[1])
        WT = np.zeros((self.R.n, self.R.n))
        for (i, j), t in self.entries.items():
            e = 0.0 if t is None else float(np.max(every(t)))
            WT[i, j] += e
            WT[j, i] += e if i != j else 0.0
        return eta_b, WT

    def settle(self, eta: float, local, errs, mag, rel: float | None = None, again=None) -> tuple:
        """(the eta the plan's formats and M's errors give, the solution's error bound (an
        array over the boxes, or a number), the reciprocals' roundings {k: rho_k}): valid
        when that eta <= eta and those rho are at most the ones overrides assumed.
        local(t): the rounding of the instruction writing temp t; errs(t), mag(t): its
        error bound and magnitude (arrays over the boxes, or numbers; mag also of an input
        operand ("in", k)). rel (float32: its
        unit roundoff): every rounding is at most rel times its exact result, so a multiplier's
        error times its pivot is at most (2 rel + rel^2) |E_b| whatever the pivot's range
        (the reciprocal's and the product's roundings, or the quotient's), and an update's
        |L_ak D_k| |eps_bk| at most that times (1 + rel)^2 |E_a E_b| / D_k <= (1 + eta)
        sqrt(top_a top_b) (a Schur complement of the perturbed M is positive definite)."""
        R, top, fl = self.R, self.R.top, self.R.floor

        def d(t):  # local rounding of the instruction writing t (none of the solve's before it)
            return 0.0 if t is None or t in self.upstream else local(t)

        def err(t):
            return 0.0 if t is None else float(np.max(errs(t)))

        WM = np.zeros((R.n, R.n))  # M's entries' errors
        for (i, j), t in self.entries.items():
            WM[i, j] += err(t)
            WM[j, i] += err(t) if i != j else 0.0
        W = np.zeros((R.n, R.n))  # the factor's
        c = 1 + eta
        rho = {}
        for k, piv, rec, low, ups in self.steps:
            rho[k] = d(rec)
            eps = {b: self._eps(k, b, t, eta, rho[k], d, err) for b, t in low.items()}
            # float: the relative roundings of multipliers computed in the elimination (docstring)
            rel2 = 2 * rel + rel * rel if rel is not None else 0.0
            r2 = {b for b, t in low.items() if t is not None and t not in self.upstream} if rel is not None else set()
            for b in low:
                v = c * top[k] * eps[b]
                if b in r2:
                    v = min(v, rel2 * c * np.sqrt(top[b] * top[k]) + TINY32 * top[k])
                W[b, k] += v
                W[k, b] += v
            for a, b, u, nw in ups:
                # |L_ak D_k| <= |E_a| + D_k |eps_ak|
                v = c * max((np.sqrt(top[a] * top[k]) + top[k] * eps[a]) * eps[b],
                            (np.sqrt(top[b] * top[k]) + top[k] * eps[b]) * eps[a])
                if a in r2 and b in r2:
                    v = min(v, rel2 * (1 + rel) ** 2 * c * np.sqrt(top[a] * top[b])
                            + TINY32 * (np.sqrt(top[a] * top[k]) + np.sqrt(top[b] * top[k])))
                v += d(u) + d(nw)
                W[a, b] += v
                W[b, a] += v if a != b else 0.0
        norm = float((WM + W).sum(1).max()) * (1 + 1e-9)
        if self.bodies is not None and again is not None:  # M's errors as the bodies' perturbations
            eta_b, WT = self._bodies(again)
            norm = min(norm, (eta_b * R.lam + float((WT + W).sum(1).max())) * (1 + 1e-9))
        eta1 = norm / R.lam
        energy = None
        if self.energy_in is not None:  # over each box, from its rates' and actuators' ranges
            energy = R.energy(*([mag(o) for o in ops] for ops in self.energy_in))
        return eta1, [self._solution(sv, errs, mag, max(eta, eta1), norm, rho, d, energy if i == 0 else None)
                      for i, sv in enumerate(self.solves)], rho

    def _eps(self, k, b, t, eta, rho, d, err):
        """A bound on |L_bk - E_b / D_k| (computed values): E_b rho_k + L's rounding, or for an
        L computed before the elimination (a leaf's constant pivot folded into it), L's
        and E's own errors over the pivot's floor (E then read before the elimination too)."""
        top, fl = self.R.top, self.R.floor
        emax = (1 + eta) * np.sqrt(top[b] * top[k])
        if t is not None and t not in self.upstream:
            return emax * rho + d(t)
        e = self.ends[k][b]
        if e is not None and e not in self.upstream:
            raise LookupError("a multiplier computed before the elimination from an entry computed in it")
        return err(t) + (err(e) + emax * eta) / ((1 - eta) * fl[k])

    def _solution(self, sv, errs, mag, eta, norm, rho, d, energy=None):
        """The bound on every entry's error of solve sv's solution (module doc, Solve).
        energy: a bound on ||b||_{M^-1} = sqrt(b^T M^-1 b) (None: ||b|| / sqrt(lambda)),
        which ||x|| <= ||b||_{M^-1} / sqrt(lambda) and |y_k| <= sqrt(D_k) ||b^ +
        e||_{(M + Delta)^-1} read instead of ||b|| / lambda."""
        R = self.R
        if not eta < 1:
            return np.inf
        bmag = sum(mag(t) ** 2 if t is not None else 0.0 for t in sv.rhs) ** 0.5
        berr = sum(errs(t) ** 2 if t is not None else 0.0 for t in sv.rhs) ** 0.5
        e = sum(sum(d(t) for t in ch) ** 2 for ch in sv.fwd.values()) ** 0.5
        lam_t = (1 - eta) * R.lam
        bm = bmag / np.sqrt(R.lam) if energy is None else np.minimum(bmag / np.sqrt(R.lam), energy)
        bp = bm + (berr + e) / np.sqrt(R.lam)  # >= ||b^ + e||_{M^-1}
        ezx = sum((rho[k] * bp * np.sqrt((1 + eta) * R.top[k] / (1 - eta)) + d(sv.z[k]) + sum(d(t) for t in ch)) ** 2
                  for k, ch in sv.back.items()) ** 0.5
        dmax = (1 + eta) * max(R.top.values())
        out = (berr + e + norm * bm / np.sqrt(R.lam)) / lam_t + np.sqrt(dmax / lam_t) * ezx
        return np.nextafter(out * (1 + 1e-9), np.inf)


def iterate(bw: "_Bound", make, run_rules, hooks, rel: float | None = None, again=None):
    """The plan (fixed point) or bound (float32) pass with the factor's errors bounded as
    a perturbation of M: eta and the reciprocals' rho assumed, checked against the ones
    the pass gives, assumed larger until they hold. make() -> a fresh state (with
    .override, .den_floor, .err), run_rules(state), hooks(state) -> (local, errs, mag) for
    settle. (the accepted state, None), or (None, why) when no bound is proven (why None:
    the tape holds an instruction no local error rule covers)."""
    eta, rho, got, sols = ETA_START, None, 0.0, None
    for _ in range(ROUNDS):
        if eta > ETA_MAX:
            break
        s = make()
        s.override, s.den_floor = bw.overrides(eta, rho, sols), bw.floors(eta)
        try:
            run_rules(s)
            got, sol, rho_got = bw.settle(eta, *hooks(s), rel=rel,
                                          again=(lambda over, s=s: again(s, over)) if again is not None else None)
        except LookupError:  # an instruction without a local error rule: the op-by-op bounds
            return None, None
        factor_ok = got <= eta and (rho is None or all(rho_got[k] <= rho[k] for k in rho_got))
        read_ok = all(not r or (sols is not None and np.all(new <= old))
                      for r, new, old in zip(bw.read_x, sol, sols or sol))
        if factor_ok and read_ok:
            bw.finish(s.err, sol)
            return s, None
        # a solution other instructions read: assume the bound this pass gave, with a margin
        sols = [np.nextafter(np.asarray(v, float) * (1 + 1e-6), np.inf) if r else None
                for r, v in zip(bw.read_x, sol)]
        if not factor_ok:
            # assume twice what this pass gave; near the limit, the limit itself
            eta, rho = max(eta, min(2 * got, max(ETA_MAX, got * 1.01))), {k: 2 * v for k, v in rho_got.items()}
    if got <= ETA_MAX:
        return None, (f"the bounds of the solutions later solves read did not settle in {ROUNDS} passes "
                      f"(M's perturbation {got:.3g} x the floor of its smallest eigenvalue): no bound")
    return None, (f"the LDL^T solve's roundings (and M's own errors) perturb M by {got:.3g} x the floor of its "
                  f"smallest eigenvalue ({bw.R.lam:.3g}{', ' + bw.R.lam_what if bw.R.lam_what else ''}), "
                  f"more than {ETA_MAX}: the pivots are not proven positive, "
                  "no bound")
