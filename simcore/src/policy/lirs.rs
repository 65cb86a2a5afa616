//! LIRS: Low Inter-reference Recency Set.
//!
//! Paper: Song Jiang and Xiaodong Zhang, "LIRS: An Efficient Low Inter-reference Recency Set
//! Replacement Policy to Improve Buffer Cache Performance", ACM SIGMETRICS 2002.
//!
//! LIRS ranks blocks by their inter-reference recency (IRR: how many other blocks were seen
//! between the last two references). Blocks with a low IRR are LIR blocks and stay resident;
//! the rest are HIR blocks, of which only a small share is resident. Stack S is an LRU stack of
//! LIR blocks and recently seen HIR blocks (resident or not); its bottom is always an LIR block
//! ("stack pruning" removes HIR blocks from the bottom). List Q holds the resident HIR blocks;
//! evictions take Q's front. A HIR block referenced again while still in S has a smaller IRR
//! than the bottom LIR block: it becomes LIR and the bottom LIR block becomes a resident HIR
//! block in Q.
//!
//! # Byte sizes (libCacheSim's LIRS.c, followed except where noted below)
//! The paper's L_lirs and L_hirs count blocks; here both are bytes: `hirs_limit =
//! max(1, ⌊hir_ratio · c⌋)` (default `hir_ratio` 0.01, as libCacheSim), `lirs_limit = c −
//! hirs_limit`, and the LIR set, the resident HIR set and S are measured in bytes. Three LRU
//! lists as in libCacheSim: S, Q, and NH (the non-resident HIR entries of S, oldest first).
//! A file has separate S and Q records, each with its own LIR/resident flags.
//! - Every request first moves the file's S record and Q record (if any) to their MRU ends.
//! - Hit on an LIR file: prune S. Hit on a resident HIR file that is in S: its Q record leaves
//!   Q, bottom LIR files are demoted (below) while `|LIR| + size > lirs_limit`, and it becomes
//!   LIR. Hit on a resident HIR file that is only in Q: bottom LIR files are demoted while
//!   `|LIR| + size > lirs_limit` (libCacheSim's addition: the file itself stays HIR) and it is
//!   pushed on S as resident HIR.
//! - Demoting an LIR file ("evictLIR") takes S's bottom record: if its size is at most
//!   `hirs_limit`, resident HIR files are evicted from Q's front until it fits in `hirs_limit`
//!   and it joins Q's MRU end as resident HIR; a bigger one leaves the cache. S is then pruned.
//! - Evicting a HIR file ("evictHIR") takes Q's front; if the file is in S its S record becomes
//!   non-resident and enters NH.
//! - Miss on a non-resident HIR file of S (admission): LIR files are demoted while
//!   `|LIR| + size > lirs_limit`, its NH entry is dropped; then, while the cache is over capacity,
//!   HIR files are evicted while `|HIR| ≥ hirs_limit` and one LIR file is demoted; it becomes LIR.
//! - Miss on an unknown file: a file bigger than `lirs_limit` or `hirs_limit` is never cached (a
//!   libCacheSim rule: at the default ratio, files above 1% of the cache). If both the LIR and HIR
//!   sets would overflow, HIR files are evicted until it fits in `hirs_limit`, and then once more
//!   per round while the cache is over capacity. It becomes LIR if `|LIR| + size ≤ lirs_limit`,
//!   else resident HIR in S and Q.
//! - After every request, while S holds more than 2c bytes, the oldest NH entry is dropped from
//!   NH and S (libCacheSim's bound on S).
//!
//! One deliberate difference: if demoting LIR files to make room for a hit on a Q-only HIR
//! file evicts that file's own Q record (only possible when the demoted file and the hit file
//! together exceed `hirs_limit`), libCacheSim keeps the file as a resident HIR record in S that
//! its byte counters no longer include (the cache then holds more than its counters say). Here
//! the hit still counts, but the file stays evicted (reported as an eviction) and keeps a
//! non-resident record in S and NH, so `used_bytes()` is always the true resident size. With
//! files of at most 6 GB and caches of 5 TB or more (`hirs_limit` ≥ 50 GB) it cannot happen on
//! the shared trace. A round of the eviction loop that frees nothing (libCacheSim would loop
//! forever; unreachable from consistent states) falls back to evicting Q's front, then
//! demoting S's bottom.
//!
//! Cross-check: identical hit counts to libCacheSim at 5%, 10% and 30% of the working set, and
//! 40 more hits of 1,000,000 (0.00004) at 1%. That difference is libCacheSim's unit: it ran the
//! reference in KiB, so its limits were whole KiB (`hirs_limit` = 1024·⌊0.01·c/1024⌋ bytes) and
//! a LIR set that fills `lirs_limit` exactly in KiB overflows it by a fraction of a KiB in
//! bytes. Rounding the limits to KiB here reproduces libCacheSim's counts exactly at all four
//! sizes (checked); byte limits are kept since sizes here are bytes.

