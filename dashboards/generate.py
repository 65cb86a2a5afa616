"""The Grafana dashboards and alert rules, generated from the read layer.

    python -m dashboards.generate            # write dashboards/*.json and provisioning/alerting/
    python -m dashboards.generate --check    # exit 1 if the committed files differ from a fresh run
    python -m dashboards.generate --config site.yaml --alerting-out rules.yaml   # a site's own rules

Every panel's SQL is a read-layer query (cachescope.reads) rendered with `NamedQuery.grafana`:
the ClickHouse plugin's macros and the dashboard variables take the place of the query's typed
parameters, so the dashboards ask exactly what the API, the page and the reports ask. A panel
may narrow a query to the columns it draws (`SELECT … FROM (read-layer SQL)`), never change it.
Built with grafana-foundation-sdk (0.0.21): it has no ClickHouse query type, so the plugin's
target is wrapped in the SDK's UnknownDataquery.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import barchart, dashboard, stat, table, timeseries, xychart
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.runtime import UnknownDataquery
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm

from cachescope import reads
from cachescope.store import tables

HERE = Path(__file__).resolve().parent
DATASOURCE_UID = "cachescope-clickhouse"
DATASOURCE = common.DataSourceRef(type_val="grafana-clickhouse-datasource", uid=DATASOURCE_UID)
FORMAT_TIME_SERIES, FORMAT_TABLE = 0, 1

#: how each read-layer parameter is bound in a panel: macros for the time range and step,
#: dashboard variables for the selectors (multi-value variables expand to 'a','b')
BINDINGS = {
    "start": "$__fromTime",
    "end": "$__toTime",
    "step_s": "$__interval_s",
    "cache_groups": "[${cache_group}]",
    "policies": "[${policy}]",
    "sizes": "arrayMap(x -> toUInt64(x), [${size}])",
    "tiers": "[${tier}]",
    "by_tier": "0",
    "site": "'${site}'",
    "sites": "['${site}']",
    "states": "['firing', 'resolved']",
}


def bind(query: reads.NamedQuery, **overrides: str) -> str:
    return query.grafana({**BINDINGS, **overrides})


def narrow(sql: str, columns: str, where: str = "") -> str:
    """The columns a panel draws, of a read-layer query's rows."""
    return f"SELECT {columns} FROM ({sql}) AS q" + (f" WHERE {where}" if where else "")


@dataclass
class Query(cogbuilder.Builder[UnknownDataquery]):
    """A grafana-clickhouse-datasource target."""

    sql: str
    fmt: int = FORMAT_TIME_SERIES
    ref_id: str = "A"

    def build(self) -> UnknownDataquery:
        return UnknownDataquery({
            "refId": self.ref_id,
            "datasource": {"type": DATASOURCE.type_val, "uid": DATASOURCE.uid},
            "editorType": "sql",
            "format": self.fmt,
            "queryType": "timeseries" if self.fmt == FORMAT_TIME_SERIES else "table",
            "rawSql": self.sql,
        })


def _series(title: str, sql: str, unit: str = "percentunit", desc: str = "", width: int = 12, **kw):
    p = (timeseries.Panel().title(title).description(desc).datasource(DATASOURCE).unit(unit).span(width).height(8)
         .with_target(Query(sql)))
    if unit == "percentunit":
        p = p.min(0).max(1)
    for i, extra in enumerate(kw.get("more", ()), start=1):
        p = p.with_target(Query(extra, ref_id=chr(ord("A") + i)))
    return p


def _table(title: str, sql: str, desc: str = "", width: int = 12):
    return table.Panel().title(title).description(desc).datasource(DATASOURCE).span(width).height(8).with_target(
        Query(sql, FORMAT_TABLE))


def _bars(title: str, sql: str, unit: str = "percentunit", desc: str = "", width: int = 12):
    return barchart.Panel().title(title).description(desc).datasource(DATASOURCE).unit(unit).span(width).height(8) \
        .with_target(Query(sql, FORMAT_TABLE))


def _xy(title: str, sql: str, desc: str = "", width: int = 12, more=()):
    p = xychart.Panel().title(title).description(desc).datasource(DATASOURCE).span(width).height(9).with_target(
        Query(sql, FORMAT_TABLE))
    for i, extra in enumerate(more, start=1):
        p = p.with_target(Query(extra, FORMAT_TABLE, chr(ord("A") + i)))
    return p


