//! SLRU: segmented LRU with `segments` LRU lists of equal byte size (default 4, "S4LRU").
//!
//! Paper: R. Karedla, J. S. Love, B. G. Wherry, "Caching Strategies to Improve Disk System
//! Performance", IEEE Computer 27(3), 1994 (two segments: probationary and protected); the
//! n-segment form (S4LRU) is from Q. Huang, K. Birman, R. van Renesse, W. Lloyd, S. Kumar,
//! H. C. Li, "An Analysis of Facebook Photo Caching", ACM SOSP 2013.
//!
//! What it does: segment 0 is the lowest (probationary), segment n−1 the highest. A hit
//! moves a file to the MRU end of the next higher segment (in the top segment: to its MRU
//! end). When a segment then holds more than its share, its LRU files are demoted to the MRU
//! end of the segment below, cascading down; what overflows segment 0 leaves the cache. So a
//! hit can evict files. Evictions for a miss take the LRU file of the lowest non-empty
//! segment.
//!
//! Byte sizes: the papers count objects; here shares and fits are in bytes, following
//! libCacheSim's `SLRU.c` exactly:
//! - each segment holds at most `capacity / segments` bytes (integer division);
//! - a file larger than one segment is not admitted (libCacheSim's `SLRU_can_insert`): a
//!   miss, nothing evicted. This deviates from the general "insert unless larger than the
//!   whole cache" rule because such a file cannot be placed in any segment; with
//!   `segments = 4` it only affects files above a quarter of the cache;
//! - on a miss, evict from the LRU end of the lowest non-empty segment while
//!   `used + size > capacity`, then insert at the MRU end of the lowest segment with room
//!   (`bytes[i] + size ≤ max`), or of segment 0 if none has room (it then exceeds its share
//!   until the next cascade). Unlike the papers, where new objects always enter the
//!   probationary segment, a new file thus lands in a higher segment while the cache fills
//!   up, and later whenever a higher segment's unused remainder fits it — libCacheSim's
//!   behaviour, kept for identical results;
//! - a hit promotes, then demotes while the target segment holds more than its share.
//!
//! The hit counts on the shared reference trace are identical to libCacheSim's S4LRU.

use super::*;

resident::entry!(struct Entry {
    seg: u8,
});

#[derive(Clone, Serialize, Deserialize)]
pub struct Slru {
    /// Byte share of each segment.
    seg_max: u64,
    res: Resident<Entry>,
    segs: Segments,
}

/// Segment 0 = lowest; head = MRU.
#[derive(Clone, Serialize, Deserialize)]
struct Segments {
    lists: Vec<List>,
    bytes: Vec<u64>,
}

impl Segments {
    /// Evict the LRU file of the lowest segment holding bytes.
    fn evict_one(&mut self, res: &mut Resident<Entry>, ev: &mut Evictions) {
        let s = self.bytes.iter().position(|&b| b > 0).expect("used > 0 implies a resident file");
        let slot = res.arena().pop_back(&mut self.lists[s]).expect("a segment with bytes has files");
        self.bytes[s] -= res.evict(slot, ev).size;
    }

    fn move_to(&mut self, res: &mut Resident<Entry>, slot: u32, from: usize, to: usize) {
        res.arena().unlink(&mut self.lists[from], slot);
        res.arena().push_front(&mut self.lists[to], slot);
        let e = res.get_mut(slot);
        e.seg = to as u8;
        let size = e.size;
        self.bytes[from] -= size;
        self.bytes[to] += size;
    }
}

impl Slru {
    /// Demote the LRU file of segment `s` to the MRU end of `s − 1` (or evict it from
    /// segment 0), cascading while the segment below is over its share.
    fn cool(&mut self, s: usize, ev: &mut Evictions) {
        if s == 0 {
            return self.segs.evict_one(&mut self.res, ev);
        }
        let slot = *self.segs.lists[s].tail().as_ref().expect("an over-full segment has files");
        self.segs.move_to(&mut self.res, slot, s, s - 1);
        while self.segs.bytes[s - 1] > self.seg_max {
            self.cool(s - 1, ev);
        }
    }
}

