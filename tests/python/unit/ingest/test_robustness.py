"""No input makes a parser raise: hypothesis properties per format, and a fuzz run of 100,000
mutated lines per format (real fixture lines and generated lines, mutated deterministically).
A parser bug surfaces as a reject whose reason starts with INTERNAL_ERROR: there must be none,
and every line that gives no event is a reject with a reason."""

from __future__ import annotations

import random
import string

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cachescope.config import load_config
from cachescope.events import U64_MAX
from cachescope.tiers import TierClassifier
from support.data import fixture_lines
from ingest.formats import FORMATS, INTERNAL_ERROR, Access, ParseContext, Reject
from ingest.generate import make_workload, render
from ingest.pipeline import LineParser

FIXTURES_OF = {
    "dcache-billing": ["dcache_billing.txt"],
    "dcache-json": ["dcache_json.jsonl"],
    "xrootd-gstream": ["xrootd_gstream.jsonl"],
    "xrootd-collector": ["xrootd_collector.jsonl"],
    "xcache-reporter": ["xcache_reporter.jsonl"],
    "eos-report": ["eos_report.txt", "eos_report_monit.jsonl"],
    "rucio-trace": ["rucio_trace.jsonl"],
    "http-access": ["http_access.txt"],
    "csv": ["csv_trace.csv", "csv_trace_bytes_read.csv"],
}
KEYS_OF = {
    "dcache-json": ["msgType", "date", "cellName", "cellType", "status", "isWrite", "isP2p", "transferSize",
                    "fileSize", "transferTime", "billingPath", "transferPath", "pnfsid", "protocolInfo", "subject",
                    "client"],
    "xrootd-gstream": ["event", "lfn", "size", "b_hit", "b_miss", "b_bypass", "attach_t", "detach_t", "host", "site",
                       "code", "src", "hostID", "siteID"],
    "xrootd-collector": ["file_lfn", "file_size", "read_bytes", "read_bytes_at_close", "write_bytes", "start_time",
                         "end_time", "server_host", "server_domain", "filename", "filesize", "read", "readv",
                         "write", "@timestamp", "file_path", "bytes_hit_cache", "size", "data", "metadata", "vo"],
    "xcache-reporter": ["type", "file", "size", "bytes_hit", "bytes_miss", "bytes_bypassed", "attached_at",
                        "detached_at", "host", "site"],
    "rucio-trace": ["eventType", "event", "clientState", "filesize", "filename", "name", "scope", "url", "timeStart",
                    "time_start", "traceTimeentryUnix", "remoteSite", "localSite", "hostname", "vo"],
    "eos-report": ["data", "raw", "metadata"],
}

json_scalars = st.one_of(
    st.none(), st.booleans(), st.text(max_size=30),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["0", "-1", "1e400", "18446744073709551616", "2024-01-01T00:00:00Z", "DONE", "read", "write",
                     "file_close", "transfer", "remove", "/store/mc/a/b/AODSIM/c-v1/0/x.root", "root://h//p", ""]),
)
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                           max_leaves=8)


_PIPELINES: dict[str, LineParser] = {}


def _check(fmt: str, line: str, ctx: ParseContext) -> None:
    """The parser alone never raises; through enrichment, every event holds the contract's bounds."""
    result = FORMATS[fmt].parse(line, ctx)
    items = result if isinstance(result, list) else [result]
    for item in items:
        assert isinstance(item, (Access, Reject))
        if isinstance(item, Reject):
            assert item.reason and not item.reason.startswith(INTERNAL_ERROR), (item.reason, line)
        else:
            assert isinstance(item.path, str) and item.op in ("read", "write", "delete")
            assert item.file_size >= 0 and item.bytes_read >= 0 and isinstance(item.ts, int)
    pipeline = _PIPELINES.get(fmt)
    if pipeline is None:
        pipeline = _PIPELINES[fmt] = LineParser(fmt, config=load_config(), classifier=TierClassifier(), year=2024)
    for ev in pipeline.parse_all([line]):
        assert 0 <= ev.bytes_read <= ev.file_size <= U64_MAX and 0 <= ev.ts < 2**63 and ev.file_id <= U64_MAX
    assert pipeline.stats.internal_errors == 0, pipeline.rejects[-1].reason


def _ctx(fmt: str) -> ParseContext:
    ctx = ParseContext(year=2024)
    if FORMATS[fmt].prepare is not None:
        FORMATS[fmt].prepare(ctx)
    return ctx


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("fmt", list(FORMATS))
@PROPERTY
@given(text=st.text(max_size=300))
def test_any_text_never_raises(fmt, text):
    _check(fmt, text, _ctx(fmt))


