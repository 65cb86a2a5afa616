//! GDSF: GreedyDual-Size-Frequency.
//!
//! Paper: L. Cherkasova, "Improving WWW Proxies Performance with Greedy-Dual-Size-Frequency
//! Caching Policy", HP Laboratories report HPL-98-69 (R.1), 1998; it adds frequency to
//! GreedyDual-Size (P. Cao, S. Irani, "Cost-Aware WWW Proxy Caching Algorithms", USENIX
//! USITS 1997).
//!
//! What it does: every resident file has a priority `H = L + F · cost / size`, with `F` its
//! frequency (1 on insertion, +1 per hit, forgotten when it leaves the cache), `cost = 1`
//! (maximise the hit ratio) and `L` the priority of the last evicted file (0 at start).
//! `H` is recomputed with the current `L` on insertion and on every hit. Eviction takes
//! the lowest `H`, ties to the file whose `H` was set first (FIFO), and sets `L` to it.
//! Small files and frequently read files stay; large files read once leave first.
//!
//! Byte sizes: the paper is already size-aware. `size` is the file size in bytes and the
//! cost is scaled to `1.024e9` (`H = L + F · 1.024e9 / size`): a constant factor does not
//! change any decision in exact arithmetic, and this one makes every `H` bit-identical to
//! libCacheSim's (`GDSF.cpp`: `pri_last_evict + freq · 1e6 / obj_size`), which ran with
//! sizes in KiB (see shared/reference/README.md): `freq · 1.024e9 / (1024 · size_kib)` rounds
//! exactly as `freq · 1e6 / size_kib` because 1024 is a power of two. A miss evicts in `H`
//! order while `used + size > capacity`. A file larger than the cache is not inserted and
//! evicts nothing. A zero-byte file counts as 1 byte in `H` (no division by zero).
//!
//! libCacheSim ranks by `(priority, vtime of the request that set it)` in a `std::set`.
//! Here the same unique key `(H bits, request seq)` (positive finite f64 order equals the
//! order of their bit patterns) orders a min-heap with one entry per file whose key may be
//! out of date: a hit only raises the file's key in its `Entry` (keys never decrease, since
//! `L` never decreases). When the heap's minimum is out of date it is pushed back with the
//! file's current key; when it is current, it is the true minimum (every other entry's
//! current key is at least its heap key, which is at least this one) and is evicted. So a
//! hit costs no heap operation, and the order is exactly libCacheSim's. Entries of removed
//! files are dropped when they surface (or purged if they pile up). Keys are unique, so the
//! (4-ary) heap's internal layout never affects a decision, nor does a snapshot restore.
//! Counts on the shared reference trace are identical to libCacheSim's.

use super::*;

/// `cost` in bytes: libCacheSim's 1e6 per KiB.
const COST: f64 = 1.024e9;

resident::entry!(struct Entry {
    freq: u64,
    /// Current key: H as f64 bits, and the sequence number of the request that set it.
    pri: u64,
    seq: u64,
    /// The seq of this file's entry in `queue` (0 = the slot is free).
    queued: u64,
});

#[derive(Clone, Serialize, Deserialize)]
pub struct Gdsf {
    /// Priority of the last evicted file.
    age: f64,
    /// Requests seen, orders equal priorities.
    seq: u64,
    res: Resident<Entry>,
    /// Min-heap of (H bits, seq, slot): one entry per resident file, possibly with an older
    /// (smaller) key, plus entries of removed files not yet surfaced.
    queue: QuadHeap,
}

/// A 4-ary min-heap (half the depth of a binary heap, children in one or two cache lines).
#[derive(Clone, Default, Serialize, Deserialize)]
struct QuadHeap {
    items: Vec<(u64, u64, u32)>,
}

