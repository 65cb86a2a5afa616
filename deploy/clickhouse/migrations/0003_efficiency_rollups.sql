-- Hourly and daily rollups of `efficiency`, kept correct when a window row arrives twice.
--
-- A materialized view sees every inserted block, duplicates included (ReplacingMergeTree only
-- collapses them later, in `efficiency` itself). So a rollup cannot sum: it stores each counter as
-- a maxMap state keyed by (window_start, shard). Two copies of a window carry the same value, max
-- keeps one, and the total is arraySum over the windows (and over the shards a cache group is
-- spread over, see ARCHITECTURE.md): `arraySum(maxMapMerge(<c>_by_window).2)`.
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
    requests_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    hits_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    bytes_requested_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    bytes_hit_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    bytes_filled_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    evictions_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    bytes_evicted_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64))
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
    maxMapState([(window_start, shard)], [requests]) AS requests_by_window,
    maxMapState([(window_start, shard)], [hits]) AS hits_by_window,
    maxMapState([(window_start, shard)], [bytes_requested]) AS bytes_requested_by_window,
    maxMapState([(window_start, shard)], [bytes_hit]) AS bytes_hit_by_window,
    maxMapState([(window_start, shard)], [bytes_filled]) AS bytes_filled_by_window,
    maxMapState([(window_start, shard)], [evictions]) AS evictions_by_window,
    maxMapState([(window_start, shard)], [bytes_evicted]) AS bytes_evicted_by_window
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
    max(sample_rate) AS sample_rate,
    max(partitions) AS partitions,
    length(arrayDistinct(arrayMap(k -> k.1, maxMapMerge(requests_by_window).1))) AS windows,
    arraySum(maxMapMerge(requests_by_window).2) AS requests,
    arraySum(maxMapMerge(hits_by_window).2) AS hits,
    arraySum(maxMapMerge(bytes_requested_by_window).2) AS bytes_requested,
    arraySum(maxMapMerge(bytes_hit_by_window).2) AS bytes_hit,
    arraySum(maxMapMerge(bytes_filled_by_window).2) AS bytes_filled,
    arraySum(maxMapMerge(evictions_by_window).2) AS evictions,
    arraySum(maxMapMerge(bytes_evicted_by_window).2) AS bytes_evicted,
    if(requests = 0, nan, hits / requests) AS hit_ratio,
    if(bytes_requested = 0, nan, bytes_hit / bytes_requested) AS byte_hit_ratio
FROM {database}.efficiency_hourly
GROUP BY hour, cache_group, policy, size_bytes, tier;

CREATE TABLE IF NOT EXISTS {database}.efficiency_daily
(
    day DateTime('UTC'),
    cache_group LowCardinality(String),
    policy LowCardinality(String),
    size_bytes UInt64,
    tier LowCardinality(String),
    sample_rate SimpleAggregateFunction(max, Float64),
    partitions SimpleAggregateFunction(max, UInt32),
    requests_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    hits_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    bytes_requested_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    bytes_hit_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    bytes_filled_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    evictions_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64)),
    bytes_evicted_by_window AggregateFunction(maxMap, Array(Tuple(DateTime('UTC'), UInt16)), Array(UInt64))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (cache_group, policy, size_bytes, tier, day);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.efficiency_daily_mv TO {database}.efficiency_daily AS
SELECT
    toStartOfDay(window_start) AS day,
    cache_group,
    policy,
    size_bytes,
    tier,
    max(sample_rate) AS sample_rate,
    max(partitions) AS partitions,
    maxMapState([(window_start, shard)], [requests]) AS requests_by_window,
    maxMapState([(window_start, shard)], [hits]) AS hits_by_window,
    maxMapState([(window_start, shard)], [bytes_requested]) AS bytes_requested_by_window,
    maxMapState([(window_start, shard)], [bytes_hit]) AS bytes_hit_by_window,
    maxMapState([(window_start, shard)], [bytes_filled]) AS bytes_filled_by_window,
    maxMapState([(window_start, shard)], [evictions]) AS evictions_by_window,
    maxMapState([(window_start, shard)], [bytes_evicted]) AS bytes_evicted_by_window
FROM {database}.efficiency
GROUP BY day, cache_group, policy, size_bytes, tier;

-- finished rollup: one row per (day, cache_group, policy, size_bytes, tier)
CREATE VIEW IF NOT EXISTS {database}.efficiency_daily_v AS
SELECT
    day,
    cache_group,
    policy,
    size_bytes,
    tier,
    max(sample_rate) AS sample_rate,
    max(partitions) AS partitions,
    length(arrayDistinct(arrayMap(k -> k.1, maxMapMerge(requests_by_window).1))) AS windows,
    arraySum(maxMapMerge(requests_by_window).2) AS requests,
    arraySum(maxMapMerge(hits_by_window).2) AS hits,
    arraySum(maxMapMerge(bytes_requested_by_window).2) AS bytes_requested,
    arraySum(maxMapMerge(bytes_hit_by_window).2) AS bytes_hit,
    arraySum(maxMapMerge(bytes_filled_by_window).2) AS bytes_filled,
    arraySum(maxMapMerge(evictions_by_window).2) AS evictions,
    arraySum(maxMapMerge(bytes_evicted_by_window).2) AS bytes_evicted,
    if(requests = 0, nan, hits / requests) AS hit_ratio,
    if(bytes_requested = 0, nan, bytes_hit / bytes_requested) AS byte_hit_ratio
FROM {database}.efficiency_daily
GROUP BY day, cache_group, policy, size_bytes, tier;
