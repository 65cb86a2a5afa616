"""Columns given to `Store.insert` → a numeric-first "wire" form and one SQL expression per column.

Both backends insert `INSERT INTO t (cols) SELECT <exprs> FROM <wire>`: the server reads the wire
through `input()` over the native protocol, chdb through its `Python()` table function. The wire
holds what moves fastest from numpy: numbers (int ticks for DateTime64, Enum values, dictionary
codes for low-cardinality strings (for chdb: pandas Categoricals, which it reads as LowCardinality
columns), a UInt8 null mask beside a Nullable column) and plain strings only where they are many
and distinct (paths). The expressions rebuild the real types inside
ClickHouse, vectorised: `fromUnixTimestamp64Micro`, `CAST(… 'Enum8(…)')`, `arrayElement(dict, code)`,
`if(null, NULL, …)`. Accepted inputs per column: numpy arrays (masked too), lists, pandas
Categorical / nullable arrays / Series, pyarrow arrays (dictionary, chunked, with nulls).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from cachescope.simulation import factorize_text
from cachescope.store.params import render


#: beyond this many distinct values a low-cardinality column goes over the wire as strings
MAX_DICTIONARY = 20_000

_INT_TYPES = {
    "UInt8": np.uint8, "UInt16": np.uint16, "UInt32": np.uint32, "UInt64": np.uint64,
    "Int8": np.int8, "Int16": np.int16, "Int32": np.int32, "Int64": np.int64,
    "Float32": np.float32, "Float64": np.float64, "Bool": np.uint8,
}
_ENUM_ITEM = re.compile(r"'((?:[^'\\]|\\.)*)'\s*=\s*(-?\d+)")


@dataclass
class ColumnType:
    """A ClickHouse column type as far as inserting into it matters."""

    text: str
    base: str  # UInt64, String, Enum8, DateTime64, DateTime, Date, Date32, Bool, …
    nullable: bool = False
    low_cardinality: bool = False
    precision: int = 0  # DateTime64
    timezone: str | None = None
    enum: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> "ColumnType":
        t = text.strip()
        lc = nullable = False
        if t.startswith("LowCardinality("):
            lc, t = True, t[len("LowCardinality("):-1]
        if t.startswith("Nullable("):
            nullable, t = True, t[len("Nullable("):-1]
        ct = cls(text=text, base=t, nullable=nullable, low_cardinality=lc)
        if t.startswith(("Enum8(", "Enum16(")):
            ct.base = t[: t.index("(")]
            ct.enum = {re.sub(r"\\(.)", r"\1", m.group(1)): int(m.group(2)) for m in _ENUM_ITEM.finditer(t)}
        elif t.startswith("DateTime64("):
            args = [a.strip() for a in t[len("DateTime64("):-1].split(",", 1)]
            ct.base, ct.precision = "DateTime64", int(args[0])
            ct.timezone = args[1].strip("'") if len(args) > 1 else None
        elif t.startswith("DateTime("):
            ct.base, ct.timezone = "DateTime", t[len("DateTime("):-1].strip().strip("'")
        elif t.startswith("FixedString("):
            ct.base = "String"
        return ct

    @property
    def inner_text(self) -> str:
        """The type without LowCardinality/Nullable wrappers."""
        t = self.text
        if t.startswith("LowCardinality("):
            t = t[len("LowCardinality("):-1]
        if t.startswith("Nullable("):
            t = t[len("Nullable("):-1]
        return t


@dataclass
class Wire:
    """What one insert sends: wire columns (name, ClickHouse type, numpy data) and, per target
    column, the expression over the wire columns that yields it."""

    table_columns: list[str]
    exprs: list[str]
    names: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    data: list[np.ndarray] = field(default_factory=list)
    rows: int = 0

    def add(self, name: str, ch_type: str, data: np.ndarray) -> str:
        self.names.append(name)
        self.types.append(ch_type)
        self.data.append(data)
        return name

    def structure(self) -> str:
        return ", ".join(f"{n} {t}" for n, t in zip(self.names, self.types))

    def select(self) -> str:
        return ", ".join(self.exprs)

    def slice(self, start: int, stop: int) -> list[np.ndarray]:
        return [d[start:stop] for d in self.data]


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


# --------------------------------------------------------------------------- inputs

@dataclass
class _Values:
    """One input column reduced to numpy: values, a null mask, or dictionary codes + categories."""

    values: np.ndarray | None
    mask: np.ndarray | None = None  # True = NULL
    codes: np.ndarray | None = None  # int, -1 = NULL
    categories: list | None = None


def _values(v: Any) -> _Values:
    if isinstance(v, pd.Series):
        v = v.array if not isinstance(v.dtype, pd.CategoricalDtype) else v.values
    if isinstance(v, pa.ChunkedArray):
        v = v.combine_chunks() if v.num_chunks != 1 else v.chunk(0)
    if isinstance(v, pa.DictionaryArray):
        codes = v.indices.to_numpy(zero_copy_only=False) if v.null_count == 0 else \
            v.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        return _Values(None, codes=codes.astype(np.int64, copy=False), categories=v.dictionary.to_pylist())
    if isinstance(v, pa.Array):
        mask = v.is_null().to_numpy(zero_copy_only=False) if v.null_count else None
        if pa.types.is_timestamp(v.type):
            unit = v.type.unit
            vals = v.cast(pa.int64()).fill_null(0).to_numpy().view(f"datetime64[{unit}]")
        elif pa.types.is_string(v.type) or pa.types.is_large_string(v.type):
            vals = v.fill_null("").to_numpy(zero_copy_only=False)
        elif v.null_count:
            vals = v.fill_null(0).to_numpy(zero_copy_only=False)
        else:
            vals = v.to_numpy(zero_copy_only=False)
        return _Values(vals, mask=mask)
    if isinstance(v, pd.Categorical):
        return _Values(None, codes=np.asarray(v.codes, dtype=np.int64), categories=list(v.categories))
    if isinstance(v, pd.api.extensions.ExtensionArray):  # pandas nullable Int/UInt/boolean/string
        mask = np.asarray(pd.isna(v), dtype=bool)
        if isinstance(v, pd.arrays.StringArray) or str(v.dtype).startswith("string"):
            vals = np.asarray(v.to_numpy(dtype=object, na_value=""), dtype=object)
        elif isinstance(v, pd.arrays.DatetimeArray):
            vals = v.tz_convert("UTC").tz_localize(None).to_numpy() if v.tz is not None else v.to_numpy()
        else:
            vals = v.to_numpy(dtype=v.dtype.numpy_dtype, na_value=0)
        return _Values(vals, mask=mask if mask.any() else None)
    if isinstance(v, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(v)
        return _Values(np.ma.getdata(v), mask=mask if mask.any() else None)
    if isinstance(v, np.ndarray):
        return _Values(v)
    if isinstance(v, (list, tuple)):
        if any(x is None for x in v):
            mask = np.fromiter((x is None for x in v), dtype=bool, count=len(v))
            return _Values(np.array(v, dtype=object), mask=mask)
        if v and isinstance(v[0], int) and not isinstance(v[0], bool):
            # Python ints above 2^63 would make numpy pick float64 or object
            if max(v) > np.iinfo(np.int64).max:
                return _Values(np.array(v, dtype=np.uint64))
        if v and isinstance(v[0], str):
            return _Values(np.array(v, dtype=object))
        return _Values(np.asarray(v))
    raise TypeError(f"unsupported column data {type(v).__name__}")


def _object_nulls(vals: np.ndarray) -> np.ndarray | None:
    if vals.dtype != object:
        return None
    mask = pd.isna(vals)
    return mask if mask.any() else None


# --------------------------------------------------------------------------- conversions

def _datetime_ticks(vals: np.ndarray, unit: str) -> np.ndarray:
    """datetime64 (any unit) / datetime objects / ISO strings → int64 ticks of `unit` (UTC)."""
    if np.issubdtype(vals.dtype, np.datetime64):
        return vals.astype(f"datetime64[{unit}]").view(np.int64)
    if vals.dtype == object or vals.dtype.kind in "US":
        first = next((x for x in vals if x is not None), None)
        if isinstance(first, (int, np.integer)):
            return vals.astype(np.int64)
        ts = pd.to_datetime(pd.Series(vals), utc=True, format="mixed" if isinstance(first, str) else None)
        ns = ts.dt.tz_localize(None).to_numpy().astype("datetime64[ns]")
        return ns.astype(f"datetime64[{unit}]").view(np.int64)
    if vals.dtype.kind in "iu":
        return vals.astype(np.int64)  # already ticks of the column's unit
    raise TypeError(f"cannot read {vals.dtype} as date-times")


_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}


def _column(wire: Wire, i: int, name: str, ct: ColumnType, v: Any, rows: int, categoricals: bool) -> str:
    """Add the wire column(s) of one target column; return its expression. `categoricals`: the
    reader takes pandas Categoricals for low-cardinality columns (chdb's `Python()`)."""
    w = f"c{i}"
    x = _values(v)
    n = len(x.codes) if x.codes is not None else len(x.values)
    if n != rows:
        raise ValueError(f"column {name}: {n} values, the other columns have {rows}")
    if x.values is not None and x.mask is None and ct.nullable:
        x.mask = _object_nulls(x.values)
    if x.codes is not None and x.codes.min(initial=0) < 0:
        x.mask = x.codes < 0 if ct.nullable else None
        if not ct.nullable and ct.base not in ("String",):
            raise ValueError(f"column {name} ({ct.text}) is not Nullable but has NULLs")
    elif x.mask is not None and not ct.nullable:
        raise ValueError(f"column {name} ({ct.text}) is not Nullable but has NULLs")

    base = ct.base
    if base == "String":
        if x.codes is None and ct.low_cardinality and x.values.dtype == object:
            codes, uniques = factorize_text(x.values)
            if len(uniques) <= MAX_DICTIONARY:
                x.codes, x.categories = codes, uniques
        if (categoricals and ct.low_cardinality and x.codes is not None and x.mask is None
                and x.codes.min(initial=0) >= 0 and all(type(c) is str for c in x.categories)):
            # chdb reads a Categorical as a LowCardinality column: its dictionary as it is, about
            # a third of the CPU of rebuilding one from codes with arrayElement
            cats = v if isinstance(v, pd.Categorical) and list(v.categories) == x.categories else \
                pd.Categorical.from_codes(x.codes, categories=x.categories, validate=False)
            wire.add(w, "LowCardinality(String)", cats)
            expr = w
        elif x.codes is not None and len(x.categories) <= MAX_DICTIONARY:
            # codes + 1: arrayElement is 1-based and gives '' for 0 (a NULL slot)
            wire.add(w, "UInt32", (x.codes + 1).astype(np.uint32))
            dictionary = "[" + ", ".join(_quote(str(c)) for c in x.categories) + "]"
            expr = f"arrayElement(CAST({dictionary}, 'Array(String)'), {w})"
        else:
            if x.codes is not None:
                cats = np.array(x.categories + [""], dtype=object)
                x.values = cats[x.codes]  # -1 → ""
            vals = x.values
            if vals.dtype != object:
                vals = vals.astype(str).astype(object)
            elif x.mask is not None:
                vals = np.where(x.mask, "", vals)
            wire.add(w, "String", vals)
            expr = w
    elif base in ("Enum8", "Enum16"):
        if x.codes is not None:
            x.values = np.array(x.categories + [None], dtype=object)[x.codes]
        vals = x.values
        wtype = "Int8" if base == "Enum8" else "Int16"
        if vals.dtype == object or vals.dtype.kind in "US":
            names = list(ct.enum)
            codes = pd.Categorical(vals, categories=names).codes
            bad = (codes < 0) & ~(x.mask if x.mask is not None else pd.isna(vals))
            if bad.any():
                raise ValueError(f"column {name}: {sorted(set(map(str, vals[bad])))[:5]} not in {ct.inner_text}")
            out = np.array(list(ct.enum.values()) + [0])[codes]
        else:
            out = vals.astype(np.int64)
            bad = ~np.isin(out, list(ct.enum.values()))
            if x.mask is not None:
                bad &= ~x.mask
            if bad.any():
                raise ValueError(f"column {name}: values {np.unique(out[bad])[:5].tolist()} not in {ct.inner_text}")
        wire.add(w, wtype, out.astype(np.int8 if wtype == "Int8" else np.int16))
        expr = f"CAST({w}, {_quote(ct.inner_text)})"
    elif base == "DateTime64":
        p, tz = ct.precision, ct.timezone or "UTC"
        unit = _UNITS.get(p)
        if unit is not None:
            ticks = _datetime_ticks(_fill(x), unit)
        else:  # odd precisions: from nanoseconds
            ticks = _datetime_ticks(_fill(x), "ns") // 10 ** (9 - p)
        wire.add(w, "Int64", ticks)
        expr = f"reinterpret({w}, {_quote(ct.inner_text if ct.timezone else f'DateTime64({p}, {_quote(tz)})')})"
    elif base == "DateTime":
        secs = _datetime_ticks(_fill(x), "s")
        wire.add(w, "UInt32", secs.astype(np.uint32))
        expr = f"toDateTime({w}, {_quote(ct.timezone or 'UTC')})"
    elif base in ("Date", "Date32"):
        days = _datetime_ticks(_fill(x), "D")
        wtype = "UInt16" if base == "Date" else "Int32"
        wire.add(w, wtype, days.astype(np.uint16 if base == "Date" else np.int32))
        expr = f"CAST({w}, '{base}')"
    elif base in _INT_TYPES:
        if x.codes is not None:
            x.values = np.array(x.categories + [0])[x.codes]
        vals = _fill(x, numeric=True)
        dtype = _INT_TYPES[base]
        if vals.dtype == object:
            vals = np.array(vals.tolist(), dtype=dtype)
        wire.add(w, base if base != "Bool" else "UInt8", vals.astype(dtype, copy=False))
        expr = w if base != "Bool" else f"toBool({w})"
    else:
        raise TypeError(f"column {name}: inserting into {ct.text} is not supported by Store.insert "
                        "(use command() with SQL for such columns)")

    if ct.nullable and x.mask is not None:
        m = wire.add(f"{w}_null", "UInt8", x.mask.astype(np.uint8))
        expr = f"if({m} = 1, NULL, {expr})"
    return expr


def _fill(x: _Values, numeric: bool = False) -> np.ndarray:
    """Values with NULL slots given a harmless default (the null mask travels apart).
    Date-time parsing turns None into NaT by itself; numbers need a 0."""
    vals = x.values
    if numeric and vals.dtype == object and x.mask is not None:
        vals = np.where(x.mask, 0, vals)
    return vals


def build(columns: Mapping[str, Any], schema: Mapping[str, str], categoricals: bool = False) -> Wire:
    """The wire form of `columns` for a table whose columns and types are `schema` (in order).
    `categoricals`: low-cardinality text may go as pandas Categoricals (chdb reads them)."""
    unknown = [c for c in columns if c not in schema]
    if unknown:
        raise ValueError(f"no such column(s) {unknown}; the table has {list(schema)}")
    names = [c for c in schema if c in columns]  # table order
    if not names:
        raise ValueError("insert needs at least one column")
    first = columns[names[0]]
    rows = len(first)
    wire = Wire(table_columns=names, exprs=[], rows=rows)
    for i, name in enumerate(names):
        wire.exprs.append(_column(wire, i, name, ColumnType.parse(schema[name]), columns[name], rows, categoricals))
    return wire


def to_arrow(wire: Wire) -> pa.Table:
    """The wire as an Arrow table (chdb reads it through `Python()` without copying numbers)."""
    arrays = []
    for t, d in zip(wire.types, wire.data):
        arrays.append(pa.array(d, type=pa.string()) if t == "String" else pa.array(d))
    return pa.Table.from_arrays(arrays, names=wire.names)


def literal(value: Any) -> str:
    """A Python value as a ClickHouse SQL literal (for DDL templates and tests)."""
    return render(value, nested=True)
