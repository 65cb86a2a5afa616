//! LRU: evict the least recently used file.
//!
//! Byte-size rules are libCacheSim's (checked to the request against it on the shared trace):
//! a hit moves the file to the most-recent end; a miss inserts the file at that end after
//! evicting from the least-recent end while `used + size > capacity`; a file larger than the
//! whole cache is not inserted and evicts nothing.

use super::*;

resident::entry!(struct Entry {});

#[derive(Clone, Serialize, Deserialize)]
pub struct Lru {
    res: Resident<Entry>,
    list: List,
}

impl Policy for Lru {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, _: &Params) -> Result<Self, String> {
        Ok(Lru { res: Resident::new(capacity), list: List::default() })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if let Some(slot) = self.res.slot(req.id) {
            self.res.arena().move_to_front(&mut self.list, slot);
            return Outcome::hit(req);
        }
        self.res.admit(req, ev, Entry::of(req), &mut self.list, Resident::evict_tail, Resident::push_head)
    }

    resident_queries!(res, list: list);
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes() {
        // capacity 3: a b c fill (3 misses); a hits and becomes MRU; d evicts b (LRU);
        // b misses and evicts c; c misses and evicts a; a misses and evicts d.
        golden("lru", 3, &unit("abcadbca"), "mmmHmmmm");
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 10: A6 miss; B5 miss, evicts A (6+5>10); C3 miss (8); B hit;
        // D11 is larger than the cache: miss, not inserted, evicts nothing; C hit; B hit;
        // E10 exactly the capacity: evicts C and B, inserted; E hit.
        let t = [(1, 6), (2, 5), (3, 3), (2, 5), (4, 11), (3, 3), (2, 5), (5, 10), (5, 10)];
        let mut p = golden("lru", 10, &t, "mmmHmHHmH");
        assert_eq!(p.used_bytes(), 10);
        assert!(p.remove(5).is_some());
        assert_eq!((p.used_bytes(), p.len()), (0, 0));
    }
}
