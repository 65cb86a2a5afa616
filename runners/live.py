"""The live embedded runner: `cachescope serve --store DIR --collect udp://HOST:PORT`.

XRootD's monitoring is received and decoded (ingest.xrootd_monitoring) on two threads of the
serving process; every second (and when idle) the events decoded so far go through the shadow
caches of their cache groups exactly as `cachescope replay` feeds them (runners.embedded.
process_columns: the same GroupState, the same RowWriter into the same store), so the API and the
page show them as they come. Late events and rejects go to DIR/rejects.jsonl, the collector's
counts (datagrams, events, lost in sequence gaps, undecodable) to pipeline_health (component
`collect`) at every flush, and to the API's /metrics.

The caches start cold at start-up and their open windows are closed when the server stops (as a
replay's are at its end); the events are in the store, so `cachescope replay`-style warm-up is
a what-if away.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import orjson

from cachescope.config import CachescopeConfig
from cachescope.core.columns import EventColumns
from cachescope.core.group_state import GroupState
from cachescope.core.health import health_rows
from cachescope.core.writer import RowWriter
from cachescope.events import AccessEvent
from cachescope.store import Store, tables
from ingest.xrootd_monitoring.assemble import Assembler
from ingest.xrootd_monitoring.receiver import Receiver
from ingest.xrootd_monitoring.run import Collector
from runners.embedded import process_columns


class StoreSink:
    """A collector sink: events -> shadow caches -> the store."""

    def __init__(self, config: CachescopeConfig, store: Store, site: str,
                 on_late: Callable[[EventColumns], None] = lambda late: None):
        self.pipeline = config.pipeline
        self.store = store
        self.site = site or config.site
        self.on_late = on_late
        self.groups: dict[tuple[str, int], GroupState] = {}
        self.pending: list[AccessEvent] = []
        self.events = 0
        self.late = 0
        self.writer = RowWriter(store, background=True, max_queued=2)

    def write(self, events: list[AccessEvent]) -> None:
        self.pending += events

    def flush(self, assembler: Assembler) -> None:
        self.writer.check()
        if self.pending:
            batch, self.pending = self.pending, []
            self.late += process_columns(self.groups, EventColumns.from_events(batch), self.pipeline, self.on_late)
            self.events += len(batch)
            for st in self.groups.values():
                st.write(self.writer, "collect")
        self.store.insert(tables.PIPELINE_HEALTH, health_rows("collect", self.site, assembler.stats.health_metrics()))

    def close(self) -> None:
        """Close every open window and write it."""
        for st in self.groups.values():
            st.finish()
            st.write(self.writer, "collect")
        self.writer.close()


class LiveCollector:
    """Receiving, decoding and the shadow caches on background threads of the serving process."""

    def __init__(self, listen: tuple[str, int], config: CachescopeConfig, store: Store, *, site: str = "",
                 rejects: Path | None = None):
        self.receiver = Receiver(*listen)
        self._rejects = open(rejects, "ab") if rejects is not None else None  # noqa: SIM115
        self.assembler = Assembler(config, site=site, on_reject=self._reject)
        self.sink = StoreSink(config, store, site, on_late=self._late)
        self.collector = Collector(self.receiver, self.assembler, self.sink)
        self._thread = threading.Thread(target=self._run, name="collect-decode", daemon=True)
        self.error: BaseException | None = None

    def _reject(self, doc: dict) -> None:
        if self._rejects is not None:
            self._rejects.write(orjson.dumps(doc) + b"\n")

    def _late(self, late: EventColumns) -> None:
        if self._rejects is not None:  # as `cachescope replay` writes them
            for i in range(len(late)):
                self._rejects.write(orjson.dumps({
                    "origin": late.origin[i], "skipped": False,
                    "reason": "late: its window had closed (allowed lateness passed)",
                    "cache_group": late.cache_group[i], "ts": int(late.ts[i]), "seq": int(late.seq[i]),
                    "path": late.path[i]}) + b"\n")

    def _run(self) -> None:
        try:
            self.collector.run()
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def start(self) -> "LiveCollector":
        self.receiver.start()  # returns once the receiving process receives
        self._thread.start()
        return self

    def stop(self) -> None:
        """Write everything received, close the caches' windows, stop."""
        self.collector.stop.set()
        self._thread.join()
        self.sink.close()
        if self._rejects is not None:
            self._rejects.close()
