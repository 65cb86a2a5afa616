//! A bank of shadow caches fed by one event stream, a batch at a time.
//!
//! Caches are the outer loop and events the inner one, so one cache's tables stay hot in the
//! CPU cache for a whole batch. Counters come out per (window, cache, tier, field), where the
//! caller numbers the windows of a batch (event-time windows are the caller's business).

use crate::policy::{needs_clock, needs_future, Evictions, Request, Stage};
use crate::shadow::{bypass, invalidate, read, share, Ages, CacheSpec, Server, Shadow, Visitor};
use crate::stats::*;
use serde::{Deserialize, Serialize};

pub const OP_READ: u8 = 0;
/// A file written (or overwritten) at the source: any cached copy is stale and leaves the cache.
pub const OP_WRITE: u8 = 1;
/// A file deleted at the source leaves every shadow cache.
pub const OP_DELETE: u8 = 2;
/// A read the cache does not admit (an admission filter excludes its tier or size): a request
/// and a miss of its tier in every cache that samples the file, never inserted, changing no
/// cache's state (`shadow::bypass`). An op code rather than a separate mask because the op
/// column already says what each row does to a cache: a bypass is a fourth thing a row can do,
/// with nothing more to validate, gather per partition or keep aligned with the windows, and
/// the all-reads fast path (`Events::uniform_tier`) is left by it as by a write.
pub const OP_BYPASS: u8 = 3;

/// Columns of one batch; all slices have the same length.
#[derive(Clone, Copy)]
pub struct Events<'a> {
    pub id: &'a [u64],
    pub size: &'a [u64],
    pub bytes_read: &'a [u64],
    pub tier: &'a [u8],
    pub op: &'a [u8],
    /// Next-access times, needed only when the bank holds `belady`.
    pub next_access: Option<&'a [u64]>,
    /// Window number of each event within this batch (0-based); None = all in window 0.
    pub window: Option<&'a [u32]>,
    /// Event time in seconds: when given, the caches also count residence ages.
    pub ts: Option<&'a [u32]>,
    /// Each file's dense key (0, 1, 2, … in order of first appearance in the trace), for the
    /// caches that take dense ids (`Bank::use_dense_ids`); the others read `id`.
    pub key: Option<&'a [u64]>,
    /// Each access's duration in microseconds (0 = not known): `xcache`'s fetch times.
    pub duration_us: Option<&'a [u64]>,
}

impl Events<'_> {
    /// The batch as a cache that takes dense keys sees it.
    #[inline]
    pub(crate) fn for_cache(&self, shadow: &Shadow) -> Self {
        match (shadow.keyed(), self.key) {
            (true, Some(key)) => Events { id: key, ..*self },
            _ => *self,
        }
    }

    pub fn len(&self) -> usize {
        self.id.len()
    }
    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }

    /// Event `i` as the request of a read.
    #[inline(always)]
    pub fn request(&self, i: usize) -> Request {
        Request {
            id: self.id[i],
            size: self.size[i],
            bytes_read: self.bytes_read[i],
            tier: self.tier[i],
            next_access: self.next_access.map_or(u64::MAX, |n| n[i]),
            ts: 0,
            duration_us: self.duration_us.map_or(0, |d| d[i]),
        }
    }

    /// The tier of every row when the batch is all whole-file reads of one tier, untimed, in one
    /// window and without next-access times (a whole trace file mostly is): the read loops then
    /// load only ids and sizes, a third less memory traffic per cache and row.
    pub(crate) fn uniform_tier(&self) -> Option<u8> {
        if self.ts.is_some() || self.window.is_some() || self.next_access.is_some() || self.duration_us.is_some() {
            return None;
        }
        let t = *self.tier.first()?;
        let uniform = self.tier.iter().all(|&x| x == t) && self.op.iter().all(|&o| o == OP_READ) && self.bytes_read == self.size;
        uniform.then_some(t)
    }

    /// Checks the batch; errors name the column and the event index.
    pub fn validate(&self, n_tiers: usize) -> Result<usize, String> {
        let n = self.id.len();
        let cols: [(&str, usize); 4] =
            [("file_size", self.size.len()), ("bytes_read", self.bytes_read.len()), ("tier", self.tier.len()), ("op", self.op.len())];
        for (name, len) in cols {
            if len != n {
                return Err(format!("column {name} has {len} values, file_id has {n}"));
            }
        }
        let optional = [
            ("next_access", self.next_access.map(|c| c.len())),
            ("window", self.window.map(|c| c.len())),
            ("ts", self.ts.map(|c| c.len())),
            ("key", self.key.map(|c| c.len())),
            ("duration_us", self.duration_us.map(|c| c.len())),
        ];
        for (name, col) in optional {
            if let Some(len) = col {
                if len != n {
                    return Err(format!("column {name} has {len} values, file_id has {n}"));
                }
            }
        }
        if let Some(i) = self.tier.iter().position(|&t| t as usize >= n_tiers) {
            return Err(format!("event {i}: tier {} is not below n_tiers={n_tiers}", self.tier[i]));
        }
        if let Some(i) = self.op.iter().position(|&o| o > OP_BYPASS) {
            return Err(format!("event {i}: op {} is not 0 (read), 1 (write), 2 (delete) or 3 (read not admitted)", self.op[i]));
        }
        if let Some(i) = (0..n).find(|&i| self.bytes_read[i] > self.size[i]) {
            return Err(format!("event {i}: bytes_read {} exceeds file_size {}", self.bytes_read[i], self.size[i]));
        }
        Ok(self.window.map_or(1, |w| w.iter().copied().max().map_or(1, |m| m as usize + 1)))
    }
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Bank {
    pub n_tiers: usize,
    pub shadows: Vec<Shadow>,
    /// Events fed so far (all ops), for resumption checks.
    pub events_seen: u64,
    /// Every tier code fed so far is below it, so every cached file's is (None after a restore:
    /// not known). Lets a windowed batch count in a block of that many tiers, not all of them.
    #[serde(skip)]
    pub tiers_fed: Option<usize>,
    /// Caches routed by a partition column (`Bank::routed`): the number of partitions, each spec
    /// then one cache per partition, `shadows` laid out (partition, spec); 0 = not routed.
    /// Offline replays only: never in a snapshot (a routed bank refuses to be snapshotted).
    #[serde(skip)]
    pub routes: u32,
    /// File ids multiplied by this (odd) number before any cache sees them: a bijection of u64,
    /// so the sampled caches draw another, equally valid, hash sample (what-if's error bound).
    /// 0 = ids as given. Not in snapshots, as `routes`.
    #[serde(skip)]
    pub salt: u64,
    /// Threads a batch's caches run on (`Bank::with_threads`): 0 = rayon's global pool (every
    /// core), 1 = the calling thread only. Not in snapshots: a restored bank takes every core.
    #[serde(skip)]
    pub threads: usize,
}

