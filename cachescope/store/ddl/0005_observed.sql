-- The real cache's own numbers (XCache records' hit/miss/bypass bytes) per window, shown beside
-- the simulated efficiencies.
--
-- ORDER BY (cache_group, window_start, server, tier, shard): dashboards read one group over a time
-- range and group by server or tier; the key is the row's identity, so ReplacingMergeTree
-- collapses a replay's identical rows.
CREATE TABLE IF NOT EXISTS {database}.observed
(
    window_start DateTime('UTC'),
    cache_group LowCardinality(String),
    server LowCardinality(String),
    tier LowCardinality(String),
    accesses UInt64,
    bytes_read UInt64,
    hit_bytes UInt64,
    miss_bytes UInt64,
    bypass_bytes UInt64,
    shard UInt16 DEFAULT 0
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
ORDER BY (cache_group, window_start, server, tier, shard);
