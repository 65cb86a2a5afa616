CREATE TABLE {database}.access_events
(
    `ts` DateTime64(6, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
    `site` LowCardinality(String),
    `source` LowCardinality(String),
    `server` LowCardinality(String),
    `client` LowCardinality(String),
    `vo` LowCardinality(String),
    `path` String CODEC(ZSTD(1)),
    `file_id` UInt64,
    `file_size` UInt64,
    `bytes_read` UInt64,
    `op` Enum8('read' = 0, 'write' = 1, 'delete' = 2),
    `tier` LowCardinality(String),
    `cache_group` LowCardinality(String),
    `observed_hit_bytes` Nullable(UInt64),
    `observed_miss_bytes` Nullable(UInt64),
    `observed_bypass_bytes` Nullable(UInt64),
    `seq` UInt64 CODEC(Delta(8), ZSTD(1))
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(ts)
ORDER BY (cache_group, ts, seq, source)
TTL toDateTime(ts) + toIntervalDay(90)
SETTINGS ttl_only_drop_parts = 1, index_granularity = 8192;

CREATE TABLE {database}.efficiency
(
    `window_start` DateTime('UTC'),
    `window_end` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `policy` LowCardinality(String),
    `size_bytes` UInt64,
    `tier` LowCardinality(String),
    `sample_rate` Float64,
    `partitions` UInt32,
    `shard` UInt16 DEFAULT 0,
    `requests` UInt64,
    `hits` UInt64,
    `bytes_requested` UInt64,
    `bytes_hit` UInt64,
    `bytes_filled` UInt64,
    `evictions` UInt64,
    `bytes_evicted` UInt64
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
ORDER BY (cache_group, policy, size_bytes, tier, window_start, shard)
SETTINGS index_granularity = 8192;

CREATE TABLE {database}.efficiency_daily
(
    `day` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `policy` LowCardinality(String),
    `size_bytes` UInt64,
    `tier` LowCardinality(String),
    `sample_rate` SimpleAggregateFunction(max, Float64),
    `partitions` SimpleAggregateFunction(max, UInt32),
    `requests_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `hits_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_requested_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_hit_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_filled_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `evictions_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_evicted_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (cache_group, policy, size_bytes, tier, day)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW {database}.efficiency_daily_mv TO {database}.efficiency_daily
(
    `day` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `policy` LowCardinality(String),
    `size_bytes` UInt64,
    `tier` LowCardinality(String),
    `sample_rate` Float64,
    `partitions` UInt32,
    `requests_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `hits_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_requested_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_hit_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_filled_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `evictions_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_evicted_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64))
)
AS SELECT
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
GROUP BY
    day,
    cache_group,
    policy,
    size_bytes,
    tier;

CREATE VIEW {database}.efficiency_daily_v
(
    `day` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `policy` LowCardinality(String),
    `size_bytes` UInt64,
    `tier` LowCardinality(String),
    `sample_rate` SimpleAggregateFunction(max, Float64),
    `partitions` SimpleAggregateFunction(max, UInt32),
    `windows` UInt64,
    `requests` UInt64,
    `hits` UInt64,
    `bytes_requested` UInt64,
    `bytes_hit` UInt64,
    `bytes_filled` UInt64,
    `evictions` UInt64,
    `bytes_evicted` UInt64,
    `hit_ratio` Float64,
    `byte_hit_ratio` Float64
)
AS SELECT
    day,
    cache_group,
    policy,
    size_bytes,
    tier,
    max(sample_rate) AS sample_rate,
    max(partitions) AS partitions,
    length(arrayDistinct(arrayMap(k -> (k.1), (maxMapMerge(requests_by_window)).1))) AS windows,
    arraySum((maxMapMerge(requests_by_window)).2) AS requests,
    arraySum((maxMapMerge(hits_by_window)).2) AS hits,
    arraySum((maxMapMerge(bytes_requested_by_window)).2) AS bytes_requested,
    arraySum((maxMapMerge(bytes_hit_by_window)).2) AS bytes_hit,
    arraySum((maxMapMerge(bytes_filled_by_window)).2) AS bytes_filled,
    arraySum((maxMapMerge(evictions_by_window)).2) AS evictions,
    arraySum((maxMapMerge(bytes_evicted_by_window)).2) AS bytes_evicted,
    if(requests = 0, nan, hits / requests) AS hit_ratio,
    if(bytes_requested = 0, nan, bytes_hit / bytes_requested) AS byte_hit_ratio
FROM {database}.efficiency_daily
GROUP BY
    day,
    cache_group,
    policy,
    size_bytes,
    tier;

CREATE TABLE {database}.efficiency_hourly
(
    `hour` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `policy` LowCardinality(String),
    `size_bytes` UInt64,
    `tier` LowCardinality(String),
    `sample_rate` SimpleAggregateFunction(max, Float64),
    `partitions` SimpleAggregateFunction(max, UInt32),
    `requests_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `hits_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_requested_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_hit_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_filled_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `evictions_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_evicted_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (cache_group, policy, size_bytes, tier, hour)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW {database}.efficiency_hourly_mv TO {database}.efficiency_hourly
(
    `hour` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `policy` LowCardinality(String),
    `size_bytes` UInt64,
    `tier` LowCardinality(String),
    `sample_rate` Float64,
    `partitions` UInt32,
    `requests_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `hits_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_requested_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_hit_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_filled_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `evictions_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64)),
    `bytes_evicted_by_window` AggregateFunction(1, maxMap, Array(Tuple(
        DateTime('UTC'),
        UInt16)), Array(UInt64))
)
AS SELECT
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
GROUP BY
    hour,
    cache_group,
    policy,
    size_bytes,
    tier;

