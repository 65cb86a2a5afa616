"""`cachescope parse`: the command-line contract (stdout events, stderr/--rejects JSON lines, exit codes)."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import zstandard
from typer.testing import CliRunner

from cli import app
from cachescope.events import schema
from support.data import FIXTURES, fixture_lines

runner = CliRunner()
VALIDATOR = jsonschema.Draft202012Validator(schema())


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_events_on_stdout_rejects_on_stderr(tmp_path: Path):
    src = _write(tmp_path, "billing-2019.08.05", fixture_lines("dcache_billing.txt"))
    result = runner.invoke(app, ["parse", "--format", "dcache-billing", "--site", "NDGF-T1", str(src)])
    assert result.exit_code == 0, result.stderr
    events = _events(result.stdout)
    assert [e["op"] for e in events] == ["write", "read", "delete", "delete", "write"]
    assert all(e["site"] == "NDGF-T1" for e in events)
    for e in events:
        VALIDATOR.validate(e)
    rejects = [json.loads(line) for line in result.stderr.splitlines()]
    assert [r["line"] for r in rejects] == [2, 4, 6]
    assert set(rejects[0]) == {"line", "reason", "text", "skipped"}
    assert rejects[0]["text"] == fixture_lines("dcache_billing.txt")[1]


def test_rejects_file_and_stats(tmp_path: Path):
    src = _write(tmp_path, "g.jsonl", fixture_lines("xrootd_gstream.jsonl"))
    rej = tmp_path / "rejects.jsonl"
    result = runner.invoke(app, ["parse", "-f", "xrootd-gstream", "--rejects", str(rej), "--stats", str(src)])
    assert result.exit_code == 0
    assert len(_events(result.stdout)) == 4
    assert [json.loads(x)["line"] for x in rej.read_text().splitlines()] == [1, 5, 6, 7]
    (stats_line,) = result.stderr.splitlines()
    stats = json.loads(stats_line)["stats"]
    assert (stats["lines"], stats["events"], stats["rejected"], stats["skipped"]) == (8, 4, 1, 3)
    assert stats["reasons"]["not valid JSON"] == 1


def test_gzip_and_zstd_inputs_give_the_same_output(tmp_path: Path):
    text = "\n".join(fixture_lines("eos_report.txt")) + "\n"
    plain = tmp_path / "r.eosreport"
    plain.write_text(text)
    gz = tmp_path / "r.eosreport.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    zst = tmp_path / "r.eosreport.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    outs = [runner.invoke(app, ["parse", "-f", "eos-report", str(p)]) for p in (plain, gz, zst)]
    assert all(o.exit_code == 0 for o in outs)
    # each file is its own log stream (origin): the events are otherwise identical
    events = [[{k: v for k, v in json.loads(line).items() if k != "origin"} for line in o.stdout.splitlines()]
              for o in outs]
    assert events[0] and events[0] == events[1] == events[2]
    assert json.loads(outs[1].stdout.splitlines()[0])["origin"].endswith(gz.name)
    assert outs[0].stderr == outs[1].stderr == outs[2].stderr


def test_exit_status(tmp_path: Path):
    missing = runner.invoke(app, ["parse", "-f", "csv", str(tmp_path / "nope.csv")])
    assert missing.exit_code == 2 and "cannot read" in missing.stderr  # a missing input is a usage error
    unknown = runner.invoke(app, ["parse", "-f", "syslog", str(tmp_path / "nope.csv")])
    assert unknown.exit_code == 2 and "unknown format" in unknown.stderr
    garbage = _write(tmp_path, "junk.txt", ["not a record", "{]", "a=b&c"])
    all_bad = runner.invoke(app, ["parse", "-f", "rucio-trace", str(garbage)])
    # no line usable: as unreadable as a damaged file (the rejects, then one line saying so)
    assert all_bad.exit_code == 1 and all_bad.stdout == ""
    assert len(all_bad.stderr.splitlines()) == 4 and "none of the 3 lines" in all_bad.stderr
    no_dir = runner.invoke(app, ["parse", "-f", "csv", "--rejects", str(tmp_path / "no" / "r.jsonl"), str(garbage)])
    assert no_dir.exit_code == 2 and "--rejects" in no_dir.stderr
    truncated = tmp_path / "t.gz"
    truncated.write_bytes(gzip.compress(b"x" * 100_000)[:50])
    broken = runner.invoke(app, ["parse", "-f", "csv", str(truncated)])
    assert broken.exit_code == 1 and "truncated gzip" in broken.stderr and "t.gz" in broken.stderr


def test_seq_start_and_site_override(tmp_path: Path):
    src = _write(tmp_path, "c.jsonl", fixture_lines("xrootd_collector.jsonl"))
    result = runner.invoke(app, ["parse", "-f", "xrootd-collector", "--seq-start", "1000", "--site", "X", str(src)])
    events = _events(result.stdout)
    assert [e["seq"] for e in events] == [1000, 1001, 1002]
    assert {e["site"] for e in events} == {"X"}  # the WLCG record names T2_US_Nebraska; --site wins


def test_config_cache_groups(tmp_path: Path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("cache_groups:\n  mode: server\n  overrides: [{server: 'cmsstor*', group: fnal-disk}]\n")
    src = _write(tmp_path, "c.jsonl", fixture_lines("xrootd_collector.jsonl"))
    events = _events(runner.invoke(app, ["parse", "-f", "xrootd-collector", "--config", str(cfg), str(src)]).stdout)
    assert [e["cache_group"] for e in events] == ["fnal-disk", "p05799459u51457.cern.ch", ""]
    bad = tmp_path / "bad.yaml"
    bad.write_text("cache_groups: {mode: nowhere}\n")
    result = runner.invoke(app, ["parse", "-f", "csv", "--config", str(bad), str(src)])
    assert result.exit_code == 2 and "mode" in result.stderr


def test_installed_command_reads_stdin():
    exe = Path(sys.executable).with_name("cachescope")
    data = "\n".join(fixture_lines("rucio_trace.jsonl")) + "\n"
    proc = subprocess.run([str(exe), "parse", "--format", "rucio-trace", "-"], input=data, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 5 and len(proc.stderr.splitlines()) == 5


@pytest.mark.parametrize("fixture, fmt, kwargs", [
    ("dcache_billing.txt", "dcache-billing", ["--year", "2019"]),
    ("dcache_json.jsonl", "dcache-json", []),
    ("xrootd_gstream.jsonl", "xrootd-gstream", []),
    ("xrootd_collector.jsonl", "xrootd-collector", []),
    ("xcache_reporter.jsonl", "xcache-reporter", []),
    ("eos_report.txt", "eos-report", []),
    ("eos_report_monit.jsonl", "eos-report", []),
    ("rucio_trace.jsonl", "rucio-trace", []),
    ("http_access.txt", "http-access", []),
    ("csv_trace.csv", "csv", []),
])
def test_every_fixture_output_validates_against_the_schema(tmp_path: Path, fixture, fmt, kwargs):
    src = _write(tmp_path, fixture, fixture_lines(fixture))
    result = runner.invoke(app, ["parse", "-f", fmt, *kwargs, str(src)])
    events = _events(result.stdout)
    assert events
    for e in events:
        VALIDATOR.validate(e)
    assert (FIXTURES / fixture).read_text().startswith("#")  # the fixture names its source


def test_origin_names_the_stream_and_can_be_given(tmp_path: Path):
    """An event's identity is (cache_group, origin, seq): a file's origin is its host and path, stdin's
    is stdin:HOST, and --origin names a stream (a collector's output, a pipe)."""
    import socket

    log = tmp_path / "r.eosreport"
    log.write_text("\n".join(fixture_lines("eos_report.txt")) + "\n")
    by_file = runner.invoke(app, ["parse", "-f", "eos-report", str(log)])
    named = runner.invoke(app, ["parse", "-f", "eos-report", "--origin", "collector:mon-01", str(log)])
    origins = {json.loads(line)["origin"] for line in by_file.stdout.splitlines()}
    assert origins == {f"file:{socket.gethostname()}:{log}"}
    assert {json.loads(line)["origin"] for line in named.stdout.splitlines()} == {"collector:mon-01"}
    seqs = [json.loads(line)["seq"] for line in named.stdout.splitlines()]
    assert seqs == list(range(len(seqs)))


def test_help_lists_the_parsers_formats():
    from cli._format_names import FORMAT_NAMES
    from ingest.formats import FORMATS

    assert FORMAT_NAMES == tuple(FORMATS)
