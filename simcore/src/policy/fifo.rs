//! FIFO: evict the file inserted longest ago; hits change nothing.
//!
//! Byte-size rules are libCacheSim's (identical counts on the shared trace): evict from the
//! oldest end while `used + size > capacity`; a file larger than the cache is not inserted.

use super::*;

#[derive(Clone, Copy, Default, Serialize, Deserialize)]
struct Entry {
    id: u64,
    size: u64,
    tier: u8,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Fifo {
    capacity: u64,
    used: u64,
    map: Map<u32>,
    arena: Arena<Entry>,
    queue: List,
}

impl Policy for Fifo {
    fn build(capacity: u64, _: &Params) -> Result<Self, String> {
        Ok(Fifo { capacity, used: 0, map: Map::default(), arena: Arena::new(), queue: List::default() })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if self.map.contains_key(&req.id) {
            return Outcome::hit(req);
        }
        if req.size > self.capacity {
            return Outcome::miss(0);
        }
        while self.used + req.size > self.capacity {
            let victim = self.arena.pop_back(&mut self.queue).expect("used > 0 implies a resident file");
            let e = self.arena.release(victim);
            self.map.remove(&e.id);
            self.used -= e.size;
            ev.push(e.size, e.tier);
        }
        let slot = self.arena.alloc(Entry { id: req.id, size: req.size, tier: req.tier });
        self.arena.push_front(&mut self.queue, slot);
        self.map.insert(req.id, slot);
        self.used += req.size;
        Outcome::miss(req.size)
    }

    fn remove(&mut self, id: u64) -> bool {
        match self.map.remove(&id) {
            Some(slot) => {
                self.arena.unlink(&mut self.queue, slot);
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
        // capacity 3: a b c fill; a hits (no reordering); d evicts a (oldest insert);
        // b hits; a misses and evicts b; b misses and evicts c.
        let mut p = policy("fifo", 3);
        assert_eq!(replay(&mut p, &unit("abcadbab")), "mmmHmHmm");
    }
}
