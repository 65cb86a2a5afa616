"""The read layer: every question asked of the results, as a named, parameterised query.

Everything that reads the store — the demo's summary, `cachescope serve` (the API and its page),
the Grafana panels, reports and alert rules — goes through the queries below. The rules of the
tables are written here once:

* `FINAL` on every ReplacingMergeTree read: a replay may have written a row twice, and counting
  must see one copy until merges collapse them.
* A cache group spread over shards writes one row per shard (sub-caches of size/shards, labelled
  with the full size): readers sum over `shard`, never group by it.
* Resolution by step: the core writes minute (the configured window), hour and day windows as
  plain rows of the same columns (`efficiency`, `efficiency_hourly`, `efficiency_daily`), so a
  series at step S reads the coarsest table whose window divides S, bucketed by S.
* hit efficiency = hits / requests, transfer efficiency = bytes_hit / bytes_requested, over read
  accesses only (the engine counts only reads).
* Every value comes in as a ClickHouse query parameter (`{name:Type}`), never spliced into SQL
  text: table names are constants chosen by code, filters are typed parameters.

A query is a `NamedQuery`: `.run(store, **params)` gives a pandas DataFrame by the backend's
fastest columnar path; `.grafana(...)` renders the same SQL with the ClickHouse plugin's macros
and dashboard variables in place of the parameters (the dashboards are generated from it).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from cachescope.errors import UserError
from cachescope.store import tables
from cachescope.units import utc

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from cachescope.store import Store

_PARAM = re.compile(r"\{([a-z_]+):([A-Za-z0-9(), ']+)\}")

#: window length of each efficiency table, seconds (the minute table's is the configured window,
#: at most an hour, a divisor of it)
HOUR, DAY = 3600, 86400
EFFICIENCY_TABLES = ((DAY, tables.EFFICIENCY_DAILY), (HOUR, tables.EFFICIENCY_HOURLY), (1, tables.EFFICIENCY))


@dataclass(frozen=True)
class NamedQuery:
    """One question, as SQL with typed ClickHouse parameters."""

    name: str
    sql: str
    doc: str

    @property
    def params(self) -> dict[str, str]:
        """Parameter name → ClickHouse type."""
        return dict(_PARAM.findall(self.sql))

    def run(self, store: "Store", **params: Any) -> "pd.DataFrame":
        missing = sorted(set(self.params) - params.keys())
        if missing:
            raise TypeError(f"query {self.name} needs parameters {missing}")
        return store.query_frame(self.sql, {k: _param_value(v) for k, v in params.items() if k in self.params})

    def grafana(self, bindings: Mapping[str, str]) -> str:
        """The SQL for a Grafana panel: each parameter replaced by its binding (a macro such as
        `$__fromTime`, or a dashboard variable such as `'${cache_group}'`)."""
        missing = sorted(set(self.params) - bindings.keys())
        if missing:
            raise KeyError(f"query {self.name}: no Grafana binding for {missing}")
        return _PARAM.sub(lambda m: bindings[m.group(1)], self.sql)


def _param_value(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(v, (tuple, set, frozenset)):
        return list(v)
    return v


# ---------------------------------------------------------------------------------------------
# filters: an empty list means "all"

def _any_of(column: str, param: str, ch_type: str = "Array(String)") -> str:
    return f"(empty({{{param}:{ch_type}}}) OR has({{{param}:{ch_type}}}, {column}))"


_EFFICIENCY_FILTER = " AND ".join((
    "window_start >= {start:DateTime64(6)} AND window_start < {end:DateTime64(6)}",
    _any_of("cache_group", "cache_groups"),
    _any_of("policy", "policies"),
    _any_of("size_bytes", "sizes", "Array(UInt64)"),
    _any_of("tier", "tiers"),
))
#: one group set, one tier set and a window range: the filter of curves and real-cache reads
_WINDOW_GROUP_TIER_FILTER = ("window_start >= {start:DateTime64(6)} AND window_start < {end:DateTime64(6)} AND "
                             + _any_of("cache_group", "cache_groups") + " AND " + _any_of("tier", "tiers"))
_COUNTERS = ("sum(requests) AS requests, sum(hits) AS hits, sum(bytes_requested) AS bytes_requested, "
             "sum(bytes_hit) AS bytes_hit, sum(bytes_filled) AS bytes_filled, sum(evictions) AS evictions, "
             "sum(delayed_hits) AS delayed_hits, sum(bytes_delayed) AS bytes_delayed")
_EFFICIENCIES = ("if(requests = 0, nan, hits / requests) AS hit_efficiency, "
                 "if(bytes_requested = 0, nan, bytes_hit / bytes_requested) AS transfer_efficiency")
#: a shadow's bytes from the origin: its miss bytes; the xcache model fetches whole blocks (whole
#: files with prefetch), which it counts as bytes filled (plus misses it could not store)
_SHADOW_WAN = ("if(policy = 'xcache', greatest(toInt64(bytes_filled), toInt64(bytes_requested) - toInt64(bytes_hit)), "
               "toInt64(bytes_requested) - toInt64(bytes_hit)) "
               "AS wan_bytes, if(bytes_requested = 0, nan, 1 - wan_bytes / bytes_requested) AS wan_saving")
#: the JSON contracts' names (`cachescope simulate --json`, POST /v1/whatif, every curve point) for
#: the read layer's efficiencies: the same numbers, renamed here and nowhere else
CONTRACT_NAMES = {"hit_efficiency": "hit_ratio", "transfer_efficiency": "byte_hit_ratio"}
#: `by_tier` = 0 folds the tiers into one 'ALL' row (a parameter, so one SQL text serves both)
_TIER_KEY = "if({by_tier:UInt8} = 1, tier, 'ALL') AS tier_key"


def _efficiency_series(table: str) -> NamedQuery:
    return NamedQuery(
        f"efficiency_series:{table}",
        f"SELECT toStartOfInterval(window_start, toIntervalSecond({{step_s:UInt32}})) AS time, cache_group, policy, "
        f"size_bytes, {_TIER_KEY}, {_COUNTERS}, {_EFFICIENCIES}, {_SHADOW_WAN} "
        f"FROM {table} FINAL WHERE {_EFFICIENCY_FILTER} "
        "GROUP BY time, cache_group, policy, size_bytes, tier_key "
        "ORDER BY cache_group, policy, size_bytes, tier_key, time",
        "hit and transfer efficiency per (cache group, policy, size[, tier]) and time bucket; wan_bytes: what the "
        "shadow fetched from the origin (its miss bytes; xcache: the blocks it fetched, whole files with prefetch), "
        "wan_saving = 1 - wan_bytes / bytes requested",
    )


def _efficiency_totals(table: str) -> NamedQuery:
    return NamedQuery(
        f"efficiency_totals:{table}",
        f"SELECT cache_group, policy, size_bytes, {_TIER_KEY}, {_COUNTERS}, {_EFFICIENCIES}, "
        "min(window_start) AS first_window, max(window_end) AS last_window "
        f"FROM {table} FINAL WHERE {_EFFICIENCY_FILTER} "
        "GROUP BY cache_group, policy, size_bytes, tier_key ORDER BY cache_group, policy, size_bytes, tier_key",
        "hit and transfer efficiency per (cache group, policy, size[, tier]) over a whole range",
    )


def _residence_series(table: str) -> NamedQuery:
    return NamedQuery(
        f"residence_series:{table}",
        f"SELECT toStartOfInterval(window_start, toIntervalSecond({{step_s:UInt32}})) AS time, cache_group, policy, "
        f"size_bytes, {_TIER_KEY}, sum(age_reads) AS age_reads, sum(resident_age_s) AS resident_age_s, "
        "sum(evictions) AS evictions, sum(evicted_age_s) AS evicted_age_s, "
        "if(age_reads = 0, nan, resident_age_s / age_reads) AS mean_age_s, "
        "if(evictions = 0, nan, evicted_age_s / evictions) AS residence_s "
        f"FROM {table} FINAL WHERE {_EFFICIENCY_FILTER} "
        "GROUP BY time, cache_group, policy, size_bytes, tier_key "
        "ORDER BY cache_group, policy, size_bytes, tier_key, time",
        "residence ages per (cache group, policy, size[, tier]) and time bucket: mean_age_s, the mean age of the "
        "files in the cache as the bucket's reads found it; residence_s, how long the files evicted in the "
        "bucket had stayed (NaN: no eviction)",
    )


EFFICIENCY_SERIES = {table: _efficiency_series(table) for _, table in EFFICIENCY_TABLES}
RESIDENCE_SERIES = {table: _residence_series(table) for _, table in EFFICIENCY_TABLES}


def _efficiency_rows(table: str) -> NamedQuery:
    return NamedQuery(
        f"efficiency_rows:{table}",
        "SELECT toUnixTimestamp(window_start) AS ws, indexOf({group_names:Array(String)}, cache_group) AS cache_group, "
        "indexOf({policy_names:Array(String)}, policy) AS policy, size_bytes, "
        "indexOf({tier_names:Array(String)}, tier) AS tier, "
        "requests, hits, bytes_requested, bytes_hit, bytes_filled, evictions, delayed_hits, bytes_delayed "
        f"FROM {table} FINAL",
        "every window of a table, one row per shard and run (what an in-process copy of the table holds: the "
        "efficiency series are sums of these rows); names as their 1-based place in the lists given, 0 when not there "
        "(strings and a GROUP BY on them were 4/5 of the read)",
    )


def _efficiency_row_names(table: str) -> NamedQuery:
    return NamedQuery(
        f"efficiency_row_names:{table}",
        "SELECT groupUniqArray(cache_group) AS cache_groups, groupUniqArray(policy) AS policies, "
        f"groupUniqArray(tier) AS tiers FROM {table}",
        "the names a table's rows hold (efficiency_rows gives them as places in these lists)",
    )


def _table_version(table: str) -> NamedQuery:
    return NamedQuery(
        f"table_version:{table}",
        "SELECT sum(rows) AS rows, count() AS parts, max(max_block_number) AS block, max(data_version) AS version "
        f"FROM system.parts WHERE database = currentDatabase() AND table = '{table}' AND active",
        "a table's active parts: changes with every insert, merge or mutation (when to reload a copy of it)",
    )


#: the tables whose rows an in-process copy may hold (the minute table is read by SQL: too many rows)
EFFICIENCY_ROWS = {t: _efficiency_rows(t) for t in (tables.EFFICIENCY_HOURLY, tables.EFFICIENCY_DAILY)}
EFFICIENCY_ROW_NAMES = {t: _efficiency_row_names(t) for t in (tables.EFFICIENCY_HOURLY, tables.EFFICIENCY_DAILY)}
TABLE_VERSION = {t: _table_version(t) for t in (tables.EFFICIENCY_HOURLY, tables.EFFICIENCY_DAILY)}
EFFICIENCY_TOTALS = {table: _efficiency_totals(table) for _, table in EFFICIENCY_TABLES}

MRC = NamedQuery(
    "mrc",
    "SELECT capacity_bytes, " + _TIER_KEY + ", sum(requests) AS requests, sum(hits) AS hits, "
    "sum(bytes_requested) AS bytes_requested, sum(bytes_hit) AS bytes_hit, max(sample_rate) AS sample_rate, "
    + _EFFICIENCIES + " "
    f"FROM {tables.MRC} FINAL WHERE {_WINDOW_GROUP_TIER_FILTER} "
    "GROUP BY capacity_bytes, tier_key ORDER BY tier_key, capacity_bytes",
    "exact LRU miss-ratio curve: hit and transfer efficiency against capacity, summed over the range",
)

#: the real cache's bytes served from its disk, as exact as its records allow: exact for the accesses
#: whose record carries the bytes fetched from the origin (XRootD >= 5.7.2: b_todisk + b_bypass;
#: origin_cache_bytes), bounded for the others (5.5 with prefetch): at least their hits' bytes by the
#: cache's own verdict, at most their b_hit (which counts blocks in flight from the origin as hits)
_REAL_CACHE_BYTES = (
    "toInt64(origin_cache_bytes) + toInt64(verdict_hit_bytes) AS cache_bytes_low, "
    "toInt64(origin_cache_bytes) + greatest(toInt64(hit_bytes) - toInt64(origin_hit_bytes), toInt64(verdict_hit_bytes)) "
    "AS cache_bytes_high"
)

OBSERVED_SERIES = NamedQuery(
    "observed_series",
    "SELECT toStartOfInterval(window_start, toIntervalSecond({step_s:UInt32})) AS time, cache_group, "
    + _TIER_KEY + ", sum(accesses) AS accesses, sum(bytes_read) AS bytes_read, sum(hit_bytes) AS hit_bytes, "
    "sum(miss_bytes) AS miss_bytes, sum(bypass_bytes) AS bypass_bytes, sum(hits) AS hits, "
    "sum(origin_accesses) AS origin_accesses, sum(origin_bytes_read) AS origin_bytes_read, "
    "sum(origin_bytes) AS origin_bytes, sum(origin_cache_bytes) AS origin_cache_bytes, "
    "sum(origin_hit_bytes) AS origin_hit_bytes, sum(verdict_hit_bytes) AS verdict_hit_bytes, "
    "sum(verdict_accesses) AS verdict_accesses, "
    + _REAL_CACHE_BYTES + ", "
    "toUInt8(origin_accesses < accesses) AS transfer_efficiency_approximate, "
    "if(bytes_read = 0, nan, cache_bytes_low / bytes_read) AS transfer_efficiency_low, "
    "if(bytes_read = 0, nan, cache_bytes_high / bytes_read) AS transfer_efficiency_high, "
    "if(transfer_efficiency_approximate = 0, transfer_efficiency_low, transfer_efficiency_high) "
    "AS transfer_efficiency, if(accesses = 0, nan, hits / accesses) AS hit_efficiency, "
    "if(origin_bytes_read = 0, nan, 1 - origin_bytes / origin_bytes_read) AS wan_saving "
    f"FROM {tables.OBSERVED} FINAL WHERE {_WINDOW_GROUP_TIER_FILTER} "
    "GROUP BY time, cache_group, tier_key ORDER BY cache_group, tier_key, time",
    "the real cache's own numbers. Transfer efficiency = bytes served from its disk / bytes read: exact when "
    "every access's record carries the bytes fetched from the origin (a hit serves all its bytes, a miss its "
    "bytes read - min(bytes read, origin bytes)); otherwise approximate (transfer_efficiency_approximate = 1): "
    "the range transfer_efficiency_low (hits by its verdict) .. transfer_efficiency_high (b_hit), and "
    "transfer_efficiency is the upper bound (b_hit's share, as before b_todisk). Hit efficiency = accesses for which it fetched nothing from "
    "the origin (its verdict, observed_hit; without one: no miss or bypass bytes) / accesses. origin_bytes: its "
    "WAN bytes (b_todisk + b_bypass) over the origin_accesses that carry them; wan_saving = 1 - origin_bytes / "
    "origin_bytes_read (negative when prefetch fetched more than clients read)",
)

OBSERVED_SERVERS = NamedQuery(
    "observed_servers",
    "SELECT cache_group, server, sum(accesses) AS accesses, sum(hit_bytes) AS hit_bytes, sum(miss_bytes) AS miss_bytes, "
    "sum(bypass_bytes) AS bypass_bytes, sum(origin_accesses) AS origin_accesses, sum(origin_bytes_read) AS "
    "origin_bytes_read, sum(origin_bytes) AS origin_bytes "
    f"FROM {tables.OBSERVED} FINAL WHERE {_WINDOW_GROUP_TIER_FILTER} "
    "GROUP BY cache_group, server ORDER BY cache_group, server",
    "the real caches (servers) behind each cache group and their byte counters",
)

#: accesses for a what-if replay, in (ts, origin, seq) order, the columns the engine takes
WHATIF_ACCESSES = NamedQuery(
    "whatif_accesses",
    "SELECT toUnixTimestamp64Micro(ts) AS ts_us, origin, seq, file_id, file_size, bytes_read, "
    "CAST(op, 'Int8') AS op_code, tier, cache_group, site, server "
    f"FROM {tables.ACCESS_EVENTS} FINAL "
    "WHERE ts >= {start:DateTime64(6)} AND ts < {end:DateTime64(6)} AND "
    + _any_of("cache_group", "cache_groups") + " "
    "ORDER BY ts, origin, seq",
    "stored accesses of a range (reads, writes and deletes), in replay order",
)

#: the accesses of a what-if range: time, cache groups, sites (the replay's scope)
_WHATIF_RANGE = ("WHERE ts >= {start:DateTime64(6)} AND ts < {end:DateTime64(6)} AND "
                 + _any_of("cache_group", "cache_groups") + " AND " + _any_of("site", "sites") + " ")

#: the what-if replay's feed: numeric columns only, each as the engine takes it. Tiers, cache
#: groups and servers come as their 1-based index in the given lists (0: not listed), and `admitted` applies
#: the admission filter in the store: a string column per row would cost more than the replay
FEED_COLUMNS = {
    "ts_us": "toUnixTimestamp64Micro(ts)",
    "file_id": "file_id",
    "file_size": "file_size",
    "bytes_read": "bytes_read",
    "op_code": "CAST(op, 'UInt8')",
    "tier_code": "toUInt8(indexOf({tier_names:Array(String)}, tier))",
    "group_code": "toUInt16(indexOf({cache_groups:Array(String)}, cache_group))",
    "admitted": "toUInt8(NOT has({exclude_tiers:Array(String)}, tier) AND file_size <= {max_file_size:UInt64})",
    "server_code": "toUInt16(indexOf({servers:Array(String)}, server))",
    "duration_us": "ifNull(duration_us, 0)",
}


def _feed_sql(columns) -> str:
    """The feed's SELECT of `columns` (in FEED_COLUMNS order), in (ts, origin, seq) order."""
    return ("SELECT " + ", ".join(e if e == c else f"{e} AS {c}" for c, e in FEED_COLUMNS.items() if c in columns)
            + f" FROM {tables.ACCESS_EVENTS} FINAL " + _WHATIF_RANGE + "ORDER BY ts, origin, seq")


