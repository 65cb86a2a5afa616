//! LFUDA: LFU with dynamic aging.
//!
//! Paper: M. Arlitt, L. Cherkasova, J. Dilley, R. Friedrich, T. Jin, "Evaluating Content
//! Management Techniques for Web Proxy Caches", ACM SIGMETRICS Performance Evaluation Review
//! 27(4), 2000.
//!
//! What it does: every resident file has a key `K = F + L` where `F` is its frequency (1 on
//! insertion, +1 per hit, forgotten when it leaves the cache) and `L` is the cache age: the
//! key of the last evicted file (0 at start). The key is recomputed with the current `L` on
//! insertion and on every hit. Eviction takes the smallest key, ties to the file that got
//! its key first (FIFO), and sets `L` to that key. Files that were popular long ago thus
//! age out once newer files' keys overtake theirs, unlike plain LFU.
//!
//! Byte sizes: the paper's LFUDA uses cost 1 and ignores size in the key (GDSF is its
//! size-aware sibling); a miss evicts in key order while `used + size > capacity`, each
//! eviction raising `L`. A file larger than the cache is not inserted and evicts nothing.
//! Keys are integers (sums of integers), so they are exact.
//!
//! libCacheSim difference: libCacheSim's `LFUDA.c` (not among the shared reference results)
//! differs from the paper: on a hit it adds the current minimum frequency bucket to the
//! object's key (`freq += min_freq`) instead of setting it to `F + 1 + L`, so before the
//! first eviction (L = 0) hits do not raise a key at all. We follow the paper.
//!
//! Structure: `BTreeMap<key, list>` of non-empty buckets in one arena, newest arrival at the
//! head; O(log K) per hit or eviction for K distinct keys.

use super::*;

resident::entry!(struct Entry {
    freq: u64,
    key: u64,
});

#[derive(Clone, Serialize, Deserialize)]
pub struct Lfuda {
    /// Cache age: the key of the last evicted file.
    age: u64,
    res: Resident<Entry>,
    buckets: Buckets,
}

impl Policy for Lfuda {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, _: &Params) -> Result<Self, String> {
        Ok(Lfuda { age: 0, res: Resident::new(capacity), buckets: BTreeMap::new() })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if let Some(slot) = self.res.slot(req.id) {
            let Entry { freq, key, .. } = *self.res.get(slot);
            self.res.bucket_unlink(&mut self.buckets, key, slot);
            let e = self.res.get_mut(slot);
            e.freq = freq + 1;
            e.key = e.freq + self.age;
            let key = e.key;
            self.res.bucket_push(&mut self.buckets, key, slot);
            return Outcome::hit(req);
        }
        // each eviction raises the age to the evicted key; the new key is set once room is made
        let evict_one = |r: &mut Resident<Entry>, (b, age): &mut (&mut Buckets, &mut u64), ev: &mut Evictions| {
            **age = r.bucket_evict_lowest(b, ev);
        };
        let link = |r: &mut Resident<Entry>, (b, age): &mut (&mut Buckets, &mut u64), slot| {
            r.get_mut(slot).key = 1 + **age;
            r.bucket_push(b, 1 + **age, slot);
        };
        let mut order = (&mut self.buckets, &mut self.age);
        self.res.admit(req, ev, Entry { freq: 1, ..Entry::of(req) }, &mut order, evict_one, link)
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        self.res.remove(id, |r, slot| r.bucket_unlink(&mut self.buckets, r.get(slot).key, slot))
    }

    resident_queries!(res);
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes_ages_out_old_popularity() {
        // capacity 2; key = F + L, L starts at 0.
        // a: miss, key 1. a: hit, F2 key 2. a: hit, F3 key 3. b: miss, key 1.
        // c: miss; evict the smallest key b (1), L = 1; c gets key 1 + 1 = 2.
        // b: miss; evict c (2), L = 2; b key 3. Keys a 3, b 3: a got its key first.
        // c: miss; evict a (3), L = 3; c key 4.
        // a: miss. Plain LFU keeps a (frequency 3) and hits here.
        golden("lfuda", 2, &unit("aaabcbca"), "mHHmmmmm");
        golden("lfu", 2, &unit("aaabcbca"), "mHHmmmmH");
    }

    #[test]
    fn golden_hit_uses_current_age() {
        // capacity 2: a (key 1), b (key 1); c: evict a (1, older), L = 1, c key 2.
        // b: hit, F2, key 2 + L = 3. d: evict c (2), L = 2, d key 3.
        // e: keys b 3 (older) and d 3: evict b, L = 3, e key 4. b: miss, evicts d (3).
        // d: miss, evicts e (4), L = 4, d key 5. e: miss.
        let p = golden("lfuda", 2, &unit("abcbdebde"), "mmmHmmmmm");
        assert!(p.contains(b'e' as u64) && p.contains(b'd' as u64));
        // capacity 2: x x x: F3, key 3 (set while L = 0). a: key 1. b: evict a, L = 1, key 2.
        // c: evict b, L = 2, key 3. x: hit, F4, key 4 + L = 6 (not old key + 1 = 4).
        // d: evict c (3), L = 3, key 4. e: evict d (4) — with key 4, x would have gone
        // (older key 4) — L = 4, key 5. x: hit.
        golden("lfuda", 2, &unit("xxxabcxdex"), "mHHmmmHmmH");
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 10: A6 (key 1), B3 (key 1) (9). A hit: F2, key 2. C4: 13 > 10: evict B
        // (key 1), L = 1; C key 2 (10). D11 larger than the cache: miss, nothing evicted.
        // C hit: F2, key 2 + 1 = 3. B3: 13 > 10: evict A (key 2), L = 2; B key 3 (7).
        // A6: 13 > 10: keys C 3 and B 3: C got its key first -> evicted, L = 3; A key 4 (9).
        // C: miss (plain LFU hits here: see lfu.rs).
        let t = [(1, 6), (2, 3), (1, 6), (3, 4), (4, 11), (3, 4), (2, 3), (1, 6), (3, 4)];
        let mut p = golden("lfuda", 10, &t, "mmHmmHmmm");
        // C4 at the end: 13 > 10: evict B (key 3), L = 3; C key 4 (10).
        assert_eq!((p.used_bytes(), p.len()), (10, 2));
        // remove forgets everything about A: a new A starts at F1 with key L + 1 = 4
        removes_once(&mut p, 1);
        assert_eq!(p.used_bytes(), 4);
        // A6: fits (10), key 4, after C's key 4 in the bucket. E1: 11 > 10: evict C (the
        // older key 4), L = 4; E key 5 (7). A: hit. C: miss.
        assert_eq!(replay(&mut p, &[(1, 6), (5, 1), (1, 6), (3, 4)]), "mmHm");
    }
}
