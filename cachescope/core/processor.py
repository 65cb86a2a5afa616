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

from cachescope.admission import excluded, sampled_mask
from cachescope.core.alerts import AlertEvaluator
from cachescope.core.columns import NO_OBSERVATION, EventColumns
from cachescope.core.efficiency_rows import EfficiencyRows
from cachescope.config.pipeline import PipelineConfig
from cachescope.core.tier_codes import TierCodes
from cachescope.specs import factorize_str
from cachescope.simulation import FIELDS, LruCurve, ShadowBank, sum_by_key

STATE_VERSION = 2  # 2: hour and day windows in the state
#: the longer windows the core closes itself (µs), beside the configured efficiency window: the
#: same counters summed, emitted when their last window closed, so every resolution agrees
ROLLUPS = {"hourly": 3_600_000_000, "daily": 86_400_000_000}
_NEG_INF = np.iinfo(np.int64).min // 2
#: hits: accesses for which the real cache fetched nothing from the origin, by its own verdict
#: (AccessEvent.observed_hit); a record without one: served wholly from disk by its byte counters
#: (hit bytes, no miss or bypass bytes: the older rule, which counts a block XrdPfc was already
#: fetching as a hit)
OBSERVED_FIELDS = ("accesses", "bytes_read", "hit_bytes", "miss_bytes", "bypass_bytes", "hits")


def run_id(origin: str, seq: int) -> int:
    """The id of a processing run: xxh3-64 of its first event's identity (never 0, the id of rows
    written before runs were recorded)."""
    return xxhash.xxh3_64_intdigest(f"{origin}\x00{seq}".encode("utf-8", "surrogatepass")) or 1


