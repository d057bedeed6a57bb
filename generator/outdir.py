"""The one place a command writes, replaces or removes files in the folder it was given.

`OutDir(path, option)` is the folder a command names (`--out DIR`); `write_files` lays a
plan {relative name: bytes} into it. Invariants, for every command that writes a folder
(generate, firmware, hdl, simulate, demo):
- a name (from a plan, or read back from an earlier generation's record) is relative and
  normalised: no absolute path, no `..` component, no backslash, no NUL; anything else is
  refused (`OutDirError`) before the disk is touched;
- nothing is written through a symbolic link: every folder between the root and a file is
  a real folder inside the root (a symlinked subfolder is refused), and a file is written
  to a staging file inside the root and moved over its name (`os.replace` replaces a
  symlink itself, never the file it points to);
- a file is removed only if the folder's own record (the previous generation's) lists it,
  the new plan does not, and its name passes the same checks; a symlink is removed as a
  link, never followed;
- a folder that is not empty and holds no record of this command's kind is refused, unless
  `force` (then same-named files are replaced and the others left alone);
- all or nothing: the changed files are staged in `.mbforge-staging-*` inside the root and
  moved in only when all are written, the record last; a staging folder left by a killed
  command is removed by the next write, and `interrupted(root)` lets a reader say why a
  folder's files disagree with its record. Unchanged files are not rewritten (PlatformIO's
  incremental build and file times stay as they were).
"""
from __future__ import annotations

import json

import os
import posixpath
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterable

STAGING_PREFIX = ".mbforge-staging-"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class OutDirError(Exception):
    """An output folder or a name in it that mbforge will not write (one line)."""


def safe_name(name: object, where: str = "") -> str:
    """`name` normalised, if it is a relative path that stays inside its folder."""
    what = f"{where}: " if where else ""
    if not isinstance(name, str) or not name:
        raise OutDirError(f"{what}file name {name!r} is not a non-empty string")
    if "\x00" in name or "\\" in name:
        raise OutDirError(f"{what}file name {name!r} holds a NUL or a backslash")
    if posixpath.isabs(name):
        raise OutDirError(f"{what}file name {name!r} is absolute; only names inside the folder are allowed")
    norm = posixpath.normpath(name)
    if norm in (".", "..") or norm.startswith("../"):
        raise OutDirError(f"{what}file name {name!r} leaves the folder")
    return norm


def read_path(root: str | Path, name: object, where: str = "") -> Path:
    """root/name for reading a name a record gave: safe_name, and, symlinks followed, still
    inside root (a kernel folder cannot make a consumer read /etc/shadow)."""
    path = Path(root) / safe_name(name, where)
    real, top = path.resolve(), Path(root).resolve()
    if real != top and top not in real.parents:
        raise OutDirError(f"{where + ': ' if where else ''}{path} leads outside {root} (a symbolic link)")
    return path


def interrupted(root: str | Path) -> str | None:
    """The staging folder an interrupted write left in root, if any (its name)."""
    try:
        left = sorted(p.name for p in Path(root).iterdir() if p.name.startswith(STAGING_PREFIX))
    except OSError:
        return None
    return left[0] if left else None


