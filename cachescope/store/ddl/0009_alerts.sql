-- Alert transitions written by the processing core as windows close: one row when an alert of a
-- rule starts firing for a cache group, one when it resolves (cachescope/core/alerts.py).
--
-- ORDER BY (cache_group, rule, starts_at, state, shard): an alert is (cache group, rule, the
-- window its condition started in); its firing and resolved rows sit side by side, and a replay
-- (or a restore after a failure) rewrites identical rows that ReplacingMergeTree keeps once.
-- ts is the end of the window at which the state was reached (event time); fingerprint
-- identifies (rule, cache group) for Alertmanager.
CREATE TABLE IF NOT EXISTS {database}.alerts
(
    ts DateTime64(3, 'UTC'),
    rule LowCardinality(String),
    cache_group LowCardinality(String),
    state Enum8('firing' = 1, 'resolved' = 2),
    severity LowCardinality(String),
    kind LowCardinality(String),
    metric LowCardinality(String),
    policy LowCardinality(String),
    size_bytes UInt64,
    value Float64,
    threshold Float64,
    reference Float64,
    starts_at DateTime64(3, 'UTC'),
    summary String,
    fingerprint UInt64,
    shard UInt16 DEFAULT 0
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(starts_at)
ORDER BY (cache_group, rule, starts_at, state, shard);