def _us_to_datetime(us: np.ndarray) -> np.ndarray:
    return np.asarray(us, dtype=np.int64).astype("datetime64[us]")


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
        # the shadow caches on all cores (`ShadowBank.feed_cells`)? The adapter decides, not the
        # state: in the Flink job the processing thread is the chain the stream waits for; in the
        # embedded replay it is the store writer's thread, which the second core is then left to
        self.parallel_caches = parallel_caches
        w = config.windows
        self.window_us = w.us("efficiency")
        self.curve_window_us = w.us("curve")
        self.ooo_us = w.us("max_out_of_orderness")
        self.lateness_us = w.us("allowed_lateness")
        self.specs = config.shadow.specs()  # as configured: the labels of the rows
        self.bank = ShadowBank([replace(s, capacity=self._share(s.capacity)) for s in self.specs], config.n_tiers)
        if cache_group in config.shadow.xcache_seeds:
            self._seed(config.shadow.xcache_seeds[cache_group])
        self.curve_grid = np.asarray(config.curve.grid(), dtype=np.uint64)
        self.curve = LruCurve([self._share(int(c)) for c in self.curve_grid], config.n_tiers,
                              config.curve.sample_rate, config.curve.max_objects) if config.curve.enabled else None
        self.tiers = TierCodes(config.n_tiers)
        self.max_ts = _NEG_INF
        # open windows: the counters of efficiency windows and their hours and days as sparse
        # cells (window start, cache, tier, fields), one per key, sorted; the starts of the windows
        # that saw events (a window of only writes or deletes closes too: alerts count it)
        # (efficiency: window-disjoint pieces in window order, so a batch's cells are kept as the
        # engine returned them instead of copied behind the earlier windows)
        self.open_eff: list[_Cells] = []
        self.open_eff_starts: set[int] = set()
        self.open_rollup: dict[str, _Cells] = {name: _Cells.empty(len(FIELDS)) for name in ROLLUPS}
        self.open_rollup_starts: dict[str, set[int]] = {name: set() for name in ROLLUPS}
        self.open_curve: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # real-cache numbers per (window, server, tier), one row per key, sorted
        self.open_observed = _Observed.empty()
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

    @property
    def _shape(self) -> tuple[int, int, int]:
        """A window's dense counters: (caches, tiers, fields)."""
        return (len(self.specs), self.config.n_tiers, len(FIELDS))

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
        tier = self._tier_codes(ev.tier, win)
        self.open_eff_starts.update(np.unique(win).tolist())
        # the engine numbers windows within the batch and returns only the cells it touched
        low = int(win.min())
        index = (win - low) // self.window_us
        starts = None
        if int(index.max()) >= 2**32:  # a batch over 136 years of 1-s windows: number the windows seen
            starts, index = np.unique(win, return_inverse=True)
            index = index.reshape(-1)
        adm = self.config.shadow.admission
        out = excluded(ev.tier, ev.file_size, ev.op, adm.exclude_tiers, adm.max_file_size) if adm else None
        if out is None or not out.any():
            cells = _Cells.of(self.bank.feed_cells(ev.file_id, ev.file_size, ev.bytes_read, tier, ev.op, index,
                                                   tiers_used=len(self.tiers.names), ts=ev.ts,
                                                   parallel=self.parallel_caches))
        else:
            keep = ~out
            cells = _Cells.concat([
                _Cells.of(self.bank.feed_cells(ev.file_id[keep], ev.file_size[keep], ev.bytes_read[keep], tier[keep],
                                               ev.op[keep], index[keep], tiers_used=len(self.tiers.names),
                                               ts=ev.ts[keep], parallel=self.parallel_caches)),
                self._bypassed(index[out], tier[out], ev.bytes_read[out], ev.file_id[out])]).summed(1)
        cells.start = cells.start * self.window_us + low if starts is None else starts[cells.start]
        # the open windows' cells stay one per (window, cache, tier), however many batches a window
        # spans (a live stream feeds each minute in hundreds of messages)
        self.open_eff = _Cells.add_to_pieces(self.open_eff, cells, self.window_us)
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
        self._observe(ev, win)

    def _tier_codes(self, tiers: np.ndarray, win: np.ndarray) -> np.ndarray:
        """Tier codes, new names numbered as they always were: sorted within each run of 64
        windows of a batch (the runs the engine was once fed in), so rows keep their order."""
        idx = np.unique(win, return_inverse=True)[1].reshape(-1)
        cuts = np.flatnonzero(np.diff(np.maximum.accumulate(idx) // 64)) + 1
        if len(cuts) == 0:
            return self.tiers.encode(tiers)
        return np.concatenate([self.tiers.encode(part) for part in np.split(tiers, cuts)])

    def _bypassed(self, index: np.ndarray, tier: np.ndarray, nbytes: np.ndarray, file_id: np.ndarray) -> "_Cells":
        """Excluded reads as cells: a request and its bytes, no hit, in every cache that samples
        the file (what the what-if counts for them)."""
        parts = []
        for c, spec in enumerate(self.bank.specs):
            m = sampled_mask(file_id, spec.sample_rate) if spec.sample_rate < 1 else slice(None)
            n = len(index[m])
            values = np.zeros((n, len(FIELDS)), dtype=np.uint64)
            values[:, F_REQUESTS] = 1
            values[:, F_BYTES_REQUESTED] = nbytes[m]
            parts.append(_Cells(index[m].astype(np.int64), np.full(n, c, dtype=np.int64), tier[m].astype(np.int64), values))
        return _Cells.concat(parts)

    def _observe(self, ev: EventColumns, win: np.ndarray) -> None:
        """The real cache's own numbers (XCache records) for the same windows."""
        has = (ev.op == 0) & ((ev.observed_hit_bytes != NO_OBSERVATION) | (ev.observed_miss_bytes != NO_OBSERVATION)
                              | (ev.observed_hit != NO_OBSERVATION))
        if not has.any():
            return
        idx = np.flatnonzero(has)
        hit, miss, bypass = (np.maximum(c[idx], 0) for c in (ev.observed_hit_bytes, ev.observed_miss_bytes,
                                                                ev.observed_bypass_bytes))
        verdict = ev.observed_hit[idx]
        hits = np.where(verdict != NO_OBSERVATION, verdict == 1, (hit > 0) & (miss == 0) & (bypass == 0))
        values = np.stack([np.ones(len(idx), dtype=np.int64), ev.bytes_read[idx].astype(np.int64), hit, miss, bypass,
                           hits.astype(np.int64)], axis=1)
        self.open_observed = _Observed.concat([self.open_observed,
                                               _Observed(win[idx], ev.server[idx], ev.tier[idx], values)]).summed(self.window_us)

    # ------------------------------------------------------------------ emission

    def _emit(self, out: Emitted, closed_before: int | None) -> None:
        """Emit windows whose end ≤ closed_before (None: all)."""
        def closed(start: int, length: int) -> bool:
            return closed_before is None or start + length <= closed_before

        done = sorted(s for s in self.open_eff_starts if closed(s, self.window_us))
        eff: list[_Cells] = []
        obs = None
        if done:
            self.open_eff_starts.difference_update(done)
            eff, self.open_eff = _Cells.split_pieces(self.open_eff, closed_before, self.window_us)
        if self.open_observed.n:
            obs, self.open_observed = self.open_observed.split(closed_before, self.window_us)
        if self.alerts:
            if done:  # requests, hits, bytes_requested, bytes_hit per cache, all tiers
                # summed by (window, cache) in compiled code (np.add.at and a dict per cell cost
                # more than the rest)
                n_c = len(self.specs)
                counters = np.zeros((len(done) * n_c, 4), dtype=np.uint64)
                done_starts = np.asarray(done, dtype=np.int64)
                for piece in eff:  # pieces hold disjoint windows
                    flat = _positions(done_starts, piece.start) * n_c + piece.cache
                    at, sums = sum_by_key(flat, piece.values[:, :4])
                    counters[flat[at]] = sums
                self.alerts.add_windows(done, counters=counters.reshape(len(done), n_c, 4).view(np.int64))  # wraps as int64 adds do
            if obs is not None and obs.n:  # rows come sorted by window: summed per window first
                at = np.flatnonzero(np.r_[True, obs.start[1:] != obs.start[:-1]])
                self.alerts.add_windows(obs.start[at].tolist(), observed=np.add.reduceat(obs.values[:, 2:5], at, axis=0))
        if done:
            adds = eff  # a closed window's counters join its hour, the hour's its day (summed on the way)
            for name, length in ROLLUPS.items():
                self.open_rollup_starts[name].update(s - s % length for s in done)
                adds = [_Cells(a.start - a.start % length, a.cache, a.tier, a.values).summed(length) for a in adds]
                self.open_rollup[name] = _Cells.concat([self.open_rollup[name], *adds]).summed(length)
            out.efficiency = self._efficiency_rows(eff, self.window_us, totals=True)
        for name, length in ROLLUPS.items():
            starts = self.open_rollup_starts[name]
            done_period = [s for s in starts if closed(s, length)]
            if done_period:
                starts.difference_update(done_period)
                rows, self.open_rollup[name] = self.open_rollup[name].split(closed_before, length)
                if rows.n:
                    out.rollups[name] = self._efficiency_rows([rows], length)
        done_curve = sorted(s for s in self.open_curve if closed(s, self.curve_window_us))
        if done_curve:
            out.mrc = self._curve_rows(done_curve)
        if obs is not None and obs.n:
            out.observed = self._observed_rows(obs)
        if self.alerts:
            out.alerts = self.alerts.advance(closed_before)

    def _efficiency_rows(self, pieces: list["_Cells"], length_us: int, totals: bool = False) -> EfficiencyRows | None:
        """Rows of summed cells (pieces in window order, each sorted by window, cache, tier): those
        with requests or evictions, as cells; the writer makes their columns."""
        evictions = FIELDS.index("evictions")
        kept = []
        for cells in pieces:
            keep = (cells.values[:, 0] > 0) | (cells.values[:, evictions] > 0)
            cells = cells if keep.all() else cells[np.flatnonzero(keep)]
            if not cells.n:
                continue
            kept.append(cells)
            if totals:  # (counters of the other (cache, tier) cells are 0: no request, no eviction)
                at, sums = sum_by_key(cells.cache, cells.values)
                self.emitted_totals[cells.cache[at]] += sums
                self.emitted_any[cells.cache[at]] = True
        if not kept:
            return None
        return EfficiencyRows(kept, length_us, self.cache_group, self.shard, self.run, self.specs, self.tiers.names)

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
            "cache_group": _constant(len(k), self.cache_group),
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

    def _observed_rows(self, obs: "_Observed") -> dict[str, np.ndarray]:
        rows = {
            "window_start": _us_to_datetime(obs.start),
            "cache_group": _constant(obs.n, self.cache_group),
            "server": obs.server,
            "tier": obs.tier,
        }
        for i, name in enumerate(OBSERVED_FIELDS):
            rows[name] = obs.values[:, i].astype(np.uint64)
        rows["shard"] = np.full(obs.n, self.shard, dtype=np.uint16)
        rows["run"] = np.full(obs.n, self.run, dtype=np.uint64)
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
            "eff": _Cells.concat([_Cells.empty(len(FIELDS)), *self.open_eff]).dense(self.open_eff_starts, self._shape,
                                                                                 self.window_us),
            "eff_shape": list(self._shape),
            "rollups": {name: w.dense(self.open_rollup_starts[name], self._shape, ROLLUPS[name])
                        for name, w in self.open_rollup.items()},
            "curve_open": [(s, h.tobytes(), r.tobytes()) for s, (h, r) in sorted(self.open_curve.items())],
            "obs": self.open_observed.items(),
            "alerts": self.alerts.snapshot() if self.alerts else None,
        }
        return msgspec.msgpack.encode(state)

    def _seed(self, path: str) -> None:
        """Warm start of the xcache shadows with what the group's real XCache holds (its
        `xrdpfc_print -j` output); paths normalised by the shipped tier rules, as ids are made."""
        from cachescope.tiers import TierClassifier
        from cachescope.xrdpfc import read_seed

        classifier = TierClassifier.load([])
        files = read_seed(path, lambda p: classifier.path_tier(p)[0])
        if self.config.shards > 1 and files:
            from cachescope import specs as _simcore

            ids = np.array([f[0] for f in files], dtype=np.uint64)
            mine = _simcore.partition_of(ids, self.config.shards) == self.shard
            files = [f for f, keep in zip(files, mine) if keep]
        for i, spec in enumerate(self.specs):
            if spec.policy == "xcache":
                self.bank.seed(i, files)

    @classmethod
    def restore(cls, cache_group: str, config: PipelineConfig, data: bytes, shard: int = 0) -> "GroupProcessor":
        state = msgspec.msgpack.decode(data)
        v = state.get("v")
        if v != STATE_VERSION:  # a savepoint of another release: refused in one line that says what to do
            which = "an older" if isinstance(v, int) and v < STATE_VERSION else "another"
            raise ValueError(f"saved state of cache group {cache_group!r} has format version {v} ({which} cachescope "
                             f"release), this build reads version {STATE_VERSION}: resume that savepoint with the "
                             "release that wrote it, or start this one without --restore (empty state)")
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
        cells, p.open_eff_starts = _Cells.from_dense(state["eff"], shape)
        p.open_eff = [cells.summed(p.window_us)] if cells.n else []
        for name, length in ROLLUPS.items():
            cells, p.open_rollup_starts[name] = _Cells.from_dense(state["rollups"][name], shape)
            p.open_rollup[name] = cells.summed(length)
        if p.curve is not None:
            k, t = len(p.curve.grid), config.n_tiers
            p.open_curve = {
                s: (np.frombuffer(h, dtype=np.float64).reshape(k, t, 2).copy(),
                    np.frombuffer(r, dtype=np.float64).reshape(t, 2).copy())
                for s, h, r in state["curve_open"]
            }
        p.open_observed = _Observed.from_items(state["obs"]).summed(p.window_us)
        p.alerts.restore(state.get("alerts"))
        return p


F_REQUESTS, F_BYTES_REQUESTED = FIELDS.index("requests"), FIELDS.index("bytes_requested")


class _Cells:
    """Counter cells: window start (µs), cache, tier and the FIELDS (u64), one row per cell.
    Cells of equal (start, cache, tier) add up; `summed` leaves one each, sorted (the form the
    engine hands them over in, and the open windows are kept in)."""

    __slots__ = ("start", "cache", "tier", "values")

    def __init__(self, start: np.ndarray, cache: np.ndarray, tier: np.ndarray, values: np.ndarray):
        self.start, self.cache, self.tier, self.values = start, cache, tier, values

    @property
    def n(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls, n_fields: int) -> "_Cells":
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, np.zeros((0, n_fields), dtype=np.uint64))

    @classmethod
    def of(cls, engine: dict[str, np.ndarray]) -> "_Cells":
        """The engine's cells (`ShadowBank.feed_cells`), their window numbers in `start`."""
        return cls(engine["window"].astype(np.int64), engine["cache"].astype(np.int64), engine["tier"].astype(np.int64),
                   engine["values"])

    @classmethod
    def concat(cls, parts: list["_Cells"]) -> "_Cells":
        parts = [p for p in parts if p.n] or parts[:1]
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, k) for p in parts]) for k in cls.__slots__))

    def summed(self, length: int) -> "_Cells":
        """`length`: the windows' length (µs); every start is a multiple of it."""
        if self.n < 2:
            return self
        key = _cell_key(self.start, length, self.cache, int(self.cache.max()) + 1, self.tier, int(self.tier.max()) + 1)
        # summed in compiled code (numpy's argsort, masks and add.at were a fifth of the replay's
        # main thread); sums wrap past 2^64 as numpy's adds
        at, values = sum_by_key(key, self.values)
        return _Cells(self.start[at], self.cache[at], self.tier[at], values)

    @staticmethod
    def add_to_pieces(pieces: list["_Cells"], other: "_Cells", length: int) -> list["_Cells"]:
        """Summed pieces of disjoint windows in window order, plus summed `other`: the same. Only
        the cells of `other` in windows up to the pieces' last are added up, into one piece with
        the earlier pieces; those of later windows stay as they are, as the next piece (a replay's
        batch reaches into the last few open windows and adds hundreds of new ones)."""
        if not other.n:
            return pieces
        i = int(np.searchsorted(other.start, pieces[-1].start[-1], side="right")) if pieces else 0
        if i == 0:  # all in later windows: nothing to add up, nothing copied
            return [*pieces, other]
        head = _Cells.concat([*pieces, other[:i]]).summed(length)
        return [head, other[i:]] if i < other.n else [head]

    @staticmethod
    def split_pieces(pieces: list["_Cells"], closed_before: int | None,
                     length: int) -> tuple[list["_Cells"], list["_Cells"]]:
        """`split` of each piece: (the pieces' cells of closed windows, those of open ones), as views."""
        closed, still_open = [], []
        for piece in pieces:
            c, o = piece.split(closed_before, length)
            if c.n:
                closed.append(c)
            if o.n:
                still_open.append(o)
        return closed, still_open

    def __getitem__(self, rows: slice | np.ndarray) -> "_Cells":
        return _Cells(self.start[rows], self.cache[rows], self.tier[rows], self.values[rows])

    def split(self, closed_before: int | None, length: int) -> tuple["_Cells", "_Cells"]:
        """Summed cells (sorted by window): (those of windows closed before `closed_before`
        (None: all), the others), as views."""
        if closed_before is None:
            return self, _Cells.empty(self.values.shape[1])
        i = int(np.searchsorted(self.start, closed_before - length, side="right"))
        return self[:i], self[i:]

    def dense(self, starts: set[int], shape: tuple[int, int, int], length: int) -> list[tuple[int, bytes]]:
        """The snapshot form: (start, dense (caches, tiers, fields) u64 bytes) per open window."""
        c = self.summed(length)
        out = []
        for s in sorted(starts):
            block = np.zeros(shape, dtype=np.uint64)
            m = c.start == s
            block[c.cache[m], c.tier[m]] = c.values[m]
            out.append((s, block.tobytes()))
        return out

    @classmethod
    def from_dense(cls, windows: list, shape: tuple) -> tuple["_Cells", set[int]]:
        parts = [cls.empty(shape[2])]
        for s, b in windows:
            block = np.frombuffer(b, dtype=np.uint64).reshape(shape)
            c, t = np.nonzero(block.any(axis=2))
            parts.append(cls(np.full(len(c), s, dtype=np.int64), c.astype(np.int64), t.astype(np.int64), block[c, t].copy()))
        return cls.concat(parts), {s for s, _ in windows}


