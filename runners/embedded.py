"""The embedded runner: log files → parsers → the processing core → the embedded store (chDB).

The same GroupState the Flink job keeps per key, held here in a dict, fed in one process without
Kafka, Flink or a ClickHouse server (`cachescope replay`). Several files are merged by time (one
log per server of the same period is the usual case), so each cache group sees its accesses in
time order. A replay starts with cold caches and closes every window at the end; replaying the
same files again writes identical rows, which the tables keep once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from cachescope.config import CachescopeConfig
from cachescope.core.columns import EventColumns
from cachescope.core.group_state import GroupState
from cachescope.core.shards import split
from cachescope.core.writer import RowWriter
from cachescope.simulation import FIELDS, factorize_text
from cachescope.store import Store, migrations, tables
from runners.parse_streams import ParserStopped, Stream, chunks, merged, open_streams
from ingest.pipeline import RejectRecord

SUMMARY_FIELDS = ("requests", "hits", "bytes_requested", "bytes_hit")
_SUMMARY_INDEX = [FIELDS.index(f) for f in SUMMARY_FIELDS]


@dataclass
class ReplaySummary:
    files: int = 0
    lines: int = 0
    events: int = 0
    rejected: int = 0
    skipped: int = 0
    late: int = 0
    #: lines skipped by design (door requests, writes to a cache log, headers ...) by reason;
    #: they are counted here, not written to the rejects
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    #: damaged inputs (truncated or corrupt compressed data): the lines before the damage were replayed
    errors: list[str] = field(default_factory=list)
    #: inputs with lines of which none was usable (every one rejected): (file, lines)
    unusable: list[tuple[str, int]] = field(default_factory=list)
    #: set when `stop` ended the replay early: open windows were not closed, so a rerun of the same
    #: files completes the store (rows already written are replaced by identical ones)
    interrupted: bool = False
    #: the signal that stopped it when a parse process saw it first (a signal to the process group)
    signal: int | None = None
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: per (cache_group, policy, size_bytes), over all tiers and windows of the replay
    efficiency: pd.DataFrame = field(default_factory=pd.DataFrame)

    def ratios(self) -> pd.DataFrame:
        df = self.efficiency.copy()
        df["hit_ratio"] = df["hits"] / df["requests"].where(df["requests"] > 0)
        df["byte_hit_ratio"] = df["bytes_hit"] / df["bytes_requested"].where(df["bytes_requested"] > 0)
        return df


def _totals(groups: dict[tuple[str, int], GroupState]) -> pd.DataFrame:
    """Efficiency counters of every minute window emitted (and so written), per (cache group,
    policy, size): summed by the processors as they emit, not read back from the rows."""
    rows = []
    for (group, _), st in groups.items():
        p = st.processor
        for i in np.flatnonzero(p.emitted_any).tolist():
            spec = p.specs[i]
            rows.append((group, spec.policy, spec.capacity, *p.emitted_totals[i, _SUMMARY_INDEX].tolist()))
    df = pd.DataFrame(rows, columns=["cache_group", "policy", "size_bytes", *SUMMARY_FIELDS])
    df = df.astype({"cache_group": object, "policy": object, "size_bytes": np.uint64})
    df = df.groupby(["cache_group", "policy", "size_bytes"]).sum().reset_index()
    return df.astype({f: "int64" for f in SUMMARY_FIELDS})


def _parse_health(store: Store, parsers: list, site: str) -> None:
    """Rejected and skipped lines by reason, for the pipeline-health dashboard and alert rules."""
    from collections import Counter

    from cachescope.core.health import health_rows

    metrics: Counter = Counter()
    for p in parsers:
        st = p.stats
        metrics["lines"] += st.lines
        metrics["events"] += st.events
        metrics["rejected"] += st.rejected
        metrics["skipped"] += st.skipped
        for reason, n in st.reasons.items():  # `reasons` counts both; `skipped_reasons` the skipped
            skipped = st.skipped_reasons.get(reason, 0)
            if n - skipped:
                metrics[f"rejected:{reason}"] += n - skipped
            if skipped:
                metrics[f"skipped:{reason}"] += skipped
    store.insert(tables.PIPELINE_HEALTH, health_rows("parse", site, metrics))


def process_columns(groups: dict[tuple[str, int], GroupState], cols: EventColumns, pipeline,
                    on_late: Callable[[EventColumns], None]) -> int:
    """One batch of events through the shadow caches of their cache groups (and shards), creating
    a group's state at its first event; returns how many events were late."""
    late_events = 0
    codes, names = factorize_text(cols.cache_group)  # groups in order of appearance
    for code, group in enumerate(names):
        mine = cols.take(np.flatnonzero(codes == code)) if len(names) > 1 else cols
        for shard, part in split(mine, pipeline.shards):
            st = groups.get((group, shard))
            if st is None:
                # the caches on one core: the store writer's thread is the chain a replay
                # waits for, and a second core for the caches would slow it
                st = groups[(group, shard)] = GroupState.new(group, pipeline, shard, parallel_caches=False)
            late = st.process(part)
            if late is not None:
                late_events += len(late)
                on_late(late)
    return late_events


