//! Exact LRU miss-ratio curve in one pass, by requests and by bytes, for a grid of capacities.
//!
//! Byte-weighted stack distances: a Fenwick tree over access positions holds each file's size
//! at its last access, so the bytes of distinct files touched since a file's previous access
//! are one prefix sum, O(log n). With libCacheSim's rules (a file larger than the cache is never
//! inserted) a byte-capacity LRU cache always holds the longest most-recent prefix of the
//! recency stack, counting only files no larger than the cache, that fits; so a re-access of x
//! hits at capacity C iff size(x) ≤ C and size(x) + bytes of distinct files ≤ C accessed since
//! x's previous access ≤ C. Files larger than some grid capacities make that non-monotone in C:
//! for those few capacities (below the largest file seen) a second Fenwick tree sums the bytes
//! of the too-large files so they can be subtracted. Deletes remove the file from the stack (a
//! real cache would then hold a slightly shorter prefix until the next miss: documented error).
//!
//! Spatial sampling (SHARDS, Waldspurger et al., FAST'15): only files whose hash is below a
//! threshold T (rate R = T/2^24) are tracked, distances are scaled by 1/R and every sampled
//! access weighs 1/R. Fixed-rate, or fixed-size (SHARDS-adj: at most `max_objects` tracked,
//! lowering T and dropping the files above it when exceeded).

