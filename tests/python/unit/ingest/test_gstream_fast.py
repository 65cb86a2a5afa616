"""The compiled g-stream path — simcore/src/gstream.rs behind `LineParser.column_batches` (parse,
enrich and columns in one pass) — against the Python path it stands in for (`_parse`, the
Enricher, `EventColumns.from_events`): the same columns, rejects, skip reasons, statistics and
stream state for every input — fixture and sample lines, generated logs, mutated lines,
Hypothesis records and edge lines built to hit each branch; and the comparison itself catches a
planted difference on either side."""

from __future__ import annotations

import dataclasses
import gc
import json
import pickle
import random
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cachescope.config import load_config
from cachescope.core.columns import EventColumns
from support.data import fixture_lines
from ingest.formats import xrootd_gstream as gs
from ingest.generate import make_workload, render
from support.mutations import mutate
from ingest.pipeline import LineParser

CONFIG = load_config()


def _run(lines, columns: bool, fmt=gs.FORMAT, **kwargs):
    rejects: list = []
    config = kwargs.pop("config", CONFIG)
    p = LineParser(fmt, config=config, source_name="gstream.jsonl", origin="file:h:/gstream.jsonl",
                   on_reject=rejects.append, **kwargs)
    if columns:
        parts = list(p.column_batches(lines, batch_size=1000))
    else:  # the reference: the Python parser, Enricher and classifier (test_tiers compares the classifiers)
        p.enrich.resolve_path = p.enrich._resolve_in_python
        parts = [EventColumns.from_events(b) for b in p.batches(lines, batch_size=1000)]
    cols = EventColumns.concat(parts)
    return cols, rejects, p.stats.as_dict(), dict(p.ctx.state), p.enrich.seq, p.enrich.clamped


def _outcome(lines, columns: bool, **kwargs):
    try:
        return _run(lines, columns, **kwargs)
    except OverflowError as exc:
        return f"OverflowError: {exc}"


def _compare(lines: list[str], **kwargs) -> None:
    """Both paths over `lines` (as a list and as an iterator, as a file gives them)."""
    want = _outcome(lines, False, **kwargs)
    for source in (lines, iter(lines)):
        got = _outcome(source, True, **kwargs)
        if type(want) is str or type(got) is str:  # an observed_* counter beyond int64: both raise
            assert got == want
            continue
        a, b = want[0], got[0]
        assert len(a) == len(b)
        for name, x in a.columns().items():
            y = getattr(b, name)
            assert x.dtype == y.dtype, name
            if not np.array_equal(x, y):
                i = int(np.flatnonzero(x != y)[0])
                raise AssertionError(f"column {name}, event {i}: {x[i]!r} != {y[i]!r}")
        assert got[1:] == want[1:]


def _fallbacks(lines: list[str]) -> int:
    """Lines the compiled path left to Python."""
    calls = [0]

    def counting(line, ctx):
        calls[0] += 1
        return gs._parse(line, ctx)

    _run(lines, True, fmt=dataclasses.replace(gs.FORMAT, raw=counting))
    return calls[0]


@pytest.fixture(scope="module")
def generated() -> list[str]:
    w = make_workload(6000, days=1, sites=2, servers=3, seed=11)
    return [line for _, _, _, line in render("xrootd-gstream", w)]


def test_fixture_sample_and_generated_lines_agree(generated, shared_dir):
    samples = [line for name in ("xrootd_gstream_pfc_file_close.jsonl", "xrootd_gstream_pfc_atlas_xcache.txt")
               for line in (shared_dir / "samples" / name).read_text().splitlines()]
    _compare(fixture_lines("xrootd_gstream.jsonl") + samples + generated)
    _compare([line + "\n" for line in generated])  # as a file reader hands them over
    assert len(generated) > 8192  # more than one block of lines
    assert _fallbacks(generated) == 0  # the compiled path takes every generated line


def test_site_and_server_settings_agree(generated):
    headless = [line for line in generated[:3000] if '"code"' not in line]  # records before any header
    _compare(headless, server="default-server")
    _compare(generated[:3000], site="OVERRIDE")


