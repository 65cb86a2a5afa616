"""Alert rules evaluated by the processing core: the evaluator on windows it is given, the
processor's snapshot keeping alert state, the rules' configuration, and the two generator
scenarios replayed through the real pipeline into the store, where the right alerts fire at the
right windows and resolve."""

from __future__ import annotations

import datetime as dt
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from support.synthetic import event_stream

from cachescope import reads
from cachescope.config import load_config
from cachescope.errors import UsageError
from cachescope.core import GroupProcessor, PipelineConfig
from cachescope.config.alerts import AlertRule, load_rules
from cachescope.core.alerts import AlertEvaluator
from cachescope.core.webhook import AlertWebhook
from runners.embedded import replay
from cachescope.simulation import CacheSpec
from ingest.generate import make_workload, write
from ingest.scenarios import apply

MIN = 60_000_000
HOUR = 60 * MIN
T0 = 1_700_000_000_000_000 - 1_700_000_000_000_000 % HOUR
ALL_TIME = (dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc))


def _evaluator(**rule) -> AlertEvaluator:
    rule = {"name": "r", "warmup": "0s", "min_requests": 10, **rule}
    specs = [CacheSpec("lru", 10**12), CacheSpec("lru", 10**13)]
    return AlertEvaluator("G", [AlertRule.model_validate(rule)], specs, MIN)


def _window(ev: AlertEvaluator, start: int, hit_ratio: float, reads: int = 100) -> None:
    hits = int(reads * hit_ratio)
    c = np.array([[reads, hits, reads * 10, hits * 10]] * 2, dtype=np.int64)
    ev.add_window(start, counters=c)


def _feed(ev: AlertEvaluator, ratios: list[float], start: int = T0) -> list[dict]:
    rows = []
    for i, r in enumerate(ratios):
        _window(ev, start + i * MIN, r)
        out = ev.advance(start + (i + 1) * MIN)
        if out is not None:
            rows += [dict(zip(out, vals)) for vals in zip(*out.values())]
    return rows


def test_below_fires_after_for_and_resolves_with_the_numbers_in_the_summary():
    ev = _evaluator(kind="below", threshold=0.3, over="5m", **{"for": "3m"})
    rows = _feed(ev, [0.6] * 10 + [0.1] * 15 + [0.6] * 15)
    assert [r["state"] for r in rows] == ["firing", "resolved"]
    fired, resolved = rows
    # the 5-minute mean falls under 0.3 at the window ending T0+14m (3 low of 5 make exactly 0.3,
    # not below; 4 low make 0.2): the condition holds from that window (T0+13m) on, and the rule
    # needs 3 minutes of it
    assert fired["starts_at"] == np.datetime64(T0 + 13 * MIN, "us")
    assert fired["ts"] == np.datetime64(T0 + 16 * MIN, "us")
    assert fired["value"] < 0.3 and fired["threshold"] == 0.3
    assert "0.300" in fired["summary"] and f"{fired['value']:.3f}" in fired["summary"]
    assert resolved["starts_at"] == fired["starts_at"] and resolved["value"] >= 0.3
    assert resolved["ts"] > np.datetime64(T0 + 25 * MIN, "us")


def test_a_short_dip_shorter_than_for_fires_nothing():
    ev = _evaluator(kind="below", threshold=0.3, over="1m", **{"for": "5m"})
    assert _feed(ev, [0.6] * 5 + [0.1] * 4 + [0.6] * 5) == []


def test_drop_against_the_same_hours_of_previous_days():
    ev = _evaluator(kind="drop", drop=0.5, over="1h", baseline_days=2, **{"for": "0s"})
    day = [0.8] * (24 * 60)
    today = [0.8] * (10 * 60) + [0.2] * 60 + [0.8] * (13 * 60)
    rows = _feed(ev, day + day + today)
    assert [r["state"] for r in rows] == ["firing", "resolved"]
    t10 = T0 + (2 * 24 + 10) * HOUR
    assert t10 < rows[0]["ts"].astype("int64") <= t10 + HOUR
    assert rows[0]["reference"] == pytest.approx(0.8, abs=0.01)
    assert t10 + HOUR < rows[1]["ts"].astype("int64") <= t10 + 2 * HOUR
    assert "previous 2 day(s)" in rows[0]["summary"]


