"""The replay's input streams: the array merge gives heapq.merge's order (what the replay used to
do event by event), and parsing in child processes stores exactly what parsing inline stores."""

from __future__ import annotations

import heapq
from operator import attrgetter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cachescope.config import load_config
from cachescope.core.columns import EventColumns
from cachescope.events import AccessEvent
from runners.embedded import replay
from runners.parse_streams import Stream, chunks, merged
from cachescope.store import open_store, tables
from ingest.generate import make_workload, write


class _Listed(Stream):
    def __init__(self, origin: str, batches: list[list[AccessEvent]]):
        self.origin = origin
        self._batches = batches

    def batches(self):
        return (EventColumns.from_events(b) for b in self._batches)


def _event(ts: int, origin: str, seq: int) -> AccessEvent:
    return AccessEvent(ts, "S", "csv", "srv", "", "atlas", f"/f{seq}", seq, 10, 5, "read", "AOD", "g", None, None,
                       None, None, None, origin, seq)


# streams: (origin, timestamps (unsorted), batch cut sizes); origins repeat on purpose (a file given twice)
_streams = st.lists(st.tuples(st.sampled_from(["file:a", "file:b", "file:c"]),
                              st.lists(st.integers(0, 8), max_size=12), st.integers(1, 5)), min_size=1, max_size=4)


@settings(max_examples=400, deadline=None)
@given(_streams, st.integers(1, 7))
def test_merge_is_heapq_merge_by_ts_then_origin(streams, size):
    made = []
    for origin, stamps, cut in streams:
        events = [_event(ts, origin, i) for i, ts in enumerate(stamps)]
        made.append((origin, events, [events[i:i + cut] for i in range(0, len(events), cut)]))
    want = list(heapq.merge(*[iter(ev) for _, ev, _ in made], key=attrgetter("ts", "origin")))
    got = list(chunks(merged([_Listed(o, b) for o, _, b in made]), size))
    assert all(len(c) == size for c in got[:-1])
    flat = EventColumns.concat(got) if got else EventColumns.empty()
    assert list(zip(flat.ts.tolist(), flat.origin.tolist(), flat.seq.tolist())) == \
        [(e.ts, e.origin, e.seq) for e in want]


def _dump(store_dir):
    with open_store(store_dir=store_dir) as s:
        return {t: sorted(map(repr, s.query(f"SELECT * FROM {t} FINAL").rows))
                for t in tables.DATA_TABLES if t not in tables.SAMPLE_TABLES}


def test_child_processes_store_what_inline_parsing_stores(tmp_path):
    w = make_workload(6_000, days=2, sites=1, servers=2, seed=5)
    files = write("dcache-billing", w, tmp_path / "billing", single_file=False)
    assert len(files) > 1  # a merge across files
    cfg = tmp_path / "site.yaml"
    cfg.write_text("pipeline:\n  shadow:\n    policies: [lru]\n    sizes: [5TB]\n  curve: {points: 4}\n")
    runs = {}
    for children in (False, True):
        rejects = []
        summary = replay(files, "dcache-billing", site="MWT2", config=load_config(cfg),
                         store=open_store(store_dir=tmp_path / str(children)), parse_processes=children,
                         on_reject=lambda name, rec, rejects=rejects: rejects.append((name, rec.line, rec.reason)))
        runs[children] = (summary, sorted(rejects), _dump(tmp_path / str(children)))
    (a, rej_a, rows_a), (b, rej_b, rows_b) = runs[False], runs[True]
    assert a.events > 4000 and a.skipped > 0
    assert (a.events, a.lines, a.rejected, a.skipped, a.skipped_by_reason) == \
        (b.events, b.lines, b.rejected, b.skipped, b.skipped_by_reason)
    assert rej_a == rej_b
    assert rows_a == rows_b
    assert a.efficiency.equals(b.efficiency)


