"""The Kafka message of topic `cachescope.events`: many AccessEvents of one cache group, by column.
Defined here once, derived from the AccessEvent contract (cachescope/events.py); the shippers,
the XRootD collector and the Flink job all encode and decode it with this module.

    key: G (the cache group; a cache group's messages stay in one partition, in order)
    value: {"cache_group": G, "columns": {"ts": [...], "site": [...], ..., "seq": [...]}}

JSON with one list per AccessEvent field (every field, all lists of one length: event i is
element i of each), at most MESSAGE_EVENTS events and MAX_MESSAGE_BYTES bytes (`encode_messages`
splits a batch). cache_group comes first so a consumer can key a message without decoding it
(`cache_group_of`; PyFlink's KafkaSource hands over only the value). By column rather than as a list of event
objects: field names are not repeated per event (276 instead of 463 bytes per event on
g-stream records) and decoding goes straight into the numpy columns the core works on (0.8
instead of 1.4 µs per event). Each element is validated against the AccessEvent contract.
`decode_batch` first tries the compiled decoder (simcore/src/messages.rs), which takes the
messages it can decide exactly as msgspec does; the rest, and every error, go through msgspec.
"""

from __future__ import annotations

import typing
from typing import Iterable, Iterator, Mapping

import msgspec
from msgspec.structs import astuple
import numpy as np
import orjson

from cachescope.core.columns import DTYPES, NO_OBSERVATION, OP_NAME_ARRAY, EventColumns
from cachescope.engine import EngineError
from cachescope.events import DURATION_FIELDS, FIELD_KINDS, FIELD_NAMES, NULLABLE_FIELDS, OP_CODES, AccessEvent
from cachescope.specs import MESSAGE_FIELDS, decode_message as _decode_message
from cachescope.units import MAX_ACCESS_BYTES

#: the member naming the message's cache group (first, and the record's key)
GROUP_FIELD = "cache_group"
_PREFIX = b'{"' + GROUP_FIELD.encode() + b'":'
FIELDS = FIELD_NAMES
#: below Kafka's default message.max.bytes (1 MB): a batch of long paths is split in halves
MAX_MESSAGE_BYTES = 900_000
#: events per message at most (the streaming job ran 15% faster with 2,500 than with 1,000;
#: BENCHMARKS.md)
MESSAGE_EVENTS = 2500

# one list per AccessEvent field, each element typed (and bounded) as the contract's field
_ANNOTATIONS = typing.get_type_hints(AccessEvent, include_extras=True)
# durations came after the first messages: a message without them reads as all null
_Columns = msgspec.defstruct("_Columns", [(name, list[_ANNOTATIONS[name]], None) if name in DURATION_FIELDS
                                          else (name, list[_ANNOTATIONS[name]]) for name in FIELD_NAMES])


class _Message(msgspec.Struct):
    cache_group: str
    columns: _Columns


_decoder = msgspec.json.Decoder(_Message)

# simcore/src/messages.rs decodes the same message straight into columns (no Python object per
# event): it must read exactly the contract's fields
if tuple(MESSAGE_FIELDS) != FIELD_NAMES:
    raise EngineError("simcore/src/messages.rs decodes other fields than the AccessEvent contract "
                      "(cachescope/events.py): make its FIELDS the contract's, then rebuild with scripts/setup")
_encoder = msgspec.json.Encoder()


def _head(cache_group: str) -> bytes:
    return _PREFIX + orjson.dumps(cache_group) + b',"columns":'


def encode_batch(cache_group: str, events: Iterable[AccessEvent] | Iterable[Mapping]) -> bytes:
    """Events (parser structs, or dicts of their JSON form) → one message."""
    ev = list(events)
    if ev and isinstance(ev[0], AccessEvent):
        # rows to columns in C: each event as a tuple, transposed (tuples encode as JSON arrays)
        columns = dict(zip(FIELDS, zip(*map(astuple, ev))))
    else:
        columns = {f: [e.get(f) for e in ev] for f in FIELDS}
    return _head(cache_group) + _encoder.encode(columns) + b"}"


def encode_messages(events: Iterable[AccessEvent]) -> Iterator[tuple[str, bytes]]:
    """(cache group, message) for events of any groups: by cache group (in order of first
    appearance), each group's events in order, cut to MESSAGE_EVENTS and MAX_MESSAGE_BYTES."""
    by_group: dict[str, list] = {}
    for e in events:
        by_group.setdefault(e.cache_group, []).append(e)
    for group, evs in by_group.items():
        for message in _split(group, evs):
            yield group, message