def _stat(title: str, sql: str, unit: str, desc: str = "", width: int = 6):
    return stat.Panel().title(title).description(desc).datasource(DATASOURCE).unit(unit).span(width).height(4) \
        .with_target(Query(sql, FORMAT_TABLE))


def _variables(d: dashboard.Dashboard, with_site: bool = True) -> dashboard.Dashboard:
    def q(name: str, label: str, query: reads.NamedQuery, multi: bool = True, sort=dm.VariableSort.ALPHABETICAL_ASC,
          **bindings: str):
        v = (dashboard.QueryVariable(name).label(label).datasource(DATASOURCE).query(bind(query, **bindings))
             .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(sort))
        return v.multi(True).include_all(True) if multi else v

    d = d.with_variable(q("site", "Site", reads.SITES, multi=False))
    d = d.with_variable(q("cache_group", "Cache group", reads.SITE_CACHE_GROUPS))
    d = d.with_variable(q("policy", "Policy", reads.POLICIES))
    d = d.with_variable(q("size", "Size (bytes)", reads.SIZES, sort=dm.VariableSort.NUMERICAL_ASC))
    d = d.with_variable(q("tier", "Data tier", reads.TIERS))
    return d


def _dashboard(uid: str, title: str, desc: str) -> dashboard.Dashboard:
    d = (dashboard.Dashboard(title).uid(uid).description(desc).tags(["cachescope"]).time("now-7d", "now")
         .timezone("utc").refresh("1m").editable())
    return _variables(d)


_CACHE_LABEL = "concat(policy, ' ', formatReadableDecimalSize(size_bytes))"
_SERIES_MIN = reads.EFFICIENCY_SERIES[tables.EFFICIENCY]
_TOTALS_MIN = reads.EFFICIENCY_TOTALS[tables.EFFICIENCY]
_RESIDENCE_MIN = reads.RESIDENCE_SERIES[tables.EFFICIENCY]


def site_overview() -> dashboard.Dashboard:
    d = _dashboard("cachescope-site-overview", "cachescope · Site overview",
                   "Hit and transfer efficiency of the selected shadow caches per cache group, the best policy per "
                   "size, the volume read and the bytes a cache would have kept off the WAN.")
    series = bind(_SERIES_MIN)
    label = f"concat(cache_group, ' · ', {_CACHE_LABEL})"
    d = d.with_panel(_series("Hit efficiency", narrow(series, f"time, {label} AS cache, hit_efficiency"),
                             desc="accesses served from cache / all read accesses"))
    d = d.with_panel(_series("Transfer efficiency", narrow(series, f"time, {label} AS cache, transfer_efficiency"),
                             desc="bytes served from cache / all bytes read"))
    d = d.with_panel(_series("Delayed hits", narrow(series, f"time, {label} AS cache, delayed_hits"), unit="short",
                             desc="reads that fetched nothing but waited for blocks still in flight from the origin: "
                                  "not hits (hit efficiency leaves them out) and no fetch (the WAN bytes do too); "
                                  "0 unless an xcache shadow has fetch times (origin_rate or the accesses' durations)"))
    d = d.with_panel(_table("Best policy per size", bind(reads.BEST_POLICY),
                            desc="the policy with the highest hit (and transfer) efficiency at each size"))
    volume = bind(reads.READ_VOLUME)
    d = d.with_panel(_series("Volume read", narrow(volume, "time, cache_group, bytes_read"), unit="decbytes",
                             desc="bytes read per interval (all reads, whatever the cache)"))
    d = d.with_panel(_series("Bytes kept off the WAN", narrow(volume, "time, cache_group, bytes_saved_best"),
                             unit="decbytes", desc="bytes the best selected shadow cache served from cache"))
    totals = bind(_TOTALS_MIN)
    d = d.with_panel(_bars("Bytes a cache would have saved, whole range",
                           narrow(totals, f"{_CACHE_LABEL} AS cache, sum(bytes_hit) AS bytes_saved",
                                  "1 GROUP BY cache ORDER BY cache"), unit="decbytes"))
    return d


