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
  cache of its own size and model (`policy`, `size`), over `over`. The real cache's transfer
  efficiency is exact only when every access of the period carries its bytes from the origin
  (XRootD >= 5.7.2's b_todisk); where records carry the cache's verdict but not those bytes (5.5
  with prefetch: b_hit counts in-flight blocks as hits) the rule compares hit efficiencies, the
  real cache's from its own verdict, and its row's `metric` says `hit`; records with neither keep
  b_hit's share.
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
# per window and cache: requests, hits, bytes_requested, bytes_hit; per window: the real cache's
# hit, miss, bypass bytes, accesses, hits, bytes read, accesses with origin bytes, their bytes served
# from the cache, accesses with a verdict but no origin bytes (cachescope/core/observed.py:
# RealCache.alert_sums); reads; late events
_C = 4
_O = 9
ALERT_COLUMNS = ("ts", "rule", "cache_group", "state", "severity", "kind", "metric", "policy", "size_bytes",
                 "value", "threshold", "reference", "starts_at", "summary", "fingerprint", "shard")


# ---------------------------------------------------------------------------------------------

#: windows evaluated together (bounded memory however long a gap in event time)
_BLOCK = 4096


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is not positive (no efficiency without requests)."""
    out = np.full(len(num), np.nan)
    ok = den > 0
    np.divide(num, den, out=out, where=ok)
    return out


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
        #: the last windows evaluated, as many as the longest period needs: their starts, counters
        #: (windows × caches × 4), the real cache's numbers (windows × _O), late events
        self._recent = _Windows.empty(self.n_caches)
        #: hour start → counters (caches × 4), for drop baselines
        self.hourly: dict[int, np.ndarray] = {}
        self.next_window: int | None = None  # the first window not evaluated yet
        self.first_window: int | None = None  # the first window of the stream (warm-up)
        #: rule name → [pending since (µs) or None, firing since (µs) or None]
        self.state: dict[str, list] = {b.rule.name: [None, None] for b in self.bound}
        self._pending: dict[int, list] = {}  # closed windows' inputs not yet evaluated

    def __bool__(self) -> bool:
        return bool(self.bound)

    # -- inputs -------------------------------------------------------------------------------

    def add_window(self, start: int, counters: np.ndarray | None = None, observed: np.ndarray | None = None,
                   late: int = 0) -> None:
        """Inputs of a closed window (counters: caches × fields summed over tiers, first 4 fields)."""
        self.add_windows([start], None if counters is None else counters[None], None if observed is None else
                         observed[None], late)

    def add_windows(self, starts: list[int], counters: np.ndarray | None = None, observed: np.ndarray | None = None,
                    late: int = 0) -> None:
        """`add_window` of several windows (counters: windows × caches × 4; observed: windows × _O,
        or its first 3 columns, the bytes), the rule's caches picked once for all (a replay closes
        ten thousand windows a week)."""
        if not self.bound:
            return
        if counters is not None:
            counters = counters[:, self.columns].astype(np.int64, copy=False)
        if observed is not None:
            observed = _widen(np.asarray(observed, np.int64))
        for i, start in enumerate(starts):
            slot = self._pending.get(start)
            if slot is None:  # the inputs' own rows (fresh arrays) become the window's
                self._pending[start] = [np.zeros((self.n_caches, _C), np.int64) if counters is None else counters[i],
                                        np.zeros(_O, np.int64) if observed is None else observed[i].astype(np.int64),
                                        late]
                continue
            if counters is not None:
                slot[0] += counters[i]
            if observed is not None:
                slot[1] += observed[i]
            slot[2] += late

    def advance(self, closed_before: int | None) -> dict[str, np.ndarray] | None:
        """Evaluate every window that ends at or before `closed_before` (None: through the last
        window with inputs), in order, empty ones included. Returns alert rows or None."""
        closed_before = self._closed_until(closed_before)
        if closed_before is None:
            return None
        rows: list[tuple] = []
        w = self.window_us
        while self.next_window + w <= closed_before:  # in blocks: a gap of years is many windows
            n = min(_BLOCK, (closed_before - self.next_window) // w)
            self._evaluate_block(self.next_window + w * np.arange(n, dtype=np.int64), rows)
            self.next_window += n * w
        return self._rows(rows) if rows else None

    def _closed_until(self, closed_before: int | None) -> int | None:
        """Where the windows to evaluate now end (None: nothing to evaluate); the stream starts at
        the first window with inputs."""
        if not self.bound:
            return None
        if closed_before is None:
            if not self._pending:
                return None
            closed_before = max(self._pending) + self.window_us
        if self.next_window is None:
            if not self._pending:
                return None
            self.next_window = self.first_window = min(self._pending)
        return closed_before

    # -- evaluation ---------------------------------------------------------------------------

    def _evaluate_block(self, starts: np.ndarray, rows: list) -> None:
        """Consecutive windows, evaluated together: every rule's value at every window end from
        running sums (numpy), then each rule's pending/firing state walked through the windows
        where it can change."""
        w, n = self.window_us, len(starts)
        first = int(starts[0])
        block = _Windows(starts, np.zeros((n, self.n_caches, _C), np.int64), np.zeros((n, _O), np.int64),
                         np.zeros(n, np.int64))
        for s in [s for s in self._pending if first <= s < first + n * w]:
            i = (s - first) // w
            block.c[i], block.o[i], block.late[i] = self._pending.pop(s)
        # the remembered windows (all before the block) first: periods reach back into them
        hist = self._recent
        k = len(hist.start)
        x = _Windows.concat(hist, block)
        c, o, late = x.c, x.o, x.late
        if self.has_drop:  # the block's hours first: a baseline reads only hours a day old or more
            self._add_hours(starts, c[k:])
        # running sums with a zero in front: a period's sum is a difference of two (int64 wraps
        # alike both ways, so it is exact); the windows of the stream before the first count 0
        cc = np.concatenate([np.zeros((1, self.n_caches, _C), np.int64), np.cumsum(c, axis=0)])
        co = np.concatenate([np.zeros((1, _O), np.int64), np.cumsum(o, axis=0)])
        cl = np.concatenate([[0], np.cumsum(late)])
        at = np.arange(k + 1, k + n + 1)
        ends = starts + w
        fired: list[tuple] = []  # (end, rule, row): rows in window order, then rule order
        for i, b in enumerate(self.bound):
            lo = np.maximum(at - b.over_windows, 0)
            value, ref, count, verdict, extra = self._values(b, ends, cc[at] - cc[lo], co[at] - co[lo], cl[at] - cl[lo])
            fired += [(row[0], i, row) for row in self._walk(b, ends, value, ref, count, verdict, extra)]
        rows += [row for _, _, row in sorted(fired, key=lambda x: x[:2])]
        self._recent = x.last(self.keep_windows)
        if self.has_drop:
            old = int(starts[-1]) - int(starts[-1]) % HOUR_US - self.keep_hours * HOUR_US
            for s in [s for s in self.hourly if s < old]:
                del self.hourly[s]

    def _add_hours(self, starts: np.ndarray, c: np.ndarray) -> None:
        hours = starts - starts % HOUR_US
        at = np.flatnonzero(np.r_[True, hours[1:] != hours[:-1]])
        for h, sums in zip(hours[at].tolist(), np.add.reduceat(c, at, axis=0)):
            acc = self.hourly.get(h)
            if acc is None:
                self.hourly[h] = sums
            else:
                acc += sums

    def _values(self, b: _Bound, ends: np.ndarray, c: np.ndarray, o: np.ndarray, late: np.ndarray):
        """A rule at each window end, from its period's sums: (value, reference, accesses, has a
        verdict, extra text per window or None)."""
        r = b.rule
        n = len(ends)
        reads = c[:, 0, 0] if self.n_caches else np.zeros(n, np.int64)  # every cache sees every read
        extra = None
        if r.kind == "stalled":
            return reads.astype(np.float64), np.full(n, float(r.min_events)), reads, np.ones(n, bool), extra
        warm = ends - self.first_window >= b.warmup_us if self.first_window is not None else np.ones(n, bool)
        if r.kind == "late":
            total = reads + late
            with np.errstate(divide="ignore", invalid="ignore"):
                value = late / total
            return value, np.full(n, r.max_rate), total, warm & (total != 0), extra
        real_total = o[:, :3].sum(axis=1)
        real, by_hit = _real(o)
        if r.kind == "below" and r.source == "observed":
            return real, np.full(n, r.threshold), reads, warm & (real_total != 0) & (reads >= r.min_requests), extra
        cache = c[:, self.column_of[b.cache]]
        # real_below_shadow compares transfer efficiencies (the real cache's side is bytes), whatever
        # `metric` says (its default, hit, had set the real transfer against the shadow's hit efficiency)
        col = (1, 0) if r.metric == "hit" and r.kind != "real_below_shadow" else (3, 2)
        value = _ratio(cache[:, col[0]], cache[:, col[1]])
        enough = warm & (cache[:, 0] >= r.min_requests)
        if r.kind == "below":
            return value, np.full(n, r.threshold), cache[:, 0], enough, extra
        if r.kind == "real_below_shadow":
            # without origin bytes for every access the real transfer efficiency is only a range:
            # hit efficiencies are compared (the real cache's from its own verdict)
            value = np.where(by_hit, _ratio(cache[:, 1], cache[:, 0]), value)
            real = np.where(by_hit, _ratio(o[:, 4], o[:, 3]), real)
            return real, value, cache[:, 0], enough & (real_total != 0), by_hit.astype(np.int64)
        # drop: the same clock hours of the previous days, summed (the windows of an hour share them)
        over_us = b.over_windows * self.window_us
        first_h = (ends - over_us) - (ends - over_us) % HOUR_US
        n_hours = -(-(ends - first_h) // HOUR_US)
        col_c = self.column_of[b.cache]
        base = np.zeros((n, _C), np.int64)
        days = np.zeros(n, np.int64)
        # consecutive windows: the (first hour, hours) pairs come in runs
        runs = np.flatnonzero(np.r_[True, (first_h[1:] != first_h[:-1]) | (n_hours[1:] != n_hours[:-1])])
        for a, z, fh, nh in zip(runs.tolist(), np.r_[runs[1:], n].tolist(), first_h[runs].tolist(), n_hours[runs].tolist()):
            sums, got_days = np.zeros(_C, np.int64), 0
            for d in range(1, r.baseline_days + 1):
                got = False
                for h in range(fh - d * DAY_US, fh - d * DAY_US + nh * HOUR_US, HOUR_US):
                    acc = self.hourly.get(h)
                    if acc is not None:
                        sums += acc[col_c]
                        got = got or acc[col_c][0] > 0
                got_days += got
            base[a:z], days[a:z] = sums, got_days
        ref = _ratio(base[:, col[0]], base[:, col[1]])
        enough &= (days >= r.min_baseline_days) & (base[:, 0] >= r.min_requests)
        return value, ref, cache[:, 0], enough, days

    def _breached(self, b: _Bound, value: np.ndarray, ref: np.ndarray) -> np.ndarray:
        r = b.rule
        with np.errstate(invalid="ignore"):
            if r.kind == "below":
                hit = value < r.threshold
            elif r.kind == "drop":
                hit = value < ref * (1 - r.drop)
            elif r.kind == "real_below_shadow":
                hit = ref - value > r.margin
            elif r.kind == "stalled":
                hit = value < r.min_events
            else:
                hit = value > r.max_rate  # late
        return hit & ~np.isnan(value) & ~np.isnan(ref)

    def _walk(self, b: _Bound, ends: np.ndarray, value: np.ndarray, ref: np.ndarray, count: np.ndarray,
              verdict: np.ndarray, extra: np.ndarray | None) -> list[tuple]:
        """A rule's state through the windows: a condition pending from the first window it holds,
        firing once it held `for`; a window without a verdict (too few accesses) keeps a firing
        alert firing: it resolves only on evidence. With nothing pending or firing, only windows
        where the condition holds can change anything: the walk jumps to them."""
        st = self.state[b.rule.name]
        breached = verdict & self._breached(b, value, ref)
        hold = np.flatnonzero(breached).tolist()
        rows: list[tuple] = []
        if not hold and st[0] is None and st[1] is None:
            return rows
        w = self.window_us
        end_of = ends.tolist()
        br, vd = breached.tolist(), verdict.tolist()

        def v(j: int) -> tuple[float, float, int, str]:
            return float(value[j]), float(ref[j]), int(count[j]), "" if extra is None else f"{int(extra[j])}"

        j, n, h = 0, len(end_of), 0
        while j < n:
            if st[0] is None and st[1] is None:  # idle: on to the next window where it holds
                while h < len(hold) and hold[h] < j:
                    h += 1
                if h == len(hold):
                    return rows
                j = hold[h]
            end = end_of[j]
            if br[j]:
                if st[0] is None:
                    st[0] = end - w  # the condition holds from this window on
                if st[1] is None and end - st[0] >= b.for_us:
                    st[1] = st[0]
                    rows.append(self._row(b, end, "firing", v(j), st[1]))
            else:
                if st[1] is not None and vd[j]:
                    rows.append(self._row(b, end, "resolved", v(j), st[1]))
                    st[1] = None
                if st[1] is None:  # (a firing alert stays pending from where it started)
                    st[0] = None
            j += 1
        return rows

    def _row(self, b: _Bound, end: int, state: str, v: tuple[float, float, int, str], starts_at: int) -> tuple:
        r = b.rule
        value, ref, n, extra = v
        return (end, r.name, self.cache_group, state, r.severity, r.kind,
                self._metric(r, extra), b.policy, b.size, value,
                self._threshold(r, ref), ref, starts_at, self._summary(b, state, value, ref, n, extra),
                xxhash.xxh3_64_intdigest(f"{r.name}\x00{self.cache_group}".encode()), self.shard)

    @staticmethod
    def _metric(r: AlertRule, extra: str) -> str:
        if r.kind in ("stalled", "late"):
            return r.kind
        if r.kind == "real_below_shadow":  # what was compared (extra "1": hit efficiencies)
            return "hit" if extra == "1" else "transfer"
        return r.metric

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
            what = ("hit efficiency (its records lack b_todisk: its transfer efficiency is only a range)"
                    if extra == "1" else "transfer efficiency")
            text = (f"{self.cache_group}: real cache {what} {value:.3f} over {r.over}, "
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
            "recent": [(s, c.tobytes(), o, lt) for s, c, o, lt in
                       zip(self._recent.start.tolist(), self._recent.c, self._recent.o.tolist(), self._recent.late.tolist())],
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
        rec = sorted(data["recent"], key=lambda r: r[0])
        self._recent = _Windows(np.array([r[0] for r in rec], np.int64),
                                np.array([arr(r[1]) for r in rec], np.int64).reshape(-1, *shape),
                                _widen(np.array([r[2] for r in rec], np.int64).reshape(len(rec), -1) if rec
                                       else np.zeros((0, _O), np.int64)),
                                np.array([r[3] for r in rec], np.int64))
        self.hourly = {s: arr(c) for s, c in data["hourly"]}
        self._pending = {s: [arr(c), _widen(np.asarray(o, np.int64)[None])[0], lt] for s, c, o, lt in data["pending"]}
        for name, st in data["state"].items():
            if name in self.state:
                self.state[name] = list(st)


class _Windows:
    """Consecutive closed windows as arrays: starts, counters (windows × caches × 4), the real
    cache's numbers (windows × _O), late events."""

    __slots__ = ("start", "c", "o", "late")

    def __init__(self, start: np.ndarray, c: np.ndarray, o: np.ndarray, late: np.ndarray):
        self.start, self.c, self.o, self.late = start, c, o, late

    @classmethod
    def empty(cls, n_caches: int) -> "_Windows":
        return cls(np.zeros(0, np.int64), np.zeros((0, n_caches, _C), np.int64), np.zeros((0, _O), np.int64),
                   np.zeros(0, np.int64))

    @classmethod
    def concat(cls, a: "_Windows", b: "_Windows") -> "_Windows":
        if not len(a.start):
            return b
        return cls(*(np.concatenate([getattr(a, k), getattr(b, k)]) for k in cls.__slots__))

    def last(self, n: int) -> "_Windows":
        return self._rows(slice(max(len(self.start) - n, 0), None))

    def _rows(self, rows: slice) -> "_Windows":
        return _Windows(self.start[rows], self.c[rows], self.o[rows], self.late[rows])


