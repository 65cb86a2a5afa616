-- Every AccessEvent (the contract in DESIGN.md): one row per file access.
--
-- ORDER BY (cache_group, ts, seq, source)
--   * dashboards filter by cache_group and a time range: that is the key's prefix;
--   * the API's what-if reads one group's accesses over [from, to) in (ts, seq) order: a
--     contiguous range of the key, already in that order (read in order, no sort);
--   * the whole key identifies an event (seq is unique per source), so ReplacingMergeTree
--     collapses the second copy that a replay after a failure writes. Readers that must not
--     see a not-yet-merged copy use FINAL (cheap: duplicates share a day partition).
-- PARTITION BY day: the TTL drops whole days (ttl_only_drop_parts) instead of rewriting parts.
-- {events_ttl}: `TTL toDateTime(ts) + INTERVAL N DAY`, or nothing when the events are kept
-- (`cachescope migrate --events-ttl-days 0`, the embedded store's default for replayed old logs).
CREATE TABLE IF NOT EXISTS {database}.access_events
(
    ts DateTime64(6, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
    site LowCardinality(String),
    source LowCardinality(String),
    server LowCardinality(String),
    client LowCardinality(String),
    vo LowCardinality(String),
    path String CODEC(ZSTD(1)),
    file_id UInt64,
    file_size UInt64,
    bytes_read UInt64,
    op Enum8('read' = 0, 'write' = 1, 'delete' = 2),
    tier LowCardinality(String),
    cache_group LowCardinality(String),
    observed_hit_bytes Nullable(UInt64),
    observed_miss_bytes Nullable(UInt64),
    observed_bypass_bytes Nullable(UInt64),
    seq UInt64 CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(ts)
ORDER BY (cache_group, ts, seq, source)
{events_ttl}
SETTINGS ttl_only_drop_parts = 1;
