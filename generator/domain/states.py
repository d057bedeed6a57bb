"""The states a step kernel of a constrained model serves: boxes that hold every state
within the declared ranges whose constraint residuals are at most RESIDUAL (`state_cover`),
so that range and error analysis of the step runs where the mechanism is assembled, not
over the declared box, most of which (x^2 + y^2 far from 1) no mechanism reaches.

    positions      |Phi(q, t)| <= RESIDUAL
    velocities     |Phi_q qd - beta| <= RESIDUAL
    accelerations  |Phi_q qdd - gamma| <= RESIDUAL   (ali3p's state only)

Branch and prune, level by level: the declared box of the level's unknowns is bisected
(the widest side relative to its declared width first) and a box is dropped only when the
interval enclosure of some residual row over it excludes [-RESIDUAL, RESIDUAL], so no
such state is ever dropped (sound whatever the enclosures' overestimation: they only keep
more). The velocity and acceleration levels, linear in their unknowns, first narrow each
box by the rows solved for one unknown at a time (_Contract: a thin box along the tangent
instead of a square around it; the pendulum's 2,220 boxes became 1,380). Each box of a
level carries the boxes of the previous levels (a velocity box belongs to one position box). Near-consistent, not only consistent: a step's outputs
satisfy the constraints to its convergence tolerance (kernels.step.CONVERGED, 1e-6 of the
coordinates' scale) plus rounding, far inside RESIDUAL.

Deterministic (fixed bisection order); None when the boxes would exceed MAX_BOXES (the
caller keeps the declared box) or the model has more than MAX_COORDS coordinates.
"""
from __future__ import annotations

import numpy as np

from ..analysis.intervals import IntervalEvaluator
from ..ir import sub

RESIDUAL = 1e-3  # constraint residual (in each row's own units) a covered state may have
PARTS = {"q": 32, "qd": 8, "qdd": 1}  # boxes per declared width each level refines to
MAX_BOXES = 20000
MAX_COORDS = 4  # branch and prune grows with the coordinates, not the degrees of freedom


def _rows(eqs, level: str):
    """The residual rows of a level, as atoms of q, qd, qdd, t (and parameters)."""
    if level == "q":
        return list(eqs.phi)
    x, rhs = (eqs.qd, eqs.beta) if level == "qd" else (eqs.qdd, eqs.gamma)
    return [sub(a, b) for a, b in zip(eqs.phi_q.matvec(list(x)), rhs)]


PAD = 1e-10  # relative widening of a contracted range: covers numpy's rounding to nearest


def _imul(a, b, c, d):
    p = np.stack([a * c, a * d, b * c, b * d])
    return np.nanmin(p, axis=0), np.nanmax(p, axis=0)


class _Contract:
    """Narrows the level's unknowns x in boxes by the rows A x = r +- RESIDUAL (A = Phi_q,
    r = beta or gamma): x_j within (r_i +- RESIDUAL - sum_{k != j} A_ik x_k) / A_ij where
    A_ij's range excludes 0, twice over every row; a box left empty holds no such state."""

    def __init__(self, eqs, rhs, syms: list, unknowns: list):
        J = eqs.phi_q
        self.entries = list(J.pattern)
        self.cols = [syms.index(s) for s in unknowns]
        self.A = IntervalEvaluator(J.values(), syms)
        self.r = IntervalEvaluator(list(rhs), syms)

    def __call__(self, lo, hi):
        al, ah = self.A(lo, hi)
        rl, rh = self.r(lo, hi)
        lo, hi = lo.copy(), hi.copy()
        with np.errstate(all="ignore"):
            for _ in range(2):
                for i in range(rl.shape[1]):
                    row = [(e, j) for e, (r, j) in enumerate(self.entries) if r == i]
                    for e, j in row:
                        ok = (al[:, e] > 0) | (ah[:, e] < 0)
                        nl, nh = rl[:, i] - RESIDUAL, rh[:, i] + RESIDUAL
                        for f, k in row:
                            if f != e:
                                pl, ph = _imul(al[:, f], ah[:, f], lo[:, self.cols[k]], hi[:, self.cols[k]])
                                nl, nh = nl - ph, nh - pl
                        ql, qh = _imul(nl, nh, 1 / np.where(ok, ah[:, e], 1.0), 1 / np.where(ok, al[:, e], 1.0))
                        c = self.cols[j]
                        pad = PAD * (1 + np.abs(ql) + np.abs(qh))
                        lo[:, c] = np.where(ok & np.isfinite(ql), np.maximum(lo[:, c], ql - pad), lo[:, c])
                        hi[:, c] = np.where(ok & np.isfinite(qh), np.minimum(hi[:, c], qh + pad), hi[:, c])
        return lo, hi


