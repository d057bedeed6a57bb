"""The double-precision reference: numpy evaluation of atoms over a batch of inputs.

This is the living definition of what an atom means; every generated kernel (double C,
float32, fixed point, RTL) is compared with it.
"""
from __future__ import annotations

import numpy as np

from .atom import Atom, ExpressionError
from .graph import flatten, topo
from .ops import OPS


def evaluation_order(outputs, inputs, what: str = "cannot evaluate: no value") -> list[Atom]:
    """The atoms `outputs` (flat) need, arguments first; an ExpressionError names the
    symbols among them that are not `inputs` ("<what> for symbol(s) ...")."""
    order = topo(outputs)
    known = set(inputs)
    unknown = sorted(a.value.name for a in order if a.op == "sym" and a not in known)
    if unknown:
        raise ExpressionError(f"{what} for symbol(s) {', '.join(unknown)}")
    return order


class Evaluator:
    """Evaluate `outputs` (atoms) as functions of `inputs` (symbols) over batches."""

    def __init__(self, outputs, inputs: list[Atom]):
        self.outputs = flatten(outputs)
        self.inputs = list(inputs)
        self.order = evaluation_order(self.outputs, self.inputs)
        # what to drop after each step (an argument at its last use, not an output), so a batch
        # holds the live values only: the Stewart's linearized dynamics has 320,000 atoms
        keep = set(self.outputs) | set(self.inputs)
        last = {}
        for i, a in enumerate(self.order):
            for x in a.args:
                last[x] = i
        self._free: dict[int, list[Atom]] = {}
        for x, i in last.items():
            if x not in keep:
                self._free.setdefault(i, []).append(x)

    def __call__(self, X) -> np.ndarray:
        """X: [N, n_in] (or [n_in]); returns [N, n_out] (or [n_out]) float64."""
        X = np.asarray(X, dtype=np.float64)
        single = X.ndim == 1
        if single:
            X = X[None, :]
        if X.shape[1] != len(self.inputs):
            raise ExpressionError(f"evaluation got {X.shape[1]} input columns, expected {len(self.inputs)}")
        n = X.shape[0]
        val: dict[Atom, np.ndarray] = {s: X[:, k] for k, s in enumerate(self.inputs)}
        with np.errstate(all="ignore"):  # NaN/inf are reported by the caller, not warned
            free = self._free
            for i, a in enumerate(self.order):
                op = a.op
                if op == "sym":
                    continue
                if op == "const":
                    val[a] = np.full(n, a.value)
                elif OPS[op].valued:  # pow: the exponent is the atom's value
                    val[a] = OPS[op].np(val[a.args[0]], a.value)
                else:
                    val[a] = OPS[op].np(*(val[x] for x in a.args))
                for x in free.get(i, ()):
                    del val[x]
        Y = np.empty((n, len(self.outputs)))
        for k, a in enumerate(self.outputs):
            Y[:, k] = val[a]
        return Y[0] if single else Y


def evaluate(outputs, values: dict[Atom, float]):
    """Evaluate atoms (or nested lists) at one point given {symbol: value}."""
    from .graph import rebuild

    syms = list(values)
    ev = Evaluator(flatten(outputs), syms)
    y = ev(np.array([values[s] for s in syms], dtype=float))
    it = iter(y.tolist())
    return rebuild(outputs, lambda _a: next(it))
