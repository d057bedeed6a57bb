"""Finished pieces of an analysis (analysis.parallel) in the disk cache (mbforge.cache), so
that a run interrupted and started again runs only the pieces it lacks.

A piece's key is what its result is computed from: the tape (its instructions, outputs,
feedback and hints: tape_digest), the kind of pass and the piece's own data (its boxes,
their ranges, the fixed-point formats). The key leaves out mbforge's version on purpose:
the entry records it, so that an entry of another mbforge is named in one warning line and
computed again rather than silently missed. The result is stored pickled, and unpickled
only once cache.load has checked the entry's HMAC (only this user's mbforge wrote it).
"""
from __future__ import annotations

import hashlib
import pickle
from dataclasses import fields

import numpy as np

from .. import cache
from ..lower.tape import TapeHints

KIND = "analysis-piece"
FIELDS = ("data", "version")
MISS = object()  # load's answer when there is no usable entry (None is a result)


def hints_key(hints: TapeHints | None) -> str:
    """What a tape's hints (analysis.linear) compute from beyond the tape itself (the
    solves' matrices, pivots and where the tape holds them), every field of each solve's
    SolveKey by name: a part of the key of an analysis or of a piece kept in the disk cache,
    so that no entry serves other hints."""
    if hints is None:
        return "none"
    return "\n".join("; ".join(f"{f.name}={getattr(k, f.name)!r}" for f in fields(k)) for k in hints.key())


def tape_digest(tape) -> str:
    """SHA-256 of what an analysis reads from a tape."""
    lines = [f"{i.op} {i.dst} {i.args}" for i in tape.instrs]
    lines += [f"inputs {len(tape.inputs)}", f"outputs {tape.outputs}", f"feedback {tape.feedback}",
              f"hints {hints_key(tape.hints)}"]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def ranges_parts(vec) -> list:
    """Key parts of a BoxRanges: every array it holds, by temp."""
    parts = [vec.in_lo, vec.in_hi, vec.fail, vec.fail_dim, vec.fail_range, str(vec.strict),
             "none" if vec.span is None else np.asarray(vec.span)]
    for t in sorted(vec.lo):
        parts += [str(t), vec.lo[t], vec.hi[t]]
    return parts


def key(kind: str, tape, *parts) -> str:
    """A piece's key: kind of pass, tape_digest and the piece's data (strings, arrays)."""
    return cache.digest(kind, tape_digest(tape), *parts)  # no source digest: see the module docstring


def load(k: str):
    """The result stored under k, else MISS (none, or one of another mbforge: a warning)."""
    hit = cache.load(KIND, k, FIELDS)
    if hit is None:
        return MISS
    if str(hit["version"]) != cache.version():
        cache.warn(KIND, k, f"was written by mbforge {hit['version']}, not this {cache.version()}")
        return MISS
    return pickle.loads(hit["data"].tobytes())


def store(k: str, value) -> None:
    data = np.frombuffer(pickle.dumps(value, pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
    cache.store(KIND, k, data=data, version=np.array(cache.version()))