def test_stalled_fires_on_a_gap_in_event_time():
    ev = _evaluator(kind="stalled", over="30m", min_events=1, **{"for": "0s"})
    rows = _feed(ev, [0.5] * 60)
    assert rows == []
    # nothing for 2 hours, then events again: the empty windows are evaluated when they close
    _window(ev, T0 + 3 * HOUR, 0.5)
    out = ev.advance(T0 + 3 * HOUR + MIN)
    states = list(out["state"])
    assert states == ["firing", "resolved"]
    assert out["starts_at"][0] == np.datetime64(T0 + HOUR + 29 * MIN, "us")


def _config(**rules) -> PipelineConfig:
    return PipelineConfig.model_validate({
        "shadow": {"policies": ["lru"], "sizes": ["50GB", "500GB"]},
        "windows": {"efficiency": "1m", "max_out_of_orderness": "1m", "allowed_lateness": "0s"},
        "curve": {"enabled": False},
        "alert_rules": [
            {"name": "low", "kind": "below", "metric": "hit", "threshold": 0.62, "over": "5m", "for": "2m",
             "min_requests": 10, "warmup": "10m", "size": "50GB"},
            {"name": "real", "kind": "real_below_shadow", "margin": 0.42, "over": "10m", "for": "0s",
             "min_requests": 10, "warmup": "0s"},
        ],
    })


def _alert_rows(emitted) -> list[tuple]:
    out = []
    for e in emitted:
        if e.alerts is not None:
            out += list(zip(*(e.alerts[k].tolist() for k in ("ts", "rule", "state", "starts_at", "value"))))
    return out


def test_alert_state_survives_a_snapshot_and_restore():
    cfg = _config()
    ev = event_stream(n=20_000, jitter_us=0)
    cuts = range(0, len(ev), 1500)

    def batches(p, lo, hi):
        return [p.process(ev.take(np.arange(a, min(a + 1500, hi)))) for a in cuts if lo <= a < hi]

    p = GroupProcessor("site-A", cfg)
    whole = _alert_rows(batches(p, 0, len(ev)) + [p.flush()])
    assert {r[2] for r in whole} == {"firing", "resolved"}  # the stream makes both rules change state

    half = 9000
    p1 = GroupProcessor("site-A", cfg)
    first = batches(p1, 0, half)
    p2 = GroupProcessor.restore("site-A", cfg, p1.snapshot())
    split = _alert_rows(first + batches(p2, half, len(ev)) + [p2.flush()])
    assert split == whole


def test_rules_naming_a_cache_that_does_not_run_are_refused():
    with pytest.raises(ValueError, match="no lru shadow cache of 7TB"):
        PipelineConfig.model_validate({"shadow": {"policies": ["lru"], "sizes": ["1TB"]},
                                       "alert_rules": [{"name": "x", "kind": "below", "size": "7TB"}]})
    with pytest.raises(ValueError, match="runs no 'arc' shadow cache"):
        PipelineConfig.model_validate({"shadow": {"policies": ["lru"], "sizes": ["1TB"]},
                                       "alert_rules": [{"name": "x", "kind": "below", "policy": "arc"}]})


def test_site_rules_extend_and_override_the_shipped_defaults(tmp_path):
    defaults = load_rules()
    assert {r.kind for r in defaults} >= {"below", "drop", "stalled", "late"}
    (tmp_path / "more.yaml").write_text(yaml.safe_dump({"rules": [
        {"name": "hit-efficiency-low", "kind": "below", "threshold": 0.2, "severity": "critical"}]}))
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({"alerts": {"rules_files": ["more.yaml"], "rules": [
        {"name": "stall", "kind": "stalled", "over": "10m"}]}}))
    cfg = load_config(tmp_path / "site.yaml")
    rules = {r.name: r for r in cfg.pipeline.alert_rules}
    assert rules["hit-efficiency-low"].threshold == 0.2 and rules["hit-efficiency-low"].severity == "critical"
    assert "stall" in rules and len(rules) == len(defaults) + 1
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"alerts": {"rules": [{"name": "x", "kind": "sideways"}]}}))
    with pytest.raises(UsageError, match=r"bad.yaml: alerts.rules.0.kind: Input should be 'below'"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "bad2.yaml").write_text(yaml.safe_dump({"alerts": {"rules": [{"name": "x", "kind": "below",
                                                                               "size": "3TB"}]}}))
    with pytest.raises(UsageError, match="bad2.yaml: alerts: .*no lru shadow cache of 3TB"):
        load_config(tmp_path / "bad2.yaml")


