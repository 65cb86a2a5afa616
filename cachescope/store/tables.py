"""Names of the ClickHouse tables and views, one place for every component (PostHog style).

The DDL itself lives in cachescope/store/ddl/ (numbered migrations, applied by `cachescope migrate`).
"""

DEFAULT_DATABASE = "cachescope"

ACCESS_EVENTS = "access_events"
EFFICIENCY = "efficiency"  # the configured window (1 min by default)
# hour and day windows, emitted by the processing core itself (columns and key as `efficiency`)
EFFICIENCY_HOURLY = "efficiency_hourly"
EFFICIENCY_DAILY = "efficiency_daily"
#: the processing core's rollup names (cachescope.core.rollups.ROLLUPS) → their tables
EFFICIENCY_ROLLUPS = {"hourly": EFFICIENCY_HOURLY, "daily": EFFICIENCY_DAILY}
MRC = "mrc"
OBSERVED = "observed"
PIPELINE_HEALTH = "pipeline_health"
ALERTS = "alerts"  # firing / resolved transitions of the alert rules, written by the core
CONSUMER_LAG = "consumer_lag"  # Kafka consumer-group lag per partition, from the pipeline monitor
SCHEMA_MIGRATIONS = "schema_migrations"

#: tables a component writes rows into
DATA_TABLES = (ACCESS_EVENTS, EFFICIENCY, EFFICIENCY_HOURLY, EFFICIENCY_DAILY, MRC, OBSERVED, PIPELINE_HEALTH, ALERTS,
               CONSUMER_LAG)
#: plain MergeTree tables of samples (not replayed, not deduplicated: no FINAL)
SAMPLE_TABLES = (PIPELINE_HEALTH, CONSUMER_LAG)
