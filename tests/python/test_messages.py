"""The batched Kafka message (cachescope.core.messages): by column, validated like AccessEvents."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cachescope.core.columns import EventColumns
from cachescope.events import FIELD_NAMES
from cachescope.core.messages import cache_group_of, decode_batch, encode_batch, encode_columns
from cachescope.events import AccessEvent


def _event(i: int, **kw) -> AccessEvent:
    d = dict(ts=1_700_000_000_000_000 + i, site="MWT2", source="xrootd-gstream", server="xc1", client="c.example",
             vo="atlas", path=f"/atlas/rucio/mc23/f{i}.root", file_id=2**64 - 1 - i, file_size=10 + i, bytes_read=i % 10,
             op=("read", "write", "delete")[i % 3], tier="DAOD_PHYS", cache_group="MWT2",
             observed_hit_bytes=None if i % 2 else i, observed_miss_bytes=None if i % 2 else 0,
             observed_bypass_bytes=None, origin="file:h:/log", seq=i)
    d.update(kw)
    return AccessEvent(**d)


def assert_columns_equal(a: EventColumns, b: EventColumns) -> None:
    for name in FIELD_NAMES:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert x.tolist() == y.tolist(), name


def test_round_trip_equals_the_events_as_columns():
    events = [_event(i) for i in range(50)]
    group, cols = decode_batch(encode_batch("MWT2", events))
    assert group == "MWT2"
    assert_columns_equal(cols, EventColumns.from_events(events))
    # dicts (the events' JSON form) encode the same message as structs
    assert encode_batch("MWT2", [orjson.loads(orjson.dumps(e, default=lambda s: {
        f: getattr(s, f) for f in s.__struct_fields__})) for e in events]) == encode_batch("MWT2", events)
    # and re-encoding the columns (the router's shard split) gives the message back
    assert encode_columns("MWT2", cols) == encode_batch("MWT2", events)


def test_empty_message():
    group, cols = decode_batch(encode_batch("g", []))
    assert group == "g" and len(cols) == 0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=1, max_size=20),
       st.text(min_size=1, max_size=12))
def test_any_u64_and_any_group_name_survive(ids, group):
    events = [_event(i, file_id=x) for i, x in enumerate(ids)]
    got_group, cols = decode_batch(encode_batch(group, events))
    assert got_group == group == cache_group_of(encode_batch(group, events))
    assert cols.file_id.tolist() == ids


def test_cache_group_read_from_the_head_or_by_decoding():
    m = encode_batch('we"ird\\group', [_event(1)])
    assert cache_group_of(m) == 'we"ird\\group'
    assert cache_group_of(encode_batch("plain", [_event(1)]).decode()) == "plain"


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d["columns"]["op"].__setitem__(0, "stat"), "op"),
    (lambda d: d["columns"]["file_id"].__setitem__(0, -1), "file_id"),
    (lambda d: d["columns"]["path"].pop(), "'path' has 1 values, ts has 2"),
    (lambda d: d["columns"].pop("tier"), "tier"),
    (lambda d: d.pop("columns"), "columns"),
])
def test_invalid_messages_name_the_field(mutate, words):
    doc = orjson.loads(encode_batch("g", [_event(1), _event(2)]))
    mutate(doc)
    with pytest.raises(ValueError, match="message") as e:
        decode_batch(orjson.dumps(doc))
    assert words in str(e.value)


def test_integer_beyond_u64_names_the_column():
    m = encode_batch("g", [_event(1)]).replace(b'"file_size":[11]', b'"file_size":[18446744073709551616]')
    with pytest.raises(ValueError, match="file_size"):
        decode_batch(m)


def test_not_json_at_all():
    with pytest.raises(ValueError, match="message is not"):
        decode_batch(b"\x00garbage")
    with pytest.raises(ValueError):
        cache_group_of(b"{}")


def test_shipper_splits_a_batch_that_would_exceed_kafkas_message_size():
    from ingest.shipper import MAX_MESSAGE_BYTES, _messages

    events = [_event(i, path="/atlas/" + "x" * 2000 + str(i)) for i in range(1200)]
    messages = _messages("MWT2", events)
    assert len(messages) > 1 and all(len(m) <= MAX_MESSAGE_BYTES for m in messages)
    back = EventColumns.concat([decode_batch(m)[1] for m in messages])
    assert_columns_equal(back, EventColumns.from_events(events))  # every event once, in order
    assert _messages("MWT2", events[:10]) == [encode_batch("MWT2", events[:10])]
