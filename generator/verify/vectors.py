"""The one source of test vectors for a generated kernel, and its raw number format.

    X = draw(m, kernel_dir, n, seed)        # real values [n + motion, n_in]
    R = to_raw(m, X, "inputs")              # what a device computes on
    Xq = from_raw(m, R, "inputs")           # those values back as float64 (exact)
    rob = robustness(m, kernel_dir)         # labelled vectors with their expected statuses

`draw` gives n vectors uniformly within the kernel's domain (a box picked at random
from the domain file's union of boxes, when the manifest names one, else the declared
input ranges), then the manifest's motion vectors, if any, each moved (by less than one
unit of the kernel's format) to a value the kernel represents exactly inside its
envelope, so the device and the double reference, given the same rounded input, both
answer status 0. The same (manifest, n, seed) gives the same vectors in every process:
the HIL harness, the RTL benches and the tests all draw here.

`robustness` gives the labelled robustness set (module constants OUT_OF_ENVELOPE,
OFF_MANIFOLD): per input, a vector just beyond its envelope on each side (and a NaN on
float targets), expected status 2; consistent vectors (the motion's) with one
coordinate of the first input group moved inside the envelope, expected 0 or 1 and no
error bound (the bound covers the domain's consistent states, not these).

Raw format per real kind: double -> float64, float -> float32 (round to nearest),
int32 -> fixed point with the manifest's frac_bits per element (value = raw / 2**f,
rounded to nearest). to_raw never clips: a value the format cannot hold (beyond the
int32 words or the float32 range, or NaN in fixed point) raises VectorError naming the
element and the value; a value outside the envelope but inside the format is converted
as is (the kernel answers status 2). from_raw is exact.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mbforge.manifest import Manifest
from mbforge.reals import REALS

NP_DTYPE = {k: np.dtype(r.dtype) for k, r in REALS.items()}


class VectorError(ValueError):
    """The kernel's domain or motion file cannot give vectors."""


def frac_bits(m: Manifest, kind: str) -> np.ndarray:
    """Fractional bits per flat element of the manifest's `kind` ("inputs"/"outputs");
    0 where a group declares none (float kernels)."""
    bits: list[int] = []
    for g in getattr(m, kind):
        bits.extend(g.frac_bits if g.frac_bits is not None else [0] * g.size)
    return np.array(bits, dtype=np.int64)


def _refuse(m: Manifest, X: np.ndarray, bad: np.ndarray, kind: str, what: str) -> None:
    """VectorError naming the first bad element of X [N, n] (bad: its mask)."""
    r, j = (int(v) for v in np.argwhere(bad)[0])
    raise VectorError(f"{kind[:-1]} {m.flat_names(kind)[j]} = {float(X[r, j])!r} (vector {r}) {what}"
                      + (f"; {int(bad.sum())} such values" if bad.sum() > 1 else ""))


def to_raw(m: Manifest, X, kind: str = "inputs") -> np.ndarray:
    """Real values -> the kernel's raw type, rounded to nearest. VectorError, naming the
    element and the value, for one the format cannot hold (never clipped)."""
    X = np.asarray(X, dtype=np.float64)
    if not m.real_kind.fixed:
        with np.errstate(over="ignore"):
            R = X.astype(NP_DTYPE[m.real])
        bad = np.isinf(R) & np.isfinite(X)  # never in float64
        if bad.any():
            _refuse(m, np.atleast_2d(X), np.atleast_2d(bad), kind, f"is beyond the {R.dtype} range")
        return R
    f = frac_bits(m, kind)
    with np.errstate(invalid="ignore"):
        scaled = np.rint(X * np.exp2(f))
        bad = ~((scaled >= -2.0**31) & (scaled <= 2.0**31 - 1))  # NaN too
    if bad.any():
        X2, b2 = np.atleast_2d(X), np.atleast_2d(bad)
        j = int(np.argwhere(b2)[0][1])
        lo, hi = -2.0**31 / 2.0**f[j], (2.0**31 - 1) / 2.0**f[j]
        _refuse(m, X2, b2, kind, f"is outside its fixed-point format (frac_bits {int(f[j])}: "
                                 f"[{lo:.6g}, {hi:.6g}])")
    return scaled.astype(np.int32)


def from_raw(m: Manifest, R, kind: str = "outputs") -> np.ndarray:
    """The kernel's raw values -> float64 (exact for all three kinds)."""
    R = np.asarray(R)
    if not m.real_kind.fixed:
        return R.astype(np.float64)
    return R.astype(np.float64) / np.exp2(frac_bits(m, kind))


