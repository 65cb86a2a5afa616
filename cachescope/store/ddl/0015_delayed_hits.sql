-- How long each access lasted (AccessEvent.duration_us, µs; NULL when the record does not say:
-- XrdPfc's detach_t − attach_t): the `xcache` model's fetch times, so what-if replays see them.
-- Delayed hits of the shadow caches (the engine's `delayed_hits`, `bytes_delayed`;
-- simcore/src/stats.rs): reads that fetched nothing but found some of their blocks still in
-- flight from the origin (`xcache` with fetch times), and the bytes of reads that were in flight.
-- Neither hits nor misses: hit efficiency stays hits / requests. Sums, like every counter, so
-- shards, runs and hour/day windows add up. Rows written before this migration read 0.
ALTER TABLE {database}.access_events ADD COLUMN IF NOT EXISTS duration_us Nullable(UInt64) AFTER seq;
ALTER TABLE {database}.efficiency
    ADD COLUMN IF NOT EXISTS delayed_hits UInt64 DEFAULT 0 AFTER age_reads,
    ADD COLUMN IF NOT EXISTS bytes_delayed UInt64 DEFAULT 0 AFTER delayed_hits;
ALTER TABLE {database}.efficiency_hourly
    ADD COLUMN IF NOT EXISTS delayed_hits UInt64 DEFAULT 0 AFTER age_reads,
    ADD COLUMN IF NOT EXISTS bytes_delayed UInt64 DEFAULT 0 AFTER delayed_hits;
ALTER TABLE {database}.efficiency_daily
    ADD COLUMN IF NOT EXISTS delayed_hits UInt64 DEFAULT 0 AFTER age_reads,
    ADD COLUMN IF NOT EXISTS bytes_delayed UInt64 DEFAULT 0 AFTER delayed_hits
