"""Every bad input gets one clear line and the right exit code, never a traceback (docs/cli.md "Exit
codes and rejects"): every subcommand × the damaged files, wrong options and unreachable servers a
new user meets. 1: bad data or an unreachable server; 2: bad usage."""

from __future__ import annotations

import gzip
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest
import zstandard
from typer.testing import CliRunner

from cli import app
from ingest.generate import make_workload, render

CLI = str(Path(sys.executable).parent / "cachescope")
runner = CliRunner()


def free_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def silent_server():
    """A TCP server that accepts connections and never answers (a hung server, a wrong service)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield srv.getsockname()[1]
    stop.set()
    thread.join()
    for c in held:
        c.close()
    srv.close()


def _frames(data: bytes, size: int = 20_000) -> bytes:
    """zstd in several frames (as log rotators write it), so a cut leaves whole frames before it."""
    c = zstandard.ZstdCompressor(write_checksum=True)  # as the zstd command line writes it
    return b"".join(c.compress(data[i:i + size]) for i in range(0, len(data), size))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    w = make_workload(3000, days=1, sites=1, servers=2, seed=5)
    out: dict[str, Path] = {"dir": d}
    for fmt, name in (("xrootd-gstream", "gstream.jsonl"), ("csv", "trace.csv"), ("eos-report", "eos.log")):
        lines = [line for _, _, _, line in render(fmt, w)]
        text = (("timestamp,obj_id,obj_size,tier,path,bytes_read\n" if fmt == "csv" else "")
                + "\n".join(lines) + "\n").encode()
        plain = d / name
        plain.write_bytes(text)
        out[name] = plain
        zst = _frames(text)
        (d / f"{name}.zst").write_bytes(zst)
        (d / f"cut-{name}.zst").write_bytes(zst[: len(zst) * 2 // 3])
        bad = bytearray(zst)
        bad[len(bad) // 2: len(bad) // 2 + 8] = b"\xff" * 8
        (d / f"corrupt-{name}.zst").write_bytes(bytes(bad))
        gz = gzip.compress(text)
        (d / f"cut-{name}.gz").write_bytes(gz[: len(gz) * 2 // 3])
        for kind in ("zst", "gz"):
            out[f"cut-{name}.{kind}"] = d / f"cut-{name}.{kind}"
        out[f"corrupt-{name}.zst"] = d / f"corrupt-{name}.zst"
    (d / "garbage.csv").write_text("this is not a trace\n1,2\n")
    (d / "a-file").write_text("x")
    out.update({"garbage.csv": d / "garbage.csv", "a-file": d / "a-file"})
    for name, text in {
        "partitions": "pipeline:\n  shadow:\n    partitions: 100000000\n",
        "curve": "pipeline:\n  curve: {min: 10PB, max: 1TB}\n",
        "rules": "tiers:\n  rules_files: [no-such-rules.yaml]\n",
        "params": "pipeline:\n  shadow:\n    policies: [lru]\n    params: {lru: {no_such_param: 1}}\n",
        "empty-sizes": "pipeline:\n  shadow:\n    sizes: []\n",
        "typo": "pipeline:\n  shadwo: {}\n",
        "yaml": "pipeline: [\n",
        "int-sizes": "pipeline:\n  shadow:\n    policies: [lru]\n    sizes: [1000000000000, 2TB]\n",
    }.items():
        (d / f"{name}.yaml").write_text(text)
        out[f"{name}.yaml"] = d / f"{name}.yaml"
    return out


def _read_only_dir(d: Path) -> str:
    if os.geteuid() == 0:  # root writes through permissions: a path no one can create
        return "/sys/cachescope-test-store"
    ro = d / "read-only"
    ro.mkdir(exist_ok=True)
    ro.chmod(0o555)
    return str(ro)


# (id, args with {name} placeholders, exit code, words the last stderr line must hold, stderr lines)
CASES = [
    # simulate
    ("simulate-cut-zst", ["simulate", "{cut-trace.csv.zst}", "--size", "1TB", "--json"], 1, ["cut-trace.csv.zst", "zstd", "at byte"], 1),
    ("simulate-cut-gz", ["simulate", "{cut-trace.csv.gz}", "--size", "1TB", "--json"], 1, ["cut-trace.csv.gz", "gzip", "at byte"], 1),
    ("simulate-corrupt-zst", ["simulate", "{corrupt-trace.csv.zst}", "--size", "1TB"], 1, ["corrupt-trace.csv.zst", "zstd", "at byte"], 1),
    ("simulate-garbage", ["simulate", "{garbage.csv}", "--size", "1TB"], 1, ["garbage.csv", "header"], 1),
    ("simulate-missing", ["simulate", "{dir}/nope.csv", "--size", "1TB"], 2, ["nope.csv", "no such file"], 1),
    ("simulate-mrc-points-0", ["simulate", "{trace.csv}", "--mrc", "--mrc-points", "0"], 2, ["--mrc-points"], 1),
    ("simulate-partitions-neg", ["simulate", "{trace.csv}", "--size", "1TB", "--partitions", "-1"], 2,
     ["--partitions"], 1),
    ("simulate-partitions-huge", ["simulate", "{trace.csv}", "--size", "1TB", "--partitions", "100000000"], 2,
     ["--partitions"], 1),
    ("simulate-policy", ["simulate", "{trace.csv}", "--size", "1TB", "--policy", "lru,nosuch"], 2, ["nosuch"], 1),
    ("simulate-size", ["simulate", "{trace.csv}", "--size", "ten"], 2, ["'ten'"], 1),
    ("simulate-size-zero", ["simulate", "{trace.csv}", "--size", "0"], 2, ["'0'"], 1),
    ("simulate-sample-rate", ["simulate", "{trace.csv}", "--size", "1TB", "--sample-rate", "0"], 2,
     ["--sample-rate"], 1),
    ("simulate-param", ["simulate", "{trace.csv}", "--size", "1TB", "--param", "nosuch=1"], 2, ["nosuch"], 1),
    ("simulate-param-syntax", ["simulate", "{trace.csv}", "--size", "1TB", "--param", "x"], 2, ["--param"], 1),
    ("simulate-format", ["simulate", "{trace.csv}", "--size", "1TB", "--format", "eos-report"], 2, ["--format"], 1),
    ("simulate-no-trace", ["simulate"], 2, ["TRACE"], 1),
    # parse
    ("parse-cut-zst", ["parse", "-f", "xrootd-gstream", "--rejects", "{dir}/r.jsonl", "{cut-gstream.jsonl.zst}"], 1,
     ["cut-gstream.jsonl.zst", "truncated zstd", "byte"], 1),
    ("parse-cut-gz", ["parse", "-f", "xrootd-gstream", "--rejects", "{dir}/r.jsonl", "{cut-gstream.jsonl.gz}"], 1,
     ["cut-gstream.jsonl.gz", "truncated gzip", "byte"], 1),
    ("parse-corrupt-zst", ["parse", "-f", "xrootd-gstream", "--rejects", "{dir}/r.jsonl",
                           "{corrupt-gstream.jsonl.zst}"], 1, ["corrupt zstd", "byte"], 1),
    ("parse-year", ["parse", "-f", "dcache-billing", "--year", "99999", "{trace.csv}"], 2, ["--year"], 1),
    ("parse-format", ["parse", "-f", "nope", "{gstream.jsonl}"], 2, ["'nope'"], 1),
    ("parse-missing", ["parse", "-f", "csv", "{dir}/nope.csv"], 2, ["nope.csv"], 1),
    ("parse-directory", ["parse", "-f", "csv", "{dir}"], 1, ["directory"], 1),
    ("parse-rejects", ["parse", "-f", "csv", "--rejects", "{dir}/no/such/dir/r.jsonl", "{trace.csv}"], 2,
     ["--rejects"], 1),
    ("parse-config", ["parse", "-f", "csv", "--config", "{curve.yaml}", "{trace.csv}"], 2,
     ["pipeline.curve", "min 10PB is above max 1TB"], 1),
    # replay
    ("replay-store-is-file", ["replay", "-f", "csv", "--store", "{a-file}", "{trace.csv}"], 2, ["a-file", "directory"], 1),
    ("replay-store-read-only", ["replay", "-f", "csv", "--store", "{read-only}", "{trace.csv}"], 1, ["store"], 1),
    ("replay-rejects", ["replay", "-f", "csv", "--store", "{dir}/st-rej", "--rejects", "{dir}/no/dir/r.jsonl",
                        "{trace.csv}"], 2, ["rejects file", "r.jsonl"], 1),
    ("replay-corrupt-zst", ["replay", "-f", "xrootd-gstream", "--store", "{dir}/st-corrupt",
                            "{corrupt-gstream.jsonl.zst}"], 1, ["corrupt zstd", "byte", "stored"], None),
    ("replay-cut-gz", ["replay", "-f", "xrootd-gstream", "--store", "{dir}/st-cut", "{cut-gstream.jsonl.gz}"], 1,
     ["truncated gzip", "byte", "stored"], None),
    ("replay-format", ["replay", "-f", "nope", "--store", "{dir}/st-x", "{trace.csv}"], 2, ["'nope'"], 1),
    ("replay-missing", ["replay", "-f", "csv", "--store", "{dir}/st-x", "{dir}/nope.csv"], 2, ["nope.csv"], 1),
    ("replay-partitions", ["replay", "-f", "csv", "--store", "{dir}/st-x", "--config", "{partitions.yaml}",
                           "{trace.csv}"], 2, ["pipeline.shadow.partitions"], 1),
    ("replay-curve", ["replay", "-f", "csv", "--store", "{dir}/st-x", "--config", "{curve.yaml}", "{trace.csv}"], 2,
     ["pipeline.curve", "above max"], 1),
    ("replay-rules-file", ["replay", "-f", "csv", "--store", "{dir}/st-x", "--config", "{rules.yaml}", "{trace.csv}"],
     2, ["tiers.rules_files[0]", "no-such-rules.yaml"], 1),
    ("replay-params", ["replay", "-f", "csv", "--store", "{dir}/st-x", "--config", "{params.yaml}", "{trace.csv}"], 2,
     ["pipeline.shadow", "no_such_param"], 1),
    ("replay-empty-sizes", ["replay", "-f", "csv", "--store", "{dir}/st-x", "--config", "{empty-sizes.yaml}",
                            "{trace.csv}"], 2, ["pipeline.shadow.sizes"], 1),
    ("replay-typo", ["replay", "-f", "csv", "--store", "{dir}/st-x", "--config", "{typo.yaml}", "{trace.csv}"], 2,
     ["pipeline.shadwo"], 1),
    ("replay-yaml", ["replay", "-f", "csv", "--store", "{dir}/st-x", "--config", "{yaml.yaml}", "{trace.csv}"], 2,
     ["yaml.yaml", "YAML"], 1),
    ("replay-config-missing", ["replay", "-f", "csv", "--store", "{dir}/st-x", "--config", "{dir}/none.yaml",
                               "{trace.csv}"], 2, ["none.yaml", "no such file"], 1),
    ("replay-database", ["replay", "-f", "csv", "--store", "{dir}/st-x", "--database", "x;drop", "{trace.csv}"], 2,
     ["--database", "x;drop"], 1),
    # migrate
    ("migrate-database", ["migrate", "--store", "{dir}/st-m", "--database", "1bad-name"], 2, ["--database"], 1),
    ("migrate-ttl", ["migrate", "--store", "{dir}/st-m", "--events-ttl-days", "-5"], 2, ["--events-ttl-days"], 1),
    ("migrate-silent-server", ["migrate", "--clickhouse", "clickhouse://127.0.0.1:{silent}"], 1,
     ["did not answer"], 1),
    ("migrate-unreachable", ["migrate", "--clickhouse", "clickhouse://127.0.0.1:{free}"], 1, ["unreachable"], 1),
    ("migrate-url", ["migrate", "--clickhouse", "http//127.0.0.1"], 2, ["--clickhouse", "clickhouse://"], 1),
    ("migrate-url-port", ["migrate", "--clickhouse", "clickhouse://127.0.0.1:port"], 2, ["port"], 1),
    ("migrate-neither", ["migrate"], 2, ["--store", "--clickhouse"], 1),
    ("migrate-store-is-file", ["migrate", "--store", "{a-file}"], 2, ["a-file"], 1),
    # ship
    ("ship-unreachable", ["ship", "--format", "csv", "--from", "{trace.csv}", "--to", "kafka://127.0.0.1:{free}/t"],
     1, ["Kafka broker", "unreachable"], 1),
    ("ship-silent-broker", ["ship", "--format", "csv", "--from", "{trace.csv}", "--to",
                            "kafka://127.0.0.1:{silent}/t"], 1, ["Kafka broker", "did not answer"], 1),
    ("ship-from-missing", ["ship", "--format", "csv", "--from", "{dir}/nope.log", "--to", "kafka://127.0.0.1:{free}/t"],
     2, ["--from", "nope.log"], 1),
    ("ship-compressed", ["ship", "--format", "xrootd-gstream", "--from", "{cut-gstream.jsonl.gz}", "--to",
                         "kafka://127.0.0.1:{free}/t"], 2, ["--from", "compressed"], 1),
    ("ship-format", ["ship", "--format", "nope", "--from", "{trace.csv}", "--to", "kafka://127.0.0.1:{free}/t"], 2,
     ["--format", "'nope'"], 1),
    ("ship-to-url", ["ship", "--format", "csv", "--from", "{trace.csv}", "--to", "127.0.0.1:9092/t"], 2, ["--to"], 1),
    ("ship-from-url", ["ship", "--format", "dcache-json", "--from", "kafka://127.0.0.1:x/t", "--to",
                       "kafka://127.0.0.1:{free}/t"], 2, ["--from"], 1),
    # tier
    ("tier-too-long", ["tier", "/atlas/" + "x" * 5000, "/atlas/rucio/mc16_13TeV/AOD.12345678._000001.pool.root.1"], 1,
     ["PATH_MAX", "5,007 bytes"], 1),
    ("tier-config", ["tier", "--config", "{rules.yaml}", "/x"], 2, ["no-such-rules.yaml"], 1),
    # generate
    ("generate-days", ["generate", "--out", "{dir}/gen", "--days", "1e9"], 2, ["--days"], 1),
    ("generate-servers", ["generate", "--out", "{dir}/gen", "--servers", "100000000"], 2, ["--servers"], 1),
    ("generate-events", ["generate", "--out", "{dir}/gen", "--events", "10000000000"], 2, ["--events"], 1),
    ("generate-format", ["generate", "--out", "{dir}/gen", "--format", "nope"], 2, ["nope"], 1),
    # bench
    ("bench-engine-policy", ["bench", "engine", "--policies", "lru,nope"], 2, ["nope"], 1),
    ("bench-engine-requests", ["bench", "engine", "--requests", "-1"], 2, ["--requests"], 1),
    ("bench-accuracy-garbage", ["bench", "accuracy", "{garbage.csv}"], 1, ["header"], 1),
    ("bench-accuracy-cut", ["bench", "accuracy", "{cut-trace.csv.zst}"], 1, ["cut-trace.csv.zst", "zstd", "at byte"], 1),
    ("bench-accuracy-missing", ["bench", "accuracy", "{dir}/nope.csv"], 2, ["nope.csv"], 1),
    # the command itself
    ("unknown-command", ["nosuch"], 2, ["nosuch"], 1),
    ("unknown-option", ["simulate", "--nosuch"], 2, ["--nosuch"], 1),
]


@pytest.mark.parametrize("args, code, words, n_lines", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_and_exit_code(files, silent_server, args, code, words, n_lines):
    names = {k: str(v) for k, v in files.items()}
    names.update(silent=str(silent_server), free=str(free_port()), **{"read-only": _read_only_dir(files["dir"])})
    argv = [re.sub(r"\{([^{}]+)\}", lambda m: names[m.group(1)], a) for a in args]
    result = runner.invoke(app, argv)
    everything = result.stdout + result.stderr
    assert "Traceback" not in everything
    assert result.exit_code == code, (result.exit_code, result.stderr)
    assert isinstance(result.exception, SystemExit) or (code == 0 and result.exception is None), repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert lines, "no message on stderr"
    if n_lines is not None:
        assert len(lines) == n_lines, lines
    last = lines[-1]
    assert last.startswith("cachescope"), last
    assert "internal error" not in last and "Aborted" not in everything, last
    for word in words:
        assert word in last, (word, last)


def test_int_sizes_in_yaml_are_accepted_like_on_the_command_line(files):
    result = runner.invoke(app, ["replay", "-f", "csv", "--store", str(files["dir"] / "st-int"), "--config",
                                 str(files["int-sizes.yaml"]), "--json", str(files["trace.csv"])])
    assert result.exit_code == 0, result.stderr
    assert {1_000_000_000_000, 2_000_000_000_000} == {int(line.split('"size_bytes":')[1].split(",")[0])
                                                       for line in result.stdout.splitlines()}


def test_damaged_input_keeps_what_was_read(files):
    """parse writes every event before the cut; the whole file gives more."""
    cut = runner.invoke(app, ["parse", "-f", "xrootd-gstream", "--stats", str(files["cut-gstream.jsonl.zst"])])
    whole = runner.invoke(app, ["parse", "-f", "xrootd-gstream", str(files["gstream.jsonl"])])
    assert cut.exit_code == 1 and whole.exit_code == 0
    def events(out: str) -> list[dict]:  # the origin names the file: compare the rest
        return [{k: v for k, v in orjson.loads(line).items() if k != "origin"} for line in out.splitlines()]

    got, want = events(cut.stdout), events(whole.stdout)
    assert 0 < len(got) < len(want) and got == want[: len(got)]
    assert '"error":' in cut.stderr and "truncated zstd" in cut.stderr  # the --stats summary says so


def test_simulate_claims_no_result_for_a_damaged_trace(files):
    """The engine streams the trace: a damage found part-way fails the run (exit 1, file and byte
    named) and no figure of a partial trace is printed as if it were the whole."""
    result = runner.invoke(app, ["simulate", str(files["cut-trace.csv.zst"]), "--size", "1TB", "--json"])
    assert result.exit_code == 1
    assert result.stdout == "" and "at byte" in result.stderr


def test_tier_output_stays_one_tab_per_line():
    result = runner.invoke(app, ["tier", "a\tb\x00c\\d\ne", "/atlas/x"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == 2 and all(line.count("\t") == 1 for line in lines)
    assert lines[0].split("\t")[1] == "a\\tb\\x00c\\\\d\\ne"


def test_the_installed_command_prints_no_traceback(files):
    """The console script itself (not the test runner) goes through the same handler."""
    out = subprocess.run([CLI, "simulate", str(files["corrupt-trace.csv.zst"]), "--size", "1TB"],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = subprocess.run([CLI, "replay", "-f", "xrootd-gstream", "--store", str(files["dir"] / "st-sub"),
                          str(files["cut-gstream.jsonl.gz"])], capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "Aborted" not in out.stderr
    assert "truncated gzip" in out.stderr.strip().splitlines()[-1]
