"""EmbeddedStore: ClickHouse in this process (chdb), data kept in a directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import datetime as dt
import fcntl
import os
import re
import threading

import numpy as np
import pandas as pd

from cachescope.store import wire as _wire
from cachescope.store.base import QueryResult, Store, StoreError, StoreFull, is_disk_full, settings_clause
from cachescope.store.params import render, render_all
from cachescope.store.tables import DEFAULT_DATABASE


class EmbeddedStore(Store):
    """chdb session on `path` (created if missing).

    chdb runs one engine per process, on one path at a time: close() a store before opening
    one on another directory. Never create Kafka-engine tables here: it corrupts the directory.
    """

    backend = "embedded"
    categorical_wire = True

    def __init__(self, path: str | Path, database: str = DEFAULT_DATABASE):
        super().__init__(database)
        from chdb import session  # imported here: the server backend does not need chdb loaded

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._holder = _StoreLock.acquire(self.path)
        try:
            self._session = session.Session(str(self.path))
        except Exception as e:  # chdb raises plain RuntimeError/ChdbError
            self._holder.release()
            raise StoreError(f"cannot open the embedded store at {self.path}: {e}") from None
        self._run(f"CREATE DATABASE IF NOT EXISTS {self.database}", fmt="CSV")
        self._run(f"USE {self.database}", fmt="CSV")
        # plain DateTime results are then UTC, as every DateTime column of the schema is
        self._run("SET session_timezone = 'UTC'", fmt="CSV")

    def _run(self, sql: str, params: Mapping[str, Any] | None = None, fmt: str = "Native", table=None):
        # chdb's Python() table function looks the object up by name in the calling frame
        cachescope_wire = table  # noqa: F841
        with self._lock:
            if self._session is None:
                raise StoreError("the embedded store is closed")
            try:
                return self._session.query(sql, fmt, params=render_all(params) if params else None)
            except Exception as e:
                if is_disk_full(str(e)):
                    raise StoreFull(_full_message(self.path)) from None
                raise StoreError(str(e).strip()) from None

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self._schemas.clear()
        self._run(sql, params, fmt="CSV")

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> QueryResult:
        # chDB's own Arrow output: Python values as the server backend gives them (UInt64 above
        # 2⁶³, tz-aware UTC datetimes, None, lists); the ClickHouse types from DESCRIBE
        table = self._run(sql, params, fmt="ArrowTable")
        try:
            described = self._run(f"DESCRIBE TABLE ({sql})", params, fmt="ArrowTable").to_pydict()
            names, types = described["name"], described["type"]
        except StoreError:  # SHOW, EXPLAIN …: not a subquery; Arrow's own types then
            names, types = table.column_names, [str(t) for t in table.schema.types]
        if table.num_rows == 0:
            return QueryResult(list(names), list(types), [])
        cols = [_python_values(table.column(i).to_pylist(), t) for i, t in enumerate(types)]
        return QueryResult(list(names), list(types), list(zip(*cols)))

    def query_columns(self, sql: str, params: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        return frame_columns(self.query_frame(sql, params))

    def query_frame(self, sql: str, params: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """chDB's DataFrame output: its fastest columnar read (about 5 M rows/s)."""
        return self._run(sql, params, fmt="DataFrame")

    def _insert_wire(self, table: str, w: _wire.Wire, settings: Mapping[str, Any]) -> None:
        head = f"INSERT INTO {self.database}.{table} ({', '.join(w.table_columns)}) SELECT {w.select()} FROM "
        literal = _values_literal(w) if w.rows <= SMALL_INSERT else None
        if literal is not None:
            self._run(f"{head}{literal}{settings_clause(settings)}", fmt="CSV")
            return
        # a DataFrame over the wire arrays (no copy): chdb reads it ~10% faster than Arrow,
        # it reads Python str objects without a conversion pass
        self._run(f"{head}Python(cachescope_wire){settings_clause(settings)}", fmt="CSV",
                  table=pd.DataFrame(dict(zip(w.names, w.data)), copy=False))

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
                self._holder.release()


def _full_message(path: Path) -> str:
    import shutil

    try:
        free = f"{shutil.disk_usage(path).free / (1 << 20):,.1f} MiB free"
    except OSError:
        free = "free space unknown"
    return (f"the disk holding the store {os.path.abspath(path)} is full ({free}): free space there, then run the "
            "same command again (it completes the store: rows already written are replaced by identical ones)")


