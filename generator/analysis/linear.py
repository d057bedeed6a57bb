"""Enclosures of a straight-line LU's values over input boxes, from its matrix and
right-hand side alone (range analysis hints).

Range analysis of the elimination's straight-line code loses the correlation between a
Schur complement's terms: on the Stewart platform's projected 7 x 7 system a pivot near
-0.73 is enclosed in [-3, 5.6] over one cell of the envelope. Every value the elimination
computes is an algebraic quantity of the original matrix A and right-hand side b, though:
with K_r, K_c the rows and columns of the steps before,

    S(i, j) = a_ij - A[i, K_c] A[K_r, K_c]^-1 A[K_r, j]     (Schur complement entry)

is the pivot, an entry of a pivot row (upper) and, divided by the pivot, a multiplier
(lower); b's column gives the eliminated right-hand side (y), and x = A^-1 b the solution.
Each is enclosed here by the interval argument for linear systems (param_solve: a
Krawczyk-type test on a preconditioned residual, sound for every matrix and right-hand
side in the entries' affine forms, which domain.cover also uses with plain intervals),
without the straight-line code's cancellations. The entries' forms come from range
analysis of the entries alone (short expressions); the matrix's own values (pivots,
multipliers, pivot rows) are enclosed over halves of each box as well, along the inputs
that move the matrix (moving_dims: up to 7 of them, 2^7 halves).

`LUEnclosure.bind(tape)` maps these quantities to the tape's temps (through the atoms
they compute, after any rewrite of the kernel's outputs), and range analysis intersects
each temp's enclosure with its hint (analysis.ranges.analyse_boxes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Atom, mul, sub
from ..lower.tape import TapeHints
from .intervals import IntervalEvaluator
from .pivots import enclose_bisected

__all__ = ["LUEnclosure", "bind_hints", "pad", "param_solve"]


def pad(c, r):
    """Radius r around centre c grown for the rounding of the point computations that
    gave them (the enclosures here and the cover's Krawczyk test)."""
    return r * (1 + 1e-9) + 1e-13 * (1 + np.abs(c))


def _cr_mul(ac, ar, bc, br):
    """centre, radius of the product of two centre-radius intervals (batched)."""
    return ac * bc, np.abs(ac) * br + ar * np.abs(bc) + ar * br


class LUEnclosure:
    """The hints of one LU factor F (linalg.lu.LUFactor) solving F.A x = b.

    rhs: b (atoms); rewrite: the rewrite applied to the kernel's atoms after the solve
    (atoms -> atoms, e.g. kernels.rewrite.share_reciprocals; atoms are interned, so the
    same rewrite of the factor's atoms gives the tape's atoms); outputs: {kernel output
    position: solution index} for outputs that are x entries."""

    def __init__(self, F, rhs: list[Atom], rewrite=None, outputs: dict[int, int] | None = None):
        self.F = F
        self.rhs = list(rhs)
        self.rewrite = rewrite
        self.outputs = dict(outputs or {})
        plan = self._plan()
        atoms = rewrite([p[0] for p in plan]) if rewrite is not None else [p[0] for p in plan]
        self.plan = [(a, *p[1:]) for a, p in zip(atoms, plan)]

    def _plan(self) -> list[tuple]:
        """(atom, kind, step, i, j): kind "S" (Schur entry S(i, j) before step), "L"
        (multiplier S(i, c) / S(r, c)), "R" (1 / S(r, c)), "Y" (b's row i eliminated
        through step), for the atoms the factor and the forward elimination build."""
        F = self.F
        plan = []
        y = list(self.rhs)
        for s, st in enumerate(F.steps):  # a 2 x 2 block's determinant and reciprocal: bisected intervals
            if len(st.rows) == 2:
                plan += [(st.pivot, "P", s, None, None), (st.recip, "PR", s, None, None)]
        for s, st in enumerate(F.steps):
            one = len(st.rows) == 1
            if one:
                plan.append((st.pivot, "S", s, st.rows[0], st.cols[0]))
                plan.append((st.recip, "R", s, st.rows[0], st.cols[0]))
                for i, ls in st.lower.items():
                    plan.append((ls[0], "L", s, i, st.cols[0]))
            for j, us in st.upper.items():
                for k, u in enumerate(us):
                    plan.append((u, "S", s, st.rows[k], j))
            if one:
                for i, ls in st.lower.items():
                    # solve(): y_i - l_i y_r, the row eliminated through this step
                    y[i] = sub(y[i], mul(ls[0], y[st.rows[0]]))
                    plan.append((y[i], "Y", s + 1, i, None))
            else:
                return plan  # after a 2 x 2 block the solve's intermediate atoms differ: stop here
        return plan

    def keep(self) -> list:
        """Atoms the lowering must leave whole (none: these hints bind to whatever holds them)."""
        return []

    def bind(self, tape):
        """The hint function of `tape` for range analysis: (in_lo, in_hi) ->
        {temp: (lo, hi)}; None when no temp computes a planned quantity."""
        where = {a: [(o[1], sg) for o, sg in found if o[0] == "t"] for a, found in _locate(tape).items()}
        targets = []  # (temp, sign, kind, step, i, j)
        for a, kind, s, i, j in self.plan:
            found = where.get(a, [])
            if not found and a.op == "neg":
                found = [(t, -sg) for t, sg in where.get(a.args[0], [])]
            for t, sg in found:
                targets.append((t, sg, kind, s, i, j))
        for pos, col in self.outputs.items():
            kind, v = tape.outputs[pos]
            if kind == "t":
                targets.append((v, 1.0, "X", None, col, None))
        if not targets:
            return None
        return _Hints(self, tape, targets)


def _locate(tape) -> dict:
    """atom -> [(tape operand, sign)] of the operands holding it: lowering may compute -a
    in a's place (negations folded into their operand)."""
    where: dict = {}
    for t, a in tape.atoms.items():
        where.setdefault(a, []).append((("t", t), 1.0))
        if a.op == "neg":
            where.setdefault(a.args[0], []).append((("t", t), -1.0))
    for k, a in enumerate(tape.inputs):
        where.setdefault(a, []).append((("in", k), 1.0))
    return where


def bind_hints(tape, enclosures) -> None:
    """Set tape.hints from the enclosures (LUEnclosure) of a kernel's solves."""
    hints = [h for h in (e.bind(tape) for e in enclosures) if h is not None]
    if len(hints) == 1:
        tape.hints = hints[0]
    elif hints:
        tape.hints = _Joined(hints)


@dataclass(frozen=True)
class SolveKey:
    """What one solve's hints compute from beyond the tape."""
    n: int  # unknowns
    entries: tuple  # the matrix's structural entries (i, j)
    steps: tuple  # the elimination's pivot steps ((rows), (cols))
    cut: str  # where the tape holds A, b and the solution (_Hints._cut), as text
    targets: tuple  # the temps the hints enclose and how
    split_dims: tuple  # the inputs the matrix's entries read (split over halves)
    tapes: tuple  # the short tapes of the entries (and b)


class _Joined(TapeHints):
    """The hints of a tape with several solves (each temp belongs to one)."""

    def __init__(self, parts: list):
        self.parts = parts

    def __call__(self, in_lo, in_hi):
        out = {}
        for h in self.parts:
            out.update(h(in_lo, in_hi))
        return out

    def key(self) -> tuple:
        return tuple(k for h in self.parts for k in h.key())


class _Hints(TapeHints):
    """The hint function of one tape: enclosures of the planned temps over boxes."""

    def __init__(self, enc: LUEnclosure, tape, targets):
        from ..lower import lower
        F = enc.F
        self.n = F.n
        self.entries = sorted(F.A.entries)
        atoms = [F.A.entries[ij] for ij in self.entries]
        self.sub = lower(atoms + enc.rhs, tape.inputs)  # the entries and b alone: short, tight ranges
        self.sub_A = lower(atoms, tape.inputs)  # the entries alone, for the matrix's own values
        used = sorted({v for ins in self.sub_A.instrs for kind, v in ins.args if kind == "in"}
                      | {v for kind, v in self.sub_A.outputs if kind == "in"})
        self.split_dims = used
        self._entry_atoms = atoms
        self._entries_at = None  # Evaluator of the entries, made on first use (moving_dims)
        self.targets = targets
        self.steps = [(list(st.rows), list(st.cols)) for st in F.steps]
        self.cut = self._cut(enc, tape)
        self.blocks = self._blocks(F, tape)
        self.enclosed: dict = {}  # box bytes -> (R, G, xc, xr) of the boxes __call__ went through

    def _blocks(self, F, tape):
        """(evaluator of the 2 x 2 blocks' determinants over the tape's inputs, the inputs
        they read, {step: column}) for the "P" and "PR" targets; None without such targets."""
        steps = sorted({s for _, _, kind, s, _, _ in self.targets if kind in ("P", "PR")})
        if not steps:
            return None
        ev = IntervalEvaluator([F.steps[s].pivot for s in steps], tape.inputs)
        used = set(ev.order)
        return ev, [k for k, a in enumerate(tape.inputs) if a in used], {s: c for c, s in enumerate(steps)}

    def _block_values(self, in_lo, in_hi, out: dict) -> None:
        """Intersect `out` with the blocks' determinants (and reciprocals) enclosed by interval
        arithmetic, bisected where an enclosure holds 0 (analysis.pivots): the straight-line
        determinant's range analysis loses the correlation of its two products."""
        ev, dims, col = self.blocks
        L, H = enclose_bisected(ev, in_lo, in_hi, dims)
        for t, sg, kind, s, _, _ in self.targets:
            if kind not in ("P", "PR"):
                continue
            lo, hi = L[:, col[s]], H[:, col[s]]
            if kind == "PR":
                c, r = _reciprocal((lo + hi) / 2, (hi - lo) / 2)
                lo, hi = c - pad(c, r), c + pad(c, r)
            lo, hi = (lo, hi) if sg > 0 else (-hi, -lo)
            if t in out:
                lo, hi = np.maximum(out[t][0], lo), np.minimum(out[t][1], hi)
            out[t] = (np.where(np.isfinite(lo), lo, -np.inf), np.where(np.isfinite(hi), hi, np.inf))

    def key(self) -> tuple[SolveKey]:
        """The solve's structure and the short tapes of its entries."""
        tapes = tuple(tuple(f"{i.op} {i.dst} {i.args}" for i in t.instrs) + (repr(t.outputs),)
                      for t in (self.sub, self.sub_A))
        steps = tuple((tuple(r), tuple(c)) for r, c in self.steps)
        return (SolveKey(self.n, tuple(self.entries), steps, repr(self.cut), tuple(self.targets),
                         tuple(self.split_dims), tapes),)

    def _cut(self, enc: LUEnclosure, tape):
        """Where the tape holds the solve's data: ([(i, j, operand, sign)] for A's entries,
        [(i, operand, sign)] for b, {output position: solution index}); None when an
        entry is neither a temp, an input nor a constant (analysis.solve_error)."""
        entries = [enc.F.A.entries[ij] for ij in self.entries]
        atoms = entries + enc.rhs
        if enc.rewrite is not None:
            atoms = enc.rewrite(atoms)
        where = _locate(tape)
        ops = []
        for a in atoms:
            # c * t: lowering folds c into the solve's uses of t (a multiplier e3 / e0 for
            # the entries -2 e3 and -2 e0), so the deepest t the tape holds is the operand
            scale, found = 1.0, None
            while True:
                if a.is_const:
                    found = (("c", scale * a.value), 1.0)
                    break
                if where.get(a):
                    o, sg = where[a][0]
                    found = (o, sg * scale)
                if a.op == "neg":
                    scale, a = -scale, a.args[0]
                elif a.op == "mul" and a.args[0].is_const:
                    scale, a = scale * a.args[0].value, a.args[1]
                else:
                    break
            if found is None:
                return None
            ops.append(found)
        ne = len(entries)
        A = [(i, j, o, sg) for (i, j), (o, sg) in zip(self.entries, ops[:ne])]
        b = [(i, o, sg) for i, (o, sg) in enumerate(ops[ne:])]
        outs = {p: c for p, c in enc.outputs.items() if tape.outputs[p][0] == "t"}
        return A, b, outs

    def solve_enclosure(self, in_lo, in_hi):
        """Per box: R = mid(A)^-1, G >= |I - R A| entrywise over the box (over its halves
        when range analysis went through them, with that R), and the solution's centre and
        radius (param_solve): (R, G, xc, xr). Boxes range analysis went through were
        enclosed then (`enclosed`); the others are analysed here."""
        keys = [in_lo[b].tobytes() + in_hi[b].tobytes() for b in range(in_lo.shape[0])]
        if keys and all(k in self.enclosed for k in keys):
            got = [self.enclosed[k] for k in keys]
            return tuple(np.stack([g[i] for g in got]) for i in range(4))
        parts = [self._enclose(self._forms(in_lo[j:j + CHUNK], in_hi[j:j + CHUNK]))
                 for j in range(0, in_lo.shape[0], CHUNK)]
        return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))

    @staticmethod
    def _enclose(P):
        R, _ = _inverse(P.A0)
        return (R, _neumann(P, R), *param_solve(P.A0, P.AK, P.EA, P.b0, P.bK, P.Eb))

    def __call__(self, in_lo, in_hi) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        chunks = []
        for j in range(0, in_lo.shape[0], CHUNK):
            P = self._forms(in_lo[j:j + CHUNK], in_hi[j:j + CHUNK])
            chunks.append((self._chunk_values(P, False), self._enclose(P)))
        out = _joined([c[0] for c in chunks])
        R, G, xc, xr = (np.concatenate([c[1][k] for c in chunks]) for k in range(4))
        # the matrix's own values (pivots, multipliers, pivot rows) over sub-boxes as well: their
        # enclosures tighten quadratically with the width, and the entries are short to analyse
        dims = self.moving_dims(in_lo, in_hi)
        if dims:
            k = 1 << len(dims)
            codes = np.arange(k)
            sub_lo = np.repeat(in_lo, k, axis=0)
            sub_hi = np.repeat(in_hi, k, axis=0)
            for b, d in enumerate(dims):
                mid = np.repeat((in_lo[:, d] + in_hi[:, d]) / 2, k)
                upper = np.tile((codes >> b) & 1, in_lo.shape[0]).astype(bool)
                sub_lo[:, d] = np.where(upper, mid, sub_lo[:, d])
                sub_hi[:, d] = np.where(upper, sub_hi[:, d], mid)
            # and G >= |I - R A| over them, R = mid(A)^-1 of the whole box, for solve_error's
            # Neumann bound: with R fixed the linear part stays the box's, the nonlinear
            # remainders shrink (Stewart envelope cells: row sums 0.68 -> 0.52)
            R_sub = np.repeat(R, k, axis=0)
            got = [self._chunk(sub_lo[j:j + CHUNK], sub_hi[j:j + CHUNK], matrix_only=True, R=R_sub[j:j + CHUNK])
                   for j in range(0, sub_lo.shape[0], CHUNK)]
            parts = _joined([g[0] for g in got])
            for t, (lo, hi) in parts.items():
                lo, hi = lo.reshape(-1, k).min(1), hi.reshape(-1, k).max(1)  # the union over a box's halves
                blo, bhi = out[t]
                out[t] = (np.maximum(blo, lo), np.minimum(bhi, hi))  # both sound
            Gh = np.concatenate([g[1] for g in got]).reshape(in_lo.shape[0], k, self.n, self.n).max(1)
            better = Gh.sum(2).max(1) < G.sum(2).max(1)
            G = np.where(better[:, None, None], Gh, G)
        if self.blocks is not None:
            self._block_values(in_lo, in_hi, out)
        for b in range(in_lo.shape[0]):  # for solve_enclosure (solve_error), which asks for these boxes again
            self.enclosed[in_lo[b].tobytes() + in_hi[b].tobytes()] = (R[b], G[b], xc[b], xr[b])
        return out

    def moving_dims(self, in_lo, in_hi) -> list[int]:
        """The inputs to halve the boxes along for the matrix's own values: of those its
        entries read, the ones that move it (drive, largest over the boxes) at least MOVING
        x as much as the one that moves it most, at most SPLIT_DIMS. Halves along an input
        that hardly moves A (the Stewart platform's e0: 1% where the others move it 8 to
        16%) double the cost for nothing."""
        dims = np.array(self.split_dims, dtype=np.int64)
        if dims.size <= 1 or not in_lo.shape[0]:
            return list(dims[:SPLIT_DIMS])
        move = self.drive(in_lo, in_hi, dims).max(axis=0)
        if not np.all(np.isfinite(move)) or not move.max() > 0:
            return list(dims[:SPLIT_DIMS])
        ranked = [k for k in np.argsort(-move, kind="stable") if move[k] >= MOVING * move.max()][:SPLIT_DIMS]
        return sorted(int(dims[k]) for k in ranked)

    def drive(self, in_lo, in_hi, dims) -> np.ndarray:
        """(B, len(dims)): how much A moves along each input over each box: the largest row
        sum of |R (A(c + h e_d) - A(c - h e_d))| / 2, A at the box's centre c and the middles
        of its faces (h its half-width), R = A(c)^-1 (preconditioned as solve_error's G is)."""
        from ..ir import Evaluator
        if self._entries_at is None:
            self._entries_at = Evaluator(self._entry_atoms, self.sub_A.inputs)
        B, D, n = in_lo.shape[0], len(dims), self.n
        c, h = (in_lo + in_hi) / 2, (in_hi - in_lo) / 2
        X = np.repeat(c[:, None, :], 1 + 2 * D, axis=1)
        for k, d in enumerate(dims):
            X[:, 1 + 2 * k, d] += h[:, d]
            X[:, 2 + 2 * k, d] -= h[:, d]
        V = np.asarray(self._entries_at(X.reshape(-1, in_lo.shape[1])), dtype=float).reshape(B * (1 + 2 * D), -1)
        A = np.zeros((V.shape[0], n, n))
        for e, (i, j) in enumerate(self.entries):
            A[:, i, j] = V[:, e]
        A = A.reshape(B, 1 + 2 * D, n, n)
        with np.errstate(all="ignore"):
            R = np.linalg.pinv(A[:, 0])
            return np.abs(np.einsum("bij,bdjk->bdik", R, (A[:, 1::2] - A[:, 2::2]) / 2)).sum(3).max(2)

    def _forms(self, in_lo, in_hi, matrix_only: bool = False) -> "_Param":
        """The entries of A and b as affine forms over the boxes: A(e) = A0 + sum_k Ak e_k
        + [-EA, EA], e in [-1, 1]^T, keeping the noise symbols that two or more of them
        share (their correlation is what the enclosures below exploit)."""
        from .ranges import analyse_boxes
        tape = self.sub_A if matrix_only else self.sub
        keep = {v for kind, v in tape.outputs if kind == "t"}
        br = analyse_boxes(tape, in_lo, in_hi, strict=False, keep=keep)
        B = in_lo.shape[0]
        forms = []
        for kind, v in tape.outputs:
            if kind == "t":
                ids, A, c, err = br.affine[v]
                bad = ~(np.isfinite(br.lo[v]) & np.isfinite(br.hi[v]))
                forms.append((ids, A, c, np.where(bad, np.inf, err)))
            elif kind == "in":
                c = (in_lo[:, v] + in_hi[:, v]) / 2
                r = np.maximum(in_hi[:, v] - c, c - in_lo[:, v]) * (1 + 1e-15)
                forms.append((np.array([v]), r[None, :], c, np.zeros(B)))
            else:
                forms.append((np.zeros(0, dtype=np.int64), np.zeros((0, B)), np.full(B, float(v)), np.zeros(B)))
        counts = {}
        for ids, *_ in forms:
            for x in ids.tolist():
                counts[x] = counts.get(x, 0) + 1
        shared = np.array(sorted(x for x, c in counts.items() if c > 1), dtype=np.int64)
        T = shared.shape[0]
        m = len(forms)
        C0, CK, E = np.zeros((B, m)), np.zeros((B, T, m)), np.zeros((B, m))
        for o, (ids, A, c, err) in enumerate(forms):
            C0[:, o], E[:, o] = c, err
            if ids.shape[0]:
                pos = np.searchsorted(shared, ids)
                inside = (pos < T) & (shared[np.minimum(pos, max(T - 1, 0))] == ids) if T else np.zeros(ids.shape, bool)
                if inside.any():
                    CK[:, pos[inside], o] = A[inside].T
                if (~inside).any():
                    E[:, o] += np.abs(A[~inside]).sum(0)
        n = self.n
        ne = len(self.entries)
        P = _Param(B, T, n)
        for e, (i, j) in enumerate(self.entries):
            P.A0[:, i, j], P.AK[:, :, i, j], P.EA[:, i, j] = C0[:, e], CK[:, :, e], E[:, e]
        P.b0, P.bK, P.Eb = C0[:, ne:], CK[:, :, ne:], E[:, ne:]
        return P

    def _chunk(self, in_lo, in_hi, matrix_only: bool = False, R=None):
        """The planned temps' enclosures over the boxes; with R (one per box), also
        (those, G >= |I - R A| over each box)."""
        P = self._forms(in_lo, in_hi, matrix_only)
        if R is not None:
            return self._chunk_values(P, matrix_only), _neumann(P, R)
        return self._chunk_values(P, matrix_only)

    def _chunk_values(self, P, matrix_only: bool):
        """The planned temps' enclosures {temp: (lo, hi)} over the boxes of P."""
        schur = _Schur(P, self.steps)
        out = {}
        with np.errstate(all="ignore"):
            x = None
            for t, sg, kind, s, i, j in self.targets:
                if (matrix_only and kind in ("X", "Y")) or kind in ("P", "PR"):
                    continue  # P, PR: _block_values
                if kind == "X":
                    if x is None:
                        x = param_solve(P.A0, P.AK, P.EA, P.b0, P.bK, P.Eb)
                    c, r = x[0][:, i], x[1][:, i]
                elif kind == "Y":
                    c, r = schur(s, i, None)
                else:
                    c, r = schur(s, i, j)
                    if kind in ("R", "L"):
                        rows, cols = self.steps[s]
                        rc, rr = _reciprocal(*schur(s, rows[0], cols[0]))
                        if kind == "R":
                            c, r = rc, rr
                        else:
                            c, r = c * rc, np.abs(c) * rr + r * np.abs(rc) + r * rr
                        r = pad(c, r)
                r = np.where(np.isfinite(r) & np.isfinite(c), r, np.inf)
                c = np.where(np.isfinite(r), sg * c, 0.0)
                out[t] = (c - r, c + r)
        return out