WHATIF_FEED = NamedQuery(
    "whatif_feed",
    _feed_sql(FEED_COLUMNS),
    "a what-if replay's accesses as engine columns (tier and group codes, admission flag), in replay order",
)

#: the servers of a what-if range (partitions by server: one cache each)
WHATIF_SERVERS = NamedQuery(
    "whatif_servers",
    "SELECT server, count() AS accesses "
    f"FROM {tables.ACCESS_EVENTS} "
    + _WHATIF_RANGE +
    "GROUP BY server ORDER BY server",
    "accesses per server in a range (not deduplicated)",
)

#: what a what-if range holds, before reading it: accesses per tier (the bound and the tier codes)
WHATIF_SCOPE = NamedQuery(
    "whatif_scope",
    "SELECT tier, count() AS accesses, countIf(op = 'read') AS reads "
    f"FROM {tables.ACCESS_EVENTS} "
    + _WHATIF_RANGE +
    "GROUP BY tier ORDER BY accesses DESC, tier",
    "accesses and reads per tier in a range (to bound a what-if and number its tiers)",
)

ACCESS_COUNT = NamedQuery(
    "access_count",
    f"SELECT count() AS accesses FROM {tables.ACCESS_EVENTS} "
    "WHERE ts >= {start:DateTime64(6)} AND ts < {end:DateTime64(6)} AND " + _any_of("cache_group", "cache_groups"),
    "how many accesses a range holds (to bound a what-if before reading it)",
)