def _companion(kernel_dir, name: str, key: str, what: str) -> np.ndarray:
    """The array `key` of a JSON file beside the manifest (the domain or the motion)."""
    path = Path(kernel_dir) / name
    try:
        return np.array(json.loads(path.read_text())[key], dtype=np.float64)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise VectorError(f"{what} file {path}: {e}") from None


def envelope(m: Manifest, kernel_dir: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) per flat input: the range the kernel checks its inputs against (status 2
    outside): the manifest's `envelope`; for an older manifest without one, what the
    generator took (Kernel.input_envelope): the domain's hull, else the declared ranges."""
    if all(g.envelope is not None for g in m.inputs):
        r = np.array([e for g in m.inputs for e in g.envelope], dtype=np.float64).reshape(-1, 2)
    elif m.domain and kernel_dir is not None:
        b = _boxes(m, kernel_dir)
        r = np.stack([b[:, :, 0].min(axis=0), b[:, :, 1].max(axis=0)], axis=1)
    else:
        r = np.array(m.input_ranges(), dtype=np.float64).reshape(-1, 2)
    return r[:, 0], r[:, 1]


def _checked(m: Manifest) -> bool:
    """Whether the kernel checks its inputs against the envelope (status code 2)."""
    return "2" in m.status_codes


def _device_bounds(m: Manifest, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The envelope as the kernel compares it, in real values: rounded outward to its
    precision, as the generator writes the check (backends.fixed.c.envelope_words: words
    floor(lo 2^f), ceil(hi 2^f) within int32; backends.c: float32 rounded outward). Written
    again here: mbforge.verify does not import the backends."""
    if m.real_kind.fixed:
        q = np.exp2(frac_bits(m, "inputs").astype(np.float64))
        return (np.maximum(np.floor(lo * q), -2.0**31) / q, np.minimum(np.ceil(hi * q), 2.0**31 - 1) / q)
    t = NP_DTYPE[m.real].type  # float64: lo and hi unchanged
    a, b = lo.astype(t), hi.astype(t)
    a = np.where(a.astype(np.float64) > lo, np.nextafter(a, t(-np.inf)), a)
    b = np.where(b.astype(np.float64) < hi, np.nextafter(b, t(np.inf)), b)
    return a.astype(np.float64), b.astype(np.float64)


def _inward(m: Manifest, X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """X rounded to the kernel's format, each value then moved (by less than one unit of
    it) to the nearest representable value inside [lo, hi] where rounding took it out."""
    Xq = from_raw(m, to_raw(m, X, "inputs"), "inputs")
    if m.real_kind.fixed:
        q = np.exp2(-frac_bits(m, "inputs").astype(np.float64))
        a, b = np.ceil(lo / q) * q, np.floor(hi / q) * q
    else:  # float64: lo and hi unchanged
        t = NP_DTYPE[m.real].type
        a, b = (np.array([t(v) for v in lo], dtype=np.float64), np.array([t(v) for v in hi], dtype=np.float64))
        a = np.where(a < lo, np.nextafter(a.astype(t), t(np.inf)).astype(np.float64), a)
        b = np.where(b > hi, np.nextafter(b.astype(t), t(-np.inf)).astype(np.float64), b)
    ok = a <= b  # an envelope narrower than one unit: leave the value rounded to nearest
    return np.where(ok, np.clip(Xq, np.where(ok, a, -np.inf), np.where(ok, b, np.inf)), Xq)


def for_reference(m: Manifest, kernel_dir, X_used: np.ndarray) -> np.ndarray:
    """The inputs a device saw (drawn in the domain, as float64), for the double
    reference: unchanged but where an input's envelope is narrower than one unit of the
    device's format (a constant coordinate): no device value lies inside it, the device
    accepts its nearest (bounds rounded outward) and the reference would refuse it, so it
    gets the envelope's value, less than one unit away."""
    if not _checked(m):
        return X_used
    lo, hi = envelope(m, kernel_dir)
    return np.clip(X_used, lo, hi)


def _boxes(m: Manifest, kernel_dir) -> np.ndarray:
    boxes = _companion(kernel_dir, m.domain, "boxes", "domain")
    if boxes.ndim != 3 or boxes.shape[1:] != (m.n_in, 2):
        raise VectorError(f"domain file {Path(kernel_dir) / m.domain}: boxes of shape {boxes.shape[1:]}, "
                          f"kernel takes {m.n_in} inputs")
    return boxes


