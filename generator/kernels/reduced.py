"""The reduced inverse-dynamics kernel: actuator forces from the independent coordinates of
a model whose other coordinates are explicit (closed forms, Model.explicit).

    inverse-dynamics-reduced  z, zd, zdd [, t] -> u [, mu | lambda]

e.g. the Stewart platform's 7 platform coordinates. Two formulations (`reduced_system`):
"projected", the equations of motion projected on z, [R^T B, -Psi_z^T] [u; mu] =
R^T (M qdd - Q) with R = dq/dz never formed, and "full", every coordinate's equation of
motion with q, qd, qdd substituted; "auto" builds both and keeps "projected" unless "full"
is a tenth cheaper (see reduced_inverse_dynamics_kernel).

Invariants: the closed forms are checked to satisfy every kinematic constraint at all
the samples the pivots are chosen at (KernelError naming the constraints otherwise); one
LU, pivots fixed at generation time; one reciprocal per distinct denominator in the
outputs; `info.method` says which formulation was kept, `info.report` both costs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..analysis.linear import LUEnclosure
from ..analysis.pivots import FRACTIONS, PIVOT_SPLITS, grid_samples, prove_pivots, shrunk
from ..domain.cover import envelope_cover, envelope_domain
from ..domain.explicit_cover import EXPLICIT_TOL
from ..domain.motion import DOMAIN_STEPS, driven_domain
from ..domain.sampling import independent_box_samples, kernel_samples, with_envelope_samples
from ..ir import ZERO, Atom, Evaluator, Sparse, add, diff, mul, neg, sub, subs, symbol
from ..ir.derive import adjoints
from ..linalg import Samples, SolveError, factor_lu
from ..lower import op_counts
from ..model.equations import Equations
from .common import KernelError, LinearSystem, actuators, constraint_rows, names, need_inertia, port, subs_sparse
from .cost import weighted_cost
from .kernel import Kernel, KernelInfo, OutPort
from .rewrite import share_reciprocals

REDUCED_METHODS = ("auto", "projected", "full")


@dataclass
class Reduction:
    """What both formulations share: the actuators, the independent symbols and their
    rates, the substitution of the dependent coordinates (smap), the constraints among the
    independent coordinates alone (psi rows), and M qdd - Q over every coordinate."""

    act_names: list[str]
    B: Sparse
    z: list[Atom]
    zd: list[Atom]
    zdd: list[Atom]
    smap: dict
    psi: list[int]
    others: list[int]  # kinematic rows the closed forms must satisfy (checked at the samples)
    f_full: list[Atom]

    @property
    def u_names(self) -> list[str]:
        return [f"u_{a}" for a in self.act_names]


def reduction(eqs: Equations) -> Reduction:
    need_inertia(eqs, "inverse-dynamics-reduced")
    explicit = getattr(eqs, "explicit", None) or {}
    if not explicit:
        raise KernelError(f"{eqs.model}: the inverse-dynamics-reduced kernel needs explicit (closed-form) "
                          "dependent coordinates (Model.explicit); the model has none")
    if getattr(eqs, "nh", None):
        raise KernelError(f"{eqs.model}: inverse-dynamics-reduced does not handle non-holonomic constraints "
                          f"({', '.join(eqs.nh_names)}); use inverse-dynamics")
    act_names, B = actuators(eqs)
    if not act_names:
        raise KernelError(f"{eqs.model}: inverse-dynamics-reduced needs actuators (their forces are the output)")
    z = list(eqs.independent)
    smap = eqs.explicit_map(2)
    psi, others = eqs.independent_rows(eqs.kinematic_rows)
    f_full = getattr(eqs, "inertial", None)  # M qdd - Q, body by body in Newton-Euler form where possible
    if f_full is None:
        f_full = [sub(m, q_) for m, q_ in zip(eqs.M.matvec(eqs.qdd), eqs.Q)]
    return Reduction(act_names, B, z, eqs.independent_qd, eqs.independent_qdd, smap, psi, others, f_full)


def _samples(eqs: Equations, red: Reduction, samples: Samples | None) -> Samples:
    """Samples over (z, t, params): the given ones, or the driven motion, configurations of
    the kinematic manifold near it and random points of the independent coordinates'
    declared ranges projected on psi; checked to satisfy every other kinematic constraint
    through the closed forms."""
    z = red.z
    ps = list(getattr(eqs, "params", []) or [])
    if samples is None:
        full = kernel_samples(eqs, eqs.kinematic_rows, "kinematic constraint")
        pos = {s: k for k, s in enumerate(full.inputs)}
        cols = [pos[s] for s in z + [eqs.t] + ps]
        samples = Samples(z + [eqs.t] + ps, full.points[:, cols],
                          full.what + " (their independent coordinates)")
        extra = independent_box_samples(eqs, z, red.psi, ps)
        if len(extra):
            samples = samples + Samples(samples.inputs, extra,
                                        f"{len(extra)} random points of the declared ranges of the independent "
                                        "coordinates" + (" projected on their constraints" if red.psi else ""))
    phi_x = eqs.explicit_phi()
    if red.others:
        atoms = [phi_x[i] for i in red.others]
        res = np.atleast_2d(Evaluator(atoms, samples.inputs)(samples.points))
        worst = np.max(np.abs(res), axis=0)
        bad = [(eqs.phi_names[i], float(w)) for i, w in zip(red.others, worst) if not w <= EXPLICIT_TOL]
        if bad:
            raise KernelError(f"{eqs.model}: the explicit coordinates do not satisfy "
                              + ", ".join(f"{n} (|residual| up to {w:.3g})" for n, w in bad[:6])
                              + f" at the {len(samples)} sample configurations")
    return samples


def _transposed_jacobian_products(exprs, xs, weights_list) -> list[list[Atom]]:
    """[J^T w for w in weights_list], J = d exprs / d xs, by one reverse sweep over
    sum_i w_i exprs_i with placeholder weights (linear in them), then the weights
    substituted: the virtual power of the dependent coordinates' forces along each
    independent coordinate, without forming J."""
    mask = 0
    for x in xs:
        mask |= x.mask
    terms = [(i, e) for i, e in enumerate(exprs) if e.mask & mask]
    place = [symbol(f"mbf_reduced_w{i}", "input") for i, _ in terms]
    s = ZERO
    for w, (_, e) in zip(place, terms):
        s = add(s, mul(w, e))
    adj = adjoints(s, mask) if s is not ZERO else {}
    g = [adj.get(x, ZERO) for x in xs]
    out = []
    for weights in weights_list:
        out.append(subs(g, {w: weights[i] for w, (i, _) in zip(place, terms)}))
    return out


@dataclass
class Formulation:
    """One reduced formulation: its system, the solve's label, the names of its
    multipliers and a phrase for the kernel's description."""

    system: LinearSystem
    label: str
    multipliers: list[str]
    what: str