# ---------------------------------------------------------------------------------------------
# the scenarios, replayed through the real pipeline

class _Receiver:
    """An Alertmanager stand-in on 127.0.0.1: records the alerts posted; answers 503 to the first
    `fail` requests (the webhook must retry)."""

    def __init__(self, fail: int = 1):
        import http.server
        import threading

        received, state = [], {"fail": fail, "requests": 0}

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                state["requests"] += 1
                if state["fail"] > 0:
                    state["fail"] -= 1
                    self.send_response(503)
                else:
                    received.extend(json.loads(body))
                    self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v2/alerts"
        self.received, self.state = received, state
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = _Receiver(fail=1)
    yield r
    r.close()


def test_webhook_never_blocks_and_drops_beyond_its_queue():
    ev = _evaluator(kind="below", threshold=0.3, over="1m", **{"for": "0s"})
    rows = []
    for i in range(10):  # alternating: a firing and a resolved row per two windows
        _window(ev, T0 + i * MIN, 0.1 if i % 2 == 0 else 0.9)
        out = ev.advance(T0 + (i + 1) * MIN)
        rows.append(out)
    hook = AlertWebhook("http://127.0.0.1:9/nothing-listens", timeout_s=0.5, retries=0, max_queued=2)
    for out in rows:
        hook.send(out)
    assert hook.dropped >= 10 - 3  # two wait, one may be posting
    hook.close(wait_s=5)
    assert hook.sent == 0 and hook.failed >= 1


def _replay_scenario(tmp_path, store, scenario: str, site_yaml: dict):
    w = make_workload(60_000, days=3, sites=1, servers=4, seed=3)
    w, incident = apply(scenario, w)
    files = write("xrootd-gstream", w, tmp_path / "logs", single_file=False)
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({"site": incident.site, **site_yaml(incident)}))
    config = load_config(tmp_path / "site.yaml")
    summary = replay(files, "xrootd-gstream", config=config, store=store)
    assert summary.rows.get("alerts", 0) > 0
    # what the parsers skipped and rejected, by reason, beside the core's own health figures
    health = reads.pipeline_health(store, *ALL_TIME, 86400 * 365)
    parse = dict(zip(health[health.component == "parse"].metric, health[health.component == "parse"].value))
    assert parse["lines"] == summary.lines and parse["skipped"] == summary.skipped
    assert sum(v for k, v in parse.items() if k.startswith("skipped:")) == summary.skipped > 0
    assert sum(v for k, v in parse.items() if k.startswith("rejected:")) == summary.rejected
    df = reads.alerts(store, *ALL_TIME)
    return incident, df


def _us(t) -> int:
    return int(t.timestamp() * 1_000_000)


def _check_fired_in_incident(df, rule: str, incident, over_us: int, for_us: int, resolve_within_us: int) -> None:
    mine = df[df.rule == rule].sort_values("ts")
    assert list(mine.state) == ["firing", "resolved"], mine[["ts", "state", "summary"]]
    fired, resolved = mine.iloc[0], mine.iloc[1]
    # the condition starts once the incident weighs in the rule's period, and fires `for` later
    assert incident.start_us <= _us(fired.starts_at) < incident.start_us + over_us
    assert _us(fired.ts) - _us(fired.starts_at) == for_us
    assert _us(fired.ts) <= incident.start_us + over_us + for_us + 60_000_000
    assert incident.end_us <= _us(resolved.ts) <= incident.end_us + resolve_within_us
    assert fired.cache_group == incident.site and resolved.starts_at == fired.starts_at


