"""GroupProcessor: one cache group's shadow caches, windows and real-cache observations, as a
short coordinator of the parts (one module each): event time and watermark (windows.py), the shadow
caches' efficiency windows (shadow.py; admission and shards: routing.py), hours and days
(rollups.py), the LRU curve (curves.py), the real cache's numbers (observed.py), alerts
(alerts.py) and the saved state (snapshots.py); their counters are sparse cells (cells.py).

Batches of events go in (in arrival order); rows for ClickHouse come out when event-time
windows close. Everything it emits is a deterministic function of the event sequence, not of
how it was cut into batches or of wall-clock time: so a replay after a failure writes the same
rows again (ReplacingMergeTree keeps one), and Flink and the embedded mode agree.

Event time: the watermark is the largest timestamp seen so far minus the bounded
out-of-orderness, evaluated per event; an event is late when its efficiency window already
closed (window end + allowed lateness ≤ watermark). Late events leave the bank untouched and go
to `Emitted.late` (and a counter): never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xxhash

from cachescope.config.pipeline import PipelineConfig
from cachescope.core import snapshots
from cachescope.core.alerts import AlertEvaluator
from cachescope.core.columns import EventColumns
from cachescope.core.curves import Curves
from cachescope.core.efficiency_rows import EfficiencyRows
from cachescope.core.observed import RealCache
from cachescope.core.rollups import ROLLUPS, Rollups
from cachescope.core.routing import ShadowRouting
from cachescope.core.shadow import ShadowWindows
from cachescope.core.windows import EventTime


def run_id(origin: str, seq: int) -> int:
    """The id of a processing run: xxh3-64 of its first event's identity (never 0, the id of rows
    written before runs were recorded)."""
    return xxhash.xxh3_64_intdigest(f"{origin}\x00{seq}".encode("utf-8", "surrogatepass")) or 1


@dataclass
class Emitted:
    """Rows ready for the store (column dicts keyed by table column names; the shadow caches'
    counters as EfficiencyRows, whose columns the writer makes), late events, health."""

    efficiency: EfficiencyRows | None = None
    #: rollup name (ROLLUPS) → rows of its windows (the columns of `efficiency`)
    rollups: dict[str, EfficiencyRows] = field(default_factory=dict)
    mrc: dict[str, np.ndarray] | None = None
    observed: dict[str, np.ndarray] | None = None
    #: alert rows (firing / resolved) of the windows that closed
    alerts: dict[str, np.ndarray] | None = None
    late: EventColumns | None = None
    health: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.rollups) or any(x is not None for x in (self.efficiency, self.mrc, self.observed, self.alerts, self.late))


class GroupProcessor:
    """One cache group, or one shard of it (config.shards > 1: the files whose hash partition is
    `shard`, fed to caches of size/shards, rows labelled with the full size)."""

    def __init__(self, cache_group: str, config: PipelineConfig, shard: int = 0, parallel_caches: bool = True):
        if not 0 <= shard < config.shards:
            raise ValueError(f"shard {shard} of a cache group spread over {config.shards}")
        self.cache_group = cache_group
        self.config = config
        self.shard = shard
        self.parallel_caches = parallel_caches  # per-server groups (group_state.py) run alike
        w = config.windows
        self.window_us = w.us("efficiency")
        self.time = EventTime(self.window_us, w.us("max_out_of_orderness"), w.us("allowed_lateness"))
        self.routing = ShadowRouting(config, shard)
        self.shadow = ShadowWindows(config, self.routing, self.window_us, parallel_caches)
        self.specs = self.shadow.specs
        if cache_group in config.shadow.xcache_seeds:
            snapshots.seed(self, config.shadow.xcache_seeds[cache_group])
        self.curves = Curves(config, self.routing) if config.curve.enabled else None
        self.rollups = Rollups()
        self.real = RealCache(self.window_us)
        self.events_in = 0
        self.late_total = 0
        #: the processing run: set from the first event a cold state sees, kept in snapshots
        self.run = 0
        # alert rules see the group's own numbers; a group spread over shards is judged by shard 0
        # (its sub-caches hold a hash sample of the files: the same efficiencies, estimated)
        self.alerts = AlertEvaluator(cache_group, config.alert_rules if shard == 0 else [], self.specs,
                                     self.window_us, shard)

    @property
    def max_ts(self) -> int:
        return self.time.max_ts

    @property
    def watermark(self) -> int:
        return self.time.watermark

    @property
    def emitted_totals(self) -> np.ndarray:
        """Counters (caches, FIELDS) summed over the efficiency windows emitted: a replay's totals."""
        return self.shadow.emitted_totals

    @property
    def emitted_any(self) -> np.ndarray:
        """Which caches had an efficiency row (requests or evictions)."""
        return self.shadow.emitted_any

    # ------------------------------------------------------------------ processing

    def process(self, ev: EventColumns) -> Emitted:
        """Feed one batch (arrival order) and emit every window the watermark closed."""
        n = len(ev)
        if n == 0:
            return Emitted()
        if self.run == 0:
            self.run = run_id(str(ev.origin[0]), int(ev.seq[0]))
        self.events_in += n
        win, late, met = self.time.assign(ev.ts)
        out = Emitted()
        if late.any():
            out.late = ev.take(np.flatnonzero(late))
            self.late_total += len(out.late)
            if self.alerts:  # counted in the (open) window of the watermark each late event met
                for w_start, k in zip(*self.time.late_windows(met)):
                    self.alerts.add_window(int(w_start), late=int(k))
            ev = ev.take(np.flatnonzero(~late))
            win = win[~late]
        if len(ev):
            tier = self.shadow.feed(ev, win)
            if self.curves is not None:
                self.curves.feed(ev, win, tier)
            self.real.observe(ev, win)
        self._emit(out, self.time.closed_before())
        out.health = {"events_in": float(self.events_in), "late_events": float(self.late_total)}
        return out

    def flush(self) -> Emitted:
        """Close every open window (end of a bounded input)."""
        out = Emitted()
        self._emit(out, None)
        return out

    def _emit(self, out: Emitted, closed_before: int | None) -> None:
        """Emit windows whose end ≤ closed_before (None: all)."""
        done, eff = self.shadow.close(closed_before)
        obs = self.real.close(closed_before)
        if self.alerts:
            if done:
                self.alerts.add_windows(done, counters=self.shadow.alert_counters(done, eff))
            if obs is not None:
                starts, sums = self.real.alert_sums(obs)
                self.alerts.add_windows(starts, observed=sums)
        labels = (self.cache_group, self.shard, self.run)
        if done:
            self.rollups.add(done, eff)
            out.efficiency = self.shadow.rows(eff, self.window_us, *labels, totals=True)
        for name, cells in self.rollups.close(closed_before).items():
            out.rollups[name] = self.shadow.rows([cells], ROLLUPS[name], *labels)
        if self.curves is not None:
            out.mrc = self.curves.close(closed_before, *labels, self.shadow.tiers.names)
        if obs is not None:
            out.observed = self.real.rows(obs, *labels)
        if self.alerts:
            out.alerts = self.alerts.advance(closed_before)

    # ------------------------------------------------------------------ state

    def snapshot(self) -> bytes:
        """Everything needed to continue exactly where this left off (versioned: snapshots.py)."""
        return snapshots.snapshot(self)

    @classmethod
    def restore(cls, cache_group: str, config: PipelineConfig, data: bytes, shard: int = 0) -> "GroupProcessor":
        return snapshots.restore(cls, cache_group, config, data, shard)
