"""Every record of the public samples (copied into fixtures/, sources named there) parses to the
right fields. Expected values are read off the records by hand."""

from datetime import datetime, timezone
from pathlib import Path

import pytest

from cachescope.config import load_config
from support.data import fixture_lines, parse_lines
from ingest.formats import FORMATS

UTC = timezone.utc


def us(*args, tz=UTC) -> int:
    return int(datetime(*args, tzinfo=tz).timestamp()) * 1_000_000


def by_line(rejects):
    return {r.line: r for r in rejects}


# --- dcache-billing ----------------------------------------------------------------------------


def test_dcache_billing_default_formats():
    events, rejects, parser = parse_lines("dcache-billing", fixture_lines("dcache_billing.txt"), site="NDGF-T1",
                                          year=2019)
    assert [e.op for e in events] == ["write", "read", "delete", "delete", "write"]
    up, down, rm, nfs_rm, doc = events
    assert up.ts == us(2019, 8, 5, 7, 47, 49)  # the record's time (the mover's end)
    assert (up.path, up.file_size, up.bytes_read, up.server, up.client) == (
        "/home/tester/test-file-1", 964544, 964544, "pool1", "0:0:0:0:0:0:0:1")
    assert down.ts == us(2019, 8, 5, 7, 47, 55)
    assert (down.bytes_read, down.file_size, down.file_id) == (964544, 964544, up.file_id)
    assert (rm.ts, rm.path, rm.server, rm.file_size, rm.bytes_read) == (
        us(2019, 8, 5, 7, 48, 19), "/home/tester/test-file-1", "", 0, 0)
    assert (nfs_rm.ts, nfs_rm.client) == (us(2019, 5, 2, 15, 45, 23), "127.0.0.1")
    assert nfs_rm.path == "/parent:[0000A1260353F71D44819567ED4C6AD028F2]/test.txt"
    assert doc.ts == us(2019, 12, 10, 14, 19, 42)
    assert (doc.server, doc.client, doc.file_size, doc.path) == (
        "pool2", "131.169.72.103", 10475, "pnfsid:0000062774D07847475BA78AC99C60F2C2FC")
    assert all(e.site == "NDGF-T1" and e.cache_group == "NDGF-T1" and e.source == "dcache-billing" for e in events)
    assert [e.seq for e in events] == [0, 1, 2, 3, 4]
    rej = by_line(rejects)
    assert sorted(rej) == [2, 4, 6] and all(r.skipped for r in rejects)
    assert rej[2].reason.startswith("door request") and rej[6].reason.startswith("pool replica removal")
    assert parser.stats.lines == 8 and parser.stats.events == 5 and parser.stats.skipped == 3


