"""A disk cache of results that cost a command more than the rest of its work and are
determined by their inputs: the envelope cover's enclosures and the check of its closed
forms (domain.explicit_cover), the driven motion (reference.solvers.Kinematics.motion),
a kernel's fixed-point or float32 analysis (pipeline._analyse) and its pieces
(analysis.piececache), the compiled templates (backends.render).

Entries are keyed by a SHA-256 of everything the result depends on, the digest of
mbforge's own source included (a changed analysis never reads an old entry), and
stored as .npz (no pickle, but for the finished pieces of analysis.piececache: a pickle
read only once the entry's HMAC below is checked) written to a temporary file and renamed,
so a killed run leaves no half-written entry. A cache folder that cannot be written is skipped: the
cache changes how long a command takes, never its output.

What an entry is for: besides its arrays, each entry holds its kind, its full key and an
HMAC-SHA256 over kind, key and every array (name, dtype, shape, bytes), keyed with a
secret of the user's (32 random bytes in $XDG_CONFIG_HOME/mbforge/cache-key, else
~/.config/mbforge/cache-key, made on first use, mode 0600; a key file that is a symlink,
not the user's own or readable by others is refused, and the cache is then not used).
`load` returns an entry only when all of that matches what is asked; anything else (a
damaged file, another key's entry copied over this one, an entry edited and saved again
as valid .npz, another kind, a missing field) is a miss, recomputed, with one warning
line on stderr naming the entry.
What this stops: whoever can write the cache folder but cannot read the key file (another
local user of a shared or group-writable cache, a CI cache restored from an untrusted
job on a fresh runner) cannot make an entry that is read: editing, swapping or forging
one needs the secret. What it does not stop: a process running as the same user (it can
read the key file, or run code directly); and a cache shared between machines or fresh
CI runners has a key file each, so entries made elsewhere are misses (recomputed) unless
the key file is shared too, with the trust that goes with it.

Where: $MBFORGE_CACHE_DIR if set ("off": no cache), else $XDG_CACHE_HOME/mbforge or
~/.cache/mbforge (the host libraries of mbforge.verify.hostlib live there too).

Size: entries of older mbforge versions are never read again, so the folder would only
grow. Past $MBFORGE_CACHE_MAX_MB (default 1024) of entries, a store removes the least
recently used ones (a read touches its entry) until three quarters are left."""
from __future__ import annotations

import hashlib
import hmac
import os
import stat
import sys
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


@lru_cache(maxsize=None)
def version() -> str:
    """This mbforge: its release and the digest of its source (an editable install changes
    the second alone). Analysis workers and cached pieces are compared by it."""
    from . import __version__

    return f"{__version__} (source {code_digest()[:12]})"


def key(*parts) -> str:
    """A key from strings, bytes and numpy arrays (their dtype, shape and bytes), and the
    digest of mbforge's source."""
    return digest(*parts, seed=code_digest().encode())


def digest(*parts, seed: bytes = b"") -> str:
    """SHA-256 of `seed` then each part (strings, bytes, numpy arrays: dtype, shape and
    bytes), each prefixed by its length so that no two lists of parts collide."""
    h = hashlib.sha256(seed)
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


META = ("__kind__", "__key__", "__mac__")  # the fields an entry holds besides its arrays
SECRET_BYTES = 32


def _path(kind: str, k: str) -> Path | None:
    root = cache_root()
    return None if root is None else root / kind / f"{k}.npz"


def warn(kind: str, k: str, why: str) -> None:
    """One line on stderr: the entry (kind, k) is not used, and why."""
    print(f"mbforge: warning: cache entry {_path(kind, k)} {why}: not used, computed again", file=sys.stderr)