def _reciprocal(pc, pr):
    """Centre and radius of 1 / [pc - pr, pc + pr] (unbounded where it holds zero)."""
    plo, phi = pc - pr, pc + pr
    nz = (plo > 0) | (phi < 0)
    rlo, rhi = np.where(nz, 1 / phi, -np.inf), np.where(nz, 1 / plo, np.inf)
    return (rlo + rhi) / 2, (rhi - rlo) / 2


class _Schur:
    """Centre and radius of the Schur complement's entries before each step, over the
    boxes of P; memoised, as entries share the eliminated block's solves and rows."""

    def __init__(self, P, steps):
        self.P = P
        self.memo: dict = {}
        self.eliminated = [([r for rows, _ in steps[:s] for r in rows], [c for _, cols in steps[:s] for c in cols])
                           for s in range(len(steps) + 1)]

    def __call__(self, s, i, j):
        """centre, radius of S(i, j) before step s (j None: b's row i)."""
        P, memo = self.P, self.memo
        key = (s, i, j)
        if key not in memo:
            a0, aK, ea = (P.b0[:, i], P.bK[:, :, i], P.Eb[:, i]) if j is None else \
                (P.A0[:, i, j], P.AK[:, :, i, j], P.EA[:, i, j])
            if not self.eliminated[s][0]:
                c, r = a0, np.abs(aK).sum(1) + ea
            else:
                zc, zr = self._solved(s, j)
                # S = (a - A[i, K] z~)(e) - A[i, K](e) (z - z~): the first part affine in e
                rowc, rowK, rowE, hull = self._row(s, i)
                c = a0 - np.einsum("bk,bk->b", rowc, zc)
                lin = aK - np.einsum("btk,bk->bt", rowK, zc)
                r = np.abs(lin).sum(1) + ea + np.einsum("bk,bk->b", rowE, np.abs(zc)) \
                    + np.einsum("bk,bk->b", hull, zr)
            memo[key] = (c, pad(c, r))
        return memo[key]

    def _solved(self, s, j):
        """z (centre, radius): the rows and columns eliminated before step s solved for
        column j (None: b)."""
        P, memo = self.P, self.memo
        Kr, Kc = self.eliminated[s]
        zkey = (s, j)
        if zkey not in memo:
            if ("block", s) not in memo:  # the eliminated rows and columns: one per step, for every j
                sub = (P.A0[:, Kr][:, :, Kc], P.AK[:, :, Kr][:, :, :, Kc], P.EA[:, Kr][:, :, Kc])
                memo["block", s] = (sub, param_matrix(*sub))
            sub, mat = memo["block", s]
            rhs = (P.b0[:, Kr], P.bK[:, :, Kr], P.Eb[:, Kr]) if j is None else \
                (P.A0[:, Kr, j], P.AK[:, :, Kr, j], P.EA[:, Kr, j])
            memo[zkey] = param_solve(*sub, *rhs, matrix=mat)
        return memo[zkey]

    def _row(self, s, i):
        """Row i's eliminated part before step s (centre, affine, error, hull), for every j."""
        P, memo = self.P, self.memo
        Kc = self.eliminated[s][1]
        if ("row", s, i) not in memo:
            rowc, rowK, rowE = P.A0[:, i, Kc], P.AK[:, :, i, Kc], P.EA[:, i, Kc]
            memo["row", s, i] = rowc, rowK, rowE, np.abs(rowc) + np.abs(rowK).sum(1) + rowE
        return memo["row", s, i]


