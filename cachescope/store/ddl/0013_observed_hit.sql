-- The real cache's own verdict per access (AccessEvent.observed_hit): 1 when the cache fetched
-- nothing from the origin for it (XrdPfc's g-stream `remotes` empty; in 5.7+ also b_todisk and
-- b_prefetch 0), 0 when it did, NULL when the record does not say. XrdPfc counts a block another
-- read was already fetching as a hit byte, so "no miss bytes" overstates the real cache's hits
-- (xcache-lab: 306 of 327 cold reads with prefetch). From this migration on, `observed.hits`
-- counts the accesses with observed_hit = 1, and only accesses without a verdict by the older
-- byte rule (hit bytes, no miss or bypass bytes); rows written before keep the older rule.
ALTER TABLE {database}.access_events ADD COLUMN IF NOT EXISTS observed_hit Nullable(UInt8) AFTER observed_bypass_bytes
