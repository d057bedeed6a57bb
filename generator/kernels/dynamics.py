"""The dynamics kernels: forward dynamics (accelerations from forces) and inverse dynamics
(forces from a prescribed motion).

    forward-dynamics  q, qd, t, u -> qdd, lambda:  [M A^T; A 0] [qdd; lambda] = [Q + B u; gamma]
    inverse-dynamics  q, qd, qdd, t -> u, lambda:  [A^T, -B] [lambda; u] = Q - M qdd

Sign conventions are those of Equations: M qdd + Phi_q^T lambda = Q + B u, with Q (the
"delta" of the principle of virtual power) holding gravity, applied forces and the
velocity-dependent inertia terms. A holds the kinematic rows (driving constraints left
out: the actuators u take their place) and the non-holonomic rows; an inverse-dynamics
kernel of a model without actuators keeps every row, so the multipliers of the driving
constraints are the efforts that drive the motion.

Invariants: every input has a declared range (an actuator input without one gets the
envelope of the inverse-dynamics forces along the driven motion, widened, and
`info.derived_ranges` names it); each kernel factors one matrix once, pivots fixed at
generation time and checked at consistent configurations (domain.sampling).
"""
from __future__ import annotations

import numpy as np

from ..analysis.bodyfloors import ConstantEnclosure, diagonal_ceilings, divides, eigen_floor, link_floor
from ..analysis.ldlback import Energy, build_roles
from ..domain.cover import envelope_cover, envelope_domain
from ..domain.forces import actuator_ranges, dynamics_domain
from ..domain.motion import driven_domain, motion_states
from ..domain.sampling import kernel_samples, with_envelope_samples
from ..ir import ZERO, ExpressionError, Sparse, add, mul, neg, sub
from ..linalg import SingularPivotError, factor_ldlt, factor_lu
from ..model.equations import Equations
from .common import (KernelError, LinearSystem, actuator_symbols, actuators, constraint_rows, independent_equations,
                     names, need_inertia, port)
from .cost import weighted_cost
from .kernel import InPort, Kernel, KernelInfo, OutPort

FORWARD_METHODS = ("auto", "ldlt", "lu")


def kkt_matrix(M: Sparse, A: Sparse) -> Sparse:
    """K = [M A^T; A 0], the matrix of [qdd; lambda] in the forward dynamics."""
    n = M.shape[0]
    entries = dict(M.entries)
    for (i, j), a in A.entries.items():
        entries[(n + i, j)] = a
        entries[(j, n + i)] = a
    return Sparse((n + A.shape[0], n + A.shape[0]), entries)


def _forward_factor(K: Sparse, rhs, samples, method: str, row_names, col_names, label):
    """(factor, solution) of K x = rhs by `method`; with "auto" the cheaper of LDL^T and LU
    (divisions weighted), LDL^T on a tie."""
    tried = {}
    if method in ("auto", "ldlt"):
        try:
            F = factor_ldlt(K, samples, names=col_names, label=label, definite=False)
            tried["ldlt"] = (F, F.solve(rhs))
        except SingularPivotError:
            if method == "ldlt":
                raise
    if method in ("auto", "lu"):
        F = factor_lu(K, samples, row_names=row_names, col_names=col_names, label=label)
        tried["lu"] = (F, F.solve(rhs))
    if len(tried) == 2:
        cost = {k: weighted_cost(x_) for k, (_, x_) in tried.items()}
        return tried["ldlt"] if cost["ldlt"] <= cost["lu"] else tried["lu"]
    return next(iter(tried.values()))


def tree_order(eqs: Equations):
    """(the leaves-first order of an unconstrained open tree's coordinates, its links by
    coordinate, the tree), or None when eqs is not one (kernels.recursive.open_tree)."""
    from .recursive import open_tree
    try:
        tree = open_tree(eqs.source)
    except (KernelError, ExpressionError):
        return None
    links = {L.j: L for L in tree.links}
    if tree.base is not None or sorted(links) != list(range(len(eqs.q))):
        return None
    return [L.j for L in reversed(tree.links)], links, tree  # tree.links: parents first


