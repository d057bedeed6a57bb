"""The run database of `mbforge hil`: every result kept as it arrives (SQLite, stdlib).

    db = RunDB.create(path, options)      # a new run; RunDB.open(path) to resume one
    db.put(idx, rows, inputs, outputs, status, work, ticks, attempts)   # committed at once
    done = db.done()                      # bool [n]: rows already answered
    report_dict = harness.load_run(path)  # the report again, from the database alone

Tables:
  run      key TEXT PRIMARY KEY, value TEXT (JSON): the options (kernel and reference
           folders, vectors, seed, tol, host_model), both manifests' digests, the
           device's HELLO, the work calibration, the link statistics summed over the
           sessions, and the state ("running", "interrupted", "complete").
  vectors  idx INTEGER PRIMARY KEY (the row of the run's input matrix), inputs BLOB and
           outputs BLOB (raw little-endian values of the device's type), status, work,
           ticks (the device's raw counts), attempts (sends of the frame that carried it).

Invariants: a new run that ends before its first answer (a wrong port, a silent or
another device, a stop signal) leaves no database (RunDB.discard), so the same command
can run again; a row is written once, in the same transaction as its frame's other rows,
after its reply passed every check, so an interrupted run holds only whole answers and
a resumed run never evaluates a stored row again (INSERT fails on a second answer). The
inputs of a resumed run are drawn again from the stored options and must equal the
stored rows' bit for bit, else the run is refused.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

SCHEMA = 1


class RunDBError(RuntimeError):
    """The run database is missing, unreadable or belongs to another run."""


class RunDB:
    def __init__(self, conn: sqlite3.Connection, path: str):
        self.conn, self.path = conn, path

    @classmethod
    def create(cls, path: str | Path, options: dict) -> "RunDB":
        path = str(path)
        if path != ":memory:":
            p = Path(path)
            if p.exists():
                raise RunDBError(f"run database {p} already exists: resume it with --resume {p}, "
                                 f"or choose another --run")
            if not p.parent.is_dir():
                raise RunDBError(f"cannot keep the run in {p}: folder {p.parent} does not exist")
        try:
            conn = sqlite3.connect(path)
            conn.executescript(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                "CREATE TABLE run (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                "CREATE TABLE vectors (idx INTEGER PRIMARY KEY, inputs BLOB NOT NULL, outputs BLOB NOT NULL,"
                " status INTEGER NOT NULL, work INTEGER NOT NULL, ticks INTEGER NOT NULL,"
                " attempts INTEGER NOT NULL);")
        except sqlite3.Error as e:
            raise RunDBError(f"cannot create run database {path}: {e}") from None
        db = cls(conn, path)
        db.set(schema=SCHEMA, options=options, state="running", link={}, sessions=0)
        return db

    @classmethod
    def open(cls, path: str | Path) -> "RunDB":
        p = Path(path)
        if not p.is_file():
            raise RunDBError(f"no run database at {p}")
        try:
            conn = sqlite3.connect(str(p))
            conn.execute("PRAGMA journal_mode=WAL")
            db = cls(conn, str(p))
            if db.get("schema") != SCHEMA:
                raise RunDBError(f"{p} is not an mbforge hil run (schema {db.get('schema')!r})")
        except sqlite3.Error as e:
            raise RunDBError(f"{p} is not a readable run database: {e}") from None
        return db

    def close(self) -> None:
        self.conn.close()

    def discard(self) -> None:
        """Close and delete the database (with its WAL files): a new run that ended before
        its first answer holds nothing to resume, and would block the same command."""
        self.conn.close()
        if self.path != ":memory:":
            for suffix in ("", "-wal", "-shm"):
                Path(self.path + suffix).unlink(missing_ok=True)

    def get(self, key: str, default=None):
        row = self.conn.execute("SELECT value FROM run WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set(self, **values) -> None:
        with self.conn:
            self.conn.executemany("INSERT OR REPLACE INTO run (key, value) VALUES (?, ?)",
                                  [(k, json.dumps(v, sort_keys=True)) for k, v in values.items()])

    def put(self, idx, rows, inputs, outputs, status, work, ticks, attempts) -> None:
        """Store the answers of `rows` (indices into the arrays given) as the run's vectors
        idx (one per row) in one transaction."""
        with self.conn:
            self.conn.executemany(
                "INSERT INTO vectors (idx, inputs, outputs, status, work, ticks, attempts) VALUES (?,?,?,?,?,?,?)",
                [(int(i), inputs[r].tobytes(), outputs[r].tobytes(), int(status[r]), int(work[r]),
                  int(ticks[r]), int(attempts[r])) for i, r in zip(idx, rows)])

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]

    def load(self, n: int, in_dtype, out_dtype, n_in: int, n_out: int) -> dict:
        """Arrays of the stored rows: done [n] bool, inputs, outputs, status, work, ticks, attempts."""
        d = {"done": np.zeros(n, dtype=bool), "inputs": np.zeros((n, n_in), dtype=in_dtype),
             "outputs": np.zeros((n, n_out), dtype=out_dtype), "status": np.zeros(n, dtype=np.int32),
             "work": np.zeros(n, dtype=np.uint32), "ticks": np.zeros(n, dtype=np.uint32),
             "attempts": np.zeros(n, dtype=np.int32)}
        for idx, x, y, s, w, t, a in self.conn.execute(
                "SELECT idx, inputs, outputs, status, work, ticks, attempts FROM vectors"):
            if idx >= n:
                raise RunDBError(f"{self.path}: vector {idx} beyond the run's {n}")
            d["done"][idx] = True
            d["inputs"][idx] = np.frombuffer(x, dtype=in_dtype)
            d["outputs"][idx] = np.frombuffer(y, dtype=out_dtype)
            d["status"][idx], d["work"][idx], d["ticks"][idx], d["attempts"][idx] = s, w, t, a
        return d


def add_stats(total: dict, more: dict) -> dict:
    """Link statistics of two sessions summed (counts and per-error counts)."""
    out = dict(total)
    for k, v in more.items():
        if isinstance(v, dict):
            out[k] = add_stats(out.get(k, {}), v)
        elif isinstance(v, (int, float)):
            out[k] = out.get(k, 0) + v
    return out


__all__ = ["RunDB", "RunDBError", "add_stats"]
