//! A bank's per-window counters as sparse cells: only the (window, cache, tier) cells a batch
//! touched come out, not a dense (windows, caches, tiers, fields) block.
//!
//! A replay of old logs has sparse windows (tens of events per minute) and the dense block of a
//! batch (64 windows × 24 caches × 64 tiers × 7 u128) cost more to zero, narrow and scan than
//! the caches themselves. Here each cache keeps one window's counters while consecutive events
//! fall in the same window (the usual case: events come in time order) and hands over the tiers
//! it touched when the window changes. A window met twice in a batch (out-of-order events)
//! gives two cells; the caller sums cells of equal (window, cache, tier).

use crate::bank::{Bank, Events, OP_READ};
use crate::policy::{needs_future, Evictions, Request};
use crate::shadow::Shadow;
use crate::stats::*;

/// Touched cells of a batch, in cache order (then in the order their windows ended).
#[derive(Default)]
pub struct Cells {
    pub window: Vec<u32>,
    pub cache: Vec<u32>,
    pub tier: Vec<u8>,
    /// N_FIELDS per cell, flat
    pub values: Vec<u64>,
}

struct Open {
    window: u32,
    block: Vec<Exact>,
    touched: Vec<u8>,
    seen: Vec<bool>,
}

impl Open {
    fn touch(&mut self, t: usize) {
        if !self.seen[t] {
            self.seen[t] = true;
            self.touched.push(t as u8);
        }
    }

    /// Hand over the touched tiers (ascending) of the open window, add them to the totals.
    fn flush(&mut self, shadow: &mut Shadow, cache: u32, out: &mut Cells, overflow: &mut Option<String>) {
        self.touched.sort_unstable();
        for &t in &self.touched {
            let t = t as usize;
            let c = self.block[t];
            if c.iter().any(|&v| v != 0) {
                add_exact(&mut shadow.totals[t], &c);
                match narrow(&c) {
                    Some(n) => {
                        out.window.push(self.window);
                        out.cache.push(cache);
                        out.tier.push(t as u8);
                        out.values.extend_from_slice(&n);
                    }
                    None if overflow.is_none() => {
                        *overflow = Some(format!(
                            "cache {cache}, window {}, tier {t}: a counter exceeds 2^64-1 within one window; feed shorter windows",
                            self.window
                        ))
                    }
                    None => {}
                }
            }
            self.block[t] = [0; N_FIELDS];
            self.seen[t] = false;
        }
        self.touched.clear();
    }
}

fn run_cache(shadow: &mut Shadow, cache: u32, ev: &Events, n_tiers: usize) -> (Cells, Option<String>) {
    let mut out = Cells::default();
    let mut overflow = None;
    let mut open = Open { window: 0, block: vec![[0; N_FIELDS]; n_tiers], touched: Vec::new(), seen: vec![false; n_tiers] };
    let mut evictions = Evictions::default();
    let mut first = true;
    for i in 0..ev.len() {
        let id = ev.id[i];
        if ev.op[i] != OP_READ {
            shadow.invalidate(id);
            continue;
        }
        let w = ev.window.map_or(0, |w| w[i]);
        if first || w != open.window {
            open.flush(shadow, cache, &mut out, &mut overflow);
            open.window = w;
            first = false;
        }
        let req = Request {
            id,
            size: ev.size[i],
            bytes_read: ev.bytes_read[i],
            tier: ev.tier[i],
            next_access: ev.next_access.map_or(u64::MAX, |n| n[i]),
        };
        if shadow.read(&req, &mut evictions, &mut open.block).is_some() {
            open.touch(req.tier as usize);
            for k in 0..evictions.items.len() {
                let t = evictions.items[k].1 as usize;
                open.touch(t);
            }
        }
    }
    open.flush(shadow, cache, &mut out, &mut overflow);
    (out, overflow)
}