def replay(
    files: list[str | Path],
    fmt: str,
    *,
    config: CachescopeConfig,
    store: Store,
    site: str = "",
    on_reject: Callable[[str, RejectRecord], None] = lambda source, rec: None,
    on_late: Callable[[EventColumns], None] = lambda late: None,
    on_progress: Callable[[int], None] = lambda events: None,
    batch_events: int = 65_536,
    write_rows: int = 1_000_000,
    stop: threading.Event | None = None,
    parse_processes: bool | None = None,
    streams: list[Stream] | None = None,
) -> ReplaySummary:
    """Replay `files` (one format) through the configured shadow caches into `store`.

    Lines skipped by design are counted by reason, not passed to `on_reject`. When `stop` is set
    (a signal), the replay ends at the next batch boundary: what was processed is written, open
    windows stay open (`summary.interrupted`). `parse_processes`: parse each file in a child
    process (None: when the input is large enough to gain from the second core). `streams`: the
    files already opened (`open_streams` of the same arguments; a caller starts them before its
    own heavy imports), closed here."""
    t0 = time.perf_counter()
    # the parse processes start first: they read while this process prepares the store
    if streams is None:
        streams = open_streams(list(files), fmt, config, site, on_reject, parse_processes)
    pipeline = config.pipeline
    summary = ReplaySummary(files=len(files))
    groups: dict[tuple[str, int], GroupState] = {}
    hook = config.alerts.webhook
    webhook = None
    if hook is not None:
        from cachescope.core.webhook import AlertWebhook

        webhook = AlertWebhook(hook.url, hook.timeout_s, hook.retries, hook.max_queued)

    def written(tables_written: dict[str, dict[str, np.ndarray]]) -> None:  # on the writer's thread
        if webhook is not None:  # alerts go out once the store has them; never blocks
            webhook.send(tables_written.get(tables.ALERTS))
        for table, columns in tables_written.items():
            summary.rows[table] = summary.rows.get(table, 0) + len(next(iter(columns.values())))

    # inserts overlap parsing and the shadow caches of the next chunk; the migrations (idempotent;
    # events_ttl_days=0: old logs must not expire on insert) run first on the writer's thread,
    # while this one processes the first batches
    writer = RowWriter(store, background=True, max_queued=2, on_written=written,
                       prepare=lambda: migrations.migrate(store, events_ttl_days=0))

    def write_all() -> None:
        for st in groups.values():
            st.write(writer, "embedded")

    batches = chunks(merged(streams), batch_events)
    try:
        for cols in batches:
            writer.check()  # a store that cannot be migrated ends the replay at once
            summary.late += process_columns(groups, cols, pipeline, on_late)
            summary.events += len(cols)
            on_progress(summary.events)
            if sum(len(st.outbox) for st in groups.values()) >= write_rows:
                write_all()
            if stop is not None and stop.is_set():
                summary.interrupted = True
                break
    except ParserStopped as exc:  # the group's signal reached a parse process as it started
        summary.interrupted, summary.signal = True, exc.signum
    finally:
        batches.close()
        for s in streams:
            s.close()  # children stopped; the parsers count the lines they read
    if not summary.interrupted:
        for st in groups.values():
            st.finish()
    write_all()
    writer.close()
    if webhook is not None:
        webhook.close()
    for s in streams:
        if s.error is not None:
            summary.errors.append(s.error)
        elif not summary.interrupted and s.stats.unusable():
            summary.unusable.append((s.name, s.stats.lines))
        summary.lines += s.stats.lines
        summary.rejected += s.stats.rejected
        summary.skipped += s.stats.skipped
        for reason, n in s.stats.skipped_reasons.items():
            summary.skipped_by_reason[reason] = summary.skipped_by_reason.get(reason, 0) + n
    summary.efficiency = _totals(groups)
    _parse_health(store, streams, site)
    summary.seconds = time.perf_counter() - t0
    return summary