def draw(m: Manifest, kernel_dir: str | Path, n: int, seed: int = 0, motion: bool = True) -> np.ndarray:
    """n random vectors, then the motion vectors if any (and asked). The random ones are
    consistent states of the operating envelope when the manifest records one (drawn from
    the motion file, which then holds states sampled uniformly over the envelope: a box of
    the cover is mostly off the constraint manifold), else uniform in the kernel's domain
    (its boxes, when the manifest names a domain file, else the declared ranges)."""
    rng = np.random.default_rng(seed)
    pool = _motion(m, kernel_dir) if (m.envelope and m.motion) else None
    if pool is not None and len(pool):
        X = pool[rng.integers(0, len(pool), n)]
        if motion:
            X = np.vstack([X, pool])
        return _inside(m, kernel_dir, X)
    if m.domain:
        boxes = _boxes(m, kernel_dir)
        pick = boxes[rng.integers(0, len(boxes), n)]
        lo, hi = pick[:, :, 0], pick[:, :, 1]
    else:
        ranges = np.array(m.input_ranges(), dtype=np.float64).reshape(-1, 2)
        lo, hi = ranges[:, 0], ranges[:, 1]
    X = lo + (hi - lo) * rng.random((n, m.n_in))
    if motion and m.motion:
        mv = _motion(m, kernel_dir)
        X = np.vstack([X, mv]) if mv.size else X
    return _inside(m, kernel_dir, X)


def _inside(m: Manifest, kernel_dir, X: np.ndarray) -> np.ndarray:
    """Rows X moved inside the envelope the kernel checks (by less than one unit of its
    format, _inward), as every drawn vector is; X itself when the kernel checks nothing."""
    return _inward(m, X, *envelope(m, kernel_dir)) if _checked(m) else X


def _motion(m: Manifest, kernel_dir) -> np.ndarray:
    mv = _companion(kernel_dir, m.motion, "vectors", "motion")
    if mv.size and mv.reshape(len(mv), -1).shape[1] != m.n_in:
        raise VectorError(f"motion file {Path(kernel_dir) / m.motion}: vectors of {mv.shape[-1]} values, "
                          f"kernel takes {m.n_in}")
    return mv.reshape(-1, m.n_in) if mv.size else mv.reshape(0, m.n_in)


OUT_OF_ENVELOPE = "out of envelope"
OFF_MANIFOLD = "off-manifold: not covered by the bound"
OFF_MANIFOLD_SHIFT = 0.01  # of the envelope's width, towards its middle
OFF_MANIFOLD_BASES = 2  # consistent vectors perturbed (spread over the motion)


@dataclass
class Robustness:
    """Labelled vectors beyond the domain: X [k, n_in] real values (the kernel's format
    holds them), label and allowed statuses per vector, and what was left out and why."""
    X: np.ndarray
    labels: list[str]
    expected: list[tuple[int, ...]]
    notes: list[str]


ROBUST_INPUTS = 8  # inputs probed beyond their envelope (and coordinates shifted off the manifold), spread


def robustness(m: Manifest, kernel_dir: str | Path, max_inputs: int = ROBUST_INPUTS) -> Robustness:
    """The robustness set (module docstring); deterministic. With more than `max_inputs`
    inputs (the Stewart equations take 197), that many, evenly spread, are probed: each
    check is the same compare, and an RTL simulation pays per vector."""
    names = m.flat_names("inputs")
    lo, hi = envelope(m, kernel_dir)
    consistent = _motion(m, kernel_dir) if m.motion else np.zeros((0, m.n_in))
    if len(consistent):
        consistent = _inward(m, consistent, lo, hi)
    rows, labels, expected, notes = [], [], [], []
    if not _checked(m):
        notes.append("the kernel does not check its inputs (no status 2): no out-of-envelope vectors")
    else:
        base = consistent[0] if len(consistent) else _inward(m, ((lo + hi) / 2)[None, :], lo, hi)[0]
        dlo, dhi = _device_bounds(m, lo, hi)
        probe = np.unique(np.linspace(0, m.n_in - 1, min(max_inputs, m.n_in)).astype(int))
        if len(probe) < m.n_in:
            notes.append(f"{len(probe)} of {m.n_in} inputs probed beyond their envelope (evenly spread)")
        for k in probe:
            for side, v in (("below", _beyond(m, dlo[k], k, -1)), ("above", _beyond(m, dhi[k], k, +1))):
                if v is None:
                    notes.append(f"{names[k]} {side} its envelope: not representable in the kernel's format")
                    continue
                x = base.copy()
                x[k] = v
                rows.append(x)
                labels.append(f"{OUT_OF_ENVELOPE}: {names[k]} {side} [{lo[k]:.6g}, {hi[k]:.6g}]")
                expected.append((2,))
            if not m.real_kind.fixed:  # a NaN input: a word holds none
                x = base.copy()
                x[k] = np.nan
                rows.append(x)
                labels.append(f"{OUT_OF_ENVELOPE}: {names[k]} NaN")
                expected.append((2,))
    if not len(consistent):
        notes.append("no consistent states known (no motion file): no off-manifold vectors")
    else:
        first = m.inputs[0]
        picks = np.unique(np.linspace(0, len(consistent) - 1, min(OFF_MANIFOLD_BASES, len(consistent))).astype(int))
        coords = [k for k in range(first.offset, first.offset + first.size) if hi[k] > lo[k]]
        if len(coords) > max_inputs:  # spread over the coordinates, as the probes above
            coords = [coords[j] for j in np.unique(np.linspace(0, len(coords) - 1, max_inputs).astype(int))]
            notes.append(f"off-manifold shifts of {len(coords)} of the {first.name} coordinates (evenly spread)")
        for i in picks:
            for k in coords:
                x = consistent[i].copy()
                mid = (lo[k] + hi[k]) / 2
                x[k] += OFF_MANIFOLD_SHIFT * (hi[k] - lo[k]) * (1.0 if x[k] <= mid else -1.0)
                rows.append(_inward(m, x[None, :], lo, hi)[0])
                labels.append(OFF_MANIFOLD)
                expected.append((0, 1))
    X = np.array(rows, dtype=np.float64).reshape(-1, m.n_in)
    return Robustness(X, labels, expected, notes)