def test_cache_group_maps_agree(generated, tmp_path):
    """The cache-group map the compiled path is given (globs with * and ?, server and region modes)
    names the groups Python's CacheGroupConfig does; [...] globs keep the stream on the Python path."""
    headers = ['{"code":"g","src":{"site":"MWT2","host":"xcache0%d.mwt2.org"}}' % i for i in (1, 2, 3)]
    lines = generated[:3000] + [headers[0], _close(), headers[1], _close(), _close(host="", site=""),
                                _close(host="ätlas-xc.cern.ch", site="CERN"), _close(host="a*b?c", site="")]
    for groups in ('{mode: server, overrides: [{server: "xcache0?.mwt2.*", site: "*", group: G1}, '
                   '{server: "*", site: "CERN", group: G2}, {server: "a*b?c", group: G3}]}',
                   '{mode: server, overrides: [{server: "*02*", site: "MW??", group: G1}, {site: "", group: NONE}]}',
                   '{mode: region, region: R1, overrides: [{server: "*.cern.ch", group: G2}]}',
                   '{mode: site}'):
        (tmp_path / "c.yaml").write_text(f"cache_groups: {groups}\n")
        config = load_config(tmp_path / "c.yaml")
        p = LineParser(gs.FORMAT, config=config, on_reject=lambda r: None)
        assert gs.FORMAT.columns(p.ctx, p.enrich) is not None
        _compare(lines, config=config)
        _compare(lines, config=config, server="srv0", site="SITE")
        cols = _run(lines, True, config=config)[0]
        assert len(set(cols.cache_group.tolist())) >= 2 or "site" in groups, set(cols.cache_group.tolist())
    (tmp_path / "c.yaml").write_text('cache_groups: {overrides: [{server: "xcache0[12]*", group: G1}]}\n')
    p = LineParser(gs.FORMAT, config=load_config(tmp_path / "c.yaml"), on_reject=lambda r: None)
    assert gs.FORMAT.columns(p.ctx, p.enrich) is None  # fnmatch's sets are Python's
    _compare(lines, config=load_config(tmp_path / "c.yaml"))


def _close(**fields) -> str:
    rec = {"event": "file_close", "lfn": "atlas/rucio/mc23_13p6TeV/f1/52/AOD.20055714._000164.pool.root.1",
           "size": 1000, "attach_t": 1704067232, "detach_t": 1704067243, "remotes": ["o:1094"],
           "b_hit": 100, "b_miss": 200, "b_bypass": 0}
    for k, v in fields.items():
        if v is _DROP:
            rec.pop(k, None)
        else:
            rec[k] = v
    return json.dumps(rec, separators=(",", ":"))


_DROP = object()
_HEADER = '{"code":"g","pseq":0,"src":{"site":"MWT2","host":"xc1.mwt2.org","port":1094},"gs":{"type":"C"}}'


