"""ClickHouseStore: a ClickHouse server over the native protocol (clickhouse-driver)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Mapping
from urllib.parse import parse_qsl, urlencode, urlparse

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

    Large reads (`stream_columns`: a what-if's accesses) go over the server's HTTP interface as
    Arrow record batches, streamed: columnar end to end, several times the rows/s of the native
    driver's numpy read (BENCHMARKS.md). The HTTP port is the server's own (`getServerPort`,
    asked once), or `http_url`; `http_url=""` keeps every read on the native port.
    """

    backend = "server"

    def __init__(self, url: str, database: str | None = None, http_url: str | None = None):
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
            # query settings in the URL (?distributed_foreground_insert=1) go with every query
            settings={"server_side_params": True, **dict(parse_qsl(u.query))},
            # a server that stops answering fails the call instead of hanging it; a long query
            # (a month's what-if read) stays well inside the receive timeout
            connect_timeout=5, send_receive_timeout=600, sync_request_timeout=10,
        )
        bootstrap = self._client(database="default")
        try:
            self._execute(bootstrap, f"CREATE DATABASE IF NOT EXISTS {self.database}")
        finally:
            bootstrap.disconnect()
        self._main = self._client()
        self._insert_clients = [self._main, self._client()]
        self._pool: ThreadPoolExecutor | None = None
        self._http_url = http_url

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

    def http_url(self) -> str:
        """The server's HTTP interface ("" when it has none): given, or asked of the server once."""
        if self._http_url is None:
            secure = self._conn_kwargs["secure"]
            try:
                port = int(self.query(f"SELECT getServerPort('{'https_port' if secure else 'http_port'}')").scalar())
            except (StoreError, ValueError, TypeError):
                port = 0  # no HTTP listener: native reads
            host = self._conn_kwargs["host"]
            self._http_url = f"{'https' if secure else 'http'}://{host}:{port}/" if port else ""
        return self._http_url

    def stream_columns(self, sql: str, params: Mapping[str, Any] | None = None,
                       rows: int = 1 << 20) -> Iterator[dict[str, np.ndarray]]:
        """Arrow record batches over HTTP (FORMAT ArrowStream), gathered into chunks of at most
        `rows` rows as they arrive; the native read when the server has no HTTP interface."""
        url = self.http_url()
        if not url:
            yield from super().stream_columns(sql, params, rows)
            return
        import pyarrow as pa

        from cachescope.store.params import render_all

        query = {"database": self.database, "default_format": "ArrowStream",
                 **{f"param_{k}": v for k, v in render_all(params).items()}}
        headers = {"X-ClickHouse-User": self._conn_kwargs["user"], "X-ClickHouse-Key": self._conn_kwargs["password"]}
        resp = _http_post(url + "?" + urlencode(query), sql.encode(), headers)
        try:
            try:
                reader = pa.ipc.open_stream(resp)
                pending, have = [], 0
                for batch in reader:
                    pending.append(batch)
                    have += batch.num_rows
                    while have >= rows:
                        table = pa.Table.from_batches(pending)
                        yield _numpy(table.slice(0, rows))
                        rest = table.slice(rows)
                        pending, have = rest.to_batches(), rest.num_rows
                if have:
                    yield _numpy(pa.Table.from_batches(pending))
            except (pa.ArrowInvalid, OSError) as e:
                # an error after the answer began comes as text inside the stream
                raise StoreError(f"ClickHouse HTTP {url}: the Arrow stream broke off: {e}") from None
        finally:
            resp.close()

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


def _numpy(table) -> dict[str, np.ndarray]:
    """Numeric Arrow columns → numpy arrays (one copy when a chunk spans several batches)."""
    return {name: col.to_numpy() for name, col in zip(table.column_names, table.combine_chunks().columns)}


def _http_post(url: str, body: bytes, headers: Mapping[str, str]):
    """POST a query; the open response (a file-like object read as it streams) or StoreError."""
    import http.client

    u = urlparse(url)
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(u.hostname, u.port, timeout=600)
    try:
        conn.request("POST", f"{u.path or '/'}?{u.query}", body=body, headers=dict(headers))
        resp = conn.getresponse()
    except OSError as e:
        conn.close()
        raise StoreError(f"ClickHouse HTTP {u.scheme}://{u.netloc}/: {e}") from None
    if resp.status != 200:
        text = resp.read().decode(errors="replace")
        conn.close()
        raise StoreError(text.split("Stack trace:")[0].strip() or f"HTTP {resp.status}")
    return resp
