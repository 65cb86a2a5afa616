"""What a runner keeps per cache group: the processor and the rows it emitted but has not written.

Flink holds one of these in keyed state (pickled: the compiled bank goes through its own
versioned snapshot), the embedded replay holds one per group in a dict. Both call the same
methods, so the order "process, queue rows, write" is written once.
"""

from __future__ import annotations

import time

import numpy as np

from cachescope.core.columns import NO_OBSERVATION, EventColumns
from cachescope.events import FIELD_NAMES, FLAG_FIELDS, OBSERVED_FIELDS
from cachescope.config.pipeline import PipelineConfig
from cachescope.core.health import health_rows
from cachescope.core.outbox import Outbox
from cachescope.core.processor import GroupProcessor
from cachescope.core.shards import shard_key
from cachescope.core.writer import RowWriter
from cachescope.simulation import factorize_text


class GroupState:
    def __init__(self, processor: GroupProcessor, outbox: Outbox | None = None, keep_events: bool = True,
                 servers: dict[str, "GroupState"] | None = None):
        self.processor = processor
        self.outbox = outbox if outbox is not None else Outbox()
        self.keep_events = keep_events  # also write the raw events (access_events) for what-if replays
        #: server → its own caches (`pipeline.server_caches`: the shared-vs-per-server comparison),
        #: kept here so that both runners, and Flink's state, carry them with the group
        self.servers: dict[str, GroupState] = servers if servers is not None else {}
        self._server_config = processor.config.per_server()

    @classmethod
    def new(cls, cache_group: str, config: PipelineConfig, shard: int = 0, keep_events: bool = True,
            parallel_caches: bool = True) -> "GroupState":
        return cls(GroupProcessor(cache_group, config, shard, parallel_caches), keep_events=keep_events)

    def process(self, events: EventColumns, message: bytes | str | None = None) -> EventColumns | None:
        """Feed one batch; queue the raw events and every closed window. Returns the late events.
        `message`: the Kafka message the events came from (kept instead of them in checkpoints)."""
        emitted = self.processor.process(events)
        if self.keep_events:
            self.outbox.add_events(events, message)
        self.outbox.add_emitted(emitted)
        if self._server_config is not None:
            self._per_server(events)
        return emitted.late

    def _per_server(self, events: EventColumns) -> None:
        """The batch's events of each server through that server's caches (hour windows: an event
        late to the group's minutes is counted here; late events are the group's to report)."""
        codes, names = factorize_text(events.server)
        for code, server in enumerate(names):
            if not server:
                continue
            st = self.servers.get(server)
            if st is None:
                p = self.processor
                st = self.servers[server] = GroupState(GroupProcessor(
                    f"{p.cache_group}/{server}", self._server_config, p.shard, p.parallel_caches), keep_events=False)
            st.outbox.add_emitted(_own(st.processor.process(_unobserved(events, codes, code, len(names)))))

    def finish(self) -> None:
        """End of a bounded input: close every open window."""
        self.outbox.add_emitted(self.processor.flush())
        for st in self.servers.values():
            st.outbox.add_emitted(_own(st.processor.flush()))

    def write(self, writer: RowWriter, component: str, hold_until: float | None = None) -> None:
        """Hand the queued rows to `writer` (idempotent tables: a repeat after a crash changes
        nothing), with this group's health figures; with `hold_until`, for the writer to write
        by that time (see RowWriter.submit)."""
        for st in self.servers.values():  # their health is the group's
            writer.submit(st.outbox.take(), None, hold_until)
        batch = self.outbox.take()
        if batch is None:
            return
        p = self.processor
        writer.submit(batch, health_rows(component, shard_key(p.cache_group, p.shard, p.config.shards), {
            "rows_written": batch.rows, "events_in": p.events_in, "late_events": p.late_total,
            # how far event time trails the wall clock: the lag a dashboard alerts on
            "event_time_lag_s": 0.0 if p.events_in == 0 else max(0.0, time.time() - p.max_ts / 1e6)}), hold_until)

    def __reduce__(self):
        p = self.processor
        return (_restore, (p.cache_group, p.shard, p.config.model_dump_json(), p.snapshot(), self.outbox,
                           self.keep_events, self.servers))


def _restore(cache_group: str, shard: int, config_json: str, snapshot: bytes, outbox: Outbox,
             keep_events: bool, servers: dict[str, GroupState] | None = None) -> GroupState:
    # `servers`: absent from the state of a version without per-server caches
    config = PipelineConfig.model_validate_json(config_json)
    return GroupState(GroupProcessor.restore(cache_group, config, snapshot, shard), outbox, keep_events, servers)


def _unobserved(events: EventColumns, codes: np.ndarray, code: int, n_codes: int) -> EventColumns:
    """One server's events without the real cache's numbers: the group counts those, and its
    per-server caches skip the work (a third of theirs on XCache records)."""
    idx = None if n_codes == 1 else np.flatnonzero(codes == code)
    n = len(events) if idx is None else len(idx)
    cols = {}
    for name in FIELD_NAMES:
        a = getattr(events, name)
        if name in OBSERVED_FIELDS or name in FLAG_FIELDS:
            cols[name] = np.broadcast_to(np.array(NO_OBSERVATION, dtype=a.dtype), (n,))
        else:
            cols[name] = a if idx is None else a[idx]
    return EventColumns(**cols)


def _own(emitted):
    """A per-server group's rows: its caches' counters only (the real cache's rows, the curve and
    the alerts are the group's)."""
    emitted.observed = None
    emitted.late = None
    return emitted
