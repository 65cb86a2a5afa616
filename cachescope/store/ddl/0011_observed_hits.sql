-- The real cache's hit count: XCache's records (pfc g-stream file-close, cinfo access stats)
-- carry per access the bytes served from its disk (b_hit), fetched from the origin and cached
-- (b_miss) and read past the cache (b_bypass). An access with hit bytes and neither miss nor
-- bypass bytes was served wholly from the cache: the engine's definition of a hit, so
-- hits / accesses is the real cache's hit efficiency beside the shadows'. Rows written before
-- this migration read 0.
ALTER TABLE {database}.observed ADD COLUMN IF NOT EXISTS hits UInt64 DEFAULT 0 AFTER bypass_bytes
