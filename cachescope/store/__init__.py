"""The store client: one interface over ClickHouse, embedded (chdb) or a server.

    from cachescope.store import open_store, tables
    with open_store(store_dir="var/store") as store:          # or clickhouse_url="clickhouse://127.0.0.1:9000"
        store.insert(tables.EFFICIENCY, {"window_start": ..., "requests": np.array([...], np.uint64), ...})
        store.query("SELECT count() FROM efficiency WHERE cache_group = {g:String}", {"g": "site"}).scalar()
"""

from __future__ import annotations

from pathlib import Path

from cachescope.store import tables
from cachescope.store.base import QueryResult, Store, StoreError
from cachescope.store.tables import DEFAULT_DATABASE

__all__ = ["Store", "StoreError", "QueryResult", "EmbeddedStore", "ClickHouseStore", "open_store", "tables",
           "DEFAULT_DATABASE"]


def __getattr__(name):
    # backends load on first use: chdb is heavy, and a server deployment does not need it
    if name == "EmbeddedStore":
        from cachescope.store.embedded import EmbeddedStore

        return EmbeddedStore
    if name == "ClickHouseStore":
        from cachescope.store.server import ClickHouseStore

        return ClickHouseStore
    raise AttributeError(name)


def open_store(store_dir: str | Path | None = None, clickhouse_url: str | None = None,
               database: str | None = None) -> Store:
    """The embedded store at `store_dir`, or the server at `clickhouse_url` (exactly one)."""
    if (store_dir is None) == (clickhouse_url is None):
        raise ValueError("give exactly one of store_dir (embedded) or clickhouse_url (server)")
    if store_dir is not None:
        from cachescope.store.embedded import EmbeddedStore

        return EmbeddedStore(store_dir, database or DEFAULT_DATABASE)
    from cachescope.store.server import ClickHouseStore

    return ClickHouseStore(clickhouse_url, database)
