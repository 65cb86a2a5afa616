//! Belady (MIN): the offline optimum for unit sizes — evict the resident file whose next
//! access is farthest in the future. For what-if replays only: it reads `req.next_access`
//! (the logical time of the file's next request, u64::MAX = never), which the bank requires.
//!
//! Paper: L. A. Belady, "A study of replacement algorithms for a virtual-storage computer",
//! IBM Systems Journal 5(2), 1966.
//!
//! What it does: every resident file carries the time of its next access, refreshed on each
//! hit; a miss evicts the file with the largest next-access time (files never read again
//! first) while `used + size > capacity`, then inserts the file.
//!
//! Byte sizes: as in libCacheSim's `Belady.c` (the reference README's "belady"), the rule is
//! not size-aware: it evicts by next access only, so it is not the byte-size optimum (which
//! is NP-hard; see Berger et al., "Practical Bounds on Optimal Caching with Variable Object
//! Sizes", SIGMETRICS 2018). A file larger than the cache is not inserted and evicts nothing.
//! A missed file is inserted even when it will never be read again — libCacheSim's
//! behaviour (its `EVICT_IMMEDIATELY_IF_NO_FUTURE_ACCESS` is off): it may evict files to
//! make room, and it is the first candidate at the next eviction. True MIN would bypass it.
//!
//! Ties: only files never read again share a next-access time. To order them exactly as
//! libCacheSim does, the queue is the same kind of binary max-heap (1-based array; sift up
//! while the parent is strictly smaller; sift down to the larger child, the left one on
//! ties, while the moving node is strictly smaller; pop moves the last element to the
//! root; a key change sifts up when the key grew, down otherwise; a removal moves the last
//! element into the hole and sifts it up if it is larger than the removed one, down
//! otherwise). Hence counts on the shared reference trace are identical to libCacheSim's.

use super::*;

resident::entry!(struct Entry {
    next: u64,
    /// Position in `heap` (1-based).
    pos: u32,
});

#[derive(Clone, Serialize, Deserialize)]
pub struct Belady {
    res: Resident<Entry>,
    /// Max-heap of arena slots by `next`; index 0 is unused.
    heap: Vec<u32>,
}

impl Belady {
    #[inline]
    fn key(&self, i: usize) -> u64 {
        self.res.table.arena.get(self.heap[i]).next
    }

    #[inline]
    fn place(&mut self, i: usize, slot: u32) {
        self.heap[i] = slot;
        self.res.table.arena.get_mut(slot).pos = i as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        let slot = self.heap[i];
        let key = self.res.table.arena.get(slot).next;
        while i > 1 && self.key(i / 2) < key {
            self.place(i, self.heap[i / 2]);
            i /= 2;
        }
        self.place(i, slot);
    }

    /// The larger child of `i` (the left one on ties), or None.
    #[inline]
    fn larger_child(&self, i: usize) -> Option<usize> {
        let c = 2 * i;
        if c >= self.heap.len() {
            return None;
        }
        Some(if c + 1 < self.heap.len() && self.key(c) < self.key(c + 1) { c + 1 } else { c })
    }

    fn sift_down(&mut self, mut i: usize) {
        let slot = self.heap[i];
        let key = self.res.table.arena.get(slot).next;
        while let Some(c) = self.larger_child(i) {
            if key >= self.key(c) {
                break;
            }
            self.place(i, self.heap[c]);
            i = c;
        }
        self.place(i, slot);
    }

    /// Take `slot` out of the heap.
    fn heap_remove(&mut self, slot: u32) {
        let i = self.res.table.arena.get(slot).pos as usize;
        let last = self.heap.pop().expect("a resident file is in the heap");
        if i < self.heap.len() {
            self.place(i, last);
            if self.res.table.arena.get(slot).next < self.res.table.arena.get(last).next {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }
}

impl Policy for Belady {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, _: &Params) -> Result<Self, String> {
        Ok(Belady { res: Resident::new(capacity), heap: vec![NIL] })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if let Some(slot) = self.res.slot(req.id) {
            let e = self.res.get_mut(slot);
            let (old, pos) = (e.next, e.pos as usize);
            e.next = req.next_access;
            if old < req.next_access {
                self.sift_up(pos);
            } else {
                self.sift_down(pos);
            }
            return Outcome::hit(req);
        }
        if self.res.too_big(req.size) {
            return Outcome::miss(0);
        }
        // the heap's helpers need the whole policy: the admit loop is spelled out here
        while self.res.must_evict(req.size) {
            let top = *self.heap.get(1).expect("used > 0 implies a resident file");
            self.heap_remove(top);
            self.res.evict(top, ev);
        }
        let slot = self.res.insert(Entry { next: req.next_access, ..Entry::of(req) });
        self.heap.push(slot);
        self.sift_up(self.heap.len() - 1);
        Outcome::admitted(req)
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        let slot = self.res.slot(id)?;
        self.heap_remove(slot);
        Some(self.res.drop_slot(slot).born)
    }

    resident_queries!(res);
}

#[cfg(test)]
mod tests {
    use super::super::checks::*;
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes() {
        // capacity 3; next access (request index, 0-based) in brackets, ∞ = never.
        //  0 a [3]  1 b [4]  2 c [7]: misses.
        //  3 a: hit [8].  4 b: hit [9].
        //  5 d [∞]: miss; evict the farthest of a [8], b [9], c [7]: b. d is inserted
        //    although it is never read again (libCacheSim).      a[8] c[7] d[∞]
        //  6 e [10]: miss; evict d [∞].                         a[8] c[7] e[10]
        //  7 c: hit [∞].  8 a: hit [∞].
        //  9 b [∞]: miss; evict c or a (both ∞, heap order); e [10] stays.
        // 10 e: hit.
        golden("belady", 3, &unit("abcabdecabe"), "mmmHHmmHHmH");
    }

