"""AccessEvent: the one record every part of cachescope exchanges (one per file access).

Parsers in `ingest/formats/` produce it, Kafka carries it by column (`cachescope.core.messages`),
the processing core reads it
as numpy columns (`cachescope.core.EventColumns.from_events`), ClickHouse stores it. The published JSON Schema
(`schemas/access_event.schema.json`) is generated from this model: `python -m cachescope.events
--write` rewrites it and a test fails when it is out of date.

Decisions written into the contract:

* `ts` is the access time in UTC microseconds: its start (open, attach, start time) when the
  record logs one, else the record's own time as logged (dCache billing records are written when
  the mover ends; no start is derived from a duration). Replays order by (`ts`, `seq`).
* `bytes_read` is the bytes this access moved: for reads the bytes delivered to the client,
  for writes the bytes written, 0 for deletes. It never exceeds `file_size`: a record reporting
  more (re-reads inside one open, merged XCache accesses) is clamped to `file_size` and the
  parse statistics count the clamp (a cache record's `observed_*` bytes are clamped with it).
* `observed_*` are null unless the record comes from a real cache (XCache g-stream, cinfo
  reporter, collector cache events). The byte fields split what this access read by where the
  cache took it from: `observed_miss_bytes` fetched from the origin and stored,
  `observed_bypass_bytes` fetched without storing, `observed_hit_bytes` the cache's `b_hit`
  (served from its disk or RAM, including blocks another read was already fetching). When the
  cache's counters add up to more than `bytes_read` (re-reads inside one open, opens merged into
  one record) they are clamped to it: miss first, then bypass, then hit takes what is left, so
  hit + miss + bypass <= bytes_read and `observed_hit_bytes` never exceeds the bytes read. With
  prefetching, `b_hit` still holds bytes that were in flight from the origin (XRootD 5.5 has no
  per-access count of fetched bytes): the real cache's transfer efficiency stays overstated.
* `observed_hit` is the real cache's own verdict on the access: 1 when nothing was fetched from
  the origin for it (XrdPfc's g-stream `remotes` is empty and, in XRootD 5.7+, `b_todisk` and
  `b_prefetch` are 0; no miss or bypass bytes), 0 when something was, null when the record does
  not say (none of `remotes`, `b_todisk`, `b_prefetch`: cinfo reporter documents, the
  collector's cache events). It is
  not `b_miss == 0`: XrdPfc counts a block already being fetched (prefetch, another client) as
  a hit, so a cold read with prefetching reports `b_miss = 0` (306 of 327 first reads in the
  xcache-lab). Consumers count a real cache's hits from it, and only where it is null from the
  byte counters (hit bytes and neither miss nor bypass bytes: the older rule).
* `observed_origin_bytes` is what the real cache fetched from the origin while the file was
  attached: `b_todisk + b_bypass` of XRootD >= 5.7.2's `file_close` (xrootd PR #2373; on a real
  6.2.1 cache `b_todisk` equalled the cache's own per-block log on 596/596 records). It includes
  what prefetch fetched, so it may exceed `bytes_read` (it is not clamped to it: that excess is
  the point of the real cache's WAN saving). Null when the record has no `b_todisk` (XRootD
  < 5.7.2, cinfo reporter, collector): the bytes fetched are then not known per access. The
  real cache's bytes served from cache follow from it: all of `bytes_read` for a hit,
  `bytes_read - min(bytes_read, observed_origin_bytes)` for a miss.
* One XrdPfc record covers one attach of the file (all opens that overlap it, `n_ios` in its
  cinfo). Its `access_cnt` is the file's cumulative attach count in the cache (restarting at 1
  when a purge removed the file): when it grew by k > 1 since the previous record of that file
  on that server, the k - 1 attaches between had no record (lost datagrams, or accesses XrdPfc
  counts without a close record) and the record becomes k events of one `ts`, its counters
  split evenly (remainders to the first events, so sums stay exact), each with its own `seq`
  (a growth above 64 is taken for a restart: one access). The first record of a file in a stream, and one whose count went down (the file was purged
  and fetched again, or records arrived out of order), is one access: what came before the
  stream started is not guessed. Opens merged into one attach are not visible in the g-stream.
* `duration_us` is how long the access lasted where the record says: an XrdPfc g-stream
  record's `detach_t − attach_t` (whole seconds), dCache billing's transfer time; null otherwise.
  The `xcache` model takes its fetch times from it (delayed hits). The one field with a default
  (null), last, so positional construction of the fields before it stays valid.
* Deletes are namespace removals (a door's, the MGM's): `server` is "" and `cache_group` is the
  one a server-less record gets (the site's; the region's in region mode). A deleted file leaves
  every shadow cache, so consumers apply a delete to all cache groups, not only the one it names.
* `file_id` is xxh3-64 of the normalised `path` (`file_id_of`); the one exception is the `csv`
  simulator trace, whose own `obj_id` is kept so results match `cachescope simulate`.
* An event's identity is (`cache_group`, `origin`, `seq`). `origin` names the log stream the
  record came from — `file:HOST:/abs/path` for a log file (the path a shipper follows, so it
  survives rotation), `kafka:TOPIC/PARTITION` for a Kafka source, `collector:SERVER` for the
  XRootD collector — and `seq` counts that stream's events from 0 in input order (rejected lines
  take no number), resumed from the shipper's committed position after a restart. Events from
  a Kafka topic take their record's offset. So two servers' logs of one format feeding one cache
  group never collide, and replays read in (`ts`, `origin`, `seq`) order.

Every other representation is derived from the one class below: the JSON Schema (`schema()`),
the numpy columns (`cachescope.core.columns`), the Kafka message codec
(`cachescope.core.messages`) and the ClickHouse columns (`CLICKHOUSE_TYPES`, checked against the
migrations by a test).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal

import msgspec
import msgspec.inspect
import xxhash

from cachescope.units import U64_MAX  # noqa: E402 - re-exported: the contract's bound for every u64 field

# msgspec cannot express an upper bound above int64 in Meta; the schema adds it (see schema()).
_U64 = Annotated[int, msgspec.Meta(ge=0)]
#: a yes/no the record states (1/0), null when it does not: UInt8 in the store, int8 in columns
_FLAG = Annotated[int, msgspec.Meta(ge=0, le=1)]

Op = Literal["read", "write", "delete"]

#: op codes: the numpy columns, the engine and the store's Enum8 use these integers
OP_NAMES: tuple[str, ...] = ("read", "write", "delete")
OP_CODES: dict[str, int] = {name: code for code, name in enumerate(OP_NAMES)}
OP_READ, OP_WRITE, OP_DELETE = (OP_CODES[n] for n in OP_NAMES)


def _doc(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


class AccessEvent(msgspec.Struct, gc=False):
    """One file access seen by a storage element or cache (field order is the JSON order; every
    field is required, so positional construction in this order is allowed and fastest)."""

    ts: Annotated[int, _doc("access time, UTC microseconds since the Unix epoch (its start when the log records one)")]
    site: Annotated[str, _doc("site name (WLCG site, or the RSE for rucio traces)")]
    source: Annotated[str, _doc("log format the record came from, e.g. dcache-billing")]
    server: Annotated[str, _doc("pool, file server or cache host that served the access")]
    client: Annotated[str, _doc("client host or domain; empty when the log does not say")]
    vo: Annotated[str, _doc("virtual organisation (atlas, cms, ...); empty when unknown")]
    path: Annotated[str, _doc("normalised logical file name")]
    file_id: Annotated[int, msgspec.Meta(ge=0, description="xxh3-64 of the normalised path (u64)")]
    file_size: Annotated[int, msgspec.Meta(ge=0, description="file size in bytes (u64)")]
    bytes_read: Annotated[
        int,
        msgspec.Meta(
            ge=0,
            description="bytes moved by this access (read: delivered, write: written, delete: 0); never above file_size",
        ),
    ]
    op: Annotated[Op, _doc("read, write or delete; only reads count toward efficiencies")]
    tier: Annotated[str, _doc("data tier (ATLAS DAOD_PHYS, HITS ...; CMS MINIAODSIM ...; USER, GROUP, UNKNOWN)")]
    cache_group: Annotated[str, _doc("shadow-cache set this access feeds (per server, site or region)")]
    observed_hit_bytes: Annotated[
        _U64 | None, _doc("bytes the real cache served from disk (null unless the record is from a cache)")
    ]
    observed_miss_bytes: Annotated[
        _U64 | None, _doc("bytes the real cache fetched from remote and stored (null unless from a cache)")
    ]
    observed_bypass_bytes: Annotated[
        _U64 | None, _doc("bytes the real cache fetched from remote without storing (null unless from a cache)")
    ]
    observed_hit: Annotated[
        _FLAG | None, _doc("1 when the real cache fetched nothing from the origin for this access (its g-stream "
                           "`remotes` empty), 0 when it did, null unless the record says")
    ]
    observed_origin_bytes: Annotated[
        _U64 | None, _doc("bytes the real cache fetched from the origin for this access, prefetch included "
                          "(XRootD >= 5.7.2: b_todisk + b_bypass); null when the record does not carry b_todisk")
    ]
    origin: Annotated[str, _doc("stable id of the log stream the record came from (file:HOST:PATH, "
                                "kafka:TOPIC/PARTITION, collector:SERVER); with seq, the event's identity")]
    seq: Annotated[int, msgspec.Meta(ge=0, description="ingest sequence number, increasing per origin in input order")]
    duration_us: Annotated[
        _U64 | None, _doc("how long the access lasted, microseconds (open to close, attach to detach, a mover's "
                          "transfer time); null when the record does not say")
    ] = None


# ---------------------------------------------------------------------------------------------
# The field table every other representation is derived from

FIELD_NAMES: tuple[str, ...] = AccessEvent.__struct_fields__


def _kind(name: str, t: msgspec.inspect.Type) -> str:
    """ts | text | u64 | op | observed | flag | duration: how a field is held in columns and in the store."""
    while isinstance(t, msgspec.inspect.Metadata):
        t = t.type
    if name == "ts":
        return "ts"
    if name == "duration_us":
        return "duration"
    if isinstance(t, msgspec.inspect.LiteralType):
        return "op"
    if isinstance(t, msgspec.inspect.UnionType):
        ints = [x for x in t.types if isinstance(x, msgspec.inspect.IntType)]
        return "flag" if ints and ints[0].le == 1 else "observed"
    if isinstance(t, msgspec.inspect.StrType):
        return "text"
    return "u64"


FIELD_KINDS: dict[str, str] = {f.name: _kind(f.name, f.type) for f in msgspec.inspect.type_info(AccessEvent).fields}
TEXT_FIELDS = tuple(n for n, k in FIELD_KINDS.items() if k == "text")
U64_FIELDS = tuple(n for n, k in FIELD_KINDS.items() if k == "u64")
OBSERVED_FIELDS = tuple(n for n, k in FIELD_KINDS.items() if k == "observed")
FLAG_FIELDS = tuple(n for n, k in FIELD_KINDS.items() if k == "flag")
#: nullable u64 fields that are not the real cache's numbers (held like them: int64, null = -1)
DURATION_FIELDS = tuple(n for n, k in FIELD_KINDS.items() if k == "duration")
#: every field that may be null, as columns hold it (NO_OBSERVATION for null)
NULLABLE_FIELDS = OBSERVED_FIELDS + FLAG_FIELDS + DURATION_FIELDS
_U64_FIELDS = U64_FIELDS + OBSERVED_FIELDS + DURATION_FIELDS

#: text fields with many distinct values are stored plain, the rest as LowCardinality
_HIGH_CARDINALITY = {"path"}
_OP_ENUM = "Enum8(" + ", ".join(f"'{n}' = {c}" for n, c in OP_CODES.items()) + ")"

#: the access_events column types (a test compares them with the migrated table)
CLICKHOUSE_TYPES: dict[str, str] = {
    name: {
        "ts": "DateTime64(6, 'UTC')",
        "text": "String" if name in _HIGH_CARDINALITY else "LowCardinality(String)",
        "u64": "UInt64",
        "op": _OP_ENUM,
        "observed": "Nullable(UInt64)",
        "flag": "Nullable(UInt8)",
        "duration": "Nullable(UInt64)",
    }[kind]
    for name, kind in FIELD_KINDS.items()
}


def file_id_of(path: str) -> int:
    """Stable 64-bit id of a normalised path."""
    return xxhash.xxh3_64_intdigest(path.encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------------------------------------
# JSON in and out

_encoder = msgspec.json.Encoder()
_decoder_one = msgspec.json.Decoder(AccessEvent)


def encode_lines(events: Iterable[AccessEvent]) -> bytes:
    """JSON lines, one event per line (the `cachescope parse` output)."""
    return _encoder.encode_lines(events)


def decode_lines(data: bytes | str) -> list[AccessEvent]:
    """Decode JSON lines of events (the `cachescope parse` output), validating types, enums and
    bounds. (Kafka carries events by column: cachescope.core.messages.)"""
    events = _decoder_one.decode_lines(data)
    for ev in events:
        for name in _U64_FIELDS:
            value = getattr(ev, name)
            if value is not None and value > U64_MAX:
                raise msgspec.ValidationError(f"{name} = {value} does not fit in 64 bits (seq {ev.seq})")
    return events


# ---------------------------------------------------------------------------------------------
# JSON Schema

SCHEMA_ID = "https://cachescope.invalid/schemas/access_event.schema.json"
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "access_event.schema.json"


def schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one AccessEvent, generated from the model."""
    generated = msgspec.json.schema(AccessEvent)
    body = dict(generated["$defs"]["AccessEvent"])
    props = body["properties"]
    for name in _U64_FIELDS:
        prop = props[name]
        for branch in prop.get("anyOf", [prop]):
            if branch.get("type") == "integer":
                branch["maximum"] = U64_MAX
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "AccessEvent",
        "description": (
            "One file access seen by a grid storage element or cache, as produced by cachescope's "
            "parsers. Generated from cachescope/events.py; do not edit by hand."
        ),
        **{k: v for k, v in body.items() if k != "title"},
    }


def schema_text() -> str:
    import json

    return json.dumps(schema(), indent=2, sort_keys=False) + "\n"


def _main(argv: list[str]) -> int:
    if argv[1:] == ["--write"]:
        SCHEMA_PATH.parent.mkdir(parents=True, exist_ok=True)
        SCHEMA_PATH.write_text(schema_text())
        print(f"wrote {SCHEMA_PATH}")
        return 0
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv))