use super::*;

#[derive(Clone, Copy, Default, Serialize, Deserialize)]
struct Node {
    id: u64,
    size: u64,
    tier: u8,
    is_lir: bool,
    in_cache: bool,
}

/// A file's records in S, Q and NH (NIL when absent).
#[derive(Clone, Copy, Serialize, Deserialize)]
struct Slots {
    s: u32,
    q: u32,
    nh: u32,
}

const NONE: Slots = Slots { s: NIL, q: NIL, nh: NIL };

#[derive(Clone, Serialize, Deserialize)]
pub struct Lirs {
    capacity: u64,
    lirs_limit: u64,
    hirs_limit: u64,
    /// Bytes of LIR files, resident HIR files and non-resident S records (libCacheSim's
    /// counters; wrapping arithmetic as its unsigned counters).
    lirs_count: u64,
    hirs_count: u64,
    nonresident: u64,
    /// Resident bytes and files as libCacheSim counts them.
    occupied: i64,
    n_obj: i64,
    /// Bytes of all S records.
    s_bytes: u64,
    map: Map<Slots>,
    arena: Arena<Node>,
    s: List,
    q: List,
    nh: List,
}

impl Lirs {
    #[inline]
    fn slots(&self, id: u64) -> Slots {
        self.map.get(&id).copied().unwrap_or(NONE)
    }

    #[inline]
    fn node(&self, slot: u32) -> &Node {
        self.arena.get(slot)
    }

    #[inline]
    fn set_slot(&mut self, id: u64, f: impl FnOnce(&mut Slots)) {
        let e = self.map.entry(id).or_insert(NONE);
        f(e);
        if e.s == NIL && e.q == NIL && e.nh == NIL {
            self.map.remove(&id);
        }
    }

    fn s_push(&mut self, n: Node) {
        let slot = self.arena.alloc(n);
        self.arena.push_front(&mut self.s, slot);
        self.s_bytes += n.size;
        self.set_slot(n.id, |e| e.s = slot);
    }

    fn q_push(&mut self, n: Node) {
        let slot = self.arena.alloc(n);
        self.arena.push_front(&mut self.q, slot);
        self.set_slot(n.id, |e| e.q = slot);
    }

    fn nh_push(&mut self, id: u64, size: u64) {
        if let Some(slot) = self.map.get(&id).map(|e| e.nh).filter(|&s| s != NIL) {
            // not reachable in consistent states; libCacheSim would duplicate the record
            self.arena.move_to_front(&mut self.nh, slot);
            return;
        }
        let slot = self.arena.alloc(Node { id, size, ..Node::default() });
        self.arena.push_front(&mut self.nh, slot);
        self.set_slot(id, |e| e.nh = slot);
    }

    fn s_remove(&mut self, slot: u32) -> Node {
        self.arena.unlink(&mut self.s, slot);
        let n = self.arena.release(slot);
        self.s_bytes -= n.size;
        self.set_slot(n.id, |e| e.s = NIL);
        n
    }

    fn q_remove(&mut self, slot: u32) -> Node {
        self.arena.unlink(&mut self.q, slot);
        let n = self.arena.release(slot);
        self.set_slot(n.id, |e| e.q = NIL);
        n
    }

