//! LRU: evict the least recently used file.
//!
//! Byte-size rules are libCacheSim's (checked to the request against it on the shared trace):
//! a hit moves the file to the most-recent end; a miss inserts the file at that end after
//! evicting from the least-recent end while `used + size > capacity`; a file larger than the
//! whole cache is not inserted and evicts nothing.

use super::*;

#[derive(Clone, Copy, Default, Serialize, Deserialize)]
struct Entry {
    id: u64,
    size: u64,
    tier: u8,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Lru {
    capacity: u64,
    used: u64,
    map: Map<u32>,
    arena: Arena<Entry>,
    list: List,
}

impl Policy for Lru {
    fn build(capacity: u64, _: &Params) -> Result<Self, String> {
        Ok(Lru { capacity, used: 0, map: Map::default(), arena: Arena::new(), list: List::default() })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if let Some(&slot) = self.map.get(&req.id) {
            self.arena.move_to_front(&mut self.list, slot);
            return Outcome::hit(req);
        }
        if req.size > self.capacity {
            return Outcome::miss(0);
        }
        while self.used + req.size > self.capacity {
            let victim = self.arena.pop_back(&mut self.list).expect("used > 0 implies a resident file");
            let e = self.arena.release(victim);
            self.map.remove(&e.id);
            self.used -= e.size;
            ev.push(e.size, e.tier);
        }
        let slot = self.arena.alloc(Entry { id: req.id, size: req.size, tier: req.tier });
        self.arena.push_front(&mut self.list, slot);
        self.map.insert(req.id, slot);
        self.used += req.size;
        Outcome::miss(req.size)
    }

    fn remove(&mut self, id: u64) -> bool {
        match self.map.remove(&id) {
            Some(slot) => {
                self.arena.unlink(&mut self.list, slot);
                self.used -= self.arena.release(slot).size;
                true
            }
            None => false,
        }
    }

    fn contains(&self, id: u64) -> bool {
        self.map.contains_key(&id)
    }
    fn used_bytes(&self) -> u64 {
        self.used
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes() {
        // capacity 3: a b c fill (3 misses); a hits and becomes MRU; d evicts b (LRU);
        // b misses and evicts c; c misses and evicts a; a misses and evicts d.
        let mut p = policy("lru", 3);
        assert_eq!(replay(&mut p, &unit("abcadbca")), "mmmHmmmm");
    }

    #[test]
    fn golden_byte_sizes() {
        // capacity 10: A6 miss; B5 miss, evicts A (6+5>10); C3 miss (8); B hit;
        // D11 is larger than the cache: miss, not inserted, evicts nothing; C hit; B hit;
        // E10 exactly the capacity: evicts C and B, inserted; E hit.
        let mut p = policy("lru", 10);
        let t = [(1, 6), (2, 5), (3, 3), (2, 5), (4, 11), (3, 3), (2, 5), (5, 10), (5, 10)];
        assert_eq!(replay(&mut p, &t), "mmmHmHHmH");
        assert_eq!(p.used_bytes(), 10);
        assert!(p.remove(5));
        assert_eq!((p.used_bytes(), p.len()), (0, 0));
    }
}