/// One partition's rows of a batch, gathered (a routed bank's caches each see only theirs).
struct Gathered {
    id: Vec<u64>,
    size: Vec<u64>,
    bytes_read: Vec<u64>,
    tier: Vec<u8>,
    op: Vec<u8>,
    next_access: Option<Vec<u64>>,
    window: Option<Vec<u32>>,
    ts: Option<Vec<u32>>,
    key: Option<Vec<u64>>,
    clock: Option<Vec<u32>>,
}

impl Gathered {
    fn of(ev: &Events, clock: Option<&[u32]>, rows: &[u32]) -> Self {
        fn pick<T: Copy>(col: &[T], rows: &[u32]) -> Vec<T> {
            rows.iter().map(|&i| col[i as usize]).collect()
        }
        Gathered {
            id: pick(ev.id, rows),
            size: pick(ev.size, rows),
            bytes_read: pick(ev.bytes_read, rows),
            tier: pick(ev.tier, rows),
            op: pick(ev.op, rows),
            next_access: ev.next_access.map(|c| pick(c, rows)),
            window: ev.window.map(|c| pick(c, rows)),
            ts: ev.ts.map(|c| pick(c, rows)),
            key: ev.key.map(|c| pick(c, rows)),
            clock: clock.map(|c| pick(c, rows)),
        }
    }

    fn events(&self) -> Events<'_> {
        Events {
            id: &self.id,
            size: &self.size,
            bytes_read: &self.bytes_read,
            tier: &self.tier,
            op: &self.op,
            next_access: self.next_access.as_deref(),
            window: self.window.as_deref(),
            ts: self.ts.as_deref(),
            key: self.key.as_deref(),
            duration_us: None,
        }
    }
}

/// Rows of each of `routes` partitions, in batch order; refuses a partition out of range.
fn rows_by_partition(part: &[u32], n: usize, routes: u32) -> Result<Vec<Vec<u32>>, String> {
    if part.len() != n {
        return Err(format!("column partition has {} values, file_id has {n}", part.len()));
    }
    let mut rows = vec![Vec::new(); routes as usize];
    for (i, &p) in part.iter().enumerate() {
        rows.get_mut(p as usize).ok_or_else(|| format!("event {i}: partition {p} is not below {routes}"))?.push(i as u32);
    }
    Ok(rows)
}

/// Events between a prefetch hint and the read it is for.
const AHEAD: usize = 8;

/// Cache-accesses in a batch below which threads cost more than they save.
pub(crate) const PARALLEL_MIN_WORK: usize = 20_000;

const SNAPSHOT_MAGIC: &[u8; 8] = b"CSBANK\0\0";
/// Bump when the serialized layout of any policy changes; old snapshots are then refused.
pub const SNAPSHOT_VERSION: u32 = 6; // 2: totals are u128; 3: residence ages; 4: arrivals in entries; 5: xcache's purge clock; 6: fetch times, delayed hits, xcache's ResourceMonitor beats (xrootd_version)

/// One batch through one cache into `block` ((windows, per_cache) counters); with event times,
/// residence ages too. `uniform`: the batch's `Events::uniform_tier`, found once for all caches.
pub(crate) fn feed_block(shadow: &mut Shadow, ev: &Events, block: &mut [Exact], per_cache: usize, hints: bool, uniform: Option<u8>) {
    feed_block_at(shadow, ev, block, per_cache, hints, uniform, None)
}

/// `feed_block` with `clock`: event times (seconds) for a policy that runs on them
/// (`needs_clock`: xcache's purges) when the batch has no `ts`; no residence ages are counted.
#[allow(clippy::too_many_arguments)]
pub(crate) fn feed_block_at(
    shadow: &mut Shadow,
    ev: &Events,
    block: &mut [Exact],
    per_cache: usize,
    hints: bool,
    uniform: Option<u8>,
    clock: Option<&[u32]>,
) {
    let clock = if needs_clock(&shadow.spec.policy) { clock } else { None };
    let ev = &ev.for_cache(shadow);
    shadow.dispatch(FeedBlock { ev, block, per_cache, hints, uniform, clock })
}

/// One batch through one cache, added to its totals; returns the batch's counters
/// ((windows, per_cache) blocks).
#[allow(clippy::too_many_arguments)]
pub(crate) fn feed_cache(
    shadow: &mut Shadow,
    ev: &Events,
    n_windows: usize,
    per_cache: usize,
    hints: bool,
    uniform: Option<u8>,
    clock: Option<&[u32]>,
) -> Vec<Exact> {
    let mut block = vec![[0u128; N_FIELDS]; n_windows * per_cache];
    feed_block_at(shadow, ev, &mut block, per_cache, hints, uniform, clock);
    shadow.add_to_totals(&block);
    block
}

struct FeedBlock<'a, 'b> {
    ev: &'a Events<'b>,
    block: &'a mut [Exact],
    per_cache: usize,
    hints: bool,
    uniform: Option<u8>,
    /// Event times for this cache's policy (when it runs on them and `ts` is not given).
    clock: Option<&'a [u32]>,
}

impl Visitor for FeedBlock<'_, '_> {
    type Out = ();
    #[inline(always)]
    fn visit<S: Server>(self, s: &mut S, ages: &mut Ages) {
        // one loop per case, so the untimed loop carries nothing of the ages and the uniform one
        // reads two columns
        let ev = self.ev;
        match (ev.ts, self.uniform) {
            (Some(ts), _) => self.feed(s, ages, |i| Some(ts[i]), |i| (ev.op[i] == OP_READ).then(|| ev.request(i))),
            (None, _) if self.clock.is_some() => {
                let clock = self.clock.unwrap_or_default();
                self.feed(s, ages, |_| None, |i| (ev.op[i] == OP_READ).then(|| Request { ts: clock[i], ..ev.request(i) }))
            }
            (None, Some(tier)) => self.feed(s, ages, |_| None, |i| {
                let (id, size) = (ev.id[i], ev.size[i]);
                Some(Request { id, size, bytes_read: size, tier, next_access: u64::MAX, ts: 0, duration_us: 0 })
            }),
            (None, None) => self.feed(s, ages, |_| None, |i| (ev.op[i] == OP_READ).then(|| ev.request(i))),
        }
    }
}