    /// Drop the file's NH record; returns whether it had one.
    fn nh_remove(&mut self, id: u64) -> bool {
        let slot = self.slots(id).nh;
        if slot == NIL {
            return false;
        }
        self.arena.unlink(&mut self.nh, slot);
        self.arena.release(slot);
        self.set_slot(id, |e| e.nh = NIL);
        true
    }

    /// Remove HIR records from the bottom of S until an LIR one (never the top record).
    fn prune(&mut self) {
        while let Some(t) = self.s.tail() {
            if Some(t) == self.s.head() || self.node(t).is_lir {
                break;
            }
            let n = *self.node(t);
            if !n.in_cache && self.nh_remove(n.id) {
                self.nonresident = self.nonresident.wrapping_sub(n.size);
            }
            self.s_remove(t);
        }
    }

    /// Evict the resident HIR file at Q's front.
    fn evict_hir(&mut self, ev: &mut Evictions) -> bool {
        let Some(t) = self.q.tail() else { return false };
        let n = self.q_remove(t);
        self.hirs_count = self.hirs_count.wrapping_sub(n.size);
        let s = self.slots(n.id).s;
        if s != NIL {
            self.arena.get_mut(s).in_cache = false;
            let s_size = self.node(s).size;
            self.nh_push(n.id, n.size);
            self.nonresident = self.nonresident.wrapping_add(s_size);
        }
        self.occupied -= n.size as i64;
        self.n_obj -= 1;
        ev.push(n.size, n.tier, n.id, 0);
        true
    }

    /// Demote S's bottom record to a resident HIR file (or evict it if too big for Q).
    fn evict_lir(&mut self, ev: &mut Evictions) -> bool {
        let Some(t) = self.s.tail() else { return false };
        let n = self.s_remove(t);
        self.lirs_count = self.lirs_count.wrapping_sub(n.size);
        self.occupied -= n.size as i64;
        self.n_obj -= 1;
        if n.size <= self.hirs_limit {
            while self.hirs_count.wrapping_add(n.size) > self.hirs_limit {
                if !self.evict_hir(ev) {
                    break;
                }
            }
            let q = self.slots(n.id).q;
            if q != NIL {
                // not reachable in consistent states (libCacheSim would duplicate the record)
                self.arena.move_to_front(&mut self.q, q);
                self.arena.get_mut(q).in_cache = true;
            } else {
                self.q_push(Node { is_lir: false, in_cache: true, ..n });
            }
            self.hirs_count = self.hirs_count.wrapping_add(n.size);
            self.occupied += n.size as i64;
            self.n_obj += 1;
        } else {
            ev.push(n.size, n.tier, n.id, 0);
        }
        self.prune();
        true
    }

    fn make_lir_room(&mut self, size: u64, ev: &mut Evictions) {
        while self.lirs_count.wrapping_add(size) > self.lirs_limit {
            if !self.evict_lir(ev) {
                break;
            }
        }
    }

    /// Hit on a resident HIR file that has an S record.
    fn hit_hir_in_s(&mut self, id: u64, ev: &mut Evictions) {
        let q = self.slots(id).q;
        if q != NIL {
            let n = self.q_remove(q);
            self.hirs_count = self.hirs_count.wrapping_sub(n.size);
            self.occupied -= n.size as i64;
            self.n_obj -= 1;
        }
        let size = self.node(self.slots(id).s).size;
        self.make_lir_room(size, ev);
        let s = self.slots(id).s;
        if s == NIL {
            return; // its own record was demoted (single-record S): libCacheSim would use freed memory
        }
        self.arena.get_mut(s).is_lir = true;
        self.lirs_count = self.lirs_count.wrapping_add(size);
        self.occupied += size as i64;
        self.n_obj += 1;
    }

    /// Hit on a resident HIR file that is only in Q.
    fn hit_hir_in_q(&mut self, id: u64, ev: &mut Evictions) {
        let n = *self.node(self.slots(id).q);
        self.make_lir_room(n.size, ev);
        if self.slots(id).q != NIL {
            self.s_push(Node { is_lir: false, in_cache: true, ..n });
        } else {
            // the demotions evicted the file itself (see the module doc): it keeps a
            // non-resident record, as if evicted just after this hit
            self.s_push(Node { is_lir: false, in_cache: false, ..n });
            self.nh_push(id, n.size);
            self.nonresident = self.nonresident.wrapping_add(n.size);
        }
    }

