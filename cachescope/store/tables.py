"""Names of the ClickHouse tables and views, one place for every component (PostHog style).

The DDL itself lives in deploy/clickhouse/migrations/ (numbered, applied by `cachescope migrate`).
"""

DEFAULT_DATABASE = "cachescope"

ACCESS_EVENTS = "access_events"
EFFICIENCY = "efficiency"
EFFICIENCY_HOURLY = "efficiency_hourly"  # AggregatingMergeTree, filled by efficiency_hourly_mv
EFFICIENCY_DAILY = "efficiency_daily"  # AggregatingMergeTree, filled by efficiency_daily_mv
EFFICIENCY_HOURLY_MV = "efficiency_hourly_mv"
EFFICIENCY_DAILY_MV = "efficiency_daily_mv"
EFFICIENCY_HOURLY_VIEW = "efficiency_hourly_v"  # finalised rollup: plain counters and ratios
EFFICIENCY_DAILY_VIEW = "efficiency_daily_v"
MRC = "mrc"
OBSERVED = "observed"
PIPELINE_HEALTH = "pipeline_health"
SCHEMA_MIGRATIONS = "schema_migrations"

#: tables a component writes rows into
DATA_TABLES = (ACCESS_EVENTS, EFFICIENCY, MRC, OBSERVED, PIPELINE_HEALTH)
