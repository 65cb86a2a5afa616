//! One shadow cache: a policy (optionally split into hash partitions and/or spatially sampled)
//! plus its counters by tier.

use crate::policy::{AnyPolicy, Evictions, Map, Outcome, Params, Policy, Request, Stage};
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
    #[serde(with = "crate::stats::totals_serde")]
    pub totals: Vec<Exact>,
    /// Residence ages (reads with timestamps only).
    ages: Ages,
    /// Its policy takes dense file keys instead of ids (`Bank::use_dense_ids`).
    #[serde(default)]
    keyed: bool,
}

/// Residence-age bookkeeping of one shadow cache. Most policies keep each file's arrival in its
/// entry (already in the CPU's cache when the file is read or evicted) and report it; for the
/// others (`side_table`: lirs, wtinylfu, xcache) the arrivals are kept here.
#[derive(Clone, Default, Serialize, Deserialize)]
pub(crate) struct Ages {
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
            .map(|i| AnyPolicy::new(&spec.policy, share(scaled, p, i), &Params::new(spec.params.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        let side_table = !parts[0].keeps_arrivals();
        Ok(Shadow {
            spec,
            parts,
            threshold,
            totals: vec![[0; N_FIELDS]; n_tiers],
            ages: Ages { side_table, ..Ages::default() },
            keyed: false,
        })
    }

    /// The fraction of files simulated (exactly as applied, after rounding to the hash modulus).
    pub fn effective_rate(&self) -> f64 {
        self.threshold as f64 / SAMPLE_MODULUS as f64
    }

    /// Run `v` over this cache's server: its one policy, typed, when the cache is a single
    /// unsampled policy (the common case: one dispatch per batch instead of one per event, and
    /// the policy's code inlined into the loop), else its sampled and partitioned set.
    #[inline]
    pub(crate) fn dispatch<V: Visitor>(&mut self, v: V) -> V::Out {
        if self.parts.len() == 1 && self.threshold == SAMPLE_MODULUS {
            self.parts[0].visit(v, &mut self.ages)
        } else {
            v.visit(&mut Parts { parts: &mut self.parts, threshold: self.threshold }, &mut self.ages)
        }
    }

    #[inline]
    fn parts(&mut self) -> (Parts<'_>, &mut Ages) {
        (Parts { parts: &mut self.parts, threshold: self.threshold }, &mut self.ages)
    }

    /// Serve a read; adds to `window` (the caller's exact counters for this event's window, by
    /// tier). The caller adds its windows to `totals` once per batch (`add_to_totals`).
    #[inline]
    pub fn read(&mut self, req: &Request, ev: &mut Evictions, window: &mut [Exact]) -> Option<Outcome> {
        let (mut s, ages) = self.parts();
        read(&mut s, ages, req, None, ev, window)
    }

    /// `read` at time `ts` (seconds), also counting residence ages: the mean age of the
    /// resident files as this read finds them, and how long each file it evicts stayed.
    #[inline]
    pub fn read_at(&mut self, req: &Request, ts: u32, ev: &mut Evictions, window: &mut [Exact]) -> Option<Outcome> {
        let (mut s, ages) = self.parts();
        read(&mut s, ages, req, Some(ts), ev, window)
    }

    /// Take dense file keys instead of ids, if this cache can: one unsampled partition (those
    /// hash the id) of a policy that keeps no maps of its own. Before the first read.
    pub fn use_dense_ids(&mut self) -> bool {
        if !self.keyed && self.parts.len() == 1 && self.threshold == SAMPLE_MODULUS && self.totals_are_zero() {
            self.keyed = self.parts[0].use_dense_ids();
        }
        self.keyed
    }

    fn totals_are_zero(&self) -> bool {
        self.totals.iter().all(|c| c.iter().all(|&v| v == 0))
    }

    #[inline]
    pub fn keyed(&self) -> bool {
        self.keyed
    }

    /// Resident files whose arrival time is known (reads with timestamps).
    pub fn timed_files(&self) -> usize {
        self.ages.timed as usize
    }

    /// Keep arrivals in the side table even if the policy keeps them (tests compare the two).
    #[cfg(test)]
    pub(crate) fn use_side_table(&mut self) {
        self.ages.side_table = true;
    }

    /// Memory hint for a read a few events ahead (no effect on results); see `Bank::run`.
    #[inline(always)]
    pub fn prefetch(&mut self, id: u64, stage: Stage) {
        self.parts().0.prefetch(id, stage)
    }

    /// Add a batch's counters (windows × tiers, flat) to the cumulative totals.
    pub fn add_to_totals(&mut self, block: &[Exact]) {
        let n = self.totals.len();
        for (i, c) in block.iter().enumerate() {
            add_exact(&mut self.totals[i % n], c);
        }
    }

    /// Warm start of an xcache (see `XCache::seed`): each sampled file to its partition.
    pub fn seed(&mut self, files: &[(u64, u64, u32)]) -> Result<(), String> {
        if self.keyed {
            return Err("this cache takes dense file keys: seed it before its first read".into());
        }
        let n = self.parts.len();
        let mut by_part: Vec<Vec<(u64, u64, u32)>> = vec![Vec::new(); n];
        for &f in files {
            if self.threshold == SAMPLE_MODULUS || sample_hash(f.0) < self.threshold {
                by_part[partition(f.0, n)].push(f);
            }
        }
        let policy = self.spec.policy.clone();
        for (part, files) in self.parts.iter_mut().zip(by_part) {
            part.as_xcache_mut().ok_or_else(|| format!("policy {policy} cannot be seeded (only xcache)"))?.seed(&files)?;
        }
        Ok(())
    }

    /// The purge log of each partition of an xcache.
    pub fn purge_log(&mut self) -> Result<Vec<Vec<crate::policy::xcache::PurgeRecord>>, String> {
        let policy = self.spec.policy.clone();
        self.parts
            .iter_mut()
            .map(|p| p.as_xcache_mut().map(|x| x.purge_log()).ok_or_else(|| format!("policy {policy} has no purge log (only xcache)")))
            .collect()
    }

    /// A file was deleted or rewritten at the source: it leaves the cache.
    pub fn invalidate(&mut self, id: u64) -> bool {
        let (mut s, ages) = self.parts();
        invalidate(&mut s, ages, id)
    }

    pub fn used_bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.used_bytes()).sum()
    }
    pub fn resident_files(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }
    pub fn contains(&self, id: u64) -> bool {
        let sampled = self.threshold == SAMPLE_MODULUS || sample_hash(id) < self.threshold;
        sampled && self.parts[partition(id, self.parts.len())].contains(id)
    }
}

