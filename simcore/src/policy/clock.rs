//! CLOCK (second chance): a FIFO queue whose files get another round while their reference
//! counter is non-zero.
//!
//! Paper: F. J. Corbató, "A Paging Experiment with the Multics System", MIT Project MAC
//! report MAC-M-384 (1968), in *In Honor of Philip M. Morse*, MIT Press, 1969. The n-bit
//! form (a saturating counter instead of one reference bit) is in the spirit of GCLOCK
//! (V. F. Nicola, A. Dan, D. M. Dias, "Analysis of the Generalized Clock Buffer Replacement
//! Scheme for Database Transaction Processing", ACM SIGMETRICS 1992).
//!
//! What it does: a hit increments the file's counter, saturating at `2^bits − 1` (with the
//! default `bits = 1` that is the classic reference bit). On eviction the hand looks at the
//! oldest file: a non-zero counter is decremented and the file goes back to the newest end
//! (its second chance); a zero counter gets it evicted. New files enter at the newest end
//! with counter 0.
//!
//! Byte sizes: the paper evicts one page per fault. Here the hand keeps evicting (and
//! recycling files with non-zero counters) while `used + size > capacity`, so one miss may
//! evict several files; counters and queue order do not depend on sizes. A file larger than
//! the cache is not inserted and evicts nothing.
//!
//! libCacheSim (`Clock.c`, parameter `n-bit-counter`, default 1) does exactly this: insert
//! at the head with freq 0, a hit does `freq = min(freq + 1, 2^n − 1)`, eviction moves tail
//! objects with `freq ≥ 1` to the head after `freq −= 1` and evicts the first tail with
//! `freq = 0`. Counts on the shared reference trace are identical (see tests/reference.rs).

use super::*;

resident::entry!(struct Entry {
    freq: u8,
});

#[derive(Clone, Serialize, Deserialize)]
pub struct Clock {
    max_freq: u8,
    res: Resident<Entry>,
    queue: List,
}

/// The hand is the tail: a referenced file loses one count and goes round again; the first
/// file with none left is evicted.
#[inline]
fn evict_one(res: &mut Resident<Entry>, queue: &mut List, ev: &mut Evictions) {
    loop {
        let tail = queue.tail().expect("used > 0 implies a resident file");
        let e = res.get_mut(tail);
        if e.freq == 0 {
            return res.evict_tail(queue, ev);
        }
        e.freq -= 1;
        res.arena().move_to_front(queue, tail);
    }
}

impl Policy for Clock {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, params: &Params) -> Result<Self, String> {
        let bits = params.integer("bits", 1.0, 1, 8)?;
        let max_freq = ((1u32 << bits) - 1) as u8;
        Ok(Clock { max_freq, res: Resident::new(capacity), queue: List::default() })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if let Some(slot) = self.res.slot(req.id) {
            let e = self.res.get_mut(slot);
            if e.freq < self.max_freq {
                e.freq += 1;
            }
            return Outcome::hit(req);
        }
        self.res.admit(req, ev, Entry::of(req), &mut self.queue, evict_one, Resident::push_head)
    }

    resident_queries!(res, list: queue);
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes() {
        // capacity 3, queue written newest first, counter after the id:
        // a b c: misses, queue c0 b0 a0.
        // a: hit, a1.                               queue c0 b0 a1
        // d: miss; tail a1 -> a0 to the head; tail b0 evicted. queue d0 a0 c0
        // b: miss; tail c0 evicted.                 queue b0 d0 a0
        // a: hit, a1.                               queue b0 d0 a1
        // c: miss; a1 -> a0 to head; d0 evicted.    queue c0 a0 b0
        // d: miss; b0 evicted.                      queue d0 c0 a0
        // a: hit.
        golden("clock", 3, &unit("abcadbacda"), "mmmHmmHmmH");
    }

    #[test]
    fn golden_all_referenced_wraps_around() {
        // capacity 2: a b miss; a b hit: queue b1 a1.
        // c: miss; tail a1 -> a0 to the head (a0 b1), tail b1 -> b0 to the head (b0 a0), the
        //    hand has gone all the way round and evicts a0. queue c0 b0.
        // b: hit (b1). a: miss; tail b1 -> b0 to the head (b0 c0); c0 evicted. queue a0 b0.
        // b: hit (b1). c: miss; tail b1 -> b0 to the head; a0 evicted. queue c0 b0. a: miss.
        golden("clock", 2, &unit("ababcbabca"), "mmHHmHmHmm");
    }

    #[test]
    fn golden_two_bit_counter() {
        // bits=2 (max 3), capacity 2: a b miss; a a a a hits (a saturates at 3); c: tail a3 ->
        // a2 to head, tail b0 evicted; queue c0 a2. d: tail a2 -> a1 to head, tail c0
        // evicted; queue d0 a1. e: tail a1 -> a0 to head, d0 evicted; queue e0 a0.
        // f: tail a0 evicted; queue f0 e0. a misses.
        // With 1 bit, a would have been evicted at d already.
        let mut p = with_params("clock", 2, &[("bits", 2.0)]);
        assert_eq!(replay(&mut p, &unit("abaaaacdefa")), "mmHHHHmmmmm");
        let mut p = with_params("clock", 2, &[("bits", 2.0)]);
        assert_eq!(replay(&mut p, &unit("abaaaacdea")), "mmHHHHmmmH");
        golden("clock", 2, &unit("abaaaacda"), "mmHHHHmmm");
        assert!(super::super::AnyPolicy::new("clock", 2, &params(&[("bits", 1.5)])).is_err());
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 10: A6 miss (6); B3 miss (9); A hit (A1); C4: 13 > 10, tail A1 -> A0 to
        // the head, tail B0 evicted (6), fits: queue C0 A0 (10). D11 larger than the cache:
        // miss, evicts nothing. C hit (C1). B3 miss: tail A0 evicted (4), queue B0 C1 (7).
        // A6 miss: 13 > 10, tail C1 -> C0 to head, tail B0 evicted (4), 10 fits: queue A0 C0.
        // C hit.
        let t = [(1, 6), (2, 3), (1, 6), (3, 4), (4, 11), (3, 4), (2, 3), (1, 6), (3, 4)];
        let mut p = golden("clock", 10, &t, "mmHmmHmmH");
        assert_eq!((p.used_bytes(), p.len()), (10, 2));
        // remove drops the file; a later read misses and re-inserts it
        removes_once(&mut p, 3);
        assert_eq!((p.used_bytes(), p.len()), (6, 1));
        assert_eq!(replay(&mut p, &[(3, 4), (1, 6)]), "mH");
    }
}