def policy_size() -> dashboard.Dashboard:
    d = _dashboard("cachescope-policy-size", "cachescope · Policy × size",
                   "Every live shadow cache side by side, by data tier.")
    d = d.with_panel(_table("Live shadow caches", bind(reads.LIVE_CONFIGS), width=24))
    by_tier = bind(_TOTALS_MIN, by_tier="1")
    d = d.with_panel(_table("Efficiency per cache and tier", narrow(
        by_tier, "cache_group, policy, size_bytes, tier_key AS tier, requests, hits, delayed_hits, hit_efficiency, "
                 "transfer_efficiency"),
        width=24))
    d = d.with_panel(_bars("Hit efficiency per cache", narrow(
        bind(_TOTALS_MIN), f"{_CACHE_LABEL} AS cache, sum(hits) / sum(requests) AS hit_efficiency",
        "1 GROUP BY cache ORDER BY cache")))
    d = d.with_panel(_bars("Transfer efficiency per cache", narrow(
        bind(_TOTALS_MIN), f"{_CACHE_LABEL} AS cache, sum(bytes_hit) / sum(bytes_requested) AS transfer_efficiency",
        "1 GROUP BY cache ORDER BY cache")))
    d = d.with_panel(_series("Hit efficiency over time by tier", narrow(
        bind(_SERIES_MIN, by_tier="1"), f"time, concat({_CACHE_LABEL}, ' · ', tier_key) AS cache, hit_efficiency"),
        width=24))
    return d


def curves() -> dashboard.Dashboard:
    d = _dashboard("cachescope-curves", "cachescope · Miss-ratio curves",
                   "Hit and transfer efficiency against capacity: the exact LRU curve the pipeline keeps, and each "
                   "live policy at its sizes. Belady (the offline bound) needs the future: `cachescope report` and "
                   "the what-if API compute it from the stored accesses.")
    mrc = bind(reads.MRC)
    live = bind(_TOTALS_MIN)
    policy_points = narrow(live, "toFloat64(size_bytes) AS capacity_bytes, sum(hits) / sum(requests) AS hit_efficiency, "
                                 "policy", "1 GROUP BY policy, size_bytes ORDER BY policy, size_bytes")
    d = d.with_panel(_xy("Hit efficiency against capacity", narrow(
        mrc, "toFloat64(capacity_bytes) AS capacity_bytes, hit_efficiency", "requests > 0"),
        desc="LRU exact curve (A) and the live policies' points (B)", more=(policy_points,)))
    transfer_points = narrow(live, "toFloat64(size_bytes) AS capacity_bytes, "
                                   "sum(bytes_hit) / sum(bytes_requested) AS transfer_efficiency, policy",
                             "1 GROUP BY policy, size_bytes ORDER BY policy, size_bytes")
    d = d.with_panel(_xy("Transfer efficiency against capacity", narrow(
        mrc, "toFloat64(capacity_bytes) AS capacity_bytes, transfer_efficiency", "requests > 0"),
        more=(transfer_points,)))
    d = d.with_panel(_table("Curve points", narrow(
        mrc, "capacity_bytes, requests, hits, hit_efficiency, transfer_efficiency, sample_rate"), width=24))
    return d


def tiers() -> dashboard.Dashboard:
    d = _dashboard("cachescope-tiers", "cachescope · Data tiers", "Volume and efficiency per data tier.")
    by_tier = bind(_TOTALS_MIN, by_tier="1")
    per_tier = narrow(by_tier, "tier_key AS tier, max(requests) AS reads, max(bytes_requested) AS bytes_read, "
                               "sum(hits) / sum(requests) AS hit_efficiency, "
                               "sum(bytes_hit) / sum(bytes_requested) AS transfer_efficiency",
                      "1 GROUP BY tier ORDER BY bytes_read DESC")
    d = d.with_panel(_bars("Volume read per tier", narrow(per_tier, "tier, bytes_read"), unit="decbytes"))
    d = d.with_panel(_bars("Efficiency per tier (selected caches)",
                           narrow(per_tier, "tier, hit_efficiency, transfer_efficiency")))
    d = d.with_panel(_table("Tier table", per_tier, width=24))
    d = d.with_panel(_series("Transfer efficiency by tier over time", narrow(
        bind(_SERIES_MIN, by_tier="1"), "time, tier_key AS tier, sum(bytes_hit) / sum(bytes_requested) AS "
                                        "transfer_efficiency", "1 GROUP BY time, tier ORDER BY tier, time"), width=24))
    return d


