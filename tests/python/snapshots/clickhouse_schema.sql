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
    `counters` AggregateFunction(1, maxMap, Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64))
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
    `sample_rate` SimpleAggregateFunction(max, Float64),
    `partitions` SimpleAggregateFunction(max, UInt32),
    `counters` AggregateFunction(1, maxMap, Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64))
)
AS SELECT
    toStartOfDay(hour) AS day,
    cache_group,
    policy,
    size_bytes,
    tier,
    max(sample_rate) AS sample_rate,
    max(partitions) AS partitions,
    maxMapMergeState(counters) AS counters
FROM {database}.efficiency_hourly
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
    SELECT
        day,
        cache_group,
        policy,
        size_bytes,
        tier,
        max(sample_rate) AS sample_rate,
        max(partitions) AS partitions,
        maxMapMerge(counters) AS m
    FROM {database}.efficiency_daily
    GROUP BY
        day,
        cache_group,
        policy,
        size_bytes,
        tier
);

CREATE TABLE {database}.efficiency_hourly
(
    `hour` DateTime('UTC'),
    `cache_group` LowCardinality(String),
    `policy` LowCardinality(String),
    `size_bytes` UInt64,
    `tier` LowCardinality(String),
    `sample_rate` SimpleAggregateFunction(max, Float64),
    `partitions` SimpleAggregateFunction(max, UInt32),
    `counters` AggregateFunction(1, maxMap, Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64))
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
    `counters` AggregateFunction(1, maxMap, Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64), Array(UInt64))
)
AS SELECT
    toStartOfHour(window_start) AS hour,
    cache_group,
    policy,
    size_bytes,
    tier,
    max(sample_rate) AS sample_rate,
    max(partitions) AS partitions,
    maxMapState([(toUInt64(toUnixTimestamp(window_start)) * 65536) + shard], [requests], [hits], [bytes_requested], [bytes_hit], [bytes_filled], [evictions], [bytes_evicted]) AS counters
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
    SELECT
        hour,
        cache_group,
        policy,
        size_bytes,
        tier,
        max(sample_rate) AS sample_rate,
        max(partitions) AS partitions,
        maxMapMerge(counters) AS m
    FROM {database}.efficiency_hourly
    GROUP BY
        hour,
        cache_group,
        policy,
        size_bytes,
        tier
);

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
