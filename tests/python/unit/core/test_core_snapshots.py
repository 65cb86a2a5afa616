"""cachescope.core.snapshots: a GroupProcessor's saved state. A savepoint written by main's code
before the processor was split (fixtures/processor_snapshot_v2.msgpack, made by
fixtures/make_processor_snapshot.py) resumes, and this code writes the same state."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest

from cachescope.core.processor import GroupProcessor
from cachescope.core.snapshots import STATE_VERSION

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures"))
import make_processor_snapshot as made  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "processor_snapshot_v2.msgpack"
ENGINE_BLOBS = ("bank", "curve")  # the engine's own versioned snapshots, compared by what they resume to


def _rows(emitted: list) -> dict[str, list]:
    """Every row emitted, per table and column, in order."""
    out: dict[str, list] = {}

    def add(table: str, cols: dict) -> None:
        for k, v in cols.items():
            out.setdefault(f"{table}.{k}", []).extend(np.asarray(v).tolist())

    for e in emitted:
        if e.efficiency is not None:
            add("efficiency", e.efficiency.columns())
        for name, rows in e.rollups.items():
            if rows is not None:
                add(name, rows.columns())
        for table in ("mrc", "observed", "alerts"):
            if getattr(e, table) is not None:
                add(table, getattr(e, table))
        if e.late is not None:
            add("late", {"seq": e.late.seq})
    return out


def test_a_savepoint_written_by_main_before_the_split_resumes_as_an_uninterrupted_run():
    ev, config = made.events(), made.config()
    cut = made.cut(ev)
    p = GroupProcessor.restore("site-A", config, FIXTURE.read_bytes(), made.SHARD)
    assert p.events_in == cut and p.late_total > 0 and p.real.open.n and p.curves.open and p.alerts
    resumed = made.feed(p, ev, cut, len(ev)) + [p.flush()]
    whole = GroupProcessor("site-A", config, made.SHARD)
    made.feed(whole, ev, 0, cut)
    uninterrupted = made.feed(whole, ev, cut, len(ev)) + [whole.flush()]
    want, got = _rows(uninterrupted), _rows(resumed)
    assert got.keys() == want.keys() and {"efficiency.hits", "hourly.hits", "daily.hits", "mrc.hits",
                                         "observed.hits", "alerts.state", "late.seq"} <= set(got)
    for column in want:
        assert got[column] == want[column], column


def test_this_code_writes_the_state_main_wrote():
    ev = made.events()
    p = GroupProcessor("site-A", made.config(), made.SHARD)
    made.feed(p, ev, 0, made.cut(ev))
    ours, mains = msgspec.msgpack.decode(p.snapshot()), msgspec.msgpack.decode(FIXTURE.read_bytes())
    assert ours["v"] == mains["v"] == STATE_VERSION and list(ours) == list(mains)
    ours = _without_newer_counters(ours, mains["eff_shape"][-1])
    for key in mains:
        if key not in ENGINE_BLOBS:
            assert _as_main(key, ours[key], mains[key]) == mains[key], key
    back = GroupProcessor.restore("site-A", made.config(), FIXTURE.read_bytes(), made.SHARD)
    again = _without_newer_counters(msgspec.msgpack.decode(back.snapshot()), mains["eff_shape"][-1])
    assert {k: _as_main(k, v, mains[k]) for k, v in again.items() if k not in ENGINE_BLOBS} == {
        k: v for k, v in mains.items() if k not in ENGINE_BLOBS}


def _as_main(key, ours, mains):
    """Our state in main's form: the real cache's fields added since (migration 0014: its origin
    bytes) cut to main's width — main's fields, in main's order, must be equal. The added fields
    read 0 where main's state is restored."""
    if key == "obs":
        width = len(mains[0][1]) if mains else 0
        return [[k, v[:width]] for k, v in ours]
    if key == "alerts" and ours and mains:
        width = len(mains["recent"][0][2]) if mains["recent"] else 3
        return {**ours, "recent": [[s, c, o[:width], lt] for s, c, o, lt in ours["recent"]],
                "pending": [[s, c, o[:width], lt] for s, c, o, lt in ours["pending"]]}
    return ours


def _without_newer_counters(state: dict, n_fields: int) -> dict:
    """The state as main wrote it, with its counters only: the ones added since (delayed hits)
    must all be 0 in these windows (no cache here has fetch times)."""
    shape = tuple(state["eff_shape"])
    if shape[-1] == n_fields:
        return state

    def cut(windows):
        out = []
        for start, block in windows:
            a = np.frombuffer(block, dtype=np.uint64).reshape(shape)
            assert not a[..., n_fields:].any()
            out.append([start, np.ascontiguousarray(a[..., :n_fields]).tobytes()])
        return out

    state = dict(state, eff=cut(state["eff"]), eff_shape=[*shape[:-1], n_fields])
    state["rollups"] = {name: cut(w) for name, w in state["rollups"].items()}
    return state


def test_a_state_of_other_caches_or_another_shard_is_refused():
    data = FIXTURE.read_bytes()
    other = made.config().model_copy(deep=True)
    other.shadow.sizes = ["50GB", "600GB"]
    with pytest.raises(ValueError, match="other shadow caches"):
        GroupProcessor.restore("site-A", other, data, made.SHARD)
    with pytest.raises(ValueError, match="other shadow caches"):
        GroupProcessor.restore("site-A", made.config(), data, 1)


def test_the_seed_warms_each_shard_with_its_own_files_only(shared_dir):
    """`xcache_seeds`: a shard's xcache shadows start with the seeded files of its hash partition, so
    the shards of a group together start as the one cache the group's seed describes."""
    from cachescope.core.shards import shard_of
    from cachescope.tiers import TierClassifier
    from cachescope.xrdpfc import read_seed
    from support.synthetic import event_stream

    seed = shared_dir / "xcache-lab/captures/run1-default/cinfo-print.json"
    classifier = TierClassifier.load([])
    files = read_seed(seed, lambda path: classifier.path_tier(path)[0])
    ev = event_stream(len(files), jitter_us=0, deletes=0, observed=False)
    ev.file_id = np.array([f[0] for f in files], dtype=np.uint64)
    ev.file_size = ev.bytes_read = np.array([f[1] for f in files], dtype=np.uint64)
    ev.ts = (max(f[2] for f in files) + 60 + np.arange(len(files))) * 1_000_000

    def hits(shards: int, shard: int, seeds: bool) -> int:
        from cachescope.config.pipeline import PipelineConfig

        config = PipelineConfig.model_validate({
            "shards": shards, "curve": {"enabled": False},
            "shadow": {"policies": ["xcache"], "sizes": ["10GB"], "xcache_seeds": {"g": str(seed)} if seeds else {}}})
        p = GroupProcessor("g", config, shard)
        p.process(ev)  # every seeded file read once, whichever shard it belongs to
        return int(p.flush().efficiency.columns()["hits"].sum())

    whole = hits(1, 0, True)
    parts = [hits(2, k, True) for k in range(2)]
    mine = shard_of(ev.file_id, 2)
    assert whole > 0 and hits(1, 0, False) == 0
    assert sum(parts) == whole and all(0 < n < whole for n in parts), (parts, whole, np.bincount(mine))