def test_hit_drop_scenario_fires_the_drop_alert_during_the_campaign_and_resolves(tmp_path, store, receiver):
    def site(incident):
        return {"pipeline": {"shadow": {"policies": ["lru"], "sizes": ["5TB", "20TB"]}, "curve": {"points": 8}},
                "alerts": {"defaults": False, "webhook": {"url": receiver.url}, "rules": [
                    {"name": "hit-drop", "kind": "drop", "metric": "hit", "drop": 0.3, "over": "1h", "for": "15m",
                     "min_requests": 100, "policy": "lru", "size": "20TB", "severity": "critical"}]}}

    incident, df = _replay_scenario(tmp_path, store, "hit-drop", site)
    _check_fired_in_incident(df, "hit-drop", incident, HOUR, 15 * MIN, 2 * HOUR)
    fired = df[df.state == "firing"].iloc[0]
    assert fired.value < 0.7 * fired.reference and fired.severity == "critical"
    assert f"{fired.value:.3f}" in fired.summary and f"{fired.reference:.3f}" in fired.summary
    # the webhook got both, in Alertmanager's format, after a 503 it retried
    assert receiver.state["requests"] >= 2
    got = sorted(receiver.received, key=lambda a: "endsAt" in a)
    assert [a["labels"]["alertname"] for a in got] == ["hit-drop", "hit-drop"]
    assert "endsAt" not in got[0] and got[1]["endsAt"].startswith(incident.end.strftime("%Y-%m-%dT"))
    assert got[0]["startsAt"] == got[1]["startsAt"] == fired.starts_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert got[0]["labels"]["severity"] == "critical" and got[0]["annotations"]["summary"] == fired.summary


def test_xcache_misconfigured_scenario_fires_real_below_shadow_and_resolves(tmp_path, store):
    def site(incident):
        size = f"{incident.xcache_bytes // 10**9}GB"
        return {"pipeline": {"shadow": {"policies": ["lru", "xcache"], "sizes": ["5TB", size]}, "curve": {"points": 8}},
                "alerts": {"defaults": False, "rules": [
                    {"name": "xcache-below-shadow", "kind": "real_below_shadow", "policy": "xcache", "size": size,
                     "margin": 0.5, "over": "2h", "for": "30m", "min_requests": 100},
                    {"name": "hit-drop", "kind": "drop", "metric": "hit", "drop": 0.3, "over": "1h", "for": "15m",
                     "min_requests": 100, "policy": "xcache", "size": size}]}}

    incident, df = _replay_scenario(tmp_path, store, "xcache-misconfigured", site)
    _check_fired_in_incident(df, "xcache-below-shadow", incident, 2 * HOUR, 30 * MIN, 3 * HOUR)
    # the shadow caches saw the same accesses as always: no drop of theirs
    assert (df.rule == "hit-drop").sum() == 0
    fired = df[(df.rule == "xcache-below-shadow") & (df.state == "firing")].iloc[0]
    assert fired.reference - fired.value > 0.5


def test_generate_scenario_needs_two_days_and_a_known_name(tmp_path):
    base = [str(Path(sys.executable).parent / "cachescope"), "generate", "--out", str(tmp_path / "o"), "--format", "csv",
            "--events", "20000"]
    p = subprocess.run([*base, "--days", "1", "--scenario", "hit-drop"], capture_output=True, text=True)
    assert p.returncode == 2 and "at least 2 days" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([*base, "--days", "2", "--scenario", "meteor"], capture_output=True, text=True)
    assert p.returncode == 2 and "unknown scenario" in p.stderr
    p = subprocess.run([*base, "--days", "2", "--scenario", "hit-drop"], capture_output=True, text=True)
    assert p.returncode == 0 and "scenario hit-drop at" in p.stderr


