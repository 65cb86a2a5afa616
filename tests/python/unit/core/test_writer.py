"""Outbox and RowWriter: rows handed to a writer stay in the state until the store accepted them."""

from __future__ import annotations

import pickle
import threading
import time

import numpy as np
import pytest

from cachescope.core.columns import EventColumns
from cachescope.core.messages import encode_batch
from cachescope.core.outbox import Outbox
from cachescope.core.writer import DRAIN_SETTINGS, RowWriter
from cachescope.store import StoreError, migrations, tables
from test_messages import _event


class HeldStore:
    """The real embedded store, whose inserts can be held (to look at the state mid-write) or
    made to fail as a lost server would."""

    def __init__(self, store):
        self.store = store
        self.hold = threading.Event()
        self.hold.set()
        self.fail = False
        self.unreachable = 0  # inserts refused next as an unreachable shard refuses them
        self.entered = threading.Event()
        self.settings: list[dict | None] = []

    def insert(self, table, columns, settings=None):
        self.entered.set()
        self.settings.append(settings)
        self.hold.wait()
        if self.fail:
            raise StoreError("server went away")
        if self.unreachable:
            self.unreachable -= 1
            raise StoreError("Code: 279. DB::NetworkException: All connection tries failed. Log: "
                             "Code: 210. DB::NetOpException: Connection refused (127.0.0.1:9001)")
        return self.store.insert(table, columns, settings)

    def count(self, table: str) -> int:
        return self.store.query(f"SELECT count() FROM {table}").scalar()


@pytest.fixture
def held(embedded_store):
    migrations.migrate(embedded_store, events_ttl_days=0)
    return HeldStore(embedded_store)


def _outbox_with_events(n: int = 10) -> tuple[Outbox, bytes]:
    events = [_event(i) for i in range(n)]
    message = encode_batch("MWT2", events)
    box = Outbox()
    box.add_events(EventColumns.from_events(events), message)
    box.add(tables.EFFICIENCY, {"requests": np.arange(3, dtype=np.uint64)})
    return box, message


def test_rows_in_flight_are_checkpointed_until_confirmed(held):
    box, _ = _outbox_with_events()
    assert box.has_windows and len(box) == 13
    store = held
    store.hold.clear()  # the insert is under way
    writer = RowWriter(store, background=True)
    writer.submit(box.take())
    assert len(box) == 0 and box.unconfirmed == 13
    restored = pickle.loads(pickle.dumps(box))  # a checkpoint taken now still has every row
    assert len(restored) == 13 and restored.has_windows
    store.hold.set()
    writer.wait()
    assert box.unconfirmed == 0
    assert (store.count(tables.ACCESS_EVENTS), store.count(tables.EFFICIENCY)) == (10, 3)
    assert len(pickle.loads(pickle.dumps(box))) == 0  # written: gone from later checkpoints
    writer.close()


def test_raw_events_are_checkpointed_as_their_message_and_come_back_equal():
    box, message = _outbox_with_events()
    data = pickle.dumps(box)
    assert message in data  # the message itself, not a dozen pickled object columns
    again = pickle.loads(data).take().columns()[tables.ACCESS_EVENTS]
    want = box.take().columns()[tables.ACCESS_EVENTS]
    for k in want:
        assert np.ma.getdata(again[k]).tolist() == np.ma.getdata(want[k]).tolist(), k


def test_a_failed_write_is_raised_in_the_callers_thread_and_the_rows_stay(held):
    box, _ = _outbox_with_events()
    store = held
    store.fail = True
    writer = RowWriter(store, background=True)
    writer.submit(box.take())
    with pytest.raises(RuntimeError, match="server went away"):
        writer.wait()
    assert box.unconfirmed == 13 and len(pickle.loads(pickle.dumps(box))) == 13
    with pytest.raises(RuntimeError):
        writer.submit(None)  # every later call fails too: the job restarts from its checkpoint
    with pytest.raises(RuntimeError):
        writer.close()