/// Partition `i`'s part of a capacity split `parts` ways: the remainder spread over the first
/// ones, so the parts add up to the whole (hash partitions, partitions routed by a column, and
/// the processing core's shards of a cache group all split this way).
#[inline]
pub fn share(capacity: u64, parts: u64, i: u64) -> u64 {
    capacity / parts + u64::from(i < capacity % parts)
}

/// Which of `n` partitions holds `id` (all in one when there is one).
#[inline(always)]
fn partition(id: u64, n: usize) -> usize {
    if n == 1 {
        0
    } else {
        partition_of(id, n as u32) as usize
    }
}

/// What the read loops need of a cache: which files it simulates, serving a read, dropping a
/// file (its arrival when it was resident) and memory hints.
pub(crate) trait Server {
    fn sampled(&self, id: u64) -> bool;
    fn serve(&mut self, req: &Request, ev: &mut Evictions) -> Outcome;
    fn drop_file(&mut self, id: u64) -> Option<u32>;
    fn prefetch(&self, id: u64, stage: Stage);
}

/// One policy serves every file.
impl<P: Policy> Server for P {
    #[inline(always)]
    fn sampled(&self, _: u64) -> bool {
        true
    }
    #[inline(always)]
    fn serve(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        self.access(req, ev)
    }
    #[inline(always)]
    fn drop_file(&mut self, id: u64) -> Option<u32> {
        self.remove(id)
    }
    #[inline(always)]
    fn prefetch(&self, id: u64, stage: Stage) {
        Policy::prefetch(self, id, stage)
    }
}

/// A shadow cache's sampled and hash-partitioned policies.
pub(crate) struct Parts<'a> {
    parts: &'a mut [AnyPolicy],
    threshold: u64,
}

impl Server for Parts<'_> {
    #[inline(always)]
    fn sampled(&self, id: u64) -> bool {
        self.threshold == SAMPLE_MODULUS || sample_hash(id) < self.threshold
    }
    #[inline(always)]
    fn serve(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        self.parts[partition(req.id, self.parts.len())].access(req, ev)
    }
    #[inline(always)]
    fn drop_file(&mut self, id: u64) -> Option<u32> {
        self.parts[partition(id, self.parts.len())].remove(id)
    }
    #[inline(always)]
    fn prefetch(&self, id: u64, stage: Stage) {
        if self.sampled(id) {
            self.parts[partition(id, self.parts.len())].prefetch(id, stage)
        }
    }
}

