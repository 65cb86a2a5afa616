//! A bank's per-window counters as sparse cells: only the (window, cache, tier) cells a batch
//! touched come out, not a dense (windows, caches, tiers, fields) block.
//!
//! A replay of old logs has sparse windows (tens of events per minute) and the dense block of a
//! batch (64 windows × 24 caches × 64 tiers × 7 u128) cost more to zero, narrow and scan than
//! the caches themselves. Here each cache keeps a hash map of the (window, tier) cells the batch
//! touched (log records come only roughly in time order: windows interleave) and hands them
//! over sorted by (window, tier). The caller sums the cells of a window over batches.

use crate::bank::{Bank, Events, OP_BYPASS, OP_READ};
use crate::policy::Evictions;
use crate::shadow::{bypass, invalidate, read, Ages, Server, Shadow, Visitor};
use crate::stats::*;

/// Touched cells of a batch, in (window, cache, tier) order (`feed_cells`; each cache's own in
/// (window, tier) order).
#[derive(Default)]
pub struct Cells {
    pub window: Vec<u32>,
    pub cache: Vec<u32>,
    pub tier: Vec<u8>,
    /// N_FIELDS per cell, flat
    pub values: Vec<u64>,
}

/// Cells of a batch at most this many (windows × tiers in use) are counted in a flat block per
/// cache (a few MB at most), more in a hash map: both give the same cells.
const FLAT_MAX_CELLS: usize = 1 << 16;

/// `flat`: (windows, tiers in use): count in a flat block instead of a hash map.
/// Each read of the batch through the cache; `sink(event, tier, counters)` gets every tier cell
/// the read touched (its own tier's and its evicted files'), once each. The counters land in a
/// per-tier scratch first, as `Shadow::read` writes them.
#[inline(always)]
fn for_each_read<F: FnMut(usize, usize, &Exact)>(shadow: &mut Shadow, ev: &Events, n_tiers: usize, sink: F) {
    let ev = &ev.for_cache(shadow);
    shadow.dispatch(EachRead { ev, n_tiers, sink })
}

struct EachRead<'a, 'b, F> {
    ev: &'a Events<'b>,
    n_tiers: usize,
    sink: F,
}

impl<F: FnMut(usize, usize, &Exact)> Visitor for EachRead<'_, '_, F> {
    type Out = ();
    #[inline(always)]
    fn visit<S: Server>(self, s: &mut S, ages: &mut Ages) {
        let EachRead { ev, n_tiers, mut sink } = self;
        let mut scratch = vec![[0u128; N_FIELDS]; n_tiers];
        let mut evictions = Evictions::default();
        for i in 0..ev.len() {
            let req = ev.request(i);
            let counted = match ev.op[i] {
                OP_READ => read(s, ages, &req, ev.ts.map(|t| t[i]), &mut evictions, &mut scratch).is_some(),
                OP_BYPASS => {
                    evictions.items.clear();
                    bypass(s, &req, &mut scratch)
                }
                _ => {
                    invalidate(s, ages, ev.id[i]);
                    false
                }
            };
            if counted {
                let own = req.tier as usize;
                for t in std::iter::once(own).chain(evictions.items.iter().map(|e| e.tier as usize)) {
                    if scratch[t] != [0; N_FIELDS] {
                        sink(i, t, &scratch[t]);
                        scratch[t] = [0; N_FIELDS];
                    }
                }
            }
        }
    }
}

fn run_cache(shadow: &mut Shadow, cache: u32, ev: &Events, n_tiers: usize, flat: Option<(usize, usize, usize)>) -> (Cells, Option<String>) {
    if let Some((n_windows, used, stride)) = flat {
        if n_windows * stride <= FLAT_MAX_CELLS {
            return run_cache_direct(shadow, cache, ev, stride, n_windows);
        }
        return run_cache_flat(shadow, cache, ev, n_tiers, n_windows, used);
    }
    // the counters of each (window, tier) the batch touched, keyed window << 8 | tier
    let mut cells: rustc_hash::FxHashMap<u64, Exact> = Default::default();
    for_each_read(shadow, ev, n_tiers, |i, t, c| {
        let key = (ev.window.map_or(0, |w| w[i]) as u64) << 8 | t as u64;
        add_exact(cells.entry(key).or_insert([0; N_FIELDS]), c);
    });
    let mut keys: Vec<u64> = cells.keys().copied().collect();
    keys.sort_unstable();
    let mut out = Cells::default();
    let mut overflow = None;
    for key in keys {
        emit(shadow, cache, (key >> 8) as u32, (key & 0xff) as usize, &cells[&key], &mut out, &mut overflow);
    }
    (out, overflow)
}

