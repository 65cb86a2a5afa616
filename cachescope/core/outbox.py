"""Rows waiting to be written, kept inside a cache group's state.

Because the outbox is part of the checkpointed state, rows emitted before a checkpoint but not
yet written are written after a restore; rows written and then replayed again are identical,
and the ReplacingMergeTree tables keep one. So a crash neither loses nor double-counts a row.

Rows handed to a writer stay in the outbox ("in flight") until the writer confirms them: a
checkpoint taken while a background insert runs still holds those rows, and a restore writes
them again (harmless, see above) instead of losing them.
"""

from __future__ import annotations

import numpy as np

from cachescope.core.columns import EventColumns
from cachescope.core.efficiency_rows import EfficiencyRows
from cachescope.store import tables


class RawEvents:
    """A batch of raw events bound for access_events. Converted to table columns only when
    written; pickled (Flink keyed state, once per bundle) as the Kafka message it came from when
    there is one: a string copies far faster than a dozen object columns."""

    __slots__ = ("events", "message")

    def __init__(self, events: EventColumns, message: bytes | str | None = None):
        self.events = events
        self.message = message

    def __len__(self) -> int:
        return len(self.events)

    def columns(self) -> dict[str, np.ndarray]:
        return self.events.access_event_rows()

    def __reduce__(self):
        if self.message is None:
            return (RawEvents, (self.events,))
        return (_raw_from_message, (self.message,))


def _raw_from_message(message: bytes | str) -> RawEvents:
    from cachescope.core.messages import decode_batch

    return RawEvents(decode_batch(message)[1], message)


#: a table's rows: columns, or a form whose columns are made by the writer
Part = dict[str, np.ndarray] | RawEvents | EfficiencyRows


def _rows(part: Part) -> int:
    return len(next(iter(part.values()))) if isinstance(part, dict) else len(part)


class Batch:
    """Rows taken from an outbox for one write: table → parts. `done` is set by whoever wrote it."""

    __slots__ = ("tables", "rows", "done")

    def __init__(self, parts: dict[str, list[Part]], rows: int):
        self.tables = parts
        self.rows = rows
        self.done = False

    @staticmethod
    def merge(batches: list["Batch"]) -> "Batch":
        if len(batches) == 1:
            return batches[0]
        parts: dict[str, list[Part]] = {}
        for b in batches:
            for table, ps in b.tables.items():
                parts.setdefault(table, []).extend(ps)
        return Batch(parts, sum(b.rows for b in batches))

    def columns(self) -> dict[str, dict[str, np.ndarray]]:
        """One column dict per table (raw events converted here: in the writer, not the hot loop)."""
        out = {}
        for table, parts in self.tables.items():
            if isinstance(parts[0], EfficiencyRows):  # the columns of all the parts made at once
                out[table] = EfficiencyRows.merged(parts)
                continue
            cols = [p.columns() if isinstance(p, RawEvents) else p for p in parts]
            out[table] = cols[0] if len(cols) == 1 else {k: np.concatenate([c[k] for c in cols]) for k in cols[0]}
        return out


class Outbox:
    def __init__(self) -> None:
        self.pending: dict[str, list[Part]] = {}
        self.rows = 0
        self.in_flight: list[Batch] = []

    def add(self, table: str, columns: Part | None) -> None:
        if columns is None:
            return
        n = _rows(columns)
        if n:
            self.pending.setdefault(table, []).append(columns)
            self.rows += n

    def add_events(self, events: EventColumns, message: bytes | str | None = None) -> None:
        self.add(tables.ACCESS_EVENTS, RawEvents(events, message))

    def add_emitted(self, emitted) -> None:
        self.add(tables.EFFICIENCY, emitted.efficiency)
        for name, rows in emitted.rollups.items():
            self.add(tables.EFFICIENCY_ROLLUPS[name], rows)
        self.add(tables.MRC, emitted.mrc)
        self.add(tables.OBSERVED, emitted.observed)
        self.add(tables.ALERTS, emitted.alerts)

    @property
    def has_windows(self) -> bool:
        """Closed windows wait (rows other than raw events)."""
        return any(t != tables.ACCESS_EVENTS for t in self.pending)

    def take(self) -> Batch | None:
        """Everything pending as one batch, in flight until its `done` is set."""
        self.in_flight = [b for b in self.in_flight if not b.done]
        if not self.rows:
            return None
        batch = Batch(self.pending, self.rows)
        self.pending, self.rows = {}, 0
        self.in_flight.append(batch)
        return batch

    def drain(self) -> dict[str, dict[str, np.ndarray]]:
        """Everything pending, one column dict per table, taken as written."""
        batch = self.take()
        if batch is None:
            return {}
        batch.done = True
        return batch.columns()

    @property
    def unconfirmed(self) -> int:
        """Rows in flight: handed to a writer that has not confirmed them yet."""
        return sum(b.rows for b in self.in_flight if not b.done)

    def __len__(self) -> int:
        return self.rows

    def __getstate__(self):
        # in-flight batches go back to pending: restored, they are written again
        pending: dict[str, list[Part]] = {}
        for b in [b for b in self.in_flight if not b.done]:
            for table, parts in b.tables.items():
                pending.setdefault(table, []).extend(parts)
        for table, parts in self.pending.items():
            pending.setdefault(table, []).extend(parts)
        return pending

    def __setstate__(self, pending) -> None:
        self.pending = pending
        self.rows = sum(_rows(p) for parts in pending.values() for p in parts)
        self.in_flight = []
