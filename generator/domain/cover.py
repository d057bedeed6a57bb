"""Verified covers of the consistent states a kernel serves: boxes that contain every
(q, qd, qdd) satisfying the constraints, reached with the independent quantities anywhere
in the operating envelope (model.envelope), or along a driven motion's time range; and
the Domain a kernel gets from a cover (`envelope_domain`: boxes over its inputs, input
ranges, verification vectors; `cover_domain` the boxes alone). Pivot samples over a
cover are domain.sampling.with_envelope_samples.

The Krawczyk machinery is domain.krawczyk. A model whose dependent coordinates are all
explicit (Model.explicit) runs it on its independent coordinates only, the dependent ones
enclosed from their closed forms per cell (domain.explicit_cover); others on all of them.

Invariants: deterministic (fixed paths, seeded samples); every consistent state of the
envelope lies in some cell's box (tests check dense samples); cells only ever split.
"""
from __future__ import annotations

import functools

import numpy as np

from ..reference.solvers import mobility
from .base import Domain, DomainError
from .explicit_cover import explicit_cover
from .krawczyk import Cover, Param, _continue, _start_values, build_cover, problem
from .motion import DOMAIN_STEPS, motion_in_domain, motion_inputs


def envelope_cover(eqs, unknowns=None, rows=None, residual=0.0) -> Cover | None:
    """The cover of the states consistent with the kinematic constraints `rows` (default:
    the kinematic rows) over the model's operating envelope, in the coordinates `unknowns`
    (default: all, from the closed forms of the explicit ones when the model has them:
    domain.explicit_cover); None if the model declares no envelope. residual > 0: of the
    states within `residual` of each row (a number or one per row: krawczyk.problem), by Krawczyk on every
    coordinate (closed forms hold only on the constraints)."""
    env = eqs.envelope
    if not env:
        return None
    if getattr(eqs, "nh", None):
        raise DomainError(f"{eqs.model}: operating envelopes do not handle non-holonomic constraints yet "
                          f"({', '.join(eqs.nh_names)})")
    if getattr(eqs, "params", None):
        raise DomainError(f"{eqs.model}: operating envelopes need the parameters folded (params=\"constant\")")
    every = unknowns is None
    unknowns = list(eqs.q) if unknowns is None else list(unknowns)
    rows = list(eqs.kinematic_rows) if rows is None else list(rows)
    if every:  # by rank, not count: a redundant row makes every cell's F_q singular
        mob = mobility(eqs, rows)
        if mob.redundant:
            raise DomainError(f"{eqs.model}: the operating envelope's cover needs independent constraints "
                              f"(Krawczyk's test solves with F_q): {mob.describe()}; leave the redundant ones out")
    params, extra, extra_names = _envelope_problem(env)
    if every and not np.any(residual):  # dependent coordinates in closed form: Krawczyk on the independent ones only
        cover = explicit_cover(eqs, rows, extra, extra_names, params)
        if cover is not None:
            return cover
    pr = problem(eqs, unknowns, rows, extra, extra_names, params, residual)
    return build_cover(pr, np.array([eqs.guess.get(s, 0.0) for s in unknowns]))


def _envelope_problem(env):
    """(cell variables, extra equations, their names) of an operating envelope."""
    params = [Param(q.name, q.theta, q.theta_d, q.theta_dd, q.range, q.rate, q.accel, q.cells)
              for q in env.quantities]
    return params, [q.equation for q in env.quantities], [f"operate({q.name})" for q in env.quantities]


def envelope_configurations(eqs, rows, per_cell: int = 8):
    """(Q, t): consistent configurations (rows over eqs.q; t where the rows depend on
    time, else None) on a grid of the envelope's quantities,
    per_cell points per declared cell and quantity, each reached by Newton continued from
    the model's guess (the cover's assembly branch): a cheap look along the envelope,
    e.g. for where the constraints become dependent; points where Newton fails left out."""
    params, extra, names = _envelope_problem(eqs.envelope)
    pr = problem(eqs, eqs.q, rows, extra, names, params)
    axes = [np.linspace(*a.range, per_cell * a.cells + 1) for a in pr.params]
    P = np.array(np.meshgrid(*axes, indexing="ij")).reshape(len(axes), -1).T
    guess = np.array([eqs.guess.get(s, 0.0) for s in eqs.q])
    Q, ok = _continue(pr, guess, _start_values(pr, guess), P)
    ts = [k for k, a in enumerate(pr.params) if a.sym is eqs.t]
    return Q[ok], (P[ok, ts[0]] if ts else None)