/// As the hash-map path, in a flat (windows, tiers in use) block: the tiers a cache may count
/// (a request's or an evicted file's) are the codes below `used`.
fn run_cache_flat(
    shadow: &mut Shadow,
    cache: u32,
    ev: &Events,
    n_tiers: usize,
    n_windows: usize,
    used: usize,
) -> (Cells, Option<String>) {
    let mut block = vec![[0u128; N_FIELDS]; n_windows * used];
    let mut strays: rustc_hash::FxHashMap<u64, Exact> = Default::default();
    for_each_read(shadow, ev, n_tiers, |i, t, c| {
        let w = ev.window.map_or(0, |w| w[i] as usize);
        if t < used {
            add_exact(&mut block[w * used + t], c);
        } else {
            // a file of a tier code the caller did not announce: counted all the same
            add_exact(strays.entry((w as u64) << 8 | t as u64).or_insert([0; N_FIELDS]), c);
        }
    });
    let mut out = Cells::default();
    let mut overflow = None;
    if strays.is_empty() {
        for (k, c) in block.iter().enumerate() {
            if c.iter().any(|&v| v != 0) {
                emit(shadow, cache, (k / used) as u32, k % used, c, &mut out, &mut overflow);
            }
        }
    } else {
        for (k, c) in block.iter().enumerate() {
            if c.iter().any(|&v| v != 0) {
                add_exact(strays.entry(((k / used) as u64) << 8 | (k % used) as u64).or_insert([0; N_FIELDS]), c);
            }
        }
        let mut keys: Vec<u64> = strays.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            emit(shadow, cache, (key >> 8) as u32, (key & 0xff) as usize, &strays[&key], &mut out, &mut overflow);
        }
    }
    (out, overflow)
}

/// Few windows (a live stream's batch, or a replay's of a few hundred minutes): the caches count
/// straight into a (windows, tiers) block, as `Bank::feed` does, and the touched cells are read
/// off it. `n_tiers`: every tier a read or an evicted file can have is below it (the bank's
/// `tiers_fed`: a block of the tiers in use, not of all, is less to zero and scan).
fn run_cache_direct(shadow: &mut Shadow, cache: u32, ev: &Events, n_tiers: usize, n_windows: usize) -> (Cells, Option<String>) {
    let mut block = vec![[0u128; N_FIELDS]; n_windows * n_tiers];
    crate::bank::feed_block(shadow, ev, &mut block, n_tiers, false, None);
    let mut out = Cells::default();
    let mut overflow = None;
    for (k, c) in block.iter().enumerate() {
        if c.iter().any(|&v| v != 0) {
            emit(shadow, cache, (k / n_tiers) as u32, k % n_tiers, c, &mut out, &mut overflow);
        }
    }
    (out, overflow)
}

/// One touched cell: into the totals and the output (narrowed to u64, or the overflow named).
fn emit(shadow: &mut Shadow, cache: u32, w: u32, t: usize, c: &Exact, out: &mut Cells, overflow: &mut Option<String>) {
    add_exact(&mut shadow.totals[t], c);
    match narrow(c) {
        Some(n) => {
            out.window.push(w);
            out.cache.push(cache);
            out.tier.push(t as u8);
            out.values.extend_from_slice(&n);
        }
        None if overflow.is_none() => {
            *overflow = Some(format!(
                "cache {cache}, window {w}, tier {t}: a counter exceeds 2^64-1 within one window; feed shorter windows"
            ))
        }
        None => {}
    }
}

/// Sum rows of `values` (`width` u64 each, flat) that share a key: (for each distinct key, in
/// ascending key order, the index of its first row; the rows' wrapping sums, flat). The
/// processing core's open windows are cells keyed by (window, cache, tier): their keys are dense
/// (windows × caches × tiers seen), so a table over the key range orders them in linear time; a
/// sparse key set falls back to a sort of (key, row) pairs.
pub fn sum_by_key(key: &[i64], values: &[u64], width: usize) -> (Vec<i64>, Vec<u64>) {
    let (Some(&lo), Some(&hi)) = (key.iter().min(), key.iter().max()) else { return (vec![], vec![]) };
    let range = (hi as i128 - lo as i128 + 1) as u128;
    if range <= (2 * key.len() + 4096) as u128 && key.len() < u32::MAX as usize {
        sum_dense(key, values, width, lo, range as usize)
    } else {
        sum_sorted(key, values, width)
    }
}