def load(kind: str, k: str, fields=None) -> dict | None:
    """The arrays stored under (kind, k), or None: missing, or not exactly what a store
    of this user's wrote for (kind, k) (see the module doc; a warning names it). fields: the
    names the caller reads; an entry with other arrays is not used either."""
    path = _path(kind, k)
    if path is None or not path.is_file():
        return None
    secret = _secret()
    if secret is None:
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {name: z[name] for name in z.files}
    except Exception:  # noqa: BLE001 - whatever numpy raises on a damaged file, it is only a miss
        warn(kind, k, "cannot be read")
        return None
    why = _mismatch(out, kind, k, secret, fields)
    if why:
        warn(kind, k, why)
        return None
    try:
        os.utime(path)  # recently used: the last to go (_prune)
    except OSError:
        pass
    return out


def _mismatch(entry: dict, kind: str, k: str, secret: bytes, fields) -> str | None:
    """What is wrong with a read entry (popping its META fields), or None."""
    meta = [entry.pop(name, None) for name in META]
    if any(m is None or m.shape != () or m.dtype.kind != "U" for m in meta):
        return "has no kind, key and digest of this mbforge"
    if str(meta[0]) != kind:
        return f"is of kind {str(meta[0])!r}, not {kind!r}"
    if str(meta[1]) != k:
        return "is another key's entry"
    if not hmac.compare_digest(str(meta[2]), _mac(secret, kind, k, entry)):
        return "does not match its digest (edited after it was stored)"
    if fields is not None and set(entry) != set(fields):
        return f"holds {sorted(entry)}, expected {sorted(fields)}"
    return None


def _mac(secret: bytes, kind: str, k: str, arrays: dict) -> str:
    h = hmac.new(secret, digestmod=hashlib.sha256)
    parts = [kind.encode(), k.encode()]
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        parts += [name.encode(), f"{a.dtype.str}{a.shape}".encode(), np.ascontiguousarray(a).tobytes()]
    for p in parts:
        h.update(len(p).to_bytes(8, "little") + p)
    return h.hexdigest()


def mac(kind: str, k: str, data: bytes) -> str | None:
    """The digest an entry of (kind, k) holding data gets, for a cache user that keeps its
    own files (verify.hostlib's libraries); None without a cache key."""
    secret = _secret()
    return None if secret is None else _mac(secret, kind, k, {"data": np.frombuffer(data, dtype=np.uint8)})


def store(kind: str, k: str, **arrays) -> None:
    path = _path(kind, k)
    secret = _secret() if path is not None else None
    if secret is None:
        return
    if any(name in META for name in arrays):
        raise ValueError(f"cache entry arrays may not be named {META}")
    meta = dict(zip(META, map(np.array, (kind, k, _mac(secret, kind, k, arrays)))))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays, **meta)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(path.parent.parent)
    except OSError:
        pass  # a read-only or full cache folder: the command goes on uncached


def secret_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "mbforge" / "cache-key"


def _secret() -> bytes | None:
    """The user's cache key (made on first use), or None: the cache is not used."""
    return _secret_at(str(secret_path()))


@lru_cache(maxsize=None)
def _secret_at(path: str) -> bytes | None:
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    except _Untrusted as e:
        print(f"mbforge: warning: the cache is not used: {e}", file=sys.stderr)
        return None
    try:  # a new key, linked into place: never replaces one another process made meanwhile
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".cache-key.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(SECRET_BYTES))
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
        return _read_secret(path)
    except _Untrusted as e:
        print(f"mbforge: warning: the cache is not used: {e}", file=sys.stderr)
    except OSError:
        pass  # no writable config folder: the command goes on uncached
    return None


class _Untrusted(Exception):
    pass


def _read_secret(path: str) -> bytes:
    """The key file's bytes if it is a regular file of the user's, private to them."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        if os.path.islink(path):
            raise _Untrusted(f"the cache key file {path} is a symlink") from None
        raise e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise _Untrusted(f"the cache key file {path} is not a file private to you (owner uid {st.st_uid}, "
                             f"mode {stat.S_IMODE(st.st_mode):04o}; expected uid {os.getuid()}, mode 0600)")
        data = f.read(SECRET_BYTES + 1)
    if len(data) != SECRET_BYTES:
        raise _Untrusted(f"the cache key file {path} does not hold {SECRET_BYTES} bytes")
    return data


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
