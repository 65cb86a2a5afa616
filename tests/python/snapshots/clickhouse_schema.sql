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
    `observed_hit` Nullable(UInt8),
    `observed_origin_bytes` Nullable(UInt64),
    `origin` LowCardinality(String),
    `seq` UInt64 CODEC(Delta(8), ZSTD(1)),
    `duration_us` Nullable(UInt64)
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(ts)
ORDER BY (cache_group, ts, origin, seq)
TTL toDateTime(ts) + toIntervalDay(90)
SETTINGS ttl_only_drop_parts = 1, index_granularity = 8192;

CREATE TABLE {database}.alerts
(
    `ts` DateTime64(3, 'UTC'),
    `rule` LowCardinality(String),
    `cache_group` LowCardinality(String),
    `state` Enum8('firing' = 1, 'resolved' = 2),
    `severity` LowCardinality(String),
    `kind` LowCardinality(String),
    `metric` LowCardinality(String),
    `policy` LowCardinality(String),
    `size_bytes` UInt64,
    `value` Float64,
    `threshold` Float64,
    `reference` Float64,
    `starts_at` DateTime64(3, 'UTC'),
    `summary` String,
    `fingerprint` UInt64,
    `shard` UInt16 DEFAULT 0
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(starts_at)
ORDER BY (cache_group, rule, starts_at, state, shard)
SETTINGS index_granularity = 8192;

CREATE TABLE {database}.consumer_lag
(
    `ts` DateTime64(3, 'UTC'),
    `consumer_group` LowCardinality(String),
    `topic` LowCardinality(String),
    `partition` UInt32,
    `committed_offset` Int64,
    `end_offset` Int64,
    `lag` Int64
)
ENGINE = MergeTree
PARTITION BY toDate(ts)
ORDER BY (consumer_group, topic, partition, ts)
TTL toDateTime(ts) + toIntervalDay(30)
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
    `run` UInt64,
    `requests` UInt64,
    `hits` UInt64,
    `bytes_requested` UInt64,
    `bytes_hit` UInt64,
    `bytes_filled` UInt64,
    `evictions` UInt64,
    `bytes_evicted` UInt64,
    `evicted_age_s` UInt64 DEFAULT 0,
    `resident_age_s` UInt64 DEFAULT 0,
    `age_reads` UInt64 DEFAULT 0,
    `delayed_hits` UInt64 DEFAULT 0,
    `bytes_delayed` UInt64 DEFAULT 0
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
PRIMARY KEY (cache_group, policy, size_bytes, tier, window_start, shard)
ORDER BY (cache_group, policy, size_bytes, tier, window_start, shard, run)
SETTINGS index_granularity = 8192;

CREATE TABLE {database}.efficiency_daily
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
    `run` UInt64,
    `requests` UInt64,
    `hits` UInt64,
    `bytes_requested` UInt64,
    `bytes_hit` UInt64,
    `bytes_filled` UInt64,
    `evictions` UInt64,
    `bytes_evicted` UInt64,
    `evicted_age_s` UInt64 DEFAULT 0,
    `resident_age_s` UInt64 DEFAULT 0,
    `age_reads` UInt64 DEFAULT 0,
    `delayed_hits` UInt64 DEFAULT 0,
    `bytes_delayed` UInt64 DEFAULT 0
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
PRIMARY KEY (cache_group, policy, size_bytes, tier, window_start, shard)
ORDER BY (cache_group, policy, size_bytes, tier, window_start, shard, run)
SETTINGS index_granularity = 8192;

CREATE TABLE {database}.efficiency_hourly
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
    `run` UInt64,
    `requests` UInt64,
    `hits` UInt64,
    `bytes_requested` UInt64,
    `bytes_hit` UInt64,
    `bytes_filled` UInt64,
    `evictions` UInt64,
    `bytes_evicted` UInt64,
    `evicted_age_s` UInt64 DEFAULT 0,
    `resident_age_s` UInt64 DEFAULT 0,
    `age_reads` UInt64 DEFAULT 0,
    `delayed_hits` UInt64 DEFAULT 0,
    `bytes_delayed` UInt64 DEFAULT 0
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
PRIMARY KEY (cache_group, policy, size_bytes, tier, window_start, shard)
ORDER BY (cache_group, policy, size_bytes, tier, window_start, shard, run)
SETTINGS index_granularity = 8192;

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
    `shard` UInt16 DEFAULT 0,
    `run` UInt64
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
PRIMARY KEY (cache_group, tier, window_start, capacity_bytes, shard)
ORDER BY (cache_group, tier, window_start, capacity_bytes, shard, run)
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
    `hits` UInt64 DEFAULT 0,
    `origin_accesses` UInt64 DEFAULT 0,
    `origin_bytes_read` UInt64 DEFAULT 0,
    `origin_bytes` UInt64 DEFAULT 0,
    `origin_cache_bytes` UInt64 DEFAULT 0,
    `origin_hit_bytes` UInt64 DEFAULT 0,
    `verdict_hit_bytes` UInt64 DEFAULT 0,
    `verdict_accesses` UInt64 DEFAULT 0,
    `shard` UInt16 DEFAULT 0,
    `run` UInt64
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(window_start)
PRIMARY KEY (cache_group, window_start, server, tier, shard)
ORDER BY (cache_group, window_start, server, tier, shard, run)
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