def test_queued_batches_of_several_groups_go_in_one_insert_per_table(held):
    store = held
    store.hold.clear()
    calls = []
    writer = RowWriter(store, background=True, on_written=lambda w: calls.append({t: len(next(iter(c.values())))
                                                                                  for t, c in w.items()}))
    boxes = [_outbox_with_events(5)[0] for _ in range(4)]
    for b in boxes:
        writer.submit(b.take())
    store.hold.set()
    writer.close()
    assert sum(c.get(tables.ACCESS_EVENTS, 0) for c in calls) == 20 and len(calls) < 4  # coalesced
    assert all(b.unconfirmed == 0 for b in boxes)
    assert store.count(tables.ACCESS_EVENTS) == 20


def test_what_is_queued_when_the_writer_closes_drains_on_every_core_and_is_all_written(held):
    store = held
    store.hold.clear()
    writer = RowWriter(store, background=True)
    first, second = _outbox_with_events(5)[0], _outbox_with_events(7)[0]
    writer.submit(first.take())
    assert store.entered.wait(10)  # the first batch's insert is under way: written as the loop writes
    writer.submit(second.take())
    closing = threading.Thread(target=writer.close)
    closing.start()
    while not writer._draining:
        closing.join(0.01)
    store.hold.set()
    closing.join()
    assert store.settings[0] is None
    # the rest of the batch under way when the producer stopped drains on every core too
    assert store.settings[1:] == [DRAIN_SETTINGS] * (len(store.settings) - 1) and len(store.settings) > 2
    assert (store.count(tables.ACCESS_EVENTS), store.count(tables.EFFICIENCY)) == (12, 6)
    assert first.unconfirmed == second.unconfirmed == 0


def test_prepare_runs_on_the_writers_thread_before_any_insert_and_its_error_comes_back_as_it_is(held):
    order: list[str] = []
    release = threading.Event()

    def prepare():
        release.wait(10)  # the caller goes on (submits) while this runs
        order.append(f"prepare on {threading.current_thread().name}")

    real_insert = held.insert
    held.insert = lambda *a, **k: (order.append("insert"), real_insert(*a, **k))[1]
    writer = RowWriter(held, background=True, prepare=prepare)
    box, _ = _outbox_with_events()
    writer.submit(box.take())  # returns at once: prepare is still waiting
    assert order == []
    release.set()
    writer.close()
    assert order[0] == "prepare on cachescope-row-writer" and order[1:] == ["insert"] * (len(order) - 1) and box.unconfirmed == 0

    def refused():
        raise migrations.MigrationError("database cachescope has migrations [99] this code does not know")

    failing = RowWriter(held, background=True, prepare=refused)
    box, _ = _outbox_with_events()
    with pytest.raises(migrations.MigrationError, match=r"\[99\]"):  # its own type, for the CLI's one line
        failing.submit(box.take())
        failing.wait()
    assert box.unconfirmed == 13  # nothing was inserted into a store that could not be migrated


def test_held_rows_are_written_by_their_time_without_another_call_and_stay_in_flight_until(held):
    store = held
    calls, written_at = [], []
    writer = RowWriter(store, background=True,
                       on_written=lambda w: (written_at.append(time.time()), calls.append(sorted(w))))
    box, _ = _outbox_with_events(5)
    until = time.time() + 2
    writer.submit(box.take(), hold_until=until)
    writer._queue.join()  # the writer's thread has taken the batch in: held (its time is far off)
    assert calls == [] and box.unconfirmed == 8 and len(pickle.loads(pickle.dumps(box))) == 8
    while box.unconfirmed:  # nobody calls the writer meanwhile; it writes at the batch's time
        time.sleep(0.02)
    assert written_at[0] >= until and box.unconfirmed == 0 and len(calls) == 1
    assert (store.count(tables.ACCESS_EVENTS), store.count(tables.EFFICIENCY)) == (5, 3)
    writer.close()