def test_a_stop_ends_the_child_processes_and_counts_the_lines_they_read(tmp_path):
    import multiprocessing
    import threading

    w = make_workload(72_000, days=1, sites=1, servers=2, seed=21)  # more than one 65,536 batch
    log = write("xrootd-gstream", w, tmp_path / "g.jsonl", single_file=True)[0]
    stop = threading.Event()
    summary = replay([log], "xrootd-gstream", config=load_config(), store=open_store(store_dir=tmp_path / "st"),
                     parse_processes=True, stop=stop, on_progress=lambda n: stop.set())
    assert summary.interrupted and summary.events == 65_536
    assert summary.lines >= summary.events + summary.skipped > summary.events  # g-stream headers are skipped
    assert multiprocessing.active_children() == []


def test_the_parse_process_runs_at_a_lower_priority_than_the_replay(tmp_path):
    """The parser is batches ahead; the inserts are what the run waits for (CHILD_NICENESS)."""
    import os

    from runners.parse_streams import CHILD_NICENESS, ChildStream

    w = make_workload(2_000, days=1, sites=1, servers=1, seed=3)
    log = write("xrootd-gstream", w, tmp_path / "g.jsonl", single_file=True)[0]
    fifo = tmp_path / "live.jsonl"
    os.mkfifo(fifo)  # the child sets its priority, then waits here until this test opens the other end
    stream = ChildStream(str(fifo), "xrootd-gstream", load_config(), "", lambda name, rec: None)
    try:
        with open(fifo, "wb") as pipe:
            child = os.getpriority(os.PRIO_PROCESS, stream._proc.pid)
            pipe.write(log.read_bytes())
        assert child == min(19, os.getpriority(os.PRIO_PROCESS, 0) + CHILD_NICENESS)
        assert sum(len(b) for b in stream.batches()) > 1_000  # and it parsed the input
    finally:
        stream.close()


def test_the_replay_runs_its_shadow_caches_on_one_core(tmp_path, monkeypatch):
    """The other core is the store writer's (and the parser's): `parallel_caches` is off."""
    from cachescope.simulation import ShadowBank

    seen = []
    feed_cells = ShadowBank.feed_cells

    def recording(self, *args, **kwargs):
        seen.append(kwargs.get("parallel", True))
        return feed_cells(self, *args, **kwargs)

    monkeypatch.setattr(ShadowBank, "feed_cells", recording)
    w = make_workload(3_000, days=1, sites=2, servers=1, seed=5)
    log = write("xrootd-gstream", w, tmp_path / "g.jsonl", single_file=True)[0]
    with open_store(store_dir=tmp_path / "store") as store:
        summary = replay([log], "xrootd-gstream", config=load_config(), store=store, parse_processes=False)
    assert summary.events > 2_000 and seen and not any(seen)


def test_gstream_compiled_columns_store_what_the_python_path_stores(tmp_path, monkeypatch):
    """The g-stream replay through the compiled parser and enricher (inline and in a child
    process, whose columns cross the pipe packed) stores the rows the Python path stores."""
    import dataclasses

    from ingest.formats import FORMATS, xrootd_gstream

    w = make_workload(6_000, days=2, sites=2, servers=3, seed=9)
    files = write("xrootd-gstream", w, tmp_path / "gs", single_file=True)
    cfg = tmp_path / "site.yaml"
    cfg.write_text("pipeline:\n  shadow:\n    policies: [lru]\n    sizes: [5TB]\n  curve: {points: 4}\n")
    runs = {}
    for how in ("python", "compiled", "child"):
        if how == "python":
            monkeypatch.setitem(FORMATS, "xrootd-gstream", dataclasses.replace(xrootd_gstream.FORMAT, columns=None))
        else:
            monkeypatch.undo()
        summary = replay(files, "xrootd-gstream", config=load_config(cfg), store=open_store(store_dir=tmp_path / how),
                         parse_processes=how == "child")
        runs[how] = ((summary.events, summary.lines, summary.rejected, summary.skipped, summary.skipped_by_reason),
                     _dump(tmp_path / how))
    assert runs["python"][0][0] > 4000 and runs["python"][0][3] > 0  # events, and skipped headers
    assert runs["compiled"] == runs["python"]
    assert runs["child"] == runs["python"]
