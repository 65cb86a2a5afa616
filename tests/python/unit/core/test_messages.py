"""The batched Kafka message (cachescope.core.messages): by column, validated like AccessEvents."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cachescope.core.columns import EventColumns
from cachescope.events import FIELD_NAMES
from cachescope.units import MAX_ACCESS_BYTES
from cachescope.core.messages import cache_group_of, decode_batch, encode_batch, encode_columns, encode_messages
from cachescope.events import AccessEvent


def _event(i: int, **kw) -> AccessEvent:
    d = dict(ts=1_700_000_000_000_000 + i, site="MWT2", source="xrootd-gstream", server="xc1", client="c.example",
             vo="atlas", path=f"/atlas/rucio/mc23/f{i}.root", file_id=2**64 - 1 - i, file_size=10 + i, bytes_read=i % 10,
             op=("read", "write", "delete")[i % 3], tier="DAOD_PHYS", cache_group="MWT2",
             observed_hit_bytes=None if i % 2 else i, observed_miss_bytes=None if i % 2 else 0,
             observed_bypass_bytes=None, observed_hit=None if i % 3 == 0 else i % 2,
             observed_origin_bytes=None if i % 3 == 0 else 7 * i, origin="file:h:/log", seq=i)
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


@pytest.mark.parametrize("column", ["file_size", "bytes_read"])
def test_an_access_above_the_per_access_bound_is_a_rejected_message_with_its_reason(column):
    """2^48 bytes per access (cachescope.units.MAX_ACCESS_BYTES): the parsers reject beyond it, so
    only a forged message holds one; the Flink job rejects it whole with its reason (never a
    window counter overflowing into an internal error)."""
    from cachescope.units import MAX_ACCESS_BYTES
    from runners.flink import read_message

    at = encode_batch("g", [_event(1)])
    field = f'"{column}":['.encode()
    start = at.index(field) + len(field)
    end = at.index(b"]", start)
    assert decode_batch(at[:start] + str(MAX_ACCESS_BYTES).encode() + at[end:])  # the bound itself is data
    m = at[:start] + str(2**63 - 1).encode() + at[end:]
    with pytest.raises(ValueError, match=f"{column}.*above the 281,474,976,710,656 bytes"):
        decode_batch(m)
    cols, reject = read_message("g", m)
    assert cols is None and "bad message" in orjson.loads(reject)["reason"] and column in reject


def test_not_json_at_all():
    with pytest.raises(ValueError, match="message is not"):
        decode_batch(b"\x00garbage")
    with pytest.raises(ValueError):
        cache_group_of(b"{}")


def test_a_batch_that_would_exceed_kafkas_message_size_is_split():
    from cachescope.core.messages import MAX_MESSAGE_BYTES, MESSAGE_EVENTS, encode_messages

    events = [_event(i, path="/atlas/" + "x" * 2000 + str(i)) for i in range(1200)]
    messages = list(encode_messages(events))
    assert len(messages) > 1 and all(len(m) <= MAX_MESSAGE_BYTES and g == "MWT2" for g, m in messages)
    back = EventColumns.concat([decode_batch(m)[1] for _, m in messages])
    assert_columns_equal(back, EventColumns.from_events(events))  # every event once, in order
    assert list(encode_messages(events[:10])) == [("MWT2", encode_batch("MWT2", events[:10]))]
    many = [_event(i) for i in range(MESSAGE_EVENTS + 1)]
    assert [len(decode_batch(m)[1]) for _, m in encode_messages(many)] == [MESSAGE_EVENTS, 1]


def test_events_of_several_cache_groups_round_trip_by_group_in_order():
    import msgspec

    events = [msgspec.structs.replace(_event(i), cache_group=g) for i, g in enumerate("abacb")]
    messages = list(encode_messages(events))
    assert [g for g, _ in messages] == ["a", "b", "c"]
    for group, message in messages:
        named, cols = decode_batch(message)
        assert named == group == cache_group_of(message)
        assert_columns_equal(cols, EventColumns.from_events([e for e in events if e.cache_group == group]))


# --- the compiled decoder (simcore/src/messages.rs) against msgspec's path ---------------------

def _python_decode(message):
    """decode_batch through msgspec only: the reference."""
    from cachescope.core.messages import decode_reference

    return decode_reference(message)


def _outcome(decode, message):
    try:
        group, cols = decode(message)
    except ValueError as e:
        return "ValueError", str(e)
    return group, {f: (getattr(cols, f).dtype.str, getattr(cols, f).tolist()) for f in FIELD_NAMES}


def _agree(message) -> bool:
    """Both decoders give the same columns (or the same error); True when the compiled one took it."""
    from cachescope._simcore import decode_message

    assert _outcome(decode_batch, message) == _outcome(_python_decode, message), message[:300]
    return decode_message(message) is not None


def test_the_compiled_decoder_knows_the_contracts_fields_and_takes_plain_messages():
    from cachescope._simcore import MESSAGE_FIELDS
    import cachescope.core.messages as m

    assert tuple(MESSAGE_FIELDS) == FIELD_NAMES and m._decode_message is not None
    events = [_event(i) for i in range(50)]
    for message in (encode_batch("MWT2", events), encode_batch("MWT2", events).decode(), encode_batch("g", []),
                    encode_columns("MWT2", EventColumns.from_events(events))):
        assert _agree(message)  # taken compiled, same columns
    spaced = orjson.dumps(orjson.loads(encode_batch("g", events[:3])), option=orjson.OPT_INDENT_2)
    assert _agree(spaced) and _agree(b' {"extra": {"a": [1, null, true]}, ' + encode_batch("g", events[:2])[1:])


@pytest.mark.parametrize("message", [
    b'{"cache_group":"g","columns":{}}', b'{"columns":{}}', b"[]", b"", b"null", b'{"cache_group":1,"columns":{}}',
    b'{"cache_group":"a\\"b","columns":{}}', b'{"cache_group":"g","cache_group":"h","columns":{}}',
    b'{"cache_group":"g","columns":[]} x', b"\xff\xfe",
])
def test_messages_the_compiled_decoder_declines_get_pythons_answer(message):
    full = encode_batch("g", [_event(1), _event(2)])
    assert not _agree(message)
    for old, new in [(b'"ts":[', b'"ts":[-'), (b'"seq":[1,', b'"seq":[1.0,'), (b'"file_size":[11,', b'"file_size":[1e1,'),
                     (b'"op":["write"', b'"op":["stat"'), (b'"vo":["atlas"', b'"vo":[null'), (b'"seq":[1,', b'"seq":[true,'),
                     (b'"path":["', b'"path":["\\u00e9'), (b'"seq":[1,2]', b'"seq":[1]'), (b'"tier":', b'"tier_":'),
                     (b'"observed_hit_bytes":[null,', b'"observed_hit_bytes":[9223372036854775808,'),
                     (b'"seq":[1,', b'"seq":[18446744073709551616,'), (b'"ts":[', b'"ts":[9223372036854775808,'),
                     (b'"observed_hit":[1,', b'"observed_hit":[2,'), (b'"observed_hit":[1,', b'"observed_hit":[-1,')]:
        assert old in full, old
        assert not _agree(full.replace(old, new, 1)), new


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x7f"), max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "ts": st.integers(-2, 2**63 - 1), "site": _TEXT, "path": _TEXT, "file_id": st.integers(0, 2**64 - 1),
    "file_size": st.integers(0, 2**64 - 1), "bytes_read": st.integers(0, 2**64 - 1),
    "op": st.sampled_from(["read", "write", "delete"]), "tier": _TEXT,
    "observed_hit_bytes": st.none() | st.integers(0, 2**64 - 1), "observed_hit": st.none() | st.integers(0, 1),
    "seq": st.integers(0, 2**64 - 1)}), max_size=6),
    _TEXT)
def test_the_compiled_decoder_agrees_on_generated_messages(events, group):
    _agree(encode_batch(group, [_event(i, **e) for i, e in enumerate(events)]))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_compiled_decoder_agrees_on_damaged_messages(data):
    full = bytearray(encode_batch("MWT2", [_event(i) for i in range(3)]))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(full) - 1))
        full[at:at + data.draw(st.integers(0, 3))] = data.draw(st.sampled_from(
            [b"", b",", b"]", b"[", b"}", b"{", b'"', b"0", b"-1", b"null", b" ", b"x", b"1.5", b"99999999999999999999"]))
    _agree(bytes(full))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", 'we"ird\\', "é"]), st.integers(0, MAX_ACCESS_BYTES),
                          st.none() | st.integers(0, 2**63 - 1)), max_size=40))
def test_any_events_round_trip_through_the_one_definition(rows):
    """encode_messages → decode_batch gives each cache group its events, in order, as columns (sizes
    up to the per-access bound: beyond it a message is refused, test_an_access_above_…)."""
    import msgspec

    events = [msgspec.structs.replace(_event(i), cache_group=g, file_size=size, observed_hit_bytes=hit)
              for i, (g, size, hit) in enumerate(rows)]
    seen = []
    for group, message in encode_messages(events):
        named, cols = decode_batch(message)
        assert named == group == cache_group_of(message)
        seen.append((group, cols))
    for group in dict.fromkeys(e.cache_group for e in events):
        cols = EventColumns.concat([c for g, c in seen if g == group])
        assert_columns_equal(cols, EventColumns.from_events([e for e in events if e.cache_group == group]))
