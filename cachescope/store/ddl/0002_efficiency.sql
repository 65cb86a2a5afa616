-- Shadow-cache counters per closed window: one row per (window, cache_group, policy, size, tier).
-- Counters are raw (of the sampled stream when sample_rate < 1); ratios are computed by readers.
--
-- ORDER BY (cache_group, policy, size_bytes, tier, window_start, shard)
--   * dashboards filter one cache_group and a time range, and plot a few (policy, size) series
--     by tier: each series is one contiguous, time-ordered range of the key;
--   * the key is the row's identity: the processing core emits deterministic rows, so a replay
--     re-inserts identical rows and ReplacingMergeTree keeps one (FINAL for exact reads);
--   * shard: a cache group spread over several keyed sub-streams (pipeline.shards) writes one
--     row per shard, each for sub-caches of size_bytes/shards; readers sum over shards.
-- PARTITION BY month: small parts count; time filters still prune by month.
CREATE TABLE IF NOT EXISTS {database}.efficiency
(
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cache_group LowCardinality(String),
    policy LowCardinality(String),
    size_bytes UInt64,
    tier LowCardinality(String),
    sample_rate Float64,
    partitions UInt32,
    shard UInt16 DEFAULT 0,
    requests UInt64,
    hits UInt64,
    bytes_requested UInt64,
    bytes_hit UInt64,
    bytes_filled UInt64,
    evictions UInt64,
    bytes_evicted UInt64
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
ORDER BY (cache_group, policy, size_bytes, tier, window_start, shard);
