"""Covers of every coordinate of a model whose dependent coordinates are given in closed
form (Model.explicit): the verified cover of domain.krawczyk over the independent
coordinates alone (Krawczyk on the constraints among them, e.g. the Stewart platform's 7
coordinates and its Euler normalisation), then per cell the dependent positions,
velocities and accelerations enclosed by range analysis of their closed forms and of the
forms' chain-rule derivatives (Equations.explicit_rates) over the cell's boxes
(analysis.ranges: interval and affine arithmetic, the tighter per value).

Why: Krawczyk over all 98 Stewart coordinates splits wide Euler-parameter cells to its
depth limit; over the 7 independent ones the first grid verifies.

Soundness: every consistent state whose independent part lies in a cell's boxes has its
dependent part equal to the closed forms there, because the forms satisfy the remaining
constraints identically where they are defined (checked at consistent samples of the
cover, EXPLICIT_TOL, as the reduced kernel checks its samples). So the forms' enclosure
over the boxes holds the dependent part, provided the forms are defined over the whole
box: every divisor's range proven away from 0, every radicand's proven >= 0, and every
guard the model declares (Model.explicit_guard, e.g. the Stewart's Shepperd pivots)
proven >= its minimum. A cell where one is not proven is split (domain.krawczyk.build_cover)
and at the depth limit refused, naming the dependent coordinate (or the guard) and the cell.
"""
from __future__ import annotations

import numpy as np

from .. import cache
from ..analysis.ranges import analyse_chunked
from ..ir import ZERO, Evaluator, add, mul, sub
from ..lower.tape import lower
from .base import DomainError
from .krawczyk import Cover, Problem, build_cover, problem

ENCLOSED_OPS = {"add", "sub", "neg", "mul", "div", "sqrt", "sin", "cos", "sincos", "atan2"}  # analyse_boxes' rules
CHECK_SAMPLES = 256  # consistent states of the cover at which the closed forms are checked
EXPLICIT_TOL = 1e-8  # largest |constraint| accepted through the closed forms (relative to the rates' size for qd, qdd)
_KINDS = ("position", "velocity", "acceleration")