def test_held_rows_go_with_the_next_insert_and_health_keeps_each_groups_newest(held):
    store = held
    calls = []
    writer = RowWriter(store, background=True, on_written=lambda w: calls.append(len(w[tables.ACCESS_EVENTS]["ts"])))
    boxes = [_outbox_with_events(n)[0] for n in (3, 4, 5)]

    def health(group: str, events_in: int):
        # now: the table keeps health rows for a while only (TTL)
        return {"ts": np.array([np.datetime64(int(time.time() * 1e6) + events_in, "us")]),
                "component": np.array(["flink"], dtype=object), "cache_group": np.array([group], dtype=object),
                "metric": np.array(["events_in"], dtype=object), "value": np.array([float(events_in)])}

    far = time.time() + 3600
    writer.submit(boxes[0].take(), health("MWT2", 3), hold_until=far)
    writer.submit(boxes[1].take(), health("MWT2", 7), hold_until=far)
    writer.submit(boxes[2].take(), health("AGLT2", 5))  # written at once, the held rows with it
    writer.wait()
    assert calls == [12] and all(b.unconfirmed == 0 for b in boxes)
    rows = store.store.query("SELECT cache_group, value FROM pipeline_health ORDER BY cache_group").rows
    assert rows == [("AGLT2", 5.0), ("MWT2", 7.0)]
    writer.close()


def test_held_rows_are_written_early_past_max_held_rows_and_at_close(held):
    store = held
    writer = RowWriter(store, background=True, max_held_rows=10)
    far = time.time() + 3600
    first, second = _outbox_with_events(4)[0], _outbox_with_events(4)[0]
    writer.submit(first.take(), hold_until=far)  # 7 rows: held
    writer._queue.join()  # the writer's thread has taken it in and decided
    assert first.unconfirmed == 7
    writer.submit(second.take(), hold_until=far)  # 14 rows held: past the bound, written
    while first.unconfirmed or second.unconfirmed:  # an event: the write (no time limit)
        time.sleep(0.02)
    assert first.unconfirmed == second.unconfirmed == 0
    last = _outbox_with_events(2)[0]
    writer.submit(last.take(), hold_until=far)
    writer.close()  # a closing writer writes what it holds
    assert last.unconfirmed == 0 and store.count(tables.ACCESS_EVENTS) == 10
    waiting = threading.Thread(target=writer.wait, daemon=True)  # and has nothing left to wait for
    waiting.start()
    waiting.join(30)
    assert not waiting.is_alive()


def test_an_unreachable_store_is_retried_with_back_off_and_the_outage_goes_into_pipeline_health(held, monkeypatch):
    from cachescope.core import writer as writer_module

    monkeypatch.setattr(writer_module, "RETRY_FIRST_S", 0.05)
    box, _ = _outbox_with_events()
    store = held
    store.unreachable = 3
    writer = RowWriter(store, background=True)
    writer.submit(box.take())
    writer.wait()  # no error: retried until the store took it
    assert box.unconfirmed == 0 and writer.retries == 3 and writer.unavailable_s >= 0.05 + 0.1 + 0.2
    assert (store.count(tables.ACCESS_EVENTS), store.count(tables.EFFICIENCY)) == (10, 3)
    rows = dict(store.store.query("SELECT metric, value FROM pipeline_health WHERE component = 'writer'").rows)
    assert rows["store_retries"] == 3 and rows["store_unavailable_s"] >= 0.35
    again, _ = _outbox_with_events()
    writer.submit(again.take())
    writer.wait()  # reported once: no outage since
    assert store.count("pipeline_health") == 2
    writer.close()


def test_retries_are_bounded_and_a_refusal_that_is_no_outage_is_not_retried(held, monkeypatch):
    from cachescope.core import writer as writer_module

    monkeypatch.setattr(writer_module, "RETRY_FIRST_S", 0.05)
    box, _ = _outbox_with_events()
    held.unreachable = 1000
    writer = RowWriter(held, background=True, retry_for=0.5)
    writer.submit(box.take())
    with pytest.raises(RuntimeError, match="All connection tries failed"):
        writer.wait()
    assert box.unconfirmed == 13 and 3 <= writer.retries <= 5  # 0.05, 0.1, 0.2 (+0.4 would pass 0.5 s)
    held.unreachable, held.fail = 0, True
    other = RowWriter(held, background=True)
    other.submit(_outbox_with_events()[0].take())
    with pytest.raises(RuntimeError, match="server went away"):
        other.wait()
    assert other.retries == 0
