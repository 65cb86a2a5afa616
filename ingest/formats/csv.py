"""csv: the simulator's trace, `timestamp,obj_id,obj_size[,tier,path][,bytes_read]` (DESIGN.md,
`cachescope simulate`). With a header line the columns are taken by name (the header line itself
is reported as skipped); without one, by count: 3, 4 (+bytes_read), 5 (+tier,path) or 6.

Every row is a read (a trace lists read requests). timestamp: epoch seconds (ms/us/ns told apart
by magnitude; 0 allowed for relative traces); obj_id is kept as file_id (the simulator's key, so
results match `cachescope simulate`); bytes_read defaults to obj_size and is clamped to it; a
given tier is kept, otherwise the path is classified. Quoted fields (paths with commas) are read
with the csv module.
"""

from __future__ import annotations

import csv as _csv

from ingest.formats._base import U64_MAX, Access, BadRecord, Format, ParseContext, Reject, epoch_us, skip

NAME = "csv"
COLUMNS = ("timestamp", "obj_id", "obj_size", "tier", "path", "bytes_read")
_BY_COUNT = {
    3: ("timestamp", "obj_id", "obj_size"),
    4: ("timestamp", "obj_id", "obj_size", "bytes_read"),
    5: ("timestamp", "obj_id", "obj_size", "tier", "path"),
    6: ("timestamp", "obj_id", "obj_size", "tier", "path", "bytes_read"),
}


def _u64(value: str, name: str) -> int:
    if value.isdigit() and value.isascii():
        v = int(value)
        if v <= U64_MAX:
            return v
        raise BadRecord(f"field {name}: {value[:30]} does not fit in 64 bits")
    raise BadRecord(f"field {name}: not an unsigned integer: {value[:40]!r}")


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    if '"' in line:
        try:
            fields = next(_csv.reader([line]))
        except _csv.Error as exc:
            raise BadRecord(f"bad CSV quoting: {exc}") from None
    else:
        fields = line.split(",")
    if fields and fields[0].strip().lower() == "timestamp":
        names = tuple(f.strip().lower() for f in fields)
        unknown = [n for n in names if n not in COLUMNS]
        if unknown or len(set(names)) != len(names) or not {"timestamp", "obj_id", "obj_size"} <= set(names):
            raise BadRecord(f"header: expected columns from {','.join(COLUMNS)}, got {','.join(names)[:120]}")
        ctx.state["csv_columns"] = names
        return skip("header line")
    names = ctx.state.get("csv_columns") or _BY_COUNT.get(len(fields))
    if names is None:
        raise BadRecord(f"{len(fields)} columns; expected 3 to 6 (timestamp,obj_id,obj_size[,tier,path][,bytes_read])")
    if len(fields) != len(names):
        raise BadRecord(f"{len(fields)} columns where the header has {len(names)}")
    row = dict(zip(names, fields))
    stamp = row["timestamp"].strip()
    if stamp == "0":
        ts = 0
    else:
        ts = epoch_us(stamp, "timestamp")
    obj_id = _u64(row["obj_id"].strip(), "obj_id")
    size = _u64(row["obj_size"].strip(), "obj_size")
    given = row.get("bytes_read", "").strip()
    nbytes = _u64(given, "bytes_read") if given else size
    if nbytes == 0:
        return skip("request of 0 bytes")
    return Access(ts, row.get("path", ""), size, nbytes, "read", ctx.server, "", "", "",
                  None, None, None, row.get("tier", "").strip(), obj_id)


FORMAT = Format(NAME, _parse, __doc__ or "")
