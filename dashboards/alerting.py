"""The shipped alert rules (cachescope/config/alert_rules.yaml) as Grafana alerting provisioning.

The pipeline evaluates the rules itself as windows close (the `alerts` table, the webhook); these
files let a Grafana that watches the same ClickHouse alert on the same conditions over the
same periods, with its own contact points. Each rule: A, a read-layer query per cache group over
the rule's period; B, reduce; C, the threshold. Grafana sees no "first configured policy": a rule
without policy/size reads the best live shadow cache of the group.
"""

from __future__ import annotations

import yaml

from cachescope import reads
from cachescope.config.alerts import AlertRule, load_rules
from cachescope.config.durations import parse_duration_us
from cachescope.store import tables
from cachescope.units import parse_size
from dashboards.generate import BINDINGS, DATASOURCE_UID, narrow

FOLDER = "cachescope"


def _filters(rule: AlertRule) -> dict[str, str]:
    b = {**BINDINGS, "cache_groups": "[]", "tiers": "[]", "by_tier": "0",
         "policies": f"['{rule.policy}']" if rule.policy else "[]",
         "sizes": f"[toUInt64({parse_size(rule.size)})]" if rule.size else "arrayMap(x -> toUInt64(x), [])"}
    return b


#: over OBSERVED_SERIES' rows: the real cache's transfer efficiency as the core's alerts take it (exact
#: from its verdict and origin bytes when every access carries them, else b_hit's share)
_REAL_EXACT = "toUInt8(sum(accesses) > 0 AND sum(origin_accesses) = sum(accesses))"
_REAL_TRANSFER = (f"if({_REAL_EXACT} = 1, sum(cache_bytes_low) / sum(bytes_read), "
                  "sum(hit_bytes) / sum(hit_bytes + miss_bytes + bypass_bytes))")


def _query(rule: AlertRule) -> tuple[str, str, float]:
    """(SQL, comparison, threshold) of a rule: the value per cache group in column `value`."""
    b = _filters(rule)
    col = "hit_efficiency" if rule.metric == "hit" else "transfer_efficiency"
    if rule.kind == "below" and rule.source == "shadow":
        sql = narrow(reads.EFFICIENCY_TOTALS[tables.EFFICIENCY].grafana(b), f"cache_group, max({col}) AS value",
                     f"requests >= {rule.min_requests} GROUP BY cache_group")
        return sql, "lt", rule.threshold
    if rule.kind == "below":
        sql = narrow(reads.OBSERVED_SERIES.grafana({**b, "step_s": "86400"}), f"cache_group, {_REAL_TRANSFER} AS value",
                     f"1 GROUP BY cache_group HAVING sum(accesses) >= {rule.min_requests}")
        return sql, "lt", rule.threshold
    if rule.kind == "drop":
        sql = narrow(reads.EFFICIENCY_VS_BASELINE.grafana({**b, "baseline_days": str(rule.baseline_days)}),
                     f"cache_group, max({col} / baseline_{col}) AS value",
                     f"requests >= {rule.min_requests} AND baseline_requests >= {rule.min_requests} GROUP BY cache_group")
        return sql, "lt", 1 - rule.drop
    if rule.kind == "real_below_shadow":
        shadow = reads.EFFICIENCY_TOTALS[tables.EFFICIENCY].grafana(b)
        real = reads.OBSERVED_SERIES.grafana({**b, "step_s": "86400"})
        # exact transfer efficiency when every access carries origin bytes (b_todisk); hit efficiencies where
        # records carry the verdict but not the origin bytes (5.5 with prefetch); else b_hit's share
        sql = (f"SELECT s.cache_group AS cache_group, if(r.exact = 0 AND r.verdicts > 0, s.h - r.h, s.t - r.t) AS value "
               "FROM ("
               f"{narrow(shadow, 'cache_group, max(transfer_efficiency) AS t, max(hit_efficiency) AS h', 'requests >= ' + str(rule.min_requests) + ' GROUP BY cache_group')}"
               f") AS s INNER JOIN ("
               f"{narrow(real, f'cache_group, {_REAL_EXACT} AS exact, sum(verdict_accesses) AS verdicts, {_REAL_TRANSFER} AS t, sum(hits) / sum(accesses) AS h', '1 GROUP BY cache_group')}"
               f") AS r ON s.cache_group = r.cache_group")
        return sql, "gt", rule.margin
    if rule.kind == "stalled":
        sql = narrow(reads.READ_VOLUME.grafana({**b, "step_s": "86400"}), "cache_group, sum(reads) AS value",
                     "1 GROUP BY cache_group")
        return sql, "lt", float(rule.min_events)
    # late: late events per event, from the counters the components report
    sql = narrow(reads.PIPELINE_HEALTH.grafana({**b, "metrics": "['late_events', 'events_in']"}),
                 "cache_group, (maxIf(value, metric = 'late_events') - minIf(value, metric = 'late_events')) / "
                 "greatest(1, maxIf(value, metric = 'events_in') - minIf(value, metric = 'events_in')) AS value",
                 "1 GROUP BY cache_group")
    return sql, "gt", rule.max_rate


def grafana_rule(rule: AlertRule) -> dict:
    sql, op, threshold = _query(rule)
    seconds = parse_duration_us(rule.over) // 1_000_000
    return {
        "uid": f"cachescope-{rule.name}"[:40],
        "title": rule.name,
        "condition": "C",
        "data": [
            {"refId": "A", "datasourceUid": DATASOURCE_UID, "relativeTimeRange": {"from": seconds, "to": 0},
             "model": {"refId": "A", "datasource": {"type": "grafana-clickhouse-datasource", "uid": DATASOURCE_UID},
                       "editorType": "sql", "format": 1, "queryType": "table", "rawSql": sql}},
            {"refId": "B", "datasourceUid": "__expr__",
             "model": {"refId": "B", "type": "reduce", "expression": "A", "reducer": "last",
                       "datasource": {"type": "__expr__", "uid": "__expr__"}}},
            {"refId": "C", "datasourceUid": "__expr__",
             "model": {"refId": "C", "type": "threshold", "expression": "B",
                       "datasource": {"type": "__expr__", "uid": "__expr__"},
                       "conditions": [{"evaluator": {"type": op, "params": [threshold]}}]}},
        ],
        "for": rule.for_,
        "noDataState": "Alerting" if rule.kind == "stalled" else "OK",
        "execErrState": "Error",
        "labels": {"severity": rule.severity, "rule_kind": rule.kind, "source": "cachescope"},
        "annotations": {"summary": (f"{rule.summary or rule.name}: {{{{ $labels.cache_group }}}} "
                                    f"value {{{{ $values.B }}}} ({op} {threshold:g} over {rule.over})")},
    }


def render(rules: list[AlertRule] | None = None) -> str:
    rules = load_rules() if rules is None else rules
    doc = {"apiVersion": 1, "groups": [{"orgId": 1, "name": "cachescope", "folder": FOLDER, "interval": "1m",
                                        "rules": [grafana_rule(r) for r in rules]}]}
    head = ("# Generated by `python -m dashboards.generate` from cachescope/config/alert_rules.yaml and the read\n"
            "# layer (cachescope/reads.py); do not edit by hand.\n")
    return head + yaml.safe_dump(doc, sort_keys=False, width=10_000)
