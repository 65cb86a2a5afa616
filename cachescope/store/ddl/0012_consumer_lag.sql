-- Kafka consumer lag: per consumer group, topic and partition, the offset the group committed
-- (the Flink job commits on each checkpoint) against the partition's end offset, sampled by the
-- pipeline monitor (runners/monitor.py) every few seconds. lag = end_offset - committed_offset
-- (committed -1: the group has committed nothing there, lag counted from the log start).
--
-- ORDER BY (consumer_group, topic, partition, ts): a panel reads one group's partitions over
-- recent time. Plain MergeTree with a TTL, like pipeline_health: samples are not replayed.
CREATE TABLE IF NOT EXISTS {database}.consumer_lag
(
    ts DateTime64(3, 'UTC'),
    consumer_group LowCardinality(String),
    topic LowCardinality(String),
    partition UInt32,
    committed_offset Int64,
    end_offset Int64,
    lag Int64
)
ENGINE = MergeTree
PARTITION BY toDate(ts)
ORDER BY (consumer_group, topic, partition, ts)
TTL toDateTime(ts) + INTERVAL {health_ttl_days} DAY
SETTINGS ttl_only_drop_parts = 1