def tree_forms(eqs: Equations, tree, norms: list | None = None, composite: dict | None = None):
    """(M, Q) of an unconstrained open tree in recursive form: M by the composite-rigid-body
    algorithm, Q as the force elements' generalized forces less RNEA at zero acceleration
    (kernels.recursive). Their intermediate values are physical (composite inertias, link
    accelerations), so range analysis encloses them tightly, where the Lagrangian's
    expanded M and Q were enclosed 15 and 100 times wider than their values over
    sample_arm's joint box (a float32 error is relative to the enclosure), and the
    kernels are smaller (sample_arm's forward dynamics: 578 operations against 1,517).
    norms (a list): gets the bias recursion's norm hints over the declared rates
    (kernels.recursive.rnea_norms; for kernels whose inputs are q and qd themselves);
    composite (a dict) gets CRBA's composite inertias (kernels.recursive.crba)."""
    from .recursive import crba, rate_bounds, rnea
    q = list(eqs.q)
    rates = rate_bounds(eqs.ranges, eqs.qd) if norms is not None else None
    if rates is not None:
        rates = (rates[0], [0.0] * len(q))  # the bias: zero acceleration
    bias = rnea(tree, q, list(eqs.qd), [ZERO] * len(q), norms, rates)
    return Sparse(eqs.M.shape, crba(tree, q, composite)), [sub(a, b) for a, b in zip(tree.applied, bias)]


def tree_hints(F, links, coords, top) -> tuple[list, list, list]:
    """(hints [(atom, lo, hi)], the joints without a floor, labels [(atom, text)]) of an open
    tree's LDL^T factor F (leaves first): each pivot floored by its joint's own body and
    capped by top, its composite inertia (bodyfloors.diagonal_ceilings), its reciprocal,
    multipliers and the active entries bounded from them. Constant over every configuration."""
    hints, missing, labels = [], [], []
    for st, stat in zip(F.steps, F.stats):
        (j,) = st.idx
        f = link_floor(links[j])
        what = f"1/(M's LDL^T pivot of joint {coords[j].value.name}"
        if not 0 < f <= stat.min_abs:  # no inertia about the axis (or not this tree's M): no floor
            missing.append(F.col_names[j])
            labels.append((st.recip, what + ": no floor proved, its body has no inertia about its axis)"))
            continue
        text = what + f", proven in [{f:.3g}, {top[j]:.3g}])"
        labels += [(a, text) for a in ([ls[0] for ls in st.lower.values()] if st.divided else [st.recip])]
        hints += [(st.pivot, f, top[j]), (st.recip, 1.0 / top[j], np.nextafter(1.0 / f, np.inf))]
        hints += [(ls[0], -m, m) for i, ls in st.lower.items()
                  for m in [np.nextafter(np.sqrt(top[i] / f), np.inf) * (1 + 1e-12)]]
    return hints + _active_bounds(F, top), missing, labels


def _tree_factor(eqs: Equations, Bu, samples, col_names, label, more=None, act=None, uranges=None):
    """(factor, solution, floors' enclosure) of M qdd = B u + Q for an unconstrained open
    tree in recursive form (tree_forms), or None when the model is not one. LDL^T leaves
    first, its floors and caps as tree_hints; with every product reading its operands as
    computed (kept), the solve's error bounded backward (analysis.ldlback). more(M, Q, F,
    qdd) -> [(rhs, x)]: further solves with the factor (the linearized dynamics' columns),
    their errors bounded backward too."""
    got = tree_order(eqs)
    if got is None:
        return None
    order, links, tree = got
    norms: list = []
    composite: dict = {}
    M, Q = tree_forms(eqs, tree, norms, composite)
    rhs = [add(b, f) for b, f in zip(Bu, Q)]
    top = diagonal_ceilings(list(links.values()))
    limit: list = []
    lam = eigen_floor(list(links.values()), limit)
    F = factor_ldlt(M, samples, names=col_names, label=label, order=order, kept=True,
                    divide=_divided(links, top) if lam > 0 else ())  # only the backward bound needs it
    hints, missing, labels = tree_hints(F, links, eqs.q, top)
    hints += norms
    x = F.solve(rhs)
    solves = [(rhs, x)] + (more(M, Q, F, x) if more is not None else [])
    scaled = _solve_bounds(F, rhs, x, top, links, lam) if lam > 0 and not missing else []
    energy = _energy(eqs, tree, act, lam) if scaled and act is not None else None
    top_e = None
    if energy is not None and uranges is not None:  # over the declared box: constant hints
        from .recursive import rate_bounds
        rates = rate_bounds(eqs.ranges, eqs.qd)
        if rates is not None:
            top_e = energy(rates[0], [max(abs(float(x)) for x in uranges[s]) for s in act[1]])
    if top_e is not None:  # |b| / sqrt(lam) of the scaled hints: at most sqrt(b^T M^-1 b)
        hints += [(a, -v, v) for a, f in scaled for v in [float(np.nextafter(f * np.sqrt(lam) * top_e, np.inf))]]
    roles = None
    if lam > 0 and not missing:  # the plan's backward error of the solve (analysis.ldlback)
        bodies, mu, which, unit = limit[0] if limit else ([], 0.0, "", "")
        named = ", ".join(eqs.q[L.j].value.name for L in bodies[:3]) + (f" and {len(bodies) - 3} more"
                                                                       if len(bodies) > 3 else "")
        whose = (f"every body's {which}" if len(bodies) == len(links) else
                 f"the {which} of the bod{'y' if len(bodies) == 1 else 'ies'} of joint{'s' * (len(bodies) > 1)} {named}")
        what = f"at most {whose}, {mu:.3g} {unit}" if bodies else ""
        roles = build_roles(F, solves, top, {j: link_floor(L) for j, L in links.items()}, lam, what, energy,
                            _bodies(tree, composite))
    return F, x, ConstantEnclosure(hints, missing, list(rhs), scaled, labels, roles)