/// The rows of `blocks` (each rows × `width`, row-major), one after the other, as `width`
/// columns: the store's columnar form of the processing core's counter cells, in one pass.
pub fn stacked_columns(blocks: &[&[u64]], width: usize) -> Vec<u64> {
    let width = width.max(1);
    let n: usize = blocks.iter().map(|b| b.len() / width).sum();
    let mut out = vec![0u64; n * width];
    let mut i = 0;
    for b in blocks {
        for row in b.chunks_exact(width) {
            for (f, &v) in row.iter().enumerate() {
                out[f * n + i] = v;
            }
            i += 1;
        }
    }
    out
}

/// `sum_by_key` over a key range at most a few times the rows: each key's slot holds its first
/// row, then its rank among the keys present, which is where its sums go.
fn sum_dense(key: &[i64], values: &[u64], width: usize, lo: i64, range: usize) -> (Vec<i64>, Vec<u64>) {
    const NONE: u32 = u32::MAX;
    let mut slot = vec![NONE; range];
    for (i, &k) in key.iter().enumerate() {
        let s = &mut slot[(k - lo) as usize];
        if *s == NONE {
            *s = i as u32;
        }
    }
    let mut first = Vec::new();
    for s in slot.iter_mut().filter(|s| **s != NONE) {
        first.push(*s as i64);
        *s = (first.len() - 1) as u32;
    }
    let mut sums = vec![0u64; first.len() * width];
    for (row, &k) in values.chunks_exact(width.max(1)).zip(key) {
        let at = slot[(k - lo) as usize] as usize * width;
        for (a, &b) in sums[at..at + width].iter_mut().zip(row) {
            *a = a.wrapping_add(b);
        }
    }
    (first, sums)
}

fn sum_sorted(key: &[i64], values: &[u64], width: usize) -> (Vec<i64>, Vec<u64>) {
    let mut pairs: Vec<(i64, u32)> = key.iter().enumerate().map(|(i, &k)| (k, i as u32)).collect();
    pairs.sort_unstable();
    let mut first = Vec::new();
    let mut sums: Vec<u64> = Vec::new();
    let mut last = None;
    for (k, i) in pairs {
        let row = &values[i as usize * width..(i as usize + 1) * width];
        if last == Some(k) {
            let n = sums.len() - width;
            for (a, &b) in sums[n..].iter_mut().zip(row) {
                *a = a.wrapping_add(b);
            }
        } else {
            first.push(i as i64);
            sums.extend_from_slice(row);
            last = Some(k);
        }
    }
    (first, sums)
}