/// Feed one batch (each event's window number in `ev.window`); returns the touched cells.
/// The caches and totals take the whole batch even when a cell's counter overflows u64 (then
/// an error names it, as `Bank::feed` does).
pub fn feed_cells(bank: &mut Bank, ev: &Events) -> Result<Cells, String> {
    ev.validate(bank.n_tiers)?;
    if bank.shadows.iter().any(|s| needs_future(&s.spec.policy)) && ev.next_access.is_none() {
        return Err("policy belady needs next-access times (offline replays only)".into());
    }
    let n_tiers = bank.n_tiers;
    let n_caches = bank.shadows.len();
    let parts: Vec<(Cells, Option<String>)> = if n_caches > 1 && ev.len() * n_caches >= 20_000 {
        use rayon::prelude::*;
        bank.shadows.par_iter_mut().enumerate().map(|(c, s)| run_cache(s, c as u32, ev, n_tiers)).collect()
    } else {
        bank.shadows.iter_mut().enumerate().map(|(c, s)| run_cache(s, c as u32, ev, n_tiers)).collect()
    };
    bank.events_seen += ev.len() as u64;
    let n: usize = parts.iter().map(|(p, _)| p.window.len()).sum();
    let mut out = Cells {
        window: Vec::with_capacity(n),
        cache: Vec::with_capacity(n),
        tier: Vec::with_capacity(n),
        values: Vec::with_capacity(n * N_FIELDS),
    };
    let mut overflow = None;
    for (p, o) in parts {
        out.window.extend_from_slice(&p.window);
        out.cache.extend_from_slice(&p.cache);
        out.tier.extend_from_slice(&p.tier);
        out.values.extend_from_slice(&p.values);
        if overflow.is_none() {
            overflow = o;
        }
    }
    match overflow {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shadow::CacheSpec;

    /// The cells summed per (window, cache, tier) equal the dense counters of `Bank::feed`,
    /// windows in order or not, and the totals agree.
    #[test]
    fn cells_sum_to_the_dense_counters() {
        let n = 5_000usize;
        let id: Vec<u64> = (0..n as u64).map(|i| (i * 7919) % 613).collect();
        let size: Vec<u64> = id.iter().map(|&i| 1_000 + (i * 37) % 5_000).collect();
        let tier: Vec<u8> = id.iter().map(|&i| (i % 5) as u8).collect();
        let op: Vec<u8> = (0..n).map(|i| if i % 97 == 0 { 2 } else { 0 }).collect();
        let window: Vec<u32> = (0..n).map(|i| ((i / 300) as u32 + if i % 50 == 0 { 3 } else { 0 }) % 20).collect();
        let specs: Vec<CacheSpec> =
            ["lru", "arc", "s3fifo"].iter().flat_map(|p| [100_000u64, 400_000].map(|c| CacheSpec::new(p, c))).collect();
        let mut dense_bank = Bank::new(specs.clone(), 8).unwrap();
        let mut cell_bank = Bank::new(specs, 8).unwrap();
        let ev = Events { id: &id, size: &size, bytes_read: &size, tier: &tier, op: &op, next_access: None, window: Some(&window) };
        let (n_windows, dense) = dense_bank.feed(&ev).unwrap();
        let cells = feed_cells(&mut cell_bank, &ev).unwrap();
        let n_caches = 6;
        let mut summed = vec![0u64; n_windows * n_caches * 8 * N_FIELDS];
        for k in 0..cells.window.len() {
            let dst = ((cells.window[k] as usize * n_caches + cells.cache[k] as usize) * 8 + cells.tier[k] as usize) * N_FIELDS;
            for f in 0..N_FIELDS {
                summed[dst + f] += cells.values[k * N_FIELDS + f];
            }
        }
        assert_eq!(summed, dense);
        assert_eq!(dense_bank.totals(), cell_bank.totals());
        assert_eq!(dense_bank.events_seen, cell_bank.events_seen);
    }
}