CREATE VIEW {database}.efficiency_hourly_v
(
    `hour` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `policy` LowCardinality(String),
    `size_bytes` UInt64,
    `tier` LowCardinality(String),
    `sample_rate` SimpleAggregateFunction(max, Float64),
    `partitions` SimpleAggregateFunction(max, UInt32),
    `windows` UInt64,
    `requests` UInt64,
    `hits` UInt64,
    `bytes_requested` UInt64,
    `bytes_hit` UInt64,
    `bytes_filled` UInt64,
    `evictions` UInt64,
    `bytes_evicted` UInt64,
    `hit_ratio` Float64,
    `byte_hit_ratio` Float64
)
AS SELECT
    hour,
    cache_group,
    policy,
    size_bytes,
    tier,
    max(sample_rate) AS sample_rate,
    max(partitions) AS partitions,
    length(arrayDistinct(arrayMap(k -> (k.1), (maxMapMerge(requests_by_window)).1))) AS windows,
    arraySum((maxMapMerge(requests_by_window)).2) AS requests,
    arraySum((maxMapMerge(hits_by_window)).2) AS hits,
    arraySum((maxMapMerge(bytes_requested_by_window)).2) AS bytes_requested,
    arraySum((maxMapMerge(bytes_hit_by_window)).2) AS bytes_hit,
    arraySum((maxMapMerge(bytes_filled_by_window)).2) AS bytes_filled,
    arraySum((maxMapMerge(evictions_by_window)).2) AS evictions,
    arraySum((maxMapMerge(bytes_evicted_by_window)).2) AS bytes_evicted,
    if(requests = 0, nan, hits / requests) AS hit_ratio,
    if(bytes_requested = 0, nan, bytes_hit / bytes_requested) AS byte_hit_ratio
FROM {database}.efficiency_hourly
GROUP BY
    hour,
    cache_group,
    policy,
    size_bytes,
    tier;

CREATE TABLE {database}.mrc
(
    `window_start` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `tier` LowCardinality(String),
    `capacity_bytes` UInt64,
    `requests` Float64,
    `hits` Float64,
    `bytes_requested` Float64,
    `bytes_hit` Float64,
    `sample_rate` Float64,
    `shard` UInt16 DEFAULT 0
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
ORDER BY (cache_group, tier, window_start, capacity_bytes, shard)
SETTINGS index_granularity = 8192;

CREATE TABLE {database}.observed
(
    `window_start` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `server` LowCardinality(String),
    `tier` LowCardinality(String),
    `accesses` UInt64,
    `bytes_read` UInt64,
    `hit_bytes` UInt64,
    `miss_bytes` UInt64,
    `bypass_bytes` UInt64,
    `shard` UInt16 DEFAULT 0
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
ORDER BY (cache_group, window_start, server, tier, shard)
SETTINGS index_granularity = 8192;

CREATE TABLE {database}.pipeline_health
(
    `ts` DateTime64(3, 'UTC'),
    `component` LowCardinality(String),
    `cache_group` LowCardinality(String),
    `metric` LowCardinality(String),
    `value` Float64
)
ENGINE = MergeTree
PARTITION BY toDate(ts)
ORDER BY (component, metric, cache_group, ts)
TTL toDateTime(ts) + toIntervalDay(30)
SETTINGS ttl_only_drop_parts = 1, index_granularity = 8192;

CREATE TABLE {database}.schema_migrations
(
    `version` UInt32,
    `name` String,
    `checksum` String,
    `applied_at` DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY version
SETTINGS index_granularity = 8192;
