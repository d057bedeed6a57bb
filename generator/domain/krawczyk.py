"""The verified cover's machinery: boxes that contain every (q, qd, qdd) satisfying a set
of equations F(q, p) = 0 for every p in a cell (domain.cover and domain.explicit_cover
pose the problems).

The problem: unknowns q (n), equations F(q, p) = 0 (n: the constraints a kernel keeps plus
one equation per envelope quantity), cell variables p (the quantities theta, and t where
F depends on time) with rates pd and accelerations pdd. Velocities solve F_q qd = -F_p pd,
accelerations F_q qdd = -(d/dt (F_q qd + F_p pd) at qdd = 0).

Per cell P (a box of p), a point solution q~ at P's centre (batched Newton, continued from
the model's guess along straight paths in p), then the Krawczyk test: with Y = F_q(q~)^-1
and X = q~ + [-r, r],
    K(X) = q~ - Y F(q~, P) + (I - Y F_q(X, P)) (X - q~)
inside X proves that for every p in P exactly one solution lies in X, and K(X) encloses
it. Velocities and accelerations are enclosed by the same argument for linear systems
(every A in F_q(X, P), every right-hand side in its interval evaluation). Intervals come
from analysis.intervals (outward-rounded numpy); the point parts (Y, q~) need not be
exact, only the interval terms are. A cell whose test fails is split in two along the
quantity it is widest in, up to MAX_DEPTH times; a cell that still fails is a singular
(or unassembled) configuration inside the envelope: DomainError naming the quantities'
values, the constraints involved, and the envelope that avoids it.

build_cover takes an extension (domain.explicit_cover: the dependent coordinates enclosed
from their closed forms per cell) that may ask for a cell to be split too.

Invariants: deterministic (fixed paths, seeded samples); cells only ever split.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis.intervals import IntervalEvaluator, _mul, _out
from ..analysis.linear import pad, param_solve
from ..ir import ONE, ZERO, Atom, Evaluator, jacobian, time_derivative
from .base import DomainError

MAX_DEPTH = 10  # halvings of a cell before its configuration is called singular
NEWTON_ITER = 40
NEWTON_TOL = 1e-12
CONTINUATION_STEPS = 24
KRAWCZYK_ROUNDS = 8


@dataclass(frozen=True)
class Param:
    """A cell variable: an envelope quantity (theta, its rate and acceleration symbols) or
    time (rate fixed at 1, no acceleration symbol)."""

    name: str
    sym: Atom
    sym_d: Atom | None
    sym_dd: Atom | None
    range: tuple[float, float]
    rate: tuple[float, float]
    accel: tuple[float, float]
    cells: int = 1


class Problem:
    """F(q, p) = 0 with its Jacobians and rate equations, evaluated pointwise and over boxes."""

    def __init__(self, model: str, unknowns, qd, qdd, rows, row_names, params: list[Param]):
        self.model = model
        self.q, self.qd, self.qdd = list(unknowns), list(qd), list(qdd)
        self.rows, self.row_names, self.params = list(rows), list(row_names), list(params)
        n = len(self.q)
        if len(self.rows) != n:
            raise DomainError(f"{model}: the envelope gives {len(self.rows)} equations for {n} coordinates "
                              f"({len(self.rows) - len(params) if params else len(self.rows)} constraints and "
                              f"{len(params)} quantities): declare as many independent quantities as the "
                              "mechanism has degrees of freedom")
        p = [a.sym for a in params]
        J = jacobian(self.rows, self.q)
        self.pattern = J.pattern
        self.ri = np.array([i for i, _ in J.pattern], dtype=int)
        self.cj = np.array([j for _, j in J.pattern], dtype=int)
        vel = {a.sym: (a.sym_d if a.sym_d is not None else ONE) for a in params}
        fp_pd = time_derivative(self.rows, vel)  # F_p pd
        b = [-x if x is not ZERO else ZERO for x in fp_pd]
        tang = {**vel, **dict(zip(self.q, self.qd))}
        v = time_derivative(self.rows, tang)  # F_q qd + F_p pd
        acc = {**tang, **{a.sym_d: a.sym_dd for a in params if a.sym_d is not None}}
        c = [-x if x is not ZERO else ZERO for x in time_derivative(v, acc)]  # qdd absent: taken as 0
        pd = [a.sym_d for a in params if a.sym_d is not None]
        pdd = [a.sym_dd for a in params if a.sym_dd is not None]
        self.pos_in = self.q + p
        self.vel_in = self.q + p + pd
        self.acc_in = self.q + self.qd + p + pd + pdd
        self.point = Evaluator(self.rows + J.values(), self.pos_in)
        self.point_b = Evaluator(b, self.vel_in)
        self.point_c = Evaluator(c, self.acc_in)
        self.box_F = IntervalEvaluator(self.rows, self.pos_in)
        self.box_J = IntervalEvaluator(J.values(), self.pos_in)
        self.box_b = IntervalEvaluator(b, self.vel_in)
        Fp = jacobian(self.rows, p)  # qd = S pd with F_q S = -F_p: enclosing S first keeps signs
        self.fp_pattern = (np.array([i for i, _ in Fp.pattern], dtype=int), np.array([j for _, j in Fp.pattern], dtype=int))
        self.box_Fp = IntervalEvaluator(Fp.values(), self.pos_in)
        self.box_c = IntervalEvaluator(c, self.acc_in)
        self.regions: list[tuple[str, IntervalEvaluator, Evaluator]] = []  # set by problem()
        self.slack = np.zeros(n)  # per row: |residual| a covered state may have (set by problem())

    def _matrix(self, vals, B):
        M = np.zeros((B, len(self.q), len(self.q)))
        M[:, self.ri, self.cj] = vals
        return M

    def residual(self, Q, P):
        Y = self.point(np.column_stack([Q, P]))
        n = len(self.q)
        return Y[:, :n], self._matrix(Y[:, n:], len(Q))

    def newton(self, Q, P):
        """(Q, converged) after Newton from Q at the points P."""
        ok = np.zeros(len(Q), dtype=bool)
        with np.errstate(all="ignore"):
            for _ in range(NEWTON_ITER):
                F, J = self.residual(Q, P)
                ok = np.all(np.abs(F) <= NEWTON_TOL * (1 + np.abs(Q).max(axis=1, keepdims=True)), axis=1)
                if ok.all():
                    break
                try:
                    dq = np.linalg.solve(J, F[..., None])[..., 0]
                except np.linalg.LinAlgError:
                    dq = np.einsum("kij,kj->ki", np.linalg.pinv(J), F)
                Q = np.where(ok[:, None], Q, Q - dq)
        return Q, ok & np.all(np.isfinite(Q), axis=1)

    def rates(self, Q, P, PD, PDD):
        """Point velocities and accelerations (for samples)."""
        _, J = self.residual(Q, P)
        b = np.atleast_2d(self.point_b(np.column_stack([Q, P, PD])))
        QD = np.linalg.solve(J, b[..., None])[..., 0]
        c = np.atleast_2d(self.point_c(np.column_stack([Q, QD, P, PD, PDD])))
        QDD = np.linalg.solve(J, c[..., None])[..., 0]
        return QD, QDD


def _linear_enclosure(Ac, Ar, bc, br):
    """Midpoint and radius of boxes containing every solution of A x = b, A in Ac +- Ar,
    b in bc +- br (batched); radius inf where the test fails (||I - Y A|| not < 1): the
    parametric enclosure of analysis.linear with every entry its own interval."""
    B, n = Ac.shape[0], Ac.shape[1]
    return param_solve(Ac, np.zeros((B, 0, n, n)), Ar, bc, np.zeros((B, 0, n)), br)


def _centre_radius(lo, hi):
    return (lo + hi) / 2, (hi - lo) / 2


@dataclass
class Cover:
    """Boxes of the consistent states: one row per cell, one column per symbol."""

    problem: Problem
    symbols: list[Atom]
    lo: np.ndarray
    hi: np.ndarray
    centres: np.ndarray  # q~ per cell (starting points for samples)
    explicit: object = None  # domain.explicit_cover.ExplicitForms: the dependent coordinates' columns

    def __len__(self) -> int:
        return len(self.lo)

    def bounds(self) -> dict[Atom, tuple[np.ndarray, np.ndarray]]:
        return {s: (self.lo[:, k], self.hi[:, k]) for k, s in enumerate(self.symbols)}

    def boxes(self, inputs: list[Atom], fallback: dict) -> list[list[tuple[float, float]]]:
        """Each cell's box over a kernel's flat inputs; an input the cover does not
        bound (an actuator force, a runtime parameter) takes fallback[symbol] = (lo, hi)."""
        b = self.bounds()
        cols = []
        for s in inputs:
            if s in b:
                cols.append(b[s])
            elif s in fallback:
                lo, hi = fallback[s]
                cols.append((np.full(len(self), float(lo)), np.full(len(self), float(hi))))
            else:
                raise DomainError(f"{self.problem.model}: the operating envelope does not bound the input "
                                  f"{s.value.name}")
        return [[(float(lo[k]), float(hi[k])) for lo, hi in cols] for k in range(len(self))]

    def sample(self, count: int, seed: int = 0) -> dict[Atom, np.ndarray]:
        """Consistent states drawn uniformly over the envelope's quantities, rates and
        accelerations: {symbol: values} for the unknowns, their rates and the parameters."""
        pr = self.problem
        rng = np.random.default_rng(seed)
        k = len(pr.params)
        P = np.column_stack([rng.uniform(a.range[0], a.range[1], count) for a in pr.params]) if k else np.zeros((count, 0))
        if pr.regions:  # drawn again where outside a region, until `count` are in (or 64 rounds)
            P = P[in_regions(pr, P)]
            for _ in range(64):
                if len(P) >= count:
                    break
                more = np.column_stack([rng.uniform(a.range[0], a.range[1], count) for a in pr.params])
                P = np.vstack([P, more[in_regions(pr, more)]])
            if not len(P):
                raise DomainError(f"{pr.model}: no state drawn in the operating region "
                                  f"{', '.join(n for n, _, _ in pr.regions)}: check its expression (<= 0 inside)")
            P = P[:count]
            count = len(P)
        PD = np.column_stack([rng.uniform(*a.rate, count) for a in pr.params if a.sym_d is not None] or [np.zeros((count, 0))])
        PDD = np.column_stack([rng.uniform(*a.accel, count) for a in pr.params if a.sym_dd is not None] or [np.zeros((count, 0))])
        out, ok = self.states(P, PD, PDD)
        return {s: v[ok] for s, v in out.items()}

    def states(self, P, PD, PDD, Q0=None) -> tuple[dict[Atom, np.ndarray], np.ndarray]:
        """The consistent states at the envelope's quantities P [N, k], their rates PD and
        accelerations PDD (the columns of the params that have them): ({symbol: values}
        as `sample`, for all N rows, and which rows hold one: Newton converged from Q0
        (default: the centre of the cell that holds each row of P) and P inside a cell)."""
        pr = self.problem
        count = len(P)
        pcol = [self.symbols.index(a.sym) for a in pr.params]
        cell = np.full(count, -1)
        for start in range(0, count, 4096):  # the cell that holds each p: its centre starts Newton
            sl = slice(start, start + 4096)
            inside = np.all((P[sl, None, :] >= self.lo[None, :, pcol]) & (P[sl, None, :] <= self.hi[None, :, pcol]), axis=2)
            cell[sl] = np.where(inside.any(axis=1), inside.argmax(axis=1), -1)
        Q, ok = pr.newton(self.centres[np.maximum(cell, 0)] if Q0 is None else Q0, P)
        QD, QDD = pr.rates(Q, P, PD, PDD)
        ok &= cell >= 0
        out = {}
        cols = [Q, QD, QDD, P, PD, PDD]
        syms = [pr.q, pr.qd, pr.qdd, [a.sym for a in pr.params], [a.sym_d for a in pr.params if a.sym_d is not None],
                [a.sym_dd for a in pr.params if a.sym_dd is not None]]
        for S, X in zip(syms, cols):
            for j, s in enumerate(S):
                out[s] = X[:, j]
        if self.explicit is not None:  # the dependent coordinates from their closed forms (rows that hold a state)
            for s, v in self.explicit.points({s: v[ok] for s, v in out.items()}).items():
                out[s] = np.full(count, np.nan)
                out[s][ok] = v
        return out, ok


def _grid(params: list[Param]):
    """The initial cells: the product of each quantity's equal parts (lo, hi arrays)."""
    edges = [np.linspace(a.range[0], a.range[1], a.cells + 1) for a in params]
    idx = np.array(np.meshgrid(*[np.arange(a.cells) for a in params], indexing="ij")).reshape(len(params), -1).T
    lo = np.column_stack([edges[k][idx[:, k]] for k in range(len(params))])
    hi = np.column_stack([edges[k][idx[:, k] + 1] for k in range(len(params))])
    return lo, hi