CACHE_GROUPS = NamedQuery(
    "cache_groups",
    "SELECT cache_group, any(site) AS site, count() AS accesses, min(ts) AS first_access, max(ts) AS last_access, "
    "uniqExact(server) AS servers "
    f"FROM {tables.ACCESS_EVENTS} FINAL GROUP BY cache_group ORDER BY cache_group",
    "the cache groups in the store, their site and time span; accesses counted once per identity "
    "(cache_group, origin, seq), as a resumed replay may have written some twice",
)

LIVE_CONFIGS = NamedQuery(
    "live_configs",
    "SELECT cache_group, policy, size_bytes, max(sample_rate) AS sample_rate, max(partitions) AS partitions, "
    "uniqExact(shard) AS shards, min(window_start) AS first_window, max(window_end) AS last_window "
    f"FROM {tables.EFFICIENCY_DAILY} FINAL "
    "GROUP BY cache_group, policy, size_bytes ORDER BY cache_group, policy, size_bytes",
    "the shadow caches the pipeline runs (or ran) per cache group",
)

TIME_SPAN = NamedQuery(
    "time_span",
    f"SELECT min(window_start) AS first_window, max(window_end) AS last_window FROM {tables.EFFICIENCY_DAILY} FINAL",
    "the time span the results cover",
)

