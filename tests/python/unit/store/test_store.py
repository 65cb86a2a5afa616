"""Store round trips on both backends: every column type, parameters, input forms."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cachescope.store import StoreError

UTC = dt.timezone.utc
BIG = 2**64 - 1  # above 2^63: must survive as an unsigned value

TYPES_DDL = """CREATE TABLE types_rt (
    ts DateTime64(6, 'UTC'), w DateTime('UTC'), d Date, u64 UInt64, i64 Int64, u32 UInt32, f Float64,
    b Bool, s String, lc LowCardinality(String), op Enum8('read' = 0, 'write' = 1, 'delete' = 2),
    n Nullable(UInt64), nts Nullable(DateTime64(6, 'UTC')), ns Nullable(String)
) ENGINE = MergeTree ORDER BY ts"""

EXPECTED = [
    (dt.datetime(2024, 5, 1, 0, 0, 0, 1, tzinfo=UTC), dt.datetime(2024, 5, 1, tzinfo=UTC), dt.date(2024, 5, 1),
     BIG, -(2**63), 2**32 - 1, 1.5, True, "it's \\ \"q\"", "DAOD_PHYS", "read", None, None, None),
    (dt.datetime(2024, 5, 1, 0, 0, 0, 999999, tzinfo=UTC), dt.datetime(2024, 5, 1, 1, tzinfo=UTC),
     dt.date(1970, 1, 1), 2**63 + 1, 2**63 - 1, 0, -0.25, False, "ünïcode ✓", "AOD", "delete", 2**63 + 7,
     dt.datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC), "x"),
]


def _numpy_columns():
    return {
        "ts": np.array(["2024-05-01T00:00:00.000001", "2024-05-01T00:00:00.999999"], dtype="datetime64[us]"),
        "w": np.array(["2024-05-01T00:00:00", "2024-05-01T01:00:00"], dtype="datetime64[s]"),
        "d": np.array(["2024-05-01", "1970-01-01"], dtype="datetime64[D]"),
        "u64": np.array([BIG, 2**63 + 1], dtype=np.uint64),
        "i64": np.array([-(2**63), 2**63 - 1], dtype=np.int64),
        "u32": np.array([2**32 - 1, 0], dtype=np.uint32),
        "f": np.array([1.5, -0.25]),
        "b": np.array([True, False]),
        "s": np.array(["it's \\ \"q\"", "ünïcode ✓"], dtype=object),
        "lc": np.array(["DAOD_PHYS", "AOD"], dtype=object),
        "op": np.array(["read", "delete"], dtype=object),
        "n": np.ma.masked_array(np.array([0, 2**63 + 7], dtype=np.uint64), mask=[True, False]),
        "nts": [None, dt.datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)],
        "ns": [None, "x"],
    }


def _python_columns():
    """The same values as lists of Python objects."""
    names = list(_numpy_columns())
    return {n: [row[i] for row in EXPECTED] for i, n in enumerate(names)}


def _arrow_pandas_columns():
    """The same values as pyarrow / pandas arrays (dictionary, nullable, tz-aware)."""
    c = _numpy_columns()
    c["ts"] = pa.array(c["ts"]).cast(pa.timestamp("us", tz="UTC"))
    c["lc"] = pa.array(["DAOD_PHYS", "AOD"]).dictionary_encode()
    c["op"] = pd.Categorical(["read", "delete"])
    c["n"] = pd.array([None, 2**63 + 7], dtype="UInt64")
    c["ns"] = pa.array([None, "x"])
    c["u64"] = pa.array([BIG, 2**63 + 1], type=pa.uint64())
    return c


@pytest.mark.parametrize("make", [_numpy_columns, _python_columns, _arrow_pandas_columns],
                         ids=["numpy", "python", "arrow-pandas"])
def test_insert_and_read_back_every_type(store, make):
    store.command(TYPES_DDL)
    assert store.insert("types_rt", make()) == 2
    r = store.query("SELECT * FROM types_rt ORDER BY ts")
    assert r.rows == EXPECTED
    assert r.names == list(_numpy_columns())
    assert r.types[0] == "DateTime64(6, 'UTC')" and r.types[11] == "Nullable(UInt64)"


def test_parameters_round_trip(store):
    store.command(TYPES_DDL)
    store.insert("types_rt", _numpy_columns())
    r = store.query(
        "SELECT u64, ts, s FROM types_rt WHERE u64 = {u:UInt64} AND ts = {t:DateTime64(6, 'UTC')} "
        "AND s IN {ss:Array(String)} AND lc = {lc:String}",
        {"u": BIG, "t": dt.datetime(2024, 5, 1, 0, 0, 0, 1, tzinfo=UTC),
         "ss": ["it's \\ \"q\"", "other"], "lc": "DAOD_PHYS"},
    )
    assert r.rows == [(BIG, dt.datetime(2024, 5, 1, 0, 0, 0, 1, tzinfo=UTC), "it's \\ \"q\"")]
    # a parameter is a value, never SQL
    assert store.query("SELECT {x:String} AS x", {"x": "'; DROP TABLE types_rt; --"}).scalar() == \
        "'; DROP TABLE types_rt; --"
    assert store.query("SELECT count() FROM types_rt").scalar() == 2
    # naive datetimes are UTC; microseconds kept on the way in and out
    assert store.query("SELECT {t:DateTime64(6, 'UTC')} AS t", {"t": dt.datetime(2001, 2, 3, 4, 5, 6, 7)}).scalar() \
        == dt.datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert store.query("SELECT {a:Array(UInt64)} AS a", {"a": [BIG, 0]}).scalar() == [BIG, 0]


def test_query_columns_numpy(store):
    store.command(TYPES_DDL)
    store.insert("types_rt", _numpy_columns())
    c = store.query_columns("SELECT ts, u64, f, lc FROM types_rt ORDER BY ts")
    assert c["u64"].dtype == np.uint64 and c["u64"].tolist() == [BIG, 2**63 + 1]
    assert c["ts"].astype("datetime64[us]").tolist() == [
        dt.datetime(2024, 5, 1, 0, 0, 0, 1), dt.datetime(2024, 5, 1, 0, 0, 0, 999999)]
    assert c["f"].tolist() == [1.5, -0.25]
    assert list(c["lc"]) == ["DAOD_PHYS", "AOD"]


def test_empty_result_keeps_names_and_types(store):
    store.command(TYPES_DDL)
    r = store.query("SELECT u64, lc FROM types_rt WHERE u64 = {u:UInt64}", {"u": 3})
    assert r.rows == [] and r.names == ["u64", "lc"] and r.types == ["UInt64", "LowCardinality(String)"]


def test_insert_errors_are_clear(store):
    store.command(TYPES_DDL)
    cols = _numpy_columns()
    with pytest.raises(ValueError, match="no such column"):
        store.insert("types_rt", {**cols, "nope": [1, 2]})
    with pytest.raises(ValueError, match="not in Enum8"):
        store.insert("types_rt", {**cols, "op": ["read", "evict"]})
    with pytest.raises(ValueError, match="not Nullable"):
        store.insert("types_rt", {**cols, "u64": [1, None]})
    with pytest.raises(ValueError, match="values, the other columns have"):
        store.insert("types_rt", {**cols, "f": [1.0]})
    with pytest.raises(StoreError):
        store.query("SELECT no_such_column FROM types_rt")
    assert store.query("SELECT count() FROM types_rt").scalar() == 0


def test_large_low_cardinality_and_string_columns(store):
    """Many distinct values take the plain-string path; few take dictionary codes. Same result."""
    store.command("CREATE TABLE many (k UInt64, lc LowCardinality(String), s String) ENGINE = MergeTree ORDER BY k")
    n = 50_000
    k = np.arange(n, dtype=np.uint64)
    lc = np.array([f"host{i % 30_000}" for i in range(n)], dtype=object)  # beyond the dictionary limit
    s = np.array([f"/store/mc/f{i}.root" for i in range(n)], dtype=object)
    store.insert("many", {"k": k, "lc": lc, "s": s})
    store.insert("many", {"k": k + n, "lc": pd.Categorical(lc[:n]), "s": s})
    r = store.query("SELECT count(), uniqExact(lc), sum(k), countIf(lc = 'host29999'), any(s) LIKE '/store/mc/f%' FROM many")
    assert r.rows == [(2 * n, 30_000, (2 * n - 1) * 2 * n // 2, 2, 1)]


def test_compiled_factorize_equals_pandas():
    """The store's factorize of str columns (simcore, by object address first) gives pandas'
    codes and uniques — shared and distinct objects of one text, unicode, views — and declines
    columns with anything but str (None, numbers, str subclasses), which pandas then handles."""
    import pandas as pd

    from cachescope._simcore import factorize_str

    class Sub(str):
        pass

    rng = np.random.default_rng(3)
    words = ["MWT2", "", "é", "x" * 300, "a\x00b", "MWT2"[:2] + "T2"]
    shared = np.array(words, dtype=object)[rng.integers(0, len(words), 50_000)]
    distinct = np.array([("w%d" % (i % 9000)) for i in range(20_000)], dtype=object)  # new objects, 9000 texts
    for col in (shared, distinct, np.concatenate([distinct, shared]), np.zeros(0, dtype=object)):
        codes, uniques = factorize_str(col)
        want_codes, want_uniques = pd.factorize(col, use_na_sentinel=True)
        assert np.array_equal(codes, want_codes) and uniques == list(want_uniques)
    for col in (np.array(["a", None], dtype=object), np.array(["a", 1], dtype=object),
                np.array([Sub("a")], dtype=object), shared[::2]):
        assert factorize_str(col) is None


def test_low_cardinality_as_categoricals_gives_the_rows_of_dictionary_codes(tmp_path):
    """chdb reads pandas Categoricals as LowCardinality columns (the embedded store's wire for
    such text); its rows equal those of the dictionary-code expressions, NULLs and '' included."""
    from cachescope.store import EmbeddedStore, wire

    cols = {"k": np.arange(6, dtype=np.uint64),
            "a": np.array(["x", "", "ünï ✓", "x", "it's \\", "x"], dtype=object),
            "b": pd.Categorical(["p", None, "q", "p", None, "r"]),
            "c": pd.Categorical.from_codes([1, 0, 0, 1, 1, 0], categories=["DAOD_PHYS", "AOD"])}
    with EmbeddedStore(tmp_path / "emb") as emb:
        got = {}
        for categoricals in (True, False):
            table = f"lc_{int(categoricals)}"
            emb.command(f"CREATE TABLE {table} (k UInt64, a LowCardinality(String), b LowCardinality(Nullable(String)), "
                        "c LowCardinality(String)) ENGINE = MergeTree ORDER BY k")
            w = wire.build(cols, emb.schema(table), categoricals)
            assert w.types.count("LowCardinality(String)") == (2 if categoricals else 0)  # b has NULLs: codes
            emb.categorical_wire = categoricals
            emb.insert(table, cols)
            got[categoricals] = emb.query(f"SELECT * FROM {table} ORDER BY k").rows
    assert got[True] == got[False]
    assert [r[1:] for r in got[True][:2]] == [("x", "p", "AOD"), ("", None, "DAOD_PHYS")]


def test_small_inserts_as_a_values_literal_give_the_rows_of_python_inserts(tmp_path, monkeypatch):
    """A few rows go to chdb as a `values()` literal (no `Python()` set-up); every type, quotes,
    backslashes, non-ASCII, 2⁶⁴−1, NULLs and non-finite floats arrive as through `Python()`."""
    from cachescope.store import EmbeddedStore
    from cachescope.store import embedded as embedded_mod

    cols = _numpy_columns()
    cols["f"] = np.array([float("inf"), -1.5e-300])
    with EmbeddedStore(tmp_path / "emb") as emb:
        got = {}
        for small in (64, 0):
            monkeypatch.setattr(embedded_mod, "SMALL_INSERT", small)
            table = f"types_{small}"
            emb.command(TYPES_DDL.replace("types_rt", table))
            emb.insert(table, cols)
            got[small] = emb.query(f"SELECT * FROM {table} ORDER BY ts").rows
        assert got[64] == got[0]
        assert [r[:6] + r[7:] for r in got[64]] == [e[:6] + e[7:] for e in EXPECTED]
        assert [r[6] for r in got[64]] == [float("inf"), -1.5e-300]
        # NaN stays NaN as a literal (chdb's Python() reads a NaN float as missing: 0)
        monkeypatch.setattr(embedded_mod, "SMALL_INSERT", 64)
        emb.insert("types_64", {**{k: v[:1] for k, v in _numpy_columns().items()}, "f": np.array([float("nan")])})
        assert emb.query("SELECT countIf(isNaN(f)) FROM types_64").rows == [(1,)]
