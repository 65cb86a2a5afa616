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

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import make_processor_snapshot as made  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "processor_snapshot_v2.msgpack"
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
    for key in mains:
        if key not in ENGINE_BLOBS:
            assert ours[key] == mains[key], key
    back = GroupProcessor.restore("site-A", made.config(), FIXTURE.read_bytes(), made.SHARD)
    again = msgspec.msgpack.decode(back.snapshot())
    assert {k: v for k, v in again.items() if k not in ENGINE_BLOBS} == {k: v for k, v in mains.items()
                                                                          if k not in ENGINE_BLOBS}


def test_a_state_of_other_caches_or_another_shard_is_refused():
    data = FIXTURE.read_bytes()
    other = made.config().model_copy(deep=True)
    other.shadow.sizes = ["50GB", "600GB"]
    with pytest.raises(ValueError, match="other shadow caches"):
        GroupProcessor.restore("site-A", other, data, made.SHARD)
    with pytest.raises(ValueError, match="other shadow caches"):
        GroupProcessor.restore("site-A", made.config(), data, 1)
