"""Alert rows to an Alertmanager-compatible receiver (POST JSON, Alertmanager's v2 alert format).

The runners hand over the alert rows they have written; a background thread posts them, retrying
with a doubling back-off. Nothing here ever blocks the stream: beyond `max_queued` waiting
alerts, new ones are dropped and counted (the alerts table keeps them all anyway), and a receiver
that stays down costs only the thread's time.

Format (Alertmanager `POST /api/v2/alerts`): a JSON list of
`{labels: {alertname, cache_group, severity, rule_kind, metric, policy, size_bytes},
  annotations: {summary, value, threshold, reference}, startsAt, endsAt?, generatorURL}`;
a resolved alert carries its `endsAt`.
"""

from __future__ import annotations

import datetime as dt
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping

import numpy as np
import orjson

_STOP = object()


def _iso(v) -> str:
    t = np.datetime64(v, "ms").astype("int64")
    return dt.datetime.fromtimestamp(t / 1000, tz=dt.timezone.utc).isoformat().replace("+00:00", "Z")


def alertmanager_payload(rows: Mapping[str, np.ndarray], generator_url: str = "") -> list[dict]:
    out = []
    for i in range(len(rows["rule"])):
        def g(k):
            v = rows[k][i]
            return v.item() if hasattr(v, "item") else v

        alert = {
            "labels": {"alertname": str(g("rule")), "cache_group": str(g("cache_group")),
                       "severity": str(g("severity")), "rule_kind": str(g("kind")), "metric": str(g("metric")),
                       "policy": str(g("policy")), "size_bytes": str(g("size_bytes"))},
            "annotations": {"summary": str(g("summary")), "value": f"{float(g('value')):.4f}",
                            "threshold": f"{float(g('threshold')):.4f}", "reference": f"{float(g('reference')):.4f}"},
            "startsAt": _iso(rows["starts_at"][i]),
        }
        if str(g("state")) == "resolved":
            alert["endsAt"] = _iso(rows["ts"][i])
        if generator_url:
            alert["generatorURL"] = generator_url
        out.append(alert)
    return out


class AlertWebhook:
    def __init__(self, url: str, timeout_s: float = 5.0, retries: int = 5, max_queued: int = 1000,
                 backoff_s: float = 0.5, generator_url: str = ""):
        self.url = url
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.generator_url = generator_url
        self.sent = self.dropped = self.failed = 0
        self._queue: queue.Queue = queue.Queue(maxsize=max_queued)
        self._thread = threading.Thread(target=self._run, name="cachescope-alert-webhook", daemon=True)
        self._thread.start()

    def send(self, rows: Mapping[str, np.ndarray] | None) -> None:
        """Queue the alerts of `rows` (alerts table columns); never blocks."""
        if rows is None or not len(rows.get("rule", ())):
            return
        for alert in alertmanager_payload(rows, self.generator_url):
            try:
                self._queue.put_nowait(alert)
            except queue.Full:
                self.dropped += 1

    def close(self, wait_s: float = 10.0) -> None:
        """Post what waits (for at most about `wait_s`), then stop the thread."""
        deadline = time.monotonic() + wait_s
        while not self._queue.empty() and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.02)
        try:
            self._queue.put_nowait(_STOP)
        except queue.Full:
            pass
        self._thread.join(max(0.0, deadline - time.monotonic()))

    def _post(self, alerts: list[dict]) -> bool:
        body = orjson.dumps(alerts)
        for attempt in range(self.retries + 1):
            try:
                req = urllib.request.Request(self.url, data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - a configured URL
                    if 200 <= resp.status < 300:
                        return True
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if attempt < self.retries:
                time.sleep(self.backoff_s * 2**attempt)
        return False

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            batch = [item]
            stop = False
            while len(batch) < 100:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                batch.append(nxt)
            if self._post(batch):
                self.sent += len(batch)
            else:
                self.failed += len(batch)
            if stop:
                return