MEASURE_TOL = 1e-8  # largest relative difference of a measure's gradient from R^T B at the samples


def _measure_columns(eqs: Equations, red: Reduction, entries: dict, samples: Samples) -> None:
    """Replace the actuator columns R^T B_k of `entries` ({(row, column): atom}) by grad_z
    m_k for actuators with an explicit measure (Model.explicit_measure), after checking at
    the samples that both agree (a KernelError names the actuator otherwise)."""
    for k, name in enumerate(red.act_names):
        if name not in eqs.measures:
            continue
        m = subs(eqs.measures[name], eqs.explicit_map(0))
        new = {j: diff(m, s) for j, s in enumerate(red.z)}
        rows = list(range(len(red.z)))
        old_atoms = [entries.get((j, k), ZERO) for j in rows]
        ev = Evaluator(old_atoms + [new[j] for j in rows], samples.inputs)
        V = np.atleast_2d(ev(samples.points))
        old, got = V[:, :len(rows)], V[:, len(rows):]
        scale = max(float(np.max(np.abs(old))), 1e-300)
        worst = float(np.max(np.abs(old - got))) / scale
        if not worst <= MEASURE_TOL:
            raise KernelError(f"{eqs.model}: the measure of actuator {name} (Model.explicit_measure) does not "
                              f"match its virtual power: its gradient differs from it by {worst:.3g} (relative) "
                              f"at the {len(samples)} sample configurations")
        for j in rows:
            entries.pop((j, k), None)
            if new[j] is not ZERO:
                entries[(j, k)] = new[j]