    /// libCacheSim's LIRS_can_insert (which also makes room).
    fn can_insert(&mut self, req: &Request, ev: &mut Evictions) -> bool {
        if req.size > self.capacity {
            return false;
        }
        let sl = self.slots(req.id);
        if sl.s != NIL {
            let n = *self.node(sl.s);
            if n.is_lir || n.in_cache {
                return false; // unreachable: that was a hit
            }
            self.make_lir_room(n.size, ev);
            if self.nh_remove(req.id) {
                self.nonresident = self.nonresident.wrapping_sub(n.size);
            }
            return true;
        }
        if sl.q != NIL {
            return false; // unreachable: Q records are resident
        }
        if req.size > self.lirs_limit || req.size > self.hirs_limit {
            return false;
        }
        if self.lirs_count.wrapping_add(req.size) > self.lirs_limit && self.hirs_count.wrapping_add(req.size) > self.hirs_limit {
            while self.hirs_count.wrapping_add(req.size) > self.hirs_limit {
                if !self.evict_hir(ev) {
                    break;
                }
            }
        }
        true
    }

    /// One round of libCacheSim's LIRS_evict.
    fn evict(&mut self, req: &Request, ev: &mut Evictions) {
        let sl = self.slots(req.id);
        if sl.s != NIL {
            let n = *self.node(sl.s);
            if !n.is_lir && !n.in_cache {
                while self.hirs_count >= self.hirs_limit {
                    if !self.evict_hir(ev) {
                        break;
                    }
                }
                self.evict_lir(ev);
            }
        } else if sl.q == NIL
            && self.lirs_count.wrapping_add(req.size) > self.lirs_limit
            && self.hirs_count.wrapping_add(req.size) > self.hirs_limit
        {
            self.evict_hir(ev);
        }
    }

    fn insert(&mut self, req: &Request) -> u64 {
        let sl = self.slots(req.id);
        if sl.s != NIL {
            let n = self.arena.get_mut(sl.s);
            n.is_lir = true;
            n.in_cache = true;
            n.tier = req.tier;
            let size = n.size;
            self.lirs_count = self.lirs_count.wrapping_add(size);
            self.occupied += size as i64;
            self.n_obj += 1;
            return size;
        }
        let n = Node { id: req.id, size: req.size, tier: req.tier, is_lir: true, in_cache: true };
        if self.lirs_count.wrapping_add(req.size) <= self.lirs_limit {
            self.s_push(n);
            self.lirs_count = self.lirs_count.wrapping_add(req.size);
        } else {
            self.s_push(Node { is_lir: false, ..n });
            self.q_push(Node { is_lir: false, ..n });
            self.hirs_count = self.hirs_count.wrapping_add(req.size);
        }
        self.occupied += req.size as i64;
        self.n_obj += 1;
        req.size
    }

    fn limit_stack(&mut self) {
        while self.s_bytes > 2 * self.capacity {
            let Some(t) = self.nh.tail() else { break };
            let n = *self.node(t);
            self.nonresident = self.nonresident.wrapping_sub(n.size);
            let s = self.slots(n.id).s;
            if s != NIL {
                self.s_remove(s);
            }
            self.nh_remove(n.id);
        }
    }

    fn get(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        let sl = self.slots(req.id);
        if sl.s != NIL {
            self.arena.move_to_front(&mut self.s, sl.s);
        }
        if sl.q != NIL {
            self.arena.move_to_front(&mut self.q, sl.q);
        }
        if sl.s != NIL {
            let n = *self.node(sl.s);
            if n.is_lir {
                self.prune();
                return Outcome::hit(req);
            }
            if n.in_cache {
                self.hit_hir_in_s(req.id, ev);
                return Outcome::hit(req);
            }
        } else if sl.q != NIL && self.node(sl.q).in_cache {
            self.hit_hir_in_q(req.id, ev);
            return Outcome::hit(req);
        }
        if !self.can_insert(req, ev) {
            return Outcome::miss(0);
        }
        while self.occupied + req.size as i64 > self.capacity as i64 {
            let before = (self.occupied, self.s.len(), self.q.len());
            self.evict(req, ev);
            if (self.occupied, self.s.len(), self.q.len()) == before && !self.evict_hir(ev) && !self.evict_lir(ev) {
                return Outcome::miss(0);
            }
        }
        Outcome::miss(self.insert(req))
    }
}