impl FeedBlock<'_, '_> {
    #[inline(always)]
    /// `request(i)`: event i as a read, None for a write or delete.
    fn feed<S: Server>(self, s: &mut S, ages: &mut Ages, ts: impl Fn(usize) -> Option<u32>, request: impl Fn(usize) -> Option<Request>) {
        let FeedBlock { ev, block, per_cache, hints, .. } = self;
        let mut evictions = Evictions::default();
        let n = ev.len();
        for i in 0..n {
            // software pipeline of memory loads (large caches are bound by them): the map
            // place of the read 2·AHEAD events on, then the entry of the one AHEAD on
            if hints && i + 2 * AHEAD < n {
                s.prefetch(ev.id[i + 2 * AHEAD], Stage::Place);
            }
            if hints && i + AHEAD < n {
                s.prefetch(ev.id[i + AHEAD], Stage::Entry);
            }
            let Some(req) = request(i) else {
                if ev.op[i] == OP_BYPASS {
                    let base = ev.window.map_or(0, |w| w[i] as usize) * per_cache;
                    bypass(s, &ev.request(i), &mut block[base..base + per_cache]);
                } else {
                    invalidate(s, ages, ev.id[i]);
                }
                continue;
            };
            let base = ev.window.map_or(0, |w| w[i] as usize) * per_cache;
            read(s, ages, &req, ts(i), &mut evictions, &mut block[base..base + per_cache]);
        }
    }
}

impl Bank {
    pub fn new(specs: Vec<CacheSpec>, n_tiers: usize) -> Result<Self, String> {
        if n_tiers == 0 || n_tiers > 256 {
            return Err(format!("n_tiers {n_tiers} must be in 1..=256"));
        }
        let shadows = specs.into_iter().map(|s| Shadow::new(s, n_tiers)).collect::<Result<Vec<_>, _>>()?;
        Ok(Bank { n_tiers, shadows, events_seen: 0, tiers_fed: Some(0), routes: 0, salt: 0, threads: 0 })
    }

    /// A bank whose caches are split by a partition column given with each batch (e.g. the
    /// server of each access: one cache per server): each spec becomes `routes` caches, partition
    /// i's of `share(capacity, routes, i)` bytes, each fed only its partition's rows. Counters
    /// come back summed over the partitions per spec (`feed_by_partition`: also by partition).
    /// Specs must not be hash-partitioned themselves.
    pub fn routed(specs: Vec<CacheSpec>, n_tiers: usize, routes: u32) -> Result<Self, String> {
        if routes == 0 {
            return Err("a bank routed by partitions needs at least one partition".into());
        }
        if let Some(s) = specs.iter().find(|s| s.partitions != 1) {
            return Err(format!("cache {} {}: a bank routed by a partition column takes unpartitioned caches", s.policy, s.capacity));
        }
        let split = (0..routes as u64)
            .flat_map(|i| specs.iter().map(move |s| CacheSpec { capacity: share(s.capacity, routes as u64, i), ..s.clone() }))
            .collect();
        Ok(Bank { routes, ..Bank::new(split, n_tiers)? })
    }

    /// This bank with its file ids salted (`salt`): an odd multiplier, applied to every batch.
    pub fn salted(self, salt: u64) -> Self {
        Bank { salt: salt | 1, ..self }
    }

    /// This bank with a batch's caches run on `threads` threads (0: every core; 1: the calling
    /// thread): the same counts on any number, each cache still sees its events in order.
    pub fn with_threads(self, threads: usize) -> Self {
        Bank { threads, ..self }
    }

    /// Caches per partition: the specs the bank was made of.
    pub fn n_specs(&self) -> usize {
        self.shadows.len() / (self.routes.max(1) as usize)
    }

    /// Whole-trace simulations: the caches that can take dense file keys (`Events::key`) do
    /// from now on (before the first batch). True if any does; batches must then carry keys.
    pub fn use_dense_ids(&mut self) -> bool {
        let mut any = false;
        for s in &mut self.shadows {
            any |= s.use_dense_ids();
        }
        any
    }

    pub fn needs_future(&self) -> bool {
        self.shadows.iter().any(|s| needs_future(&s.spec.policy))
    }

    /// Some cache runs on event time (`needs_clock`): a batch without `ts` should carry `clock`.
    pub fn needs_clock(&self) -> bool {
        self.shadows.iter().any(|s| needs_clock(&s.spec.policy))
    }

    /// Warm start of cache `cache` (an xcache, before its first read): files (id, cached bytes,
    /// last access in seconds) as the real cache holds them. Files outside the cache's sample
    /// are skipped; each goes to its partition.
    pub fn seed(&mut self, cache: usize, files: &[(u64, u64, u32)]) -> Result<(), String> {
        let shadow = self.shadows.get_mut(cache).ok_or_else(|| format!("no cache {cache} in this bank"))?;
        shadow.seed(files)
    }

    /// The purge log of cache `cache` (an xcache; per partition).
    pub fn purge_log(&mut self, cache: usize) -> Result<Vec<Vec<crate::policy::xcache::PurgeRecord>>, String> {
        let shadow = self.shadows.get_mut(cache).ok_or_else(|| format!("no cache {cache} in this bank"))?;
        shadow.purge_log()
    }

    /// Admit a batch about to be fed: it must be one this bank can take (`Events::validate`, plus
    /// the columns its caches need), and its tier codes join `tiers_fed`. Returns the batch's
    /// number of windows.
    pub(crate) fn admit(&mut self, ev: &Events) -> Result<usize, String> {
        let n_windows = ev.validate(self.n_tiers)?;
        if self.needs_future() && ev.next_access.is_none() {
            return Err("policy belady needs next-access times (offline replays only)".into());
        }
        if ev.key.is_none() && self.shadows.iter().any(|s| s.keyed()) {
            return Err("this bank takes dense file keys: every batch needs its key column".into());
        }
        let batch = ev.tier.iter().max().map_or(0, |&t| t as usize + 1);
        self.tiers_fed = self.tiers_fed.map(|b| b.max(batch));
        Ok(n_windows)
    }

