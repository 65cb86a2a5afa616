"""Alert rules, evaluated by the processing core as windows close.

A rule is data (cachescope/config/alerts.py; YAML: the shipped `alert_rules.yaml`, extended by the site configuration's
`alerts:` section). The evaluator of a cache group sees every closed efficiency window (the
shadow caches' counters summed over tiers) and the real cache's bytes of the same window, in
window order, empty windows included (the watermark says which windows are closed). For each
rule it computes one value per window over the rule's period (`over`), keeps a condition
pending until it has held for `for`, and emits a row when the alert starts firing and when it
resolves. Everything is a function of the windows only (not of wall-clock time or of how
events were batched), and the evaluator's state is part of the processor's snapshot: the Flink
job and the embedded replay write the same alert rows, and a restore neither repeats nor loses one.

Kinds:
- `below`: hit or transfer efficiency of one shadow cache (or of the real cache, `source:
  observed`) below `threshold` over `over`.
- `drop`: efficiency over `over` more than `drop` (a fraction) below the same hours of the
  previous `baseline_days` days (counters summed over those days).
- `real_below_shadow`: the real cache's transfer efficiency more than `margin` below the shadow
  cache of its own size and model (`policy`, `size`), over `over`.
- `stalled`: fewer than `min_events` read accesses over `over` (in event time: a gap in the
  stream closes empty windows once events resume; a live job's wall-clock lag is in
  pipeline_health).
- `late`: late events above `max_rate` of all events over `over`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import xxhash

from cachescope.config.alerts import AlertRule, resolve_cache
from cachescope.config.durations import parse_duration_us

if TYPE_CHECKING:
    from cachescope.simulation import CacheSpec

HOUR_US = 3_600_000_000
DAY_US = 86_400_000_000
# per window and cache: requests, hits, bytes_requested, bytes_hit; per window: observed hit,
# miss, bypass bytes; reads; late events
_C = 4
ALERT_COLUMNS = ("ts", "rule", "cache_group", "state", "severity", "kind", "metric", "policy", "size_bytes",
                 "value", "threshold", "reference", "starts_at", "summary", "fingerprint", "shard")


# ---------------------------------------------------------------------------------------------

def _eff(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


class _Bound:
    """A rule bound to one cache group's bank: which cache it reads, its durations."""

    def __init__(self, rule: AlertRule, specs: list["CacheSpec"], window_us: int, cache_group: str):
        self.rule = rule
        self.over_windows = max(1, -(-parse_duration_us(rule.over) // window_us))
        self.for_us = parse_duration_us(rule.for_)
        self.warmup_us = parse_duration_us(rule.warmup)
        self.cache, self.policy, self.size = resolve_cache(rule, specs, cache_group)


class AlertEvaluator:
    """One cache group's rules and their state."""

    def __init__(self, cache_group: str, rules: list[AlertRule], specs: list["CacheSpec"], window_us: int,
                 shard: int = 0):
        self.cache_group = cache_group
        self.window_us = window_us
        self.shard = shard
        self.bound = [_Bound(r, specs, window_us, cache_group) for r in rules if r.applies_to(cache_group)]
        # only the caches some rule reads are kept (column 0: any cache, for the read count: every
        # cache sees every read): the state stays small in Flink's per-bundle snapshots
        self.columns = [0] + sorted({b.cache for b in self.bound if b.cache >= 0} - {0}) if specs else []
        self.column_of = {c: i for i, c in enumerate(self.columns)}
        self.n_caches = len(self.columns)
        self.keep_windows = max([b.over_windows for b in self.bound] or [1])
        self.keep_hours = max([b.rule.baseline_days for b in self.bound if b.rule.kind == "drop"] or [0]) * 24 + 25
        self.has_drop = any(b.rule.kind == "drop" for b in self.bound)
        #: window start → counters (caches × 4), observed (hit, miss, bypass), late events
        self.recent: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
        #: hour start → counters (caches × 4), for drop baselines
        self.hourly: dict[int, np.ndarray] = {}
        self.next_window: int | None = None  # the first window not evaluated yet
        self.first_window: int | None = None  # the first window of the stream (warm-up)
        #: rule name → [pending since (µs) or None, firing since (µs) or None]
        self.state: dict[str, list] = {b.rule.name: [None, None] for b in self.bound}
        self._pending: dict[int, list] = {}  # closed windows' inputs not yet evaluated
        self._memo: dict[tuple[int, int], tuple] = {}
        #: window start → running sums of `recent` through that window; the last of them
        self._cum: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
        self._cum_last: tuple[np.ndarray, np.ndarray, int] | None = None
        #: (cache column, first hour, hours, days) → a drop rule's baseline counters and days
        self._baselines: dict[tuple[int, int, int, int], tuple[np.ndarray, int]] = {}

    def __bool__(self) -> bool:
        return bool(self.bound)

    # -- inputs -------------------------------------------------------------------------------

    def add_window(self, start: int, counters: np.ndarray | None = None, observed: np.ndarray | None = None,
                   late: int = 0) -> None:
        """Inputs of a closed window (counters: caches × fields summed over tiers, first 4 fields)."""
        if not self.bound:
            return
        slot = self._pending.get(start)
        if slot is None:
            slot = self._pending[start] = [np.zeros((self.n_caches, _C), np.int64), np.zeros(3, np.int64), 0]
        if counters is not None:
            slot[0] += counters[self.columns]
        if observed is not None:
            slot[1] += observed
        slot[2] += late

    def advance(self, closed_before: int | None) -> dict[str, np.ndarray] | None:
        """Evaluate every window that ends at or before `closed_before` (None: through the last
        window with inputs), in order, empty ones included. Returns alert rows or None."""
        if not self.bound:
            return None
        if closed_before is None:
            if not self._pending:
                return None
            closed_before = max(self._pending) + self.window_us
        if self.next_window is None:
            if not self._pending:
                return None
            self.next_window = min(self._pending)
            self.first_window = self.next_window
        rows: list[tuple] = []
        w = self.window_us
        while self.next_window + w <= closed_before:
            start = self.next_window
            slot = self._pending.pop(start, None)
            if slot is None:  # a window without events: still a window (a stall shows here)
                slot = [np.zeros((self.n_caches, _C), np.int64), np.zeros(3, np.int64), 0]
            self._remember(start, slot)
            self._evaluate(start + w, rows)
            self.next_window = start + w
        return self._rows(rows) if rows else None

    def _remember(self, start: int, slot: list) -> None:
        self.recent[start] = (slot[0], slot[1], int(slot[2]))
        # running sums over the windows remembered, in order: a period's sum is a difference of
        # two of them (int64 wraps alike both ways, so the difference is exact)
        last = self._cum_last
        self._cum_last = (slot[0].copy(), slot[1].copy(), int(slot[2])) if last is None else (
            last[0] + slot[0], last[1] + slot[1], last[2] + int(slot[2]))
        self._cum[start] = self._cum_last
        horizon = start - (self.keep_windows - 1) * self.window_us
        if len(self.recent) > self.keep_windows or next(iter(self.recent)) < horizon:
            for s in [s for s in self.recent if s < horizon]:
                del self.recent[s]
                self._cum.pop(s, None)
        if self.has_drop:
            h = start - start % HOUR_US
            acc = self.hourly.get(h)
            if acc is None:
                self.hourly[h] = slot[0].copy()
            else:
                acc += slot[0]
            old = h - self.keep_hours * HOUR_US
            for s in [s for s in self.hourly if s < old]:
                del self.hourly[s]

    # -- evaluation ---------------------------------------------------------------------------

    def _sum(self, end: int, windows: int) -> tuple[np.ndarray, np.ndarray, int]:
        got = self._memo.get((end, windows))  # rules of one period share the sums
        if got is not None:
            return got
        first = end - windows * self.window_us
        at = self.recent.get(first)
        if at is not None and self._cum_last is not None and first in self._cum:
            # the windows from `first` on, all of them remembered (consecutive: advance() walks
            # every window): the running sum now less the one before `first`
            (c1, o1, l1), (c0, o0, l0) = self._cum_last, self._cum[first]
            c = c1 - (c0 - at[0])
            o = o1 - (o0 - at[1])
            late = l1 - (l0 - at[2])
        else:
            c = np.zeros((self.n_caches, _C), np.int64)
            o = np.zeros(3, np.int64)
            late = 0
            for s, (cs, obs, lt) in self.recent.items():
                if s >= first:
                    c += cs
                    o += obs
                    late += lt
        self._memo = {(end, windows): (c, o, late)} if len(self._memo) > 8 else {**self._memo, (end, windows): (c, o, late)}
        return c, o, late

    def _value(self, b: _Bound, end: int) -> tuple[float, float, int, str] | None:
        """(value, reference, requests, text) of a rule at a window end, None when no verdict."""
        r = b.rule
        if self.first_window is not None and end - self.first_window < b.warmup_us and r.kind != "stalled":
            return None
        c, o, late = self._sum(end, b.over_windows)
        reads = int(c[0, 0]) if self.n_caches else 0  # every cache sees every read
        col = (1, 0) if r.metric == "hit" else (3, 2)
        if r.kind == "stalled":
            return float(reads), float(r.min_events), reads, ""
        if r.kind == "late":
            total = reads + late
            if total == 0:
                return None
            return late / total, r.max_rate, total, ""
        real_total = int(o.sum()) if r.kind == "real_below_shadow" or r.source == "observed" else 0
        if r.kind == "below" and r.source == "observed":
            if real_total == 0 or reads < r.min_requests:
                return None
            return o[0] / real_total, r.threshold, reads, ""
        cache = c[self.column_of[b.cache]]
        if cache[0] < r.min_requests:
            return None
        value = _eff(cache[col[0]], cache[col[1]])
        if r.kind == "below":
            return value, r.threshold, int(cache[0]), ""
        if r.kind == "real_below_shadow":
            if real_total == 0:
                return None
            return o[0] / real_total, value, int(cache[0]), ""
        # drop: the same clock hours of the previous days, summed
        over_us = b.over_windows * self.window_us
        first_h = (end - over_us) - (end - over_us) % HOUR_US
        # the hours it reads are a day old or more, complete (with windows of at most an hour):
        # the windows of one hour share the baseline
        key = (self.column_of[b.cache], first_h, -(-(end - first_h) // HOUR_US), r.baseline_days)
        got_base = self._baselines.get(key) if self.window_us <= HOUR_US else None
        if got_base is not None:
            base, days = got_base
        else:
            base = np.zeros(_C, np.int64)
            days = 0
            for d in range(1, r.baseline_days + 1):
                got = False
                h = first_h - d * DAY_US
                while h < end - d * DAY_US:
                    acc = self.hourly.get(h)
                    if acc is not None:
                        base += acc[self.column_of[b.cache]]
                        got = got or acc[self.column_of[b.cache]][0] > 0
                    h += HOUR_US
                days += got
            if len(self._baselines) > 64:
                self._baselines.clear()
            self._baselines[key] = (base, days)
        if days < r.min_baseline_days or base[0] < r.min_requests:
            return None
        return value, _eff(base[col[0]], base[col[1]]), int(cache[0]), f"{days}"

    def _breached(self, b: _Bound, v: tuple[float, float, int, str]) -> bool:
        r, (value, ref) = b.rule, v[:2]
        if math.isnan(value) or math.isnan(ref):
            return False
        if r.kind == "below":
            return value < r.threshold
        if r.kind == "drop":
            return value < ref * (1 - r.drop)
        if r.kind == "real_below_shadow":
            return ref - value > r.margin
        if r.kind == "stalled":
            return value < r.min_events
        return value > r.max_rate  # late

    def _evaluate(self, end: int, rows: list) -> None:
        for b in self.bound:
            st = self.state[b.rule.name]
            v = self._value(b, end)
            breached = v is not None and self._breached(b, v)
            if breached:
                if st[0] is None:
                    st[0] = end - self.window_us  # the condition holds from this window on
                if st[1] is None and end - st[0] >= b.for_us:
                    st[1] = st[0]
                    rows.append(self._row(b, end, "firing", v, st[1]))
            else:
                # no verdict (too few accesses) keeps a firing alert firing: resolved only on evidence
                if st[1] is not None and v is not None:
                    rows.append(self._row(b, end, "resolved", v, st[1]))
                    st[1] = None
                if v is not None or st[1] is None:
                    st[0] = None

    def _row(self, b: _Bound, end: int, state: str, v: tuple[float, float, int, str], starts_at: int) -> tuple:
        r = b.rule
        value, ref, n, extra = v
        return (end, r.name, self.cache_group, state, r.severity, r.kind,
                r.metric if r.kind not in ("stalled", "late") else r.kind, b.policy, b.size, value,
                self._threshold(r, ref), ref, starts_at, self._summary(b, state, value, ref, n, extra),
                xxhash.xxh3_64_intdigest(f"{r.name}\x00{self.cache_group}".encode()), self.shard)

    @staticmethod
    def _threshold(r: AlertRule, ref: float) -> float:
        return {"below": r.threshold, "drop": ref * (1 - r.drop) if not math.isnan(ref) else math.nan,
                "real_below_shadow": ref - r.margin if not math.isnan(ref) else math.nan,
                "stalled": float(r.min_events), "late": r.max_rate}[r.kind]

    def _summary(self, b: _Bound, state: str, value: float, ref: float, n: int, extra: str) -> str:
        r = b.rule
        cache = f"{b.policy} {_size_text(b.size)}" if b.policy else ""
        what = f"{r.metric} efficiency"
        who = "the real cache" if r.source == "observed" else f"shadow {cache}"
        verb = "fired" if state == "firing" else "resolved"
        if r.kind == "below":
            text = (f"{self.cache_group}: {what} of {who} {value:.3f} over {r.over} "
                    f"(threshold {r.threshold:.3f}, {n} reads) — {verb}")
        elif r.kind == "drop":
            pct = (1 - value / ref) * 100 if ref > 0 else 0.0
            text = (f"{self.cache_group}: {what} of shadow {cache} {value:.3f} over {r.over}, "
                    f"{pct:.0f}% below {ref:.3f} in the same hours of the previous {extra} day(s) "
                    f"(allowed drop {r.drop * 100:.0f}%, {n} reads) — {verb}")
        elif r.kind == "real_below_shadow":
            text = (f"{self.cache_group}: real cache transfer efficiency {value:.3f} over {r.over}, "
                    f"{ref - value:.3f} below the shadow {cache} at {ref:.3f} (margin {r.margin:.3f}) — {verb}")
        elif r.kind == "stalled":
            text = (f"{self.cache_group}: {int(value)} read accesses over {r.over} "
                    f"(at least {r.min_events} expected) — {verb}")
        else:
            text = f"{self.cache_group}: {value * 100:.2f}% late events over {r.over} (max {r.max_rate * 100:.2f}%) — {verb}"
        if r.summary:
            text = f"{r.summary}: {text}"
        return text

    def _rows(self, rows: list[tuple]) -> dict[str, np.ndarray]:
        cols = list(zip(*rows))
        out: dict[str, np.ndarray] = {}
        for name, values in zip(ALERT_COLUMNS, cols):
            if name in ("ts", "starts_at"):
                out[name] = np.asarray(values, dtype=np.int64).astype("datetime64[us]")
            elif name in ("size_bytes", "fingerprint"):
                out[name] = np.asarray(values, dtype=np.uint64)
            elif name in ("value", "threshold", "reference"):
                out[name] = np.asarray(values, dtype=np.float64)
            elif name == "shard":
                out[name] = np.asarray(values, dtype=np.uint16)
            else:
                out[name] = np.asarray(values, dtype=object)
        return out

    # -- state --------------------------------------------------------------------------------

    def snapshot(self) -> dict:
        return {
            "columns": self.columns,
            "next": self.next_window,
            "first": self.first_window,
            "recent": [(s, c.tobytes(), o.tolist(), lt) for s, (c, o, lt) in sorted(self.recent.items())],
            "hourly": [(s, c.tobytes()) for s, c in sorted(self.hourly.items())],
            "pending": [(s, v[0].tobytes(), v[1].tolist(), int(v[2])) for s, v in sorted(self._pending.items())],
            "state": self.state,
        }

    def restore(self, data: dict | None) -> None:
        if not data or data.get("columns") != self.columns:
            return  # other rules than the saved state's: their history starts now
        shape = (self.n_caches, _C)

        def arr(b: bytes) -> np.ndarray:
            return np.frombuffer(b, dtype=np.int64).reshape(shape).copy()

        self.next_window = data["next"]
        self.first_window = data.get("first")
        self.recent = {s: (arr(c), np.asarray(o, np.int64), lt) for s, c, o, lt in data["recent"]}
        self._baselines = {}
        self._cum, self._cum_last = {}, None
        for s in sorted(self.recent):
            c, o, lt = self.recent[s]
            last = self._cum_last
            self._cum_last = (c.copy(), o.copy(), lt) if last is None else (last[0] + c, last[1] + o, last[2] + lt)
            self._cum[s] = self._cum_last
        self.hourly = {s: arr(c) for s, c in data["hourly"]}
        self._pending = {s: [arr(c), np.asarray(o, np.int64), lt] for s, c, o, lt in data["pending"]}
        for name, st in data["state"].items():
            if name in self.state:
                self.state[name] = list(st)


def _size_text(n: int) -> str:
    for unit, f in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= f:
            return f"{n / f:g}{unit}"
    return f"{n}B"