def _prune(ev, lo, hi, split: list[int], width: np.ndarray, contract=None):
    """Boxes (rows of lo, hi over ev's inputs) bisected along the columns `split` until
    each is at most `width` there, those whose rows exclude [-RESIDUAL, RESIDUAL] dropped
    (and narrowed by `contract` first); None past MAX_BOXES."""
    done_lo, done_hi = [], []
    while len(lo):
        if contract is not None:
            lo, hi = contract(lo, hi)
            live = np.all(lo <= hi, axis=1)
            lo, hi = lo[live], hi[live]
        rl, rh = ev(lo, hi)
        keep = np.all(~((rl > RESIDUAL) | (rh < -RESIDUAL)), axis=1)  # nan (no enclosure) keeps
        lo, hi = lo[keep], hi[keep]
        rel = (hi[:, split] - lo[:, split]) / width
        wide = rel.max(axis=1) > 1 if split else np.zeros(len(lo), dtype=bool)
        done_lo.append(lo[~wide]), done_hi.append(hi[~wide])
        lo, hi = lo[wide], hi[wide]
        if len(lo) + sum(len(d) for d in done_lo) > MAX_BOXES:
            return None
        if not len(lo):
            break
        r = np.arange(len(lo))
        col = np.asarray(split)[np.argmax(rel[wide], axis=1)]
        mid = (lo[r, col] + hi[r, col]) / 2
        lo2, hi1 = lo.copy(), hi.copy()
        hi1[r, col], lo2[r, col] = mid, mid
        lo, hi = np.concatenate([lo, lo2]), np.concatenate([hi1, hi])
    return np.concatenate(done_lo), np.concatenate(done_hi)


def state_cover(eqs, accelerations: bool, extra: dict, levels: list[str] | None = None):
    """(symbols, lo, hi): boxes over q, qd[, qdd] and the symbols of `extra` ({symbol:
    (lo, hi)}: t, parameters) holding every state of the declared ranges within RESIDUAL
    of the constraints (see the module's doc); None when the cover is not worked out.
    levels: the first levels only (["q"]: the positions' boxes)."""
    if not eqs.phi or len(eqs.q) > MAX_COORDS:
        return None
    levels = levels or ["q", "qd"] + (["qdd"] if accelerations else [])
    syms = list(eqs.q) + list(extra)
    lo = np.array([[eqs.ranges[s][0] for s in eqs.q] + [r[0] for r in extra.values()]], dtype=float)
    hi = np.array([[eqs.ranges[s][1] for s in eqs.q] + [r[1] for r in extra.values()]], dtype=float)
    for level in levels:
        new = list(getattr(eqs, level)) if level != "q" else []
        if new:
            syms += new
            lo = np.hstack([lo, np.tile([eqs.ranges[s][0] for s in new], (len(lo), 1))])
            hi = np.hstack([hi, np.tile([eqs.ranges[s][1] for s in new], (len(hi), 1))])
        timed = eqs.t in extra and any(r.mask & eqs.t.mask for r in eqs.phi)
        mine = list(eqs.q) + ([eqs.t] if timed else []) if level == "q" else new
        split = [syms.index(s) for s in mine]
        width = np.array([(eqs.ranges[s][1] - eqs.ranges[s][0]) / PARTS[level] for s in mine])
        contract = None if level == "q" else _Contract(eqs, eqs.beta if level == "qd" else eqs.gamma, syms, mine)
        got = _prune(IntervalEvaluator(_rows(eqs, level), syms), lo, hi, split, width, contract)
        if got is None:
            return None
        lo, hi = got
    return syms, lo, hi