impl QuadHeap {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn push(&mut self, item: (u64, u64, u32)) {
        let mut i = self.items.len();
        self.items.push(item);
        while i > 0 {
            let parent = (i - 1) / 4;
            if self.items[parent] <= item {
                break;
            }
            self.items[i] = self.items[parent];
            i = parent;
        }
        self.items[i] = item;
    }

    fn pop(&mut self) -> Option<(u64, u64, u32)> {
        let last = self.items.pop()?;
        if self.items.is_empty() {
            return Some(last);
        }
        let top = self.items[0];
        let n = self.items.len();
        let mut i = 0;
        loop {
            let first = 4 * i + 1;
            if first >= n {
                break;
            }
            let mut c = first;
            for j in first + 1..(first + 4).min(n) {
                if self.items[j] < self.items[c] {
                    c = j;
                }
            }
            if last <= self.items[c] {
                break;
            }
            self.items[i] = self.items[c];
            i = c;
        }
        self.items[i] = last;
        Some(top)
    }

    fn retain(&mut self, keep: impl Fn(&(u64, u64, u32)) -> bool) {
        let items = std::mem::take(&mut self.items);
        for item in items.into_iter().filter(keep) {
            self.push(item);
        }
    }
}

#[inline]
fn priority(age: f64, freq: u64, size: u64) -> u64 {
    let h = age + freq as f64 * COST / size.max(1) as f64;
    debug_assert!(h.is_finite() && h > 0.0);
    h.to_bits()
}

/// Evict the resident file with the smallest current key; its key becomes the age.
fn evict_min(res: &mut Resident<Entry>, (queue, age): &mut (&mut QuadHeap, &mut f64), ev: &mut Evictions) {
    loop {
        let (pri, seq, slot) = queue.pop().expect("used > 0 implies a resident file");
        let e = res.get_mut(slot);
        if e.queued != seq {
            continue; // a removed file's entry
        }
        if e.seq == seq {
            **age = f64::from_bits(pri);
            res.evict(slot, ev);
            return;
        }
        // hit since it was queued: requeue with its current key
        e.queued = e.seq;
        let key = (e.pri, e.seq, slot);
        queue.push(key);
    }
}

