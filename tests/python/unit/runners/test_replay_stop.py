"""`cachescope replay` loses nothing: lines skipped by design are counted by reason (not written to
the rejects), a damaged input is stored up to the damage, and SIGINT/SIGTERM stop at a batch
boundary so that running the same command again gives the store an uninterrupted run gives."""

from __future__ import annotations

import errno
import select
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import orjson
import pytest

from cachescope.config import load_config
from runners.embedded import replay
from cachescope.store import open_store, tables
from ingest.generate import make_workload, write

CLI = str(Path(sys.executable).parent / "cachescope")
#: every table a replay writes rows into except pipeline_health (wall-clock figures of each run)
TABLES = [t for t in tables.DATA_TABLES if t not in tables.SAMPLE_TABLES]
CONFIG = ("pipeline:\n  shadow:\n    policies: [lru, s3fifo]\n    sizes: [5TB, 50TB]\n"
          "  curve: {points: 4}\n  windows: {efficiency: 10m, curve: 1h}\n")


def dump(store_dir: Path) -> dict[str, list[tuple]]:
    """Every data table's rows as a query reads them (FINAL: duplicates collapsed), sorted."""
    out = {}
    with open_store(store_dir=store_dir) as st:
        for table in TABLES:
            out[table] = sorted(map(repr, st.query(f"SELECT * FROM {table} FINAL").rows))
    return out


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("stop")
    w = make_workload(72_000, days=2, sites=1, servers=2, seed=21)  # 71,275 events: more than one 65,536 batch
    billing = write("dcache-billing", w, d / "billing", single_file=False)
    collector = write("xrootd-collector", w, d / "collector.jsonl", single_file=True)
    cfg = d / "site.yaml"
    cfg.write_text(CONFIG)
    return {"billing": billing, "collector": collector[0], "config": cfg, "dir": d}


@pytest.fixture(scope="module")
def uninterrupted(logs):
    store = logs["dir"] / "whole"
    summary = replay([logs["collector"]], "xrootd-collector", config=load_config(logs["config"]),
                     store=open_store(store_dir=store))
    assert summary.events > 65_536 and not summary.interrupted  # more than one batch: a stop can fall between
    return dump(store)


