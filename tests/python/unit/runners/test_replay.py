"""`cachescope replay`: the embedded pipeline into chDB, cross-checked with `cachescope simulate`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

CLI = str(Path(sys.executable).parent / "cachescope")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True)


def trace(path: Path, n: int = 6000) -> None:
    """A csv trace over two hours: 300 files, reuse, partial reads and one malformed row."""
    rows = ["timestamp,obj_id,obj_size,tier,path,bytes_read"]
    for i in range(n):
        f = (i * 7919) % 300 if i % 3 else i % 40
        size = (f % 17 + 1) * 3 * 10**9
        rows.append(f"{1_700_000_000 + i},{f + 1},{size},{'AOD' if f % 2 else 'HITS'},/atlas/f{f},{size // (1 + i % 2)}")
        if i == 100:
            rows.append("1700000100,not-a-number,5,AOD,/x,5")
    path.write_text("\n".join(rows) + "\n")


def test_replay_totals_equal_simulate_and_rows_land_in_the_store(tmp_path):
    log = tmp_path / "trace.csv"
    trace(log)
    cfg = tmp_path / "site.yaml"
    cfg.write_text("site: SITE-A\npipeline:\n  shadow:\n    policies: [lru, arc]\n    sizes: [20GB, 100GB]\n"
                   "  windows: {efficiency: 5m, curve: 1h}\n")
    store = tmp_path / "store"
    out = run("replay", "--format", "csv", "--site", "SITE-A", "--config", str(cfg), "--store", str(store),
              "--json", str(log))
    assert out.returncode == 0, out.stderr
    got = {(r["policy"], r["size_bytes"]): r for r in map(orjson.loads, out.stdout.splitlines())}
    # simulate refuses the malformed row: compare on the trace without it
    clean = tmp_path / "clean.csv"
    clean.write_text("".join(line + "\n" for line in log.read_text().splitlines() if "not-a-number" not in line))
    sim = run("simulate", str(clean), "--policy", "lru,arc", "--size", "20GB,100GB", "--json")
    assert sim.returncode == 0, sim.stderr
    for want in map(orjson.loads, sim.stdout.splitlines()):
        r = got[(want["policy"], want["size_bytes"])]
        assert (r["requests"], r["hits"], r["bytes_requested"], r["bytes_hit"]) == \
            (want["requests"], want["hits"], want["bytes_requested"], want["bytes_hit"])
    # the malformed row is kept with its line number and reason
    rejects = [r for r in map(orjson.loads, (store / "rejects.jsonl").read_text().splitlines()) if not r["skipped"]]
    assert len(rejects) == 1 and rejects[0]["line"] == 103 and "obj_id" in rejects[0]["reason"]

    from cachescope import reads
    from cachescope.store import open_store

    with open_store(store_dir=store) as st:
        assert st.query("SELECT count() FROM access_events FINAL").scalar() == 6000
        first, last = reads.time_span(st)
        hourly = reads.efficiency_series(st, first, last, 3600, policies=["lru"], sizes=[20 * 10**9])
        assert (hourly["requests"].sum(), hourly["hits"].sum()) == \
            (got[("lru", 20 * 10**9)]["requests"], got[("lru", 20 * 10**9)]["hits"])
        assert st.query("SELECT count() > 0 FROM mrc FINAL").scalar()


def test_replaying_again_changes_nothing(tmp_path):
    log = tmp_path / "trace.csv"
    trace(log, 2000)
    store = tmp_path / "store"
    query = ("SELECT count(), sum(requests), sum(hits), sum(bytes_hit) FROM efficiency FINAL")
    for _ in range(2):
        assert run("replay", "--format", "csv", "--site", "S", "--store", str(store), str(log)).returncode == 0
    from cachescope import reads
    from cachescope.store import open_store

    with open_store(store_dir=store) as st:
        first = st.query(query).rows[0]
        first_w, last_w = reads.time_span(st)
        d = reads.efficiency_series(st, first_w, last_w, 86400)
        daily = (d["requests"].sum(), d["hits"].sum())
    assert first[1] == 2000 * 24 and daily == first[1:3]


def test_unknown_format_and_missing_file_are_usage_errors(tmp_path):
    assert run("replay", "--format", "nope", "--store", str(tmp_path / "s"), __file__).returncode == 2
    out = run("replay", "--format", "csv", "--store", str(tmp_path / "s"), str(tmp_path / "missing.csv"))
    assert out.returncode == 2 and "missing.csv" in out.stderr


def test_a_store_migrated_by_a_newer_cachescope_is_refused_in_one_line(tmp_path):
    from cachescope.store import open_store
    from cachescope.store.migrations import SCHEMA_MIGRATIONS, migrate

    with open_store(store_dir=tmp_path / "store") as store:
        migrate(store, events_ttl_days=0)
        store.command(f"INSERT INTO {SCHEMA_MIGRATIONS} (version, name, checksum, applied_at) "
                      "VALUES (999, 'from_the_future', 'x', now64(3))")
        before = store.query("SELECT count() FROM access_events").scalar()
    trace(tmp_path / "t.csv")
    out = run("replay", "--format", "csv", "--store", str(tmp_path / "store"), str(tmp_path / "t.csv"))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "migrations [999] this code does not know" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    with open_store(store_dir=tmp_path / "store") as store:
        assert store.query("SELECT count() FROM access_events").scalar() == before == 0


def test_a_store_in_use_by_another_process_is_named_with_its_pid(tmp_path):
    """chdb cannot share a store directory between processes; a second replay said
    `Error initializing EmbeddedServer: . (BAD_ARGUMENTS)`."""
    store = tmp_path / "store"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom cachescope.store import open_store\n"
                               f"st = open_store(store_dir={str(store)!r})\nprint('open', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "open\n"
        trace(tmp_path / "t.csv", 600)
        out = run("replay", "--format", "csv", "--store", str(store), str(tmp_path / "t.csv"))
        assert out.returncode == 1 and "Traceback" not in out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert "in use by another process" in line and f"PID {holder.pid}" in line and str(store) in line
        assert "BAD_ARGUMENTS" not in line
    finally:
        holder.stdin.close()
        holder.wait()
    # the holder is gone (the kernel dropped its lock with it): the store is free again
    out = run("replay", "--format", "csv", "--store", str(store), str(tmp_path / "t.csv"))
    assert out.returncode == 0, out.stderr
