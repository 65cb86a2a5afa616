-- Residence ages of the shadow caches (the engine's `evicted_age_s`, `resident_age_s`,
-- `age_reads`, in seconds; simcore/src/stats.rs): how long files stayed before they were
-- evicted (evicted_age_s / evictions) and the mean age of the files resident as the window's
-- reads found the cache (resident_age_s / age_reads), as a site's XCache monitoring shows it.
-- Sums, like every counter, so shards, runs and hour/day windows add up. Rows written before
-- this migration read 0 (no age known).
ALTER TABLE {database}.efficiency
    ADD COLUMN IF NOT EXISTS evicted_age_s UInt64 DEFAULT 0 AFTER bytes_evicted,
    ADD COLUMN IF NOT EXISTS resident_age_s UInt64 DEFAULT 0 AFTER evicted_age_s,
    ADD COLUMN IF NOT EXISTS age_reads UInt64 DEFAULT 0 AFTER resident_age_s;
ALTER TABLE {database}.efficiency_hourly
    ADD COLUMN IF NOT EXISTS evicted_age_s UInt64 DEFAULT 0 AFTER bytes_evicted,
    ADD COLUMN IF NOT EXISTS resident_age_s UInt64 DEFAULT 0 AFTER evicted_age_s,
    ADD COLUMN IF NOT EXISTS age_reads UInt64 DEFAULT 0 AFTER resident_age_s;
ALTER TABLE {database}.efficiency_daily
    ADD COLUMN IF NOT EXISTS evicted_age_s UInt64 DEFAULT 0 AFTER bytes_evicted,
    ADD COLUMN IF NOT EXISTS resident_age_s UInt64 DEFAULT 0 AFTER evicted_age_s,
    ADD COLUMN IF NOT EXISTS age_reads UInt64 DEFAULT 0 AFTER resident_age_s