    #[test]
    fn golden_never_read_again_is_still_inserted() {
        // capacity 2: 0 a [3], 1 b [4]; 2 x [∞]: miss; x is inserted and evicts the farther
        // b [4]. 3 a: hit [5]. 4 b [6]: miss, evicts x [∞]. 5 a: hit [∞]. 6 b: hit.
        // An optimum that bypasses x would also hit at 4.
        golden("belady", 2, &unit("abxabab"), "mmmHmHH");
    }

    #[test]
    fn ties_follow_libcachesims_heap() {
        // capacity 3, all never read again. Heap after x y z: [x, y, z] (no sift on ties).
        // a: pop x; z moves to the root: [z, y]; a appended: [z, y, a].
        // b: pop z; a moves to the root: [a, y]; b appended: [a, y, b].
        // Residents y a b (a FIFO tie-break would keep z a b).
        let p = golden("belady", 3, &unit("xyzab"), "mmmmm");
        let has = |c: u8| p.contains(c as u64);
        assert!(has(b'y') && has(b'a') && has(b'b') && !has(b'x') && !has(b'z'));
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 10, not size-aware; used bytes in parentheses.
        //  0 A6 [2]  1 B3 [4]: misses (9).
        //  2 A: hit [∞].
        //  3 C4 [5]: 13 > 10: evict the farthest, A [∞] (3); C fits (7).
        //  4 B: hit [7].  5 C: hit [∞].
        //  6 D11: larger than the cache: miss, nothing evicted.
        //  7 B: hit [∞].
        //  8 E8 [9]: 15 > 10: evict C or B (both ∞; heap order), still > 10, evict the
        //    other (0); E fits (8).
        //  9 E: hit.
        let t = [(1, 6), (2, 3), (1, 6), (3, 4), (2, 3), (3, 4), (4, 11), (2, 3), (5, 8), (5, 8)];
        let mut p = golden("belady", 10, &t, "mmHmHHmHmH");
        assert_eq!((p.used_bytes(), p.len()), (8, 1));
        removes_once(&mut p, 5);
        assert_eq!((p.used_bytes(), p.len()), (0, 0));
        // sizes above 4 GiB are not truncated (capacity 10 GiB): 0 A6G [2]; 1 B5G [3]:
        // 11 > 10, the only resident A goes; 2 A: miss, evicts B; 3 B: miss, evicts A.
        const G: u64 = 1 << 30;
        let p = golden("belady", 10 * G, &[(1, 6 * G), (2, 5 * G), (1, 6 * G), (2, 5 * G)], "mmmm");
        assert_eq!(p.used_bytes(), 5 * G);
    }

    #[test]
    fn heap_stays_a_heap() {
        // removes and key changes in the middle of the heap keep the order
        let trace = byte_trace(3000, 300, 1000, 9);
        let next = next_access(&trace);
        let mut p = super::super::AnyPolicy::new("belady", 1000, &super::super::Params::default()).unwrap();
        let mut ev = super::super::Evictions::default();
        for (i, (&(id, size), &next_access)) in trace.iter().zip(&next).enumerate() {
            if i % 13 == 0 {
                p.remove(id ^ 1);
            }
            let r = super::super::Request { id, size, bytes_read: size, tier: 0, next_access, ts: 0, duration_us: 0 };
            p.access(&r, &mut ev);
            let super::super::AnyPolicy::Belady(b) = &p else { unreachable!() };
            for j in 2..b.heap.len() {
                assert!(b.key(j / 2) >= b.key(j), "heap order broken at {j}");
                assert_eq!(b.res.table.arena.get(b.heap[j]).pos as usize, j);
            }
            assert_eq!(b.heap.len() - 1, b.res.len());
        }
    }
}