def _bodies(tree, composite: dict) -> list | None:
    """[(link j, its depth is odd, its composite inertia's 6 x 6 atoms, its BodyScale)] for
    analysis.ldlback's bodies, or None when a body's spatial inertia is not positive
    definite (the perturbation then has no body-relative measure)."""
    from ..analysis.ababack import _six
    from ..analysis.bodyfloors import body_scale
    out = []
    for L in tree.links:
        sc, depth, p = body_scale(L), 0, L.parent
        while p is not None:
            depth, p = depth + 1, p.parent
        if sc is None:
            return None
        out.append((L.j, depth % 2 == 1, _six(composite[L]), sc))
    return out


def _energy(eqs: Equations, tree, act, lam: float) -> Energy | None:
    """What bounds sqrt(b^T M^-1 b) = sqrt(qdd^T M qdd) over a box of the inputs, b = B u + Q
    (analysis.ldlback.Energy): the bias forces' bound (kernels.recursive.bias_energy_bound)
    plus |B u| / sqrt(lam). act: (B, u); None with force elements (their generalized
    forces are not bounded here), a coefficient of B that is not a number, or a tree the
    bias bound does not cover."""
    from .recursive import bias_energy_bound, bias_energy_factors
    B, u = act
    factors = bias_energy_factors(tree) if all(a is ZERO for a in tree.applied) else None
    if factors is None:
        return None
    Babs = np.zeros((len(eqs.q), len(u)))
    for (i, j), a in B.entries.items():
        if a.args:
            return None
        Babs[i, j] = abs(float(a.value))
    return Energy(list(eqs.qd), list(u), Babs, lambda qd_max: bias_energy_bound(tree, qd_max, factors), float(lam))


def _divided(links, top) -> list:
    """The joints whose LDL^T steps divide by the pivot rather than multiply by its reciprocal
    (bodyfloors.divides: spatial_chain's joint turning a rod about its own axis, 2e-4 to 1.9
    kg m^2)."""
    return sorted(j for j, L in links.items() if divides(L, top[j]))


def _active_bounds(F, top) -> list:
    """[(atom, lo, hi)] of the elimination's active (Schur complement, positive definite)
    entries and their updates, replayed as factor_ldlt builds them (the same atoms):
    |S_ij| <= sqrt(S_ii S_jj) <= sqrt(top_i top_j), 0 < S_ii <= top_i, and an update
    L_i E_j = S_ik S_jk / S_kk is at most sqrt(S_ii S_jj) in size (S_ii^2 / S_kk <= S_ii... on i = j)."""
    act = {(i, j): a for (i, j), a in F.A.entries.items() if i >= j}
    out, mul = [], F.product  # as the factor multiplies (kept or not): the same atoms

    def cap(i, j):
        return float(np.nextafter(np.sqrt(top[i] * top[j]), np.inf) * (1 + 1e-12))

    for st in F.steps:
        (k,) = st.idx
        nb = sorted(st.lower)
        E = {i: act.get((max(i, k), min(i, k)), ZERO) for i in nb}
        out += [(E[i], -cap(i, k), cap(i, k)) for i in nb]
        for a_, i in enumerate(nb):
            (li,) = st.lower[i]
            u = mul(li, E[i])
            act[(i, i)] = d = sub(act[(i, i)], u)
            out += [(u, 0.0, cap(i, i)), (d, 0.0, cap(i, i))]
            for j in nb[a_ + 1:]:
                key = (max(i, j), min(i, j))
                u = mul(li, E[j])
                act[key] = new = sub(act.get(key, ZERO), u)
                out += [(u, -cap(i, j), cap(i, j)), (new, -cap(i, j), cap(i, j))]
    return out


