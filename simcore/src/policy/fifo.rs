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
    /// Arrival time (`Request::ts`).
    born: u32,
}
resident::entry!(Entry);

#[derive(Clone, Serialize, Deserialize)]
pub struct Fifo {
    res: Resident<Entry>,
    queue: List,
}

impl Policy for Fifo {
    const KEEPS_ARRIVALS: bool = true;

    fn build(capacity: u64, _: &Params) -> Result<Self, String> {
        Ok(Fifo { res: Resident::new(capacity), queue: List::default() })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if self.res.contains(req.id) {
            return Outcome::hit(req);
        }
        let queue = &mut self.queue;
        let entry = Entry { id: req.id, size: req.size, tier: req.tier, born: req.ts };
        let admitted = self.res.admit(req, ev, entry, |r, ev| {
            let victim = r.arena().pop_back(queue).expect("used > 0 implies a resident file");
            r.evict(victim, ev);
        });
        match admitted {
            Some(slot) => {
                self.res.arena().push_front(&mut self.queue, slot);
                Outcome::admitted(req)
            }
            None => Outcome::miss(0),
        }
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        match self.res.slot(id) {
            Some(slot) => {
                self.res.arena().unlink(&mut self.queue, slot);
                Some(self.res.drop_slot(slot).born)
            }
            None => None,
        }
    }

    resident_queries!(res);
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
