-- The real cache's bytes from the origin (XRootD >= 5.7.2's file_close: b_todisk + b_bypass, prefetch
-- included) per access (AccessEvent.observed_origin_bytes; NULL when the record has no b_todisk), and
-- per window what follows from them in `observed`: over the accesses whose record carries them, their
-- count, bytes read, bytes from the origin (the real cache's WAN bytes) and bytes served from the cache
-- (exact: a hit's bytes read, a miss's bytes read - min(bytes read, origin bytes)) with their b_hit; over
-- the others, the bytes read of their hits (the lower bound of what they took from the cache; b_hit is
-- the upper one). Rows written before this migration read 0: their lower bound is 0, their upper b_hit.
ALTER TABLE {database}.access_events ADD COLUMN IF NOT EXISTS observed_origin_bytes Nullable(UInt64) AFTER observed_hit;
ALTER TABLE {database}.observed ADD COLUMN IF NOT EXISTS origin_accesses UInt64 DEFAULT 0 AFTER hits;
ALTER TABLE {database}.observed ADD COLUMN IF NOT EXISTS origin_bytes_read UInt64 DEFAULT 0 AFTER origin_accesses;
ALTER TABLE {database}.observed ADD COLUMN IF NOT EXISTS origin_bytes UInt64 DEFAULT 0 AFTER origin_bytes_read;
ALTER TABLE {database}.observed ADD COLUMN IF NOT EXISTS origin_cache_bytes UInt64 DEFAULT 0 AFTER origin_bytes;
ALTER TABLE {database}.observed ADD COLUMN IF NOT EXISTS origin_hit_bytes UInt64 DEFAULT 0 AFTER origin_cache_bytes;
ALTER TABLE {database}.observed ADD COLUMN IF NOT EXISTS verdict_hit_bytes UInt64 DEFAULT 0 AFTER origin_hit_bytes;
-- the accesses without origin bytes whose record states the cache's verdict (5.5's `remotes`): where the
-- real-versus-shadow alert compares hit efficiencies, b_hit overstating the transfer efficiency with prefetch
ALTER TABLE {database}.observed ADD COLUMN IF NOT EXISTS verdict_accesses UInt64 DEFAULT 0 AFTER verdict_hit_bytes