/// Feed one batch (each event's window number in `ev.window`); returns the touched cells.
/// `tiers_used`: every tier code fed so far is below it (the caller numbers tiers from 0 as it
/// meets them), so evicted files' tiers are too; None: any of n_tiers.
/// The caches and totals take the whole batch even when a cell's counter overflows u64 (then
/// an error names it, as `Bank::feed` does).
/// `parallel`: run the caches on all cores (rayon) when the batch pays for the hand-off. A caller
/// whose other threads are the slower chain (the embedded replay's store writer) passes false:
/// the caches then take one core and leave the other to that chain.
pub fn feed_cells(bank: &mut Bank, ev: &Events, tiers_used: Option<usize>, parallel: bool) -> Result<Cells, String> {
    if bank.routes != 0 || bank.salt != 0 {
        return Err("a bank routed by partitions or with salted ids is fed by `feed` (offline replays)".into());
    }
    let n_windows = bank.admit(ev)?;
    let used = tiers_used.unwrap_or(bank.n_tiers).clamp(1, bank.n_tiers);
    if let Some(i) = ev.tier.iter().position(|&t| t as usize >= used) {
        return Err(format!("event {i}: tier {} is not below tiers_used={used}", ev.tier[i]));
    }
    // the tiers a cell can have: of this batch's reads and of any cached file (evictions)
    let stride = bank.tiers_fed.map_or(bank.n_tiers, |fed| fed.max(used)).clamp(1, bank.n_tiers);
    let flat = (n_windows * used <= FLAT_MAX_CELLS).then_some((n_windows, used, stride));
    let n_tiers = bank.n_tiers;
    let n_caches = bank.shadows.len();
    let parts: Vec<(Cells, Option<String>)> = if parallel && n_caches > 1 && ev.len() * n_caches >= crate::bank::PARALLEL_MIN_WORK {
        use rayon::prelude::*;
        bank.shadows.par_iter_mut().enumerate().map(|(c, s)| run_cache(s, c as u32, ev, n_tiers, flat)).collect()
    } else {
        bank.shadows.iter_mut().enumerate().map(|(c, s)| run_cache(s, c as u32, ev, n_tiers, flat)).collect()
    };
    bank.events_seen += ev.len() as u64;
    let n: usize = parts.iter().map(|(p, _)| p.window.len()).sum();
    let mut out = Cells {
        window: Vec::with_capacity(n),
        cache: Vec::with_capacity(n),
        tier: Vec::with_capacity(n),
        values: Vec::with_capacity(n * N_FIELDS),
    };
    // each cache's cells come in (window, tier) order: merged window by window into (window,
    // cache, tier) order, the order the caller keeps its open windows in (it then sums only the
    // windows it already held, and closes windows by slicing)
    let mut at = vec![0usize; parts.len()];
    loop {
        let next = parts.iter().zip(&at).filter_map(|((p, _), &i)| p.window.get(i)).min().copied();
        let Some(w) = next else { break };
        for ((p, _), i) in parts.iter().zip(at.iter_mut()) {
            let from = *i;
            while *i < p.window.len() && p.window[*i] == w {
                *i += 1;
            }
            out.window.extend_from_slice(&p.window[from..*i]);
            out.cache.extend_from_slice(&p.cache[from..*i]);
            out.tier.extend_from_slice(&p.tier[from..*i]);
            out.values.extend_from_slice(&p.values[from * N_FIELDS..*i * N_FIELDS]);
        }
    }
    let overflow = parts.into_iter().find_map(|(_, o)| o);
    match overflow {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_by_key_sums_rows_of_a_key_in_key_order_from_their_first_row() {
        let key = [5i64, -1, 5, 3, -1, 5];
        let values = [1u64, 10, 2, 20, 3, 30, 4, 40, u64::MAX, 1, 6, 60];
        let (first, sums) = sum_by_key(&key, &values, 2);
        assert_eq!(first, vec![1, 3, 0]);
        assert_eq!(sums, vec![2u64.wrapping_add(u64::MAX), 21, 4, 40, 1 + 3 + 6, 10 + 30 + 60]);
        assert_eq!(sum_by_key(&[], &[], 3), (vec![], vec![]));
        // the same rows through the sort (keys spread far apart) and through the dense table
        let far: Vec<i64> = key.iter().map(|&k| k * 1_000_000_007).collect();
        assert_eq!(sum_sorted(&far, &values, 2), sum_by_key(&far, &values, 2));
        assert_eq!(sum_dense(&key, &values, 2, -1, 7), sum_sorted(&key, &values, 2));
    }

    #[test]
    fn stacked_columns_are_the_rows_of_every_block_transposed() {
        let (a, b, c) = ([1u64, 10, 2, 20], [3u64, 30], [4u64, 40, 5, 50]);
        let blocks: [&[u64]; 4] = [&a, &[], &b, &c];
        assert_eq!(stacked_columns(&blocks, 2), vec![1, 2, 3, 4, 5, 10, 20, 30, 40, 50]);
        assert_eq!(stacked_columns(&[], 3), Vec::<u64>::new());
    }

    /// On random keys, dense and sparse, with extreme values: the dense table and the sort agree.
    #[test]
    fn sum_by_key_dense_table_and_sort_agree() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (n, spread) in [(1usize, 1u64), (50, 3), (5_000, 100), (5_000, 20_000), (300, 1 << 40)] {
            let key: Vec<i64> = (0..n).map(|_| (next() % spread) as i64 - (spread / 2) as i64).collect();
            let values: Vec<u64> = (0..n * 3).map(|i| if i % 7 == 0 { u64::MAX - (next() % 3) } else { next() % 1000 }).collect();
            let sorted = sum_sorted(&key, &values, 3);
            assert_eq!(sum_by_key(&key, &values, 3), sorted, "n={n} spread={spread}");
            let lo = *key.iter().min().unwrap();
            let range = (*key.iter().max().unwrap() - lo + 1) as usize;
            if range < 1 << 24 {
                assert_eq!(sum_dense(&key, &values, 3, lo, range), sorted, "n={n} spread={spread}");
            }
        }
    }
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
        let ev = Events { id: &id, size: &size, bytes_read: &size, tier: &tier, op: &op, next_access: None, window: Some(&window), ts: None, key: None, duration_us: None };
        let (n_windows, dense) = dense_bank.feed(&ev).unwrap();
        let cells = feed_cells(&mut cell_bank, &ev, Some(5), true).unwrap();
        check(&cells, n_windows, &dense);
        // files of tiers 3 and 4 are evicted in later batches announced with tiers_used 3
        let later_tier: Vec<u8> = tier.iter().map(|&t| t % 3).collect();
        let later = Events { tier: &later_tier, ..ev };
        let (_, dense_later) = dense_bank.feed(&later).unwrap();
        let cells_later = feed_cells(&mut cell_bank, &later, Some(3), true).unwrap();
        check(&cells_later, n_windows, &dense_later);
        // 9,501 windows: too many for a block of all 8 tiers, not for one of the 5 tiers fed; the
        // caches one after the other in this thread (parallel = false) from here on
        let mut used_bank = Bank::new(specs_again(), 8).unwrap();
        let mid: Vec<u32> = window.iter().map(|&w| w * 500).collect();
        let ev_mid = Events { window: Some(&mid), ..ev };
        let got = feed_cells(&mut used_bank, &ev_mid, Some(5), false).unwrap();
        let unmid = Cells { window: got.window.iter().map(|w| w / 500).collect(), ..got };
        check(&unmid, n_windows, &dense);
        // a restored bank does not know the tiers fed: the flat path over the 3 tiers announced,
        // the files of tiers 3 and 4 it evicts counted apart; the same cells as the direct block
        let mut restored = Bank::restore(&used_bank.snapshot()).unwrap();
        assert_eq!(restored.tiers_fed, None);
        let mid_later = Events { window: Some(&mid), ..later };
        for bank in [&mut used_bank, &mut restored] {
            let got = feed_cells(bank, &mid_later, Some(3), false).unwrap();
            let unmid = Cells { window: got.window.iter().map(|w| w / 500).collect(), ..got };
            check(&unmid, n_windows, &dense_later);
            assert_eq!(dense_bank.totals(), bank.totals());
        }
        // the hash-map path (too many cells for a flat block) gives the same cells
        let mut hashed_bank = Bank::new(specs_again(), 8).unwrap();
        let wide: Vec<u32> = window.iter().map(|&w| w * 10_000).collect();
        let ev_wide = Events { window: Some(&wide), ..ev };
        let hashed = feed_cells(&mut hashed_bank, &ev_wide, None, false).unwrap();
        let unwide = Cells { window: hashed.window.iter().map(|w| w / 10_000).collect(), ..hashed };
        check(&unwide, n_windows, &dense);
        let wide_later = Events { window: Some(&wide), ..later };
        let hashed = feed_cells(&mut hashed_bank, &wide_later, None, true).unwrap();
        let unwide = Cells { window: hashed.window.iter().map(|w| w / 10_000).collect(), ..hashed };
        check(&unwide, n_windows, &dense_later);
        assert_eq!(dense_bank.totals(), hashed_bank.totals());
        assert_eq!(dense_bank.totals(), cell_bank.totals());
        assert_eq!(dense_bank.events_seen, cell_bank.events_seen);
    }

    fn specs_again() -> Vec<CacheSpec> {
        ["lru", "arc", "s3fifo"].iter().flat_map(|p| [100_000u64, 400_000].map(|c| CacheSpec::new(p, c))).collect()
    }

    fn check(cells: &Cells, n_windows: usize, dense: &[u64]) {
        let n_caches = 6;
        let mut summed = vec![0u64; n_windows * n_caches * 8 * N_FIELDS];
        for k in 0..cells.window.len() {
            let dst = ((cells.window[k] as usize * n_caches + cells.cache[k] as usize) * 8 + cells.tier[k] as usize) * N_FIELDS;
            for f in 0..N_FIELDS {
                summed[dst + f] += cells.values[k * N_FIELDS + f];
            }
        }
        assert_eq!(summed, dense);
        // one cell per (window, cache, tier), in that order
        let keys: Vec<(u32, u32, u8)> = (0..cells.window.len()).map(|k| (cells.window[k], cells.cache[k], cells.tier[k])).collect();
        assert!(keys.windows(2).all(|p| p[0] < p[1]), "cells out of (window, cache, tier) order");
    }
}