    /// Run one batch through every cache; adds it to the totals and returns each cache's exact
    /// counters of this batch, shaped (windows, tiers).
    /// `part`: each event's partition, for a routed bank (`Bank::routed`) only; its caches are
    /// then fed their partition's rows and the blocks come out per (partition, spec).
    fn run(&mut self, ev: &Events, clock: Option<&[u32]>, part: Option<&[u32]>) -> Result<(usize, Vec<Vec<Exact>>), String> {
        if let Some(c) = clock {
            if c.len() != ev.len() {
                return Err(format!("column clock has {} values, file_id has {}", c.len(), ev.len()));
            }
        }
        let n_windows = self.admit(ev)?;
        let salted: Vec<u64>;
        let ev = &if self.salt != 0 {
            salted = ev.id.iter().map(|&id| id.wrapping_mul(self.salt)).collect();
            Events { id: &salted, ..*ev }
        } else {
            *ev
        };
        let gathered: Vec<Gathered> = match (self.routes, part) {
            (0, None) => Vec::new(),
            (0, Some(_)) => return Err("this bank is not routed by partitions: feed it without a partition column".into()),
            (_, None) => return Err("this bank routes its caches by partition: every batch needs its partition column".into()),
            (routes, Some(part)) => rows_by_partition(part, ev.len(), routes)?.iter().map(|rows| Gathered::of(ev, clock, rows)).collect(),
        };
        let subs: Vec<(Events, Option<&[u32]>, Option<u8>)> = if gathered.is_empty() {
            vec![(*ev, clock, ev.uniform_tier())]
        } else {
            gathered.iter().map(|g| (g.events(), g.clock.as_deref(), g.events().uniform_tier())).collect()
        };
        let per_cache = self.n_tiers;
        let n_caches = self.shadows.len();
        let n_specs = self.n_specs();
        // Caches are independent: run them on `threads` threads (0: all cores; RAYON_NUM_THREADS
        // limits it) when the batch is big enough to pay for the hand-off; each writes its own
        // (window, tier) block.
        // Prefetch hints pay when several caches share the CPU's caches (each batch finds the
        // others' tables evicted); one cache alone keeps its table warm and the hints only cost.
        let hints = n_caches > 1;
        let run = |(k, shadow): (usize, &mut Shadow)| {
            let (ev, clock, uniform) = &subs[k / n_specs];
            feed_cache(shadow, ev, n_windows, per_cache, hints, *uniform, *clock)
        };
        let blocks: Vec<Vec<Exact>> = if n_caches > 1 && self.threads != 1 && ev.len() * n_specs >= PARALLEL_MIN_WORK {
            use rayon::prelude::*;
            let shadows = &mut self.shadows;
            crate::util::pool::install(self.threads, || shadows.par_iter_mut().enumerate().map(run).collect())
        } else {
            self.shadows.iter_mut().enumerate().map(run).collect()
        };
        self.events_seen += ev.len() as u64;
        Ok((n_windows, blocks))
    }

    /// Feed one batch. Returns counters, flat, shaped (windows, caches, tiers, fields).
    ///
    /// Per-window counters are u64 (what numpy and the store take): 18.4 EB per window, cache and
    /// tier. A window past that is an error, never a wrapped number (the batch has then been
    /// applied to the caches and totals, which stay exact in u128).
    pub fn feed(&mut self, ev: &Events) -> Result<(usize, Vec<u64>), String> {
        self.feed_by_partition(ev, None).map(|(w, out, _)| (w, out))
    }

    /// `feed` of a routed bank (`part`: each event's partition; None for a bank not routed).
    /// Returns the counters summed over the partitions, shaped (windows, specs, tiers, fields),
    /// and those of each partition summed over the windows, shaped (partitions, specs, tiers,
    /// fields) (empty when not routed).
    pub fn feed_by_partition(&mut self, ev: &Events, part: Option<&[u32]>) -> Result<(usize, Vec<u64>, Vec<u64>), String> {
        let (n_windows, mut blocks) = self.run(ev, None, part)?;
        let (per_cache, n_specs) = (self.n_tiers, self.n_specs());
        let mut by_part = Vec::new();
        if self.routes > 0 {
            let mut sums = vec![[0u128; N_FIELDS]; blocks.len() * per_cache];
            for (k, block) in blocks.iter().enumerate() {
                for (j, exact) in block.iter().enumerate() {
                    add_exact(&mut sums[k * per_cache + j % per_cache], exact);
                }
            }
            by_part = narrow_all(&sums, "partition")?;
            // each spec's caches of every partition into its first one's block
            let rest = blocks.split_off(n_specs);
            for (k, block) in rest.iter().enumerate() {
                for (dst, src) in blocks[k % n_specs].iter_mut().zip(block.iter()) {
                    add_exact(dst, src);
                }
            }
        }
        let stride = per_cache * N_FIELDS;
        let mut out = vec![0u64; n_windows * n_specs * stride];
        for (c, block) in blocks.iter().enumerate() {
            for (k, exact) in block.iter().enumerate() {
                let (w, t) = (k / per_cache, k % per_cache);
                let narrow = narrow(exact).ok_or_else(|| {
                    format!("cache {c}, window {w}, tier {t}: a counter exceeds 2^64-1 within one window; feed shorter windows")
                })?;
                let dst = (w * n_specs + c) * stride + t * N_FIELDS;
                out[dst..dst + N_FIELDS].copy_from_slice(&narrow);
            }
        }
        Ok((n_windows, out, by_part))
    }

    /// Feed one batch into the totals only (no per-window output): what a whole-trace
    /// simulation needs, exact whatever the byte sums.
    pub fn feed_totals(&mut self, ev: &Events) -> Result<(), String> {
        self.run(ev, None, None).map(|_| ())
    }

    /// `feed_totals` with event times (seconds) for the caches that run on them (`needs_clock`)
    /// when the batch has no `ts`: a whole-trace run of xcache.
    pub fn feed_totals_at(&mut self, ev: &Events, clock: Option<&[u32]>) -> Result<(), String> {
        self.run(ev, clock, None).map(|_| ())
    }