class ExplicitForms:
    """The dependent coordinates' q, qd, qdd as one tape over the independent coordinates'
    q, qd, qdd (and t), enclosed over boxes, with the definedness checks of every cell."""

    def __init__(self, eqs, pr: Problem):
        pos, vel, acc = eqs.explicit_rates()
        dep = eqs.dependent
        idx = {s: j for j, s in enumerate(eqs.q)}
        self.model = eqs.model
        self.dep = dep
        self.symbols = dep + [eqs.qd[idx[s]] for s in dep] + [eqs.qdd[idx[s]] for s in dep]
        atoms = pos + vel + acc
        uses_t = any(a.mask & eqs.t.mask for a in atoms)
        self.inputs = pr.q + pr.qd + pr.qdd + ([eqs.t] if uses_t else [])
        self.guards = list(getattr(eqs, "explicit_guards", []) or [])
        self.tape = lower(atoms + [g for _, g, _ in self.guards], self.inputs)
        self.unsupported = sorted({i.op for i in self.tape.instrs} - ENCLOSED_OPS)
        self.n = len(self.symbols)
        # (instruction index, operand, "div" | "sqrt"): divisors must exclude 0, radicands be >= 0
        self.checks = [(i, ins.args[1] if ins.op == "div" else ins.args[0], ins.op)
                       for i, ins in enumerate(self.tape.instrs) if ins.op in ("div", "sqrt")]
        self.point = Evaluator(atoms, self.inputs)

    def _analyse(self, syms, L, H):
        pos = {s: k for k, s in enumerate(syms)}
        missing = [s.value.name for s in self.inputs if s not in pos]
        if missing:  # t where the cover does not vary it: callers make it a cell variable
            raise DomainError(f"{self.model}: the cover does not bound {', '.join(missing)}, which the explicit "
                              "coordinates use")
        cols = [pos[s] for s in self.inputs]
        vec = analyse_chunked(self.tape, L[:, cols], H[:, cols], strict=False)
        ends = [vec.operand(o) for o in self.tape.outputs]
        lo = np.column_stack([e[0] for e in ends])
        hi = np.column_stack([e[1] for e in ends])
        return vec, lo, hi

    def _failures(self, vec, lo, hi):
        """Per cell: the first unproven check (an index into checks, then the guards
        after them, -1: none)."""
        first = np.full(len(lo), -1)
        for j, (_, o, op) in enumerate(self.checks):
            a, b = vec.operand(o)
            bad = ~(a > 0) & ~(b < 0) if op == "div" else ~(a >= 0)
            first = np.where((first < 0) & bad, j, first)
        for g, (_, _, minimum) in enumerate(self.guards):
            bad = ~(lo[:, self.n + g] >= minimum)
            first = np.where((first < 0) & bad, len(self.checks) + g, first)
        finite = np.all(np.isfinite(lo[:, :self.n]) & np.isfinite(hi[:, :self.n]), axis=1)
        return np.where((first < 0) & ~finite, len(self.checks) + len(self.guards), first)

    def enclose(self, syms, L, H):
        """(proven per cell, lo, hi of the dependent q, qd, qdd) over the cells' boxes;
        kept in the disk cache (mbforge.cache) by the closed forms, the guards and the boxes:
        the analysis is most of `mbforge generate`'s time for a small kernel."""
        k = cache.key(repr([(i.op, i.dst, i.args) for i in self.tape.instrs]), repr(self.tape.outputs),
                      repr([s.value.name for s in self.inputs]), repr([s.value.name for s in syms]),
                      repr([m for _, _, m in self.guards]), repr(self.n),
                      np.asarray(L, dtype=float), np.asarray(H, dtype=float))
        hit = cache.load("cover", k, ("ok", "lo", "hi")) if self.tape.hints is None else None  # hints: no key
        if hit is not None:
            return hit["ok"], hit["lo"], hit["hi"]
        vec, lo, hi = self._analyse(syms, L, H)
        ok = self._failures(vec, lo, hi) < 0
        if self.tape.hints is None:
            cache.store("cover", k, ok=ok, lo=lo[:, :self.n], hi=hi[:, :self.n])
        return ok, lo[:, :self.n], hi[:, :self.n]

    def refuse(self, syms, L, H):
        """DomainError for the first of these cells: which closed form is not proven
        defined there (or which guard falls below its minimum), and where."""
        vec, lo, hi = self._analyse(syms, L[:1], H[:1])
        j = int(self._failures(vec, lo, hi)[0])
        where = ", ".join(f"{s.value.name}={(L[0, syms.index(s)] + H[0, syms.index(s)]) / 2:.6g}"
                          for s in self.inputs[:len(self.inputs) // 3])  # the independent positions
        hint = "narrow the operating envelope to avoid it"
        if j >= len(self.checks) + len(self.guards) or j < 0:
            raise DomainError(f"{self.model}: the closed forms of the explicit coordinates have no finite enclosure "
                              f"over the cell near {where}; {hint}")
        if j >= len(self.checks):
            what, _, minimum = self.guards[j - len(self.checks)]
            g = self.n + j - len(self.checks)
            raise DomainError(f"{self.model}: {what} is not proven >= {minimum:g} over the cell near {where} (its "
                              f"range [{lo[0, g]:.6g}, {hi[0, g]:.6g}]); {hint}")
        i, o, op = self.checks[j]
        a, b = vec.operand(o)
        which = self._user(i)
        what = (f"divides by a value in [{a[0]:.6g}, {b[0]:.6g}]" if op == "div"
                else f"takes the square root of a value in [{a[0]:.6g}, {b[0]:.6g}]")
        raise DomainError(f"{self.model}: the closed form of {which} {what} over the cell near {where}; {hint}")

    def _user(self, i: int) -> str:
        """The first dependent quantity whose closed form reads instruction i's result."""
        hit = set(self.tape.instrs[i].dst)
        for ins in self.tape.instrs[i + 1:]:
            if any(k == "t" and v in hit for k, v in ins.args):
                hit.update(ins.dst)
        for k, (kind, v) in enumerate(self.tape.outputs[:self.n]):
            if kind == "t" and v in hit:
                return f"{self.symbols[k].value.name} ({_KINDS[k // len(self.dep)]})"
        return "a guard"

    def points(self, S: dict) -> dict:
        """The dependent q, qd, qdd at the states S ({independent symbol: values})."""
        X = np.column_stack([S[s] for s in self.inputs])
        Y = np.atleast_2d(self.point(X)) if len(X) else np.zeros((0, self.n))
        return {s: Y[:, k] for k, s in enumerate(self.symbols)}


def _split_rows(eqs, rows):
    """(independent coordinates, rows among them alone, the other rows), or None when the
    model's explicit coordinates are not every coordinate but the independent ones."""
    if not getattr(eqs, "explicit", None):
        return None
    z = list(eqs.independent)
    if set(z) & set(eqs.dependent) or len(z) + len(eqs.dependent) != len(eqs.q):
        return None
    return (z, *eqs.independent_rows(rows))


def explicit_cover(eqs, rows, extra, extra_names, params) -> Cover | None:
    """The cover of every coordinate (see the module's doc) of the states consistent with
    `rows` and the envelope equations `extra` over `params`; None where it does not apply
    (no explicit coordinates, an envelope declared in dependent coordinates, an operation
    in the closed forms range analysis has no rule for, t used by the closed forms but
    not a cell variable): the caller covers every coordinate by Krawczyk then."""
    split = _split_rows(eqs, rows)
    if split is None:
        return None
    z, psi, others = split
    dep_mask = 0
    for s in eqs.dependent:
        dep_mask |= s.mask
    if any(f.mask & dep_mask for f in extra) or len(psi) + len(extra) != len(z):
        return None
    pr = problem(eqs, z, psi, extra, extra_names, params)
    forms = ExplicitForms(eqs, pr)
    if forms.unsupported or (eqs.t in forms.inputs and not any(a.sym is eqs.t for a in pr.params)):
        return None  # an op range analysis has no rule for (exp, log, ...), or t not a cell variable
    cover = build_cover(pr, np.array([eqs.guess.get(s, 0.0) for s in z]), forms)
    check_forms(eqs, cover, others)
    return cover


def check_forms(eqs, cover: Cover, others: list[int], count: int = CHECK_SAMPLES) -> None:
    """The closed forms satisfy the rows `others` (positions, Phi_q qd = beta, Phi_q qdd =
    gamma) at `count` consistent states of the cover; DomainError naming the rows otherwise."""
    if not others:
        return
    S = cover.sample(count, seed=11)
    # a passed check is kept in the disk cache, keyed by the rows' atoms and the states
    sel = set(others)
    rows = [(i, j, a) for (i, j), a in eqs.phi_q.entries.items() if i in sel]
    key = cache.key(cache.atoms([eqs.phi[i] for i in others] + [eqs.beta[i] for i in others]
                                + [eqs.gamma[i] for i in others] + [a for _, _, a in rows]),
                    repr([(i, j) for i, j, _ in rows]), repr([s.value.name for s in S]),
                    np.column_stack([S[s] for s in S]), repr(eqs.ranges.get(eqs.t)), repr(count))
    if cache.load("forms", key, ("passed",)) is not None:
        return
    m = len(next(iter(S.values())))
    state = eqs.q + eqs.qd + eqs.qdd + [eqs.t]
    t0 = eqs.ranges.get(eqs.t, (0.0, 0.0))[0]  # t where the cover does not vary it (no row uses it)
    X = np.column_stack([S[s] if s in S else np.full(m, t0) for s in state])
    sel = {i: k for k, i in enumerate(others)}
    lhs_v, lhs_a = [ZERO] * len(others), [ZERO] * len(others)
    for (i, j), a in eqs.phi_q.entries.items():
        if i in sel:
            lhs_v[sel[i]] = add(lhs_v[sel[i]], mul(a, eqs.qd[j]))
            lhs_a[sel[i]] = add(lhs_a[sel[i]], mul(a, eqs.qdd[j]))
    res = ([eqs.phi[i] for i in others] + [sub(v, eqs.beta[i]) for v, i in zip(lhs_v, others)]
           + [sub(a, eqs.gamma[i]) for a, i in zip(lhs_a, others)])
    R = np.atleast_2d(Evaluator(res, state)(X))
    n, nq = len(others), len(eqs.q)
    v = 1 + np.max(np.abs(X[:, nq:2 * nq]))
    tols = (EXPLICIT_TOL, EXPLICIT_TOL * v, EXPLICIT_TOL * (v * v + np.max(np.abs(X[:, 2 * nq:3 * nq]))))
    bad = []
    for k, (what, tol) in enumerate(zip(("", " (velocity)", " (acceleration)"), tols)):
        worst = np.max(np.abs(R[:, k * n:(k + 1) * n]), axis=0)
        bad += [(eqs.phi_names[i] + what, float(w)) for i, w in zip(others, worst) if not w <= tol]
    if bad:
        raise DomainError(f"{eqs.model}: the explicit coordinates do not satisfy "
                          + ", ".join(f"{name} (|residual| up to {w:.3g})" for name, w in bad[:6])
                          + f" at {m} consistent states of the operating envelope")
    cache.store("forms", key, passed=np.ones(1))