class OutDir:
    """The folder named by `option` (e.g. "--out"): every path below it checked."""

    def __init__(self, path: str | Path, option: str = "--out"):
        path = Path(path)
        if str(path) == "":
            raise OutDirError(f"{option} is empty; name a folder")
        self.path = path
        self.where = f"{option} {path}"
        for parent in [path, *path.parents]:
            if parent.exists() and not parent.is_dir():
                raise OutDirError(f"{self.where}: {parent} is a file, not a folder")

    # -- paths -------------------------------------------------------------------------
    def target(self, name: str) -> Path:
        """root/name, refusing a name that leaves the folder, a symlinked folder on the
        way and a folder where a file must go."""
        norm = safe_name(name, self.where)
        parts = norm.split("/")
        cur = self.path
        for part in parts[:-1]:
            cur = cur / part
            if cur.is_symlink():
                raise OutDirError(f"{self.where}: {cur} is a symbolic link; mbforge writes only inside the folder")
            if cur.exists() and not cur.is_dir():
                raise OutDirError(f"{self.where}: {cur} is a file; {norm} needs it to be a folder")
        final = cur / parts[-1]
        if final.is_dir() and not final.is_symlink():
            raise OutDirError(f"{self.where}: {final} is a folder; mbforge needs that name for a file")
        return final

    def sub(self, name: str) -> "OutDir":
        """The folder root/name (hdl's rtl/, demo's firmware/) as an OutDir of its own,
        checked as `target` checks a file's folders: inside root, no symlink on the way."""
        norm = safe_name(name, self.where)
        self.target(f"{norm}/-")  # the checks of every folder down to root/name
        return OutDir(self.path / norm, self.where.split(" ", 1)[0])

    def check_writable(self) -> None:
        """Refuse now, not after the run, a folder that cannot be made or written into: the
        missing folders are made and a probe file written, then all of it removed again."""
        made = []
        try:
            for p in [*reversed(self.path.parents), self.path]:
                if not p.is_dir():
                    p.mkdir()
                    made.append(p)
            fd, probe = tempfile.mkstemp(prefix=STAGING_PREFIX, dir=self.path)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise OutDirError(f"{self.where}: cannot write {e.filename or self.path}: {e.strerror}") from None
        finally:
            for p in reversed(made):
                try:
                    p.rmdir()
                except OSError:
                    pass

    def _same(self, path: Path, data: bytes) -> bool:
        return path.is_file() and not path.is_symlink() and path.read_bytes() == data

    # -- ownership ---------------------------------------------------------------------
    def claim(self, owns: Callable[[Path], list[str] | None], what: str, force: bool = False) -> list[str]:
        """The names the folder's record lists, when the folder is this command's own
        earlier output (`owns(root)` returns them, None when the folder is not its own);
        [] for a missing or empty folder; OutDirError for any other non-empty folder
        unless force."""
        if not self.path.exists():
            return []
        entries = [p for p in self.path.iterdir() if not p.name.startswith(STAGING_PREFIX)]
        if not entries:
            return []
        old = owns(self.path)
        if old is not None:
            return old
        if force:
            return []
        shown = ", ".join(sorted(p.name for p in entries)[:3]) + (", ..." if len(entries) > 3 else "")
        raise OutDirError(f"{self.where}: the folder is not empty ({shown}) and is not {what}; "
                          "name a new or empty folder, or give --force to write into it")

    # -- writing -----------------------------------------------------------------------
    def write_files(self, files: dict[str, bytes], *, record: str | None = None,
                    old: Iterable[str] = ()) -> Path:
        """Write `files` all or nothing (the `record` name, if given, moved in last), then
        remove the names of `old` (the earlier record's list) that `files` lacks."""
        targets = {name: self.target(name) for name in files}
        stale = []
        for name in old:
            norm = safe_name(name, f"{self.where} (its record)")
            if norm not in targets and norm != record:
                stale.append(self.target(norm))
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._sweep()
            changed = [n for n in files if not self._same(targets[n], files[n])]
            if record in changed:  # the record last: a folder with a record has its files
                changed.remove(record)
                changed.append(record)
            staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.path))
            try:
                staged = {}
                for i, name in enumerate(changed):
                    staged[name] = staging / str(i)
                    staged[name].write_bytes(files[name])
                for name in changed:  # same file system: each move is atomic
                    targets[name].parent.mkdir(parents=True, exist_ok=True)
                    os.replace(staged[name], targets[name])
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            for path in stale:
                if path.is_symlink() or path.is_file():
                    path.unlink()
        except OSError as e:
            raise OutDirError(f"{self.where}: cannot write {e.filename or self.path}: {e.strerror}") from None
        return self.path

    def _sweep(self) -> None:
        """Remove staging folders a killed write left (a symlink of that name: the link)."""
        for p in self.path.iterdir():
            if p.name.startswith(STAGING_PREFIX):
                if p.is_symlink() or not p.is_dir():
                    p.unlink()
                else:
                    shutil.rmtree(p)


def check_file(path: str | Path | None, option: str) -> None:
    """Refuse now, before the run that makes it, a file `write_file` could not write: a
    folder of that name, a missing folder, a folder that takes no new file (a probe file
    is made there and removed)."""
    if path is None:
        return
    path = Path(path)
    _file_place(path, option)
    try:
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=".mbforge-", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutDirError(f"cannot write {option} {path}: {e.strerror}") from None


def _file_place(path: Path, option: str) -> None:
    if path.is_dir() and not path.is_symlink():
        raise OutDirError(f"{option} {path} is a folder; name a file")
    if not path.parent.is_dir():
        raise OutDirError(f"cannot write {option} {path}: folder {path.parent} does not exist")


def write_file(path: str | Path, data: bytes, option: str) -> Path:
    """One file a command was told to write (`--json FILE`, `--html FILE`): written to a
    staging file beside it and moved over the name, so a symlink there is replaced, not
    followed, and an interrupted write leaves the old file whole."""
    path = Path(path)
    parent = path.parent
    _file_place(path, option)
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".mbforge-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o666 & ~_umask())  # as open() would have made it, not mkstemp's 0600
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        raise OutDirError(f"cannot write {option} {path}: {e.strerror}") from None
    return path


def read_record(root: Path, name: str) -> dict | None:
    """The JSON object a folder's own record `name` holds; None when there is none (missing,
    a symlink, not a file, not JSON, not an object): the folder is then not ours."""
    path = Path(root) / name
    if path.is_symlink() or not path.is_file():
        return None
    try:
        d = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return d if isinstance(d, dict) else None