def _widen(o: np.ndarray) -> np.ndarray:
    """The real cache's numbers as windows × _O: inputs (or states saved) with only its 3 byte
    columns read 0 in the others."""
    if o.shape[1] >= _O:
        return o
    return np.concatenate([o, np.zeros((len(o), _O - o.shape[1]), np.int64)], axis=1)


def _real(o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The real cache's transfer efficiency over each period's sums, and where it is only a range
    whose bound from the cache's verdict is known (hit efficiencies are compared there): exact
    (bytes served from the cache by its verdict and origin bytes / bytes read) when every access
    carries origin bytes, else b_hit's share of the bytes (its upper bound); by hit efficiency
    where some access has a verdict but no origin bytes (5.5 with prefetch). Records with neither
    (cinfo reporter, collector) and inputs without access counts keep b_hit's share."""
    accesses, known = o[:, 3], o[:, 6]
    exact = (accesses > 0) & (known == accesses)
    by_hit = ~exact & (o[:, 8] > 0)
    upper = _ratio(o[:, 0], o[:, :3].sum(axis=1))
    return np.where(exact, _ratio(o[:, 7], o[:, 5]), upper), by_hit


def _size_text(n: int) -> str:
    for unit, f in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= f:
            return f"{n / f:g}{unit}"
    return f"{n}B"
