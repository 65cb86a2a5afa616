//! LFU: evict the resident file with the fewest hits since it entered the cache; ties go to
//! the file that reached that frequency first (FIFO within a frequency).
//!
//! Paper: LFU is a classic of the paging literature (e.g. E. G. Coffman, P. J. Denning,
//! "Operating Systems Theory", Prentice-Hall, 1973); the frequency-bucket lists follow
//! K. Shah, A. Mitra, D. Matani, "An O(1) algorithm for implementing the LFU cache eviction
//! scheme", 2010 (here the buckets sit in a BTreeMap, see below).
//!
//! What it does ("in-cache LFU"): a file enters with frequency 1; each hit adds 1 and moves
//! it to the newest end of its new frequency's bucket; eviction takes the oldest file of the
//! lowest non-empty bucket. A file's frequency is forgotten when it leaves the cache
//! (evicted or removed), so it re-enters at 1.
//!
//! Byte sizes: sizes do not enter the ranking; a miss evicts in LFU order while
//! `used + size > capacity`. A file larger than the cache is not inserted and evicts nothing.
//!
//! libCacheSim (`LFU.c`, the default `lfu`) is the same: insert appends to the freq-1 list,
//! a hit moves the object to the tail of the freq+1 list, eviction takes the first object
//! of the minimum-frequency list, and evicted objects keep no history. Counts on the shared
//! reference trace are identical.
//!
//! Structure: `BTreeMap<frequency, list>` of non-empty buckets in one arena; a hit or an
//! eviction costs O(log F) for F distinct frequencies (a few hundred), independent of the
//! number of files.

use super::*;

resident::entry!(struct Entry {
    freq: u64,
});

#[derive(Clone, Serialize, Deserialize)]
pub struct Lfu {
    res: Resident<Entry>,
    /// Non-empty frequency buckets; in each list the head is the newest arrival.
    buckets: Buckets,
}

impl Policy for Lfu {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, _: &Params) -> Result<Self, String> {
        Ok(Lfu { res: Resident::new(capacity), buckets: BTreeMap::new() })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if let Some(slot) = self.res.slot(req.id) {
            let f = self.res.get(slot).freq;
            self.res.bucket_unlink(&mut self.buckets, f, slot);
            self.res.get_mut(slot).freq = f + 1;
            self.res.bucket_push(&mut self.buckets, f + 1, slot);
            return Outcome::hit(req);
        }
        // eviction: lowest frequency, oldest arrival first
        let evict_one = |r: &mut Resident<Entry>, b: &mut Buckets, ev: &mut Evictions| {
            r.bucket_evict_lowest(b, ev);
        };
        self.res.admit(req, ev, Entry { freq: 1, ..Entry::of(req) }, &mut self.buckets, evict_one, |r, b, slot| r.bucket_push(b, 1, slot))
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        self.res.remove(id, |r, slot| r.bucket_unlink(&mut self.buckets, r.get(slot).freq, slot))
    }

    resident_queries!(res);
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes() {
        // capacity 3; frequency after each id, buckets oldest arrival first.
        // a b c: misses, all at 1: {1: a b c}.
        // a: hit, a2. b: hit, b2: {1: c, 2: a b}.
        // d: miss, evict the only freq-1 file c: {1: d, 2: a b}.
        // c: miss, evict d (freq 1): {1: c, 2: a b}. e: miss, evict c. a: hit, a3. f: miss, evict e. b: hit.
        golden("lfu", 3, &unit("abcabdceafb"), "mmmHHmmmHmH");
    }

    #[test]
    fn golden_ties_fifo_by_arrival_in_the_bucket() {
        // capacity 2: a b miss; b hit (b2), then a hit (a2): bucket 2 = b a (b arrived first).
        // c: miss, evicts b — the first to reach frequency 2, although a was inserted first.
        // b: miss, evicts c (freq 1). a: hit.
        golden("lfu", 2, &unit("abbacba"), "mmHHmmH");
        // frequencies of evicted files are forgotten: capacity 2, a a a (a3), b, c evicts b;
        // b evicts c; c evicts b; a is still there (LFU never ages it).
        golden("lfu", 2, &unit("aaabcbca"), "mHHmmmmH");
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 10: A6 miss; B3 miss (9); A hit (A2). C4: 13 > 10: evict B (freq 1),
        // 6 + 4 fits (10). D11 larger than the cache: miss, nothing evicted. C hit (C2).
        // B3: 13 > 10, A and C both at 2: A reached 2 first -> evicted (used 4); B fits (7).
        // A6: 13 > 10: evict B (freq 1) -> 4, A fits (10). C: hit.
        let t = [(1, 6), (2, 3), (1, 6), (3, 4), (4, 11), (3, 4), (2, 3), (1, 6), (3, 4)];
        let mut p = golden("lfu", 10, &t, "mmHmmHmmH");
        assert_eq!((p.used_bytes(), p.len()), (10, 2));
        // remove forgets C's frequency (3): C re-enters at 1. A hit (A2). E4: 14 > 10:
        // evict the freq-1 file C (not A); E fits. C: miss.
        removes_once(&mut p, 3);
        assert_eq!(p.used_bytes(), 6);
        assert_eq!(replay(&mut p, &[(3, 4), (1, 6), (5, 4), (3, 4)]), "mHmm");
    }
}
