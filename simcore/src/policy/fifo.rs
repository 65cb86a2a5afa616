//! FIFO: evict the file inserted longest ago; hits change nothing.
//!
//! Byte-size rules are libCacheSim's (identical counts on the shared trace): evict from the
//! oldest end while `used + size > capacity`; a file larger than the cache is not inserted.

use super::*;

resident::entry!(struct Entry {});

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
        self.res.admit(req, ev, Entry::of(req), &mut self.queue, Resident::evict_tail, Resident::push_head)
    }

    resident_queries!(res, list: queue);
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn golden_unit_sizes() {
        // capacity 3: a b c fill; a hits (no reordering); d evicts a (oldest insert);
        // b hits; a misses and evicts b; b misses and evicts c.
        golden("fifo", 3, &unit("abcadbab"), "mmmHmHmm");
    }
}
