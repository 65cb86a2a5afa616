//! XCache: a model of XRootD's proxy file cache (XrdPfc), the cache behind ATLAS and CMS
//! XCache deployments.
//!
//! XrdPfc is not a paper policy; its behaviour is read from XRootD's `src/XrdPfc` (XrdPfcFile,
//! XrdPfcInfo, XrdPfcPurge / ResourceMonitor) and its monitoring records (the `.cinfo` block
//! bitmap, g-stream `file_close` records with `blk_size`, `n_blks`, `n_blks_done`, `b_hit`,
//! `b_miss`). Two mechanisms matter for hit rates:
//!
//! - **Blocks.** A proxied file is stored as a sparse local file plus a `.cinfo` bitmap of
//!   fixed-size blocks (`pfc.blocksize`, 1 MiB in the ATLAS records); only blocks that clients
//!   actually read are fetched and kept. A file's cached bytes are its downloaded blocks (the
//!   last block of a file is only the file's remainder).
//! - **Purge.** A background task compares disk usage with a high watermark and, above it,
//!   removes whole files (data and `.cinfo`) in order of oldest last access (the cinfo's latest
//!   detach time) until usage is down to the low watermark (`pfc.diskusage low high`); files
//!   that are open (active) are skipped.
//!
//! # The model
//! Parameters: `block_size` (bytes, default 1048576), `high_watermark` (fraction of the
//! capacity, default 0.95), `low_watermark` (default 0.90, ≤ high). With `B = block_size`,
//! `hwm = ⌊c · high_watermark⌋`, `lwm = ⌊c · low_watermark⌋`:
//! - Offsets are not in the logs, so a read of `bytes_read` bytes is modelled as touching the
//!   first `⌈bytes_read / B⌉` blocks of the file: its extent is `min(⌈bytes_read/B⌉·B, size)`
//!   bytes, and a file's cached bytes are always such a prefix.
//! - `hit_bytes` = `min(bytes_read, cached)`: the part of the read already on disk. `hit` =
//!   the whole read came from the cache (`bytes_read ≤ cached`, with something cached).
//!   `filled` = bytes of newly cached blocks (`extent − cached` when the extent is larger).
//! - Every read of a cached file (hit or not) makes it the most recently accessed; the purge
//!   order is least recently accessed first (an LRU list over files, O(1) per request).
//! - Purge: XrdPfc runs it periodically (every `pfc.purgeinterval`, 300 s by default); here
//!   it runs after every request — an approximation that never lets usage sit above the high
//!   watermark between purges, and so is slightly optimistic for bursts of fills. When usage
//!   exceeds `hwm` after a request, whole files are purged least-recently-accessed first until
//!   usage ≤ `lwm`. The file just read is open during its read, and XrdPfc never purges an
//!   active file, so it is protected: if it alone is above `lwm` the purge stops with it as the
//!   only file (the next request's purge can take it). Every purged file is reported as one
//!   eviction of its cached bytes.
//! - Within one request usage may briefly exceed the capacity (new blocks are added before the
//!   purge runs); after every request `used ≤ capacity` holds, since an extent larger than the
//!   capacity is never cached (below) and the purge can remove every other file.
//! - A read whose extent is larger than the whole cache (for a whole-file read: a file bigger
//!   than the cache) is served from the origin without caching more blocks (XrdPfc could not
//!   store it either); blocks already cached still count in `hit_bytes`, and the file's access
//!   time is refreshed. So a file bigger than the cache can still be cached in part through
//!   smaller partial reads.
//! - `bytes_read == 0` (an open without data read): a hit with 0 hit bytes when the file has
//!   cached blocks (its access time is refreshed, like an XrdPfc attach), otherwise a miss that
//!   caches nothing and creates no entry.
//! - `remove(id)` (file deleted or rewritten at the source) drops its blocks at once.
//! - With whole-file reads (`bytes_read = size`) the model is an LRU over whole files whose
//!   usage oscillates between the two watermarks.
//!
//! There is no libCacheSim counterpart; the golden tests below are its proof.

use super::*;