def _beyond(m: Manifest, bound: float, k: int, sign: int) -> float | None:
    """A value two units of the kernel's format beyond its compared bound `bound` of
    input k (so that the device, the host model and the double reference all see it
    outside); None if the format holds no such value."""
    if m.real_kind.fixed:
        f = int(frac_bits(m, "inputs")[k])
        w = round(bound * 2.0 ** f) + 2 * sign
        return w / 2.0 ** f if -2**31 <= w <= 2**31 - 1 else None
    dt = NP_DTYPE[m.real].type
    v = dt(bound)
    for _ in range(2):
        v = np.nextafter(v, dt(np.inf * sign))
    return float(v) if np.isfinite(v) else None


def draw_raw(m: Manifest, kernel_dir: str | Path, n: int, seed: int = 0, motion: bool = True) -> np.ndarray:
    """`draw`, converted to the kernel's raw type."""
    return to_raw(m, draw(m, kernel_dir, n, seed, motion), "inputs")


def distinct(R) -> int:
    """How many distinct rows R [N, n] holds (raw vectors: what the device computes on)."""
    R = np.asarray(R)
    return int(len(np.unique(R.reshape(len(R), -1), axis=0))) if len(R) else 0


def pool_size(m: Manifest, kernel_dir: str | Path) -> int:
    """The distinct raw vectors `draw` picks its random ones from on a kernel with an
    operating envelope (its motion file's states); 0 when it draws over the domain."""
    if not (m.envelope and m.motion):
        return 0
    pool = _motion(m, kernel_dir)
    return distinct(states_raw(m, kernel_dir, pool)) if len(pool) else 0


STATES_CHUNK = 256  # consistent states sampled per seeded chunk (fresh_raw)


def states_raw(m: Manifest, kernel_dir: str | Path, X) -> np.ndarray:
    """Real input rows (consistent states) as the kernel's raw vectors, each moved inside
    the envelope as `draw` moves its own (by less than one unit of the format)."""
    return to_raw(m, _inside(m, kernel_dir, np.asarray(X, dtype=np.float64).reshape(-1, m.n_in)), "inputs")


def fresh_raw(m: Manifest, kernel_dir: str | Path, sample, n: int, seed: int = 0, rounds: int = 64) -> np.ndarray:
    """n distinct raw vectors of consistent states: sample(count, seed) -> real rows
    [<= count, n_in] (domain.cover.envelope_states: the sampler of the motion file's
    states) is called on chunks of STATES_CHUNK, chunk k seeded from (seed, k), each row
    moved inside the envelope as `draw` does and rounded to the kernel's format, repeats
    dropped: the vectors for n are the first n of those for any larger n (same seed).
    Fewer than n when `rounds` chunks give no more."""
    rows, seen = [], set()
    for k in range(rounds):
        if len(rows) >= n:
            break
        s = int(np.random.SeedSequence([seed, k]).generate_state(1)[0])
        X = np.asarray(sample(STATES_CHUNK, s), dtype=np.float64).reshape(-1, m.n_in)
        if not len(X):
            continue
        for r in states_raw(m, kernel_dir, X):
            key = r.tobytes()
            if key not in seen:
                seen.add(key)
                rows.append(r)
    return np.array(rows[:n], dtype=to_raw(m, np.zeros((1, m.n_in))).dtype).reshape(-1, m.n_in)