def _projected(eqs: Equations, red: Reduction, samples: Samples | None = None) -> Formulation:
    z, smap, psi, act_names = red.z, red.smap, red.psi, red.act_names
    n = len(eqs.q)
    na = len(act_names)
    idx = {s: j for j, s in enumerate(eqs.q)}
    dep = eqs.dependent
    pos = [eqs.explicit[s] for s in dep]
    f = subs(red.f_full, smap)
    Bs = subs_sparse(red.B, smap)
    cols = [[ZERO] * n for _ in range(na)]
    for (i, k), a in Bs.entries.items():
        cols[k][i] = a
    weights = [[f[idx[s]] for s in dep]] + [[c[idx[s]] for s in dep] for c in cols]
    prods = _transposed_jacobian_products(pos, z, weights)
    rhs = [add(f[idx[s]], g) for s, g in zip(z, prods[0])]
    entries = {}
    for k in range(na):
        for j, s in enumerate(z):
            a = add(cols[k][idx[s]], prods[1 + k][j])
            if a is not ZERO:
                entries[(j, k)] = a
    if samples is not None:
        _measure_columns(eqs, red, entries, samples)
    for l, i in enumerate(psi):
        for j, s in enumerate(z):
            d = diff(eqs.phi[i], s)
            if d is not ZERO:
                entries[(j, na + l)] = neg(d)
    G = Sparse((len(z), na + len(psi)), entries)
    mu_names = [f"mu_{eqs.phi_names[i]}" for i in psi]
    system = LinearSystem(G, rhs, [f"virtual power along {s}" for s in names(z)], red.u_names + mu_names,
                          list(range(na)))
    return Formulation(system, f"{eqs.model} [R^T B, -Psi_z^T]", mu_names,
                       f"equations of motion projected on them (R^T, {len(z)} x {len(z)})")


def _full(eqs: Equations, red: Reduction) -> Formulation:
    n = len(eqs.q)
    na = len(red.act_names)
    A, _, cnames, rows = constraint_rows(eqs, kinematic_only=True)
    r = A.shape[0]
    if r + na != n:
        raise KernelError(f"{eqs.model}: inverse dynamics needs as many unknowns as coordinates: {r} multipliers "
                          f"and {na} actuators for {n} coordinates")
    As, Bs = subs_sparse(A, red.smap), subs_sparse(red.B, red.smap)
    entries = {(j, i): a for (i, j), a in As.entries.items()}
    for (i, k), a in Bs.entries.items():
        entries[(i, r + k)] = neg(a)
    G = Sparse((n, n), entries)
    lam_names = [f"lambda_{c}" for c in cnames]
    rhs = [neg(a) for a in subs(red.f_full, red.smap)]
    system = LinearSystem(G, rhs, [f"motion of {q}" for q in names(eqs.q)], lam_names + red.u_names,
                          list(range(r, r + na)))
    return Formulation(system, f"{eqs.model} [Phi_kin_q^T, -B] (explicit coordinates)", lam_names,
                       f"every coordinate's equation of motion ({n} x {n})")


def reduced_system(eqs: Equations, method: str) -> LinearSystem:
    """The linear system of the "projected" or "full" formulation (unknowns [u; mu] or
    [lambda; u]), as the kernel factors it: for comparisons with other solvers."""
    build = {"projected": _projected, "full": _full}.get(method)
    if build is None:
        raise KernelError(f"inverse-dynamics-reduced: no formulation {method!r} (projected, full)")
    return build(eqs, reduction(eqs)).system


