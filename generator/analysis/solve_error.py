"""Fixed-point error bounds of a kernel that ends in a linear solve, split at the solve.

The error forms (fixerror) carry each rounding's coefficient as an interval over the box.
Through a straight-line elimination the coefficients of paths that cancel are added as
independent intervals: over a cell of the Stewart platform's envelope a leg vector's
rounding reached the forces with a coefficient of 5e8 N/m, and the bounds were 1e4 x the
errors seen. Split instead where the solve begins. With A^, b^ the matrix and right-hand
side as computed and y the exact solution, the computed elimination is, up to its back
substitution, the exact elimination of a perturbed system A~, b~:

* the errors A and b arrive with (the whole-program forms at the cut): A^ - A, b^ - b;
* each rounding inside the elimination, carried by the forms to the next quantity of the
  elimination's plan (analysis.linear) and absorbed there as an exact perturbation: a
  Schur entry S(i, j) before step s off by d is a_ij off by d (a_ij enters through it
  alone), b's row i eliminated through step s is b_i off by d, a multiplier S(i, c) / p
  off by d is S(i, c) off by p d; the absorbed quantity is read as exact afterwards;
* what reaches the solution otherwise (the back substitution, the reciprocals it
  multiplies by) stays in the forms, run over the solve's instructions alone with A^, b^
  read exactly and every range widened by the error the whole-program forms give there.

Then A~ (x~ - y) = (b~ - b) - (A~ - A) y exactly. With R = mid(A)^-1 and G >= |I - R A|
over the box (row sums < 1), |A^-1 w| <= (I - G)^-1 |R w| (Neumann series), summed over
the roundings as sum_k u_k |R g_k| + |R| r; A~^-1 against A^-1 costs 1 / (1 - mu),
mu >= || |A^-1| |A~ - A| ||. y, G and R come from linear._Hints (A and b as affine forms
over the box, param_solve).

Sound where the elimination's exact arithmetic gives A^-1 b (its pivots proven nonzero
over the box) and the solve's instructions read nothing from before but A's entries and
b (find_cut checks it); otherwise None, and the whole-program bound stands. The backends
keep, per box and output, the smaller of the two bounds.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..lower.tape import Tape
from .forms import VForm, vscale
from .ranges import BoxRanges, analyse_chunked, split_box

# a kernel ending in a hinted solve also gets the split bound (fixed point and float32)
SPLIT_AT_SOLVE = True


@dataclasses.dataclass
class SolveCut:
    entries: list  # (i, j, operand, scale): A_ij = scale * the operand's value
    rhs: list  # (i, operand, scale)
    outputs: dict  # output position -> solution index
    section: set  # instruction indices of the solve (all after the cut)
    enclosure: object  # (in_lo, in_hi) -> (R, G, xc, xr): linear._Hints.solve_enclosure
    drive: object  # (in_lo, in_hi, dims) -> (B, len(dims)), how much A moves along each: linear._Hints.drive
    absorb: dict  # section temp -> (i, j or None, sign, pivot operand and sign or None): see _absorbed

    @property
    def operands(self) -> set:
        return {o for *_, o, _ in self.entries if o[0] != "c"} | {o for _, o, _ in self.rhs if o[0] != "c"}


def find_cut(tape: Tape) -> SolveCut | None:
    """The split of the tape at its one hinted solve, or None (see the module doc)."""
    hints = tape.hints
    cut = None if hints is None else hints.cut
    if cut is None:
        return None
    entries, rhs, outputs = cut
    if not outputs:
        return None
    at = {o[1] for _, _, o, _ in entries if o[0] == "t"} | {o[1] for _, o, _ in rhs if o[0] == "t"}
    instrs = tape.instrs
    needed = tape.cone(("t", t) for t in at)[0]  # the temps A and b depend on
    section = {i for i, ins in enumerate(instrs) if not needed.intersection(ins.dst)}
    inside = {d for i in section for d in instrs[i].dst}
    ins_ok = {o for _, _, o, _ in entries if o[0] == "in"} | {o for _, o, _ in rhs if o[0] == "in"}
    for i in section:
        for o in instrs[i].args:
            if (o[0] == "t" and o[1] not in inside and o[1] not in at) or (o[0] == "in" and o not in ins_ok):
                return None  # the solve reads something else from before: no clean cut
    if any(tape.outputs[p][0] != "t" or tape.outputs[p][1] not in inside for p in outputs):
        return None
    return SolveCut(entries, rhs, outputs, section, hints.solve_enclosure, hints.drive,
                    _absorbed(hints, inside, entries))


def split_failed(split: list, cut: SolveCut) -> np.ndarray:
    """(B,) the boxes where solve_errors_boxes' split gave no finite bound for some
    solution output."""
    return ~np.all([np.isfinite(split[p]) for p in cut.outputs], axis=0)


def matrix_inputs(tape: Tape, cut: SolveCut) -> list[int]:
    """The inputs A's entries are computed from (indices into tape.inputs)."""
    return sorted(tape.cone(o for *_, o, _ in cut.entries)[1])


