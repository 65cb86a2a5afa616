//! 2Q: the full version with a FIFO for first references (A1in), a ghost FIFO of ids evicted
//! from it (A1out) and an LRU for files referenced again (Am).
//!
//! Paper: Theodore Johnson and Dennis Shasha, "2Q: A Low Overhead High Performance Buffer
//! Management Replacement Algorithm", VLDB 1994.
//!
//! A first reference puts the file in A1in (FIFO; hits there change nothing). A file pushed out
//! of A1in leaves the cache but its id is remembered in A1out. A miss whose id is in A1out is a
//! proven re-reference: the file goes to Am (LRU). Am's LRU end is evicted when A1in is within
//! its share (Kin), so files referenced only once never push out Am.
//!
//! # Byte sizes (libCacheSim's TwoQ.c, followed exactly)
//! The paper's Kin and Kout count pages; here every queue is measured in bytes:
//! - `ain_cap = ⌊c · ain_ratio⌋` (default 0.25), `aout_cap = ⌊c · aout_ratio⌋` (default 0.5, bytes
//!   of the remembered files' sizes), `am_cap = c − ain_cap`.
//! - A file larger than `ain_cap` is never cached (miss, nothing evicted). libCacheSim does the
//!   same; it matters when files are big relative to a quarter of the cache.
//! - Hit in A1in: nothing changes. Hit in Am: move to its MRU end.
//! - Miss: if the id is in A1out it is dropped from there (even if the file is then too big to
//!   cache). While `|A1in| + |Am| + size > c`: if `|A1in| > ain_cap` the oldest file of A1in is
//!   evicted and its id pushed into A1out (A1out drops its oldest ids while over `aout_cap`; an id
//!   bigger than `aout_cap` is not remembered), otherwise Am's LRU file is evicted. Then a file
//!   whose id was in A1out goes to Am — Am first evicts its own LRU files while
//!   `|Am| + size > am_cap` — and any other file to the newest end of A1in (A1in may grow past
//!   `ain_cap`; the loop above trims it on later misses).
//! - One addition: when Am is empty the loop evicts from A1in even if it is within `ain_cap`.
//!   That cannot happen with `ain_ratio ≤ 0.5`; libCacheSim has no rule for it (it would try
//!   to evict from the empty Am).
//!
//! Cross-check: identical hit counts to libCacheSim at all four sizes of the shared trace.

use super::*;

const AIN: u8 = 0;
const AM: u8 = 1;
const AOUT: u8 = 2;

resident::queued_entry!(struct Entry {
    queue: u8,
} queue: queue);

#[derive(Clone, Serialize, Deserialize)]
pub struct TwoQ {
    capacity: u64,
    ain_cap: u64,
    aout_cap: u64,
    am_cap: u64,
    table: Table<Entry>,
    /// A1in, Am, A1out; head = newest / most recent.
    q: Queues,
}

impl TwoQ {
    /// Evict the oldest A1in file; remember its id in A1out.
    fn evict_ain(&mut self, ev: &mut Evictions) {
        let slot = self.q.pop_tail(&mut self.table, AIN);
        let e = *self.table.get(slot);
        ev.push(e.size, e.tier, e.id, e.born);
        if e.size > self.aout_cap {
            self.table.free(slot);
            return;
        }
        while self.q.bytes[AOUT as usize] + e.size > self.aout_cap {
            let g = self.q.pop_tail(&mut self.table, AOUT);
            self.table.free(g);
        }
        self.q.push(&mut self.table, AOUT, slot);
    }

    fn evict_am(&mut self, ev: &mut Evictions) {
        self.q.evict_tail(&mut self.table, AM, ev);
    }
}