def _solve_bounds(F, rhs, x, top, links, lam):
    """[(atom, factor)]: |atom| <= factor |rhs| for the forward substitution's y_k, y_k / D_k
    and the solution (analysis.bodyfloors: M's smallest eigenvalue is at least lam)."""
    y, out = list(rhs), []
    for st in F.steps:  # F.solve's forward substitution, the same atoms
        (k,) = st.idx
        for i, (l,) in st.lower.items():
            y[i] = sub(y[i], mul(l, y[k]))
    for st in F.steps:
        (k,) = st.idx
        f = link_floor(links[k])
        out += [(y[k], float(np.sqrt(top[k] / lam))), (F.scaled(st, y[k]), float(1 / np.sqrt(f * lam)))]
    return [(a, v * (1 + 1e-12)) for a, v in out] + [(a, (1 + 1e-12) / lam) for a in x]


def forward_dynamics_kernel(eqs: Equations, samples=None, method: str = "auto", reduced: bool = False) -> Kernel:
    """qdd and the multipliers lambda from q, qd, t and the actuator inputs u:
    [M A^T; A 0] [qdd; lambda] = [Q + B u; gamma], A the kinematic and non-holonomic rows.

    method "ldlt": symmetric LDL^T with pivots (1 x 1, or 2 x 2 blocks where M is
    singular, as with Euler parameters) chosen at generation time; "lu": LU with fixed
    pivots; "auto" (default): both, keeping the one whose kernel costs less by
    `weighted_cost`. LU usually wins on these matrices: its Markowitz pivots on sparse
    constraint rows eliminate a coordinate through the constraint that fixes it, which a
    symmetric order can only do as a 2 x 2 block with all the coordinate's inertia
    couplings; LDL^T wins on denser mass matrices (relative coordinates).

    reduced: over the independent coordinates of Model.explicit (model.reduce), e.g. the
    Stewart platform's 7 coordinates under their Euler normalisation, where the KKT matrix
    of all 98 has a pivot range analysis encloses across 0 over the workspace."""
    eqs = independent_equations(eqs, reduced, "forward-dynamics")
    need_inertia(eqs, "forward-dynamics")
    if method not in FORWARD_METHODS:
        raise KernelError(f"forward-dynamics: method {method!r} is not auto, ldlt or lu")
    n = len(eqs.q)
    A, gamma, cnames, rows = constraint_rows(eqs, kinematic_only=True)
    act_names, B = actuators(eqs)
    u = actuator_symbols(eqs, act_names)
    K = kkt_matrix(eqs.M, A)
    qnames = names(eqs.q)
    lam_names = [f"lambda_{c}" for c in cnames]
    row_names = [f"motion of {q}" for q in qnames] + cnames
    col_names = [f"{q}_dd" for q in qnames] + lam_names
    cover = envelope_cover(eqs, rows=rows)
    if samples is None:
        samples = with_envelope_samples(kernel_samples(eqs, rows, "kinematic constraint"), cover)
    Bu = B.matvec(u) if u else [ZERO] * n
    rhs = [add(q_, f) for q_, f in zip(eqs.Q, Bu)] + list(gamma)
    motion = motion_states(eqs)
    uranges, derived = actuator_ranges(eqs, u, A, B, motion)
    tree = _tree_factor(eqs, Bu, samples, col_names, f"{eqs.model} M", act=(B, u), uranges=uranges) \
        if A.shape[0] == 0 and method != "lu" else None
    if tree is not None:
        F, x, enc = tree
    else:
        F, x = _forward_factor(K, rhs, samples, method, row_names, col_names, f"{eqs.model} KKT [M A^T; A 0]")
        enc = None
    qdd, lam = x[:n], x[n:]
    inputs = [port("q", eqs, eqs.q), port("qd", eqs, eqs.qd), port("t", eqs, [eqs.t])]
    if u:
        inputs.append(InPort("u", u, [uranges[s] for s in u]))
    k = Kernel(
        model=eqs.model,
        name="forward-dynamics",
        description="accelerations qdd and multipliers lambda from q, qd, t"
                    + (" and actuator inputs u" if u else "")
                    + (" (M by the composite-rigid-body algorithm, its bias forces by RNEA, straight-line LDL^T "
                       "leaves first)" if tree is not None else
                       f" (straight-line {F.kind} of the KKT matrix, pivots fixed at generation time)")
                    + (" over the independent coordinates (the others: Model.explicit's closed forms)"
                       if eqs.reduced_from is not None else ""),
        inputs=inputs,
        outputs=[OutPort.vector("qdd", qdd, names(eqs.qdd)), OutPort.vector("lambda", lam, lam_names)],
        info=KernelInfo(solves={"KKT": F}, report=F.report(x), derived_ranges=derived, multipliers=lam_names,
                        enclosures=[enc] if enc is not None else []),
    )
    return k.with_domain(envelope_domain(eqs, inputs, cover) if cover is not None
                         else dynamics_domain(eqs, A, B, motion, bool(u)))