@pytest.mark.parametrize("fmt", list(FORMATS))
@PROPERTY
@given(data=st.binary(max_size=300))
def test_any_bytes_never_raise(fmt, data):
    _check(fmt, data.decode("utf-8", "replace"), _ctx(fmt))


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f in KEYS_OF])
@PROPERTY
@given(data=st.data())
def test_json_records_with_any_field_values_never_raise(fmt, data):
    keys = KEYS_OF[fmt]
    record = data.draw(st.dictionaries(st.sampled_from(keys), json_values, max_size=len(keys)))
    _check(fmt, _dumps(record), _ctx(fmt))
    seeds = [line for name in FIXTURES_OF[fmt] for line in fixture_lines(name) if _is_json(line)]
    base = orjson.loads(data.draw(st.sampled_from(seeds)))
    if isinstance(base, dict):  # a real record with some fields replaced by anything
        for key in data.draw(st.lists(st.sampled_from(sorted(base) or ["x"]), max_size=4)):
            base[key] = data.draw(json_values)
        _check(fmt, _dumps(base), _ctx(fmt))


@PROPERTY
@given(pairs=st.lists(st.tuples(st.sampled_from(["path", "ots", "otms", "rb", "rvb_sum", "wb", "nwc", "osize", "csize",
                                                   "fid", "sec.app", "dc_ts", "dm_ts", "td", "host", "log", "x"]),
                                  st.one_of(st.text(max_size=20), st.integers(min_value=-5, max_value=2**66).map(str))),
                        max_size=16))
def test_eos_key_values_never_raise(pairs):
    ctx = _ctx("eos-report")
    _check("eos-report", "&".join(f"{k}={v}" for k, v in pairs), ctx)


@PROPERTY
@given(values=st.lists(st.one_of(st.text(alphabet=string.printable, max_size=12),
                                 st.integers(min_value=-(2**65), max_value=2**65).map(str)), min_size=10, max_size=10))
def test_billing_templates_with_any_field_values_never_raise(values):
    ctx = _ctx("dcache-billing")
    v = values
    line = (f"{v[0]} 07:47:49 [pool:{v[1]}:transfer] [{v[2]},{v[3]}] [{v[4]}] <Unknown>:<Unknown>@osm "
            f"{v[5]} {v[6]} {v[7]} {{{v[8]}}} [door:x] {{{v[9]}:\"\"}}")
    _check("dcache-billing", line, ctx)


# --- fuzzing -------------------------------------------------------------------------------------

JUNK = ['"', "{", "}", "[", "]", ":", ",", "&", "=", "\\", "\x00", "é", "😀", " ", "\t", "-1", "1e999",
        "18446744073709551616", "99999999999999999999999", "null", "NaN", "0", "/store/", "rucio/", "%", "%2F"]


def _mutate(rng: random.Random, line: str) -> str:
    for _ in range(rng.randint(1, 3)):
        n = len(line)
        kind = rng.randrange(8)
        i = rng.randrange(n + 1)
        if kind == 0 and n:  # replace a character
            line = line[:i] + rng.choice(string.printable + "é😀\x00") + line[i + 1 :]
        elif kind == 1:  # delete a span
            line = line[:i] + line[i + rng.randint(1, 40) :]
        elif kind == 2:  # duplicate a span
            line = line[:i] + line[i : i + rng.randint(1, 40)] + line[i:]
        elif kind == 3:  # truncate
            line = line[:i]
        elif kind == 4:  # insert junk
            line = line[:i] + rng.choice(JUNK) + line[i:]
        elif kind == 5:  # swap two tokens
            parts = line.replace("&", " ").replace(",", " ").split(" ")
            if len(parts) > 2:
                a, b = rng.randrange(len(parts)), rng.randrange(len(parts))
                parts[a], parts[b] = parts[b], parts[a]
                line = " ".join(parts)
        elif kind == 6:  # a number becomes something else
            digits = [k for k, c in enumerate(line) if c.isdigit()]
            if digits:
                k = rng.choice(digits)
                line = line[:k] + rng.choice(["-", "999999999999999999999", ".5", "e9", "x", ""]) + line[k:]
        else:  # a JSON value changes type
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and obj:
                key = rng.choice(sorted(obj))
                obj[key] = rng.choice([None, True, [], {}, "x", -1, 2**70, 1.5, {"code": "x"}, ["a", 1]])
                line = _dumps(obj)
    return line