def reduced_inverse_dynamics_kernel(eqs: Equations, samples=None, method: str = "auto",
                                    multipliers: bool = False, domain_steps: int = DOMAIN_STEPS) -> Kernel:
    """Actuator forces u from the independent coordinates z of a model whose other
    coordinates are explicit (Model.explicit), and their rates zd, zdd: the dependent q,
    qd, qdd are substituted from the closed forms and their chain-rule derivatives.

    method "projected": the equations of motion M qdd + Phi^T lambda = Q + B u projected
    on the independent coordinates through the velocity transformation qd = R zd,
    R = dq/dz (never formed: R^T v comes from one reverse sweep over the closed forms):
        [R^T B, -Psi_z^T] [u; mu] = R^T (M qdd - Q),
    Psi the constraints among the independent coordinates alone (the Stewart platform's
    Euler normalisation), mu their multipliers combined with those of the constraints the
    closed forms satisfy only where Psi = 0 (equal to Psi's own when they satisfy them
    everywhere). The other multipliers drop out: R spans the motions the constraints
    allow. A system of n_z = n_act + n_psi rows (7 for the Stewart platform).
    method "full": [Phi_kin_q^T, -B] [lambda; u] = Q - M qdd over every coordinate, as
    the inverse-dynamics kernel, with q, qd, qdd substituted (all multipliers available).
    "auto" (default): both, keeping the one whose kernel costs less (weighted_cost).
    Both solve with a straight-line LU, pivots fixed at generation time on consistent
    samples over (z, t, params): the driven motion, configurations of the kinematic
    manifold near it, and random points of the independent coordinates' declared ranges
    projected on Psi (the closed forms are checked to satisfy every other kinematic
    constraint at all of them). Every division by one denominator becomes a product with
    one shared reciprocal (kernels.rewrite.share_reciprocals). multipliers=True adds the multipliers
    output (mu or lambda). domain_steps: boxes of the tube around the driven motion
    (`domain`, where range analysis, fixed-point formats and error bounds apply); fewer
    boxes generate faster and give looser bounds, the same C for float targets."""
    if method not in REDUCED_METHODS:
        raise KernelError(f"inverse-dynamics-reduced: method {method!r} is not one of {', '.join(REDUCED_METHODS)}")
    red = reduction(eqs)
    cover = envelope_cover(eqs, unknowns=red.z, rows=red.psi)
    samples = _samples(eqs, red, None if samples is None else samples)
    samples = with_envelope_samples(samples, cover)
    tried = _formulations(eqs, red, samples, method, cover)
    chosen, shared, cost = _cheapest(tried, len(red.act_names), multipliers)
    return _reduced_kernel(eqs, red, cover, chosen, tried[chosen], shared[chosen], cost, multipliers, domain_steps)


def _formulations(eqs: Equations, red, samples: Samples, method: str, cover=None) -> dict:
    """{"projected" / "full": _solve's tuple} of the formulations `method` asks for that apply
    (pivots proved over `cover`, the envelope's, where there is one: _solve)."""
    nz, na, psi = len(red.z), len(red.act_names), red.psi
    tried = {}
    refused = []
    if method in ("auto", "projected"):
        if nz != na + len(psi):
            if method == "projected":
                raise KernelError(
                    f"{eqs.model}: the projected inverse dynamics needs as many independent coordinates as "
                    f"actuators plus constraints among them: {nz} ({', '.join(names(red.z))}) for {na} actuators "
                    f"and {len(psi)} constraints ({', '.join(eqs.phi_names[i] for i in psi) or 'none'})")
        else:
            try:
                tried["projected"] = _solve(_projected(eqs, red, samples), samples, eqs, cover, not psi)
            except PivotRefusal as e:
                if method == "projected":
                    raise
                refused.append(e)
    if method in ("auto", "full"):
        try:
            tried["full"] = _solve(_full(eqs, red), samples, eqs, cover, not psi)
        except KernelError:
            if method == "full" or not (tried or refused):
                raise
    if not tried:
        if refused:
            raise refused[0]
        raise KernelError(f"{eqs.model}: no reduced inverse-dynamics formulation applies")
    return tried