PIPELINE_HEALTH = NamedQuery(
    "pipeline_health",
    "SELECT toStartOfInterval(ts, toIntervalSecond({step_s:UInt32})) AS time, component, cache_group, metric, "
    "max(value) AS value "
    f"FROM {tables.PIPELINE_HEALTH} "
    "WHERE ts >= {start:DateTime64(6)} AND ts < {end:DateTime64(6)} AND " + _any_of("metric", "metrics") + " "
    "GROUP BY time, component, cache_group, metric ORDER BY component, metric, cache_group, time",
    "what each component reports about itself (lag, late events, rejects and skips by reason)",
)

#: parse health: counts each writer reports per interval (the shippers per transaction, the
#: embedded replay per run, the Flink job per rejected message), so buckets sum them
PARSE_HEALTH = NamedQuery(
    "parse_health",
    "SELECT toStartOfInterval(ts, toIntervalSecond({step_s:UInt32})) AS time, component, cache_group, metric, "
    "sum(value) AS value "
    f"FROM {tables.PIPELINE_HEALTH} "
    "WHERE ts >= {start:DateTime64(6)} AND ts < {end:DateTime64(6)} AND component IN ('parse', 'shipper', 'flink') "
    "AND splitByChar(char(58), metric)[1] IN ('lines', 'events', 'rejected', 'skipped') "
    "GROUP BY time, component, cache_group, metric ORDER BY component, metric, cache_group, time",
    "lines read, accesses, rejected and skipped lines (by reason: `rejected:<reason>`, `skipped:<reason>`) "
    "per time bucket, from the shippers, the embedded replay and the Flink job",
)

CONSUMER_LAG = NamedQuery(
    "consumer_lag",
    "SELECT toStartOfInterval(ts, toIntervalSecond({step_s:UInt32})) AS time, consumer_group, topic, partition, "
    "argMax(committed_offset, ts) AS committed_offset, argMax(end_offset, ts) AS end_offset, max(lag) AS lag "
    f"FROM {tables.CONSUMER_LAG} "
    "WHERE ts >= {start:DateTime64(6)} AND ts < {end:DateTime64(6)} AND "
    + _any_of("consumer_group", "consumer_groups") + " "
    "GROUP BY time, consumer_group, topic, partition ORDER BY consumer_group, topic, partition, time",
    "Kafka consumer lag per group, topic and partition (records between the committed and the end "
    "offset; the largest sample of each bucket)",
)

ALERTS = NamedQuery(
    "alerts",
    "SELECT ts, rule, cache_group, toString(state) AS state, severity, kind, metric, policy, size_bytes, value, "
    "threshold, reference, starts_at, summary, fingerprint "
    f"FROM {tables.ALERTS} FINAL "
    "WHERE ts >= {start:DateTime64(6)} AND ts < {end:DateTime64(6)} AND "
    + _any_of("toString(state)", "states") + " AND " + _any_of("cache_group", "cache_groups") + " "
    "ORDER BY ts, cache_group, rule",
    "alert transitions (firing, resolved) the pipeline wrote, with the numbers that caused them",
)

ALERT_SPANS = NamedQuery(
    "alert_spans",
    "SELECT cache_group, rule, any(severity) AS severity, starts_at, minIf(ts, state = 'firing') AS fired_at, "
    "maxIf(ts, state = 'resolved') AS resolved_at, countIf(state = 'resolved') = 0 AS open, "
    "argMaxIf(summary, ts, state = 'firing') AS summary "
    f"FROM {tables.ALERTS} FINAL "
    "WHERE ts >= {start:DateTime64(6)} AND starts_at < {end:DateTime64(6)} AND "
    + _any_of("cache_group", "cache_groups") + " "
    "GROUP BY cache_group, rule, starts_at ORDER BY starts_at, cache_group, rule",
    "one row per alert (cache group, rule, start): when it fired, when it resolved (open: not yet)",
)

ALERTS_FIRING_SERIES = NamedQuery(
    "alerts_firing_series",
    "SELECT time, count() AS firing FROM ("
    "SELECT cache_group, rule, starts_at, minIf(ts, state = 'firing') AS fired, "
    "if(countIf(state = 'resolved') = 0, toDateTime64(7258118400, 3, 'UTC'), maxIf(ts, state = 'resolved')) "
    "AS resolved "
    f"FROM {tables.ALERTS} FINAL WHERE " + _any_of("cache_group", "cache_groups") + " "
    "GROUP BY cache_group, rule, starts_at) AS a "
    "ARRAY JOIN arrayMap(i -> toStartOfInterval(toDateTime({start:DateTime64(6)}, 'UTC'), "
    "toIntervalSecond({step_s:UInt32})) + toIntervalSecond(i * {step_s:UInt32}), "
    "range(toUInt32(intDiv(dateDiff('second', toDateTime({start:DateTime64(6)}), "
    "toDateTime({end:DateTime64(6)})), {step_s:UInt32}) + 1))) AS time "
    "WHERE fired <= time + toIntervalSecond({step_s:UInt32}) AND resolved > time "
    "GROUP BY time ORDER BY time",
    "how many alerts were firing in each time bucket",
)

_RANGE = "window_start >= {start:DateTime64(6)} AND window_start < {end:DateTime64(6)}"

