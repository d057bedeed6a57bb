"""A disk cache of results that cost a command more than the rest of its work and are
determined by their inputs: the envelope cover's enclosures and the check of its closed
forms (kernels.explicit_cover), the driven motion (reference.solvers.Kinematics.motion),
a kernel's fixed-point or float32 analysis (pipeline._analyse).

Entries are keyed by a SHA-256 of everything the result depends on, the digest of
mbforge's own source included (a changed analysis never reads an old entry), and
stored as .npz (no pickle) written to a temporary file and renamed, so a killed run
leaves no half-written entry. A missing, unreadable or malformed entry is recomputed;
a cache folder that cannot be written is skipped: the cache changes how long a
command takes, never its output.

Where: $MBFORGE_CACHE_DIR if set ("off": no cache), else $XDG_CACHE_HOME/mbforge or
~/.cache/mbforge (the compiled jinja templates live there too).

Size: entries of older mbforge versions are never read again, so the folder would only
grow. Past $MBFORGE_CACHE_MAX_MB (default 1024) of entries, a store removes the least
recently used ones (a read touches its entry) until three quarters are left."""
from __future__ import annotations

import hashlib
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from .errors import CLIError


def cache_root() -> Path | None:
    _limit()  # a bad limit is refused on the first use, not only when an entry is stored
    env = os.environ.get("MBFORGE_CACHE_DIR")
    if env:
        return None if env == "off" else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mbforge"


@lru_cache(maxsize=None)
def code_digest() -> str:
    """SHA-256 of the package's Python sources (a few ms)."""
    h = hashlib.sha256()
    root = Path(__file__).parent
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def key(*parts) -> str:
    """A key from strings, bytes and numpy arrays (their dtype, shape and bytes)."""
    h = hashlib.sha256(code_digest().encode())
    for p in parts:
        if isinstance(p, np.ndarray):
            p = f"{p.dtype.str}{p.shape}".encode() + np.ascontiguousarray(p).tobytes()
        elif isinstance(p, str):
            p = p.encode()
        h.update(len(p).to_bytes(8, "little") + p)
    return h.hexdigest()


def atoms(values) -> np.ndarray:
    """A key part for expressions: their atoms' structural keys (ir.atom: a 61-bit hash of
    the whole expression, symbols by name, deterministic across runs), so a key is taken
    without walking or printing the graphs. Two different expressions share a key with
    probability about 2^-61."""
    return np.array([a.key for a in values], dtype=np.uint64)


def _path(kind: str, k: str) -> Path | None:
    root = cache_root()
    return None if root is None else root / kind / f"{k}.npz"


def load(kind: str, k: str) -> dict | None:
    """The arrays stored under (kind, k), or None."""
    path = _path(kind, k)
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {name: z[name] for name in z.files}
    except Exception:  # a damaged entry is only a miss
        return None
    try:
        os.utime(path)  # recently used: the last to go (_prune)
    except OSError:
        pass
    return out


def store(kind: str, k: str, **arrays) -> None:
    path = _path(kind, k)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(path.parent.parent)
    except OSError:
        pass  # a read-only or full cache folder: the command goes on uncached


def _limit() -> int:
    """Bytes the entries may take: $MBFORGE_CACHE_MAX_MB (a whole number >= 1), else 1 GiB."""
    env = os.environ.get("MBFORGE_CACHE_MAX_MB", "").strip()
    if env and (not env.isdigit() or int(env) < 1):
        raise CLIError(f"MBFORGE_CACHE_MAX_MB: expected a whole number of megabytes, 1 or more; got {env!r}")
    return (int(env) if env else 1024) << 20


def _prune(root: Path) -> None:
    """Remove the least recently used entries while the cache is over its limit."""
    entries = []
    for p in root.glob("*/*.npz"):
        try:
            st = p.stat()
        except OSError:
            continue
        entries.append((st.st_mtime, st.st_size, p))
    total, limit = sum(e[1] for e in entries), _limit()
    if total <= limit:
        return
    for _, size, p in sorted(entries, key=lambda e: (e[0], str(e[2]))):
        if total <= limit * 3 // 4:
            break
        try:
            p.unlink()
            total -= size
        except OSError:
            pass