def _inverse(A0):
    """R = A0^-1 per box (the identity's where A0 is not finite), and where it is finite."""
    m = A0.shape[1]
    ok = np.all(np.isfinite(A0), axis=(1, 2))
    return np.linalg.pinv(np.where(ok[:, None, None], A0, np.eye(m))), ok


def _neumann(P, R):
    """G >= |I - R A(e)| entrywise for every A(e) of P's boxes (inf where not finite)."""
    m = R.shape[1]
    ok = np.all(np.isfinite(P.A0), axis=(1, 2)) & np.all(np.isfinite(P.EA), axis=(1, 2)) \
        & np.all(np.isfinite(P.AK), axis=(1, 2, 3))
    with np.errstate(all="ignore"):
        G = np.abs(np.eye(m) - R @ P.A0) + np.abs(R[:, None] @ P.AK).sum(1) + np.abs(R) @ P.EA
    return np.where(ok[:, None, None] & np.isfinite(G), G * (1 + 1e-9) + 1e-15, np.inf)


CHUNK = 256  # boxes per pass of the hints (their affine coefficients are boxes x terms x n x n)
SPLIT_DIMS = 7  # the matrix's values are also enclosed over the halves of each box along at most 7 inputs,
MOVING = 0.25  # ... those that move it at least a quarter as much as the one that moves it most (moving_dims)


