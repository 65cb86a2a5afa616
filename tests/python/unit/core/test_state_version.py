"""Savepoints across releases: the keyed state Flink keeps (a pickled GroupState) carries the core's
STATE_VERSION; a state written by an older release's format (version 1: no hour and day windows)
is refused in one line that names both versions and what to do, never resumed wrongly."""

from __future__ import annotations

import pickle

import msgspec
import pytest

from cachescope.config import load_config
from cachescope.core.group_state import GroupState
from cachescope.core.processor import GroupProcessor
from cachescope.core.snapshots import STATE_VERSION
from support.synthetic import event_stream


def _state() -> GroupState:
    st = GroupState.new("site-A", load_config().pipeline, 0)
    st.process(event_stream(3_000))  # open minute, hour and day windows in the state
    return st


def _as_version_1(snapshot: bytes) -> bytes:
    state = msgspec.msgpack.decode(snapshot)
    state["v"] = 1
    del state["rollups"]  # version 1 had minute windows only
    return msgspec.msgpack.encode(state)


def test_the_current_format_resumes():
    st = _state()
    back = pickle.loads(pickle.dumps(st))  # what a checkpoint or savepoint keeps for the key
    more = event_stream(1_000, seed=2, start_us=1_700_000_000_000_000 + 3_000 * 1_000_000)
    out = []
    for s in (st, back):
        s.process(more)
        s.finish()
        out.append(s.outbox.drain())
    assert out[0].keys() == out[1].keys() and out[0]
    for table in out[0]:
        for column, values in out[0][table].items():
            assert list(values) == list(out[1][table][column]), (table, column)


def test_a_savepoint_of_the_previous_state_format_is_refused_in_one_clear_line():
    assert STATE_VERSION == 2
    st = _state()
    config = load_config().pipeline
    old = _as_version_1(st.processor.snapshot())
    with pytest.raises(ValueError) as e:
        GroupProcessor.restore("site-A", config, old, 0)
    msg = str(e.value)
    assert "\n" not in msg
    assert "format version 1 (an older cachescope release)" in msg and f"reads version {STATE_VERSION}" in msg
    assert "without --restore" in msg and "'site-A'" in msg
