"""GroupProcessor: one cache group's shadow caches, windows and real-cache observations.

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

from dataclasses import dataclass, field, replace

import msgspec
import numpy as np
import xxhash
import pandas as pd

from cachescope.admission import add_bypassed, excluded
from cachescope.core.alerts import AlertEvaluator
from cachescope.core.columns import NO_OBSERVATION, EventColumns
from cachescope.config.pipeline import PipelineConfig
from cachescope.core.tier_codes import TierCodes
from cachescope.simulation import FIELDS, LruCurve, ShadowBank

STATE_VERSION = 2  # 2: hour and day windows in the state
#: the longer windows the core closes itself (µs), beside the configured efficiency window: the
#: same counters summed, emitted when their last window closed, so every resolution agrees
ROLLUPS = {"hourly": 3_600_000_000, "daily": 86_400_000_000}
_NEG_INF = np.iinfo(np.int64).min // 2
#: hits: accesses the real cache served wholly from disk (hit bytes, no miss or bypass bytes)
OBSERVED_FIELDS = ("accesses", "bytes_read", "hit_bytes", "miss_bytes", "bypass_bytes", "hits")


def run_id(origin: str, seq: int) -> int:
    """The id of a processing run: xxh3-64 of its first event's identity (never 0, the id of rows
    written before runs were recorded)."""
    return xxhash.xxh3_64_intdigest(f"{origin}\x00{seq}".encode("utf-8", "surrogatepass")) or 1


def _us_to_datetime(us: np.ndarray) -> np.ndarray:
    return np.asarray(us, dtype=np.int64).astype("datetime64[us]")


@dataclass
class Emitted:
    """Rows ready for the store (column dicts keyed by table column names), late events, health."""

    efficiency: dict[str, np.ndarray] | None = None
    #: rollup name (ROLLUPS) → rows of its windows, columns as `efficiency`
    rollups: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
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

    def __init__(self, cache_group: str, config: PipelineConfig, shard: int = 0):
        if not 0 <= shard < config.shards:
            raise ValueError(f"shard {shard} of a cache group spread over {config.shards}")
        self.cache_group = cache_group
        self.config = config
        self.shard = shard
        w = config.windows
        self.window_us = w.us("efficiency")
        self.curve_window_us = w.us("curve")
        self.ooo_us = w.us("max_out_of_orderness")
        self.lateness_us = w.us("allowed_lateness")
        self.specs = config.shadow.specs()  # as configured: the labels of the rows
        self.bank = ShadowBank([replace(s, capacity=self._share(s.capacity)) for s in self.specs], config.n_tiers)
        self.curve_grid = np.asarray(config.curve.grid(), dtype=np.uint64)
        self.curve = LruCurve([self._share(int(c)) for c in self.curve_grid], config.n_tiers,
                              config.curve.sample_rate, config.curve.max_objects) if config.curve.enabled else None
        self.tiers = TierCodes(config.n_tiers)
        self.max_ts = _NEG_INF
        # open windows: start (µs) -> counters
        self.open_eff: dict[int, np.ndarray] = {}
        self.open_rollup: dict[str, dict[int, np.ndarray]] = {name: {} for name in ROLLUPS}
        self.open_curve: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.open_observed: dict[tuple[int, str, str], np.ndarray] = {}
        self.events_in = 0
        self.late_total = 0
        #: counters (caches, FIELDS) summed over the efficiency windows this instance emitted, and
        #: which caches had a row (requests or evictions): a replay's totals without reading rows
        self.emitted_totals = np.zeros((len(self.specs), len(FIELDS)), dtype=np.uint64)
        self.emitted_any = np.zeros(len(self.specs), dtype=bool)
        #: the processing run: set from the first event a cold state sees, kept in snapshots
        self.run = 0
        # alert rules see the group's own numbers; a group spread over shards is judged by shard 0
        # (its sub-caches hold a hash sample of the files: the same efficiencies, estimated)
        self.alerts = AlertEvaluator(cache_group, config.alert_rules if shard == 0 else [], self.specs,
                                     self.window_us, shard)

    def _share(self, capacity: int) -> int:
        """This shard's part of a capacity: as the bank splits a partitioned cache, so that the
        shards of a group together are exactly one cache of `partitions = shards`."""
        k = self.config.shards
        return capacity // k + int(self.shard < capacity % k)

    # ------------------------------------------------------------------ processing

    @property
    def watermark(self) -> int:
        return self.max_ts - self.ooo_us

    def process(self, ev: EventColumns) -> Emitted:
        """Feed one batch (arrival order) and emit every window the watermark closed."""
        n = len(ev)
        if n == 0:
            return Emitted()
        if self.run == 0:
            self.run = run_id(str(ev.origin[0]), int(ev.seq[0]))
        self.events_in += n
        ts = ev.ts.astype(np.int64, copy=False)
        # watermark each event saw: from everything before it (running max, batch-independent)
        seen_max = np.maximum.accumulate(np.concatenate(([self.max_ts], ts)))[:-1]
        win = ts - ts % self.window_us
        late = win + self.window_us + self.lateness_us <= seen_max - self.ooo_us
        self.max_ts = max(self.max_ts, int(seen_max[-1]), int(ts[-1]))
        out = Emitted()
        if late.any():
            out.late = ev.take(np.flatnonzero(late))
            self.late_total += len(out.late)
            if self.alerts:  # counted in the (open) window of the watermark each late event met
                wm = seen_max[late] - self.ooo_us
                lw, n_late = np.unique(wm - wm % self.window_us, return_counts=True)
                for w_start, k in zip(lw.tolist(), n_late.tolist()):
                    self.alerts.add_window(int(w_start), late=int(k))
            ev = ev.take(np.flatnonzero(~late))
            win = win[~late]
        if len(ev):
            self._feed(ev, win)
        self._emit(out, self.watermark - self.lateness_us)
        out.health = {"events_in": float(self.events_in), "late_events": float(self.late_total)}
        return out

    def flush(self) -> Emitted:
        """Close every open window (end of a bounded input)."""
        out = Emitted()
        self._emit(out, None)
        return out

    def _feed(self, ev: EventColumns, win: np.ndarray) -> None:
        # the engine returns dense (windows, caches, tiers, fields) counters: a batch spanning
        # thousands of sparse windows (a replay of old logs) goes in runs of about 64 windows
        starts, idx = np.unique(win, return_inverse=True)
        idx = idx.reshape(-1)
        cuts = np.flatnonzero(np.diff(np.maximum.accumulate(idx) // 64)) + 1
        if len(cuts) == 0:
            self._feed_run(ev, win, starts, idx)
        else:
            for part in np.split(np.arange(len(win)), cuts):
                self._feed_run(ev.take(part), win[part])
        self._observe(ev, win)

    def _feed_run(self, ev: EventColumns, win: np.ndarray, starts: np.ndarray | None = None,
                  window_index: np.ndarray | None = None) -> None:
        tier = self.tiers.encode(ev.tier)
        if starts is None:
            starts, window_index = np.unique(win, return_inverse=True)
        window_index = window_index.astype(np.uint32).reshape(-1)
        adm = self.config.shadow.admission
        out = excluded(ev.tier, ev.file_size, ev.op, adm.exclude_tiers, adm.max_file_size) if adm else None
        if out is None or not out.any():
            counters = self.bank.feed(ev.file_id, ev.file_size, ev.bytes_read, tier, ev.op, window=window_index, ts=ev.ts)
        else:
            keep = ~out
            fed = self.bank.feed(ev.file_id[keep], ev.file_size[keep], ev.bytes_read[keep], tier[keep], ev.op[keep],
                                 window=window_index[keep], ts=ev.ts[keep])
            counters = np.zeros((len(starts), *fed.shape[1:]), dtype=fed.dtype)
            counters[:min(len(fed), len(starts))] += fed[:len(starts)]
            add_bypassed(counters, window_index[out], tier[out], ev.bytes_read[out], ev.file_id[out],
                         [s.sample_rate for s in self.bank.specs])
        for i, start in enumerate(starts.tolist()):
            acc = self.open_eff.get(start)
            if acc is None:
                self.open_eff[start] = counters[i]  # a view: the engine's array is ours alone
            else:
                acc += counters[i]
        if self.curve is not None:
            cwin = win - win % self.curve_window_us
            cstarts, cindex = np.unique(cwin, return_inverse=True)
            hits, requested = self.curve.feed(ev.file_id, ev.file_size, ev.bytes_read, tier, ev.op,
                                              window=cindex.astype(np.uint32).reshape(-1))
            for i, start in enumerate(cstarts.tolist()):
                acc = self.open_curve.get(start)
                if acc is None:
                    self.open_curve[start] = (hits[i], requested[i])
                else:
                    acc[0][...] += hits[i]
                    acc[1][...] += requested[i]

    def _observe(self, ev: EventColumns, win: np.ndarray) -> None:
        """The real cache's own numbers (XCache records) for the same windows."""
        has = (ev.op == 0) & ((ev.observed_hit_bytes != NO_OBSERVATION) | (ev.observed_miss_bytes != NO_OBSERVATION))
        if not has.any():
            return
        idx = np.flatnonzero(has)
        # group by (window, server, tier) with integer codes: pandas groupby per batch cost more
        # than the shadow caches themselves
        w_codes, w_names = pd.factorize(win[idx])
        s_codes, s_names = pd.factorize(ev.server[idx])
        t_codes, t_names = pd.factorize(ev.tier[idx])
        key = (w_codes.astype(np.int64) * len(s_names) + s_codes) * len(t_names) + t_codes
        keys, inverse = np.unique(key, return_inverse=True)
        inverse = inverse.reshape(-1)
        values = np.zeros((len(keys), len(OBSERVED_FIELDS)), dtype=np.int64)  # exact integer sums
        hit, miss, bypass = (np.maximum(c[idx], 0) for c in (ev.observed_hit_bytes, ev.observed_miss_bytes,
                                                                ev.observed_bypass_bytes))
        for f, v in enumerate((np.ones(len(idx), dtype=np.int64), ev.bytes_read[idx].astype(np.int64), hit, miss,
                               bypass, ((hit > 0) & (miss == 0) & (bypass == 0)).astype(np.int64))):
            np.add.at(values[:, f], inverse, v)
        t_of, rest = keys % len(t_names), keys // len(t_names)
        for i, (w, srv, t) in enumerate(zip((rest // len(s_names)).tolist(), (rest % len(s_names)).tolist(),
                                            t_of.tolist())):
            k = (int(w_names[w]), str(s_names[srv]), str(t_names[t]))
            acc = self.open_observed.get(k)
            if acc is None:
                self.open_observed[k] = values[i].copy()
            else:
                acc += values[i]

    # ------------------------------------------------------------------ emission

    def _emit(self, out: Emitted, closed_before: int | None) -> None:
        """Emit windows whose end ≤ closed_before (None: all)."""
        def closed(start: int, length: int) -> bool:
            return closed_before is None or start + length <= closed_before

        done = sorted(s for s in self.open_eff if closed(s, self.window_us))
        if self.alerts:
            for start in done:  # requests, hits, bytes_requested, bytes_hit per cache, all tiers
                self.alerts.add_window(start, counters=self.open_eff[start][:, :, :4].sum(axis=1).astype(np.int64))
            for k in self.open_observed:
                if closed(k[0], self.window_us):
                    self.alerts.add_window(k[0], observed=self.open_observed[k][2:5])
        if done:
            for start in done:  # a closed window's counters join its hour and day
                for name, length in ROLLUPS.items():
                    period = self.open_rollup[name]
                    k = start - start % length
                    acc = period.get(k)
                    if acc is None:
                        period[k] = self.open_eff[start].copy()
                    else:
                        acc += self.open_eff[start]
            out.efficiency = self._efficiency_rows(self.open_eff, done, self.window_us, totals=True)
        for name, length in ROLLUPS.items():
            period = self.open_rollup[name]
            done_period = sorted(s for s in period if closed(s, length))
            if done_period:
                out.rollups[name] = self._efficiency_rows(period, done_period, length)
        done_curve = sorted(s for s in self.open_curve if closed(s, self.curve_window_us))
        if done_curve:
            out.mrc = self._curve_rows(done_curve)
        done_obs = sorted(k for k in self.open_observed if closed(k[0], self.window_us))
        if done_obs:
            out.observed = self._observed_rows(done_obs)
        if self.alerts:
            out.alerts = self.alerts.advance(closed_before)

    def _efficiency_rows(self, open_windows: dict[int, np.ndarray], starts: list[int],
                         length_us: int, totals: bool = False) -> dict[str, np.ndarray]:
        # window by window: stacking every closed window's (caches, tiers, fields) block at once
        # costs gigabytes when a replay closes a week of sparse windows
        evictions = FIELDS.index("evictions")
        wins, cs, ts, vals = [], [], [], []
        for start in starts:
            block = open_windows.pop(start)  # (caches, tiers, fields)
            c, t = np.nonzero((block[..., 0] > 0) | (block[..., evictions] > 0))
            wins.append(np.full(len(c), start, dtype=np.int64))
            cs.append(c)
            ts.append(t)
            vals.append(block[c, t])
        start = np.concatenate(wins)
        c = np.concatenate(cs)
        t = np.concatenate(ts)
        values = np.concatenate(vals).astype(np.uint64, copy=False)
        if totals:  # (counters of the other (cache, tier) cells are 0: no request, no eviction)
            np.add.at(self.emitted_totals, c, values)
            self.emitted_any[c] = True
        rows = {
            "window_start": _us_to_datetime(start),
            "window_end": _us_to_datetime(start + length_us),
            "cache_group": np.full(len(c), self.cache_group, dtype=object),
            "policy": np.array([s.policy for s in self.specs], dtype=object)[c],
            "size_bytes": np.array([s.capacity for s in self.specs], dtype=np.uint64)[c],
            "tier": np.array(self.tiers.names + [""] * (self.config.n_tiers - len(self.tiers.names)), dtype=object)[t],
            "sample_rate": np.array([s.sample_rate for s in self.specs], dtype=np.float64)[c],
            "partitions": np.array([s.partitions for s in self.specs], dtype=np.uint32)[c],
        }
        for f, name in enumerate(FIELDS):
            rows[name] = np.ascontiguousarray(values[:, f])
        rows["shard"] = np.full(len(c), self.shard, dtype=np.uint16)
        rows["run"] = np.full(len(c), self.run, dtype=np.uint64)
        return rows

    def _curve_rows(self, starts: list[int]) -> dict[str, np.ndarray]:
        grid = self.curve_grid
        parts = []
        for s in starts:
            hits, requested = self.open_curve.pop(s)  # (K, tiers, 2), (tiers, 2)
            tiers = np.flatnonzero(requested[:, 0] > 0)
            k, t = np.meshgrid(np.arange(len(grid)), tiers, indexing="ij")
            k, t = k.reshape(-1), t.reshape(-1)
            parts.append((np.full(len(k), s, dtype=np.int64), k, t, hits[k, t], requested[t]))
        start = np.concatenate([p[0] for p in parts])
        k = np.concatenate([p[1] for p in parts])
        t = np.concatenate([p[2] for p in parts])
        hits = np.concatenate([p[3] for p in parts]).reshape(-1, 2)
        req = np.concatenate([p[4] for p in parts]).reshape(-1, 2)
        names = np.array(self.tiers.names + [""] * (self.config.n_tiers - len(self.tiers.names)), dtype=object)
        return {
            "window_start": _us_to_datetime(start),
            "cache_group": np.full(len(k), self.cache_group, dtype=object),
            "tier": names[t],
            "capacity_bytes": grid[k],
            "requests": req[:, 0],
            "hits": hits[:, 0],
            "bytes_requested": req[:, 1],
            "bytes_hit": hits[:, 1],
            "sample_rate": np.full(len(k), self.curve.sample_rate, dtype=np.float64),
            "shard": np.full(len(k), self.shard, dtype=np.uint16),
            "run": np.full(len(k), self.run, dtype=np.uint64),
        }

    def _observed_rows(self, keys: list[tuple[int, str, str]]) -> dict[str, np.ndarray]:
        values = np.stack([self.open_observed.pop(k) for k in keys])
        rows = {
            "window_start": _us_to_datetime(np.array([k[0] for k in keys], dtype=np.int64)),
            "cache_group": np.full(len(keys), self.cache_group, dtype=object),
            "server": np.array([k[1] for k in keys], dtype=object),
            "tier": np.array([k[2] for k in keys], dtype=object),
        }
        for i, name in enumerate(OBSERVED_FIELDS):
            rows[name] = values[:, i].astype(np.uint64)
        rows["shard"] = np.full(len(keys), self.shard, dtype=np.uint16)
        rows["run"] = np.full(len(keys), self.run, dtype=np.uint64)
        return rows

    # ------------------------------------------------------------------ state

    def snapshot(self) -> bytes:
        """Everything needed to continue exactly where this left off (versioned)."""
        state = {
            "v": STATE_VERSION,
            "group": self.cache_group,
            "shard": self.shard,
            "shards": self.config.shards,
            "specs": [s.as_engine() for s in self.specs],
            "bank": self.bank.snapshot(),
            "curve": self.curve.snapshot() if self.curve is not None else None,
            "tiers": self.tiers.names,
            "max_ts": self.max_ts,
            "events_in": self.events_in,
            "late_total": self.late_total,
            "run": self.run,
            "eff": [(s, a.tobytes()) for s, a in sorted(self.open_eff.items())],
            "eff_shape": list(self.bank.totals().shape),
            "rollups": {name: [(s, a.tobytes()) for s, a in sorted(w.items())] for name, w in self.open_rollup.items()},
            "curve_open": [(s, h.tobytes(), r.tobytes()) for s, (h, r) in sorted(self.open_curve.items())],
            "obs": [(list(k), v.tolist()) for k, v in sorted(self.open_observed.items())],
            "alerts": self.alerts.snapshot() if self.alerts else None,
        }
        return msgspec.msgpack.encode(state)

    @classmethod
    def restore(cls, cache_group: str, config: PipelineConfig, data: bytes, shard: int = 0) -> "GroupProcessor":
        state = msgspec.msgpack.decode(data)
        if state.get("v") != STATE_VERSION:
            raise ValueError(f"cache group state version {state.get('v')}, this build reads {STATE_VERSION}")
        p = cls(cache_group, config, shard)
        if state["specs"] != [s.as_engine() for s in p.specs] or (state["shard"], state["shards"]) != (shard, config.shards):
            raise ValueError(f"saved state of cache group {cache_group!r} was made with other shadow caches; "
                             "start from an empty state (or restore the old configuration)")
        p.bank = ShadowBank.restore(state["bank"])
        if p.curve is not None and state["curve"] is not None:
            p.curve = LruCurve.restore(state["curve"])
        p.tiers = TierCodes(config.n_tiers, state["tiers"])
        p.max_ts, p.events_in, p.late_total = state["max_ts"], state["events_in"], state["late_total"]
        p.run = state["run"]
        shape = tuple(state["eff_shape"])
        p.open_eff = {s: np.frombuffer(b, dtype=np.uint64).reshape(shape).copy() for s, b in state["eff"]}
        p.open_rollup = {name: {s: np.frombuffer(b, dtype=np.uint64).reshape(shape).copy() for s, b in state["rollups"][name]}
                         for name in ROLLUPS}
        if p.curve is not None:
            k, t = len(p.curve.grid), config.n_tiers
            p.open_curve = {
                s: (np.frombuffer(h, dtype=np.float64).reshape(k, t, 2).copy(),
                    np.frombuffer(r, dtype=np.float64).reshape(t, 2).copy())
                for s, h, r in state["curve_open"]
            }
        p.open_observed = {tuple(k): np.asarray(v, dtype=np.int64) for k, v in state["obs"]}
        p.alerts.restore(state.get("alerts"))
        return p
