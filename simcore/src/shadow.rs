//! One shadow cache: a policy (optionally split into hash partitions and/or spatially sampled)
//! plus its counters by tier.

use crate::policy::{AnyPolicy, Evictions, Map, Outcome, Params, Request, Stage};
use crate::stats::*;
use crate::util::hash::{partition_of, sample_hash, SAMPLE_MODULUS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one shadow cache is. `capacity` is the full (unsampled) byte capacity.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CacheSpec {
    pub policy: String,
    pub capacity: u64,
    pub params: BTreeMap<String, f64>,
    /// SHARDS fixed-rate spatial sampling: only files whose hash falls under the rate are
    /// simulated, in a miniature cache of capacity·rate. 1.0 = every file.
    pub sample_rate: f64,
    /// Hash-partitioned sub-caches of capacity C/P each (how a cache group spreads over workers).
    pub partitions: u32,
}

impl CacheSpec {
    pub fn new(policy: &str, capacity: u64) -> Self {
        CacheSpec { policy: policy.to_string(), capacity, params: BTreeMap::new(), sample_rate: 1.0, partitions: 1 }
    }
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Shadow {
    pub spec: CacheSpec,
    parts: Vec<AnyPolicy>,
    /// Files with sample_hash below this are simulated.
    threshold: u64,
    /// Cumulative counters, indexed by tier (exact: u128).
    pub totals: Vec<Exact>,
    /// Residence ages (reads with timestamps only). Most policies keep each file's arrival in
    /// its entry (already in the CPU's cache when the file is read or evicted) and report it;
    /// for the others (`side_table`: lirs, wtinylfu, xcache) the arrivals are kept here.
    born: Map<u32>,
    side_table: bool,
    /// Sum and number of the arrivals of the resident files whose arrival is known, and the
    /// cache's clock (the latest timestamp read, so out-of-order events never make an age
    /// negative; an arrival time of 0 means not known).
    born_sum: u64,
    timed: u64,
    clock: u32,
    /// ⌈born_sum / resident⌉, kept as fills and evictions change them, so a read (mostly hits,
    /// which change neither) finds the mean age without a division: ⌊(t·n − Σ)/n⌋ = t − ⌈Σ/n⌉.
    born_mean_ceil: u32,
}

/// Largest capacity a cache may have: 2^63 − 1 bytes (9.2 EB). Below it, a policy's byte
/// sums (resident bytes plus one file, ghost lists up to twice the capacity) fit in u64.
pub const MAX_CAPACITY: u64 = i64::MAX as u64;

impl Shadow {
    pub fn new(spec: CacheSpec, n_tiers: usize) -> Result<Self, String> {
        if !(spec.sample_rate > 0.0 && spec.sample_rate <= 1.0) {
            return Err(format!("sample_rate {} must be in (0, 1]", spec.sample_rate));
        }
        if spec.capacity > MAX_CAPACITY {
            return Err(format!("capacity {} bytes exceeds the largest cache simulated, 2^63-1 bytes (9.2 EB)", spec.capacity));
        }
        if spec.partitions == 0 {
            return Err("partitions must be at least 1".into());
        }
        let threshold = ((spec.sample_rate * SAMPLE_MODULUS as f64).round() as u64).clamp(1, SAMPLE_MODULUS);
        let scaled = if threshold == SAMPLE_MODULUS {
            spec.capacity
        } else {
            (spec.capacity as f64 * threshold as f64 / SAMPLE_MODULUS as f64).round() as u64
        };
        let p = spec.partitions as u64;
        let parts = (0..p)
            .map(|i| {
                // spread the remainder so the partitions add up to the whole capacity
                let cap = scaled / p + u64::from(i < scaled % p);
                AnyPolicy::new(&spec.policy, cap, &Params::new(spec.params.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let side_table = !parts[0].keeps_arrivals();
        Ok(Shadow {
            spec,
            parts,
            threshold,
            totals: vec![[0; N_FIELDS]; n_tiers],
            born: Map::default(),
            side_table,
            born_sum: 0,
            timed: 0,
            clock: 0,
            born_mean_ceil: 0,
        })
    }

    /// The fraction of files simulated (exactly as applied, after rounding to the hash modulus).
    pub fn effective_rate(&self) -> f64 {
        self.threshold as f64 / SAMPLE_MODULUS as f64
    }

    #[inline]
    fn sampled(&self, id: u64) -> bool {
        self.threshold == SAMPLE_MODULUS || sample_hash(id) < self.threshold
    }

    #[inline]
    fn part(&mut self, id: u64) -> &mut AnyPolicy {
        if self.parts.len() == 1 {
            &mut self.parts[0]
        } else {
            let i = partition_of(id, self.parts.len() as u32) as usize;
            &mut self.parts[i]
        }
    }

    /// Serve a read; adds to `window` (the caller's exact counters for this event's window, by
    /// tier). The caller adds its windows to `totals` once per batch (`add_to_totals`).
    #[inline]
    pub fn read(&mut self, req: &Request, ev: &mut Evictions, window: &mut [Exact]) -> Option<Outcome> {
        if !self.sampled(req.id) {
            return None;
        }
        let out = self.serve(req, ev, window);
        // files that came in under timed reads can leave under untimed ones: keep the sums true
        if self.timed != 0 && self.settle(ev, None, window) {
            self.refresh_mean();
        }
        Some(out)
    }

    #[inline(always)]
    fn serve(&mut self, req: &Request, ev: &mut Evictions, window: &mut [Exact]) -> Outcome {
        ev.items.clear();
        let out = self.part(req.id).access(req, ev);
        let c = &mut window[req.tier as usize];
        c[REQUESTS] += 1;
        c[HITS] += out.hit as u128;
        c[BYTES_REQUESTED] += req.bytes_read as u128;
        c[BYTES_HIT] += out.hit_bytes as u128;
        c[BYTES_FILLED] += out.filled as u128;
        for e in &ev.items {
            let c = &mut window[e.tier as usize];
            c[EVICTIONS] += 1;
            c[BYTES_EVICTED] += e.size as u128;
        }
        out
    }

    /// Take the evicted files' arrivals out of the sums; with `now`, also count how long each
    /// stayed. True when the sums changed.
    #[inline(always)]
    fn settle(&mut self, ev: &Evictions, now: Option<u32>, window: &mut [Exact]) -> bool {
        let mut changed = false;
        for e in &ev.items {
            let born = if self.side_table { self.born.remove(&e.id).unwrap_or(0) } else { e.born };
            if born != 0 {
                self.born_sum -= born as u64;
                self.timed -= 1;
                if let Some(now) = now {
                    window[e.tier as usize][EVICTED_AGE] += (now - born) as u128;
                }
                changed = true;
            }
        }
        changed
    }

    /// `read` at time `ts` (seconds), also counting residence ages: the mean age of the
    /// resident files as this read finds them, and how long each file it evicts stayed.
    #[inline]
    pub fn read_at(&mut self, req: &Request, ts: u32, ev: &mut Evictions, window: &mut [Exact]) -> Option<Outcome> {
        if !self.sampled(req.id) {
            return None;
        }
        self.clock = self.clock.max(ts);
        let now = self.clock;
        {
            let c = &mut window[req.tier as usize];
            if self.timed != 0 {
                c[RESIDENT_AGE] += (now - self.born_mean_ceil) as u128;
            }
            c[AGE_READS] += 1;
        }
        let req = Request { ts: now, ..*req };
        let out = self.serve(&req, ev, window);
        let mut changed = self.settle(ev, Some(now), window);
        let arrived = if self.side_table {
            // a partial fill of a file already resident (xcache blocks) keeps its first arrival
            out.filled > 0 && now != 0 && {
                let vacant = matches!(self.born.entry(req.id), std::collections::hash_map::Entry::Vacant(_));
                if vacant {
                    self.born.insert(req.id, now);
                }
                vacant
            }
        } else {
            out.arrived && now != 0
        };
        if arrived {
            self.born_sum += now as u64;
            self.timed += 1;
            changed = true;
        }
        if changed {
            self.refresh_mean();
        }
        Some(out)
    }

    #[inline]
    fn refresh_mean(&mut self) {
        let n = self.timed;
        self.born_mean_ceil = if n == 0 { 0 } else { self.born_sum.div_ceil(n) as u32 };
    }

    /// Resident files whose arrival time is known (reads with timestamps).
    pub fn timed_files(&self) -> usize {
        self.timed as usize
    }

    /// Keep arrivals in the side table even if the policy keeps them (tests compare the two).
    #[cfg(test)]
    pub(crate) fn use_side_table(&mut self) {
        self.side_table = true;
    }

    /// Memory hint for a read a few events ahead (no effect on results); see `Bank::run`.
    #[inline(always)]
    pub fn prefetch(&self, id: u64, stage: Stage) {
        if self.sampled(id) {
            let i = if self.parts.len() == 1 { 0 } else { partition_of(id, self.parts.len() as u32) as usize };
            self.parts[i].prefetch(id, stage);
        }
    }

    /// Add a batch's counters (windows × tiers, flat) to the cumulative totals.
    pub fn add_to_totals(&mut self, block: &[Exact]) {
        let n = self.totals.len();
        for (i, c) in block.iter().enumerate() {
            add_exact(&mut self.totals[i % n], c);
        }
    }

    /// A file was deleted or rewritten at the source: it leaves the cache.
    pub fn invalidate(&mut self, id: u64) -> bool {
        if !self.sampled(id) {
            return false;
        }
        let Some(born) = self.part(id).remove(id) else {
            return false;
        };
        let born = if self.side_table { self.born.remove(&id).unwrap_or(0) } else { born };
        if born != 0 {
            self.born_sum -= born as u64;
            self.timed -= 1;
            self.refresh_mean();
        }
        true
    }

    pub fn used_bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.used_bytes()).sum()
    }
    pub fn resident_files(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }
    pub fn contains(&self, id: u64) -> bool {
        self.sampled(id) && {
            let i = if self.parts.len() == 1 { 0 } else { partition_of(id, self.parts.len() as u32) as usize };
            self.parts[i].contains(id)
        }
    }
}
