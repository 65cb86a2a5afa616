//! S3-FIFO: three static FIFO queues — a small probationary FIFO, a main FIFO run as a
//! 2-bit CLOCK, and a ghost FIFO of ids recently evicted from the small one.
//!
//! Paper: Juncheng Yang, Yazhuo Zhang, Ziyue Qiu, Yao Yue and Rashmi Vinayak, "FIFO Queues are
//! All You Need for Cache Eviction", ACM SOSP 2023.
//!
//! New files enter the small FIFO (quick demotion: most one-hit wonders leave it without ever
//! reaching main). A file leaving the small FIFO moves to main if it was hit at least
//! `move_threshold` times there, otherwise it is evicted and its id enters the ghost FIFO; a
//! miss whose id is in the ghost goes straight to main. Main evicts like CLOCK with a 2-bit
//! counter: a file at its tail with a non-zero counter is reinserted at the head with the
//! counter decremented (lazy promotion), one with counter 0 is evicted.
//!
//! # Byte sizes and details (libCacheSim's S3FIFO.c, followed exactly)
//! The paper counts objects; here every queue is measured in bytes:
//! - `small_cap = ⌊c · small_ratio⌋` (default 0.1), `main_cap = c − small_cap`,
//!   `ghost_cap = ⌊c · ghost_ratio⌋` (default 0.9) bytes of remembered sizes (no ghost if 0).
//! - A file larger than `small_cap` is never cached (miss, nothing evicted), as in libCacheSim;
//!   a file of exactly `small_cap` bytes makes room but is then not inserted (libCacheSim's
//!   `>=` test in insert). Both matter only for files above 10% of the cache.
//! - Hit (small or main): the file's counter is incremented (no cap while in small). A miss
//!   whose id is in the ghost drops the ghost entry (even if the file is then not cached).
//! - Miss: while `|small| + |main| + size > c`, evict once: from main if `|main| > main_cap` or
//!   the small FIFO is empty, else from small. Evicting from small takes the oldest file: with
//!   counter ≥ `move_threshold` (default 2) it moves to main's head with counter 0 and the
//!   search continues; otherwise it is evicted (its id enters the ghost, which drops its oldest
//!   ids while over `ghost_cap`) and that eviction is done. Evicting from main takes the oldest
//!   file: counter ≥ 1 → reinserted at the head with `min(counter, 3) − 1`, else evicted.
//! - Insert: after a ghost hit into main, otherwise into small. The small FIFO may hold more
//!   than `small_cap` while the cache has room (it is only a bound once evictions start).
//!
//! Cross-check: identical hit counts to libCacheSim at all four sizes of the shared trace. The
//! reference (libCacheSim commit aa0fc40) inserts as described above; libCacheSim's later
//! S3FIFO.c sends new files to main while the small FIFO is full and nothing was evicted yet —
//! that variant differed by 0.0002–0.0028 in hit ratio on the reference, so it is not used.

use super::*;

const SMALL: u8 = 0;
const MAIN: u8 = 1;
const GHOST: u8 = 2;

#[derive(Clone, Copy, Default, Serialize, Deserialize)]
struct Entry {
    id: u64,
    size: u64,
    freq: u32,
    tier: u8,
    /// Arrival time (`Request::ts`).
    born: u32,
    queue: u8,
}
resident::queued_entry!(Entry, queue);

#[derive(Clone, Serialize, Deserialize)]
pub struct S3Fifo {
    capacity: u64,
    small_cap: u64,
    main_cap: u64,
    ghost_cap: u64,
    move_threshold: u32,
    table: Table<Entry>,
    /// small, main, ghost
    q: Queues,
}

impl S3Fifo {
    fn evict_small(&mut self, ev: &mut Evictions) {
        while !self.q.is_empty(SMALL) {
            let slot = self.q.pop_tail(&mut self.table, SMALL);
            let e = *self.table.get(slot);
            if e.freq >= self.move_threshold {
                self.table.get_mut(slot).freq = 0;
                self.q.push(&mut self.table, MAIN, slot);
                continue;
            }
            ev.push(e.size, e.tier, e.id, e.born);
            if self.ghost_cap == 0 || e.size > self.ghost_cap {
                self.table.free(slot);
            } else {
                while self.q.bytes[GHOST as usize] + e.size > self.ghost_cap {
                    let g = self.q.pop_tail(&mut self.table, GHOST);
                    self.table.free(g);
                }
                self.table.get_mut(slot).freq = 0;
                self.q.push(&mut self.table, GHOST, slot);
            }
            return;
        }
    }