def time_cover(eqs, cells: int) -> Cover:
    """The cover of a fully driven model's configurations over its time range (every row
    held, t the only cell variable)."""
    lo, hi = eqs.ranges[eqs.t]
    params = [Param("t", eqs.t, None, None, (lo, hi), (1.0, 1.0), (0.0, 0.0), cells)]
    cover = explicit_cover(eqs, range(len(eqs.phi)), [], [], params)
    if cover is not None:
        return cover
    pr = problem(eqs, eqs.q, range(len(eqs.phi)), [], [], params)
    return build_cover(pr, np.array([eqs.guess.get(s, 0.0) for s in eqs.q]))


def time_domain(eqs, ports, row, cells: int = DOMAIN_STEPS) -> Domain:
    """The Domain of a fully driven model's kernel whose input vector is row(q, qd, qdd, t):
    its vectors along the driven motion and the boxes of time_cover over its inputs."""
    motion = motion_inputs(eqs, row)
    return Domain(boxes=time_cover(eqs, cells).boxes([s for p in ports for s in p.symbols], {}), motion=motion)


def input_fallback(eqs, ports) -> dict:
    """Ranges of a kernel's inputs (its ports: `symbols`, `ranges`) that a cover does not
    bound: actuator forces from the envelope's inputs (else the port's range), t from the
    model's time range, the rest from their ports."""
    env_inputs = {f"u_{a}": r for a, r in eqs.envelope.inputs.items()}
    out = {}
    for p in ports:
        for s, r in zip(p.symbols, p.ranges):
            out[s] = env_inputs.get(s.value.name, eqs.ranges.get(s, r) if s is eqs.t else r)
    return out


def envelope_record(eqs, cover: Cover | None = None) -> dict:
    """What the manifest records of the envelope a domain covers (with the box count
    when the cover is built)."""
    rec = {**eqs.envelope.to_json(), "source": eqs.envelope.source}
    if cover is not None:
        rec["boxes"] = len(cover)
    return rec


def cover_domain(eqs, ports, cover: Cover) -> list[list[tuple[float, float]]]:
    """The cover's boxes over the flat inputs of a kernel's ports (see input_fallback)."""
    return cover.boxes([s for p in ports for s in p.symbols], input_fallback(eqs, ports))


def equations_domain(eqs, ports, row) -> Domain:
    """The Domain of a kernel of the model's equations, worked out on first use (c-double
    needs none): vectors along the driven motion, and with an operating envelope the
    cover's boxes over its inputs (consistent states: an angle measure's x^2 + y^2 stays
    away from 0) and only the vectors inside them."""
    motion = functools.partial(motion_inputs, eqs, row)
    if not eqs.envelope:
        return Domain(motion=motion)
    boxes = functools.cache(lambda: cover_domain(eqs, ports, envelope_cover(eqs)))  # one cover for both
    return Domain(boxes=boxes, motion=lambda: motion_in_domain(boxes(), motion()), envelope=envelope_record(eqs))


def envelope_domain(eqs, ports, cover: Cover, vectors: int = 256, seed: int = 0) -> Domain:
    """The Domain of a kernel with input ports `ports` over the envelope's cover: the
    cover's boxes over its inputs, its inputs' ranges narrowed to the boxes' hull (what the
    kernel accepts is what the envelope reaches), and verification vectors: consistent
    states drawn uniformly over the envelope (inputs the cover does not bound uniform in
    their fallback ranges)."""
    symbols = [s for p in ports for s in p.symbols]
    boxes = cover.boxes(symbols, input_fallback(eqs, ports))
    D = np.asarray(boxes)
    lo, hi = D[:, :, 0].min(axis=0), D[:, :, 1].max(axis=0)
    return Domain(boxes=boxes, motion=envelope_states(eqs, ports, cover, vectors, seed).tolist(),
                  ranges=tuple((float(a), float(b)) for a, b in zip(lo, hi)), envelope=envelope_record(eqs, cover))


def envelope_states(eqs, ports, cover: Cover | None, count: int, seed: int = 0) -> np.ndarray:
    """Consistent states drawn uniformly over the envelope's cover (Cover.sample), as rows
    of the flat inputs of `ports` [<= count, n] (states where Newton fails left out; inputs
    the cover does not bound uniform in their fallback ranges, input_fallback): the
    verification vectors of envelope_domain, and more of them on demand (`mbforge hdl
    --vectors` beyond the motion file's). cover None: the model's envelope_cover."""
    return drawn_rows(drawn_states(eqs, ports, cover, count, seed))