_RULES = [
    {"name": "below-hit", "kind": "below", "metric": "hit", "threshold": 0.35, "over": "30m", "for": "20m",
     "min_requests": 50, "warmup": "1h"},
    {"name": "below-transfer-big", "kind": "below", "metric": "transfer", "threshold": 0.3, "over": "1h",
     "for": "0s", "min_requests": 20, "policy": "arc", "size": "10TB", "warmup": "0s"},
    {"name": "below-real", "kind": "below", "source": "observed", "metric": "transfer", "threshold": 0.4,
     "over": "20m", "for": "10m", "min_requests": 30, "warmup": "0s"},
    {"name": "drop-hit", "kind": "drop", "metric": "hit", "drop": 0.3, "baseline_days": 2, "over": "1h",
     "for": "20m", "min_requests": 50, "warmup": "0s"},
    {"name": "drop-transfer", "kind": "drop", "metric": "transfer", "drop": 0.4, "baseline_days": 1, "over": "30m",
     "for": "0s", "min_requests": 50, "min_baseline_days": 1, "warmup": "0s"},
    {"name": "real-below", "kind": "real_below_shadow", "policy": "arc", "size": "10TB", "margin": 0.1,
     "over": "30m", "for": "10m", "min_requests": 20, "warmup": "0s"},
    {"name": "stalled", "kind": "stalled", "min_events": 40, "over": "30m", "for": "0s"},
    {"name": "late", "kind": "late", "max_rate": 0.05, "over": "1h", "for": "10m", "warmup": "30m"},
]


def _plain(rows: dict | None) -> list[tuple]:
    if rows is None:
        return []
    return [tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r) for r in zip(*rows.values())]


@pytest.mark.parametrize("seed", range(5))
def test_blocks_of_windows_write_the_rows_of_the_window_by_window_definition(seed):
    """The evaluator takes whole blocks of windows at once (running sums, a state walk that skips
    quiet windows): on streams of every rule kind, with quiet and dipping periods, windows without
    inputs, a gap longer than a block, advances of one window or of many, and a restore from a
    snapshot mid-stream, it writes exactly the rows of the rules' window-by-window definition."""
    from support.alerts_reference import ReferenceEvaluator

    rng = np.random.default_rng(seed)
    w = 10 * MIN
    rules = [AlertRule.model_validate(r) for r in _RULES]
    specs = [CacheSpec("lru", 10**12), CacheSpec("arc", 10**12), CacheSpec("arc", 10**13)]
    fast, ref = AlertEvaluator("G", rules, specs, w), ReferenceEvaluator("G", rules, specs, w)
    got, want = [], []
    n = 3 * 144 + 60
    gap_at = int(rng.integers(200, 400)) if seed % 2 else None
    start, level = T0, 0.6
    for i in range(n):
        start += w if i != gap_at else (5000 if seed % 4 == 1 else 30) * w
        level = float(np.clip(level + rng.normal(0, 0.08) + (0.6 - level) * 0.1, 0.0, 1.0))
        if rng.random() < 0.08:  # a window without inputs
            pass
        else:
            reads = int(rng.integers(0, 120)) if rng.random() < 0.9 else 0
            hits = np.array([int(reads * min(1.0, level * f)) for f in (0.8, 1.0, 1.2)])
            size = int(rng.integers(1, 10**9))
            c = np.stack([np.full(3, reads), hits, np.full(3, reads * size), hits * size], axis=1).astype(np.int64)
            hit_b = int(reads * size * float(np.clip(level + rng.normal(0, 0.15), 0, 1)))
            obs = np.array([hit_b, reads * size - hit_b, int(rng.integers(0, 10**6))], dtype=np.int64)
            kind = rng.random()
            if kind < 0.66:  # the real cache's access counts, its origin bytes for all (exact) or some accesses
                hits_r = int(reads * float(np.clip(level + rng.normal(0, 0.1), 0, 1)))
                known = reads if kind < 0.33 else int(rng.integers(0, reads + 1))
                served = int(known * size * float(np.clip(level - 0.2 + rng.normal(0, 0.1), 0, 1)))
                verdicts = int(rng.integers(0, reads - known + 1)) if rng.random() < 0.7 else 0
                obs = np.r_[obs, [reads, hits_r, reads * size, known, served, verdicts]].astype(np.int64)
            late = int(rng.integers(0, 9))
            for e in (fast, ref):
                e.add_window(start, counters=c, observed=obs, late=late)
        if rng.random() < 0.4:  # advance after one window or after several
            got += _plain(fast.advance(start + w))
            want += _plain(ref.advance(start + w))
        if i == n // 2:
            fast2 = AlertEvaluator("G", rules, specs, w)
            fast2.restore(fast.snapshot())
            fast = fast2
    got += _plain(fast.advance(None))
    want += _plain(ref.advance(None))
    assert got == want
    states = {(r[1], r[3]) for r in want}
    assert len(states) >= 6, states  # the streams do make rules fire and resolve