def _cheapest(tried: dict, na: int, multipliers: bool):
    """(the formulation kept, {key: its outputs, reciprocals shared}, {key: weighted cost})."""
    cost, shared = {}, {}
    for key, (_, x, _, _, _, _) in tried.items():
        keep = x if multipliers else x[:na]
        shared[key] = share_reciprocals(keep)
        cost[key] = weighted_cost(shared[key])
    # "full" solves an n x n system where "projected" solves nz x nz, whose enclosures cost far
    # less to analyse and come out tighter (stewart_relative, 24 x 24 against 6 x 6, over its
    # tube: c-float32 generated in 191 s against 6.9 s, bounds 0.0056 against 0.0048 N, for 3%
    # fewer operations): "full" is taken only when it is a tenth cheaper
    chosen = "projected" if "projected" in tried and not cost.get("full", math.inf) < 0.9 * cost["projected"] \
        else min(cost, key=cost.get)
    return chosen, shared, cost


def _reduced_kernel(eqs: Equations, red, cover, chosen: str, solved, kept, cost: dict, multipliers: bool,
                    domain_steps: int) -> Kernel:
    """The kernel of the chosen formulation (solved: its _solve tuple, kept: its outputs,
    reciprocals shared): ports, report, and the envelope's domain or the driven tube."""
    z, zd, zdd, na = red.z, red.zd, red.zdd, len(red.act_names)
    F, x, mult_names, what, rhs, proof = solved
    uu, mult = kept[:na], kept[na:]
    outputs = [OutPort.vector("u", uu, red.u_names)]
    if multipliers:
        outputs.append(OutPort.vector("mu" if chosen == "projected" else "lambda", mult, mult_names))
    t_needed = any(a.mask & eqs.t.mask for p in outputs for a in p.atoms)
    inputs = [port("q", eqs, z), port("qd", eqs, zd), port("qdd", eqs, zdd)]
    if t_needed:
        inputs.append(port("t", eqs, [eqs.t]))
    ops = op_counts([a for p in outputs for a in p.atoms])
    report = (F.report(x if multipliers else x[:na]) + (f"\n{proof.report()}" if proof is not None else "")
              + f"\n  kernel ({chosen}, divisions by one denominator shared): {ops['total']} operations ("
              + ", ".join(f"{a} {b}" for a, b in sorted(ops.items()) if a != "total") + ")"
              + "".join(f"\n  weighted cost {key}: {c}" for key, c in sorted(cost.items())))
    k = Kernel(
        model=eqs.model,
        name="inverse-dynamics-reduced",
        description=f"actuator forces u{' and multipliers' if multipliers else ''} from the independent "
                    f"coordinates {', '.join(names(z))}, their rates and accelerations (dependent coordinates "
                    f"in closed form; {what}; straight-line LU, pivots fixed at generation time)",
        inputs=inputs,
        outputs=outputs,
        info=KernelInfo(solves={"G": F}, report=report, multipliers=mult_names if multipliers else [],
                        method=chosen, enclosures=[_enclosure(F, rhs, len(uu + mult),
                                                              0 if chosen == "projected" else len(mult_names))]),
    )
    zi = [eqs.q.index(s) for s in z]

    def row(q, qd, qdd, t):
        return [*(q[j] for j in zi), *(qd[j] for j in zi), *(qdd[j] for j in zi)] + ([t] if t_needed else [])

    return k.with_domain(envelope_domain(eqs, inputs, cover) if cover is not None
                         else driven_domain(eqs, row, domain_steps))


class PivotRefusal(KernelError):
    """No pivot order of the solve holds over the operating envelope (one line: which pivot,
    where, and the shrunk envelope that proves)."""


def _solve(form: Formulation, samples: Samples, eqs=None, cover=None, consistent: bool = False):
    """(factor, solution as [u; multipliers], multiplier names, description phrase, rhs,
    the pivots' proof over the cover or None)."""
    s = form.system
    F, proof = _proved_factor(form, samples, eqs, cover, consistent)
    x = F.solve(s.rhs)
    if s.forces and s.forces[0] > 0:  # [lambda; u]: reorder to [u; lambda]
        r = s.forces[0]
        x = x[r:] + x[:r]
    return F, x, form.multipliers, form.what, s.rhs, proof


GRID_POINTS = 4096  # at most this many grid points over the cover when pivots are re-chosen
INCONSISTENT_SPLITS = 3  # bisections of the report-only proof over a cover of inconsistent boxes too


