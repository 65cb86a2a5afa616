-- Miss-ratio curve snapshots: per (window, cache_group, tier), hits at each capacity of the grid.
-- Float64 counters: the curve is estimated from a sample (SHARDS) and scaled by 1/sample_rate.
--
-- ORDER BY (cache_group, tier, window_start, capacity_bytes, shard): a curve is read for one group
-- (a tier or all) over a time range; one window's whole curve is contiguous, by capacity.
-- ReplacingMergeTree on that key: a replay writes identical snapshots again.
CREATE TABLE IF NOT EXISTS {database}.mrc
(
    window_start DateTime('UTC'),
    cache_group LowCardinality(String),
    tier LowCardinality(String),
    capacity_bytes UInt64,
    requests Float64,
    hits Float64,
    bytes_requested Float64,
    bytes_hit Float64,
    sample_rate Float64,
    shard UInt16 DEFAULT 0
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
ORDER BY (cache_group, tier, window_start, capacity_bytes, shard);
