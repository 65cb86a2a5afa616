"""The alert rules' definition, window by window: each closed window remembered, each rule's value
summed directly from the windows of its period and the hours of its baseline days, its state
stepped once per window. Slow and plain on purpose: the evaluator (cachescope/core/alerts.py),
which evaluates blocks of windows from running sums, must write the same rows."""

from __future__ import annotations

import math

import numpy as np

from cachescope.core.alerts import _C, _O, DAY_US, HOUR_US, AlertEvaluator


def _eff(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


class ReferenceEvaluator(AlertEvaluator):
    """Same inputs and row format as AlertEvaluator; evaluation by the definition."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.recent: dict[int, tuple] = {}  # window start → counters, observed, late

    def advance(self, closed_before):
        closed_before = self._closed_until(closed_before)  # which windows are closed: shared
        if closed_before is None:
            return None
        rows: list = []
        w = self.window_us
        while self.next_window + w <= closed_before:
            start = self.next_window
            slot = self._pending.pop(start, None) or [np.zeros((self.n_caches, _C), np.int64), np.zeros(_O, np.int64), 0]
            self.recent[start] = (slot[0], slot[1], int(slot[2]))
            for s in [s for s in self.recent if s < start - (self.keep_windows - 1) * w]:
                del self.recent[s]
            if self.has_drop:
                h = start - start % HOUR_US
                self.hourly[h] = self.hourly.get(h, np.zeros((self.n_caches, _C), np.int64)) + slot[0]
                for s in [s for s in self.hourly if s < h - self.keep_hours * HOUR_US]:
                    del self.hourly[s]
            self._step(start + w, rows)
            self.next_window = start + w
        return self._rows(rows) if rows else None

    def _sum(self, end: int, windows: int):
        first = end - windows * self.window_us
        picked = [v for s, v in self.recent.items() if s >= first]
        c = sum((v[0] for v in picked), np.zeros((self.n_caches, _C), np.int64))
        return c, sum((v[1] for v in picked), np.zeros(_O, np.int64)), sum(v[2] for v in picked)

    def _value(self, b, end):
        r = b.rule
        if self.first_window is not None and end - self.first_window < b.warmup_us and r.kind != "stalled":
            return None
        c, o, late = self._sum(end, b.over_windows)
        reads = int(c[0, 0]) if self.n_caches else 0
        # real_below_shadow compares transfer efficiencies (the real cache's side is bytes), whatever
        # `metric` says (its default, hit, had set the real transfer against the shadow's hit efficiency)
        col = (1, 0) if r.metric == "hit" and r.kind != "real_below_shadow" else (3, 2)
        if r.kind == "stalled":
            return float(reads), float(r.min_events), reads, ""
        if r.kind == "late":
            total = reads + late
            return None if total == 0 else (late / total, r.max_rate, total, "")
        real_total = int(o[:3].sum())
        # the real cache's transfer efficiency is exact when every access carries its origin bytes
        # (served from the cache / bytes read), else b_hit's share (the upper bound of its range)
        accesses, known = int(o[3]), int(o[6])
        exact = accesses > 0 and known == accesses
        real = _eff(o[7], o[5]) if exact else (o[0] / real_total if real_total else math.nan)
        if r.kind == "below" and r.source == "observed":
            if real_total == 0 or reads < r.min_requests:
                return None
            return real, r.threshold, reads, ""
        cache = c[self.column_of[b.cache]]
        if cache[0] < r.min_requests:
            return None
        value = _eff(cache[col[0]], cache[col[1]])
        if r.kind == "below":
            return value, r.threshold, int(cache[0]), ""
        if r.kind == "real_below_shadow":
            if real_total == 0:
                return None
            if not exact and o[8] > 0:  # only a range, with verdicts: hit efficiencies compared
                return _eff(o[4], o[3]), _eff(cache[1], cache[0]), int(cache[0]), "1"
            return real, value, int(cache[0]), "0"
        over_us = b.over_windows * self.window_us
        first_h = (end - over_us) - (end - over_us) % HOUR_US
        base, days = np.zeros(_C, np.int64), 0
        for d in range(1, r.baseline_days + 1):
            hours = [self.hourly.get(h) for h in range(first_h - d * DAY_US, end - d * DAY_US, HOUR_US)]
            hours = [a[self.column_of[b.cache]] for a in hours if a is not None]
            base = base + sum(hours, np.zeros(_C, np.int64))
            days += any(a[0] > 0 for a in hours)
        if days < r.min_baseline_days or base[0] < r.min_requests:
            return None
        return value, _eff(base[col[0]], base[col[1]]), int(cache[0]), f"{days}"

    def _holds(self, b, v) -> bool:
        r, (value, ref) = b.rule, v[:2]
        if math.isnan(value) or math.isnan(ref):
            return False
        return {"below": lambda: value < r.threshold, "drop": lambda: value < ref * (1 - r.drop),
                "real_below_shadow": lambda: ref - value > r.margin, "stalled": lambda: value < r.min_events,
                "late": lambda: value > r.max_rate}[r.kind]()

    def _step(self, end: int, rows: list) -> None:
        for b in self.bound:
            st = self.state[b.rule.name]
            v = self._value(b, end)
            if v is not None and self._holds(b, v):
                if st[0] is None:
                    st[0] = end - self.window_us
                if st[1] is None and end - st[0] >= b.for_us:
                    st[1] = st[0]
                    rows.append(self._row(b, end, "firing", v, st[1]))
            else:
                if st[1] is not None and v is not None:
                    rows.append(self._row(b, end, "resolved", v, st[1]))
                    st[1] = None
                if v is not None or st[1] is None:
                    st[0] = None