def cache_servers() -> dashboard.Dashboard:
    d = _dashboard("cachescope-cache-servers", "cachescope · Cache servers",
                   "One shared cache for the site (cache group = site) against one cache per server (cache groups "
                   "site/server) of equal total size: the site group runs its caches again per server "
                   "(pipeline.server_caches, on by default; list sizes S/N there to compare every size S over N "
                   "servers).")
    split = bind(reads.CACHE_SPLIT)
    d = d.with_panel(_table("Shared vs one per server", split, width=24))
    d = d.with_panel(_bars("Hit efficiency: shared vs per server", narrow(
        split, "concat(policy, ' ', formatReadableDecimalSize(total_size_bytes)) AS cache, shared_hit_efficiency, "
               "split_hit_efficiency")))
    d = d.with_panel(_bars("Transfer efficiency: shared vs per server", narrow(
        split, "concat(policy, ' ', formatReadableDecimalSize(total_size_bytes)) AS cache, "
               "shared_transfer_efficiency, split_transfer_efficiency")))
    return d


def real_vs_shadow() -> dashboard.Dashboard:
    d = _dashboard("cachescope-real-vs-shadow", "cachescope · Real vs shadow",
                   "The XCache's own transfer efficiency (its hit/miss/bypass bytes) against the shadow caches of "
                   "the selected policy and size (choose its own size and model, xcache).")
    real = narrow(bind(reads.OBSERVED_SERIES), "time, concat('real · ', cache_group) AS cache, transfer_efficiency")
    shadow = narrow(bind(_SERIES_MIN), f"time, concat('shadow · ', cache_group, ' · ', {_CACHE_LABEL}) AS cache, "
                                       "transfer_efficiency")
    d = d.with_panel(_series("Transfer efficiency: real XCache and its shadow", real, width=24, more=(shadow,),
                             desc="real: bytes served from its disk / bytes read, exact from its verdict and b_todisk "
                                  "(XRootD >= 5.7.2); without b_todisk the upper bound (b_hit), see the range below"))
    # without b_todisk (5.5 with prefetch) the real cache's transfer efficiency is only a range
    real_range = narrow(bind(reads.OBSERVED_SERIES), "time, concat('real · ', cache_group) AS cache, "
                        "transfer_efficiency_low, transfer_efficiency_high")
    d = d.with_panel(_series("Real XCache transfer efficiency range (one line when exact: records with b_todisk)",
                             real_range, width=24,
                             desc="low: its hits by its own verdict serve all their bytes, misses none; high: b_hit, "
                                  "which with prefetch counts blocks still in flight from the origin as hits"))
    real_wan = narrow(bind(reads.OBSERVED_SERIES), "time, concat('real · ', cache_group) AS cache, wan_saving",
                      "origin_accesses > 0")
    shadow_wan = narrow(bind(_SERIES_MIN), f"time, concat('shadow · ', cache_group, ' · ', {_CACHE_LABEL}) AS cache, "
                                           "wan_saving")
    d = d.with_panel(_series("WAN saving: real XCache and its shadow", real_wan, width=24, more=(shadow_wan,),
                             desc="1 - bytes from the origin / bytes read: real b_todisk + b_bypass (negative when "
                                  "prefetch fetched more than clients read); shadows their miss bytes, the xcache "
                                  "model the blocks it fetched"))
    d = d.with_panel(_series("WAN bytes: real XCache and its shadow", narrow(
        bind(reads.OBSERVED_SERIES), "time, concat('real · ', cache_group) AS cache, origin_bytes",
        "origin_accesses > 0"), width=24, unit="bytes", more=(narrow(
            bind(_SERIES_MIN), f"time, concat('shadow · ', cache_group, ' · ', {_CACHE_LABEL}) AS cache, wan_bytes"),)))
    # hits: the real cache's accesses with hit bytes and no miss or bypass bytes (its records' b_hit/b_miss/b_bypass)
    real_hit = narrow(bind(reads.OBSERVED_SERIES), "time, concat('real · ', cache_group) AS cache, hit_efficiency")
    shadow_hit = narrow(bind(_SERIES_MIN), f"time, concat('shadow · ', cache_group, ' · ', {_CACHE_LABEL}) AS cache, "
                                           "hit_efficiency")
    d = d.with_panel(_series("Hit efficiency: real XCache and its shadow", real_hit, width=24, more=(shadow_hit,)))
    d = d.with_panel(_table("Real caches behind each group", bind(reads.OBSERVED_SERVERS)))
    d = d.with_panel(_series("Bytes filled and evicted by the shadow caches", narrow(
        bind(_SERIES_MIN), f"time, concat(cache_group, ' · ', {_CACHE_LABEL}) AS cache, bytes_filled, evictions"),
        unit="short"))
    age = bind(_RESIDENCE_MIN)
    d = d.with_panel(_series("Average age of the files in each cache", narrow(
        age, f"time, concat(cache_group, ' · ', {_CACHE_LABEL}) AS cache, mean_age_s", "age_reads > 0"), unit="s",
        desc="mean age of the resident files as the interval's reads found the cache (XCache monitoring's "
             "'average file age'), per shadow cache"))
    d = d.with_panel(_series("How long data stays before it is purged", narrow(
        age, f"time, concat(cache_group, ' · ', {_CACHE_LABEL}) AS cache, residence_s", "evictions > 0"), unit="s",
        desc="mean time the files evicted in the interval had stayed in the cache"))
    return d


