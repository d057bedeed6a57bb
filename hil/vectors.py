"""The one source of test vectors for a generated kernel, and its raw number format.

    X = draw(m, kernel_dir, n, seed)        # real values [n + motion, n_in]
    R = to_raw(m, X, "inputs")              # what a device computes on
    Xq = from_raw(m, R, "inputs")           # those values back as float64 (exact)

`draw` gives n vectors uniformly within the kernel's domain (a box picked at random
from the domain file's union of boxes, when the manifest names one, else the declared
input ranges), then the manifest's motion vectors, if any. The same (manifest, n, seed)
gives the same vectors in every process: the HIL harness, the RTL benches and the
tests all draw here.

Raw format per real kind: double -> float64, float -> float32 (round to nearest),
int32 -> fixed point with the manifest's frac_bits per element (value = raw / 2**f;
to_raw rounds to nearest and saturates to the int32 range). from_raw is exact.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mbforge.hil import protocol as P
from mbforge.manifest import Manifest

NP_DTYPE = {k: np.dtype(v) for k, v in P.REAL_DTYPES.items()}


class VectorError(ValueError):
    """The kernel's domain or motion file cannot give vectors."""


def frac_bits(m: Manifest, kind: str) -> np.ndarray:
    """Fractional bits per flat element of the manifest's `kind` ("inputs"/"outputs");
    0 where a group declares none (float kernels)."""
    bits: list[int] = []
    for g in getattr(m, kind):
        bits.extend(g.frac_bits if g.frac_bits is not None else [0] * g.size)
    return np.array(bits, dtype=np.int64)


def to_raw(m: Manifest, X, kind: str = "inputs") -> np.ndarray:
    """Real values -> the kernel's raw type. Fixed point: round to nearest, saturate."""
    X = np.asarray(X, dtype=np.float64)
    if m.real != "int32":
        return X.astype(NP_DTYPE[m.real])
    scaled = np.rint(X * np.exp2(frac_bits(m, kind)))
    return np.clip(scaled, -2.0**31, 2.0**31 - 1).astype(np.int32)


def from_raw(m: Manifest, R, kind: str = "outputs") -> np.ndarray:
    """The kernel's raw values -> float64 (exact for all three kinds)."""
    R = np.asarray(R)
    if m.real != "int32":
        return R.astype(np.float64)
    return R.astype(np.float64) / np.exp2(frac_bits(m, kind))


def _companion(kernel_dir, name: str, key: str, what: str) -> np.ndarray:
    """The array `key` of a JSON file beside the manifest (the domain or the motion)."""
    path = Path(kernel_dir) / name
    try:
        return np.array(json.loads(path.read_text())[key], dtype=np.float64)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise VectorError(f"{what} file {path}: {e}") from None


def draw(m: Manifest, kernel_dir: str | Path, n: int, seed: int = 0, motion: bool = True) -> np.ndarray:
    """n random vectors inside the kernel's domain (its boxes, when the manifest names a
    domain file, else the declared ranges), then the motion vectors if any (and asked)."""
    rng = np.random.default_rng(seed)
    if m.domain:
        boxes = _companion(kernel_dir, m.domain, "boxes", "domain")
        if boxes.ndim != 3 or boxes.shape[1:] != (m.n_in, 2):
            raise VectorError(f"domain file {Path(kernel_dir) / m.domain}: boxes of shape {boxes.shape[1:]}, "
                              f"kernel takes {m.n_in} inputs")
        pick = boxes[rng.integers(0, len(boxes), n)]
        lo, hi = pick[:, :, 0], pick[:, :, 1]
    else:
        ranges = np.array(m.input_ranges(), dtype=np.float64).reshape(-1, 2)
        lo, hi = ranges[:, 0], ranges[:, 1]
    X = lo + (hi - lo) * rng.random((n, m.n_in))
    if motion and m.motion:
        mv = _companion(kernel_dir, m.motion, "vectors", "motion")
        if mv.size and mv.reshape(len(mv), -1).shape[1] != m.n_in:
            raise VectorError(f"motion file {Path(kernel_dir) / m.motion}: vectors of {mv.shape[-1]} values, "
                              f"kernel takes {m.n_in}")
        X = np.vstack([X, mv.reshape(-1, m.n_in)]) if mv.size else X
    return X


def draw_raw(m: Manifest, kernel_dir: str | Path, n: int, seed: int = 0, motion: bool = True) -> np.ndarray:
    """`draw`, converted to the kernel's raw type."""
    return to_raw(m, draw(m, kernel_dir, n, seed, motion), "inputs")