def test_edge_lines_agree():
    """Each branch on purpose: headers of every shape, zero-byte closes, missing counters, times in
    s/ms/µs/ns and out of range, attach 0 or null, clamped bytes, counters beyond int64, values
    Python converts (floats, strings) or rejects (negative, null), repeated keys, escapes, other
    events, damaged JSON, blank lines and white space."""
    big = 2**63
    lines = [
        _close(), _HEADER, _close(), _close(host="own-host", site="OWN"), _close(host="", site=""), _close(host=5),
        '{"code":"g","src":{"host":5,"site":["x"]}}', _close(), '{"code":"g","src":"text"}', _close(),
        '{"hostID":"h9.cern.ch:1094","siteID":"CERN"}', _close(), '{"hostID":"nocolon"}', _close(),
        '{"code":"g","hostID":7}', _close(), '{"code":"g","src":{"host":"a","host":"b"}}', _close(),
        '{"code":"h","src":{"host":"x"}}', '{"code":"g"}', _close(),
        _close(b_hit=0, b_miss=0), _close(b_hit=0, b_miss=0, size=-1), _close(b_hit=_DROP, b_miss=_DROP),
        _close(b_hit=_DROP), _close(b_miss=_DROP, b_bypass=7), _close(b_bypass=None), _close(b_hit=None),
        _close(b_hit=1.0), _close(b_hit="5"), _close(b_hit=-1), _close(b_hit=big - 1), _close(b_miss=2**64), _close(b_hit=10**25),
        _close(size=50), _close(size=0), _close(size=2**64 - 1), _close(size=2**64), _close(size="12"),
        _close(size=1e3), _close(size=None), _close(size=_DROP), _close(size=True),
        _close(attach_t=0), _close(attach_t=None), _close(attach_t=_DROP), _close(attach_t=0, detach_t=_DROP),
        _close(attach_t=0, detach_t=0), _close(attach_t=1704067232123), _close(attach_t=1704067232123456),
        _close(attach_t=1704067232123456789), _close(attach_t=99999999999999999999), _close(attach_t=10**20),
        _close(attach_t=-5), _close(attach_t=1.5e9), _close(attach_t="1704067232"), _close(attach_t=1),
        _close(attach_t=10**11), _close(attach_t=10**11 - 1), _close(attach_t=9223372036854775),
        _close(attach_t=9223372036854776), _close(attach_t=False), _close(attach_t=True),
        _close(lfn=""), _close(lfn=None), _close(lfn=5), _close(lfn=_DROP), _close(lfn="/store/x/é/ü.root"),
        _close(lfn="root://host//store/mc/a/AODSIM/b/c.root?x=1"), _close(lfn="/store/a\\b"),
        _close(lfn="tab\there"), _close(lfn="/x\u2028y"), _close(event=None), _close(event=_DROP),
        _close(event=_DROP, b_hit=_DROP), _close(event="open"), _close(event="file_open"), _close(event=5),
        _close(event="x" * 60), _close(event="line\nbreak"), '{"event":"file_close","lfn":"/a","lfn":"/b","size":9,"b_hit":1,"attach_t":1}',
        '{"event":"file_close","size":9,"b_hit":1,"attach_t":1,"x":1,"x":2,"lfn":"/a"}',
        ' ' + _close(), _close() + ' ', _close() + '\r', '\t' + _close(), _close().replace(",", " , "),
        _close().replace(":", ": "), '{ }', '{}', '[]', '{"bababa"}', 'null', '"text"', '', '   ', '\x0b',
        _close()[:-1], _close() + '}', _close().replace('"size"', '"si\\u007ae"'), _close(x={"a": [1, {"b": None}]}),
        _close(x=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]), _close(x=1.5), _close(x=1e400),
        _close(x=-0), _close(x=True), _close(x="a\"b"), _close(x=10**30), _close(remotes=[]),
        _close().replace('"size":1000', '"size":01000'), _close().replace('"size":1000', '"size":-0'),
        'g12345678901234567890123' + _HEADER, 'g12345678901234567890123' + _close(),
        _close(lfn="/same/path/AOD.1.root"), _close(lfn="/same/path/AOD.1.root", host="other"),
        # the server ident, the verdict's keys, access_cnt growth, raw binary headers split by a newline byte
        '{"code":"=","src":{"site":"S2","host":"id-host","pgm":"xrootd"}}', _close(), '{"code":"="}', _close(),
        _close(remotes=["a", "b"]), _close(remotes="x"), _close(remotes=None), _close(remotes=_DROP),
        _close(remotes={"a": 1}), _close(remotes=[], b_miss=0), _close(remotes=[], b_miss=0, b_todisk=0, b_prefetch=0),
        _close(remotes=[], b_miss=0, b_todisk=5), _close(remotes=_DROP, b_miss=0, b_todisk=0), _close(b_todisk="5"),
        _close(b_todisk=-1), _close(b_todisk=1.0), _close(b_prefetch=None), _close(b_todisk=True),
        _close(b_prefetch=2**64), _close(remotes=[], b_miss=0, b_bypass=3),
        _close(lfn="/c/AOD.2.root", access_cnt=1), _close(lfn="/c/AOD.2.root", access_cnt=5),
        _close(lfn="/c/AOD.2.root", access_cnt=5), _close(lfn="/c/AOD.2.root", access_cnt=2, b_hit=0, b_miss=0),
        _close(lfn="/c/AOD.2.root", access_cnt=4, b_hit=7, b_miss=0), _close(lfn="/c/AOD.2.root", access_cnt="9"),
        _close(lfn="/c/AOD.2.root", access_cnt=0), _close(lfn="/c/AOD.2.root", access_cnt=2**64 - 1),
        _close(lfn="/c/AOD.2.root", access_cnt=2**64), _close(lfn="/c/AOD.2.root", access_cnt=1.5),
        _close(lfn="/c/AOD.2.root", access_cnt=True), _close(lfn="/c/AOD.2.root", access_cnt=None),
        _close(lfn="/c/AOD.3.root", access_cnt=1, size=10), _close(lfn="/c/AOD.3.root", access_cnt=4, size=10, b_hit=95, b_miss=2),
        _close(lfn="/c/AOD.3.root", access_cnt=70, size=10), _close(lfn="/c/AOD.3.root", access_cnt=71, host="h2"),
        _close(lfn="/c/AOD.3.root", access_cnt=72, b_hit=0, b_miss=0, size=-1), _close(lfn="/c/AOD.3.root", access_cnt=74),
        'g\x07', '\x0bUk\tD' + _close(), 'g', 'abc', 'Qk' + _close(lfn="/c/AOD.4.root"), 'abc', 'g' + '{' * 30,
        'g\x01{\x02' + 'x' * 20 + _close(), _close(lfn="/c/AOD.2.root", access_cnt=6),
    ]
    _compare(lines)
    _compare(lines, server="srv0", site="SITE")
    assert type(_outcome(lines, True)) is tuple  # compared event by event, not as two equal errors
    for line in (_close(b_hit=big), _close(b_miss=2**64 - 1)):  # fits the contract: clamped to the bytes read
        _compare([line])
        cols = _outcome([line], True)[0]
        assert cols.observed_hit_bytes.max() <= 1000 and cols.observed_miss_bytes.max() <= 1000
    for line in (_close(b_hit=big, size=2**64 - 1), _close(size=big, b_miss=big), _close(size=2**48 + 1)):
        _compare([line])  # above the per-access bound (2^48 bytes): a reject naming it on both paths, never a raise
        cols, rejects = _outcome([line], True)[:2]
        assert len(cols) == 0 and [r.reason.split(":")[0] for r in rejects] == ["file size"], rejects
    _compare([_close(size=2**48, b_hit=2**48)])  # the bound itself is an access
    assert len(_outcome([_close(size=2**48, b_hit=2**48)], True)[0]) == 1