# refine_for_solve: rounds of cutting boxes, while they stay within BUDGET x the domain's;
# cut are the boxes where the split failed and those whose bound is at least LOOSE x the
# largest where it held, each along at most MOST inputs per round (2^MOST parts). Stewart
# reduced kernel over its 64 cells: 768 boxes, c-fixed 50 s on two cores (bench/stewart_envelope.py)
ROUNDS = 6
BUDGET = 12
LOOSE = 0.5
MOST = 3


def refine_for_solve(tape: Tape, vec: BoxRanges, bounds, replan=None):
    """Where the domain's boxes are too wide for the split at the solve (it fails on
    some), cut boxes round by round (solve_parts): those where it failed, and those whose
    bound is within LOOSE of the largest where it held. bounds(v) -> ((B, n_out) bounds,
    (B,) split failed) for a BoxRanges v; replan(vec) -> True when the bounds of every
    box must be computed again (fixed point: formats planned over the parts after the
    first round), else only the parts' are. (vec, E)."""
    E, fail = bounds(vec)
    cut = find_cut(tape)
    if not fail.any() or cut is None:
        return vec, E
    dims = np.array(matrix_inputs(tape, cut), dtype=np.int64)
    cap = BUDGET * vec.n_boxes
    for rnd in range(ROUNDS):
        held = E[~fail].max(0) if (~fail).any() else np.full(E.shape[1], np.inf)
        bad = np.flatnonzero(fail | ((E >= LOOSE * held) & (held > 0)).any(1))
        if bad.size > cap - vec.n_boxes:  # not all fit in halves: the failed, then the loosest first
            with np.errstate(all="ignore"):
                worst = np.where(fail, np.inf, (E / np.where(held > 0, held, np.inf)).max(1))[bad]
            bad = bad[np.argsort(-worst, kind="stable")][:max(cap - vec.n_boxes, 0)]
        got = solve_parts(tape, cut, dims, vec, bad, cap - (vec.n_boxes - bad.size)) if bad.size else None
        if got is None:
            break
        keep = np.setdiff1d(np.arange(vec.n_boxes), got[1])
        vec = BoxRanges.concat([vec.take(keep), got[0]])
        if replan is not None and rnd == 0 and replan(vec):
            E, fail = bounds(vec)
        else:
            Ep, fp = bounds(got[0])
            E, fail = np.vstack([E[keep], Ep]), np.concatenate([fail[keep], fp])
    return vec, E


def solve_parts(tape: Tape, cut: SolveCut, dims: np.ndarray, vec: BoxRanges, which,
                room: int) -> tuple[BoxRanges, list[int]] | None:
    """The boxes `which` of vec cut into parts where the split at the solve failed (the
    matrix varies too much over a box for one preconditioner, or its errors reach a
    pivot): halves along the inputs `dims` (matrix_inputs) that make A vary most (linear's drive:
    at least half the largest), at most as many per box as keep the parts within `room`.
    (the parts analysed, the boxes cut), or None when none can be cut or range analysis
    cannot bound a part (a divisor's range reaching 0). Sound whatever is chosen: every
    part lies in its box."""
    which = np.asarray(which, dtype=np.int64)
    if not dims.size or not which.size:
        return None
    dims = dims[(vec.in_hi[which][:, dims] > vec.in_lo[which][:, dims]).any(0)]
    most = min(MOST, int(np.floor(np.log2(max(room, 1) / which.size)))) if room >= 2 * which.size else 0
    if not dims.size or most < 1:
        return None
    S = cut.drive(vec.in_lo[which], vec.in_hi[which], dims)
    lo_, hi_, done = [], [], []
    for b, s in zip(which, S):
        if not np.isfinite(s).all() or not s.max() > 0:
            s = np.where(vec.in_hi[b, dims] > vec.in_lo[b, dims], 1.0, 0.0)  # no ranking: every dim alike
        order = [k for k in np.argsort(-s, kind="stable") if s[k] >= 0.5 * s.max() and s[k] > 0][:most]
        if not order:
            continue
        boxes = [(vec.in_lo[b].copy(), vec.in_hi[b].copy())]
        for k in sorted(order):
            boxes = [h for l, hh in boxes for h in split_box(l, hh, int(dims[k]))]
        lo_ += [l for l, _ in boxes]
        hi_ += [h for _, h in boxes]
        done.append(int(b))
    if not done:
        return None
    sub = analyse_chunked(tape, np.array(lo_), np.array(hi_), vec.strict, vec.span)
    return (sub, done) if not (sub.fail >= 0).any() else None


