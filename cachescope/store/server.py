"""ClickHouseStore: a ClickHouse server over the native protocol (clickhouse-driver)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping
from urllib.parse import urlparse

import numpy as np
import pandas as pd

from cachescope.store import wire as _wire
from cachescope.store.base import QueryResult, Store, StoreError
from cachescope.store.embedded import frame_columns
from cachescope.store.params import for_driver
from cachescope.store.tables import DEFAULT_DATABASE

#: rows per INSERT: `input()` takes exactly one native block per query (clickhouse-driver
#: waits for a per-block answer the server sends only at the end); 256k rows measured best:
#: chunks small enough that encoding one overlaps the server writing the previous one
INSERT_CHUNK = 1 << 18


class ClickHouseStore(Store):
    """`url`: clickhouse://[user[:password]@]host:port[/database] (the native TCP port).

    The database in the URL is only the default for `database`; the store creates its
    database when missing. Large inserts go in chunks over two connections, so one chunk is
    encoded while the server writes the previous one.
    """

    backend = "server"

    def __init__(self, url: str, database: str | None = None):
        u = urlparse(url)
        if u.scheme not in ("clickhouse", "clickhouses", "tcp"):
            raise ValueError(f"{url!r}: expected clickhouse://host:port[/database] (native protocol)")
        db = database or (u.path.strip("/") or DEFAULT_DATABASE)
        if db == "default" and database is None:
            db = DEFAULT_DATABASE
        super().__init__(db)
        self.url = url
        self._conn_kwargs = dict(
            host=u.hostname or "127.0.0.1",
            port=u.port or 9000,
            user=u.username or "default",
            password=u.password or "",
            secure=u.scheme == "clickhouses",
            settings={"server_side_params": True},
        )
        bootstrap = self._client(database="default")
        try:
            self._execute(bootstrap, f"CREATE DATABASE IF NOT EXISTS {self.database}")
        finally:
            bootstrap.disconnect()
        self._main = self._client()
        self._insert_clients = [self._main, self._client()]
        self._pool: ThreadPoolExecutor | None = None

    def _client(self, database: str | None = None):
        from clickhouse_driver import Client

        return Client(database=database or self.database, **self._conn_kwargs)

    @staticmethod
    def _execute(client, sql: str, params: Mapping[str, Any] | None = None, data=None, **kw):
        try:
            if data is not None:
                return client.execute(sql, data, **kw)
            return client.execute(sql, for_driver(params) if params else None, **kw)
        except Exception as e:
            from clickhouse_driver.errors import Error

            if isinstance(e, Error):
                msg = getattr(e, "message", None) or str(e)
                raise StoreError(msg.split("Stack trace:")[0].strip()) from None
            raise

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self._schemas.clear()
        with self._lock:
            self._execute(self._main, sql, params)

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> QueryResult:
        with self._lock:
            rows, cols = self._execute(self._main, sql, params, with_column_types=True)
        return QueryResult([c[0] for c in cols], [c[1] for c in cols], rows)

    def query_columns(self, sql: str, params: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        return frame_columns(self.query_frame(sql, params))

    def query_frame(self, sql: str, params: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """The driver's columnar numpy read (public API: columnar=True, use_numpy)."""
        with self._lock:
            data, cols = self._execute(self._main, sql, params, with_column_types=True, columnar=True,
                                       settings={"use_numpy": True})
        names = [c[0] for c in cols]
        if not data:
            return pd.DataFrame({n: np.array([]) for n in names})
        return pd.DataFrame(dict(zip(names, data)), copy=False)

    def insert(self, table: str, columns: Mapping[str, Any], settings: Mapping[str, Any] | None = None) -> int:
        """As Store.insert; large batches go in chunks of INSERT_CHUNK rows over two connections:
        one thread converts and encodes a chunk while the server writes the previous one."""
        n = len(next(iter(columns.values()))) if columns else 0
        if n <= INSERT_CHUNK:
            return super().insert(table, columns, settings)
        schema = self.schema(table)
        s = {"optimize_on_insert": 0}
        s.update(settings or {})

        def send(client, a, b):
            w = _wire.build({k: v[a:b] for k, v in columns.items()}, schema)
            self._send(client, table, w, s)

        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cachescope-insert")
            futures = []
            for i, a in enumerate(range(0, n, INSERT_CHUNK)):
                if i >= 2:
                    futures[i - 2].result()  # its connection is free again
                futures.append(self._pool.submit(send, self._insert_clients[i % 2], a, min(a + INSERT_CHUNK, n)))
            for f in futures:
                f.result()
        return n

    def _insert_wire(self, table: str, w: _wire.Wire, settings: Mapping[str, Any]) -> None:
        with self._lock:
            self._send(self._main, table, w, settings)

    def _send(self, client, table: str, w: _wire.Wire, settings: Mapping[str, Any]) -> None:
        structure = w.structure().replace("\\", "\\\\").replace("'", "\\'")
        sql = (f"INSERT INTO {self.database}.{table} ({', '.join(w.table_columns)}) "
               f"SELECT {w.select()} FROM input('{structure}') FORMAT Native")
        s = dict(settings)
        s.update(use_numpy=True, insert_block_size=w.rows + 1)
        self._execute(client, sql, data=w.data, columnar=True, settings=s)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None
            for c in self._insert_clients:
                c.disconnect()