BEST_POLICY = NamedQuery(
    "best_policy",
    "SELECT cache_group, size_bytes, argMax(policy, hit_efficiency) AS best_policy, max(hit_efficiency) AS "
    "best_hit_efficiency, argMax(policy, transfer_efficiency) AS best_transfer_policy, "
    "max(transfer_efficiency) AS best_transfer_efficiency FROM ("
    f"SELECT cache_group, policy, size_bytes, {_COUNTERS}, {_EFFICIENCIES} "
    f"FROM {tables.EFFICIENCY} FINAL WHERE {_EFFICIENCY_FILTER} GROUP BY cache_group, policy, size_bytes) "
    "GROUP BY cache_group, size_bytes ORDER BY cache_group, size_bytes",
    "the policy with the highest hit (and transfer) efficiency at each size, per cache group",
)

READ_VOLUME = NamedQuery(
    "read_volume",
    "SELECT time, cache_group, max(requests) AS reads, max(bytes_requested) AS bytes_read, "
    "max(bytes_hit) AS bytes_saved_best FROM ("
    "SELECT toStartOfInterval(window_start, toIntervalSecond({step_s:UInt32})) AS time, cache_group, policy, "
    "size_bytes, sum(requests) AS requests, sum(bytes_requested) AS bytes_requested, sum(bytes_hit) AS bytes_hit "
    f"FROM {tables.EFFICIENCY} FINAL WHERE {_EFFICIENCY_FILTER} "
    "GROUP BY time, cache_group, policy, size_bytes) GROUP BY time, cache_group ORDER BY cache_group, time",
    "volume read per time bucket (every shadow cache sees every read: one cache's count) and the bytes "
    "the best selected cache would have served instead of the WAN",
)

CACHE_SPLIT = NamedQuery(
    "cache_split",
    "SELECT s.policy AS policy, s.size_bytes AS total_size_bytes, p.size_bytes AS per_server_size_bytes, "
    "p.servers AS servers, s.hits / s.requests AS shared_hit_efficiency, p.hits / p.requests AS split_hit_efficiency, "
    "s.bytes_hit / s.bytes_requested AS shared_transfer_efficiency, "
    "p.bytes_hit / p.bytes_requested AS split_transfer_efficiency FROM ("
    "SELECT policy, size_bytes, sum(requests) AS requests, sum(hits) AS hits, sum(bytes_requested) AS bytes_requested, "
    f"sum(bytes_hit) AS bytes_hit FROM {tables.EFFICIENCY} FINAL WHERE {_RANGE} AND cache_group = {{site:String}} "
    "GROUP BY policy, size_bytes) AS s INNER JOIN ("
    "SELECT policy, size_bytes, uniqExact(cache_group) AS servers, sum(requests) AS requests, sum(hits) AS hits, "
    "sum(bytes_requested) AS bytes_requested, sum(bytes_hit) AS bytes_hit "
    f"FROM {tables.EFFICIENCY} FINAL WHERE {_RANGE} AND startsWith(cache_group, concat({{site:String}}, char(47))) "
    "GROUP BY policy, size_bytes) AS p ON s.policy = p.policy AND s.size_bytes = p.size_bytes * p.servers "
    "WHERE s.requests > 0 AND p.requests > 0 ORDER BY policy, total_size_bytes",
    "one shared cache (cache group = the site) against one per server (groups site/server: the site "
    "group's per-server caches, pipeline.server_caches, or server mode) at equal total size",
)

WINDOW_COMPLETENESS = NamedQuery(
    "window_completeness",
    "SELECT toStartOfInterval(window_start, toIntervalSecond({step_s:UInt32})) AS time, cache_group, "
    "uniqExact(window_start) * max(dateDiff('second', window_start, window_end)) / {step_s:UInt32} AS completeness "
    f"FROM {tables.EFFICIENCY} FINAL WHERE {_RANGE} AND " + _any_of("cache_group", "cache_groups") + " "
    "GROUP BY time, cache_group ORDER BY cache_group, time",
    "share of the windows of each time bucket that were written (1 = a row for every window), each "
    "group's windows as long as its rows say (a per-server comparison group's are hours)",
)

EFFICIENCY_VS_BASELINE = NamedQuery(
    "efficiency_vs_baseline",
    "SELECT cache_group, policy, size_bytes, "
    "sumIf(r, cur) AS requests, sumIf(h, cur) / sumIf(r, cur) AS hit_efficiency, "
    "sumIf(bh, cur) / sumIf(br, cur) AS transfer_efficiency, "
    "sumIf(r, NOT cur) AS baseline_requests, sumIf(h, NOT cur) / sumIf(r, NOT cur) AS baseline_hit_efficiency, "
    "sumIf(bh, NOT cur) / sumIf(br, NOT cur) AS baseline_transfer_efficiency "
    "FROM (SELECT cache_group, policy, size_bytes, requests AS r, hits AS h, bytes_requested AS br, bytes_hit AS bh, "
    "window_start >= {start:DateTime64(6)} AS cur "
    f"FROM {tables.EFFICIENCY} FINAL WHERE "
    "arrayExists(d -> window_start >= {start:DateTime64(6)} - toIntervalDay(d) AND "
    "window_start < {end:DateTime64(6)} - toIntervalDay(d), range(0, {baseline_days:UInt8} + 1)) AND "
    + " AND ".join((_any_of("cache_group", "cache_groups"), _any_of("policy", "policies"),
                    _any_of("size_bytes", "sizes", "Array(UInt64)"))) + ") "
    "GROUP BY cache_group, policy, size_bytes ORDER BY cache_group, policy, size_bytes",
    "efficiency over [start, end) beside the same hours of the previous `baseline_days` days (summed)",
)

#: how big a series answer would be, before asking for it: the series the filters select (tiers
#: summed, and by tier) from the day table, and the minute table's window length (one row looked at)
SERIES_SCOPE = NamedQuery(
    "series_scope",
    "SELECT uniqExact(cache_group, policy, size_bytes) AS series, "
    "uniqExact(cache_group, policy, size_bytes, tier) AS tier_series, "
    f"(SELECT ifNull(min(toUInt32(window_end - window_start)), 0) FROM (SELECT window_start, window_end FROM "
    f"{tables.EFFICIENCY} LIMIT 1)) AS window_s "
    f"FROM {tables.EFFICIENCY_DAILY} WHERE window_start >= toStartOfDay({{start:DateTime64(6)}}) "
    "AND window_start < {end:DateTime64(6)} AND "
    + " AND ".join((_any_of("cache_group", "cache_groups"), _any_of("policy", "policies"),
                    _any_of("size_bytes", "sizes", "Array(UInt64)"), _any_of("tier", "tiers"))),
    "how many series (tiers summed; by tier) a series read of a range would answer, and the minute window",
)

#: the names a filter can take: those the stored accesses or results hold (a name outside them is a
#: typo, answered as such rather than with zeros)
KNOWN_CACHE_GROUPS = NamedQuery(
    "known_cache_groups",
    f"SELECT DISTINCT cache_group AS name FROM {tables.ACCESS_EVENTS} UNION DISTINCT "
    f"SELECT DISTINCT cache_group AS name FROM {tables.EFFICIENCY_DAILY}",
    "the cache groups the store holds accesses or results of",
)