#: the lock file in an embedded store's directory: its holder's PID while a process has it open
LOCK_FILE = "cachescope.lock"


class _StoreLock:
    """An exclusive lock on a store directory for this process (chdb's engine cannot share its
    directory with another process: it failed with `Error initializing EmbeddedServer: .`).
    flock on DIR/cachescope.lock, which holds the PID; the kernel drops it when the process ends,
    so a killed replay leaves no stale lock. Stores of one process share it (counted)."""

    _held: dict[str, "_StoreLock"] = {}
    _guard = threading.Lock()

    def __init__(self, key: str, fd: int):
        self.key, self.fd, self.count = key, fd, 0

    @classmethod
    def acquire(cls, path: Path) -> "_StoreLock":
        key = os.path.realpath(path)
        with cls._guard:
            held = cls._held.get(key)
            if held is None:
                lock_path = os.path.join(key, LOCK_FILE)
                try:
                    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                except OSError as exc:
                    raise StoreError(f"cannot open the embedded store at {path}: {lock_path}: {exc.strerror}") from None
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    owner = _owner(fd)
                    os.close(fd)
                    raise StoreError(f"the embedded store at {path} is in use by another process ({owner}): wait for "
                                     "it to end, or give another store directory") from None
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                held = cls._held[key] = cls(key, fd)
            held.count += 1
            return held

    def release(self) -> None:
        with self._guard:
            self.count -= 1
            if self.count == 0:
                del self._held[self.key]
                os.close(self.fd)  # drops the flock; the file stays (another process may hold it now)


def _owner(fd: int) -> str:
    """'PID n: command' of the lock's holder, as far as it can be told."""
    try:
        pid = int(os.pread(fd, 32, 0).split()[0])
    except (OSError, ValueError, IndexError):
        return "its PID is not known yet"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return f"PID {pid}"
    while argv and os.path.basename(argv[0]).startswith("python"):  # python [-m] cachescope …: say what runs
        argv = argv[2:] if argv[1:2] == ["-m"] else argv[1:]
    words = [os.path.basename(argv[0]), *argv[1:2]] if argv else []
    return f"PID {pid}: {' '.join(words)}" if words else f"PID {pid}"


#: inserts of at most this many rows go as a `values()` literal: setting up chdb's `Python()`
#: table function costs more than the rest of a small insert (a migration's record, health rows)
SMALL_INSERT = 64


def _values_literal(w: _wire.Wire) -> str | None:
    """The wire's rows as a `values('structure', (…), …)` table literal, or None when a value has
    no literal form here (then the insert goes through `Python()`)."""
    try:
        columns = [np.asarray(d, dtype=object).tolist() if isinstance(d, pd.Categorical) else np.asarray(d).tolist()
                   for d in w.data]
        rows = ", ".join("(" + ", ".join(render(v, nested=True) for v in row) + ")" for row in zip(*columns))
        return f"values({render(w.structure(), nested=True)}, {rows})"
    except (TypeError, ValueError):
        return None


_ENUM_ITEM = re.compile(r"'((?:[^'\\]|\\.)*)'\s*=\s*(-?\d+)")


def _python_values(values: list, ch_type: str) -> list:
    """Arrow gives DateTime as seconds and Enum as its number: the values the server gives."""
    base = ch_type.removeprefix("Nullable(").removeprefix("LowCardinality(")
    if base == "DateTime" or (base.startswith("DateTime(") and not base.startswith("DateTime64")):
        return [None if v is None else dt.datetime.fromtimestamp(v, dt.timezone.utc) for v in values]
    if base.startswith("Tuple("):  # Arrow structs come as dicts keyed by position
        return [None if v is None else tuple(v.values()) for v in values]
    if base.startswith(("Enum8(", "Enum16(")):
        names = {int(code): name for name, code in _ENUM_ITEM.findall(base)}
        return [None if v is None else names.get(v, v) for v in values]
    return values


def frame_columns(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """A DataFrame's columns as numpy arrays (datetimes as datetime64 in UTC, strings as objects)."""
    out: dict[str, np.ndarray] = {}
    for name in df.columns:
        col = df[name]
        if isinstance(col.dtype, pd.DatetimeTZDtype):
            out[name] = col.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
        elif isinstance(col.dtype, pd.CategoricalDtype):
            out[name] = col.to_numpy(dtype=object)
        else:
            out[name] = col.to_numpy()
    return out