def _absorbed(hints, inside: set, entries: list) -> dict:
    """The solve's quantities whose error is an exact perturbation of A or b (linear's
    plan, steps s of pivot row r and column c): a Schur entry S(i, j) before step s is
    a_ij perturbed by as much (a_ij enters the elimination through it alone); b's row i
    eliminated through step s is b_i perturbed; a multiplier l_i = S(i, c) / p off by d
    is S(i, c) off by p d. temp -> (i, j or None, sign, (pivot operand, sign) for a
    multiplier). A temp planned twice, or a multiplier whose pivot is not found, is left
    to the error forms."""
    count: dict = {}
    for t, *_ in hints.targets:
        count[t] = count.get(t, 0) + 1
    pivots = {}
    for t, sg, kind, s, i, j in hints.targets:
        if kind == "S" and hints.steps[s] == ([i], [j]):
            pivots[s] = (("t", t), sg)
    for i, j, o, sc in entries:
        if hints.steps and hints.steps[0] == ([i], [j]) and o[0] != "c":
            pivots.setdefault(0, (o, sc))
    out = {}
    for t, sg, kind, s, i, j in hints.targets:
        if t not in inside or count[t] > 1:
            continue
        if kind == "S":
            out[t] = (i, j, sg, None)
        elif kind == "Y":
            out[t] = (i, None, sg, None)
        elif kind == "L" and s in pivots:
            out[t] = (i, j, sg, pivots[s])
    return out


def _scaled(f, a, b):
    """the form f times a value in [a, b] (arrays over the boxes, or numbers)"""
    lo, hi = vscale(f, a, b)
    return VForm(f.ids, lo, hi, f.r * np.maximum(np.abs(a), np.abs(b)))


def _residual(terms, u, ylo, yhi, R, B, m):
    """For w = sum of the terms (row i, column j or None, form): b's perturbation for
    j None, else A's (times -y_j): a bound on |R w| (B, m) and |A^ - A| (B, m, m);
    u(ids): the symbols' magnitudes. With y_j = c_j + t_j, |t_j| <= r_j over the box,
    A's part is -dA c - sum_j t_j dA[:, j]: the centre joins b's symbol by symbol, and
    each column's error reaches R w as one vector times the scalar t_j, so
    |R w| <= sum_k u_k |R g_k| + sum_j r_j (sum_k u_k |R dA_kj|) + |R| (remainders), where
    a perturbation of column j along A's own column keeps to the j-th solution entry
    (coefficient intervals times [y_lo, y_hi] would spread it over all of them)."""
    ymag = np.maximum(np.abs(ylo), np.abs(yhi))
    yc = (ylo + yhi) / 2
    yr = np.maximum(yhi - yc, yc - ylo) * (1 + 1e-15)
    S, dA = np.zeros((B, m)), np.zeros((B, m, m))
    if not terms:
        return S, dA
    ids = np.unique(np.concatenate([f.ids for *_, f in terms]))
    uk = u(ids)
    aR = np.abs(R)

    def through_R(gl, gh, uk):  # sum_k u_k |R g_k| over coefficient intervals [gl, gh] (K, B, m)
        Rw = np.abs(np.einsum("bij,kbj->kbi", R, (gl + gh) / 2)) + np.einsum("bij,kbj->kbi", aR, (gh - gl) / 2)
        return np.einsum("k,kbi->bi", uk, Rw)

    gl, gh = np.zeros((ids.shape[0], B, m)), np.zeros((ids.shape[0], B, m))
    rv = np.zeros((B, m))
    cols: dict = {}
    for i, j, f in terms:
        pos = np.searchsorted(ids, f.ids)
        if j is None:
            gl[pos, :, i] += f.lo
            gh[pos, :, i] += f.hi
            rv[:, i] += f.r
            continue
        lo, hi = vscale(f, yc[:, j], yc[:, j])
        gl[pos, :, i] -= hi
        gh[pos, :, i] -= lo
        rv[:, i] += f.r * ymag[:, j]
        dA[:, i, j] += f.mag(u(f.ids))
        cols.setdefault(j, []).append((i, f))
    S = through_R(gl, gh, uk) + np.einsum("bij,bj->bi", aR, rv)
    for j, col in sorted(cols.items()):  # each over the symbols its column holds
        idj = np.unique(np.concatenate([f.ids for _, f in col]))
        gl, gh = np.zeros((idj.shape[0], B, m)), np.zeros((idj.shape[0], B, m))
        for i, f in col:
            pos = np.searchsorted(idj, f.ids)
            gl[pos, :, i] += f.lo
            gh[pos, :, i] += f.hi
        S += through_R(gl, gh, u(idj)) * yr[:, j][:, None]
    return S, dA