KNOWN_TIERS = NamedQuery(
    "known_tiers",
    f"SELECT DISTINCT tier AS name FROM {tables.ACCESS_EVENTS} UNION DISTINCT "
    f"SELECT DISTINCT tier AS name FROM {tables.EFFICIENCY_DAILY}",
    "the data tiers the store holds accesses or results of",
)

SITES = NamedQuery(
    "sites",
    f"SELECT DISTINCT site FROM {tables.ACCESS_EVENTS} ORDER BY site",
    "the sites in the store (dashboard variable)",
)

SITE_CACHE_GROUPS = NamedQuery(
    "site_cache_groups",
    f"SELECT DISTINCT cache_group FROM {tables.ACCESS_EVENTS} WHERE " + _any_of("site", "sites") + " ORDER BY cache_group",
    "the cache groups of some sites (dashboard variable)",
)

POLICIES = NamedQuery(
    "policies",
    f"SELECT DISTINCT policy FROM {tables.EFFICIENCY_DAILY} ORDER BY policy",
    "the policies of the live shadow caches (dashboard variable)",
)

SIZES = NamedQuery(
    "sizes",
    f"SELECT DISTINCT size_bytes FROM {tables.EFFICIENCY_DAILY} ORDER BY size_bytes",
    "the sizes of the live shadow caches (dashboard variable)",
)

TIERS = NamedQuery(
    "tiers",
    f"SELECT DISTINCT tier FROM {tables.EFFICIENCY_DAILY} WHERE tier != '' ORDER BY tier",
    "the data tiers seen (dashboard variable)",
)


# ---------------------------------------------------------------------------------------------
# one function per question

def table_for_step(step_s: int) -> str:
    """The coarsest efficiency table whose windows divide the step."""
    if step_s <= 0:
        raise ValueError(f"step must be positive, got {step_s} s")
    for length, table in EFFICIENCY_TABLES:
        if step_s % length == 0:
            return table
    raise AssertionError("unreachable: the minute table divides every step")


def table_for_range(start: dt.datetime, end: dt.datetime) -> str:
    """The coarsest efficiency table whose windows tile [start, end) exactly."""
    s, e = int(utc(start).timestamp()), int(utc(end).timestamp())
    for length, table in EFFICIENCY_TABLES:
        if s % length == 0 and e % length == 0:
            return table
    return tables.EFFICIENCY


def _lists(**filters: Iterable | None) -> dict[str, list]:
    return {k: [] if v is None else [int(x) for x in v] if k == "sizes" else [str(x) for x in v]
            for k, v in filters.items()}


def efficiency_series(store: "Store", start: dt.datetime, end: dt.datetime, step_s: int, *,
                      cache_groups: Sequence[str] = (), policies: Sequence[str] = (), sizes: Sequence[int] = (),
                      tiers: Sequence[str] = (), by_tier: bool = False) -> "pd.DataFrame":
    """Hit and transfer efficiency per time bucket of `step_s` seconds."""
    q = EFFICIENCY_SERIES[table_for_step(step_s)]
    return q.run(store, start=utc(start), end=utc(end), step_s=int(step_s), by_tier=int(by_tier),
                 **_lists(cache_groups=cache_groups, policies=policies, sizes=sizes, tiers=tiers))


def efficiency_rows(store: "Store", table: str) -> tuple["pd.DataFrame", dict[str, list[str]]]:
    """(rows, names): ws (Unix seconds), cache_group, policy, size_bytes, tier and the counters of
    every window of `table` (efficiency_hourly or efficiency_daily) after FINAL, one row per shard
    and run (to be summed); cache_group, policy and tier as 1-based places in names["cache_group"],
    names["policy"], names["tier"] (sorted)."""
    for _ in range(5):
        got = EFFICIENCY_ROW_NAMES[table].run(store)
        names = {f: sorted(str(v) for v in (got[c].iloc[0] if len(got) else []))
                 for f, c in (("cache_group", "cache_groups"), ("policy", "policies"), ("tier", "tiers"))}
        df = EFFICIENCY_ROWS[table].run(store, group_names=names["cache_group"], policy_names=names["policy"],
                                        tier_names=names["tier"])
        # a name written between the two reads is 0 here: read both again
        if not any((df[f].to_numpy() == 0).any() for f in names):
            return df, names
    from cachescope.store import StoreError

    raise StoreError(f"{table}: new names kept arriving while its rows were read; try again")


def table_version(store: "Store", table: str) -> tuple:
    """(rows, parts, last block, data version) of a table's active parts: equal while nothing changed."""
    df = TABLE_VERSION[table].run(store)
    return tuple(int(v) if v == v else 0 for v in df.iloc[0].tolist()) if len(df) else ()


def efficiency_totals(store: "Store", start: dt.datetime, end: dt.datetime, *, cache_groups: Sequence[str] = (),
                      policies: Sequence[str] = (), sizes: Sequence[int] = (), tiers: Sequence[str] = (),
                      by_tier: bool = False) -> "pd.DataFrame":
    """Totals over [start, end) per (cache group, policy, size[, tier]), from the coarsest table
    that tiles the range (the same numbers as summing minute windows)."""
    q = EFFICIENCY_TOTALS[table_for_range(start, end)]
    return q.run(store, start=utc(start), end=utc(end), by_tier=int(by_tier),
                 **_lists(cache_groups=cache_groups, policies=policies, sizes=sizes, tiers=tiers))


def mrc(store: "Store", start: dt.datetime, end: dt.datetime, *, cache_groups: Sequence[str] = (),
        tiers: Sequence[str] = (), by_tier: bool = False) -> "pd.DataFrame":
    return MRC.run(store, start=utc(start), end=utc(end), by_tier=int(by_tier),
                   **_lists(cache_groups=cache_groups, tiers=tiers))


def residence_series(store: "Store", start: dt.datetime, end: dt.datetime, step_s: int, *,
                     cache_groups: Sequence[str] = (), policies: Sequence[str] = (), sizes: Sequence[int] = (),
                     tiers: Sequence[str] = (), by_tier: bool = False) -> "pd.DataFrame":
    """Mean age of the resident files and mean residence before eviction per bucket of `step_s` s."""
    q = RESIDENCE_SERIES[table_for_step(step_s)]
    return q.run(store, start=utc(start), end=utc(end), step_s=int(step_s), by_tier=int(by_tier),
                 **_lists(cache_groups=cache_groups, policies=policies, sizes=sizes, tiers=tiers))