    /// Cumulative counters (exact), flat, shaped (specs, tiers, fields): a routed bank's summed
    /// over its partitions.
    pub fn totals(&self) -> Vec<u128> {
        let n = self.n_specs();
        let mut out: Vec<Exact> = self.shadows[..n].iter().flat_map(|s| s.totals.iter().copied()).collect();
        for (k, s) in self.shadows.iter().enumerate().skip(n) {
            let base = (k % n) * self.n_tiers;
            for (t, c) in s.totals.iter().enumerate() {
                add_exact(&mut out[base + t], c);
            }
        }
        out.into_iter().flatten().collect()
    }

    /// Versioned binary snapshot of the whole bank (policies' state and counters).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 << 16);
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        postcard::to_io(self, &mut out).expect("writing to a Vec cannot fail");
        out
    }

    pub fn restore(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < 12 || &bytes[..8] != SNAPSHOT_MAGIC {
            return Err("not a cachescope bank snapshot".into());
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        // version 5 differs only in its counters (10 fields, no delayed hits) and in xcache's
        // entries (no fetch times): its other caches resume, an xcache's is refused below
        let fields = match version {
            SNAPSHOT_VERSION => N_FIELDS,
            5 => 10,
            _ => return Err(format!("snapshot format version {version}, this build reads version {SNAPSHOT_VERSION} (and 5)")),
        };
        let bank: Bank = crate::stats::totals_serde::with_read_fields(fields, || postcard::from_bytes(&bytes[12..]))
            .map_err(|e| format!("corrupt bank snapshot: {e}"))?;
        if version == 5 && bank.shadows.iter().any(|s| s.spec.policy == "xcache") {
            return Err("a version 5 snapshot holds an xcache, whose state this build cannot read: start it from empty state".into());
        }
        Ok(bank)
    }
}