def _cell_key(start: np.ndarray, length: int, a: np.ndarray, n_a: int, b: np.ndarray, n_b: int) -> np.ndarray:
    """An int64 key that orders rows by (start, a, b), equal for equal triples: one integer over
    the windows' range (`length` µs; every start a multiple of it) when it fits, else each row's
    rank by the three (windows too far apart)."""
    w = (start - int(start.min())) // length
    if (int(w.max()) + 1) * n_a * n_b < 2**62:
        return (w * n_a + a) * n_b + b
    order = np.lexsort((b, a, start))
    s_, a_, b_ = start[order], a[order], b[order]
    first = np.ones(len(s_), dtype=bool)
    first[1:] = (s_[1:] != s_[:-1]) | (a_[1:] != a_[:-1]) | (b_[1:] != b_[:-1])
    key = np.empty(len(start), dtype=np.int64)
    key[order] = np.cumsum(first) - 1
    return key


def _positions(sorted_values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """np.searchsorted(sorted_values, starts) for sorted `starts`: one search per run of equal
    starts (a window's cells are one run), not one per cell."""
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64)
    firsts = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]])
    lengths = np.diff(np.r_[firsts, len(starts)])
    return np.repeat(np.searchsorted(sorted_values, starts[firsts]), lengths)


def _sorted_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize(values, sort=True) of a text column: codes in the values' sorted order and
    the sorted values. The few distinct values are found in compiled code (by object first)."""
    got = factorize_str(values)
    if got is None:  # not all str
        return pd.factorize(values, sort=True)
    codes, uniques = got
    order = sorted(range(len(uniques)), key=uniques.__getitem__)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], np.asarray([uniques[i] for i in order], dtype=object)


def _constant(n: int, value: str) -> np.ndarray:
    """An object column of one value: the same object n times (np.full makes n new strings, ten
    times slower, and the store's factorize then meets n objects instead of one)."""
    a = np.empty(n, dtype=object)
    a.fill(value)
    return a


class _Observed:
    """The real cache's numbers: window start, server, tier (str) and OBSERVED_FIELDS (int64)."""

    __slots__ = ("start", "server", "tier", "values")

    def __init__(self, start: np.ndarray, server: np.ndarray, tier: np.ndarray, values: np.ndarray):
        self.start, self.server, self.tier, self.values = start, server, tier, values

    @property
    def n(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls) -> "_Observed":
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object), np.zeros(0, dtype=object),
                   np.zeros((0, len(OBSERVED_FIELDS)), dtype=np.int64))

    @classmethod
    def concat(cls, parts: list["_Observed"]) -> "_Observed":
        parts = [p for p in parts if p.n] or parts[:1]
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, k) for p in parts]) for k in cls.__slots__))

    def summed(self, length: int) -> "_Observed":
        """One row per (start, server, tier), in that order (strings by code point, as sorted()).
        `length`: the windows' length (µs); every start is a multiple of it."""
        if self.n == 0:
            return self
        s_codes, s_names = _sorted_codes(self.server)
        t_codes, t_names = _sorted_codes(self.tier)
        s_names, t_names = np.asarray(s_names, dtype=object), np.asarray(t_names, dtype=object)
        key = _cell_key(self.start, length, s_codes, len(s_names), t_codes, len(t_names))
        # summed in compiled code, as _Cells; int64 sums wrap as uint64 ones do
        at, values = sum_by_key(key, self.values.view(np.uint64))
        return _Observed(self.start[at], s_names[s_codes[at]], t_names[t_codes[at]], values.view(np.int64))

    def split(self, closed_before: int | None, length: int) -> tuple["_Observed", "_Observed"]:
        if closed_before is None:
            return self, _Observed.empty()
        m = self.start + length <= closed_before
        keep = ~m
        return (_Observed(self.start[m], self.server[m], self.tier[m], self.values[m]),
                _Observed(self.start[keep], self.server[keep], self.tier[keep], self.values[keep]))

    def items(self) -> list:
        """The snapshot form: ([start, server, tier], values) per row."""
        return [([int(w), str(s), str(t)], v) for w, s, t, v in
                zip(self.start.tolist(), self.server.tolist(), self.tier.tolist(), self.values.tolist())]

    @classmethod
    def from_items(cls, items: list) -> "_Observed":
        if not items:
            return cls.empty()
        return cls(np.array([k[0] for k, _ in items], dtype=np.int64), np.array([k[1] for k, _ in items], dtype=object),
                   np.array([k[2] for k, _ in items], dtype=object), np.array([v for _, v in items], dtype=np.int64))
