//! SIEVE: a FIFO queue with one visited bit per file and a hand that sweeps from the oldest
//! towards the newest end, evicting the first unvisited file it meets.
//!
//! Paper: Yazhuo Zhang, Juncheng Yang, Yao Yue, Ymir Vigfusson, K. V. Rashmi, "SIEVE is
//! Simpler than LRU: an Efficient Turn-Key Eviction Algorithm for Web Caches", USENIX NSDI 2024.
//!
//! What it does: a hit only sets the file's visited bit; a new file enters at the newest
//! end, unvisited. To evict, the hand starts where it stopped last time (at the oldest end
//! the first time, or after it ran off the newest end): each visited file it passes is
//! cleared and stays where it is; the first unvisited file is evicted and the hand rests on
//! its newer neighbour. Unlike CLOCK, survivors are not moved, so files inserted after the
//! hand's position are only examined on the next round (the "lazy promotion, quick demotion"
//! of the paper).
//!
//! Byte sizes: the paper evicts one object per miss. Here the hand keeps evicting while
//! `used + size > capacity`; visited bits and the hand do not depend on sizes. A file larger
//! than the cache is not inserted and evicts nothing.
//!
//! libCacheSim (`Sieve.c`) is the same algorithm: insert at the head with freq 0, a hit sets
//! freq 1, eviction starts at `pointer` (or the tail when it is NULL), clears and walks
//! `prev` (towards the head, wrapping to the tail), evicts the first freq-0 object and sets
//! `pointer` to that object's `prev` (NULL at the head, i.e. the next sweep starts from the
//! tail). Removing the object under the hand moves the hand to its newer neighbour, as
//! here. Counts on the shared reference trace are identical.

use super::*;

resident::entry!(struct Entry {
    visited: bool,
});

#[derive(Clone, Serialize, Deserialize)]
pub struct Sieve {
    res: Resident<Entry>,
    queue: List,
    hand: u32,
}

/// Move the hand from the tail towards the head past visited files (clearing them) and evict
/// the first unvisited one; the hand stays just above it.
fn evict_one(res: &mut Resident<Entry>, (queue, hand): &mut (&mut List, &mut u32), ev: &mut Evictions) {
    let tail = queue.tail().expect("used > 0 implies a resident file");
    let mut slot = if **hand == NIL { tail } else { **hand };
    loop {
        let e = res.get_mut(slot);
        if !e.visited {
            break;
        }
        e.visited = false;
        slot = res.table.arena.prev(slot).unwrap_or(tail);
    }
    **hand = res.table.arena.prev(slot).unwrap_or(NIL);
    res.arena().unlink(queue, slot);
    res.evict(slot, ev);
}

impl Policy for Sieve {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, _: &Params) -> Result<Self, String> {
        Ok(Sieve { res: Resident::new(capacity), queue: List::default(), hand: NIL })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if let Some(slot) = self.res.slot(req.id) {
            self.res.get_mut(slot).visited = true;
            return Outcome::hit(req);
        }
        let mut order = (&mut self.queue, &mut self.hand);
        self.res.admit(req, ev, Entry::of(req), &mut order, evict_one, |r, (queue, _), slot| r.push_head(queue, slot))
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        self.res.remove(id, |r, slot| {
            if self.hand == slot {
                self.hand = r.table.arena.prev(slot).unwrap_or(NIL);
            }
            r.arena().unlink(&mut self.queue, slot);
        })
    }

    resident_queries!(res);
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes() {
        // capacity 3; queue written newest first, '*' = visited, '^' = the hand (none = tail).
        // a b c: misses.                       c b a
        // a: hit, a*.                          c b a*
        // d: miss; the sweep starts at the tail: a* is cleared, b is unvisited -> evicted;
        //    the hand rests on b's newer neighbour c.        d c^ a
        // a: hit, a*.                          d c^ a*
        // e: miss; c unvisited -> evicted, hand on d.       e d^ a*
        // b: miss; d evicted, hand on e.       b e^ a*
        // a: hit.
        // c: miss; e evicted, hand on b.       c b^ a*
        // d: miss; b evicted, hand on c.       d c^ a*
        // a: hit: the hand never came back round to a.
        golden("sieve", 3, &unit("abcadaebacda"), "mmmHmHmmHmmH");
    }

    #[test]
    fn golden_vs_clock() {
        // capacity 3: a b c miss; a hit (a*).
        // d: a* cleared (it stays at the oldest end), b evicted, hand on c.   d c^ a
        // e: c evicted, hand on d.             e d^ a
        // f: d evicted, hand on e.             f e^ a
        // a: hit.
        // CLOCK instead moves a to the head at d (queue d a c), evicts c at e and a at f,
        // so the last a misses.
        golden("sieve", 3, &unit("abcadefa"), "mmmHmmmH");
        golden("clock", 3, &unit("abcadefa"), "mmmHmmmm");
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 10 (used in brackets):
        // A6 miss (6); B3 miss (9): B A. A hit: A*.
        // C4: 13 > 10; from the tail A* is cleared, B evicted (6); B was the newest, so the
        //     hand goes back to the tail (none). C A (10).
        // D11 is larger than the cache: miss, nothing evicted. C hit: C* A.
        // E5: 15 > 10; from the tail A is unvisited -> evicted (4), hand on C. E C*^ (9).
        // F1 fits: F E C*^ (10).
        // G2: 12 > 10; C* cleared, E evicted (5), hand on F. G F^ C (7).
        // C hit: C*. E5: 12 > 10; F evicted (6), hand on G; 11 > 10, G evicted (4), hand
        //     none. E C* (9).
        let t = [(1, 6), (2, 3), (1, 6), (3, 4), (4, 11), (3, 4), (5, 5), (6, 1), (7, 2), (3, 4), (5, 5)];
        let mut p = golden("sieve", 10, &t, "mmHmmHmmmHm");
        assert_eq!((p.used_bytes(), p.len()), (9, 2));
        removes_once(&mut p, 3);
        assert_eq!((p.used_bytes(), p.len()), (5, 1));
    }

    #[test]
    fn remove_under_the_hand() {
        // capacity 3: a b c miss, a hit; d: a* cleared, b evicted, hand on c: d c^ a.
        // Removing c moves the hand to c's newer neighbour d: d^ a.
        // e fits: e d^ a. f: d unvisited -> evicted, hand on e: f e^ a. a: hit.
        // d: e evicted. Had the hand gone back to the tail on the remove, f would have
        // evicted a (cleared by the first sweep) and a would miss.
        let mut p = golden("sieve", 3, &unit("abcad"), "mmmHm");
        assert!(p.remove(b'c' as u64).is_some());
        assert_eq!(replay(&mut p, &unit("efad")), "mmHm");
        assert!(p.contains(b'f' as u64) && !p.contains(b'e' as u64));
    }
}