/// A loop over a batch, written once for any `Server` (see `Shadow::dispatch`).
pub(crate) trait Visitor {
    type Out;
    fn visit<S: Server>(self, s: &mut S, ages: &mut Ages) -> Self::Out;
}

/// Serve one read (with its event time: residence ages too); adds to `window` (the caller's
/// exact counters for this event's window, by tier). None: the file is not simulated.
#[inline(always)]
pub(crate) fn read<S: Server>(
    s: &mut S,
    ages: &mut Ages,
    req: &Request,
    ts: Option<u32>,
    ev: &mut Evictions,
    window: &mut [Exact],
) -> Option<Outcome> {
    if !s.sampled(req.id) {
        return None;
    }
    let Some(ts) = ts else {
        let out = serve(s, req, ev, window);
        // files that came in under timed reads can leave under untimed ones: keep the sums true
        if ages.timed != 0 && ages.settle(ev, None, window) {
            ages.refresh_mean();
        }
        return Some(out);
    };
    ages.clock = ages.clock.max(ts);
    let now = ages.clock;
    {
        let c = &mut window[req.tier as usize];
        if ages.timed != 0 {
            c[RESIDENT_AGE] += (now - ages.born_mean_ceil) as u128;
        }
        c[AGE_READS] += 1;
    }
    let req = Request { ts: now, ..*req };
    let out = serve(s, &req, ev, window);
    let mut changed = ages.settle(ev, Some(now), window);
    let arrived = if ages.side_table {
        // a partial fill of a file already resident (xcache blocks) keeps its first arrival
        out.filled > 0 && now != 0 && {
            let vacant = matches!(ages.born.entry(req.id), std::collections::hash_map::Entry::Vacant(_));
            if vacant {
                ages.born.insert(req.id, now);
            }
            vacant
        }
    } else {
        out.arrived && now != 0
    };
    if arrived {
        ages.born_sum += now as u64;
        ages.timed += 1;
        changed = true;
    }
    if changed {
        ages.refresh_mean();
    }
    Some(out)
}

#[inline(always)]
fn serve<S: Server>(s: &mut S, req: &Request, ev: &mut Evictions, window: &mut [Exact]) -> Outcome {
    ev.items.clear();
    let out = s.serve(req, ev);
    let c = &mut window[req.tier as usize];
    c[REQUESTS] += 1;
    c[HITS] += out.hit as u128;
    c[BYTES_REQUESTED] += req.bytes_read as u128;
    c[BYTES_HIT] += out.hit_bytes as u128;
    c[BYTES_FILLED] += out.filled as u128;
    c[DELAYED_HITS] += out.delayed as u128;
    c[BYTES_DELAYED] += out.delayed_bytes as u128;
    for e in &ev.items {
        let c = &mut window[e.tier as usize];
        c[EVICTIONS] += 1;
        c[BYTES_EVICTED] += e.size as u128;
    }
    out
}

/// A read the cache does not admit (`bank::OP_BYPASS`): a request and a miss of its tier when
/// the cache samples the file, as a cache that lets it pass by counts it; no state changes (no
/// hit even if a copy is resident, no fill, no eviction, no residence age).
#[inline(always)]
pub(crate) fn bypass<S: Server>(s: &S, req: &Request, window: &mut [Exact]) -> bool {
    if !s.sampled(req.id) {
        return false;
    }
    let c = &mut window[req.tier as usize];
    c[REQUESTS] += 1;
    c[BYTES_REQUESTED] += req.bytes_read as u128;
    true
}

/// A file was deleted or rewritten at the source: it leaves the cache. True if it was resident.
#[inline(always)]
pub(crate) fn invalidate<S: Server>(s: &mut S, ages: &mut Ages, id: u64) -> bool {
    if !s.sampled(id) {
        return false;
    }
    let Some(born) = s.drop_file(id) else {
        return false;
    };
    let born = if ages.side_table { ages.born.remove(&id).unwrap_or(0) } else { born };
    if born != 0 {
        ages.born_sum -= born as u64;
        ages.timed -= 1;
        ages.refresh_mean();
    }
    true
}

impl Ages {
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

    #[inline]
    fn refresh_mean(&mut self) {
        let n = self.timed;
        self.born_mean_ceil = if n == 0 { 0 } else { self.born_sum.div_ceil(n) as u32 };
    }
}