/// Exact counters as u64, or an error naming the `what` (a cell past 2^64-1).
fn narrow_all(cells: &[Exact], what: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::with_capacity(cells.len() * N_FIELDS);
    for (k, exact) in cells.iter().enumerate() {
        out.extend_from_slice(&narrow(exact).ok_or_else(|| format!("{what} cell {k}: a counter exceeds 2^64-1 within one batch"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events<'a>(id: &'a [u64], size: &'a [u64], tier: &'a [u8], op: &'a [u8]) -> Events<'a> {
        Events { id, size, bytes_read: size, tier, op, next_access: None, window: None, ts: None, key: None, duration_us: None }
    }

    #[test]
    fn an_xcache_snapshot_round_trips_and_version_4_is_refused() {
        let xc = Bank::new(vec![CacheSpec::new("lru", 10), CacheSpec::new("xcache", 10)], 2).unwrap();
        assert!(Bank::restore(&xc.snapshot()).is_ok());
        let mut v4 = xc.snapshot();
        v4[8..12].copy_from_slice(&4u32.to_le_bytes());
        assert!(Bank::restore(&v4).err().unwrap().contains("version 4"));
    }

    #[test]
    fn deletes_leave_every_cache_and_tiers_split_counters() {
        let mut bank = Bank::new(vec![CacheSpec::new("lru", 10), CacheSpec::new("fifo", 10)], 2).unwrap();
        // read A(tier0), read A -> hit, delete A, read A -> miss again; B in tier 1 is read twice.
        let id = [1, 1, 1, 1, 2, 2];
        let size = [4, 4, 4, 4, 3, 3];
        let tier = [0, 0, 0, 0, 1, 1];
        let op = [0, 0, 2, 0, 0, 0];
        let (w, out) = bank.feed(&events(&id, &size, &tier, &op)).unwrap();
        assert_eq!(w, 1);
        for c in 0..2 {
            let t0 = &out[(c * 2) * N_FIELDS..(c * 2 + 1) * N_FIELDS];
            let t1 = &out[(c * 2 + 1) * N_FIELDS..(c * 2 + 2) * N_FIELDS];
            assert_eq!(&t0[..5], &[3, 1, 12, 4, 8]);
            assert_eq!(&t1[..5], &[2, 1, 6, 3, 3]);
        }
        assert_eq!(bank.totals(), out.iter().map(|&v| v as u128).collect::<Vec<_>>());
    }

    #[test]
    fn uniform_batches_count_as_the_general_loop_does() {
        // all whole-file reads of one tier: the loop that reads ids and sizes only (feed_totals)
        // against the general one (the same batch with a window column), for every policy
        let n = 30_000u64;
        let id: Vec<u64> = (0..n).map(|i| crate::util::hash::mix64(i % 997) % 700).collect();
        let size: Vec<u64> = id.iter().map(|&i| 1 + i % 53).collect();
        let (tier, op, window) = (vec![3u8; n as usize], vec![OP_READ; n as usize], vec![0u32; n as usize]);
        let ev = Events { tier: &tier, ..events(&id, &size, &tier, &op) };
        assert_eq!(ev.uniform_tier(), Some(3));
        let specs: Vec<CacheSpec> = crate::policy::POLICY_NAMES
            .iter()
            .filter(|&&p| p != "belady")
            .flat_map(|p| [CacheSpec::new(p, 400), CacheSpec::new(p, 5_000)])
            .chain([CacheSpec { sample_rate: 0.5, ..CacheSpec::new("lru", 900) }, CacheSpec { partitions: 3, ..CacheSpec::new("arc", 900) }])
            .collect();
        let mut uniform = Bank::new(specs.clone(), 4).unwrap();
        uniform.feed_totals(&ev).unwrap();
        let mut general = Bank::new(specs, 4).unwrap();
        general.feed(&Events { window: Some(&window), ..ev }).unwrap();
        assert_eq!(uniform.totals(), general.totals());
        assert!(uniform.totals().chunks(N_FIELDS).filter(|c| c[HITS] > 0 && c[EVICTIONS] > 0).count() >= 20);
        // any row that is not a whole-file read of the same tier takes the general loop
        let (mut t2, mut o2, mut b2) = (tier.clone(), op.clone(), size.clone());
        t2[n as usize - 1] = 0;
        o2[7] = OP_DELETE;
        b2[9] -= 1;
        assert_eq!(Events { tier: &t2, ..ev }.uniform_tier(), None);
        assert_eq!(Events { op: &o2, ..ev }.uniform_tier(), None);
        assert_eq!(Events { bytes_read: &b2, ..ev }.uniform_tier(), None);
        assert_eq!(Events { window: Some(&window), ..ev }.uniform_tier(), None);
    }

    #[test]
    fn snapshot_roundtrip_continues_identically() {
        let specs = vec![CacheSpec::new("lru", 50), CacheSpec::new("fifo", 30)];
        let ids: Vec<u64> = (0..400u64).map(|i| (i * 7919) % 37).collect();
        let sizes: Vec<u64> = ids.iter().map(|i| 1 + i % 9).collect();
        let tiers = vec![0u8; ids.len()];
        let ops = vec![0u8; ids.len()];
        let mut a = Bank::new(specs.clone(), 1).unwrap();
        a.feed(&events(&ids, &sizes, &tiers, &ops)).unwrap();
        let mut b = Bank::new(specs, 1).unwrap();
        b.feed(&events(&ids[..150], &sizes[..150], &tiers[..150], &ops[..150])).unwrap();
        let mut b = Bank::restore(&b.snapshot()).unwrap();
        b.feed(&events(&ids[150..], &sizes[150..], &tiers[150..], &ops[150..])).unwrap();
        assert_eq!(a.totals(), b.totals());
        assert_eq!(a.shadows[0].used_bytes(), b.shadows[0].used_bytes());
    }

    #[test]
    fn residence_ages_follow_arrivals_evictions_and_deletes() {
        // LRU of 10 bytes, files of 4: A@100, B@110, C@130 evicts A (stayed 30 s); B deleted
        // @140; D@150 finds only C (age 20). Reads find mean ages 0 (empty), 10, 25, 20.
        let mut bank = Bank::new(vec![CacheSpec::new("lru", 10)], 1).unwrap();
        let (id, size, tier, op) = ([1, 2, 3, 2, 4], [4; 5], [0; 5], [0, 0, 0, 2, 0]);
        let ts = [100, 110, 130, 140, 150];
        let mut ev = events(&id, &size, &tier, &op);
        ev.ts = Some(&ts[..]);
        let (_, out) = bank.feed(&ev).unwrap();
        assert_eq!(&out[EVICTIONS..=AGE_READS], &[1, 4, 30, 10 + 25 + 20, 4]);
        assert_eq!(bank.shadows[0].timed_files(), 2);
        // an event older than the cache's clock (out of order) ages nothing backwards
        let ts = [120];
        let mut ev = events(&[3], &[4], &[0], &[0]);
        ev.ts = Some(&ts[..]);
        let (_, out) = bank.feed(&ev).unwrap();
        assert_eq!(&out[RESIDENT_AGE..=AGE_READS], &[(2 * 150 - 130 - 150) / 2, 1]);
    }

    #[test]
    fn every_policy_knows_the_arrival_of_each_resident_file() {
        let names = crate::policy::POLICY_NAMES.iter().filter(|&&p| p != "belady");
        // xcache purges only every purge_interval of event time, above its high watermark: the
        // deletes here keep it below 95 %
        let xcache: std::collections::BTreeMap<String, f64> =
            [("high_watermark", 0.5), ("low_watermark", 0.4), ("purge_interval", 60.0)].map(|(k, v)| (k.to_string(), v)).into();
        let specs: Vec<CacheSpec> = names
            .map(|&p| CacheSpec { params: if p == "xcache" { xcache.clone() } else { Default::default() }, ..CacheSpec::new(p, 20_000) })
            .collect();
        let n = 20_000u64;
        let ids: Vec<u64> = (0..n).map(|i| (i * 7919 + i * i) % 911).collect();
        let sizes: Vec<u64> = ids.iter().map(|i| 1 + (i * 31) % 97).collect();
        let ops: Vec<u8> = (0..n).map(|i| if i % 53 == 0 { 2 } else if i % 97 == 0 { 1 } else { 0 }).collect();
        let ts: Vec<u32> = (0..n as u32).map(|i| 1_000 + i / 3).collect();
        let tier = vec![0u8; n as usize];
        let mut bank = Bank::new(specs, 1).unwrap();
        let mut ev = events(&ids, &sizes, &tier, &ops);
        ev.ts = Some(&ts[..]);
        let (_, out) = bank.feed(&ev).unwrap();
        for (c, s) in bank.shadows.iter().enumerate() {
            assert_eq!(s.timed_files(), s.resident_files(), "{}", s.spec.policy);
            let row = &out[c * N_FIELDS..(c + 1) * N_FIELDS];
            assert!(row[EVICTIONS] > 0 && row[EVICTED_AGE] > 0 && row[RESIDENT_AGE] > 0, "{}: {row:?}", s.spec.policy);
            assert_eq!(row[AGE_READS], row[REQUESTS]);
        }
    }

    #[test]
    fn arrivals_kept_in_entries_count_the_same_ages_as_a_side_table() {
        // every policy, once with arrivals from its entries and once from the side table: equal
        // counters, including deletes, rewrites, out-of-order times and an untimed batch between
        let n = 30_000u64;
        let ids: Vec<u64> = (0..n).map(|i| (i * 7919 + i * i) % 1_201).collect();
        let sizes: Vec<u64> = ids.iter().map(|i| 1 + (i * 31) % 97).collect();
        let ops: Vec<u8> = (0..n).map(|i| if i % 53 == 0 { 2 } else if i % 97 == 0 { 1 } else { 0 }).collect();
        let ts: Vec<u32> = (0..n as u32).map(|i| 1_000 + i / 3 - (i % 7) * 2).collect();
        let tier: Vec<u8> = ids.iter().map(|i| (i % 3) as u8).collect();
        for &policy in crate::policy::POLICY_NAMES.iter().filter(|&&p| p != "belady") {
            let mut own = Bank::new(vec![CacheSpec::new(policy, 15_000)], 3).unwrap();
            let mut side = own.clone();
            side.shadows[0].use_side_table();
            for (k, range) in [0..9_000, 9_000..12_000, 12_000..30_000].into_iter().enumerate() {
                let mut ev = events(&ids[range.clone()], &sizes[range.clone()], &tier[range.clone()], &ops[range.clone()]);
                if k != 1 {
                    ev.ts = Some(&ts[range]);
                }
                let (a, b) = (own.feed(&ev).unwrap(), side.feed(&ev).unwrap());
                assert!(a == b, "{policy}, batch {k}: {:?} != {:?}", a.1, b.1);
                assert_eq!(own.shadows[0].timed_files(), side.shadows[0].timed_files(), "{policy}");
            }
            assert!(own.totals()[EVICTED_AGE] > 0, "{policy}");
        }
    }

    /// A stream of reads, writes and deletes over 400 files with partial reads, 3 tiers.
    fn mixed(n: u64) -> (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u8>, Vec<u8>) {
        let id: Vec<u64> = (0..n).map(|i| crate::util::hash::mix64(i % 1_313) % 400).collect();
        let size: Vec<u64> = id.iter().map(|&i| 1 + i % 41).collect();
        let read: Vec<u64> = id.iter().zip(&size).map(|(&i, &s)| if i % 3 == 0 { s / 2 } else { s }).collect();
        let tier: Vec<u8> = id.iter().map(|&i| (i % 3) as u8).collect();
        let op: Vec<u8> = (0..n).map(|i| if i % 71 == 0 { OP_WRITE } else if i % 89 == 0 { OP_DELETE } else { OP_READ }).collect();
        (id, size, read, tier, op)
    }

    #[test]
    fn a_bypassed_read_is_a_miss_never_inserted_and_changes_nothing() {
        let mut bank = Bank::new(vec![CacheSpec::new("lru", 10)], 1).unwrap();
        // bypass A (miss, not inserted), read A (miss: fills), bypass A (a miss although A is
        // resident), read A (hit: the bypass took nothing out)
        let op = [OP_BYPASS, OP_READ, OP_BYPASS, OP_READ];
        let (_, out) = bank.feed(&events(&[1; 4], &[4; 4], &[0; 4], &op)).unwrap();
        assert_eq!(&out[..5], &[4, 1, 16, 4, 4], "requests, hits, bytes requested, hit, filled");
        assert_eq!(out[EVICTIONS], 0);
    }

    #[test]
    fn bypassed_reads_count_as_the_admitted_rows_plus_a_miss_each() {
        // every policy, sampled or not, dense or cells: a bank fed every row (excluded reads as
        // bypasses) equals one fed only the admitted rows, plus a request and its bytes per
        // excluded read of a sampled file, in its window and tier
        let n = 20_000u64;
        let (id, size, read, tier, op) = mixed(n);
        let excluded: Vec<bool> = (0..n as usize).map(|i| op[i] == OP_READ && (id[i] % 7 == 0 || i % 13 == 0)).collect();
        let all_op: Vec<u8> = (0..n as usize).map(|i| if excluded[i] { OP_BYPASS } else { op[i] }).collect();
        let window: Vec<u32> = (0..n as u32).map(|i| i / 5_000).collect();
        let keep: Vec<usize> = (0..n as usize).filter(|&i| !excluded[i]).collect();
        let pick = |c: &[u64]| keep.iter().map(|&i| c[i]).collect::<Vec<u64>>();
        let (kid, ksize, kread) = (pick(&id), pick(&size), pick(&read));
        let ktier: Vec<u8> = keep.iter().map(|&i| tier[i]).collect();
        let kop: Vec<u8> = keep.iter().map(|&i| op[i]).collect();
        let kwin: Vec<u32> = keep.iter().map(|&i| window[i]).collect();
        for &policy in crate::policy::POLICY_NAMES.iter().filter(|&&p| p != "belady") {
            for rate in [1.0, 0.5] {
                let spec = CacheSpec { sample_rate: rate, ..CacheSpec::new(policy, 2_000) };
                let mut all = Bank::new(vec![spec.clone()], 3).unwrap();
                let ev = Events { bytes_read: &read, window: Some(&window), ..events(&id, &size, &tier, &all_op) };
                let (w, got) = all.feed(&ev).unwrap();
                let mut admitted = Bank::new(vec![spec.clone()], 3).unwrap();
                let kev = Events { bytes_read: &kread, window: Some(&kwin), ..events(&kid, &ksize, &ktier, &kop) };
                let (_, mut want) = admitted.feed(&kev).unwrap();
                want.resize(w * 3 * N_FIELDS, 0);
                let sampled = |x: u64| rate == 1.0 || crate::util::hash::sample_hash(x) < (rate * crate::util::hash::SAMPLE_MODULUS as f64) as u64;
                let mut bypassed = 0;
                for i in (0..n as usize).filter(|&i| excluded[i] && sampled(id[i])) {
                    let cell = (window[i] as usize * 3 + tier[i] as usize) * N_FIELDS;
                    want[cell + REQUESTS] += 1;
                    want[cell + BYTES_REQUESTED] += read[i];
                    bypassed += 1;
                }
                assert!(bypassed > 500, "{policy} {rate}");
                assert!(got == want, "{policy} at rate {rate}: dense counters differ");
                // the same batch as sparse cells, summed, into the same totals
                let mut cells = Bank::new(vec![spec], 3).unwrap();
                crate::windowed::feed_cells(&mut cells, &ev, None, false).unwrap();
                assert_eq!(cells.totals(), all.totals(), "{policy} at rate {rate}: cells");
            }
        }
    }

    #[test]
    fn a_routed_bank_is_one_bank_per_partition_of_a_share_of_the_capacity() {
        let n = 30_000u64;
        let (id, size, read, tier, op) = mixed(n);
        // partitions by a column unrelated to the file (as servers are: a file is read on several)
        let part: Vec<u32> = (0..n).map(|i| (crate::util::hash::mix64(i) % 3) as u32).collect();
        let op: Vec<u8> = op.iter().enumerate().map(|(i, &o)| if o == OP_READ && i % 17 == 0 { OP_BYPASS } else { o }).collect();
        let window: Vec<u32> = (0..n as u32).map(|i| i / 7_000).collect();
        let specs = vec![
            CacheSpec::new("lru", 3_001),
            CacheSpec { sample_rate: 0.5, ..CacheSpec::new("arc", 2_000) },
            CacheSpec::new("s3fifo", 1_000),
        ];
        assert_eq!((0..3).map(|i| share(3_001, 3, i)).collect::<Vec<_>>(), vec![1_001, 1_000, 1_000]);
        let mut routed = Bank::routed(specs.clone(), 3, 3).unwrap();
        let caps: Vec<u64> = routed.shadows.iter().map(|s| s.spec.capacity).collect();
        assert_eq!(caps, vec![1_001, 667, 334, 1_000, 667, 333, 1_000, 666, 333], "(partition, spec)");
        let ev = Events { bytes_read: &read, window: Some(&window), ..events(&id, &size, &tier, &op) };
        let (w, got, by_part) = routed.feed_by_partition(&ev, Some(&part)).unwrap();
        let per_part = 3 * 3 * N_FIELDS;
        let mut want = vec![0u64; w * per_part];
        for p in 0..3u32 {
            let rows: Vec<usize> = (0..n as usize).filter(|&i| part[i] == p).collect();
            let g = |c: &[u64]| rows.iter().map(|&i| c[i]).collect::<Vec<u64>>();
            let (pid, psize, pread) = (g(&id), g(&size), g(&read));
            let ptier: Vec<u8> = rows.iter().map(|&i| tier[i]).collect();
            let pop: Vec<u8> = rows.iter().map(|&i| op[i]).collect();
            let pwin: Vec<u32> = rows.iter().map(|&i| window[i]).collect();
            let own: Vec<CacheSpec> = specs.iter().map(|s| CacheSpec { capacity: share(s.capacity, 3, p as u64), ..s.clone() }).collect();
            let mut bank = Bank::new(own, 3).unwrap();
            let (pw, out) = bank.feed(&Events { bytes_read: &pread, window: Some(&pwin), ..events(&pid, &psize, &ptier, &pop) }).unwrap();
            for (k, v) in out.iter().enumerate() {
                want[k] += v;
            }
            let summed: Vec<u64> = (0..per_part).map(|k| (0..pw).map(|x| out[x * per_part + k]).sum()).collect();
            assert_eq!(&by_part[p as usize * per_part..(p as usize + 1) * per_part], &summed[..], "partition {p}");
            assert!(summed.chunks(N_FIELDS).filter(|c| c[HITS] > 0 && c[EVICTIONS] > 0).count() >= 6);
        }
        assert!(got == want, "summed over the partitions");
        let totals: Vec<u128> = (0..per_part).map(|k| (0..w).map(|x| got[x * per_part + k] as u128).sum()).collect();
        assert_eq!(routed.totals(), totals);
        // a routed bank wants its column, in range; a plain one refuses it
        assert!(routed.feed(&ev).unwrap_err().contains("partition column"));
        let bad: Vec<u32> = part.iter().map(|&p| p + 1).collect();
        assert!(routed.feed_by_partition(&ev, Some(&bad)).unwrap_err().contains("partition 3 is not below 3"));
        assert!(Bank::new(specs.clone(), 3).unwrap().feed_by_partition(&ev, Some(&part)).is_err());
        assert!(Bank::routed(vec![CacheSpec { partitions: 2, ..CacheSpec::new("lru", 10) }], 1, 3).is_err());
    }

    #[test]
    fn any_number_of_threads_gives_the_counts_of_one() {
        // every policy (belady with its next-access times), sampled and routed banks, windows,
        // bypasses, writes and deletes, over several batches: the batch counters, the totals and
        // the per-partition sums are those of the bank run on the calling thread alone
        let n = 40_000u64;
        let (id, size, read, tier, op) = mixed(n);
        let op: Vec<u8> = op.iter().enumerate().map(|(i, &o)| if o == OP_READ && i % 19 == 0 { OP_BYPASS } else { o }).collect();
        let window: Vec<u32> = (0..n as u32).map(|i| (i % 10_000) / 2_500).collect();
        let part: Vec<u32> = (0..n).map(|i| (crate::util::hash::mix64(i) % 3) as u32).collect();
        let next = crate::future::next_access_in_streams(&id, Some(&op), None).unwrap();
        let specs: Vec<CacheSpec> = crate::policy::POLICY_NAMES
            .iter()
            .flat_map(|p| [CacheSpec::new(p, 900), CacheSpec::new(p, 4_000)])
            .chain([CacheSpec { sample_rate: 0.5, ..CacheSpec::new("lru", 2_000) }])
            .collect();
        let feed_all = |bank: &mut Bank, routed: bool| {
            let mut outs = Vec::new();
            for a in (0..n as usize).step_by(10_000) {
                let r = a..a + 10_000;
                let ev = Events {
                    bytes_read: &read[r.clone()],
                    window: Some(&window[r.clone()]),
                    next_access: Some(&next[r.clone()]),
                    ..events(&id[r.clone()], &size[r.clone()], &tier[r.clone()], &op[r.clone()])
                };
                outs.push(bank.feed_by_partition(&ev, routed.then(|| &part[r])).unwrap());
            }
            (outs, bank.totals())
        };
        let unrouted: Vec<CacheSpec> = specs.iter().filter(|s| s.policy != "belady").cloned().collect();
        for (routed, specs) in [(false, specs.clone()), (true, unrouted)] {
            let make = |threads| {
                let bank = if routed { Bank::routed(specs.clone(), 3, 3) } else { Bank::new(specs.clone(), 3) };
                bank.unwrap().with_threads(threads)
            };
            let one = feed_all(&mut make(1), routed);
            assert!(one.1.chunks(N_FIELDS).filter(|c| c[HITS] > 0 && c[EVICTIONS] > 0).count() + 4 >= specs.len());
            for threads in [0, 2, 3, 7] {
                assert!(feed_all(&mut make(threads), routed) == one, "{threads} threads, routed {routed}");
            }
        }
    }

    #[test]
    fn a_salted_bank_sees_the_ids_multiplied() {
        let n = 10_000u64;
        let (id, size, read, tier, op) = mixed(n);
        let salt = 0xC2B2AE3D27D4EB4Fu64;
        let salted_ids: Vec<u64> = id.iter().map(|&x| x.wrapping_mul(salt | 1)).collect();
        let spec = vec![CacheSpec { sample_rate: 0.3, ..CacheSpec::new("lru", 900) }];
        let mut a = Bank::new(spec.clone(), 3).unwrap().salted(salt);
        let mut b = Bank::new(spec.clone(), 3).unwrap();
        let mut plain = Bank::new(spec, 3).unwrap();
        let ev = Events { bytes_read: &read, ..events(&id, &size, &tier, &op) };
        let got = a.feed(&ev).unwrap();
        assert_eq!(got, b.feed(&Events { id: &salted_ids, ..ev }).unwrap());
        assert_ne!(got, plain.feed(&ev).unwrap(), "another sample");
    }

    #[test]
    fn bad_batches_are_refused_with_the_event_index() {
        let mut bank = Bank::new(vec![CacheSpec::new("lru", 10)], 2).unwrap();
        let e = bank.feed(&events(&[1, 2], &[1, 1], &[0, 5], &[0, 0])).unwrap_err();
        assert!(e.contains("event 1: tier 5"), "{e}");
    }
}