impl Policy for Gdsf {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, _: &Params) -> Result<Self, String> {
        Ok(Gdsf { age: 0.0, seq: 0, res: Resident::new(capacity), queue: QuadHeap::default() })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        self.seq += 1;
        let seq = self.seq;
        if let Some(slot) = self.res.slot(req.id) {
            let Entry { freq, size, .. } = *self.res.get(slot);
            let pri = priority(self.age, freq + 1, size);
            let e = self.res.get_mut(slot);
            (e.freq, e.pri, e.seq) = (freq + 1, pri, seq);
            return Outcome::hit(req);
        }
        // the priority is set once room is made (evictions raise the age)
        let link = |r: &mut Resident<Entry>, (queue, age): &mut (&mut QuadHeap, &mut f64), slot| {
            let pri = priority(**age, 1, req.size);
            r.get_mut(slot).pri = pri;
            queue.push((pri, seq, slot));
        };
        let entry = Entry { freq: 1, seq, queued: seq, ..Entry::of(req) };
        self.res.admit(req, ev, entry, &mut (&mut self.queue, &mut self.age), evict_min, link)
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        // its queue entry is dropped when it surfaces: a released slot has queued = 0, a
        // reused one a newer seq
        let born = self.res.remove(id, |_, _| {})?;
        if self.queue.len() > 2 * self.res.len() + 1024 {
            let arena = &self.res.table.arena;
            self.queue.retain(|&(_, seq, slot)| arena.get(slot).queued == seq);
        }
        Some(born)
    }

    resident_queries!(res);
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes() {
        // With equal sizes H = L + F (in units of the cost), the same as LFUDA
        // (see lfuda.rs for the step-by-step derivation of this trace).
        golden("gdsf", 2, &unit("aaabcbca"), "mHHmmmmm");
        golden("gdsf", 2, &unit("abcbdebde"), "mmmHmmmmm");
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 10; H in units of the cost (1.024e9), L = 0.
        // A5: H = 1/5 = 0.2. B2: 0.5 (7). A hit: F2, H = 2/5 = 0.4.
        // C4: 11 > 10: evict the lowest H, A (0.4; B is 0.5), L = 0.4 (used 2);
        //     C: 0.4 + 1/4 = 0.65 (6).
        // D11 larger than the cache: miss, nothing evicted.
        // C hit: F2, H = 0.4 + 2/4 = 0.9.
        // E5: 11 > 10: evict B (0.5), L = 0.5 (4); E: 0.5 + 0.2 = 0.7 (9).
        // B2: 11 > 10: evict E (0.7 < C's 0.9), L = 0.7 (4); B: 0.7 + 0.5 = 1.2 (6).
        // A5: 11 > 10: evict C (0.9), L = 0.9 (2); A: 0.9 + 0.2 = 1.1 (7).
        // C4: 11 > 10: evict A (1.1 < B's 1.2), L = 1.1 (2); C: 1.1 + 0.25 = 1.35 (6).
        // B: hit.
        let t = [(1, 5), (2, 2), (1, 5), (3, 4), (4, 11), (3, 4), (5, 5), (2, 2), (1, 5), (3, 4), (2, 2)];
        let mut p = golden("gdsf", 10, &t, "mmHmmHmmmmH");
        assert_eq!((p.used_bytes(), p.len()), (6, 2));
        // remove forgets B's frequency: B2 re-enters at F1 with H = 1.1 + 0.5 = 1.6 (6);
        // F4: 10, fits: H = 1.1 + 0.25 = 1.35, after C's 1.35 (FIFO among equal H).
        // G2: 12 > 10: evict C (1.35, set first), L = 1.35 (6); G: 1.85 (8). F: hit. C: miss.
        removes_once(&mut p, 2);
        assert_eq!(p.used_bytes(), 4);
        assert_eq!(replay(&mut p, &[(2, 2), (6, 4), (7, 2), (6, 4), (3, 4)]), "mmmHm");
    }

    #[test]
    fn golden_large_files_leave_first() {
        // capacity 12 GiB; H in units of cost / GiB. A 5 GiB file read twice (H = 2/5) is
        // still cheaper to drop than a 1 GiB file read once (H = 1).
        // B1 (H 1), A5 (0.2), A hit (0.4), C6 (1/6 = 0.167): 12 GiB, fits.
        // D2: 14 > 12: evict C (0.167), L = 0.167 (6); D: 0.167 + 0.5 = 0.667 (8).
        // E3: 11, fits: 0.167 + 0.333 = 0.5. F2: 13 > 12: evict A (0.4 < E 0.5 < D < B),
        // L = 0.4 (6); F fits (8). B: hit. A: miss. Sizes above 4 GiB are not truncated.
        const G: u64 = 1 << 30;
        let t = [(2, G), (1, 5 * G), (1, 5 * G), (3, 6 * G), (4, 2 * G), (5, 3 * G), (6, 2 * G), (2, G), (1, 5 * G)];
        golden("gdsf", 12 * G, &t, "mmHmmmmHm");
    }

    #[test]
    fn quad_heap_pops_in_order() {
        let mut h = super::QuadHeap::default();
        let mut expect = Vec::new();
        for i in 0..2000u64 {
            let item = (crate::util::hash::mix64(i) % 300, i, i as u32);
            h.push(item);
            expect.push(item);
            if i % 7 == 0 {
                expect.sort();
                assert_eq!(h.pop(), Some(expect.remove(0)));
            }
        }
        h.retain(|x| x.1 % 3 != 0);
        expect.retain(|x| x.1 % 3 != 0);
        expect.sort();
        let popped: Vec<_> = std::iter::from_fn(|| h.pop()).collect();
        assert_eq!(popped, expect);
    }
}
