"""Store round trips on a ClickHouse server (unit/store/test_store.py runs the rest on both backends)."""

from __future__ import annotations

import numpy as np
import pytest

from cachescope.store import server as server_mod


@pytest.mark.services
def test_server_insert_in_several_chunks(server_store, monkeypatch):
    """Beyond one chunk the server path pipelines chunks over two connections."""
    monkeypatch.setattr(server_mod, "INSERT_CHUNK", 1000)
    server_store.command("CREATE TABLE chunks (k UInt64, g LowCardinality(String)) ENGINE = MergeTree ORDER BY k")
    n = 10_500
    server_store.insert("chunks", {"k": np.arange(n, dtype=np.uint64), "g": np.array(["a", "b", "c"] * 3500, dtype=object)})
    assert server_store.query("SELECT count(), uniqExact(k), sum(k), countIf(g = 'c') FROM chunks").rows == \
        [(n, n, n * (n - 1) // 2, 3500)]


@pytest.mark.services
def test_backends_agree(server_store, tmp_path):
    """The same query gives the same Python values on chdb and on the server."""
    from cachescope.store import EmbeddedStore

    sql = ("SELECT toUInt64(18446744073709551615) AS u, toDateTime64('2024-01-02 03:04:05.123456', 6, 'UTC') AS t, "
           "toDateTime('2024-01-02 03:04:05', 'UTC') AS w, [1, 2] AS a, tuple(1, 'x') AS tp, "
           "CAST('write', 'Enum8(\\'read\\' = 0, \\'write\\' = 1)') AS e, CAST(NULL, 'Nullable(Int32)') AS n")
    with EmbeddedStore(tmp_path / "emb") as emb:
        a = emb.query(sql)
    b = server_store.query(sql)
    assert a.rows == b.rows and a.names == b.names