#[derive(Clone, Copy, Default, Serialize, Deserialize)]
struct Entry {
    id: u64,
    /// Cached bytes: a prefix of whole blocks (the last one possibly the file's remainder).
    cached: u64,
    tier: u8,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct XCache {
    capacity: u64,
    block_size: u64,
    hwm: u64,
    lwm: u64,
    used: u64,
    map: Map<u32>,
    arena: Arena<Entry>,
    /// Files by last access; head = most recent.
    lru: List,
}

impl XCache {
    /// Purge least-recently-accessed files down to the low watermark, never `current`.
    fn purge(&mut self, current: u32, ev: &mut Evictions) {
        while self.used > self.lwm {
            match self.lru.tail() {
                Some(t) if t != current => {
                    self.arena.unlink(&mut self.lru, t);
                    let e = self.arena.release(t);
                    self.map.remove(&e.id);
                    self.used -= e.cached;
                    ev.push(e.cached, e.tier, e.id, 0);
                }
                _ => break,
            }
        }
    }
}

impl Policy for XCache {
    fn build(capacity: u64, params: &Params) -> Result<Self, String> {
        let block = params.get("block_size", 1048576.0);
        if !((1.0..=9.0e15).contains(&block) && block.fract() == 0.0) {
            return Err(format!("parameter block_size={block} must be a positive whole number of bytes"));
        }
        let high = params.fraction("high_watermark", 0.95, true)?;
        let low = params.fraction("low_watermark", 0.90, true)?;
        if !(low > 0.0 && high > 0.0 && low <= high) {
            return Err(format!("watermarks must satisfy 0 < low_watermark ({low}) ≤ high_watermark ({high}) ≤ 1"));
        }
        Ok(XCache {
            capacity,
            block_size: block as u64,
            hwm: (capacity as f64 * high) as u64,
            lwm: (capacity as f64 * low) as u64,
            used: 0,
            map: Map::default(),
            arena: Arena::new(),
            lru: List::default(),
        })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        let extent = if req.bytes_read == 0 {
            0
        } else {
            req.bytes_read.div_ceil(self.block_size).saturating_mul(self.block_size).min(req.size)
        };
        let slot = self.map.get(&req.id).copied();
        let cached = slot.map_or(0, |s| self.arena.get(s).cached);
        let out = Outcome {
            hit: cached > 0 && req.bytes_read <= cached,
            hit_bytes: req.bytes_read.min(cached),
            filled: if extent > cached && extent <= self.capacity { extent - cached } else { 0 },
            arrived: false,
        };
        let slot = match slot {
            Some(s) => {
                let e = self.arena.get_mut(s);
                e.cached += out.filled;
                e.tier = req.tier;
                self.arena.move_to_front(&mut self.lru, s);
                s
            }
            None if out.filled > 0 => {
                let s = self.arena.alloc(Entry { id: req.id, cached: out.filled, tier: req.tier });
                self.arena.push_front(&mut self.lru, s);
                self.map.insert(req.id, s);
                s
            }
            None => return out,
        };
        self.used += out.filled;
        if self.used > self.hwm {
            self.purge(slot, ev);
        }
        out
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        match self.map.remove(&id) {
            Some(slot) => {
                self.arena.unlink(&mut self.lru, slot);
                self.used -= self.arena.release(slot).cached;
                Some(0)
            }
            None => None,
        }
    }

