-- Pipeline health samples: consumer lag, late events, rejects by reason, throughput, …
-- (metric names are the writers'; a reason or partition goes into the metric name).
--
-- ORDER BY (component, metric, cache_group, ts): a health panel or alert reads one metric of
-- one component over recent time, per group. Plain MergeTree: samples are not replayed.
CREATE TABLE IF NOT EXISTS {database}.pipeline_health
(
    ts DateTime64(3, 'UTC'),
    component LowCardinality(String),
    cache_group LowCardinality(String),
    metric LowCardinality(String),
    value Float64
)
ENGINE = MergeTree
PARTITION BY toDate(ts)
ORDER BY (component, metric, cache_group, ts)
TTL toDateTime(ts) + INTERVAL {health_ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1;