    fn evict_main(&mut self, ev: &mut Evictions) {
        // the oldest file: a counter ≥ 1 sends it round again, 0 evicts it
        while let Some(slot) = self.q.lists[MAIN as usize].tail() {
            let e = self.table.get_mut(slot);
            if e.freq == 0 {
                return self.q.evict_tail(&mut self.table, MAIN, ev);
            }
            e.freq = e.freq.min(3) - 1;
            self.q.move_to_front(&mut self.table, slot);
        }
    }

    #[inline]
    fn evict(&mut self, ev: &mut Evictions) {
        if self.q.bytes[MAIN as usize] > self.main_cap || self.q.is_empty(SMALL) {
            self.evict_main(ev);
        } else {
            self.evict_small(ev);
        }
    }

}

impl Policy for S3Fifo {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, params: &Params) -> Result<Self, String> {
        let small = params.fraction("small_ratio", 0.1, false)?;
        let ghost = params.non_negative("ghost_ratio", 0.9)?;
        let t = params.get("move_threshold", 2.0);
        if !((1.0..=1e9).contains(&t) && t.fract() == 0.0) {
            return Err(format!("parameter move_threshold={t} must be a positive integer"));
        }
        // libCacheSim: (int64_t)cache_size * ratio, truncated
        let small_cap = (capacity as f64 * small) as u64;
        Ok(S3Fifo {
            capacity,
            small_cap,
            main_cap: capacity - small_cap,
            ghost_cap: (capacity as f64 * ghost) as u64,
            move_threshold: t as u32,
            table: Table::default(),
            q: Queues::default(),
        })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        let ghost_hit = match self.q.find(&mut self.table, req.id) {
            Found::Resident(slot) => {
                let e = self.table.get_mut(slot);
                e.freq = e.freq.saturating_add(1);
                return Outcome::hit(req);
            }
            Found::Ghost => true,
            Found::New => false,
        };
        if req.size > self.small_cap || req.size > self.capacity {
            return Outcome::miss(0);
        }
        while req.size > self.capacity - self.q.resident_bytes() {
            self.evict(ev);
        }
        let q = if ghost_hit {
            MAIN
        } else if req.size >= self.small_cap {
            return Outcome::miss(0);
        } else {
            SMALL
        };
        self.q.insert(&mut self.table, q, Entry { id: req.id, size: req.size, freq: 0, tier: req.tier, born: req.ts, queue: q });
        Outcome::admitted(req)
    }

    queued_queries!();
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;

    fn s3(capacity: u64, small: f64, ghost: f64) -> AnyPolicy {
        with_params("s3fifo", capacity, &[("small_ratio", small), ("ghost_ratio", ghost)])
    }

    #[test]
    fn golden_unit_sizes() {
        // capacity 5, small_ratio 0.4, ghost_ratio 0.4: small_cap 2, main_cap 3, ghost_cap 2;
        // move_threshold 2. Notation q=[newest … oldest], counters in ().
        // a b: small=[b a]. a hit → a(1). a hit → a(2).
        // c d e: the cache has room, so small grows past small_cap: small=[e d c b a] (5).
        // f: 5+1 > 5 → evict: |main| = 0 ≤ main_cap and small not empty → from small: the oldest,
        //    a, has 2 ≥ 2 hits → moves to main with 0, main=[a]; next oldest b(0) → evicted,
        //    ghost=[b]. f → small=[f e d c].
        // b: ghost hit (b leaves the ghost); 4+1+1 > 5 → from small: c(0) evicted, ghost=[c].
        //    b → main=[b a].
        // e: hit in small → e(1).
        // g: 3+2+1 > 5 → from small: d(0) evicted, ghost=[d c]. small=[g f e].
        // d: ghost hit (ghost=[c]); from small: e(1) < 2 → evicted, ghost=[e c]. d → main=[d b a].
        // f: hit → f(1).
        // h: 2+3+1 > 5, |main| = 3 ≤ 3 → from small: f(1) evicted; ghost 2+1 > 2 drops c,
        //    ghost=[f e]. small=[h g].
        // a: hit in main → a(1).
        // i: from small: g(0) evicted, ghost=[g f] (e dropped). small=[i h].
        // g: ghost hit (ghost=[f]); from small: h(0) evicted, ghost=[h f]. g → main=[g d b a(1)],
        //    |main| = 4 > main_cap.
        // j: 1+4+1 > 5 and |main| > 3 → evict from main: the oldest, a, has 1 → reinserted with 0
        //    (main=[a g d b]); then b(0) evicted. j → small=[j i].
        let mut p = s3(5, 0.4, 0.4);
        assert_eq!(replay(&mut p, &unit("abaa cde f b e g d f h a i g j")), "mmHHmmmmmHmmHmHmmm");
        for (id, resident) in [(b'j', true), (b'i', true), (b'a', true), (b'g', true), (b'd', true), (b'b', false), (b'h', false)] {
            assert_eq!(p.contains(id as u64), resident, "{}", id as char);
        }
        assert_eq!(p.len(), 5);
    }

    #[test]
    fn main_clock_counter_caps_at_three() {
        // capacity 3, small_ratio 0.67 (small_cap 2, main_cap 1), ghost_ratio 1.0 (ghost_cap 3).
        // x x x: x in small with 2 hits. a b: small=[b a x]. c: evict from small: x(2) → main
        //   with 0; a(0) evicted (ghost=[a]); small=[c b] main=[x].
        // x x x x: hits in main → x(4).
        // a: ghost hit; from small b(0) evicted (ghost=[b]); a → main=[a x] (over main_cap).
        // b: ghost hit; |main| = 2 > 1 → main's oldest x(4) is reinserted with min(4,3)−1 = 2,
        //   then a(0) evicted; b → main=[b x].
        // a: miss; main's oldest x(2) → reinserted with 1; b(0) evicted; a → small=[a c].
        // b: miss; from small c(0) evicted (ghost=[c]); small=[b a].
        // c: ghost hit; from small a(0) evicted (ghost=[a]); c → main=[c x].
        // d: miss; main's oldest x(1) → reinserted with 0; c(0) evicted. d → small=[d b].
        //   x has survived three passes of main's hand (a counter capped at 2 would lose here).
        // a: ghost hit; from small b(0) evicted; a → main=[a x].  e: main's oldest x(0) evicted.
        let mut p = s3(3, 0.67, 1.0);
        assert_eq!(replay(&mut p, &unit("xxx ab c xxxx a b a b c d")), "mHHmmmHHHHmmmmmm");
        assert!(p.contains(b'x' as u64) && !p.contains(b'c' as u64));
        assert_eq!(replay(&mut p, &unit("ae")), "mm");
        assert!(!p.contains(b'x' as u64) && p.contains(b'a' as u64));
    }

    #[test]
    fn one_hit_wonders_do_not_flush_main() {
        // capacity 20, defaults: small_cap 2, main_cap 18, ghost_cap 18.
        // x y enter small and are hit twice each: x(2) y(2).
        // a..r (18 files) fill the cache through small (20 bytes).
        // s: evict from small: x and y have 2 hits → both move to main; a(0) is evicted (ghost).
        // t, u, A…J: each evicts the oldest file of small (b, c, d, …, m): one-hit wonders only
        //    push each other out of small, main (x, y) is never touched.
        // x y n r: hits (n..r are the newest survivors of small).
        let mut p = policy("s3fifo", 20);
        let expect = format!("mmHHHH{}mmm{}HHHH", "m".repeat(18), "m".repeat(10));
        assert_eq!(replay(&mut p, &unit("xyxyxy abcdefghijklmnopqr stu ABCDEFGHIJ xynr")), expect);
        assert!(!p.contains(b'm' as u64));
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 40, defaults: small_cap 4, main_cap 36, ghost_cap 36.
        // A5: larger than small_cap → miss, not cached (libCacheSim's rule).
        // B4: exactly small_cap: room is made (none needed) but it is not inserted (libCacheSim).
        // C3 → small=[C3]. C hit → C(1).  D3 E2 F3 G3 → small=[G F E D C] (14 bytes).
        // H50 > capacity: miss, nothing evicted. C hit → C(2). E hit → E(1).
        let t = [(1, 5), (2, 4), (3, 3), (3, 3), (4, 3), (5, 2), (6, 3), (7, 3), (8, 50), (3, 3), (5, 2)];
        let mut p = golden("s3fifo", 40, &t, "mmmHmmmmmHH");
        assert_eq!((p.used_bytes(), p.len()), (14, 5));
        removes_once(&mut p, 3);
        assert_eq!((p.used_bytes(), p.len()), (11, 4));
    }

    #[test]
    fn ghost_remove_forgets() {
        // capacity 5, small 0.4 (cap 2), ghost 0.4 (cap 2): a..e fill small; f evicts a into the
        // ghost: small=[f e d c b] ghost=[a].
        // remove(a) drops the ghost entry and reports false (a was not resident).
        // a: an ordinary miss (not a ghost hit), so it goes to small (evicting b):
        //    small=[a f e d c]. g h i j k each evict small's oldest: c, d, e, f, then a.
        // (Had a been a ghost hit it would have gone to main and survived the scan.)
        let mut p = s3(5, 0.4, 0.4);
        assert_eq!(replay(&mut p, &unit("abcdef")), "mmmmmm");
        assert!(p.remove(b'a' as u64).is_none());
        assert_eq!(replay(&mut p, &unit("aghijk")), "mmmmmm");
        assert!(!p.contains(b'a' as u64));
        assert!(b"ghijk".iter().all(|&c| p.contains(c as u64)));
    }
}
