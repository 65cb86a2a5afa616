"""Hour and day windows written by the processing core, replacing the materialized-view rollups.

The maxMap rollups of 0003 re-aggregated every insert and could disagree with `efficiency FINAL`
when a window was written twice in different versions; they were also 60% of the embedded
replay's time. The core now closes hour and day windows itself, from the same counters as its
minute windows, and writes them as plain rows: `efficiency_hourly` and `efficiency_daily` have
the columns, engine and key of `efficiency` (created AS it), so every resolution is read the
same way (FINAL, sum over shards) and a replay rewrites identical rows.

Existing stores: the views and old tables are dropped and the new tables filled from
`efficiency FINAL` (re-runnable: the rows are deterministic and the tables replace duplicates).
"""

ROLLUPS = {"efficiency_hourly": "toStartOfHour(window_start)", "efficiency_daily": "toStartOfDay(window_start)"}
LENGTH = {"efficiency_hourly": "INTERVAL 1 HOUR", "efficiency_daily": "INTERVAL 1 DAY"}


def forward(store, values) -> None:
    db = values["database"]

    def columns(table: str) -> set[str]:
        return set(store.query("SELECT name FROM system.columns WHERE database = {db:String} AND table = {t:String}",
                               {"db": db, "t": table}).column("name"))

    for view in ("efficiency_hourly_v", "efficiency_daily_v", "efficiency_hourly_mv", "efficiency_daily_mv"):
        store.command(f"DROP TABLE IF EXISTS {db}.{view}")
    for table, period in ROLLUPS.items():
        if "counters" in columns(table):  # the 0003 AggregatingMergeTree: derivable, so dropped
            store.command(f"DROP TABLE {db}.{table}")
        fresh = not columns(table)
        store.command(f"CREATE TABLE IF NOT EXISTS {db}.{table} AS {db}.efficiency")
        if fresh:
            store.command(
                f"INSERT INTO {db}.{table} SELECT {period} AS ws, ws + {LENGTH[table]}, cache_group, policy, size_bytes, "
                "tier, max(sample_rate), max(partitions), shard, sum(requests), sum(hits), sum(bytes_requested), "
                "sum(bytes_hit), sum(bytes_filled), sum(evictions), sum(bytes_evicted) "
                f"FROM {db}.efficiency FINAL GROUP BY ws, cache_group, policy, size_bytes, tier, shard")