def test_dcache_billing_year_from_file_name_and_site_time_zone(tmp_path: Path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("sites: {NDGF-T1: {timezone: Europe/Copenhagen}}\n")
    lines = fixture_lines("dcache_billing.txt")[:1]
    events, _, _ = parse_lines("dcache-billing", lines, site="NDGF-T1", config=load_config(cfg_file),
                               source_name="/var/lib/dcache/billing/2019/08/billing-2019.08.05")
    assert events[0].ts == us(2019, 8, 5, 5, 47, 49)  # CEST = UTC+2


def test_dcache_billing_unknown_path_resolved_by_pnfsid():
    lines = [
        '08.05 07:47:49 [door:WebDAV-dcache@dCacheDomain:request] ["tester":1000:1000:0:0:0:0:0:0:0:1] '
        '[0000FA09235CA0974697AB93F00FFEA61620,964544] [/home/tester/test-file-1] <Unknown>:<Unknown>@osm 681 0 {0:""}',
        '08.05 07:47:55 [pool:pool1:transfer] [0000FA09235CA0974697AB93F00FFEA61620,964544] [Unknown] '
        '<Unknown>:<Unknown>@osm 964544 74 false {Xrootd-5.0:192.0.2.7:40000} [door:X@Y:1] {0:""}',
        '08.05 07:47:56 [pool:pool1:transfer] [0000FA09235CA0974697AB93F00FFEA61620,964544] [Unknown] '
        '<Unknown>:<Unknown>@osm 964544 74 false {Xrootd-5.0:192.0.2.7:40000} [door:X@Y:1] {10006:"Transfer aborted"}',
        '08.05 07:47:57 [pool:pool1:transfer] [0000FA09235CA0974697AB93F00FFEA61620,964544] [Unknown] '
        '<Unknown>:<Unknown>@osm 964544 74 false {Xrootd-5.0:192.0.2.7:40000} [pool:pool2@d:1] {0:""}',
        '08.05 07:47:58 [pool:pool1:transfer] [0000FA09235CA0974697AB93F00FFEA61620,964544] [Unknown] '
        '<Unknown>:<Unknown>@osm 0 74 false {Xrootd-5.0:192.0.2.7:40000} [door:X@Y:1] {0:""}',
        '08.05 07:47:58 [pool:pool1:transfer] [0000FA09235CA0974697AB93F00FFEA61620,964544] [/a/b] '
        '<Unknown>:<Unknown>@osm 2000000 74 false {Xrootd-5.0:192.0.2.7:40000} [door:X@Y:1] {0:""}',
    ]
    events, rejects, parser = parse_lines("dcache-billing", lines, year=2019)
    assert [(e.path, e.client) for e in events] == [("/home/tester/test-file-1", "192.0.2.7"), ("/a/b", "192.0.2.7")]
    assert events[1].bytes_read == 964544 and parser.stats.clamped == 1
    assert [r.reason.split(" (")[0] for r in rejects] == [
        "door request", "failed transfer", "pool-to-pool copy", "zero-byte read"]


def test_dcache_billing_custom_site_format(tmp_path: Path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(
        "ingest:\n  dcache_billing:\n    formats:\n"
        '      billing.text.format.mover-info-message: \'$date;format="yyyy.MM.dd HH:mm:ss:SSS"$ $cellName$ '
        '[$pnfsid$,$filesize$] $transferred$ $connectionTime$ $created$ {$protocol$} [$path$] {$rc$:"$message$"}\'\n'
    )
    line = ('2024.01.31 23:59:59:500 pool-7@poolDomain [0000ABCD,2048] 1024 1000 false '
            '{Http-1.1:2001:db8::1:443:WebDAV-x:webdavDomain:/p} [/pnfs/site/data/cms/store/user/x/f.root] {0:""}')
    events, rejects, _ = parse_lines("dcache-billing", [line], config=load_config(cfg_file))
    assert rejects == []
    (e,) = events
    assert e.ts == us(2024, 1, 31, 23, 59, 59) + 500_000
    assert (e.server, e.client, e.path, e.tier, e.vo, e.bytes_read) == (
        "pool-7", "2001:db8::1", "/store/user/x/f.root", "USER", "cms", 1024)


def test_dcache_billing_without_year_is_rejected_with_reason():
    from ingest.formats import ParseContext

    ctx = ParseContext(year=None)
    FORMATS["dcache-billing"].prepare(ctx)
    rej = FORMATS["dcache-billing"].parse(fixture_lines("dcache_billing.txt")[0], ctx)
    assert "no year" in rej.reason


# --- dcache-json -------------------------------------------------------------------------------


def test_dcache_json():
    events, rejects, _ = parse_lines("dcache-json", fixture_lines("dcache_json.jsonl"))
    read, write, delete = events
    assert read.ts == us(2024, 3, 11, 9, 15, 30) + 250_000
    assert (read.op, read.server, read.client, read.vo, read.tier, read.file_size, read.bytes_read) == (
        "read", "pool-atlas-12", "wn-101.grid.example.org", "atlas", "HITS", 1045887631, 1045887631)
    assert read.path == "/atlas/rucio/mc16_13TeV/16/94/HITS.10701323._000001.pool.root.1"
    assert (write.op, write.client, write.tier, write.bytes_read) == ("write", "2001:db8::17", "USER", 120448812)
    assert write.path.startswith("/atlas/rucio/user/galhardo/41/d4/user.galhardo.074789")
    assert (delete.op, delete.server, delete.file_id, delete.ts) == (
        "delete", "", write.file_id, us(2024, 3, 12, 7, 0, 0))
    reasons = {r.line: r.reason for r in rejects}
    assert reasons[3].startswith("failed transfer (status 10006")
    assert reasons[4] == "pool-to-pool copy (isP2p)"
    assert reasons[5].startswith("door request") and reasons[7].startswith("pool replica removal")
    assert reasons[8].startswith("tape store") and reasons[9].startswith("billing hit")
    assert all(r.skipped for r in rejects)


# --- xrootd-gstream ----------------------------------------------------------------------------


def test_xrootd_gstream():
    events, rejects, _ = parse_lines("xrootd-gstream", fixture_lines("xrootd_gstream.jsonl"), site="MWT2")
    evnt, topq1, topq5, cms = events
    assert (evnt.ts, evnt.file_size, evnt.bytes_read) == (1618638031_000000, 368827877, 362827532 + 5699773)
    assert (evnt.observed_hit_bytes, evnt.observed_miss_bytes, evnt.observed_bypass_bytes) == (362827532, 5699773, 0)
    assert evnt.server == "sl-um-es2.slateci.io"  # from the packet header before it
    assert (evnt.path, evnt.tier, evnt.vo) == (
        "/atlas/rucio/mc16_13TeV/61/1d/EVNT.18541195._000368.pool.root.1", "EVNT", "atlas")
    assert (topq1.tier, topq1.bytes_read, topq1.file_size) == ("DAOD_TOPQ1", 85567490 + 291743500, 1150928438)
    assert (topq5.tier, topq5.file_size, topq5.bytes_read) == ("DAOD_TOPQ5", 7393431119, 972730278 + 2930078280)
    assert topq5.file_size > 4 * 2**30
    assert (cms.path, cms.tier, cms.vo, cms.observed_hit_bytes, cms.ts) == (
        "/store/user/matevz/file.root", "USER", "cms", 865075200, 1688057096_000000)
    assert cms.server == "xcache.mwt2.org"  # the insthdr header line set it
    reasons = {r.line: r for r in rejects}
    assert reasons[1].skipped and "header" in reasons[1].reason
    assert reasons[6].skipped and "'access'" in reasons[6].reason
    assert not reasons[7].skipped and reasons[7].reason.startswith("not valid JSON")


# --- xrootd-collector --------------------------------------------------------------------------


def test_xrootd_collector():
    events, rejects, _ = parse_lines("xrootd-collector", fixture_lines("xrootd_collector.jsonl"))
    wlcg, aaa, cache = events
    assert (wlcg.ts, wlcg.site, wlcg.server, wlcg.client) == (
        1359423686_000000, "T2_US_Nebraska", "cmsstor359.fnal.gov", "brian-test.unl.edu")
    assert (wlcg.file_size, wlcg.bytes_read, wlcg.tier, wlcg.op) == (2198266271, 358477665, "RECO", "read")
    assert wlcg.path.startswith("/store/relval/CMSSW_6_1_0-GR_R_61_V6_RelVal_wEl2012C/SingleElectron/RECO/")
    assert (aaa.ts, aaa.bytes_read, aaa.file_size, aaa.server, aaa.client, aaa.tier) == (
        1491789025_000000, 189272229, 189272229, "p05799459u51457.cern.ch", "b608a4fe55.cern.ch", "AOD")
    assert aaa.path.startswith("/store/hidata/PARun2016C/PAEGJet1/AOD/")  # /eos/cms stripped
    assert (cache.observed_hit_bytes, cache.observed_miss_bytes, cache.bytes_read) == (
        865075200, 24051712, 889126912)
    no_size, packet, packet2 = rejects
    assert no_size.line == 2 and no_size.reason.startswith("field filesize: missing") and not no_size.skipped
    assert (packet.line, packet2.line) == (5, 6) and packet.skipped and "shoveler" in packet.reason


# --- xcache-reporter ---------------------------------------------------------------------------


def test_xcache_reporter(parse):
    doc = ('{"sender":"xCache","type":"docs","site":"BNL","file":"panda/8a/c7/panda.um.user.kenelson.32026894._000001'
           '.tree.root","size":37142756,"created_at":1672531200000,"blocks":36,"blocks_cached":36,"access":1,'
           '"attached_at":1672531260000,"detached_at":1672531320000,"ios":12,"duration":60,"bytes_hit":27836644,'
           '"bytes_miss":9306112,"bytes_bypassed":0,"bytes_written":9306112}')
    events, rejects, _ = parse("xcache-reporter", fixture_lines("xcache_reporter.jsonl"))
    assert fixture_lines("xcache_reporter.jsonl")[0] == doc
    first = events[0]
    assert (first.site, first.ts, first.file_size, first.bytes_read) == ("BNL", 1672531260_000000, 37142756, 37142756)
    assert (first.observed_hit_bytes, first.observed_miss_bytes, first.observed_bypass_bytes) == (27836644, 9306112, 0)
    assert (first.path, first.tier) == (
        "/atlas/rucio/panda/8a/c7/panda.um.user.kenelson.32026894._000001.tree.root", "USER")
    assert len(events) == 3  # the array line holds two more documents
    assert events[2].file_size == 5 * 2**30 + 12345 and events[2].tier == "DAOD_PHYS"
    assert [r.reason.split(" (")[0] for r in rejects] == ["reporter document of type 'stats'", "cache access that served 0 bytes"]


# --- eos-report --------------------------------------------------------------------------------


def test_eos_report():
    events, rejects, _ = parse_lines("eos-report", fixture_lines("eos_report.txt"), site="CERN-PROD")
    doc, gensim, fuse, cmst3 = events
    assert (doc.op, doc.ts, doc.file_size, doc.bytes_read, doc.server, doc.client, doc.path) == (
        "write", 1525425804_531000, 2202, 2202, "test.cern.ch", "slc7", "/eos/testfile")
    assert (gensim.op, gensim.ts, gensim.file_size, gensim.bytes_read, gensim.tier, gensim.vo) == (
        "read", 1491788403_918000, 3850577700, 19186114, "GEN-SIM", "cms")
    assert gensim.client == "fu-c2e05-24-03-daq2fus1v0--cms" and gensim.server == "p05798818q44165.cern.ch"
    assert (fuse.op, fuse.file_size, fuse.bytes_read) == ("write", 49834, 0)  # nwc=3, wb=0
    assert fuse.path.startswith("/store/unified/www/joblogs/")
    assert (cmst3.op, cmst3.bytes_read, cmst3.file_size, cmst3.ts) == ("read", 41276444, 853699786, 1549043126_479000)
    reasons = {r.line: r.reason for r in rejects}
    assert reasons[2].startswith("FST replica deletion")
    assert reasons[3] == "removal of fid 1056331 whose path was never seen in this stream"
    assert reasons[4].startswith("removal of fid 1056325")


def test_eos_monit_envelopes_give_the_same_events():
    raw, _, _ = parse_lines("eos-report", fixture_lines("eos_report.txt")[4:])
    wrapped, rejects, _ = parse_lines("eos-report", fixture_lines("eos_report_monit.jsonl"))
    assert rejects == [] and wrapped == raw


def test_eos_removal_after_a_record_of_the_fid_is_a_delete():
    lines = fixture_lines("eos_report.txt")
    write = lines[0].replace("fid=1056332", "fid=1056331")
    events, rejects, _ = parse_lines("eos-report", [write, lines[2]])
    assert [e.op for e in events] == ["write", "delete"]
    # the doc's missing '&' hides dc_ts: the removal time falls back to dm_ts + dm_tns
    assert events[1].ts == 1525425804_478169 and events[1].path == "/eos/testfile" and events[1].server == ""


# --- rucio-trace -------------------------------------------------------------------------------


def test_rucio_trace():
    events, rejects, _ = parse_lines("rucio-trace", fixture_lines("rucio_trace.jsonl"))
    hits, daod, evnt, put, raw = events
    assert (hits.op, hits.ts, hits.site, hits.server, hits.client, hits.tier) == (
        "read", 1710148526_410000, "MWT2_DATADISK", "fax.mwt2.org", "uct2-c101.mwt2.org", "HITS")
    assert hits.path == "/atlas/rucio/mc16_13TeV/16/94/HITS.10701323._000001.pool.root.1"
    assert hits.bytes_read == hits.file_size == 1045887631
    assert (daod.tier, daod.bytes_read, daod.ts) == ("DAOD_TOPQ1", 1150928438, 1710149000_000000)  # FOUND_ROOT
    assert (evnt.path, evnt.ts, evnt.site) == (  # download: DID -> canonical rucio path
        "/atlas/rucio/mc16_13TeV/61/1d/EVNT.18541195._000368.pool.root.1", 1710150000_500000, "CERN-PROD_DATADISK")
    assert (put.op, put.tier, put.site) == ("write", "USER", "MWT2_DATADISK")
    assert put.path.startswith("/atlas/rucio/user/galhardo/41/d4/")
    assert (raw.site, raw.tier, raw.file_size, raw.ts) == ("BNL-OSG2_DATADISK", "RAW", 2147483648, 1609459200_000000)
    reasons = {r.line: r for r in rejects}
    assert reasons[1].reason.startswith("field filesize: missing") and not reasons[1].skipped
    assert reasons[2].skipped and reasons[2].reason.startswith("eventType ''")
    assert reasons[6].reason.startswith("clientState STAGEIN_ATTEMPT_FAILED")
    assert reasons[7].reason.startswith("clientState ALREADY_DONE")
    assert reasons[9].reason.startswith("eventType 'put_sm_logs'")


# --- http-access -------------------------------------------------------------------------------


def test_http_access():
    events, rejects, _ = parse_lines("http-access", fixture_lines("http_access.txt"), server="dpmhead.example.org")
    whole, part, delete, dcache_delete = events
    assert (whole.op, whole.ts, whole.file_size, whole.bytes_read, whole.client, whole.server) == (
        "read", us(2022, 4, 5, 20, 7, 41), 368827877, 368827877, "192.0.2.10", "dpmhead.example.org")
    assert whole.path == "/atlas/rucio/mc16_13TeV/61/1d/EVNT.18541195._000368.pool.root.1"
    assert (part.op, part.file_size, part.bytes_read, part.file_id) == ("read", 368827877, 1048576, whole.file_id)
    assert (delete.op, delete.file_id, delete.server) == ("delete", whole.file_id, "")
    assert dcache_delete.ts == us(2022, 4, 5, 20, 15, 0) + 1_000
    assert (dcache_delete.client, dcache_delete.tier) == ("2001:1458:301:cd::100:168", "AODSIM")
    assert dcache_delete.path.startswith("/store/mc/RunIISummer20UL17RECO/")
    reasons = {r.line: r.reason for r in rejects}
    assert "third-party copy" in reasons[1] and "not a data transfer" in reasons[2]
    assert all("not a WebDAV request" in reasons[n] for n in (3, 4, 5, 6))
    assert reasons[9].startswith("partial GET (206)") and reasons[10].startswith("PUT: the log format has no %I")
    assert reasons[12] == "GET 302: redirect"
    assert all(r.skipped for r in rejects)


def test_http_access_custom_log_format_with_upload_size(tmp_path: Path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("ingest:\n  http_access:\n    log_format: '%v %h %l %u %t \"%r\" %>s %b %I %D'\n")
    line = ('disk01.example.org 192.0.2.13 - - [05/Apr/2022:22:10:00 +0000] "PUT /dpm/example.org/home/cms/store/'
            'user/x/f.root HTTP/1.1" 201 - 52428800 120000')
    events, rejects, _ = parse_lines("http-access", [line], config=load_config(cfg_file))
    assert rejects == []
    assert (events[0].op, events[0].file_size, events[0].server, events[0].tier) == (
        "write", 52428800, "disk01.example.org", "USER")


# --- csv ---------------------------------------------------------------------------------------


def test_csv_reference_trace_rows():
    lines = fixture_lines("csv_trace.csv")
    events, rejects, _ = parse_lines("csv", lines)
    assert [r.reason for r in rejects] == ["header line"]
    first = events[0]
    assert (first.ts, first.file_id, first.file_size, first.bytes_read, first.tier) == (
        1704067205_000000, 12499935554955026095, 432241664, 432241664, "DAOD_PHYSLITE")
    assert first.path == "/atlas/rucio/data17_13TeV/e9/0b/DAOD_PHYSLITE.23230702._000018.pool.root.1"
    assert len(events) == 12 and all(e.op == "read" for e in events)
    assert [e.file_id for e in events] == [int(line.split(",")[1]) for line in lines[1:]]


def test_csv_with_bytes_read_and_headerless_three_columns():
    events, _, _ = parse_lines("csv", fixture_lines("csv_trace_bytes_read.csv"))
    assert (events[0].file_size, events[0].bytes_read) == (3291864064, 822966016)
    rows = [line.split(",") for line in fixture_lines("csv_trace_bytes_read.csv")[1:]]
    events, rejects, _ = parse_lines("csv", [",".join(r[:3]) for r in rows])
    assert rejects == [] and [e.file_id for e in events] == [int(r[1]) for r in rows]
    assert all(e.tier == "UNKNOWN" and e.path == "" for e in events)


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_has_a_documented_module(name):
    doc = FORMATS[name].doc
    assert name in doc and ("skipped" in doc.lower() or "reject" in doc.lower())