def _proved_factor(form: Formulation, samples: Samples, eqs, cover, consistent: bool):
    """The LU with pivots chosen at the samples, proved over the cover's cells
    (analysis.pivots); where a pivot is not proved, chosen again at the samples plus a grid
    over every cell (corners included) and kept if it proves more. A pivot that changes
    sign under both orders is a PivotRefusal. Only where the cover's boxes hold consistent
    states alone (`consistent`: no constraint among the independent coordinates): else
    the first order is kept and its (short) proof reported."""
    s = form.system
    try:
        F = factor_lu(s.matrix, samples, row_names=s.row_names, col_names=s.col_names, label=form.label)
    except SolveError as e:  # the samples see no order: say which envelope would have one
        if cover is None or not consistent:
            raise
        hint = _shrunk_order(form, samples, eqs, cover)
        raise PivotRefusal(f"{e} Over this envelope: {hint}") from None
    if cover is None:
        return F, None
    # where the cover's boxes hold inconsistent states too (constraints among the independent
    # coordinates), a failed proof refuses nothing and re-chooses nothing: a short one is reported
    proof = prove_pivots(F, cover, splits=PIVOT_SPLITS if consistent else INCONSISTENT_SPLITS)
    if proof.ok or proof.note or not consistent:
        return F, proof
    dense = grid_samples(samples, cover, _grid_points(samples, cover))
    try:
        F2 = factor_lu(s.matrix, dense, row_names=s.row_names, col_names=s.col_names, label=form.label)
        proof2 = prove_pivots(F2, cover)
        if len(proof2.where) < len(proof.where) or (proof2.ok and not proof.ok):
            F, proof = F2, proof2
    except SolveError:  # no order holds at the grid's points: the first order's failure is the reason
        pass
    if proof.crossing:
        raise PivotRefusal(_refusal(eqs, form, F, proof, cover, len(samples), len(dense), samples))
    return F, proof


def _grid_points(samples: Samples, cells) -> int:
    """Points per coordinate of a grid of at most GRID_POINTS over the cells."""
    d = max(1, sum(1 for v in samples.inputs if v in set(cells.symbols)))
    return max(2, int((GRID_POINTS / len(cells)) ** (1.0 / d) + 1e-9))


def _shrunk_order(form: Formulation, samples: Samples, eqs, cover) -> str:
    """The widest envelope about the centre (analysis.pivots.FRACTIONS of its ranges) over
    whose cells an order chosen at a grid over them (corners included) proves, as a phrase."""
    s = form.system
    nominal = Samples(samples.inputs, samples.points[:1], "the nominal configuration")
    for f in FRACTIONS:
        cells, ranges = shrunk(cover, eqs.envelope.quantities, f)
        if not len(cells):
            continue
        try:
            F = factor_lu(s.matrix, grid_samples(nominal, cells, _grid_points(samples, cells)),
                          row_names=s.row_names, col_names=s.col_names, label=form.label)
        except SolveError:
            continue
        if prove_pivots(F, cells).ok:
            return f"the envelope shrunk to {f:.0%} of its ranges about their centres proves ({ranges})"
    return "no envelope shrunk about the centre proves either"


def _refusal(eqs, form: Formulation, F, proof, cover, n_samples: int, n_dense: int, samples: Samples) -> str:
    k = proof.first_failure()
    v = proof.value[k]
    what = "is not defined" if not math.isfinite(v) else f"changes sign ({v:.3g}, the other sign elsewhere)"
    return (f"{eqs.model}: no pivot order of {form.label} holds over the operating envelope: the pivot of "
            f"{proof.names[k]} {what} at {proof.state(k)} under the order chosen at {n_samples} "
            f"samples and the order chosen with {n_dense} (a grid over the envelope's cells, corners "
            f"included); {_shrunk_order(form, samples, eqs, cover)}")


def _enclosure(F, rhs, n_out: int, r: int) -> LUEnclosure:
    """Range-analysis hints of the solve (analysis.linear): output p is the solution's
    entry p ([u; mu]) or, reordered from [lambda; u], entry (p + r) mod n."""
    n = F.n
    return LUEnclosure(F, rhs, rewrite=share_reciprocals, outputs={p: (p + r) % n for p in range(n_out)})