def test_a_line_is_a_header_only_if_it_parses_as_one():
    """A `g` line with no JSON record within the 24 header bytes is a reject; a short one is held as
    a piece of a header cut by a newline byte, and the line after it decides: it completes the
    header (the piece is skipped) or not (both are rejects); a record after a piece ends the header
    on the compiled path too (it declines while a piece is held)."""
    garbage = ["garbage", "this is not a log"]
    _compare(garbage)
    cols, rejects, stats = _run(garbage, True)[:3]
    assert len(cols) == 0 and stats["rejected"] == 2 and stats["skipped"] == 0, (rejects, stats)
    assert [r.line for r in rejects] == [1, 2] and all(r.reason.startswith("not a g-stream record") for r in rejects)
    long_g = ["g" + "x" * 40]
    _compare(long_g)
    assert [r.reason.split(":")[0] for r in _run(long_g, True)[1]] == ["not a g-stream record"]
    split = ["g\x07", "\x01\x02" + _close()]  # a real header cut by a newline byte, then its record
    _compare(split)
    cols, rejects, stats = _run(split, True)[:3]
    assert len(cols) == 1 and stats["skipped"] == 1 and stats["rejected"] == 0
    after = ["gabc", _close(), "short", "g\x01", "{not json"]
    _compare(after)
    cols, rejects, stats = _run(after, True)[:3]
    assert len(cols) == 1 and (stats["skipped"], stats["rejected"]) == (1, 3), (rejects, stats)
    assert [r.line for r in rejects if not r.skipped] == [3, 4, 5]


DELIMS = ['"', "{", "}", "[", "]", ":", ",", " ", "\t", "\\", "é", "-", "0", "1e5", ".5", "null", "true",
          '"file_close"', '"event":', '"lfn":', '"b_hit":', '"code":"g",', "\u2028", "\x00"]



def test_mutated_lines_agree(generated):
    rng = random.Random("gstream-fast")
    seeds = fixture_lines("xrootd_gstream.jsonl") + generated
    _compare([mutate(rng, rng.choice(seeds), DELIMS) for _ in range(20_000)])


_VALUE = st.one_of(st.integers(-3, 2**65), st.sampled_from([0, 1, 10**11, 10**14, 10**17, 10**20, 2**63, 2**64]),
                   st.floats(allow_nan=False), st.text(max_size=6), st.none(), st.booleans(),
                   st.lists(st.integers(0, 9), max_size=2))
_KEYS = ["event", "lfn", "size", "b_hit", "b_miss", "b_bypass", "attach_t", "detach_t", "host", "site", "code",
         "hostID", "siteID", "src", "other"]