impl Policy for Slru {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, params: &Params) -> Result<Self, String> {
        let n = params.integer("segments", 4.0, 1, 32)? as usize;
        Ok(Slru {
            seg_max: capacity / n as u64,
            res: Resident::new(capacity),
            segs: Segments { lists: vec![List::default(); n], bytes: vec![0; n] },
        })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if let Some(slot) = self.res.slot(req.id) {
            let s = self.res.get(slot).seg as usize;
            let top = self.segs.lists.len() - 1;
            if s == top {
                self.res.arena().move_to_front(&mut self.segs.lists[top], slot);
            } else {
                self.segs.move_to(&mut self.res, slot, s, s + 1);
                // the promoted file is at the MRU end and fits a segment on its own, so the
                // cascade never moves it
                while self.segs.bytes[s + 1] > self.seg_max {
                    self.cool(s + 1, ev);
                }
            }
            return Outcome::hit(req);
        }
        if req.size > self.seg_max {
            return Outcome::miss(0);
        }
        let link = |r: &mut Resident<Entry>, segs: &mut Segments, slot| {
            let s = segs.bytes.iter().position(|&b| b + req.size <= self.seg_max).unwrap_or(0);
            r.get_mut(slot).seg = s as u8;
            r.push_head(&mut segs.lists[s], slot);
            segs.bytes[s] += req.size;
        };
        self.res.admit(req, ev, Entry::of(req), &mut self.segs, |r, segs, ev| segs.evict_one(r, ev), link)
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        self.res.remove(id, |r, slot| {
            let e = *r.get(slot);
            r.arena().unlink(&mut self.segs.lists[e.seg as usize], slot);
            self.segs.bytes[e.seg as usize] -= e.size;
        })
    }

    resident_queries!(res);
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::AnyPolicy;

    fn slru(capacity: u64, segments: f64) -> AnyPolicy {
        with_params("slru", capacity, &[("segments", segments)])
    }

    #[test]
    fn golden_unit_sizes_two_segments() {
        // capacity 4, 2 segments of 2. Segments written [S0 | S1], MRU first.
        // a b: fill S0.                        [b a | ]
        // c: S0 full, S1 has room: new files go to the lowest segment with room. [b a | c]
        // d: S1 has room.                      [b a | d c]
        // e: full (4 + 1 > 4): evict the LRU of S0 (a); S0 has room.   [e b | d c]
        // b: hit, promoted to S1 -> S1 over (3 > 2): its LRU c is demoted to S0's MRU end;
        //    S0 now holds c e (2), fine.       [c e | b d]
        // a: miss; evict S0's LRU e.           [a c | b d]
        // d: hit in the top segment: MRU.      [a c | d b]
        // e: miss; evict c.  c: miss; evict a.  b: hit.
        let mut p = slru(4, 2.0);
        assert_eq!(replay(&mut p, &unit("abcdebadecb")), "mmmmmHmHmmH");
    }

    #[test]
    fn golden_unit_sizes_four_segments() {
        // capacity 4, 4 segments of 1 (the default).   [S0|S1|S2|S3], MRU first.
        // a: [a| | | ]. b: S0 full, S1 has room: [a|b| | ]. c -> S2, d -> S3: [a|b|c|d].
        // a: hit, promoted to S1 = a b, over its share: its LRU b is demoted to S0, which
        //    a just left: [b|a|c|d].
        // a: hit, to S2, c demoted to S1: [b|c|a|d].  a: hit, to S3, d demoted: [b|c|d|a].
        // e: miss, full: evict S0's LRU b; S0 has room: [e|c|d|a].
        // b: miss; evict e: [b|c|d|a].  c: hit -> S2, d demoted to S1: [b|d|c|a].
        // d: hit -> S2, c demoted to S1: [b|c|d|a].  e: miss, b evicted.  a: hit.
        golden("slru", 4, &unit("abcdaaaebcdea"), "mmmmHHHmmHHmH");
    }

    #[test]
    fn golden_promotions_cascade() {
        // capacity 4, 2 segments of 2.
        // a b c d: [b a | d c]. a: hit -> S1 = a d c, over: c demoted -> S0 = c b: [c b | a d].
        // b: hit -> d demoted: [d c | b a].  c: hit -> a demoted: [a d | c b].
        // d: hit -> b demoted: [b a | d c].  e: miss, evict S0's LRU a: [e b | d c]. a: miss.
        let mut p = slru(4, 2.0);
        assert_eq!(replay(&mut p, &unit("abcdabcdea")), "mmmmHHHHmm");
        // Byte sizes: capacity 8, 2 segments of 4 (bytes in brackets).
        // A2 B2: S0 = B A (4). C2: S0 has no room, S1 = C (2). D1, E1: S1 = E D C (4).
        // C: hit in the top segment: S1 = C E D. A: hit -> S1 = A C E D (6): D demoted
        // (S1 5), E demoted (S1 4): S0 = E D B (4). B: hit -> S1 = B A C (6): C demoted:
        // S0 = C E D (4), S1 = B A (4). F3: 11 > 8: evict S0's LRU D (7), E (6), C (4);
        // S0 = F. E: miss.
        let mut p = slru(8, 2.0);
        let t = [(1, 2), (2, 2), (3, 2), (4, 1), (5, 1), (3, 2), (1, 2), (2, 2), (6, 3), (5, 1)];
        assert_eq!(replay(&mut p, &t), "mmmmmHHHmm");
    }

    #[test]
    fn golden_hit_evicts() {
        // capacity 4, 2 segments of 2: A1 -> S0. B2: S0 has no room -> S1. C1 -> S0 = C A.
        // A: hit -> S1 = A B (3 > 2): B demoted -> S0 = B C (3 > 2): S0's LRU C leaves the
        // cache, reported as an eviction of the hit. C: miss (3 + 1 fits; S0 = B has no room,
        // S1 = A does: S1 = C A). B: hit -> S1 = B C A (4): A demoted, then C: S0 = C A,
        // S1 = B. A: hit -> S1 = A B (3): B demoted -> S0 = B C (3): C evicted again. C: miss.
        use super::super::{Evictions, Request};
        let mut p = slru(4, 2.0);
        assert_eq!(replay(&mut p, &[(1, 1), (2, 2), (3, 1)]), "mmm");
        let mut ev = Evictions::default();
        let out = p.access(&Request { id: 1, size: 1, bytes_read: 1, tier: 0, next_access: u64::MAX, ts: 0, duration_us: 0 }, &mut ev);
        assert!(out.hit);
        assert_eq!(ev.items.iter().map(|e| (e.size, e.tier, e.id)).collect::<Vec<_>>(), vec![(1, 0, 3)]);
        assert!(!p.contains(3));
        assert_eq!(replay(&mut p, &[(3, 1), (2, 2), (1, 1), (3, 1)]), "mHHm");
    }

    #[test]
    fn golden_byte_sizes_and_limits() {
        // capacity 10, 4 segments of 10 / 4 = 2 bytes (used in brackets).
        // A3: larger than a segment: not admitted, nothing evicted (libCacheSim's rule).
        // B2 -> S0, C2 -> S1, D1 -> S2, E2: S2 has no room for 2 (1 + 2 > 2), S3 does:
        // [B|C|D|E] (7). F1: S2 has room: [B|C|F D|E] (8). G2: fits (10) but no segment has
        // room: S0, over its share: [G B|C|F D|E]. H1: 11 > 10: evict S0's LRU B (8); no
        // segment has room for 1: [H G|C|F D|E] (9). B2: 11 > 10: evict G (7): [B H|...] (9).
        // E: hit (top segment). A3: not admitted.
        let t = [(1, 3), (2, 2), (3, 2), (4, 1), (5, 2), (6, 1), (7, 2), (8, 1), (2, 2), (5, 2), (1, 3)];
        let mut p = golden("slru", 10, &t, "mmmmmmmmmHm");
        assert_eq!((p.used_bytes(), p.len()), (9, 6));
        // remove, and a file larger than the whole cache
        assert!(p.remove(5).is_some());
        assert!(p.remove(1).is_none());
        assert_eq!(p.used_bytes(), 7);
        assert_eq!(replay(&mut p, &[(9, 11)]), "m");
        assert_eq!(p.used_bytes(), 7);
        assert!(AnyPolicy::new("slru", 10, &params(&[("segments", 0.0)])).is_err());
        // one segment is plain LRU
        let mut p = slru(3, 1.0);
        let mut q = policy("lru", 3);
        let t = unit("abcadbcaabdcdab");
        assert_eq!(replay(&mut p, &t), replay(&mut q, &t));
        // sizes above 4 GiB are not truncated: 40 GiB in 4 segments of 10 GiB. A6 -> S0;
        // B5: S0 has no room -> S1 (11). A: hit -> S1 = A B (11 > 10): B demoted to S0.
        // C11 is larger than a segment: not admitted. B: hit.
        let t = [(1, 6 << 30), (2, 5 << 30), (1, 6 << 30), (3, 11 << 30), (2, 5 << 30)];
        let p = golden("slru", 40 << 30, &t, "mmHmH");
        assert_eq!(p.used_bytes(), 11 << 30);
    }
}