def _joined(parts: list[dict]) -> dict:
    """The hints of consecutive chunks of boxes, one array per temp."""
    return {t: (np.concatenate([p[t][0] for p in parts]), np.concatenate([p[t][1] for p in parts]))
            for t in parts[0]}


class _Param:
    """A(e) = A0 + sum_t AK[:, t] e_t + [-EA, EA], b(e) likewise, per box."""

    def __init__(self, B, T, n):
        self.A0, self.AK, self.EA = np.zeros((B, n, n)), np.zeros((B, T, n, n)), np.zeros((B, n, n))
        self.b0 = self.bK = self.Eb = None


def param_solve(A0, AK, EA, b0, bK, Eb, matrix=None):
    """Centre and radius (batched over boxes) of boxes holding the solution of
    A(e) z = b(e) for every e in [-1, 1]^T (A0, AK: (B, m, m), (B, T, m, m); b0, bK:
    (B, m) or (B, m, 1)..., EA, Eb the lumped radii): the Krawczyk-type argument with the
    preconditioner R = A0^-1 applied to the affine parts before taking magnitudes, so
    entries that move together (one pose drives them all) do not add up as independent
    intervals. Radius inf where ||I - R A(e)|| < 1 is not shown. `matrix`: what
    param_matrix gave for this A (one per matrix, for many right-hand sides)."""
    bad, A0, R, aR, G, g = param_matrix(A0, AK, EA) if matrix is None else matrix
    bad = bad | ~(np.all(np.isfinite(b0), axis=1) & np.all(np.isfinite(Eb), axis=1))
    b0s = np.where(bad[:, None], 0.0, b0)
    z = np.einsum("bij,bj->bi", R, b0s)
    res0 = b0s - np.einsum("bij,bj->bi", A0, z)
    lin = bK - np.einsum("btij,bj->bti", AK, z)  # (B, T, m): the residual's linear part
    s = np.abs(np.einsum("bij,bj->bi", R, res0)) + np.abs(np.einsum("bij,btj->bti", R, lin)).sum(1) \
        + np.einsum("bij,bj->bi", aR, Eb + np.einsum("bij,bj->bi", EA, np.abs(z)))
    ok = (g < 1) & ~bad & np.all(np.isfinite(s), axis=1)
    r = np.where(ok, s.max(axis=1) / np.where(ok, 1 - g, 1), np.inf)[:, None] * np.ones(A0.shape[1])
    for _ in range(20):  # each iterate s + G r of an enclosure radius is one too, and smaller
        r = np.minimum(r, s + np.einsum("bij,bj->bi", G, r))
    r = pad(z, r)
    return z, np.where(ok[:, None], r, np.inf)


def param_matrix(A0, AK, EA):
    """param_solve's part that depends on the matrix alone: (not finite, A0 with the
    identity there, R = A0^-1, |R|, G >= |I - R A(e)|, G's largest row sum)."""
    m = A0.shape[1]
    bad = ~(np.all(np.isfinite(A0), axis=(1, 2)) & np.all(np.isfinite(EA), axis=(1, 2)))
    A0 = np.where(bad[:, None, None], np.eye(m), A0)
    try:
        R = np.linalg.inv(A0)
    except np.linalg.LinAlgError:
        R = np.linalg.pinv(A0)
    R = np.where(np.isfinite(R), R, 0.0)
    aR = np.abs(R)
    G = np.abs(np.eye(m) - np.einsum("bij,bjk->bik", R, A0)) + np.abs(np.einsum("bij,btjk->btik", R, AK)).sum(1) \
        + np.einsum("bij,bjk->bik", aR, EA)
    return bad, A0, R, aR, G, G.sum(axis=2).max(axis=1)