def _split(group: str, events: list) -> list[bytes]:
    if len(events) > MESSAGE_EVENTS:
        return [m for i in range(0, len(events), MESSAGE_EVENTS) for m in _split(group, events[i:i + MESSAGE_EVENTS])]
    message = encode_batch(group, events)
    if len(message) <= MAX_MESSAGE_BYTES or len(events) == 1:
        return [message]
    half = len(events) // 2
    return _split(group, events[:half]) + _split(group, events[half:])


def encode_columns(cache_group: str, cols: EventColumns) -> bytes:
    """EventColumns → one message (the router's re-encoding of a shard's part)."""
    columns = {}
    for f in FIELDS:
        v = getattr(cols, f)
        if f == "op":
            columns[f] = OP_NAME_ARRAY[v].tolist()
        elif f in NULLABLE_FIELDS:
            columns[f] = [None if x < 0 else x for x in v.tolist()]
        else:
            columns[f] = v.tolist()
    return _head(cache_group) + _encoder.encode(columns) + b"}"


def _observed(name: str, values: list) -> np.ndarray:
    """int64 (int8 for flags) with NO_OBSERVATION for null (byte counts stay far below 2⁶³)."""
    dtype = DTYPES[name]
    try:
        if None not in values:
            return np.array(values, dtype=dtype)
        a = np.array(values, dtype=object)
        a[a == None] = NO_OBSERVATION  # noqa: E711 - elementwise
        return a.astype(dtype)
    except OverflowError:
        raise ValueError(f"message column {name!r}: a value above 2⁶³-1 bytes") from None


def decode_batch(message: bytes | str) -> tuple[str, EventColumns]:
    """The cache group and its events as columns, validated against the contract."""
    fast = _decode_message(message)
    if fast is None:
        return decode_reference(message)
    cols = EventColumns(**fast[1])  # the compiled decoder took it (it declines what msgspec must judge)
    _within_bounds(cols)
    return fast[0], cols


def _within_bounds(cols: EventColumns) -> None:
    """No access above the per-access bound (the parsers reject such records: only a forged
    message holds one), so that a window's sums fit the store's UInt64 counters."""
    if len(cols):
        for name in ("file_size", "bytes_read"):
            top = int(getattr(cols, name).max())
            if top > MAX_ACCESS_BYTES:
                raise ValueError(f"message column {name!r}: {top} bytes is above the {MAX_ACCESS_BYTES:,} bytes "
                                 "(2^48) one access may state")


def decode_reference(message: bytes | str) -> tuple[str, EventColumns]:
    """decode_batch through msgspec only: the reference the compiled decoder is tested against."""
    try:
        doc = _decoder.decode(message)
    except msgspec.DecodeError as e:  # ValidationError included
        raise ValueError(f'message is not {{"cache_group": …, "columns": {{AccessEvent field: [values]}}}}: {e}') \
            from None
    c = doc.columns
    n = len(c.ts)
    for f in DURATION_FIELDS:
        if getattr(c, f) is None:
            setattr(c, f, [None] * n)
    for f in FIELDS:
        if len(getattr(c, f)) != n:
            raise ValueError(f"message column {f!r} has {len(getattr(c, f))} values, ts has {n}")

    def text(values: list[str]) -> np.ndarray:
        a = np.empty(n, dtype=object)
        a[:] = values
        return a

    def number(name: str, dtype) -> np.ndarray:
        try:
            return np.array(getattr(c, name), dtype=dtype)
        except OverflowError:
            raise ValueError(f"message column {name!r}: a value does not fit {np.dtype(dtype).name}") from None

    out: dict[str, np.ndarray] = {}
    for f, kind in FIELD_KINDS.items():
        values = getattr(c, f)
        if kind == "text":
            out[f] = text(values)
        elif kind == "op":
            out[f] = np.fromiter(map(OP_CODES.__getitem__, values), dtype=np.uint8, count=n)
        elif kind in ("observed", "flag", "duration"):
            out[f] = _observed(f, values)
        else:
            out[f] = number(f, DTYPES[f])
    cols = EventColumns(**out)
    _within_bounds(cols)
    return doc.cache_group, cols


def cache_group_of(message: bytes | str) -> str:
    """The cache group, read from the head of the message (full decode only as a fallback)."""
    raw = message.encode() if isinstance(message, str) else message
    if raw.startswith(_PREFIX):
        end = raw.find(b'","columns":', len(_PREFIX))
        if end > 0 and b"\\" not in raw[len(_PREFIX):end]:
            return raw[len(_PREFIX) + 1:end].decode()
    return decode_batch(raw)[0]
