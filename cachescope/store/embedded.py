"""EmbeddedStore: ClickHouse in this process (chdb), data kept in a directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import datetime as dt

_UTC = dt.timezone.utc  # aware datetimes compare equal to the server's (pytz) ones

from cachescope.store import native
from cachescope.store import wire as _wire
from cachescope.store.base import QueryResult, Store, StoreError, settings_clause
from cachescope.store.params import render_all
from cachescope.store.tables import DEFAULT_DATABASE


class EmbeddedStore(Store):
    """chdb session on `path` (created if missing).

    chdb runs one engine per process, on one path at a time: close() a store before opening
    one on another directory. Never create Kafka-engine tables here: it corrupts the directory.
    """

    backend = "embedded"

    def __init__(self, path: str | Path, database: str = DEFAULT_DATABASE):
        super().__init__(database)
        from chdb import session  # imported here: the server backend does not need chdb loaded

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            self._session = session.Session(str(self.path))
        except Exception as e:  # chdb raises plain RuntimeError/ChdbError
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
                raise StoreError(str(e).strip()) from None

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self._schemas.clear()
        self._run(sql, params, fmt="CSV")

    def _native(self, sql: str, params, use_numpy: bool):
        res = self._run(sql, params, fmt="Native")
        data = res.bytes() if hasattr(res, "bytes") else bytes(res)
        names, types, blocks = native.decode(data, use_numpy=use_numpy)
        if not names:
            # an empty result has no Native block at all: names and types from DESCRIBE
            d = native.decode(self._run(f"DESCRIBE TABLE ({sql})", params, fmt="Native").bytes())[2]
            if d:
                names, types = list(d[0][0]), list(d[0][1])
        return names, types, blocks

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> QueryResult:
        names, types, blocks = self._native(sql, params, use_numpy=False)
        # chdb names DateTime('UTC') plain DateTime (its session zone is UTC) and the reader then
        # returns naive values: make them what the server returns, tz-aware UTC
        utc = [i for i, t in enumerate(types) if t == "DateTime"]
        for i in utc:
            types[i] = "DateTime('UTC')"
        rows: list[tuple] = []
        for cols in blocks:
            if utc:
                cols = list(cols)
                for i in utc:
                    cols[i] = [v.replace(tzinfo=_UTC) if v is not None else None for v in cols[i]]
            rows.extend(zip(*cols))
        return QueryResult(names, types, rows)

    def query_columns(self, sql: str, params: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        names, _types, blocks = self._native(sql, params, use_numpy=True)
        return _concat_columns(names, blocks)

    def _insert_wire(self, table: str, w: _wire.Wire, settings: Mapping[str, Any]) -> None:
        sql = (f"INSERT INTO {self.database}.{table} ({', '.join(w.table_columns)}) "
               f"SELECT {w.select()} FROM Python(cachescope_wire){settings_clause(settings)}")
        # a DataFrame over the wire arrays (no copy): chdb reads it ~10% faster than Arrow,
        # it reads Python str objects without a conversion pass
        self._run(sql, fmt="CSV", table=pd.DataFrame(dict(zip(w.names, w.data)), copy=False))

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None


def _concat_columns(names: list[str], blocks: list[list]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for i, name in enumerate(names):
        parts = [_as_array(b[i]) for b in blocks]
        out[name] = np.concatenate(parts) if len(parts) > 1 else (parts[0] if parts else np.array([]))
    return out


def _as_array(col) -> np.ndarray:
    if isinstance(col, np.ndarray):
        return col
    if hasattr(col, "to_numpy"):  # pandas Categorical from LowCardinality
        return np.asarray(col.to_numpy(dtype=object) if hasattr(col, "categories") else col.to_numpy())
    return np.array(col, dtype=object) if col and isinstance(col[0], (str, tuple, list)) else np.array(col)
