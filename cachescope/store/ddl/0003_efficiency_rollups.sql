-- Hourly and daily rollups of `efficiency`, kept correct when a window row arrives twice.
--
-- A materialized view sees every inserted block, duplicates included (ReplacingMergeTree only
-- collapses them later, in `efficiency` itself). So a rollup cannot sum: it keeps the counters
-- as one maxMap state keyed by window and shard (window_start in Unix seconds · 65536 + shard).
-- Two copies of a window carry the same values, max keeps one, and a total is arraySum over the
-- windows (and over the shards a cache group is spread over): `arraySum(maxMapMerge(counters).2)`
-- for requests, .3 hits, … in the column order of `efficiency`. One state with seven value
-- arrays over an integer key costs one map lookup per row: about 6× faster to insert than a
-- state per counter keyed by (DateTime, shard) (measured on chDB, BENCHMARKS.md).
-- The daily rollup is fed from the hourly one (states merged per day), not from every window.
-- The views efficiency_hourly_v / efficiency_daily_v give finished numbers (README: queries).
-- A window belongs to the hour/day its window_start falls in.
--
-- ORDER BY (cache_group, policy, size_bytes, tier, <period>): as `efficiency`, for the
-- same dashboard reads over longer ranges.

CREATE TABLE IF NOT EXISTS {database}.efficiency_hourly
(
    hour DateTime('UTC'),
    cache_group LowCardinality(String),
    policy LowCardinality(String),
    size_bytes UInt64,
    tier LowCardinality(String),
    sample_rate SimpleAggregateFunction(max, Float64),
    partitions SimpleAggregateFunction(max, UInt32),
    -- (window·shard keys, then the counters in the order of `efficiency`)
    counters AggregateFunction(maxMap, Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (cache_group, policy, size_bytes, tier, hour);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.efficiency_hourly_mv TO {database}.efficiency_hourly AS
SELECT
    toStartOfHour(window_start) AS hour,
    cache_group,
    policy,
    size_bytes,
    tier,
    max(sample_rate) AS sample_rate,
    max(partitions) AS partitions,
    maxMapState([toUInt64(toUnixTimestamp(window_start)) * 65536 + shard], [requests], [hits], [bytes_requested], [bytes_hit], [bytes_filled], [evictions], [bytes_evicted]) AS counters
FROM {database}.efficiency
GROUP BY hour, cache_group, policy, size_bytes, tier;

-- finished rollup: one row per (hour, cache_group, policy, size_bytes, tier)
CREATE VIEW IF NOT EXISTS {database}.efficiency_hourly_v AS
SELECT
    hour,
    cache_group,
    policy,
    size_bytes,
    tier,
    sample_rate,
    partitions,
    length(arrayDistinct(arrayMap(k -> intDiv(k, 65536), m.1))) AS windows,
    arraySum(m.2) AS requests,
    arraySum(m.3) AS hits,
    arraySum(m.4) AS bytes_requested,
    arraySum(m.5) AS bytes_hit,
    arraySum(m.6) AS bytes_filled,
    arraySum(m.7) AS evictions,
    arraySum(m.8) AS bytes_evicted,
    if(requests = 0, nan, hits / requests) AS hit_ratio,
    if(bytes_requested = 0, nan, bytes_hit / bytes_requested) AS byte_hit_ratio
FROM
(
    SELECT hour, cache_group, policy, size_bytes, tier, max(sample_rate) AS sample_rate,
           max(partitions) AS partitions, maxMapMerge(counters) AS m
    FROM {database}.efficiency_hourly
    GROUP BY hour, cache_group, policy, size_bytes, tier
);

CREATE TABLE IF NOT EXISTS {database}.efficiency_daily
(
    day DateTime('UTC'),
    cache_group LowCardinality(String),
    policy LowCardinality(String),
    size_bytes UInt64,
    tier LowCardinality(String),
    sample_rate SimpleAggregateFunction(max, Float64),
    partitions SimpleAggregateFunction(max, UInt32),
    -- (window·shard keys, then the counters in the order of `efficiency`)
    counters AggregateFunction(maxMap, Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (cache_group, policy, size_bytes, tier, day);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.efficiency_daily_mv TO {database}.efficiency_daily AS
SELECT
    toStartOfDay(hour) AS day,
    cache_group,
    policy,
    size_bytes,
    tier,
    max(sample_rate) AS sample_rate,
    max(partitions) AS partitions,
    maxMapMergeState(counters) AS counters
FROM {database}.efficiency_hourly
GROUP BY day, cache_group, policy, size_bytes, tier;

-- finished rollup: one row per (day, cache_group, policy, size_bytes, tier)
CREATE VIEW IF NOT EXISTS {database}.efficiency_daily_v AS
SELECT
    day,
    cache_group,
    policy,
    size_bytes,
    tier,
    sample_rate,
    partitions,
    length(arrayDistinct(arrayMap(k -> intDiv(k, 65536), m.1))) AS windows,
    arraySum(m.2) AS requests,
    arraySum(m.3) AS hits,
    arraySum(m.4) AS bytes_requested,
    arraySum(m.5) AS bytes_hit,
    arraySum(m.6) AS bytes_filled,
    arraySum(m.7) AS evictions,
    arraySum(m.8) AS bytes_evicted,
    if(requests = 0, nan, hits / requests) AS hit_ratio,
    if(bytes_requested = 0, nan, bytes_hit / bytes_requested) AS byte_hit_ratio
FROM
(
    SELECT day, cache_group, policy, size_bytes, tier, max(sample_rate) AS sample_rate,
           max(partitions) AS partitions, maxMapMerge(counters) AS m
    FROM {database}.efficiency_daily
    GROUP BY day, cache_group, policy, size_bytes, tier
);