def test_skipped_lines_are_counted_by_reason_not_written_to_rejects(logs, tmp_path):
    store = tmp_path / "store"
    files = [str(f) for f in logs["billing"]]
    out = subprocess.run([CLI, "replay", "-f", "dcache-billing", "--site", "MWT2", "--config", str(logs["config"]),
                          "--store", str(store), *files], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rejects = [orjson.loads(line) for line in (store / "rejects.jsonl").read_text().splitlines()]
    assert not any(r["skipped"] for r in rejects)
    # the generator writes one door request per transfer: all counted, by reason, in the summary
    doors = sum(1 for f in files for line in open(f) if ":request] " in line)
    assert doors > 1000
    assert f"door request {doors:,}" in out.stderr and "skipped by design" in out.stderr
    summary = replay(files, "dcache-billing", site="MWT2", config=load_config(logs["config"]),
                     store=open_store(store_dir=tmp_path / "again"))
    assert summary.skipped_by_reason["door request"] == doors
    assert sum(summary.skipped_by_reason.values()) == summary.skipped


def test_stop_at_a_batch_boundary_then_rerun_equals_an_uninterrupted_run(logs, uninterrupted, tmp_path):
    store = tmp_path / "store"
    cfg = load_config(logs["config"])
    stop = threading.Event()
    first = replay([logs["collector"]], "xrootd-collector", config=cfg, store=open_store(store_dir=store),
                   batch_events=10_000, on_progress=lambda n: stop.set(), stop=stop)
    assert first.interrupted and first.events == 10_000
    partial = dump(store)
    assert 0 < len(partial["access_events"]) < len(uninterrupted["access_events"])
    again = replay([logs["collector"]], "xrootd-collector", config=cfg, store=open_store(store_dir=store))
    assert not again.interrupted
    assert dump(store) == uninterrupted


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_cleanly_and_the_same_command_completes_the_store(logs, uninterrupted, tmp_path, signum,
                                                                        code):
    store = tmp_path / "store"
    cmd = [CLI, "replay", "-f", "xrootd-collector", "--config", str(logs["config"]), "--store", str(store),
           str(logs["collector"])]
    # SIGINT's default in the child: a suite run as a background job ignores SIGINT (inherited)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # the handler is in place once the rejects file is open; the replay then runs for seconds
    while not (store / "rejects.jsonl").exists() and proc.poll() is None:
        threading.Event().wait(0.05)
    proc.send_signal(signum)
    _, err = proc.communicate()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert f"interrupted by {signal.Signals(signum).name}" in last and "run the same command again" in last
    assert "events" in last
    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert dump(store) == uninterrupted


def test_damaged_file_is_stored_up_to_the_damage_and_others_completely(logs, tmp_path):
    import gzip

    data = Path(logs["collector"]).read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    gz = gzip.compress(data)
    cut.write_bytes(gz[: len(gz) // 2])
    other = tmp_path / "other.jsonl"
    other.write_bytes(data)
    summary = replay([cut, other], "xrootd-collector", config=load_config(logs["config"]),
                     store=open_store(store_dir=tmp_path / "store"))
    assert len(summary.errors) == 1 and "cut.jsonl.gz" in summary.errors[0] and "truncated gzip" in summary.errors[0]
    n = sum(1 for _ in data.splitlines())
    assert n < summary.events < 2 * n  # all of the whole file, part of the cut one
    with open_store(store_dir=tmp_path / "store") as st:
        sources = Counter(dict(st.query("SELECT source, count() FROM access_events FINAL GROUP BY source").rows))
    assert sum(sources.values()) == summary.events


def test_the_command_ends_without_teardown_and_leaves_the_whole_store_also_when_its_reader_leaves(
        logs, uninterrupted, tmp_path):
    """`cachescope replay` exits without Python's teardown once it succeeded: the store must be
    complete. A reader that closes the pipe early (`… --json | head -1`) is not an error."""
    store = tmp_path / "store"
    cmd = [CLI, "replay", "-f", "xrootd-collector", "--config", str(logs["config"]), "--store", str(store), "--json",
           str(logs["collector"])]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader goes away after one line
    err = proc.stderr.read().decode()
    assert proc.wait() == 0, err
    assert orjson.loads(first)["cache_group"] and "Traceback" not in err
    assert any("events/s" in line for line in err.splitlines())  # the summary still goes to stderr
    assert dump(store) == uninterrupted


def _default_stop_signals() -> None:
    # the test must not depend on what it inherited (CI may run it where SIGINT is ignored)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_DFL)


def test_sigterm_to_the_whole_process_group_stops_as_sigterm_and_the_rerun_completes(logs, uninterrupted, tmp_path):
    """systemd and container runtimes signal the whole group: the parse processes too (the input
    is large enough to be parsed in one). The replay stops as on SIGTERM to itself: 143, resumable.
    Signalled as it starts (its handler is in place once the rejects file exists)."""
    import os

    from runners.parse_streams import CHILD_MIN_BYTES

    assert Path(logs["collector"]).stat().st_size >= CHILD_MIN_BYTES  # parsed in a child process
    store = tmp_path / "store"
    cmd = [CLI, "replay", "-f", "xrootd-collector", "--config", str(logs["config"]), "--store", str(store),
           str(logs["collector"])]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0,
                            preexec_fn=_default_stop_signals)
    while not (store / "rejects.jsonl").exists() and proc.poll() is None:
        threading.Event().wait(0.01)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "ended unexpectedly" not in err
    last = err.strip().splitlines()[-1]
    assert "interrupted by SIGTERM" in last and "run the same command again" in last
    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert dump(store) == uninterrupted


def test_sigterm_to_the_whole_process_group_while_parsing_stops_as_sigterm_and_the_rerun_completes(logs, tmp_path):
    """The same signal mid-parse, on any host: the second input is a pipe the test writes, so the
    replay cannot end before the test lets it; the signal goes once the replay has read megabytes
    of it (a pipe's writes return only as its reader takes them), the rest of it unwritten then."""
    import os

    data = Path(logs["collector"]).read_bytes()
    second = tmp_path / "second.jsonl"  # the same path as a file (the baseline, the rerun) and as a pipe
    second.write_bytes(data)
    files = [logs["collector"], second]
    whole = tmp_path / "whole"
    replay(files, "xrootd-collector", config=load_config(logs["config"]), store=open_store(store_dir=whole))
    want = dump(whole)
    second.unlink()
    os.mkfifo(second)
    store = tmp_path / "store"
    cmd = [CLI, "replay", "-f", "xrootd-collector", "--config", str(logs["config"]), "--store", str(store),
           *map(str, files)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0,
                            preexec_fn=_default_stop_signals)
    while True:  # until the replay opened the pipe for reading (or it ended: its error is shown)
        try:
            pipe = os.open(second, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            assert proc.poll() is None, proc.communicate()[1]
            threading.Event().wait(0.01)
    os.set_blocking(pipe, True)
    cut = data.index(b"\n", 4 << 20) + 1  # whole lines; far more than a pipe and its reader buffer hold
    view = memoryview(data)[:cut]
    while view:
        view = view[os.write(pipe, view):]
    os.killpg(proc.pid, signal.SIGTERM)  # it has parsed megabytes of the pipe
    # the rest goes on flowing until the replay has stopped, so it reads the input it would read
    # without the stop (a pipe closed early would be a shorter input, not an interruption)
    os.set_blocking(pipe, False)
    view = memoryview(data)[cut:]
    while view and proc.poll() is None:
        select.select([], [pipe], [], 0.1)
        try:
            view = view[os.write(pipe, view[:1 << 16]):]
        except BlockingIOError:
            continue
        except BrokenPipeError:  # the replay ended its parse processes: it has stopped
            break
    os.close(pipe)
    _, err = proc.communicate()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "ended unexpectedly" not in err
    last = err.strip().splitlines()[-1]
    assert "interrupted by SIGTERM" in last and "run the same command again" in last
    second.unlink()
    second.write_bytes(data)
    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert dump(store) == want


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 8 MiB (a disk that fills up during a replay); resized with remount."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up (needs root or CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_is_said_with_its_path_and_the_rerun_after_freeing_space_completes_the_store(
        logs, uninterrupted, small_disk):
    store = small_disk / "store"
    cmd = [CLI, "replay", "-f", "xrootd-collector", "--config", str(logs["config"]), "--store", str(store),
           str(logs["collector"])]
    full = subprocess.run(cmd, capture_output=True, text=True)
    assert full.returncode == 1, full.stderr
    last = full.stderr.strip().splitlines()[-1]
    assert "Traceback" not in full.stderr and "internal error" not in last and "NOT_ENOUGH_SPACE" not in last
    assert "is full" in last and str(store) in last and "run the same command again" in last
    subprocess.run(["mount", "-o", "remount,size=1g", str(small_disk)], check=True)  # space freed
    rerun = subprocess.run(cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert dump(store) == uninterrupted


def test_a_full_disk_under_the_rejects_file_is_said_with_its_path(logs, small_disk, tmp_path):
    filler = small_disk / "filler"
    with open(filler, "wb") as f:  # leave the rejects a few kB
        f.write(bytes((8 << 20) - (16 << 10)))
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("".join(f"not a record {i}\n" for i in range(20_000)))
    rejects = small_disk / "rejects.jsonl"
    out = subprocess.run([CLI, "replay", "-f", "xrootd-collector", "--store", str(tmp_path / "store"),
                          "--rejects", str(rejects), str(garbage)], capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "is full" in last and str(rejects) in last and "run the same command again" in last