def pipeline_health() -> dashboard.Dashboard:
    d = _dashboard("cachescope-pipeline-health", "cachescope · Pipeline health",
                   "Lag, late events, rejects and skipped lines by reason, window completeness, alerts firing.")
    health = reads.PIPELINE_HEALTH
    d = d.with_panel(_series("Kafka consumer lag", narrow(
        bind(reads.CONSUMER_LAG, consumer_groups="[]"),
        "time, concat(consumer_group, ' · ', topic, '/', toString(partition)) AS series, lag"), unit="short",
        desc="records between each consumer group's committed offset and the partition's end (pipeline monitor)"))
    for title, metrics, unit in (("Event-time lag", "['event_time_lag_s']", "s"),
                                 ("Late events", "['late_events']", "short"),
                                 ("Rows written", "['rows_written']", "short")):
        sql = narrow(bind(health, metrics=metrics), "time, concat(component, ' · ', cache_group) AS series, value")
        d = d.with_panel(_series(title, sql, unit=unit))
    d = d.with_panel(_series("Store outages", narrow(
        bind(health, metrics="['store_retries', 'store_unavailable_s']"), "time, metric AS series, value"),
        unit="short", desc="inserts the row writers retried while ClickHouse (or a shard) was unreachable, and "
                           "how long it was (seconds), reported once the store took the rows again"))
    d = d.with_panel(_series("Lines, accesses, rejects and skipped lines by reason", narrow(
        bind(reads.PARSE_HEALTH), "time, concat(component, ' · ', cache_group, ' · ', metric) AS series, value"),
        unit="short", desc="per interval, from the shippers (per transaction), the Flink job and the embedded replay"))
    d = d.with_panel(_series("Window completeness", bind(reads.WINDOW_COMPLETENESS),
                             desc="share of the efficiency windows written per interval"))
    d = d.with_panel(_series("Alerts firing", bind(reads.ALERTS_FIRING_SERIES), unit="short"))
    d = d.with_panel(_table("Alerts", bind(reads.ALERT_SPANS), width=24))
    return d


DASHBOARDS = {
    "site-overview": site_overview,
    "policy-size": policy_size,
    "curves": curves,
    "tiers": tiers,
    "cache-servers": cache_servers,
    "real-vs-shadow": real_vs_shadow,
    "pipeline-health": pipeline_health,
}


def render_dashboards() -> dict[str, str]:
    """File name → JSON text of every dashboard."""
    enc = JSONEncoder(sort_keys=True, indent=2)
    return {f"{name}.json": enc.encode(make().build()) + "\n" for name, make in DASHBOARDS.items()}


def render_all() -> dict[Path, str]:
    from dashboards import alerting

    out = {HERE / name: text for name, text in render_dashboards().items()}
    out[HERE / "provisioning" / "alerting" / "cachescope-rules.yaml"] = alerting.render()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashboards.generate", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file is out of date")
    ap.add_argument("--config", help="site configuration: its alert rules (shipped + site) for --alerting-out")
    ap.add_argument("--alerting-out", help="write the Grafana alerting file of --config's rules here")
    args = ap.parse_args(argv)
    if args.config or args.alerting_out:
        if not (args.config and args.alerting_out):
            print("give --config and --alerting-out together", file=sys.stderr)
            return 2
        from cachescope.config import load_config
        from cachescope.errors import UserError
        from dashboards import alerting

        try:
            rules = load_config(args.config).alerts.resolved()
        except UserError as e:
            print(str(e), file=sys.stderr)
            return 2
        Path(args.alerting_out).write_text(alerting.render(rules))
        print(f"{args.alerting_out}: {len(rules)} rule(s)", file=sys.stderr)
        return 0
    stale = []
    for path, text in render_all().items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if args.check and stale:
        print(f"out of date: {', '.join(str(p.relative_to(HERE.parent)) for p in stale)}; "
              "run `python -m dashboards.generate`", file=sys.stderr)
        return 1
    if not args.check:
        print(f"{len(stale)} file(s) written" if stale else "up to date", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