def _kept(pr: Problem, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Which cells (rows of the quantities' lo, hi) are not proven outside a region: a
    region's expression enclosed above 0 over the whole cell."""
    keep = np.ones(len(lo), dtype=bool)
    for _, box, _ in pr.regions:
        glo, _ = box(lo, hi)
        keep &= ~(glo[:, 0] > 0.0)  # outward-rounded: the whole cell is outside
    return keep


def _outside_dropped(pr: Problem, lo: np.ndarray, hi: np.ndarray):
    """The initial cells without those outside a region; one line if none is left."""
    keep = _kept(pr, lo, hi)
    if len(lo) and not keep.any():
        raise DomainError(f"{pr.model}: the operating region {', '.join(n for n, _, _ in pr.regions)} excludes every "
                          "state of the quantities' ranges: check its expression (the region is where it is <= 0)")
    return lo[keep], hi[keep]


def in_regions(pr: Problem, P: np.ndarray) -> np.ndarray:
    """Which points P (rows over the quantities) lie in every region (expression <= 0)."""
    inside = np.ones(len(P), dtype=bool)
    for _, _, point in pr.regions:
        if len(P):
            inside &= np.atleast_2d(point(P))[:, 0] <= 0.0
    return inside


def _start_values(pr: Problem, guess: np.ndarray) -> np.ndarray:
    """p at the model's guess: t at the start of its range; a coordinate quantity's value
    there; for an equation, the point of its range where |g| is smallest on a grid, the
    one nearest the range's middle among equals (Newton's path starts there)."""
    p0 = []
    for a in pr.params:
        if a.sym_d is None:  # time: the guess is the configuration at the start of the time range
            p0.append(a.range[0])
            continue
        grid = np.linspace(a.range[0], a.range[1], 721)
        k = pr.params.index(a)
        others = np.array([(b.range[0] + b.range[1]) / 2 for b in pr.params])
        P = np.tile(others, (len(grid), 1))
        P[:, k] = grid
        F, _ = pr.residual(np.tile(guess, (len(grid), 1)), P)
        rows = [i for i, r in enumerate(pr.rows) if r.mask & a.sym.mask]
        # the zero nearest the middle of the range (an angle's equation has two per turn)
        score = np.abs(F[:, rows]).sum(axis=1) + 1e-9 * np.abs(grid - others[k])
        p0.append(grid[int(np.argmin(score))] if rows else others[k])
    return np.array(p0)


def _continue(pr: Problem, guess: np.ndarray, p0: np.ndarray, targets: np.ndarray):
    """Newton solutions at the points `targets`, each reached along the straight path in p
    from p0 (the guess's point) in CONTINUATION_STEPS steps: the assembly branch of the guess."""
    Q = np.tile(guess, (len(targets), 1))
    ok = np.ones(len(targets), dtype=bool)
    for s in np.linspace(0.0, 1.0, CONTINUATION_STEPS + 1):
        Q, good = pr.newton(Q, p0 + s * (targets - p0))
        ok &= good
    return Q, ok


def _columns(pr: Problem, plo, phi, qlo, qhi, qdlo, qdhi, qddlo, qddhi):
    """(symbols, lo, hi) of cells: the unknowns, their rates and accelerations, the
    parameters, and the envelope's rates and accelerations (the same in every cell)."""
    C = len(plo)
    cols_lo = [qlo, qdlo, qddlo, plo]
    cols_hi = [qhi, qdhi, qddhi, phi]
    syms = pr.q + pr.qd + pr.qdd + [a.sym for a in pr.params]
    for a in pr.params:
        if a.sym_d is not None:
            syms.append(a.sym_d)
            cols_lo.append(np.full((C, 1), a.rate[0]))
            cols_hi.append(np.full((C, 1), a.rate[1]))
        if a.sym_dd is not None:
            syms.append(a.sym_dd)
            cols_lo.append(np.full((C, 1), a.accel[0]))
            cols_hi.append(np.full((C, 1), a.accel[1]))
    return syms, np.hstack(cols_lo), np.hstack(cols_hi)


def build_cover(pr: Problem, guess: np.ndarray, extension=None) -> Cover:
    """The verified cover of `pr` over its parameters' ranges (see the module's doc).
    `extension` (domain.explicit_cover.ExplicitForms): more symbols enclosed per cell
    from the cell's box (extension.enclose -> ok, lo, hi); a cell it cannot enclose is
    split like one whose test fails, and refused by extension.refuse at the depth limit."""
    k = len(pr.params)
    lo, hi = _outside_dropped(pr, *_grid(pr.params))
    p0 = _start_values(pr, guess)
    Qs, ok = _continue(pr, guess, p0, (lo + hi) / 2)
    width = np.array([a.range[1] - a.range[0] for a in pr.params])
    PD = [a.rate if a.sym_d is not None else (1.0, 1.0) for a in pr.params]
    PDD = [a.accel for a in pr.params if a.sym_dd is not None]
    done = []  # (symbols' lo, hi, q~)
    syms = None
    for depth in range(MAX_DEPTH + 1):
        res = _verify(pr, lo, hi, Qs, ok, PD, PDD)
        good = res[0]
        syms, L, H = _columns(pr, lo, hi, *res[1:])
        if extension is not None:
            m = len(extension.symbols)
            ext_ok, eL, eH = np.zeros(len(L), dtype=bool), np.full((len(L), m), -np.inf), np.full((len(L), m), np.inf)
            if good.any():  # only cells whose own boxes are verified (finite)
                ext_ok[good], eL[good], eH[good] = extension.enclose(syms, L[good], H[good])
            L, H = np.hstack([L, eL]), np.hstack([H, eH])
            if depth == MAX_DEPTH and (good & ~ext_ok).any():
                extension.refuse(syms, L[good & ~ext_ok], H[good & ~ext_ok])
            good = good & ext_ok
        done.append((L[good], H[good], Qs[good]))
        bad = ~good
        if not bad.any():
            break
        if depth == MAX_DEPTH:
            _singular(pr, lo[bad], hi[bad], Qs[bad])
        # split each failing cell along the quantity it is widest in (relative to its range)
        lo_b, hi_b, Q_b = lo[bad], hi[bad], Qs[bad]
        axis = np.argmax((hi_b - lo_b) / width, axis=1)
        mid = (lo_b[np.arange(len(lo_b)), axis] + hi_b[np.arange(len(lo_b)), axis]) / 2
        lo1, hi1, lo2, hi2 = lo_b.copy(), hi_b.copy(), lo_b.copy(), hi_b.copy()
        hi1[np.arange(len(lo_b)), axis] = mid
        lo2[np.arange(len(lo_b)), axis] = mid
        keep = _kept(pr, np.vstack([lo1, lo2]), np.vstack([hi1, hi2]))  # halves outside a region left out
        lo, hi = np.vstack([lo1, lo2])[keep], np.vstack([hi1, hi2])[keep]
        Qs, ok = pr.newton(np.vstack([Q_b, Q_b])[keep], (lo + hi) / 2)
    L, H, cen = (np.concatenate([d[i] for d in done]) for i in range(3))
    if extension is not None:
        syms = syms + extension.symbols
    pcol = [syms.index(a.sym) for a in pr.params]
    order = np.lexsort(L[:, pcol].T[::-1]) if k else np.arange(len(L))  # cells in grid order, reproducibly
    return Cover(pr, syms, L[order], H[order], cen[order], extension)


def _verify(pr: Problem, plo, phi, Qs, ok, PD, PDD):
    """(verified, q box, qd box, qdd box) per cell: the Krawczyk test for positions, the
    linear enclosure for velocities and accelerations."""
    C, n = Qs.shape
    if C == 0:
        e = np.zeros((0, n))
        return np.zeros(0, dtype=bool), e, e, e, e, e, e
    with np.errstate(all="ignore"):
        verified, rad = _krawczyk(pr, plo, phi, Qs, ok)
        qlo, qhi = Qs - rad, Qs + rad
        good = verified.copy()
        # velocities: F_q(X, P) qd = -F_p pd over the cell
        Jl, Jh = pr.box_J(np.column_stack([qlo, plo]), np.column_stack([qhi, phi]))
        A = _centre_radius(pr._matrix(Jl, C), pr._matrix(Jh, C))
        pdl = np.array([a[0] for a in PD if True])[None, :].repeat(C, 0)
        pdh = np.array([a[1] for a in PD if True])[None, :].repeat(C, 0)
        with_d = [i for i, a in enumerate(pr.params) if a.sym_d is not None]
        bl, bh = pr.box_b(np.column_stack([qlo, plo, pdl[:, with_d]]), np.column_stack([qhi, phi, pdh[:, with_d]]))
        bc, br = _centre_radius(bl, bh)
        x, xr = _linear_enclosure(*A, bc, _widened(br, pr.slack))
        qdlo, qdhi = x - xr, x + xr
        good &= np.all(np.isfinite(xr), axis=1)
        if pr.params:
            vlo, vhi = _sensitivity_velocities(pr, A, (qlo, qhi), (plo, phi), (pdl, pdh))
            if pr.slack.any():  # plus F_q^-1 r, |r| <= slack: the velocities' own residual
                _, sr = _linear_enclosure(*A, np.zeros((C, len(pr.q))), np.tile(pr.slack, (C, 1)))
                vlo, vhi = _out(vlo - sr, vhi + sr)
            qdlo, qdhi = np.maximum(qdlo, vlo), np.minimum(qdhi, vhi)
        al = np.array([a[0] for a in PDD])[None, :].repeat(C, 0) if PDD else np.zeros((C, 0))
        ah = np.array([a[1] for a in PDD])[None, :].repeat(C, 0) if PDD else np.zeros((C, 0))
        cl, ch = pr.box_c(np.column_stack([qlo, qdlo, plo, pdl[:, with_d], al]),
                          np.column_stack([qhi, qdhi, phi, pdh[:, with_d], ah]))
        cc, cr = _centre_radius(cl, ch)
        y, yr = _linear_enclosure(*A, cc, _widened(cr, pr.slack))
        good &= np.all(np.isfinite(yr), axis=1)
    return good, qlo, qhi, qdlo, qdhi, y - yr, y + yr


def _widened(r, slack):
    """Radius r grown by the rows' residual slack, rounded up (r unchanged without slack)."""
    return np.nextafter(r + slack, np.inf) if slack.any() else r


def _krawczyk(pr: Problem, plo, phi, Qs, ok):
    """Which cells (among ok) the Krawczyk test verifies, and the radius about Qs each
    verified one's position box has (inf elsewhere)."""
    C, n = Qs.shape
    Fl, Fh = pr.box_F(np.column_stack([Qs, plo]), np.column_stack([Qs, phi]))
    Fc, Fr = _centre_radius(Fl, Fh)
    Fr = _widened(Fr, pr.slack)  # F(q, p) = r, |r| <= slack: the near-consistent states too
    _, J0 = pr.residual(Qs, (plo + phi) / 2)
    try:
        Y = np.linalg.inv(J0)
    except np.linalg.LinAlgError:
        Y = np.linalg.pinv(J0)
    aY = np.abs(Y)
    head = np.abs(np.einsum("kij,kj->ki", Y, Fc)) + np.einsum("kij,kj->ki", aY, Fr)
    r = pad(Qs, 1.2 * head)
    verified = np.zeros(C, dtype=bool)
    rad = np.full((C, n), np.inf)
    for _ in range(KRAWCZYK_ROUNDS):
        Jl, Jh = pr.box_J(np.column_stack([Qs - r, plo]), np.column_stack([Qs + r, phi]))
        Jc, Jr = _centre_radius(pr._matrix(Jl, C), pr._matrix(Jh, C))
        G = np.abs(np.eye(n) - np.einsum("kij,kjl->kil", Y, Jc)) + np.einsum("kij,kjl->kil", aY, Jr)
        kr = pad(Qs, head + np.einsum("kij,kj->ki", G, r))  # |K(X) - q~| <= kr
        inside = np.all(kr < r, axis=1) & np.all(np.isfinite(kr), axis=1)
        newly = inside & ~verified & ok
        rad[newly] = kr[newly]
        verified |= newly
        if verified[ok].all():
            break
        # epsilon-inflation: the next candidate is K(X) grown a little (a contraction settles)
        r = np.where(verified[:, None] | ~np.isfinite(kr), r, pad(Qs, 1.2 * kr))
    return verified, rad


def _sensitivity_velocities(pr: Problem, A, q, p, pd):
    """The velocities as S pd, S = -F_q^-1 F_p enclosed column by column: |S| x the
    rate's radius instead of |Y| |F_p| x it (no sign lost); the caller keeps the meet
    with the direct enclosure, as both enclose."""
    (qlo, qhi), (plo, phi), (pdl, pdh) = q, p, pd
    C, n = qlo.shape
    k = len(pr.params)
    Fl, Fh = pr.box_Fp(np.column_stack([qlo, plo]), np.column_stack([qhi, phi]))
    ri, cj = pr.fp_pattern
    FPl, FPh = np.zeros((C, n, k)), np.zeros((C, n, k))
    FPl[:, ri, cj], FPh[:, ri, cj] = Fl, Fh
    sl, sh = np.zeros((C, n, k)), np.zeros((C, n, k))
    for j in range(k):
        cen, rad = _centre_radius(-FPh[:, :, j], -FPl[:, :, j])
        sx, sr = _linear_enclosure(*A, cen, rad)
        sl[:, :, j], sh[:, :, j] = sx - sr, sx + sr
    vlo, vhi = np.zeros((C, n)), np.zeros((C, n))
    for j in range(k):
        ml, mh = _mul(sl[:, :, j], sh[:, :, j], pdl[:, j:j + 1], pdh[:, j:j + 1])
        vlo, vhi = _out(vlo + ml, vhi + mh)
    return vlo, vhi


def _singular(pr: Problem, plo, phi, Qs):
    """DomainError for a cell that no split verifies: where, and which constraints."""
    p = (plo[0] + phi[0]) / 2
    where = ", ".join(f"{a.name}={v:.6g}" for a, v in zip(pr.params, p))
    _, J = pr.residual(Qs[:1], p[None, :])
    J = J[0]
    if not np.all(np.isfinite(J)) or not np.all(np.isfinite(Qs[0])):
        raise DomainError(f"{pr.model}: the mechanism does not assemble at {where} (Newton from the neighbouring "
                          "configurations fails): narrow the operating envelope to exclude it")
    U, S, _ = np.linalg.svd(J)
    if _regular(pr, plo[0], phi[0], Qs[0]):
        raise DomainError(f"{pr.model}: the cover of the operating envelope is not verified near {where} after "
                          f"{MAX_DEPTH} halvings of its cell, though at the cell's centre and corners the mechanism "
                          f"assembles with a regular constraint Jacobian (smallest singular value {S[-1]:.3g} at "
                          "the centre): the interval test needs narrower cells there; declare more cells for the quantities "
                          "(Model.operate(..., cells=N), or \"cells\" in --envelope) or the dependent coordinates "
                          "in closed form (Model.explicit)")
    rows = np.argsort(-np.abs(U[:, -1]))[:3]
    names = ", ".join(pr.row_names[i] for i in rows if abs(U[i, -1]) > 0.1)
    hint = "; ".join(f"{a.name} in [{a.range[0]:.6g}, {v:.6g}) or ({v:.6g}, {a.range[1]:.6g}]"
                     for a, v in zip(pr.params, p) if a.range[0] < v < a.range[1])
    raise DomainError(f"{pr.model}: singular configuration inside the operating envelope at {where}: the constraint "
                      f"Jacobian's smallest singular value is {S[-1]:.3g} (pivot vanishing among {names}); "
                      f"an envelope that avoids it: {hint or 'a smaller range'}")


def _regular(pr: Problem, lo, hi, q0, rcond: float = 1e-6) -> bool:
    """The cell's centre and corners (256 of them at most) all assemble (Newton continued
    from the centre's solution along straight lines) with a Jacobian whose smallest
    singular value is above rcond of its largest: then the failed test is more likely the
    cell's width than a singular or unassemblable configuration."""
    k = len(lo)
    corners = np.array([[hi[j] if (c >> j) & 1 else lo[j] for j in range(k)] for c in range(2 ** min(k, 8))])
    P = np.vstack([(lo + hi) / 2, corners])
    Q = np.repeat(q0[None, :], len(P), axis=0)
    ok = np.ones(len(P), dtype=bool)
    for s in np.linspace(0.0, 1.0, 9)[1:]:  # continuation from the centre
        Q, good = pr.newton(Q, P[:1] + s * (P - P[:1]))
        ok &= good
    if not ok.all():
        return False
    _, J = pr.residual(Q, P)
    S = np.linalg.svd(J, compute_uv=False)
    return bool(np.all(np.isfinite(S)) and np.all(S[:, -1] > rcond * S[:, 0]))


def problem(eqs, unknowns, rows, extra, extra_names, params, residual=0.0) -> Problem:
    """The Problem of keeping `rows` of the model's constraints and the `extra` equations in
    `unknowns`, over the cell variables `params` (plus t when the equations depend on it).
    residual: each kept constraint row (positions, velocities, accelerations) may be off
    by up to this (a number, or one per row; the extra equations stay exact): the cover then holds the
    near-consistent states of the envelope's assembly branch, not only the consistent ones."""
    idx = {s: j for j, s in enumerate(eqs.q)}
    unknowns = list(unknowns)
    F = [eqs.phi[i] for i in rows] + list(extra)
    names = [eqs.phi_names[i] for i in rows] + list(extra_names)
    allowed = 0
    for s in unknowns + [a.sym for a in params]:
        allowed |= s.mask
    if any(f.mask & eqs.t.mask for f in F) and not any(a.sym is eqs.t for a in params):
        lo, hi = eqs.ranges[eqs.t]
        params = list(params) + [Param("t", eqs.t, None, None, (lo, hi), (1.0, 1.0), (0.0, 0.0), 1)]
        allowed |= eqs.t.mask
    for f, name in zip(F, names):
        if f.mask & ~allowed:
            raise DomainError(f"{eqs.model}: {name} involves symbols outside the kernel's coordinates "
                              f"({', '.join(s.value.name for s in unknowns)}) and the envelope's quantities: "
                              "declare the envelope in independent coordinates")
    pr = Problem(eqs.model, unknowns, [eqs.qd[idx[s]] for s in unknowns], [eqs.qdd[idx[s]] for s in unknowns],
                 F, names, params)
    pr.slack = np.concatenate([np.broadcast_to(np.asarray(residual, dtype=float), (len(rows),)), np.zeros(len(extra))])
    env = getattr(eqs, "envelope", None)
    thetas = [a.sym for a in params]
    for r in (env.regions if env else ()):  # only over the envelope's own quantities (not a time cover)
        if all(x.theta in thetas for x in env.quantities):
            pr.regions.append((r.name, IntervalEvaluator([r.expr], thetas), Evaluator([r.expr], thetas)))
    return pr