@settings(max_examples=300, deadline=None)
@given(records=st.lists(st.dictionaries(st.sampled_from(_KEYS), st.one_of(
    _VALUE, st.sampled_from(["file_close", "g", "/store/a/AOD/f.root", "h1:1094"]),
    st.dictionaries(st.sampled_from(["host", "site", "port"]), _VALUE, max_size=3))), min_size=1, max_size=8),
    spaced=st.booleans())
def test_hypothesis_records_agree(records, spaced):
    sep = (", ", ": ") if spaced else (",", ":")
    _compare([json.dumps(r, separators=sep) for r in records])


def test_the_comparison_catches_planted_differences(generated, monkeypatch):
    """Sensitivity: a wrong cache-group map given to the compiled path, or a Python reference
    whose times are off by one, each make the comparison fail."""
    lines = generated[:2000]
    made = gs.GstreamColumns

    def planted(*args):
        overrides, mode, region = args[7]
        return made(*args[:7], ([("*", "*", "PLANTED"), *overrides], mode, region), *args[8:])

    monkeypatch.setattr(gs, "GstreamColumns", planted)
    with pytest.raises(AssertionError, match="column cache_group"):
        _compare(lines)
    monkeypatch.undo()
    _compare(lines)
    close = gs._close

    def shifted(r, ctx):
        a = close(r, ctx)
        if type(a) is gs.Access:
            a.ts += 1
        return a

    monkeypatch.setattr(gs, "_close", shifted)
    with pytest.raises(AssertionError, match="column ts"):
        _compare(lines)


def test_clamped_and_seq_carry_over_fallback_lines():
    """Python-parsed lines between compiled ones share the seq counter and the clamp count."""
    lines = [_close(size=50), _close(size="60"), _close(size=70), _close(attach_t=1.5e9, size=10), _close()]
    _compare(lines)
    cols, _, stats, _, seq, clamped = _run(lines, True)
    assert cols.seq.tolist() == [0, 1, 2, 3, 4] and seq == 5
    assert clamped == 4 and stats["clamped"] == 4


def test_the_compiled_path_never_calls_into_python(generated, monkeypatch):
    """The builder is given the tier rules, the cache-group map and the stream state when it is
    made: while it scans, no Python function runs (a profiler sees every call from Rust into
    Python code), the Enricher's classifier and group callables may be gone, and the access
    counts live in the stream's GstreamState, not in a dict of ctx.state."""
    lines = generated[:5000] + [_close(lfn="/c/AOD.2.root", access_cnt=1), _close(lfn="/c/AOD.2.root", access_cnt=4)]
    want = _run(lines, False)
    p = LineParser(gs.FORMAT, config=CONFIG, source_name="gstream.jsonl", origin="file:h:/gstream.jsonl",
                   on_reject=lambda r: None)

    def gone(*args):
        raise AssertionError("the compiled path called back into Python")

    monkeypatch.setattr(p.enrich, "resolve_path", gone)
    monkeypatch.setattr(p.enrich, "group_for", gone)
    builder = gs.FORMAT.columns(p.ctx, p.enrich)
    calls: list = []

    def profile(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_qualname)

    skips: list = []
    gc.disable()  # a collection's callbacks (gc.callbacks) are no call of the builder's
    sys.setprofile(profile)
    try:
        end = builder.scan(lines, 0, skips)
    finally:
        sys.setprofile(None)
        gc.enable()
    assert calls == [] and end == len(lines)
    got = EventColumns(**builder.take())
    for name, x in want[0].columns().items():
        assert np.array_equal(x, getattr(got, name)), name
    state = p.ctx.state
    assert set(state) == {"gstream"} and state["gstream"] == want[3]["gstream"]
    st = state["gstream"]
    assert st.count(st.host, "/c/AOD.2.root") == 4  # the last header's server: its count grew 1 -> 4


def test_the_stream_state_is_kept_across_a_checkpoint():
    """GstreamState pickles (the collector's checkpoints hold its ParseContexts) and compares by value."""
    st = gs.GstreamState()
    st.host, st.site = "h1", "S"
    assert (st.accesses("h1", "/a", 3), st.accesses("h1", "/a", 5), st.accesses("h1", "/a", 5 + 65)) == (1, 2, 1)
    again = pickle.loads(pickle.dumps(st))
    assert again == st and again is not st and (again.host, again.site, again.count("h1", "/a")) == ("h1", "S", 70)
    assert again.accesses("h1", "/a", 72) == 2 and again != st and again.count("h2", "/a") is None
