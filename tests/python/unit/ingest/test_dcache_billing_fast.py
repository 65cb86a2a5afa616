"""dCache billing's compiled path over lists of lines (`_block` → simcore/src/billing.rs) against
the template regexes (`_parse`, the Python reference): the same event, the same reject reason and
the same learnt pnfsids for every line — fixture lines, the shared samples, generated logs,
mutated lines, hypothesis lines and edge lines built to hit each branch."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.data import fixture_lines
from ingest.formats import BadRecord, ParseContext, Reject
from ingest.formats import dcache_billing as billing
from ingest.generate import make_workload, render
from support.mutations import mutate


def _ctx() -> ParseContext:
    ctx = ParseContext(site="S", year=2024)
    billing.prepare(ctx)
    return ctx


def _outcome(parse, line: str, ctx: ParseContext):
    try:
        return parse(line, ctx)
    except BadRecord as exc:
        return ("BadRecord", exc.reason, exc.skipped)


def _compare(lines: list[str]) -> int:
    """The compiled path against the templates on `lines` in order (as given, and with line ends
    as a block reader hands them over); returns how many lines it left to the templates."""
    in_python = _compare_block(lines)
    _compare_block([line + "\n" for line in lines])
    return in_python


def _compare_block(lines: list[str]) -> int:
    """The compiled block path (simcore/src/billing.rs via _block) against the templates on
    the same lines, in order: the same results and memo; returns lines it left to Python."""
    block_ctx, slow_ctx = _ctx(), _ctx()
    got = billing._block(lines, block_ctx)
    assert got is not None and len(got) == len(lines)
    for line, result in zip(lines, got):
        line = line.rstrip("\r\n")
        if not line or line.isspace():
            assert result is None, line
            continue
        slow = _outcome(billing._parse, line, slow_ctx)
        if type(slow) is tuple:
            slow = Reject(slow[1], slow[2])
        assert result == slow, line
    assert block_ctx.memo == slow_ctx.memo
    return block_ctx.state.get("dcache_billing_in_python", 0)


@pytest.fixture(scope="module")
def generated() -> list[str]:
    w = make_workload(3000, days=1, sites=1, servers=3, seed=7)
    return [line for _, _, _, line in render("dcache-billing", w)]


def test_fixture_sample_and_generated_lines_agree(generated):
    sample = Path("/work/shared/samples/dcache_billing_text.txt")
    lines = fixture_lines("dcache_billing.txt") + (sample.read_text().splitlines() if sample.exists() else [])
    _compare(lines + generated)
    assert _compare_block(generated) < 0.1 * len(generated)  # the compiled path takes the common lines


def test_compiled_path_memo_limit_and_pipeline(generated, monkeypatch):
    """The memo starting over at its limit happens at the same lines both ways, and LineParser
    (which uses the block path for lists) gives the same events as line-by-line parsing."""
    from ingest.formats import _base

    monkeypatch.setattr(billing, "MEMO_LIMIT", 50)  # the compiled path
    monkeypatch.setattr(_base, "MEMO_LIMIT", 50)  # ctx.remember (the templates)
    _compare_block(generated[:4000])
    from ingest.pipeline import LineParser

    def events(lines, fmt="dcache-billing"):
        p = LineParser(fmt, site="S", year=2024, record_skipped=False)
        return p.parse_all(lines), p.stats.as_dict()

    templates = dataclasses.replace(billing.FORMAT, block=None)  # the reference, line by line
    assert events(generated) == events(iter(generated)) == events(generated, templates)


DELIMS = ['"', "{", "}", "[", "]", ":", ",", "@", "-", " ", "  ", "\t", "é", "] ", "] [", '"}', ":\"", "<Unknown>",
          "true", "false", "0", "-1", "x", "A", "request", "remove", "transfer", "١", "²"]



def test_mutated_lines_agree(generated):
    rng = random.Random("billing-fast")
    seeds = fixture_lines("dcache_billing.txt") + generated
    _compare([mutate(rng, rng.choice(seeds), DELIMS) for _ in range(40_000)])


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(st.text(alphabet='0123456789abcdef-:,"{}[]@ <>UnknowtrfalsOK', max_size=8),
                                 st.sampled_from(["0", "-3", "true", "false", "<Unknown>", "a@b", "Unknown", ""])),
                       min_size=12, max_size=12))
def test_template_shaped_lines_agree(values):
    v = values
    _compare([
        f"01.02 07:47:{v[0][:2]:0>2} [pool:{v[1]}:transfer] [{v[2]},{v[3]}] [{v[4]}] {v[5]} {v[6]} {v[7]} {v[8]} "
        f"{{{v[9]}}} [{v[10]}] {{{v[11]}:\"m\"}}",
        f"01.02 07:47:49 [door:{v[1]}:{v[0]}] [\"{v[2]}\":{v[3]}:{v[4]}:{v[5]}] [{v[6]},{v[7]}] [{v[8]}] "
        f"{v[9]} {v[10]} 0 {{{v[11]}:\"\"}}",
    ])


def _mover(pnfsid="00AB", size="100", path="/a/f", moved="100", created="false", proto="Xrootd-5.0:h1:1094",
           init="door:D@d:1", rc="0", date="01.02 07:47:49", cell="pool1@poolDomain") -> str:
    return (f"{date} [pool:{cell}:transfer] [{pnfsid},{size}] [{path}] <Unknown>:<Unknown>@osm {moved} 40 {created} "
            f"{{{proto}}} [{init}] {{{rc}:\"msg\"}}")


def _door(mtype="request", pnfsid="00AB", path="/a/f", chain="10.0.0.1,1.2.3.4", rc="0", date="01.02 07:47:49"):
    return (f"{date} [door:D@d:{mtype}] [\"o\":1:2:{chain}] [{pnfsid},0] [{path}] <Unknown> 5 0 "
            f"{{{rc}:\"m\"}}")


def test_edge_lines_agree():
    """Each branch of the fast paths on purpose: zero-byte reads, writes larger than the file,
    Unknown paths with and without a learnt pnfsid, removals seen and unseen, failures, numbers
    out of range, bad dates, protocol shapes, line ends, blank lines."""
    lines = [
        _mover(moved="0"), _mover(moved="0", created="true"), _mover(moved="500", created="true"),
        _mover(path="Unknown", pnfsid="00CD"), _mover(path="Unknown"), _mover(path="", pnfsid=""),
        _mover(path="Unknown", pnfsid=""), _mover(path="", pnfsid="00AB"), _mover(rc="-5"), _mover(rc="00"),
        _mover(init="pool:p2@d"), _mover(moved="-1"), _mover(size="-0"), _mover(moved="99999999999999999999"),
        _mover(size="0099"), _mover(date="13.02 07:47:49"), _mover(date="01.32 07:47:49"),
        _mover(date="01.02 07:47:61"), _mover(date="01.02 07:47:60"), _mover(date="01.02 25:47:00"),
        _mover(proto="GFtp-1.0 131.169.72.103 37850"), _mover(proto="Http-1.1:0:0:0:0:0:0:0:1:0:W:D:/a"),
        _mover(proto="Xrootd-5.0:[::1]:1094"), _mover(proto="weird"), _mover(proto="x-1:h:1"), _mover(proto=""),
        _mover(cell="pool1"), _mover(cell="pool1@a@b"), _mover(path="pnfsid:00AB"),
        _door(), _door(path="/a/g", pnfsid="00CD"), _door(path="Unknown", pnfsid="00EF"), _door(mtype="remove"),
        _door(mtype="remove", pnfsid="00EF", path="Unknown"), _door(mtype="remove", pnfsid="00CD", path=""),
        _door(mtype="remove", pnfsid="", path=""), _door(mtype="remove", rc="3"), _door(mtype="remove", chain="unknown"),
        _door(mtype="remove", chain="h1"), _door(mtype="remove", path="pnfsid:1"), _door(mtype="remove", date="00.00 00:00:00"),
        _door(mtype="store"), _door(mtype="remove", pnfsid="00AB", path="Unknown"),
        _mover(path="Unknown", pnfsid="00CD") + "\r", "", "   ", "\t", "garbage", _mover() + " ",
        _mover(path="/a/é]"), _mover(path="/é/ü"), _mover(proto="Xrootd-5.0:hé:1"),
        # line breaks inside a line (a list of lines can hold them): `.` and the path stop there
        _mover().replace('"msg"', '"m\nx"'), _mover(path="/a\nb"), _mover(proto="Xrootd-5.0:h\n:1"),
        _mover(init="do\nor"), _door(chain="a\nb"), _door(mtype="remove", path="/a\nb"), _mover(path="/a\rb"),
    ]
    # after each line, transfers of Unknown paths show what the memo holds at that point
    probes = [_mover(path="Unknown", pnfsid=p, moved="1") for p in ("00AB", "00CD", "00EF")]
    _compare([x for line in lines for x in (line, *probes)])
    _compare([x for line in lines[::-1] for x in (line, *probes)])


def test_the_comparison_catches_a_planted_difference(generated, monkeypatch):
    """A reference that reads one byte more per transfer: the comparison fails (it can fail)."""
    import msgspec

    real = billing._mover_of

    def planted(fields, date_rx, ctx):
        r = real(fields, date_rx, ctx)
        return msgspec.structs.replace(r, bytes_read=r.bytes_read + 1) if type(r) is billing.Access else r

    monkeypatch.setattr(billing, "_mover_of", planted)
    with pytest.raises(AssertionError):
        _compare_block(generated[:2000])
