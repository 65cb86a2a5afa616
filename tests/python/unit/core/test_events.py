import dataclasses
import json

import jsonschema
import msgspec
import numpy as np
import pytest

from cachescope.events import (
    SCHEMA_PATH,
    U64_MAX,
    AccessEvent,
    decode_lines,
    encode_lines,
    file_id_of,
    schema,
    schema_text,
)
from cachescope.core.columns import EventColumns
from cachescope.events import FIELD_NAMES


def _event(**kw):
    base = dict(
        ts=1_700_000_000_000_000, site="MWT2", source="csv", server="pool1", client="", vo="atlas",
        path="/atlas/rucio/mc16_13TeV/61/1d/EVNT.18541195._000368.pool.root.1", file_id=U64_MAX,
        file_size=5 * 2**30, bytes_read=2**31, op="read", tier="EVNT", cache_group="MWT2",
        observed_hit_bytes=None, observed_miss_bytes=None, observed_bypass_bytes=None, observed_hit=None, observed_origin_bytes=None,
        origin="file:h:/log", seq=0,
    )
    base.update(kw)
    return AccessEvent(**base)


def test_published_schema_is_up_to_date():
    assert SCHEMA_PATH.read_text() == schema_text(), "run: python -m cachescope.events --write"


def test_schema_is_valid_and_strict_on_u64_and_op():
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    validator = jsonschema.Draft202012Validator(s)
    good = json.loads(encode_lines([_event()]))
    validator.validate(good)
    for field, bad in (("file_id", U64_MAX + 1), ("file_size", -1), ("op", "stat"), ("observed_hit_bytes", "x"),
                       ("observed_hit", 2), ("observed_hit", -1)):
        doc = dict(good, **{field: bad})
        assert list(validator.iter_errors(doc)), field
    missing = dict(good)
    del missing["seq"]
    assert list(validator.iter_errors(missing))


def test_json_field_order_and_null_observed():
    line = encode_lines([_event()]).decode()
    assert list(json.loads(line)) == [
        "ts", "site", "source", "server", "client", "vo", "path", "file_id", "file_size", "bytes_read", "op",
        "tier", "cache_group", "observed_hit_bytes", "observed_miss_bytes", "observed_bypass_bytes", "observed_hit",
        "observed_origin_bytes", "origin", "seq", "duration_us",
    ]
    assert '"observed_hit_bytes":null' in line
    assert '"file_id":18446744073709551615' in line


def test_decode_lines_roundtrip():
    events = [_event(seq=i, observed_hit_bytes=i) for i in range(3)]
    assert decode_lines(encode_lines(events)) == events


def test_decode_lines_rejects_out_of_range_and_bad_op():
    too_big = encode_lines([_event()]).replace(b"18446744073709551615", b"18446744073709551616")
    with pytest.raises(msgspec.ValidationError, match="file_id"):
        decode_lines(too_big)
    with pytest.raises(msgspec.ValidationError):
        decode_lines(encode_lines([_event()]).replace(b'"read"', b'"stat"'))


def test_file_id_is_xxh3_of_path():
    import xxhash

    p = "/store/mc/Fall10/X/AODSIM/V-v1/0003/a.root"
    assert file_id_of(p) == xxhash.xxh3_64_intdigest(p.encode())
    assert file_id_of(p) != file_id_of(p + "x")


def test_columns_from_structs_and_from_json_dicts_agree():
    events = [
        _event(file_id=U64_MAX, file_size=6 * 2**30, bytes_read=6 * 2**30, op="read", ts=5, tier="HITS"),
        _event(file_id=1, file_size=10, bytes_read=10, op="write", ts=-3, tier="AOD", observed_hit_bytes=4),
        _event(file_id=2, file_size=0, bytes_read=0, op="delete", ts=7, tier="HITS"),
    ]
    cols = EventColumns.from_events(events)
    assert cols.file_id.dtype == np.uint64 and cols.file_id[0] == np.uint64(U64_MAX)
    assert cols.file_size.dtype == np.uint64 and cols.file_size[0] == 6 * 2**30
    assert cols.bytes_read.dtype == np.uint64
    assert cols.op.dtype == np.uint8 and cols.op.tolist() == [0, 1, 2]
    assert cols.ts.dtype == np.int64 and cols.ts.tolist() == [5, -3, 7]
    assert cols.tier.tolist() == ["HITS", "AOD", "HITS"]
    assert cols.observed_hit_bytes.tolist() == [-1, 4, -1]
    dicts = EventColumns.from_events([json.loads(line) for line in encode_lines(events).splitlines()])
    for name in FIELD_NAMES:
        assert getattr(dicts, name).tolist() == getattr(cols, name).tolist(), name
    empty = EventColumns.from_events([])
    assert len(empty) == 0 and empty.op.dtype == np.uint8