def observed_series(store: "Store", start: dt.datetime, end: dt.datetime, step_s: int, *,
                    cache_groups: Sequence[str] = (), tiers: Sequence[str] = (), by_tier: bool = False) -> "pd.DataFrame":
    return OBSERVED_SERIES.run(store, start=utc(start), end=utc(end), step_s=int(step_s), by_tier=int(by_tier),
                               **_lists(cache_groups=cache_groups, tiers=tiers))


def real_cache_totals(s: Mapping[str, int]) -> dict[str, Any]:
    """The real cache's efficiencies from sums of OBSERVED_SERIES' columns (a bucket's or a whole
    period's), by the rules of that query: transfer efficiency exact (from its verdict and the
    origin bytes) when every access carries origin bytes, else the range low (verdict) .. high
    (b_hit) with the high bound as its value and `approximate`; WAN bytes and saving over the
    accesses that carry origin bytes (None when none does)."""
    def ratio(a: float, b: float) -> float | None:
        return a / b if b else None

    approximate = bool(s["accesses"]) and s["origin_accesses"] < s["accesses"]
    low, high = ratio(s["cache_bytes_low"], s["bytes_read"]), ratio(s["cache_bytes_high"], s["bytes_read"])
    return {"transfer_efficiency": high if approximate else low, "transfer_efficiency_low": low,
            "transfer_efficiency_high": high, "transfer_efficiency_approximate": approximate,
            "hit_efficiency": ratio(s["hits"], s["accesses"]), "origin_accesses": int(s["origin_accesses"]),
            "origin_bytes": int(s["origin_bytes"]),
            "wan_saving": None if not s["origin_bytes_read"] else 1 - s["origin_bytes"] / s["origin_bytes_read"]}


def observed_servers(store: "Store", start: dt.datetime, end: dt.datetime, *,
                     cache_groups: Sequence[str] = (), tiers: Sequence[str] = ()) -> "pd.DataFrame":
    return OBSERVED_SERVERS.run(store, start=utc(start), end=utc(end), **_lists(cache_groups=cache_groups, tiers=tiers))


def whatif_accesses(store: "Store", start: dt.datetime, end: dt.datetime, *,
                    cache_groups: Sequence[str] = ()) -> "pd.DataFrame":
    """Accesses of [start, end) in (ts, origin, seq) order: ts_us, origin, seq, file_id, file_size,
    bytes_read, op_code, tier, cache_group, site, server."""
    return WHATIF_ACCESSES.run(store, start=utc(start), end=utc(end), **_lists(cache_groups=cache_groups))


def whatif_feed(store: "Store", start: dt.datetime, end: dt.datetime, *, tier_names: Sequence[str],
                cache_groups: Sequence[str] = (), sites: Sequence[str] = (), exclude_tiers: Sequence[str] = (),
                max_file_size: int | None = None, servers: Sequence[str] = ()) -> "pd.DataFrame":
    """Engine columns of [start, end) in (ts, origin, seq) order: ts_us, file_id, file_size,
    bytes_read, op_code, tier_code (1-based in tier_names, 0 other), group_code (1-based in
    cache_groups, 0 when all groups), admitted (0 when the admission filter excludes the access),
    server_code (1-based in servers, 0 other)."""
    return WHATIF_FEED.run(store, start=utc(start), end=utc(end), tier_names=[str(t) for t in tier_names],
                           max_file_size=int(2**64 - 1 if max_file_size is None else max_file_size),
                           **_lists(cache_groups=cache_groups, sites=sites, exclude_tiers=exclude_tiers,
                                    servers=servers))


def whatif_feed_chunks(store: "Store", start: dt.datetime, end: dt.datetime, *, tier_names: Sequence[str],
                       cache_groups: Sequence[str] = (), sites: Sequence[str] = (), exclude_tiers: Sequence[str] = (),
                       max_file_size: int | None = None, servers: Sequence[str] = (),
                       rows: int = 1 << 20, columns: Iterable[str] | None = None) -> "Iterator[dict[str, np.ndarray]]":
    """whatif_feed as numpy columns in chunks of at most `rows` rows, in replay order, streamed
    from a server (Store.stream_columns): memory bounded by a chunk. `columns`: only these of
    FEED_COLUMNS (None: all); the store reads and converts no other (a third less of its CPU
    for the five a plain replay needs)."""
    params = dict(start=utc(start), end=utc(end), tier_names=[str(t) for t in tier_names],
                  max_file_size=int(2**64 - 1 if max_file_size is None else max_file_size),
                  **_lists(cache_groups=cache_groups, sites=sites, exclude_tiers=exclude_tiers, servers=servers))
    if columns is not None:
        unknown = set(columns) - set(FEED_COLUMNS)
        if unknown:
            raise ValueError(f"not a what-if feed column: {', '.join(sorted(unknown))}")
    sql = WHATIF_FEED.sql if columns is None else _feed_sql(set(columns))
    return store.stream_columns(sql, {k: _param_value(v) for k, v in params.items()}, rows=rows)


def whatif_scope(store: "Store", start: dt.datetime, end: dt.datetime, *, cache_groups: Sequence[str] = (),
                 sites: Sequence[str] = ()) -> "pd.DataFrame":
    """tier, accesses, reads of [start, end) (not deduplicated: an upper bound)."""
    return WHATIF_SCOPE.run(store, start=utc(start), end=utc(end), **_lists(cache_groups=cache_groups, sites=sites))


def whatif_servers(store: "Store", start: dt.datetime, end: dt.datetime, *, cache_groups: Sequence[str] = (),
                   sites: Sequence[str] = ()) -> "pd.DataFrame":
    """server, accesses of [start, end) (not deduplicated), by server name."""
    return WHATIF_SERVERS.run(store, start=utc(start), end=utc(end), **_lists(cache_groups=cache_groups, sites=sites))


def access_count(store: "Store", start: dt.datetime, end: dt.datetime, *, cache_groups: Sequence[str] = ()) -> int:
    df = ACCESS_COUNT.run(store, start=utc(start), end=utc(end), **_lists(cache_groups=cache_groups))
    return int(df["accesses"].iloc[0]) if len(df) else 0


def series_scope(store: "Store", start: dt.datetime, end: dt.datetime, *, cache_groups: Sequence[str] = (),
                 policies: Sequence[str] = (), sizes: Sequence[int] = (),
                 tiers: Sequence[str] = ()) -> tuple[int, int, int]:
    """(series with tiers summed, series by tier, the minute table's window in seconds or 0 when
    empty) that an efficiency series read of [start, end) with these filters would answer."""
    df = SERIES_SCOPE.run(store, start=utc(start), end=utc(end),
                          **_lists(cache_groups=cache_groups, policies=policies, sizes=sizes, tiers=tiers))
    if not len(df):
        return 0, 0, 0
    return int(df["series"].iloc[0]), int(df["tier_series"].iloc[0]), int(df["window_s"].iloc[0])