def solve_errors_boxes(run, tape: Tape, vec: BoxRanges, cut: SolveCut, in_error) -> tuple[list, list]:
    """(the whole-program bounds per box, the split bounds: inf for outputs that are not
    solution entries and for boxes where G's or mu's test fails). run(vec, **hooks): the
    error forms' pass of the target (fixerror.output_errors_boxes for fixed point,
    floaterror.float32_forms_per_box), [array (B,) per output]; in_error(k): how far an
    input's rounding moves it (a number or an array over the boxes)."""
    B = vec.n_boxes
    forms = {o: None for o in cut.operands}
    mags = {d: None for i in cut.section for d in tape.instrs[i].dst} | {o[1]: None for o in cut.operands if o[0] == "t"}
    whole = run(vec, forms_out=forms, mags_out=mags)
    R, G, xc, xr = cut.enclosure(vec.in_lo, vec.in_hi)
    m = R.shape[1]
    ylo, yhi = xc - xr, xc + xr
    with np.errstate(all="ignore"):
        # 1. the errors A and b arrive with
        terms = [(i, None, _scaled(forms[o], sc, sc)) for i, o, sc in cut.rhs if o[0] != "c"] \
            + [(i, j, _scaled(forms[o], sc, sc)) for i, j, o, sc in cut.entries if o[0] != "c"]
        S1, dA1 = _residual(terms, forms["u"], ylo, yhi, R, B, m)
        # 2. the solve's own roundings, from A^ and b^ read exactly, over the ranges the
        # computed values take: absorbed as perturbations of A and b where the plan says
        # how, through the error forms elsewhere (the back substitution)
        lo, hi = dict(vec.lo), dict(vec.hi)
        for t, e in mags.items():
            if e is not None:
                lo[t], hi[t] = vec.lo[t] - e, vec.hi[t] + e
        in_lo, in_hi = vec.in_lo.copy(), vec.in_hi.copy()
        for o in cut.operands:
            if o[0] == "in":
                in_lo[:, o[1]] -= in_error(o[1])
                in_hi[:, o[1]] += in_error(o[1])
        wide = dataclasses.replace(vec, lo=lo, hi=hi, in_lo=in_lo, in_hi=in_hi)
        got = dict.fromkeys(cut.absorb)
        own = run(wide, section=cut.section, exact=frozenset(cut.operands), absorb=got)
        terms = []
        for t, (i, j, sg, piv) in cut.absorb.items():
            f = got.get(t)
            if f is None:
                continue
            if piv is None:
                terms.append((i, j, _scaled(f, sg, sg)))
            else:
                plo, phi = wide.operand(piv[0])
                a, b = piv[1] * plo, piv[1] * phi
                terms.append((i, j, _scaled(f, sg * np.minimum(a, b), sg * np.maximum(a, b))))
        S2, dA2 = _residual(terms, got["u"], ylo, yhi, R, B, m)
        # |A^-1 w| <= v = (I - G)^-1 |R w|; A~ = A + dA: A~^-1 w = A^-1 w - A^-1 dA A~^-1 w,
        # so z = |A~^-1 w| <= v + N z with N = |A^-1| |dA| >= 0, and where ||N|| < 1,
        # z <= (I - N)^-1 v componentwise (an output N hardly reaches keeps its own size)
        ok = np.all(np.isfinite(G), axis=(1, 2)) & (G.sum(2).max(1) < 1)
        IG = np.where(ok[:, None, None], np.eye(m) - G, np.eye(m))
        v = np.linalg.solve(IG, (S1 + S2)[:, :, None])[:, :, 0] * (1 + 1e-9)
        Ainv = np.linalg.solve(IG, np.abs(R))  # >= |A^-1| entrywise
        N = np.einsum("bij,bjk->bik", Ainv, dA1 + dA2)
        ok &= np.all(np.isfinite(N), axis=(1, 2)) & (N.sum(2).max(1) < 1 - 1e-6)  # (I - N) well conditioned
        IN = np.where(ok[:, None, None], np.eye(m) - N, np.eye(m))
        v = np.linalg.solve(IN, v[:, :, None])[:, :, 0] * (1 + 1e-9)
        v = np.where(ok[:, None] & np.all(np.isfinite(v), axis=1)[:, None], v, np.inf)
    split = [v[:, cut.outputs[p]] + own[p] if p in cut.outputs else np.full(B, np.inf) for p in range(len(whole))]
    return whole, split