use crate::policy::Map;
use crate::util::fenwick::Fenwick;
use crate::util::hash::{sample_hash, SAMPLE_MODULUS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

const MIN_POSITIONS: usize = 1 << 16;

#[derive(Clone, Serialize, Deserialize)]
pub struct LruMrc {
    grid: Vec<u64>,
    n_tiers: usize,
    threshold: u64,
    max_objects: usize,
    by_hash: BTreeSet<(u64, u64)>,
    /// id -> (position of last access, size then)
    last: Map<(usize, u64)>,
    stack: Fenwick,
    live_bytes: u128,
    /// per grid capacity below the largest file: bytes of files larger than that capacity
    too_big: Vec<Option<Fenwick>>,
    too_big_bytes: Vec<u128>,
    /// first grid index whose capacity is ≥ every file seen
    monotone_from: usize,
    now: usize,
    /// smallest position space; compaction doubles beyond the live files
    min_positions: usize,
    /// everything since the start
    total: CurveAcc,
}

/// Curve counters of a set of accesses (the whole stream, or one window of a batch).
#[derive(Clone, Serialize, Deserialize)]
pub struct CurveAcc {
    /// (grid, tier, [hits, bytes_hit]) recorded per capacity
    direct: Vec<f64>,
    /// (grid, tier, [hits, bytes_hit]) recorded at the smallest hitting capacity; prefix-summed
    first_hit: Vec<f64>,
    /// (tier, [requests, bytes_requested])
    requested: Vec<f64>,
}

impl CurveAcc {
    fn new(k: usize, n_tiers: usize) -> Self {
        CurveAcc { direct: vec![0.0; k * n_tiers * 2], first_hit: vec![0.0; k * n_tiers * 2], requested: vec![0.0; n_tiers * 2] }
    }

    fn add(&mut self, other: &CurveAcc) {
        for (a, b) in [(&mut self.direct, &other.direct), (&mut self.first_hit, &other.first_hit), (&mut self.requested, &other.requested)] {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
    }

    /// (grid, tier, 2) hits and bytes hit at every capacity.
    pub fn hits(&self, n_tiers: usize) -> Vec<f64> {
        let row = n_tiers * 2;
        let k = self.direct.len() / row;
        let mut hits = self.direct.clone();
        let mut acc = vec![0.0; row];
        for j in 0..k {
            for x in 0..row {
                acc[x] += self.first_hit[j * row + x];
                hits[j * row + x] += acc[x];
            }
        }
        hits
    }

    /// (tier, 2) requests and bytes requested.
    pub fn requested(&self) -> &[f64] {
        &self.requested
    }
}

/// The curve: for each grid capacity and tier, estimated hits and bytes hit; plus requests.
pub struct Curve {
    pub grid: Vec<u64>,
    /// (grid, tier, 2): hits, bytes_hit
    pub hits: Vec<f64>,
    /// (tier, 2): requests, bytes_requested
    pub requested: Vec<f64>,
    pub sample_rate: f64,
    pub tracked_files: usize,
}

impl LruMrc {
    /// `grid`: capacities in bytes (sorted and deduplicated here). `sample_rate` 1.0 = exact.
    /// `max_objects` > 0 turns on fixed-size sampling starting from `sample_rate`.
    pub fn new(grid: &[u64], n_tiers: usize, sample_rate: f64, max_objects: usize) -> Result<Self, String> {
        if grid.is_empty() {
            return Err("the capacity grid is empty".into());
        }
        if !(sample_rate > 0.0 && sample_rate <= 1.0) {
            return Err(format!("sample_rate {sample_rate} must be in (0, 1]"));
        }
        if n_tiers == 0 || n_tiers > 256 {
            return Err(format!("n_tiers {n_tiers} must be in 1..=256"));
        }
        let mut grid = grid.to_vec();
        grid.sort_unstable();
        grid.dedup();
        let k = grid.len();
        Ok(LruMrc {
            threshold: ((sample_rate * SAMPLE_MODULUS as f64).round() as u64).clamp(1, SAMPLE_MODULUS),
            max_objects,
            by_hash: BTreeSet::new(),
            last: Map::default(),
            stack: Fenwick::new(MIN_POSITIONS),
            live_bytes: 0,
            too_big: vec![None; k],
            too_big_bytes: vec![0; k],
            monotone_from: 0,
            now: 1,
            total: CurveAcc::new(k, n_tiers),
            min_positions: MIN_POSITIONS,
            grid,
            n_tiers,
        })
    }

    fn rate(&self) -> f64 {
        self.threshold as f64 / SAMPLE_MODULUS as f64
    }

    #[inline]
    fn tracked(&self, id: u64) -> Option<u64> {
        if self.threshold == SAMPLE_MODULUS {
            return Some(0);
        }
        let h = sample_hash(id);
        (h < self.threshold).then_some(h)
    }

    #[inline]
    fn scale(&self, bytes: u128) -> u128 {
        if self.threshold == SAMPLE_MODULUS {
            bytes
        } else {
            (bytes as f64 / self.rate()).round() as u128
        }
    }

    /// One read of `size`-byte file `id` that transferred `bytes_read` bytes.
    pub fn read(&mut self, id: u64, size: u64, bytes_read: u64, tier: u8) {
        let mut total = std::mem::replace(&mut self.total, CurveAcc::new(0, 0));
        self.read_into(id, size, bytes_read, tier, &mut total);
        self.total = total;
    }

    /// Feed a batch; returns one accumulator per window (window numbers as in the bank).
    /// Ops other than read remove the file. Also adds everything to the running total.
    pub fn feed(&mut self, id: &[u64], size: &[u64], read: &[u64], tier: &[u8], op: &[u8], window: Option<&[u32]>) -> Vec<CurveAcc> {
        let n_windows = window.map_or(1, |w| w.iter().copied().max().map_or(1, |m| m as usize + 1));
        let mut accs = vec![CurveAcc::new(self.grid.len(), self.n_tiers); n_windows];
        for i in 0..id.len() {
            if op[i] == crate::bank::OP_READ {
                let w = window.map_or(0, |w| w[i] as usize);
                self.read_into(id[i], size[i], read[i], tier[i], &mut accs[w]);
            } else {
                self.remove(id[i]);
            }
        }
        for a in &accs {
            self.total.add(a);
        }
        accs
    }

    #[inline]
    fn read_into(&mut self, id: u64, size: u64, bytes_read: u64, tier: u8, acc: &mut CurveAcc) {
        let Some(h) = self.tracked(id) else { return };
        let w = 1.0 / self.rate();
        let t = tier as usize;
        acc.requested[t * 2] += w;
        acc.requested[t * 2 + 1] += w * bytes_read as f64;
        let k = self.grid.len();
        if let Some((p, old)) = self.last.remove(&id) {
            let between = self.live_bytes - self.stack.prefix(p);
            // capacities that no file exceeds: the curve is monotone, record the first hit only
            let need = self.scale(between) + size as u128;
            let j = self.monotone_from + self.grid[self.monotone_from..].partition_point(|&c| (c as u128) < need);
            if j < k {
                let at = (j * self.n_tiers + t) * 2;
                acc.first_hit[at] += w;
                acc.first_hit[at + 1] += w * bytes_read as f64;
            }
            for j in 0..self.monotone_from {
                let cap = self.grid[j];
                if size > cap {
                    continue;
                }
                let big = match &self.too_big[j] {
                    Some(f) => self.too_big_bytes[j] - f.prefix(p),
                    None => 0,
                };
                if self.scale(between - big) + size as u128 <= cap as u128 {
                    let at = (j * self.n_tiers + t) * 2;
                    acc.direct[at] += w;
                    acc.direct[at + 1] += w * bytes_read as f64;
                }
            }
            self.unplace(p, old);
        } else if self.max_objects > 0 {
            self.by_hash.insert((h, id));
        }
        self.place(id, size);
        if self.max_objects > 0 && self.last.len() > self.max_objects {
            self.lower_threshold();
        }
    }

    /// The file was deleted or rewritten: it leaves the stack.
    pub fn remove(&mut self, id: u64) {
        if let Some((p, old)) = self.last.remove(&id) {
            self.unplace(p, old);
            if self.max_objects > 0 {
                self.by_hash.remove(&(sample_hash(id), id));
            }
        }
    }

    fn unplace(&mut self, p: usize, size: u64) {
        self.stack.sub(p, size);
        self.live_bytes -= size as u128;
        for j in 0..self.monotone_from {
            if size > self.grid[j] {
                if let Some(f) = self.too_big[j].as_mut() {
                    f.sub(p, size);
                    self.too_big_bytes[j] -= size as u128;
                }
            }
        }
    }

    fn place(&mut self, id: u64, size: u64) {
        if self.now > self.stack.capacity() {
            self.compact();
        }
        let p = self.now;
        self.now += 1;
        self.stack.add(p, size);
        self.live_bytes += size as u128;
        let from = self.grid.partition_point(|&c| c < size);
        if from > self.monotone_from {
            self.monotone_from = from;
        }
        for j in 0..self.grid.len().min(from) {
            let cap = self.stack.capacity();
            self.too_big[j].get_or_insert_with(|| Fenwick::new(cap)).add(p, size);
            self.too_big_bytes[j] += size as u128;
        }
        self.last.insert(id, (p, size));
    }

    /// Renumber live positions 1..n when the position space is used up.
    fn compact(&mut self) {
        let mut live: Vec<(usize, u64, u64)> = self.last.iter().map(|(&id, &(p, s))| (p, id, s)).collect();
        live.sort_unstable();
        let cap = (live.len() * 2).max(self.min_positions);
        let sizes: Vec<u64> = live.iter().map(|e| e.2).collect();
        self.stack = Fenwick::from_values(&sizes, cap);
        for j in 0..self.grid.len() {
            if self.too_big[j].is_some() {
                let g = self.grid[j];
                let big: Vec<u64> = sizes.iter().map(|&s| if s > g { s } else { 0 }).collect();
                self.too_big[j] = Some(Fenwick::from_values(&big, cap));
            }
        }
        for (i, (_, id, s)) in live.into_iter().enumerate() {
            self.last.insert(id, (i + 1, s));
        }
        self.now = self.last.len() + 1;
    }

    /// Fixed-size SHARDS: drop the files with the largest hashes until within `max_objects`.
    fn lower_threshold(&mut self) {
        while self.last.len() > self.max_objects {
            let Some(&(h, _)) = self.by_hash.last() else { break };
            self.threshold = h;
            while let Some(&(h2, id)) = self.by_hash.last() {
                if h2 < h {
                    break;
                }
                self.by_hash.pop_last();
                if let Some((p, s)) = self.last.remove(&id) {
                    self.unplace(p, s);
                }
            }
        }
    }

    pub fn curve_tiers(&self) -> usize {
        self.n_tiers
    }

    pub fn curve(&self) -> Curve {
        Curve {
            grid: self.grid.clone(),
            hits: self.total.hits(self.n_tiers),
            requested: self.total.requested.clone(),
            sample_rate: self.rate(),
            tracked_files: self.last.len(),
        }
    }

    pub fn grid(&self) -> &[u64] {
        &self.grid
    }

    pub fn sample_rate(&self) -> f64 {
        self.rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{AnyPolicy, Evictions, Params, Request};

    /// The curve must equal separate LRU simulations at every grid capacity.
    fn check_against_simulation(trace: &[(u64, u64)], grid: &[u64]) {
        let mut mrc = LruMrc::new(grid, 1, 1.0, 0).unwrap();
        // a tiny position space: positions are renumbered every few dozen accesses
        mrc.min_positions = 32;
        mrc.stack = Fenwick::new(32);
        for &(id, size) in trace {
            mrc.read(id, size, size, 0);
        }
        let curve = mrc.curve();
        for (j, &cap) in curve.grid.iter().enumerate() {
            let mut lru = AnyPolicy::new("lru", cap, &Params::default()).unwrap();
            let mut ev = Evictions::default();
            let (mut hits, mut bytes) = (0u64, 0u64);
            for &(id, size) in trace {
                let o = lru.access(&Request { id, size, bytes_read: size, tier: 0, next_access: 0, ts: 0, duration_us: 0 }, &mut ev);
                hits += o.hit as u64;
                bytes += o.hit_bytes;
            }
            assert_eq!(curve.hits[j * 2] as u64, hits, "hits at capacity {cap}");
            assert_eq!(curve.hits[j * 2 + 1] as u64, bytes, "bytes hit at capacity {cap}");
        }
    }

    #[test]
    fn exact_against_lru_with_files_larger_than_small_caches() {
        let mut x = 12345u64;
        let trace: Vec<(u64, u64)> = (0..20_000)
            .map(|_| {
                x = crate::util::hash::mix64(x);
                let id = (x % 300) * (x % 7 + 1) % 400;
                (id, 1 + (crate::util::hash::mix64(id) % 50))
            })
            .collect();
        check_against_simulation(&trace, &[1, 10, 30, 49, 50, 64, 200, 700, 1500, 4000, 9000]);
    }

    #[test]
    fn windows_add_up_to_the_total() {
        let ids: Vec<u64> = (0..5000u64).map(|i| (i * 13) % 97).collect();
        let sizes: Vec<u64> = ids.iter().map(|i| 1 + i % 5).collect();
        let tiers = vec![0u8; ids.len()];
        let ops: Vec<u8> = (0..ids.len()).map(|i| if i % 50 == 49 { 2 } else { 0 }).collect();
        let windows: Vec<u32> = (0..ids.len() as u32).map(|i| i / 1000).collect();
        let mut a = LruMrc::new(&[10, 50, 200], 1, 1.0, 0).unwrap();
        let accs = a.feed(&ids, &sizes, &sizes, &tiers, &ops, Some(&windows));
        assert_eq!(accs.len(), 5);
        let mut sum = CurveAcc::new(3, 1);
        accs.iter().for_each(|x| sum.add(x));
        assert_eq!(sum.hits(1), a.curve().hits);
        assert!(accs.iter().all(|x| x.requested()[0] > 900.0));
    }

    #[test]
    fn compaction_keeps_distances() {
        // many distinct files and short reuses across several renumberings of the positions
        let mut x = 99u64;
        let trace: Vec<(u64, u64)> = (0..300_000u64)
            .map(|i| {
                x = crate::util::hash::mix64(x);
                let id = if x % 3 == 0 { i } else { i.saturating_sub(x % 50) };
                (id, 1 + id % 7)
            })
            .collect();
        check_against_simulation(&trace, &[20, 100, 500, 1200, 2500]);
    }
}