#: filter field → the query of the names it can take (policies and sizes: the live shadow caches')
_KNOWN = {"cache_group": KNOWN_CACHE_GROUPS, "tier": KNOWN_TIERS}


def known_names(store: "Store", field: str) -> list[str]:
    """The values the store holds for a filter field: cache_group, tier, site or policy."""
    if field == "site":
        df = SITES.run(store)
        return sorted(str(v) for v in df["site"])
    if field == "policy":
        return sorted(str(v) for v in POLICIES.run(store)["policy"])
    df = _KNOWN[field].run(store)
    return sorted(str(v) for v in df["name"] if str(v))


def check_known(store: "Store", field: str, values: Sequence[str]) -> None:
    """UnknownName for the first of `values` the store holds nothing of (an empty list: all)."""
    if not values:
        return
    known = known_names(store, field)
    have = set(known)
    for v in values:
        if str(v) not in have:
            raise UnknownName(field, str(v), known)


def cache_groups(store: "Store") -> "pd.DataFrame":
    return CACHE_GROUPS.run(store)


def live_configs(store: "Store") -> "pd.DataFrame":
    return LIVE_CONFIGS.run(store)


def time_span(store: "Store") -> tuple[dt.datetime, dt.datetime] | None:
    """(first window start, last window end) of the results, or None for an empty store."""
    df = TIME_SPAN.run(store)
    if not len(df) or df["first_window"].isna().all():
        return None
    first, last = df["first_window"].iloc[0], df["last_window"].iloc[0]
    if first.timestamp() <= 0:  # min() of no rows is the epoch
        return None
    return utc(first.to_pydatetime()), utc(last.to_pydatetime())


def pipeline_health(store: "Store", start: dt.datetime, end: dt.datetime, step_s: int, *,
                    metrics: Sequence[str] = ()) -> "pd.DataFrame":
    return PIPELINE_HEALTH.run(store, start=utc(start), end=utc(end), step_s=int(step_s),
                               metrics=[str(m) for m in metrics])


def parse_health(store: "Store", start: dt.datetime, end: dt.datetime, step_s: int) -> "pd.DataFrame":
    return PARSE_HEALTH.run(store, start=utc(start), end=utc(end), step_s=int(step_s))


def consumer_lag(store: "Store", start: dt.datetime, end: dt.datetime, step_s: int, *,
                 consumer_groups: Sequence[str] = ()) -> "pd.DataFrame":
    return CONSUMER_LAG.run(store, start=utc(start), end=utc(end), step_s=int(step_s),
                            consumer_groups=[str(g) for g in consumer_groups])


def best_policy(store: "Store", start: dt.datetime, end: dt.datetime, *, cache_groups: Sequence[str] = (),
                policies: Sequence[str] = (), sizes: Sequence[int] = ()) -> "pd.DataFrame":
    return BEST_POLICY.run(store, start=utc(start), end=utc(end),
                           **_lists(cache_groups=cache_groups, policies=policies, sizes=sizes, tiers=()))


class UnknownName(UserError):
    """A name (site, cache group) the stored results do not hold; `known` lists those they do."""

    def __init__(self, field: str, value: str, known: Sequence[str]):
        self.field, self.value, self.known = field, value, list(known)
        shown = ", ".join(repr(k) for k in self.known[:20]) + (" …" if len(self.known) > 20 else "")
        super().__init__(f"no {field} {value!r} in the store (known: {shown or 'none'})")


def site_cache_groups(store: "Store", sites: Sequence[str]) -> list[str]:
    """The cache groups of `sites`; UnknownName for a site the store does not hold. Every reader
    that filters by site asks here first, so an unknown site is the same refusal everywhere
    rather than an empty answer in one place and an error in another."""
    groups: list[str] = []
    for site in dict.fromkeys(sites):
        df = SITE_CACHE_GROUPS.run(store, sites=[str(site)])
        if not len(df):
            raise UnknownName("site", str(site), [str(s) for s in SITES.run(store)["site"]])
        groups += [str(g) for g in df["cache_group"] if g not in groups]
    return groups


def cache_split(store: "Store", start: dt.datetime, end: dt.datetime, site: str) -> "pd.DataFrame":
    """One shared cache (group `site`) against one per server (groups `site/…`) at equal total size."""
    return CACHE_SPLIT.run(store, start=utc(start), end=utc(end), site=site)


def alerts(store: "Store", start: dt.datetime, end: dt.datetime, state: str | None = None, *,
           cache_groups: Sequence[str] = ()) -> "pd.DataFrame":
    """Alert transitions with ts in [start, end); `state`: 'firing' or 'resolved' (None: both)."""
    if state not in (None, "firing", "resolved"):
        raise ValueError(f"alert state {state!r}: firing or resolved")
    return ALERTS.run(store, start=utc(start), end=utc(end), states=[] if state is None else [state],
                      **_lists(cache_groups=cache_groups))


def alert_spans(store: "Store", start: dt.datetime, end: dt.datetime, *,
                cache_groups: Sequence[str] = ()) -> "pd.DataFrame":
    return ALERT_SPANS.run(store, start=utc(start), end=utc(end), **_lists(cache_groups=cache_groups))


#: every named query, for tests and the dashboards generator
#: (ALERTS is not listed: its table exists only once the alerting component created it)
ALL: tuple[NamedQuery, ...] = (*EFFICIENCY_SERIES.values(), *EFFICIENCY_TOTALS.values(), *RESIDENCE_SERIES.values(),
                               *EFFICIENCY_ROWS.values(), *EFFICIENCY_ROW_NAMES.values(), *TABLE_VERSION.values(), MRC, OBSERVED_SERIES,
                               OBSERVED_SERVERS, WHATIF_ACCESSES, WHATIF_FEED, WHATIF_SERVERS, WHATIF_SCOPE, ACCESS_COUNT, CACHE_GROUPS, LIVE_CONFIGS, TIME_SPAN,
                               PIPELINE_HEALTH, PARSE_HEALTH, CONSUMER_LAG, ALERTS, ALERT_SPANS, ALERTS_FIRING_SERIES,
                               EFFICIENCY_VS_BASELINE, BEST_POLICY, READ_VOLUME, CACHE_SPLIT, WINDOW_COMPLETENESS, SITES, SITE_CACHE_GROUPS,
                               SERIES_SCOPE, KNOWN_CACHE_GROUPS, KNOWN_TIERS,
                               POLICIES, SIZES, TIERS)
