"""The one store interface every component uses (processing-core sinks, API, CLI)."""

from __future__ import annotations

import abc
import re
import threading
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import numpy as np

from cachescope.errors import UserError
from cachescope.store import wire as _wire
from cachescope.store.tables import DEFAULT_DATABASE

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StoreError(UserError, RuntimeError):
    """A query or command the ClickHouse engine refused (message from the engine; exit 1)."""

    subject = "store"


class StoreFull(StoreError):
    """The disk holding the store is full: said as such (with the path and what to do), never as
    an engine error; raised as it is by whoever meets it (the row writer's thread too)."""


#: how ClickHouse and the OS say a disk is full
_FULL = ("NOT_ENOUGH_SPACE", "No space left on device", "ENOSPC")


def is_disk_full(message: str) -> bool:
    return any(m in message for m in _FULL)


#: ClickHouse error codes of a server (or a shard behind a Distributed table) that is down,
#: restarting or briefly overloaded: the same insert succeeds later
_TRANSIENT_CODES = {32, 159, 202, 209, 210, 252, 279, 394, 425, 1000, 1002}
_TRANSIENT = ("Connection refused", "Connection reset", "Broken pipe", "Unexpected EOF", "timed out",
              "ALL_CONNECTION_TRIES_FAILED", "NETWORK_ERROR", "SOCKET_TIMEOUT", "TOO_MANY_SIMULTANEOUS_QUERIES")
_CODE = re.compile(r"Code: (\d+)")


def is_transient(message: str) -> bool:
    """Whether a refused query is worth retrying as it is (the server or a shard is unreachable)."""
    if is_disk_full(message):
        return False
    m = _CODE.search(message)
    return (m is not None and int(m.group(1)) in _TRANSIENT_CODES) or any(t in message for t in _TRANSIENT)


@dataclass
class QueryResult:
    """Rows of a query, with column names and ClickHouse types.

    Values are the same Python objects on both backends: int (UInt64 beyond 2^63 too),
    float, str, datetime (tz-aware UTC, microseconds kept), date, None for NULL, list for
    Array, tuple for Tuple, Enum values by name.
    """

    names: list[str]
    types: list[str]
    rows: list[tuple]

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list:
        i = self.names.index(name)
        return [r[i] for r in self.rows]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.names, r)) for r in self.rows]

    def scalar(self) -> Any:
        """The single value of a one-row, one-column result."""
        if len(self.rows) != 1 or len(self.names) != 1:
            raise ValueError(f"expected one value, got {len(self.rows)} rows × {len(self.names)} columns")
        return self.rows[0][0]


def check_identifier(name: str) -> str:
    if not _IDENT.match(name):
        raise ValueError(f"{name!r} is not a plain ClickHouse identifier")
    return name


class Store(abc.ABC):
    """ClickHouse, embedded (chdb, in-process) or a server (native protocol).

    SQL names tables without a database: each store works in its own `database` (created
    when missing). Query parameters use ClickHouse's `{name:Type}` syntax on both backends.
    """

    backend: str = ""
    #: inserts may pass low-cardinality text as pandas Categoricals (see store.wire)
    categorical_wire: bool = False

    def __init__(self, database: str = DEFAULT_DATABASE):
        self.database = check_identifier(database)
        self._schemas: dict[str, dict[str, str]] = {}
        self._lock = threading.RLock()  # neither chdb sessions nor driver clients are thread-safe

    # ------------------------------------------------------------------ interface

    @abc.abstractmethod
    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        """Run a statement that returns nothing (DDL, INSERT … SELECT, OPTIMIZE, …)."""

    @abc.abstractmethod
    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> QueryResult:
        """Run a SELECT; rows as Python values."""

    @abc.abstractmethod
    def query_columns(self, sql: str, params: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """Run a SELECT; one numpy array per column (the fast path for large reads).

        Numbers come as their numpy dtypes, DateTime64 as datetime64, strings as object
        arrays; LowCardinality columns as pandas-style categorical values decoded to objects.
        """

    @abc.abstractmethod
    def query_frame(self, sql: str, params: Mapping[str, Any] | None = None) -> "pd.DataFrame":
        """Run a SELECT; a pandas DataFrame by the backend's fastest columnar path (what the read
        layer uses)."""

    def ping(self) -> bool:
        """SELECT 1, unless a query holds this store at this moment: False then (open and busy; a
        health check must not queue behind a long read)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self.query("SELECT 1")
        finally:
            self._lock.release()
        return True

    def stream_columns(self, sql: str, params: Mapping[str, Any] | None = None,
                       rows: int = 1 << 20) -> Iterator[dict[str, np.ndarray]]:
        """Run a SELECT of numeric columns; numpy arrays in chunks of at most `rows` rows, in the
        query's order (large reads with bounded memory: a what-if feed). This default reads the
        whole result (query_frame) and slices it; a server streams it."""
        df = self.query_frame(sql, params)
        cols = {k: df[k].to_numpy() for k in df.columns}
        for a in range(0, len(df), rows):
            yield {k: v[a:a + rows] for k, v in cols.items()}

    @abc.abstractmethod
    def _insert_wire(self, table: str, wire: _wire.Wire, settings: Mapping[str, Any]) -> None:
        ...

    @abc.abstractmethod
    def close(self) -> None:
        ...

    # ------------------------------------------------------------------ shared

    def insert(self, table: str, columns: Mapping[str, Any], settings: Mapping[str, Any] | None = None) -> int:
        """Insert columns (name → numpy array, list, pandas or pyarrow array) into `table`.

        Columns the table has but `columns` lacks take their defaults. Returns rows inserted.
        Deduplication on insert is off (`optimize_on_insert = 0`): ReplacingMergeTree tables
        deduplicate in merges and under FINAL, which is what their readers rely on anyway.
        """
        check_identifier(table)
        schema = self.schema(table)
        w = _wire.build(columns, schema, self.categorical_wire)
        if w.rows == 0:
            return 0
        s = {"optimize_on_insert": 0}
        s.update(settings or {})
        self._insert_wire(table, w, s)
        return w.rows

    def schema(self, table: str) -> dict[str, str]:
        """Column name → ClickHouse type, in table order (cached; DDL through command() clears it)."""
        if table not in self._schemas:
            r = self.query(
                "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {t:String} "
                "AND default_kind NOT IN ('MATERIALIZED', 'ALIAS') ORDER BY position",
                {"db": self.database, "t": table},
            )
            if not r.rows:
                raise StoreError(f"table {self.database}.{table} does not exist (did you run `cachescope migrate`?)")
            self._schemas[table] = dict(r.rows)
        return self._schemas[table]

    def tables(self) -> list[str]:
        return self.query(
            "SELECT name FROM system.tables WHERE database = {db:String} ORDER BY name", {"db": self.database}
        ).column("name")

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.backend} database={self.database}>"


def settings_clause(settings: Mapping[str, Any]) -> str:
    if not settings:
        return ""
    parts = []
    for k, v in settings.items():
        check_identifier(k)
        parts.append(f"{k} = {_wire.literal(v)}")
    return " SETTINGS " + ", ".join(parts)