impl Policy for Lirs {
    fn build(capacity: u64, params: &Params) -> Result<Self, String> {
        let ratio = params.fraction("hir_ratio", 0.01, false)?;
        let hirs_limit = ((ratio * capacity as f64) as u64).max(1);
        Ok(Lirs {
            capacity,
            lirs_limit: capacity.saturating_sub(hirs_limit),
            hirs_limit,
            lirs_count: 0,
            hirs_count: 0,
            nonresident: 0,
            occupied: 0,
            n_obj: 0,
            s_bytes: 0,
            map: Map::default(),
            arena: Arena::new(),
            s: List::default(),
            q: List::default(),
            nh: List::default(),
        })
    }

    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        let out = self.get(req, ev);
        self.limit_stack();
        out
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        let resident = self.contains(id);
        let sl = self.slots(id);
        if sl.s != NIL {
            let n = self.s_remove(sl.s);
            if n.is_lir {
                self.lirs_count = self.lirs_count.wrapping_sub(n.size);
                self.occupied -= n.size as i64;
                self.n_obj -= 1;
                self.prune();
            } else if n.in_cache {
                // counted once, through its Q record (a Q-less resident record is not counted)
                if sl.q != NIL {
                    self.hirs_count = self.hirs_count.wrapping_sub(n.size);
                    self.occupied -= n.size as i64;
                    self.n_obj -= 1;
                }
            } else {
                self.nonresident = self.nonresident.wrapping_sub(n.size);
            }
            if sl.q != NIL {
                self.q_remove(sl.q);
            }
        } else if sl.q != NIL {
            let n = self.q_remove(sl.q);
            self.hirs_count = self.hirs_count.wrapping_sub(n.size);
            self.occupied -= n.size as i64;
            self.n_obj -= 1;
        }
        self.nh_remove(id);
        resident.then_some(0)
    }

    fn contains(&self, id: u64) -> bool {
        let sl = self.slots(id);
        (sl.s != NIL && self.node(sl.s).in_cache) || (sl.q != NIL && self.node(sl.q).in_cache)
    }
    fn used_bytes(&self) -> u64 {
        self.occupied.max(0) as u64
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn len(&self) -> usize {
        self.n_obj.max(0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;

    fn lirs(capacity: u64, hir_ratio: f64) -> AnyPolicy {
        with_params("lirs", capacity, &[("hir_ratio", hir_ratio)])
    }

    #[test]
    fn golden_unit_sizes() {
        // capacity 3, hir_ratio 0.34: hirs_limit 1, lirs_limit 2. S listed top → bottom,
        // L = LIR, H = resident HIR, N = non-resident HIR; Q listed newest → front.
        // a: unknown, LIR set has room → LIR. S=[aL].   b: LIR. S=[bL aL] (LIR set full).
        // c: unknown; LIR full, HIR has room (0+1 ≤ 1) → resident HIR: S=[cH bL aL] Q=[c].
        // d: unknown; LIR and HIR full → evict Q's front c (its S record becomes N, NH=[c]);
        //    d → resident HIR: S=[dH cN bL aL] Q=[d].
        // c: miss on a non-resident HIR record of S (it moves to S's top). Admission: 2+1 > 2 →
        //    demote the bottom LIR a: Q makes room by evicting d (d's S record → N), a joins Q;
        //    pruning stops at bL. c's NH entry goes; c becomes LIR. S=[cL dN bL] Q=[a].
        // a: resident HIR only in Q → hit. LIR room: 2+1 > 2 → demote b: Q makes room by
        //    evicting a's own Q record; b joins Q; pruning drops dN. a was evicted by its own hit
        //    (the difference to libCacheSim in the module doc): it gets a non-resident record.
        //    S=[aN cL] Q=[b].
        // b: resident HIR only in Q → hit; 1+1 ≤ 2, no demotion. S=[bH aN cL] Q=[b].
        // c: LIR hit; S=[cL bH aN]; pruning removes aN and bH from the bottom (b keeps its Q
        //    record). S=[cL] Q=[b].
        // d: unknown again (its N record was pruned); 1+1 ≤ 2 → LIR. S=[dL cL] Q=[b].
        // b: resident HIR only in Q → hit; 2+1 > 2 → demote c: Q makes room by evicting b's Q
        //    record; c joins Q; b keeps a non-resident record. S=[bN dL] Q=[c].
        let mut p = lirs(3, 0.34);
        assert_eq!(replay(&mut p, &unit("abcdcabcdb")), "mmmmmHHHmH");
        assert_eq!((p.used_bytes(), p.len()), (2, 2));
        assert!(p.contains(b'c' as u64) && p.contains(b'd' as u64) && !p.contains(b'b' as u64));
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 100, hir_ratio 0.3: hirs_limit 30, lirs_limit 70.
        // A31 > hirs_limit → never cached (libCacheSim's rule). B200 > capacity → not cached.
        // C30 D30 → LIR (60). E20: 60+20 > 70 but HIR has room → resident HIR. S=[EH DL CL] Q=[E].
        // C: LIR hit. S=[CL EH DL].
        // F15: LIR (75 > 70) and HIR (35 > 30) would overflow → evict E (its S record → N);
        //     F → resident HIR. S=[FH CL EN DL] Q=[F], 75 bytes.
        // E: non-resident HIR in S → moves to the top; admission: 60+20 > 70 → demote the
        //     bottom LIR D (30): Q makes room by evicting F (F's S record → N), D joins Q; pruning
        //     stops at CL. E → LIR. S=[EL FN CL] Q=[D]: LIR 50, HIR 30, 80 bytes.
        // C: LIR hit; S=[CL EL FN] → pruning drops FN (and its NH entry). E: LIR hit.
        // F15: unknown again; 50+15 ≤ 70 → LIR (95 bytes).
        // G10: LIR (75) and HIR (40) would overflow → evict D (Q's front, no S record);
        //     G → resident HIR. 75 bytes.
        // D30: unknown; both would overflow → evict G (its S record → N); D → HIR. 95 bytes:
        //     C30 E20 F15 LIR, D30 HIR.
        let mut p = lirs(100, 0.3);
        let t = [(1, 31), (2, 200), (3, 30), (4, 30), (5, 20), (3, 30), (6, 15), (5, 20), (3, 30), (5, 20), (6, 15), (7, 10), (4, 30)];
        assert_eq!(replay(&mut p, &t), "mmmmmHmmHHmmm");
        assert_eq!((p.used_bytes(), p.len()), (95, 4));
        assert!(!p.contains(7));
        assert!(p.remove(3).is_some());
        assert_eq!((p.used_bytes(), p.len()), (65, 3));
        assert!(p.remove(3).is_none());
        // G is only a non-resident record: remove reports false and forgets it
        assert!(p.remove(7).is_none());
    }

    #[test]
    fn remove_forgets_history() {
        // capacity 3 as in golden_unit_sizes: after "abcd", c is a non-resident HIR record.
        // Without remove, c's next miss is an admission straight into the LIR set (c hits next).
        // remove(c) reports false (not resident) and drops the record: c comes back as an
        // unknown file, resident HIR in Q, and the next unknown e evicts it.
        let mut p = lirs(3, 0.34);
        assert_eq!(replay(&mut p, &unit("abcd")), "mmmm");
        assert!(p.remove(b'c' as u64).is_none());
        assert_eq!(replay(&mut p, &unit("ce c")), "mmm");
        let mut q = lirs(3, 0.34);
        assert_eq!(replay(&mut q, &unit("abcd ce c")), "mmmmmmH");
    }
}
