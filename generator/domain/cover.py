"""Verified covers of the consistent states a kernel serves: boxes that contain every
(q, qd, qdd) satisfying the constraints, reached with the independent quantities anywhere
in the operating envelope (model.envelope), or along a driven motion's time range; and
what a kernel takes from a cover (its domain, input ranges, verification vectors, pivot
samples).

The Krawczyk machinery is kernels.krawczyk. A model whose dependent coordinates are all
explicit (Model.explicit) runs it on its independent coordinates only, the dependent ones
enclosed from their closed forms per cell (kernels.explicit_cover); others on all of them.

Invariants: deterministic (fixed paths, seeded samples); every consistent state of the
envelope lies in some cell's box (tests check dense samples); cells only ever split.
"""
from __future__ import annotations

import numpy as np

from .common import KernelError
from .explicit_cover import explicit_cover
from .kernel import InPort
from .krawczyk import Cover, Param, build_cover, problem


def envelope_cover(eqs, unknowns=None, rows=None) -> Cover | None:
    """The cover of the states consistent with the kinematic constraints `rows` (default:
    the kinematic rows) over the model's operating envelope, in the coordinates `unknowns`
    (default: all, from the closed forms of the explicit ones when the model has them:
    kernels.explicit_cover); None if the model declares no envelope."""
    env = eqs.envelope
    if not env:
        return None
    if getattr(eqs, "nh", None):
        raise KernelError(f"{eqs.model}: operating envelopes do not handle non-holonomic constraints yet "
                          f"({', '.join(eqs.nh_names)})")
    if getattr(eqs, "params", None):
        raise KernelError(f"{eqs.model}: operating envelopes need the parameters folded (params=\"constant\")")
    every = unknowns is None
    unknowns = list(eqs.q) if unknowns is None else list(unknowns)
    rows = list(eqs.kinematic_rows) if rows is None else list(rows)
    if every:  # by rank, not count: a redundant row makes every cell's F_q singular
        from ..reference.solvers import mobility

        mob = mobility(eqs, rows)
        if mob.redundant:
            raise KernelError(f"{eqs.model}: the operating envelope's cover needs independent constraints "
                              f"(Krawczyk's test solves with F_q): {mob.describe()}; leave the redundant ones out")
    params = [Param(q.name, q.theta, q.theta_d, q.theta_dd, q.range, q.rate, q.accel, q.cells)
              for q in env.quantities]
    extra, extra_names = [q.equation for q in env.quantities], [f"operate({q.name})" for q in env.quantities]
    if every:  # dependent coordinates in closed form: Krawczyk on the independent ones only
        cover = explicit_cover(eqs, rows, extra, extra_names, params)
        if cover is not None:
            return cover
    pr = problem(eqs, unknowns, rows, extra, extra_names, params)
    return build_cover(pr, np.array([eqs.guess.get(s, 0.0) for s in unknowns]))


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


def input_fallback(eqs, kernel) -> dict:
    """Ranges of a kernel's inputs that a cover does not bound: actuator forces from the
    envelope's inputs (else the port's range), t from the model's time range, the rest
    from their ports."""
    env_inputs = {f"u_{a}": r for a, r in eqs.envelope.inputs.items()}
    out = {}
    for p in kernel.inputs:
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


def cover_domain(eqs, kernel, cover: Cover) -> list[list[tuple[float, float]]]:
    """The cover's boxes over the kernel's flat inputs (see input_fallback)."""
    return cover.boxes(kernel.input_symbols, input_fallback(eqs, kernel))


def apply_cover(eqs, kernel, cover: Cover, vectors: int = 256, seed: int = 0) -> None:
    """Set the kernel's domain to the cover's boxes over its inputs, its input ports'
    ranges to the domain's hull (what the kernel accepts is what the envelope reaches),
    and its verification vectors to consistent states drawn uniformly over the envelope."""
    fb = input_fallback(eqs, kernel)
    kernel.domain = cover.boxes(kernel.input_symbols, fb)
    kernel.envelope = envelope_record(eqs, cover)
    D = np.asarray(kernel.domain)
    lo, hi = D[:, :, 0].min(axis=0), D[:, :, 1].max(axis=0)
    ports, off = [], 0
    for p in kernel.inputs:
        n = len(p.symbols)
        ports.append(InPort(p.name, p.symbols, [(float(a), float(b)) for a, b in zip(lo[off:off + n], hi[off:off + n])],
                            p.declared or list(p.ranges)))
        off += n
    kernel.inputs = ports
    S = cover.sample(vectors, seed)
    m = len(next(iter(S.values()))) if S else 0
    rng = np.random.default_rng(seed + 1)
    cols = []
    for s in kernel.input_symbols:
        cols.append(S[s] if s in S else rng.uniform(*fb[s], m))
    kernel.motion = [[float(c[i]) for c in cols] for i in range(m)]


PIVOT_SAMPLES = 256  # consistent states of the envelope at which pivots are chosen and checked


def with_envelope_samples(samples, cover: Cover | None, seed: int = 0):
    """The pivot samples plus PIVOT_SAMPLES consistent configurations drawn over the
    envelope (their coordinates, and t where the samples have it): pivots fixed at
    generation time must serve the whole envelope, not one motion."""
    from ..linalg import Samples

    if cover is None:
        return samples
    S = cover.sample(PIVOT_SAMPLES, seed)
    n = len(next(iter(S.values())))
    cols = []
    for s in samples.inputs:
        if s in S:
            cols.append(S[s])
        else:  # t (or a parameter) the cover does not vary: the samples' own values, cycled
            k = samples.inputs.index(s)
            cols.append(np.resize(samples.points[:, k], n))
    extra = Samples(samples.inputs, np.column_stack(cols) if cols else np.zeros((n, 0)),
                    f"{n} consistent configurations of the operating envelope")
    return samples + extra