def drawn_states(eqs, ports, cover: Cover | None, count: int, seed: int):
    """What envelope_states draws: (Cover.sample's {symbol: values}, the flat input symbols
    of `ports`, {symbol: values} of the inputs the cover does not bound, uniform in their
    fallback ranges, and the generator that drew those, which search_states goes on with).
    Drawn once, it serves several searches (search_states(drawn=...))."""
    cover = envelope_cover(eqs) if cover is None else cover
    fb = input_fallback(eqs, ports)
    symbols = [s for p in ports for s in p.symbols]
    S = cover.sample(count, seed)
    m = len(next(iter(S.values()))) if S else 0
    rng = np.random.default_rng(seed + 1)
    return S, symbols, {s: rng.uniform(*fb[s], m) for s in symbols if s not in S}, rng


def drawn_rows(drawn) -> np.ndarray:
    """drawn_states' states as rows of the flat inputs [m, n]."""
    S, symbols, free, _ = drawn
    return _rows(S, symbols, free, slice(None), len(next(iter(S.values()))) if S else 0)


def _rows(D, symbols, free, idx, m: int) -> np.ndarray:
    """Rows [m, n] of the flat inputs: D's values where it has the symbol, else free's [idx]."""
    cols = [np.asarray(D[s], dtype=np.float64) if s in D else free[s][idx] for s in symbols]
    return np.column_stack(cols) if cols else np.zeros((m, 0))


SEARCH_STEPS, SEARCH_TRIES, SEARCH_STEP = 12, 8, 0.05  # rounds, tries per round, first step (of each range)


def search_states(eqs, ports, cover: Cover | None, score, count: int, start: int = 16, seed: int = 0,
                  drawn=None):
    """A local search over the envelope's consistent states for the largest score(X) (X
    rows of the flat inputs of `ports`; score: one value per row, larger is worse): from
    the `start` states with the largest score among `count` drawn as envelope_states
    draws them (seed), random steps in the envelope's quantities, rates and accelerations
    (SEARCH_STEP of each range at first, clipped to it, shrinking by 0.6 each of
    SEARCH_STEPS rounds of SEARCH_TRIES tries), each state recomputed by Newton from the
    one it moves from (Cover.states: on the constraints, in a cell of the cover), a step
    kept where it raises the score. Inputs the cover does not bound stay as drawn.
    (scores [start], states [start, n]) at the end, and the starts' scores [start]
    (largest first). drawn: drawn_states' result to start from instead of `count` new
    draws (its generator goes on: searches one after the other from one draw, as
    bench/stewart_envelope.py's per output)."""
    cover = envelope_cover(eqs) if cover is None else cover
    pr = cover.problem
    S, symbols, free, rng = drawn_states(eqs, ports, cover, count, seed) if drawn is None else drawn

    def rows(D, idx):
        return _rows(D, symbols, free, idx, 0)

    X = rows(S, slice(None))
    with np.errstate(all="ignore"):
        sc = np.nan_to_num(np.asarray(score(X), dtype=np.float64), nan=-np.inf)
    top = np.argsort(-sc, kind="stable")[:start]
    ps = pr.params
    dp = [a for a in ps if a.sym_d is not None]
    ddp = [a for a in ps if a.sym_dd is not None]
    k, kd = len(ps), len(dp)
    lo = np.array([a.range[0] for a in ps] + [a.rate[0] for a in dp] + [a.accel[0] for a in ddp], dtype=np.float64)
    hi = np.array([a.range[1] for a in ps] + [a.rate[1] for a in dp] + [a.accel[1] for a in ddp], dtype=np.float64)
    P = np.column_stack([S[a.sym][top] for a in ps] + [S[a.sym_d][top] for a in dp] + [S[a.sym_dd][top] for a in ddp])
    Q = np.column_stack([S[q][top] for q in pr.q])
    best, Xb, first = sc[top].copy(), X[top].copy(), sc[top].copy()
    step = SEARCH_STEP * (hi - lo)
    for _ in range(SEARCH_STEPS):
        for _ in range(SEARCH_TRIES):
            Pn = np.clip(P + step * rng.standard_normal(P.shape), lo, hi)
            with np.errstate(all="ignore"):
                D, ok = cover.states(Pn[:, :k], Pn[:, k:k + kd], Pn[:, k + kd:], Q)
                Xn = rows(D, top)
                ok &= np.all(np.isfinite(Xn), axis=1)
                sn = np.where(ok, np.nan_to_num(np.asarray(score(np.where(ok[:, None], Xn, Xb)), dtype=np.float64),
                                                nan=-np.inf), -np.inf)
            better = sn > best
            P[better], best[better], Xb[better] = Pn[better], sn[better], Xn[better]
            Q[better] = np.column_stack([D[q] for q in pr.q])[better]
        step = step * 0.6
    return best, Xb, first
