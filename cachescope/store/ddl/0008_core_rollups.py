"""Hour and day windows written by the processing core, replacing the materialized-view rollups.

The maxMap rollups of 0003 re-aggregated every insert and could disagree with `efficiency FINAL`
when a window was written twice in different versions; they were also 60% of the embedded
replay's time. The core now closes hour and day windows itself, from the same counters as its
minute windows, and writes them as plain rows: `efficiency_hourly` and `efficiency_daily` have
the columns, engine and key of `efficiency` (created AS it), so every resolution is read the
same way (FINAL, sum over shards) and a replay rewrites identical rows.

Every row also carries `run`: the id of the processing run that wrote it (a hash of the first
event a cold-started cache-group state saw; kept in the state, so a restore after a failure
rewrites identical rows, which collapse). Two different runs over one window — a replay split in
two, a fresh start after retention — hold disjoint events, so their rows are both kept and every
reader sums over `run` as over `shard`: minute, hour and day reads then agree.

Existing stores: `run` (0 for old rows) joins the keys of efficiency, mrc and observed; the
views and old rollup tables are dropped and the new tables filled from `efficiency FINAL`
(re-runnable: the rows are deterministic and the tables replace duplicates).
"""

#: the keys of 0002/0004/0005, to which `run` is appended
KEYS = {
    "efficiency": "cache_group, policy, size_bytes, tier, window_start, shard",
    "mrc": "cache_group, tier, window_start, capacity_bytes, shard",
    "observed": "cache_group, window_start, server, tier, shard",
}
ROLLUPS = {"efficiency_hourly": "toStartOfHour(window_start)", "efficiency_daily": "toStartOfDay(window_start)"}
LENGTH = {"efficiency_hourly": "INTERVAL 1 HOUR", "efficiency_daily": "INTERVAL 1 DAY"}


def forward(store, values) -> None:
    db = values["database"]

    def columns(table: str) -> set[str]:
        return set(store.query("SELECT name FROM system.columns WHERE database = {db:String} AND table = {t:String}",
                               {"db": db, "t": table}).column("name"))

    for table, key in KEYS.items():
        if "run" not in columns(table):
            store.command(f"ALTER TABLE {db}.{table} ADD COLUMN run UInt64 AFTER shard, "
                          f"MODIFY ORDER BY ({key}, run)")
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
                "tier, max(sample_rate), max(partitions), shard, run, sum(requests), sum(hits), sum(bytes_requested), "
                "sum(bytes_hit), sum(bytes_filled), sum(evictions), sum(bytes_evicted) "
                f"FROM {db}.efficiency FINAL GROUP BY ws, cache_group, policy, size_bytes, tier, shard, run")