def _is_json(line: str) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _dumps(obj) -> str:
    try:
        return orjson.dumps(obj).decode()
    except TypeError:  # integers beyond 64 bits: write them by hand
        import json

        return json.dumps(obj)


@pytest.fixture(scope="module")
def workload():
    return make_workload(4000, days=2, sites=2, servers=2, seed=99)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_fuzz_100k_mutated_lines(fmt, workload):
    seeds = [line for name in FIXTURES_OF[fmt] for line in fixture_lines(name)]
    seeds += [line for _, _, _, line in render(fmt, workload)][:3000]
    rng = random.Random(f"fuzz-{fmt}")
    lines = [_mutate(rng, rng.choice(seeds)) for _ in range(100_000)]
    parser = LineParser(fmt, config=load_config(), classifier=TierClassifier(), year=2024, site="FUZZ")
    events = parser.parse_all(lines)
    stats = parser.stats
    assert stats.internal_errors == 0, [r.reason for r in parser.rejects if r.reason.startswith(INTERNAL_ERROR)][:5]
    assert all(r.reason for r in parser.rejects)
    non_blank = [n for n, line in enumerate(lines, 1) if line.strip("\r\n") and not line.strip("\r\n").isspace()]
    assert stats.lines == len(non_blank)
    # every line gives an event or a reject (a reporter array line may give several)
    with_reject = {r.line for r in parser.rejects}
    assert len(events) + len(parser.rejects) >= stats.lines
    assert stats.events == len(events) and stats.rejected + stats.skipped == len(parser.rejects)
    assert sum(stats.reasons.values()) == len(parser.rejects)
    assert with_reject or events
    for ev in events:
        assert 0 <= ev.bytes_read <= ev.file_size <= U64_MAX and ev.op in ("read", "write", "delete")


# --- nothing lost to defaults: a damaged record is a reject, never an event with made-up values -------

JSON_FORMATS = [f for f in FORMATS if f in KEYS_OF]


@pytest.mark.parametrize("fmt", JSON_FORMATS + ["eos-report"])
@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_deeply_nested_json_is_a_reject(fmt, depth):
    ctx = _ctx(fmt)
    for line in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth, "[" * depth):
        result = FORMATS[fmt].parse(line, ctx)
        items = result if isinstance(result, list) else [result]
        assert all(isinstance(r, Reject) and r.reason and not r.reason.startswith(INTERNAL_ERROR) for r in items)


def _records(fmt: str, workload) -> list[str]:
    seeds = [line for name in FIXTURES_OF[fmt] for line in fixture_lines(name)]
    return seeds + [line for i, _, _, line in render(fmt, workload) if i >= 0][:200]


@pytest.mark.parametrize("fmt", JSON_FORMATS + ["eos-report"])
def test_a_record_cut_anywhere_is_never_an_event(fmt, workload):
    """A line cut in the middle (a truncated file, a torn write) gives a reject with its reason: JSON
    cut anywhere is invalid; an EOS record ends with its sec.* fields, so a cut before them is seen."""
    ctx = _ctx(fmt)
    for line in _records(fmt, workload):
        end = line.find("&sec.") if fmt == "eos-report" and not line.startswith("{") else len(line)
        for cut in range(1, max(1, end)):
            result = FORMATS[fmt].parse(line[:cut], ctx)
            items = result if isinstance(result, list) else [result]
            assert not any(isinstance(r, Access) for r in items), (cut, line[:cut])
            assert all(r.reason for r in items)


@pytest.mark.parametrize("fmt, keys", [
    ("xrootd-gstream", ("b_hit", "b_miss")),
    ("xcache-reporter", ("bytes_hit", "bytes_miss")),
    ("xrootd-collector", ("read_bytes", "read_bytes_at_close")),
    ("eos-report", ("rb", "wb")),
])
def test_a_record_without_its_byte_counts_is_a_reject_not_a_zero_byte_event(fmt, keys, workload):
    ctx = _ctx(fmt)
    checked = 0
    for line in _records(fmt, workload):
        if fmt == "eos-report":
            if line.startswith("{") or "&rb=" not in line:
                continue
            damaged = "&".join(p for p in line.split("&") if p.split("=", 1)[0] not in keys)
        else:
            rec = orjson.loads(line) if _is_json(line) else None
            if not isinstance(rec, dict) or not any(k in rec for k in keys):
                continue
            damaged = orjson.dumps({k: v for k, v in rec.items() if k not in keys}).decode()
        result = FORMATS[fmt].parse(damaged, ctx)
        assert isinstance(result, Reject) and not result.skipped and "missing" in result.reason, (damaged, result)
        checked += 1
    assert checked >= 10