impl Policy for TwoQ {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, params: &Params) -> Result<Self, String> {
        let ain = params.fraction("ain_ratio", 0.25, false)?;
        let aout = params.non_negative("aout_ratio", 0.5)?;
        // libCacheSim: int64 = uint64 * double (truncation)
        let ain_cap = (capacity as f64 * ain) as u64;
        let aout_cap = (capacity as f64 * aout) as u64;
        Ok(TwoQ {
            capacity,
            ain_cap,
            aout_cap,
            am_cap: capacity - ain_cap,
            table: Table::default(),
            q: Queues::default(),
        })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        let ghost_hit = match self.q.find(&mut self.table, req.id) {
            Found::Resident(slot) => {
                if self.table.get(slot).queue == AM {
                    self.q.move_to_front(&mut self.table, slot);
                }
                return Outcome::hit(req);
            }
            Found::Ghost => true,
            Found::New => false,
        };
        if req.size > self.ain_cap || req.size > self.capacity {
            return Outcome::miss(0);
        }
        while req.size > self.capacity - self.q.resident_bytes() {
            if self.q.bytes[AIN as usize] > self.ain_cap || self.q.is_empty(AM) {
                self.evict_ain(ev);
            } else {
                self.evict_am(ev);
            }
        }
        let q = if ghost_hit {
            if req.size > self.am_cap {
                return Outcome::miss(0);
            }
            while self.q.bytes[AM as usize] + req.size > self.am_cap {
                self.evict_am(ev);
            }
            AM
        } else {
            AIN
        };
        self.q.insert(&mut self.table, q, Entry::of(req));
        Outcome::admitted(req)
    }

    queued_queries!();
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes() {
        // capacity 4, ain_ratio 0.5, aout_ratio 0.5: ain_cap 2, aout_cap 2, am_cap 2.
        // a b c: misses into A1in (it may exceed ain_cap while the cache has room): A1in=[c b a] (3)
        // a: hit in A1in, nothing moves.
        // d: miss; 3+0+1 ≤ 4 → A1in=[d c b a] (4).
        // e: miss; 4+1 > 4 and |A1in|=4 > 2 → evict a, A1out=[a]. A1in=[e d c b].
        // a: miss, ghost hit (a leaves A1out); 4+1 > 4 → evict b from A1in (A1out=[b]);
        //    a goes to Am (|Am|+1 ≤ 2). A1in=[e d c] Am=[a].
        // b: miss, ghost hit; 3+1+1 > 4 → |A1in|=3 > 2 → evict c (A1out=[c]); b → Am=[b a].
        // a: hit in Am → Am=[a b].
        // f: miss; 2+2+1 > 4 and |A1in|=2 ≤ 2 → evict Am's LRU b (no ghost for Am);
        //    A1in=[f e d] Am=[a].
        // c: ghost hit; 3+1+1 > 4 → evict d (A1out=[d]); c → Am=[c a].
        // b: miss (forgotten): 2+2+1 > 4 → |A1in|=2 → evict Am's LRU a; A1in=[b f e] Am=[c].
        // a: miss (Am evictions leave no ghost): 3+1+1 > 4 → evict e (A1out=[e d]); A1in=[a b f].
        let mut p = with_params("twoq", 4, &[("ain_ratio", 0.5), ("aout_ratio", 0.5)]);
        assert_eq!(replay(&mut p, &unit("abcadeabafcba")), "mmmHmmmmHmmmm");
        assert_eq!(p.len(), 4);
    }

    #[test]
    fn default_shares() {
        // capacity 8, defaults: ain_cap 2, aout_cap 4, am_cap 6.
        // a..h fill A1in (8). i: evict a (A1out=[a]). j: evict b (A1out=[b a]).
        // a: ghost hit; evict c; a → Am. b: ghost hit; evict d; b → Am.
        // a, b hit in Am.  Final: A1in=[j i h g f e] (6) Am=[b a].
        golden("twoq", 8, &unit("abcdefghij ab ab"), "mmmmmmmmmmmmHH");
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 20, defaults: ain_cap 5, aout_cap 10, am_cap 15.
        // A6: larger than ain_cap → miss, not cached (libCacheSim's rule).
        // B5 miss → A1in=[B5]. C4 miss → A1in=[C4 B5] (9). D25 > capacity: miss, nothing evicted.
        // E5: 9+5 ≤ 20 → A1in=[E C B] (14). F5: 14+5 ≤ 20 → A1in 19.
        // G3: 19+3 > 20, |A1in|=19 > 5 → evict B (A1out=[B5]); 14+3 ≤ 20 → A1in=[G F E C] 17.
        // B5: ghost hit (B leaves A1out); 17+5 > 20 → evict C (A1out=[C4]); 13+5 ≤ 20;
        //     B → Am=[B].
        // C4: ghost hit (A1out empty); 13+5+4 > 20 → evict E (A1out=[E5]); 8+5+4 ≤ 20;
        //     C → Am=[C B].
        // B hit. C hit.
        let t = [(1, 6), (2, 5), (3, 4), (4, 25), (5, 5), (6, 5), (7, 3), (2, 5), (3, 4), (2, 5), (3, 4)];
        let mut p = golden("twoq", 20, &t, "mmmmmmmmmHH");
        assert_eq!(p.used_bytes(), 3 + 5 + 9);
        assert!(p.remove(2).is_some());
        assert!(p.remove(5).is_none(), "E is only a ghost");
        assert_eq!(p.used_bytes(), 12);
        // E forgotten: a new miss goes to A1in, not Am
        assert_eq!(replay(&mut p, &[(5, 5), (5, 5)]), "mH");
    }
}