    fn contains(&self, id: u64) -> bool {
        self.map.contains_key(&id)
    }
    fn used_bytes(&self) -> u64 {
        self.used
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    fn xcache(capacity: u64, block: f64) -> AnyPolicy {
        AnyPolicy::new("xcache", capacity, &Params::new([("block_size".to_string(), block)].into())).unwrap()
    }

    /// One read: (hit, hit_bytes, filled, evicted bytes).
    fn read(p: &mut AnyPolicy, id: u64, size: u64, bytes_read: u64) -> (bool, u64, u64, u64) {
        let mut ev = Evictions::default();
        let o = p.access(&Request { id, size, bytes_read, tier: 0, next_access: u64::MAX, ts: 0 }, &mut ev);
        (o.hit, o.hit_bytes, o.filled, ev.items.iter().map(|e| e.size).sum())
    }

    #[test]
    fn golden_partial_reads() {
        // capacity 1000, block 10: hwm 950, lwm 900 (no purge in this test).
        let mut p = xcache(1000, 10.0);
        const F: u64 = 1;
        // F (95 bytes), read 25: extent ⌈25/10⌉·10 = 30 → miss, nothing cached yet, 30 filled.
        assert_eq!(read(&mut p, F, 95, 25), (false, 0, 30, 0));
        // read 30: all 30 bytes are cached → hit.
        assert_eq!(read(&mut p, F, 95, 30), (true, 30, 0, 0));
        // read 31: extent 40; 30 of the 31 bytes were cached → not a hit, 30 hit bytes, 10 filled.
        assert_eq!(read(&mut p, F, 95, 31), (false, 30, 10, 0));
        // whole file: extent min(100, 95) = 95 (the last block is the 5-byte remainder).
        assert_eq!(read(&mut p, F, 95, 95), (false, 40, 55, 0));
        assert_eq!(read(&mut p, F, 95, 95), (true, 95, 0, 0));
        // an open without data read: a hit with no bytes (F has cached blocks)
        assert_eq!(read(&mut p, F, 95, 0), (true, 0, 0, 0));
        // ... but a miss that caches nothing for a file with no cached blocks
        assert_eq!(read(&mut p, 2, 50, 0), (false, 0, 0, 0));
        assert!(!p.contains(2));
        // H (5000 bytes, larger than the cache): a 15-byte read caches its 20-byte extent.
        assert_eq!(read(&mut p, 3, 5000, 15), (false, 0, 20, 0));
        // reading all of H: the extent (5000) exceeds the cache → served from the origin,
        // only the 20 cached bytes are hits, nothing more is cached.
        assert_eq!(read(&mut p, 3, 5000, 5000), (false, 20, 0, 0));
        assert_eq!((p.used_bytes(), p.len()), (115, 2));
        assert!(p.remove(3).is_some());
        assert!(p.remove(3).is_none());
        assert_eq!((p.used_bytes(), p.len()), (95, 1));
        // a removed file starts again from nothing
        assert_eq!(read(&mut p, 3, 5000, 15), (false, 0, 20, 0));
    }

    #[test]
    fn golden_watermark_purge() {
        // capacity 100, block 1 byte (whole-file reads): hwm 95, lwm 90. Times in ().
        let mut p = xcache(100, 1.0);
        let (a, b, c, d, e, f, g, h) = (1, 2, 3, 4, 5, 6, 7, 8);
        // A30(1) B30(2) C30(3): 90 ≤ 95, no purge.
        assert_eq!(read(&mut p, a, 30, 30), (false, 0, 30, 0));
        assert_eq!(read(&mut p, b, 30, 30), (false, 0, 30, 0));
        assert_eq!(read(&mut p, c, 30, 30), (false, 0, 30, 0));
        // A hit (4): A is now the most recently accessed.
        assert_eq!(read(&mut p, a, 30, 30), (true, 30, 0, 0));
        // D4(5): 94 ≤ 95.  E2(6): 96 > 95 → purge least recently accessed first down to ≤ 90:
        // B (last access 2) → 66.
        assert_eq!(read(&mut p, d, 4, 4), (false, 0, 4, 0));
        assert_eq!(read(&mut p, e, 2, 2), (false, 0, 2, 30));
        assert!(!p.contains(b));
        // B again (7): 96 → purge C (3) → 66.  C again (8): 96 → purge A (4) → 66.
        assert_eq!(read(&mut p, b, 30, 30), (false, 0, 30, 30));
        assert_eq!(read(&mut p, c, 30, 30), (false, 0, 30, 30));
        assert!(!p.contains(a) && p.contains(d));
        // F95(9): 161 → purge D(5) E(6) B(7) C(8) → 95; still above lwm but F, being read, is
        // protected: the purge stops with F alone (95 ≤ capacity).
        assert_eq!(read(&mut p, f, 95, 95), (false, 0, 95, 66));
        assert_eq!((p.used_bytes(), p.len()), (95, 1));
        // G1(10): 96 > 95 → F, now the least recently accessed and no longer open, goes.
        assert_eq!(read(&mut p, g, 1, 1), (false, 0, 1, 95));
        // H150 is larger than the cache: not cached, nothing purged.
        assert_eq!(read(&mut p, h, 150, 150), (false, 0, 0, 0));
        assert_eq!((p.used_bytes(), p.len()), (1, 1));
    }

    #[test]
    fn default_block_size_and_watermarks() {
        // defaults: 1 MiB blocks, watermarks 0.95 / 0.90. Capacity 100 MiB.
        const MIB: u64 = 1 << 20;
        let mut p = AnyPolicy::new("xcache", 100 * MIB, &Params::default()).unwrap();
        // a 1-byte read of a 3.5 MiB file caches one block
        assert_eq!(read(&mut p, 1, 7 * MIB / 2, 1), (false, 0, MIB, 0));
        // reading 2.5 MiB: 1 MiB hit, blocks 2–3 fetched
        assert_eq!(read(&mut p, 1, 7 * MIB / 2, 5 * MIB / 2), (false, MIB, 2 * MIB, 0));
        // 93 MiB more (96 MiB in use) crosses 95 MiB: purge to ≤ 90 MiB takes file 1 (3 MiB) → 93,
        // still above 90, but the rest is the file being read.
        assert_eq!(read(&mut p, 2, 93 * MIB, 93 * MIB), (false, 0, 93 * MIB, 3 * MIB));
        assert!(AnyPolicy::new("xcache", 100, &Params::new([("low_watermark".to_string(), 0.97)].into())).is_err());
        assert!(AnyPolicy::new("xcache", 100, &Params::new([("block_size".to_string(), 0.5)].into())).is_err());
    }

    #[test]
    fn invariants_and_snapshot() {
        super::super::arc::check::invariants_and_snapshot("xcache", &[("block_size", 4.0)], true);
        super::super::arc::check::invariants_and_snapshot("xcache", &[("block_size", 1.0), ("low_watermark", 0.5)], false);
    }
}