def inverse_dynamics_system(eqs: Equations) -> tuple[LinearSystem, list[int]]:
    """([A^T, -B] [lambda; u] = Q - M qdd, the phi rows A keeps): A the kinematic and
    non-holonomic rows, or every row when the model has no actuators."""
    need_inertia(eqs, "inverse-dynamics")
    n = len(eqs.q)
    act_names, B = actuators(eqs)
    A, _, cnames, rows = constraint_rows(eqs, kinematic_only=bool(act_names))
    r = A.shape[0]
    if r + len(act_names) >= n:  # by rank: redundant rows leave their multipliers undetermined
        from ..reference.solvers import mobility

        mob = mobility(eqs, rows)
        if mob.redundant:
            raise KernelError(f"{eqs.model}: the inverse-dynamics kernel solves a square [A^T, -B] by LU: the rows "
                              f"it keeps have {mob.describe()}; leave the redundant ones out")
    if r + len(act_names) != n:
        raise KernelError(
            f"{eqs.model}: inverse dynamics needs as many unknowns as coordinates: {r} multipliers "
            f"({', '.join(cnames)}) and {len(act_names)} actuators ({', '.join(act_names) or 'none'}) "
            f"for {n} coordinates; the actuators should replace the driving constraints one for one")
    entries = {(j, i): a for (i, j), a in A.entries.items()}
    for (i, k), a in B.entries.items():
        entries[(i, r + k)] = neg(a)
    G = Sparse((n, n), entries)
    Mqdd = eqs.M.matvec(eqs.qdd)
    rhs = [sub(q_, m) for q_, m in zip(eqs.Q, Mqdd)]
    return LinearSystem(G, rhs, [f"motion of {q}" for q in names(eqs.q)],
                        [f"lambda_{c}" for c in cnames] + [f"u_{a}" for a in act_names], list(range(r, n))), rows


def inverse_dynamics_kernel(eqs: Equations, samples=None) -> Kernel:
    """Actuator forces u and multipliers lambda from a prescribed motion (q, qd, qdd, t):
    [A^T, -B] [lambda; u] = Q - M qdd, A the kinematic and non-holonomic rows (all rows
    when the model has no actuators: the driving multipliers are then the efforts). Square
    when the actuators replace the driving constraints one for one."""
    system, rows = inverse_dynamics_system(eqs)
    r = system.forces[0] if system.forces else system.matrix.shape[0]
    lam_names = system.col_names[:r]
    cover = envelope_cover(eqs, rows=rows) if system.forces else None
    if samples is None:
        samples = with_envelope_samples(kernel_samples(eqs, rows if system.forces else None, "kinematic constraint"),
                                        cover)
    F = factor_lu(system.matrix, samples, row_names=system.row_names, col_names=system.col_names,
                  label=f"{eqs.model} [A^T, -B]")
    x = F.solve(system.rhs)
    lam, uu = x[:r], x[r:]
    k = Kernel(
        model=eqs.model,
        name="inverse-dynamics",
        description="actuator forces u and multipliers lambda from the prescribed motion q, qd, qdd, t "
                    "(straight-line LU of [Phi_q^T, -B], pivots fixed at generation time)",
        inputs=[port("q", eqs, eqs.q), port("qd", eqs, eqs.qd), port("qdd", eqs, eqs.qdd),
                port("t", eqs, [eqs.t])],
        outputs=[OutPort.vector("u", uu, system.col_names[r:]), OutPort.vector("lambda", lam, lam_names)],
        info=KernelInfo(solves={"G": F}, report=F.report(x), multipliers=lam_names),
    )
    return k.with_domain(envelope_domain(eqs, k.inputs, cover) if cover is not None
                         else driven_domain(eqs, lambda q, qd, qdd, t: [*q, *qd, *qdd, t]))
