//! XCache: a model of XRootD's proxy file cache (XrdPfc), the cache behind ATLAS and CMS
//! XCache deployments.
//!
//! XrdPfc is not a paper policy; its behaviour is read from XRootD 5.5's `src/XrdPfc`
//! (XrdPfcFile, XrdPfcInfo, XrdPfcPurge, XrdPfcFPurgeState, XrdPfcConfiguration) and checked
//! against a real 5.5.3 cache (`shared/xcache-lab/`, notes/xcache-model.md). Two mechanisms
//! matter for hit rates:
//!
//! - **Blocks.** A proxied file is stored as a sparse local file plus a `.cinfo` bitmap of
//!   fixed-size blocks (`pfc.blocksize`); only blocks that clients read are fetched and kept.
//! - **Purge.** A background thread wakes every `purgeinterval` (`pfc.diskusage … purgeinterval
//!   t`, 300 s by default, 60–3600 s) and, when the cache filesystem's usage is above the high
//!   watermark, removes whole files (data and `.cinfo`) oldest last access first until usage
//!   is down to the low watermark. It never removes a file that is open, nor one opened (or
//!   stat'ed) since the previous purge ended (`m_purge_delay_set`); between purges usage can sit
//!   far above the high watermark (the lab's cache, HWM 200 MiB, sat at 1.2–1.7 GB).
//!
//! # The model
//! Parameters (all numbers; the Python side turns `300MB`, `5m`, … into them):
//! - `block_size`: bytes, default 1048576 (1 MiB; the ATLAS records' and the lab's value).
//! - `high_watermark`, `low_watermark`: a value ≤ 1 is a fraction of the capacity
//!   (`⌊c·v + 0.5⌋`, as XrdPfc rounds), a value > 1 is bytes; defaults 0.95 and 0.90; they
//!   must satisfy `low < high ≤ capacity` (XrdPfc refuses `low ≥ high`).
//! - `purge_interval`: seconds between purges, default 300 (XrdPfc accepts 60–3600; the
//!   model takes any whole number ≥ 1).
//! - `purge_cold_age` (seconds, 0 = off, the default) and `purge_cold_period` (purges, default
//!   10): XrdPfc's `purgecoldfiles age period`.
//! - `files_baseline`, `files_nominal`, `files_max`: XrdPfc's `files baseline nominal max`
//!   (fractions or bytes like the watermarks; all three or none; baseline < nominal < max).
//! - `baseline_used`: bytes of other data on the cache's filesystem, default 0.
//! - `xrootd_version`: the real cache's XRootD, major + minor / 100 (default 5.05; see "XRootD
//!   versions" below: from 5.07 purges follow 5.7's ResourceMonitor).
//! - `prefetch`: XrdPfc's `pfc.prefetch` (blocks in flight per file), default 0 = off. XrdPfc
//!   prefetches the blocks of an open file that no client asked for yet: in the lab (prefetch
//!   10) 990 of 994 accesses ended with every block of the file downloaded. With `prefetch > 0`
//!   and no fetch times a read (`bytes_read > 0`) therefore caches the whole file (its extent
//!   is `size`); with fetch times see "Delayed hits" below.
//! - `origin_rate`: bytes per second the origin link delivers to one fetch (0 = not known, the
//!   default): with it, or with the access's own duration (`Request::duration_us`), fetches
//!   take time (below).
//!
//! The capacity `c` is the size of the cache's **filesystem** (XrdPfc compares `statvfs`'s
//! total − free with the watermarks). Disk usage `du = baseline_used + Σ cached bytes`; file
//! usage `fu = Σ cached bytes` (what `used_bytes()` reports).
//!
//! A read, in event time (`Request::ts`, seconds):
//! 1. First the purges that are due run (below): at the first request's time, then every
//!    `purge_interval` seconds of event time; several are due after a gap in the events.
//! 2. Offsets are not in the logs, so a read of `bytes_read` bytes touches the first
//!    `⌈bytes_read / B⌉` blocks of the file: its extent is `min(⌈bytes_read/B⌉·B, size)`, and a
//!    file's cached bytes are always such a prefix. `hit_bytes` = `min(bytes_read, cached)`;
//!    `hit` = the whole read came from the cache (`bytes_read ≤ cached`, something cached).
//! 3. The blocks of the extent not yet cached are written, as far as the filesystem has room:
//!    `filled = extent − cached` when `du + that ≤ c`, else only the whole blocks that fit
//!    (XrdPfc's block writes fail on a full filesystem: the read is served from the origin and
//!    those blocks stay uncached). So usage may sit above the high watermark between purges,
//!    never above the capacity.
//! 4. The file is now the most recently accessed (an LRU list over files: O(1) per request)
//!    and is **protected** until the next purge has run (it was opened since the previous one;
//!    this also covers files in use, as reads are instantaneous here). `bytes_read == 0` (an
//!    open without data) does this too for a file with cached blocks, and is then a hit with
//!    0 hit bytes; for a file without cached blocks it is a miss that creates no entry.
//!
//! Delayed hits (only when fetches take time: `origin_rate > 0` or the access's duration is
//! known, and the request has an event time; otherwise fetches are instant and nothing below
//! changes the counts):
//! - A read's missing blocks are fetched from its time `t` on, arriving evenly (in offset
//!   order) until `t + duration` where the access's duration is known (it lasted as long as its
//!   blocks took), else `t + bytes/origin_rate`. The earlier blocks of the file were on disk
//!   when the previous fetch ended.
//! - A read that needs nothing fetched but some of whose blocks are not on disk yet (another
//!   read's fetch is in flight) is a **delayed hit**: not a hit (it waits for the origin), not
//!   a miss (it costs no second fetch: `filled` 0). `hit_bytes` counts only the bytes on disk
//!   when the read came; `delayed_bytes` the rest of what the cache held for it.
//! - Prefetch in time (`prefetch > 0`): while the file is open the next `prefetch` blocks past
//!   what is cached are in flight, and an open longer than its own fetches need (duration ×
//!   origin_rate above the missed bytes) brings that much more; a short partial read leaves a
//!   partly cached file, as XrdPfc does (`n_blks_done` at close). Hits prefetch too.
//! - Times are whole seconds of event time (`Request::ts`), fetch times microseconds.
//!
//! A purge at time `t` (XrdPfc's `Purge()` loop, run in event time):
//! - Bytes to remove: `d = du − lwm` when `du > hwm`, else 0. With the `files` form, also
//!   `f = max(fu − nominal, 0)`, `frac_du = clamp((du − lwm)/(hwm − lwm), 0, 1)`, `frac_fu =
//!   clamp((fu − baseline)/(max − baseline), 0, 1)`; then `min(max(f, du − lwm), fu −
//!   baseline)` if `frac_fu > 1 − frac_du`, else `max(d, f)`. XrdPfc first estimates `fu` from
//!   the writes since the last purge, then measures it in its scan; the model knows it exactly.
//! - Cold files: when `purge_cold_age > 0`, the first purge and then every `purge_cold_period`-th
//!   one also remove every file last accessed before `t − purge_cold_age`, whatever the usage.
//! - Candidates: the cold files, then the least recently accessed files until the candidates
//!   hold `2 × bytes to remove` (XrdPfc's `FPurgeState(2 · bytesToRemove)`: the oldest files
//!   whose bytes just reach twice the target). They are visited oldest first; a protected one
//!   is skipped (and counted), any other removed, until the bytes to remove are reached
//!   (cold files are removed even after that). So a purge can end above the low watermark
//!   when the oldest files are protected, as the real cache's did. In the candidates' budget
//!   and in the bytes still to remove a file counts as XrdPfc counts it, by its downloaded
//!   blocks (`nBytes`: a partial last block whole), so a purge stops after the files XrdPfc's
//!   does (the live test, tests/python/integration/xcache/test_xcache_real.py: 7 files, not 9). Each removed file
//!   is one eviction of its cached bytes (`removed_bytes`: bytes of data); the last 1024 purges
//!   are kept in a log (`purge_log`).
//! - Ties in access time (whole seconds in XrdPfc) are broken by access order.
//!
//! # XRootD versions
//! `xrootd_version` (major + minor / 100; default 5.05 = 5.5, the version the rules above were
//! read from) switches to what XRootD 5.7 and later (6.x included; read from 6.2.1's
//! XrdPfcResourceMonitor.cc, XrdPfcPurge.cc, XrdPfcFPurgeState.cc, checked against a real 6.2.1
//! cache in tests/python/integration/xcache/test_xcache_real.py) do:
//! - A **purge check every 60 s** whatever `purge_interval` says: the first at the first
//!   request's time (the heart-beat started 60 s before it), then 60 s after the previous
//!   check, or earlier when a report beat (every `purge_interval`, from the heart-beat's start)
//!   or a cold-file purge (every `purge_interval × purge_cold_period` seconds, also from the
//!   start; not at the first check) falls due: each of those is a check too and restarts the
//!   60 s. Each check ends a protection period (XrdPfc clears its purge-protected set there).
//! - Files are counted by their filesystem pages (`st_blocks`: data rounded up to 4 KiB), not
//!   whole blocks, in the candidates' budget and in what is left to remove, which starts at
//!   `(bytes to remove >> 9) + 1` st_blocks.
//! - Oldest first by the `.cinfo` file's modification time (about the last close): with reads
//!   instantaneous here that is the same order as the last access.
//!
//! Other rules:
//! - `remove(id)` (file deleted or rewritten at the source) drops its blocks at once.
//! - `seed` (a warm start from the real cache's `.cinfo` files, before the first request):
//!   files with their cached bytes (taken as a prefix) and last access time, unprotected.
//! - Events out of time order: purges run when a request's time reaches the next purge time;
//!   the LRU order is the order of the requests.
//! - A request without event time (`ts` 0: not known; what-if replays and reports that feed no
//!   times) cannot be placed on the purge clock: it is a purge period of its own, and a purge
//!   runs right after it when there are bytes to remove, the file just read being the only
//!   protected one (the model before purges ran in event time). Whole-trace runs (`simulate`,
//!   the timestamp column) and the pipeline (event times) always give times.
//!
//! There is no libCacheSim counterpart; the golden tests below are its proof.

use super::*;
use std::collections::VecDeque;

#[derive(Clone, Copy, Default, Serialize, Deserialize)]
struct Entry {
    id: u64,
    /// Cached bytes: a prefix of whole blocks (the last one possibly the file's remainder).
    cached: u64,
    /// Event time of the last access (seconds).
    last: u32,
    /// Purges run before the last access: equal to `XCache::epoch` = accessed since the
    /// previous purge, so protected from the next one.
    epoch: u32,
    tier: u8,
    /// Fetch times (µs of event time; all 0 when fetches are instant): the latest fetch brought
    /// `fetch_from..cached` in, its bytes arriving evenly from `fetch_start` to `fetch_end`;
    /// the blocks before `fetch_from` were all on disk at `prior_ready`.
    fetch_from: u64,
    fetch_start: u64,
    fetch_end: u64,
    prior_ready: u64,
}

impl Entry {
    /// When the first `extent` bytes (≤ cached) are all on disk.
    #[inline]
    fn ready_at(&self, extent: u64) -> u64 {
        if extent <= self.fetch_from {
            return self.prior_ready;
        }
        let span = (self.fetch_end - self.fetch_start) as u128;
        let part = (extent - self.fetch_from) as u128 * span / (self.cached - self.fetch_from).max(1) as u128;
        self.prior_ready.max(self.fetch_start + part as u64)
    }
    /// Bytes of the prefix on disk at `now` (whole blocks of the latest fetch).
    #[inline]
    fn on_disk(&self, now: u64, block: u64) -> u64 {
        if now >= self.fetch_end.max(self.prior_ready) {
            return self.cached;
        }
        if now < self.prior_ready {
            return 0;
        }
        let span = (self.fetch_end - self.fetch_start).max(1) as u128;
        let done = (self.cached - self.fetch_from) as u128 * (now - self.fetch_start) as u128 / span;
        self.fetch_from + (done as u64) / block * block
    }
}

impl resident::Entry for Entry {
    #[inline]
    fn id(&self) -> u64 {
        self.id
    }
    #[inline]
    fn size(&self) -> u64 {
        self.cached
    }
    #[inline]
    fn tier(&self) -> u8 {
        self.tier
    }
    #[inline]
    fn born(&self) -> u32 {
        0
    }
}

/// One purge run, as XrdPfc logs it (`Purge() Finished, removed N data files, total size …`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeRecord {
    /// Event time of the purge (seconds).
    pub time: u64,
    /// Disk usage when it started (baseline_used + cached bytes).
    pub disk_usage: u64,
    /// What it set out to remove (0 when only the cold-file purge ran or nothing was needed).
    pub bytes_to_remove: u64,
    pub removed_files: u64,
    pub removed_bytes: u64,
    pub protected_files: u64,
    pub protected_bytes: u64,
    /// The cold-file purge ran in this one.
    pub cold: bool,
}

/// Purges kept in the log.
const PURGE_LOG: usize = 1024;
/// ResourceMonitor's purge-check period (seconds), whatever `purgeinterval` says.
const CHECK_INTERVAL: u64 = 60;
/// Filesystem page: ResourceMonitor counts a file by its st_blocks.
const PAGE: u64 = 4096;
/// `xrootd_version` (major + minor / 100) from which the ResourceMonitor drives purges.
const RESMON_FROM: f64 = 5.07;

#[derive(Clone, Serialize, Deserialize)]
pub struct XCache {
    capacity: u64,
    block_size: u64,
    hwm: u64,
    lwm: u64,
    /// `files baseline nominal max`, bytes.
    files: Option<[u64; 3]>,
    baseline_used: u64,
    /// `pfc.prefetch`: blocks in flight per open file (0 = off).
    prefetch: u64,
    /// `origin_rate`: bytes/s the origin link delivers to one fetch (0 = not known).
    origin_rate: f64,
    interval: u64,
    cold_age: u64,
    cold_period: u32,
    /// XRootD ≥ 5.7's ResourceMonitor: a purge check every 60 s, `purgeinterval` the cold-file
    /// cadence, files counted by their filesystem pages (the module doc, "XRootD versions").
    resmon: bool,
    /// ResourceMonitor: event time of the next report beat (every `interval`) and of the next
    /// cold-file purge (every `interval × cold_period`); both wake a check of their own.
    next_report: u64,
    next_cold: u64,
    /// Purges until the next cold-file purge (0 before the first purge: it runs one).
    cold_countdown: u32,
    /// Cached bytes of all files (file usage).
    used: u64,
    table: Table<Entry>,
    /// Files by last access; head = most recent.
    lru: List,
    /// Event time of the next purge; None before the first request.
    next_purge: Option<u64>,
    /// Purges run so far (wrapping).
    epoch: u32,
    log: VecDeque<PurgeRecord>,
}

/// A watermark-like parameter: ≤ 1 a fraction of the capacity, > 1 bytes.
fn level(params: &Params, key: &str, default: f64, capacity: u64) -> Result<u64, String> {
    let v = params.get(key, default);
    if !(v >= 0.0 && v.is_finite()) {
        return Err(format!("parameter {key}={v} must be a fraction of the size (≤ 1) or a number of bytes (> 1)"));
    }
    let bytes = if v <= 1.0 { (capacity as f64 * v + 0.5).floor() } else { v.floor() };
    if bytes > capacity as f64 {
        return Err(format!("parameter {key}={v} is {bytes} bytes, above the capacity ({capacity} bytes)"));
    }
    Ok(bytes as u64)
}

/// `xrootd_version`: the real cache's XRootD as major + minor / 100 (5.05 for 5.5, the default;
/// 6.02 for 6.2; the Python side reads `6.2.1`).
fn xrootd_version(params: &Params) -> Result<f64, String> {
    let v = params.get("xrootd_version", 5.05);
    if !(4.0..100.0).contains(&v) {
        return Err(format!("parameter xrootd_version={v} must be an XRootD version as major + minor / 100 (5.05 for 5.5, 6.02 for 6.2)"));
    }
    Ok(v)
}

/// A whole non-negative number parameter (seconds, bytes, purges).
fn whole(params: &Params, key: &str, default: f64, min: f64) -> Result<u64, String> {
    let v = params.get(key, default);
    if !(v >= min && v <= 9.0e15 && v.fract() == 0.0) {
        return Err(format!("parameter {key}={v} must be a whole number ≥ {min}"));
    }
    Ok(v as u64)
}

impl XCache {
    /// Bytes the purge sets out to remove (XrdPfc's `bytesToRemove`, after its scan).
    fn bytes_to_remove(&self) -> i128 {
        let du = (self.baseline_used + self.used) as i128;
        let fu = self.used as i128;
        let (hwm, lwm) = (self.hwm as i128, self.lwm as i128);
        let d = if du > hwm { du - lwm } else { 0 };
        let Some([base, nominal, max]) = self.files.map(|f| f.map(|x| x as i128)) else {
            return d;
        };
        let f = (fu - nominal).max(0);
        let frac_du = ((du - lwm) as f64 / (hwm - lwm) as f64).clamp(0.0, 1.0);
        let frac_fu = ((fu - base) as f64 / (max - base) as f64).clamp(0.0, 1.0);
        if frac_fu > 1.0 - frac_du {
            f.max(du - lwm).min(fu - base)
        } else {
            d.max(f)
        }
    }

    /// One purge at event time `now`.
    fn purge(&mut self, now: u64, ev: &mut Evictions) -> PurgeRecord {
        let cold = self.cold_age > 0 && if self.resmon {
            let due = now >= self.next_cold;
            if due {
                self.next_cold = now + self.interval.saturating_mul(self.cold_period as u64);
            }
            due
        } else {
            self.cold_countdown = self.cold_countdown.saturating_sub(1);
            let due = self.cold_countdown == 0;
            if due {
                self.cold_countdown = self.cold_period;
            }
            due
        };
        let mut left = self.bytes_to_remove();
        let mut rec = PurgeRecord {
            time: now,
            disk_usage: self.baseline_used + self.used,
            bytes_to_remove: left.max(0) as u64,
            cold,
            ..PurgeRecord::default()
        };
        if self.resmon && left > 0 {
            // ResourceMonitor counts 512-byte st_blocks: `(bytes >> 9) + 1` of them to remove
            left = (left >> 9 << 9) + 512;
        }
        if left > 0 || cold {
            // files last accessed before this are cold (none when the cold purge is not due)
            let cold_before = if cold { now.saturating_sub(self.cold_age) } else { 0 };
            let budget = 2 * left.max(0);
            let mut candidates: i128 = 0;
            let mut cur = self.lru.tail();
            while let Some(slot) = cur {
                cur = self.table.arena.prev(slot);
                let e = *self.table.get(slot);
                let is_cold = (e.last as u64) < cold_before;
                if !is_cold && (left <= 0 || candidates >= budget) {
                    break;
                }
                // XrdPfc counts a file by its downloaded blocks (`nBytes`: the last, partial one
                // whole) in the candidates' budget and in what is left to remove
                // whole blocks; ResourceMonitor: the file's st_blocks, its data in 4 KiB pages
                let unit = if self.resmon { PAGE } else { self.block_size };
                let blocks = (e.cached.div_ceil(unit) * unit) as i128;
                candidates += blocks;
                if e.epoch == self.epoch {
                    rec.protected_files += 1;
                    rec.protected_bytes += e.cached;
                    continue;
                }
                self.table.arena.unlink(&mut self.lru, slot);
                self.table.free(slot);
                self.used -= e.cached;
                ev.push(e.cached, e.tier, e.id, 0);
                left -= blocks;
                rec.removed_files += 1;
                rec.removed_bytes += e.cached;
            }
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.log.len() == PURGE_LOG {
            self.log.pop_front();
        }
        self.log.push_back(rec);
        rec
    }

    /// Run the purges due by event time `ts`.
    #[inline]
    fn advance(&mut self, ts: u32, ev: &mut Evictions) {
        let now = ts as u64;
        let mut at = match self.next_purge {
            Some(at) if now < at => return,
            Some(at) => at,
            None => now,
        };
        if self.resmon {
            if self.next_purge.is_none() {
                // the first check at the first request: the heart-beat started 60 s before it
                let start = now.saturating_sub(CHECK_INTERVAL);
                self.next_report = start + self.interval;
                self.next_cold = start + self.interval.saturating_mul(self.cold_period as u64);
            }
            return self.advance_checks(at, now, ev);
        }
        // purges with no request between them: once one ran with nothing protected and
        // removed nothing, the ones after it change nothing either (unless a cold-file purge
        // may still find files growing cold)
        let mut idle = 0u32;
        while at <= now {
            let rec = self.purge(at, ev);
            at += self.interval;
            idle += 1;
            if idle >= 2 && rec.removed_files == 0 && self.cold_age == 0 && at <= now {
                let skipped = (now - at) / self.interval + 1;
                self.epoch = self.epoch.wrapping_add(skipped as u32);
                at += skipped * self.interval;
            }
        }
        self.next_purge = Some(at);
    }

    /// ResourceMonitor's heart-beat (XrdPfcResourceMonitor.cc): a check 60 s after the previous
    /// one, or earlier when a report beat or a cold-file purge falls due, which restarts the 60 s.
    fn advance_checks(&mut self, mut at: u64, now: u64, ev: &mut Evictions) {
        let aligned = self.interval % CHECK_INTERVAL == 0 && self.cold_age == 0;
        let mut idle = 0u32;
        while at <= now {
            let rec = self.purge(at, ev);
            if at >= self.next_report {
                self.next_report = at + self.interval;
            }
            let mut next = (at + CHECK_INTERVAL).min(self.next_report);
            if self.cold_age > 0 {
                next = next.min(self.next_cold);
            }
            at = next;
            idle += 1;
            // idle checks (nothing protected, nothing removed) change nothing: skip them while
            // the report beats fall on check times
            if aligned && idle >= 2 && rec.removed_files == 0 && at <= now {
                let skipped = (now - at) / CHECK_INTERVAL + 1;
                self.epoch = self.epoch.wrapping_add(skipped as u32);
                at += skipped * CHECK_INTERVAL;
                if self.next_report <= at {
                    self.next_report += (at - self.next_report).div_ceil(self.interval) * self.interval;
                }
            }
        }
        self.next_purge = Some(at);
    }

    /// Warm start: files the real cache holds (cached bytes, last access in seconds), before the
    /// first request. They are not protected from the first purge.
    pub fn seed(&mut self, files: &[(u64, u64, u32)]) -> Result<(), String> {
        if self.next_purge.is_some() {
            return Err("an xcache can be seeded only before its first request".into());
        }
        let total: u128 = files.iter().map(|f| f.1 as u128).sum::<u128>() + self.used as u128 + self.baseline_used as u128;
        if total > self.capacity as u128 {
            return Err(format!(
                "the seeded files ({total} bytes with baseline_used and the files already seeded) do not fit in the capacity ({} bytes)",
                self.capacity
            ));
        }
        let mut order: Vec<&(u64, u64, u32)> = files.iter().collect();
        order.sort_by_key(|f| f.2);
        for &&(id, cached, last) in &order {
            if let Some(slot) = self.table.slot(id) {
                self.table.arena.unlink(&mut self.lru, slot);
                self.used -= self.table.free(slot).cached;
            }
            if cached == 0 {
                continue;
            }
            let slot = self.table.insert(Entry { id, cached, last, epoch: self.epoch.wrapping_sub(1), tier: 0, ..Entry::default() });
            self.table.arena.push_front(&mut self.lru, slot);
            self.used += cached;
        }
        Ok(())
    }

    /// The last purges run (at most 1024), oldest first.
    pub fn purge_log(&self) -> Vec<PurgeRecord> {
        self.log.iter().copied().collect()
    }
}

impl AnyPolicy {
    /// This policy as an xcache, if it is one (seeding, the purge log).
    pub fn as_xcache_mut(&mut self) -> Option<&mut XCache> {
        match self {
            AnyPolicy::Xcache(x) => Some(x),
            _ => None,
        }
    }
}

impl Policy for XCache {
    fn build(capacity: u64, params: &Params) -> Result<Self, String> {
        let block = params.get("block_size", 1048576.0);
        if !((1.0..=9.0e15).contains(&block) && block.fract() == 0.0) {
            return Err(format!("parameter block_size={block} must be a positive whole number of bytes"));
        }
        let hwm = level(params, "high_watermark", 0.95, capacity)?;
        let lwm = level(params, "low_watermark", 0.90, capacity)?;
        if lwm >= hwm {
            return Err(format!(
                "watermarks must satisfy low_watermark ({lwm} bytes) < high_watermark ({hwm} bytes) ≤ the capacity ({capacity} bytes)"
            ));
        }
        let files = {
            let f = [
                level(params, "files_baseline", 0.0, capacity)?,
                level(params, "files_nominal", 0.0, capacity)?,
                level(params, "files_max", 0.0, capacity)?,
            ];
            match f {
                [0, 0, 0] => None,
                [b, n, m] if b < n && n < m => Some(f),
                [b, n, m] => {
                    return Err(format!(
                        "files_baseline ({b} bytes) < files_nominal ({n}) < files_max ({m}) must hold when any of them is set"
                    ))
                }
            }
        };
        let baseline_used = whole(params, "baseline_used", 0.0, 0.0)?;
        if baseline_used > capacity {
            return Err(format!("parameter baseline_used={baseline_used} is above the capacity ({capacity} bytes)"));
        }
        Ok(XCache {
            capacity,
            block_size: block as u64,
            hwm,
            lwm,
            files,
            baseline_used,
            prefetch: whole(params, "prefetch", 0.0, 0.0)?,
            origin_rate: params.non_negative("origin_rate", 0.0)?,
            interval: whole(params, "purge_interval", 300.0, 1.0)?,
            cold_age: whole(params, "purge_cold_age", 0.0, 0.0)?,
            cold_period: whole(params, "purge_cold_period", 10.0, 1.0)?.min(u32::MAX as u64) as u32,
            cold_countdown: 0,
            resmon: xrootd_version(params)? >= RESMON_FROM,
            next_report: 0,
            next_cold: 0,
            used: 0,
            table: Table::default(),
            lru: List::default(),
            next_purge: None,
            epoch: 0,
            log: VecDeque::new(),
        })
    }

    #[inline]
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
        if req.ts != 0 {
            self.advance(req.ts, ev);
        } else {
            // time not known: each request is a purge period of its own (see the module doc)
            self.epoch = self.epoch.wrapping_add(1);
        }
        let b = self.block_size;
        // the blocks this read needs (offsets are not logged: a prefix, see the module doc)
        let demand = match req.bytes_read {
            0 => 0,
            n => n.div_ceil(b).saturating_mul(b).min(req.size),
        };
        let slot = self.table.slot(req.id);
        let old = slot.map_or(Entry::default(), |s| *self.table.get(s));
        let cached = old.cached;
        // fetch times: from the access's own duration, else the origin's rate, else instant
        let now = req.ts as u64 * 1_000_000;
        let timed = req.ts != 0 && (req.duration_us > 0 || self.origin_rate > 0.0);
        let missing = demand.saturating_sub(cached);
        let extent = match req.bytes_read {
            0 => 0,
            _ if self.prefetch == 0 => demand,
            // prefetch in time: while the file is open the next `prefetch` blocks are in flight,
            // and an open longer than its own fetches needs lets the origin bring more
            _ if timed => {
                let open_bytes = if req.duration_us > 0 && self.origin_rate > 0.0 {
                    (self.origin_rate * req.duration_us as f64 / 1e6) as u64
                } else {
                    missing
                };
                let ahead = self.prefetch.saturating_mul(b).saturating_add(open_bytes.saturating_sub(missing));
                demand.max(cached).saturating_add(ahead).min(req.size)
            }
            _ => req.size,
        };
        let filled = match extent.saturating_sub(cached) {
            0 => 0,
            want => {
                let room = self.capacity.saturating_sub(self.baseline_used + self.used);
                if want <= room {
                    want
                } else {
                    // a full filesystem: the blocks that fit are written, the others fail
                    room / b * b
                }
            }
        };
        // what this read needed that the cache holds, and how much of it was on disk already
        let held = req.bytes_read.min(cached);
        let on_disk = if old.fetch_end.max(old.prior_ready) > now { held.min(old.on_disk(now, b)) } else { held };
        let in_flight = cached > 0 && demand.min(cached) > 0 && old.ready_at(demand.min(cached)) > now;
        let fits = cached > 0 && req.bytes_read <= cached;
        let out = Outcome {
            hit: fits && !in_flight,
            hit_bytes: on_disk,
            filled,
            arrived: false,
            delayed: fits && in_flight,
            delayed_bytes: held - on_disk,
        };
        let mut entry = Entry { id: req.id, cached: cached + filled, last: req.ts, epoch: self.epoch, tier: req.tier, ..old };
        if filled > 0 && !timed {
            // instant fetches: everything cached is on disk (times out of order stay harmless)
            (entry.fetch_from, entry.fetch_start, entry.fetch_end, entry.prior_ready) = (0, 0, 0, 0);
        } else if filled > 0 {
            entry.prior_ready = old.fetch_end.max(old.prior_ready);
            entry.fetch_from = cached;
            entry.fetch_start = now;
            entry.fetch_end = if req.duration_us > 0 {
                // the access's own duration, where the log has it, is how long its blocks took;
                // prefetched ones arrive at its pace after them
                let asked = if missing > 0 { missing } else { filled };
                now + (req.duration_us as u128 * filled as u128 / asked as u128) as u64
            } else {
                now + (filled as f64 * 1e6 / self.origin_rate) as u64
            };
        }
        match slot {
            Some(s) => {
                *self.table.get_mut(s) = entry;
                self.table.arena.move_to_front(&mut self.lru, s);
            }
            None if filled > 0 => {
                let s = self.table.insert(entry);
                self.table.arena.push_front(&mut self.lru, s);
            }
            None => return out,
        }
        self.used += filled;
        if req.ts == 0 && self.bytes_to_remove() > 0 {
            self.purge(0, ev);
        }
        out
    }

    fn remove(&mut self, id: u64) -> Option<u32> {
        let slot = self.table.slot(id)?;
        self.table.arena.unlink(&mut self.lru, slot);
        self.used -= self.table.free(slot).cached;
        Some(0)
    }

    fn contains(&self, id: u64) -> bool {
        self.table.map.contains_key(id)
    }
    fn used_bytes(&self) -> u64 {
        self.used
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn len(&self) -> usize {
        self.table.len()
    }
    fn use_dense_ids(&mut self) -> bool {
        // seeded files are keyed by id: no dense keys then
        self.table.is_empty() && self.table.use_dense_ids()
    }
    #[inline(always)]
    fn prefetch(&self, id: u64, stage: Stage) {
        self.table.prefetch(id, stage)
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    fn params(kv: &[(&str, f64)]) -> Params {
        Params::new(kv.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    fn xcache(capacity: u64, kv: &[(&str, f64)]) -> AnyPolicy {
        AnyPolicy::new("xcache", capacity, &params(kv)).unwrap()
    }

    /// Event times of the tests count from here (0 is "time not known").
    const T0: u32 = 1_000_000;

    /// One read at time `T0 + t`: (hit, hit_bytes, filled, evicted bytes).
    fn read(p: &mut AnyPolicy, t: u32, id: u64, size: u64, bytes_read: u64) -> (bool, u64, u64, u64) {
        read_at(p, T0 + t, id, size, bytes_read)
    }

    fn read_at(p: &mut AnyPolicy, ts: u32, id: u64, size: u64, bytes_read: u64) -> (bool, u64, u64, u64) {
        let mut ev = Evictions::default();
        let o = p.access(&Request { id, size, bytes_read, tier: 0, next_access: u64::MAX, ts, duration_us: 0 }, &mut ev);
        (o.hit, o.hit_bytes, o.filled, ev.items.iter().map(|e| e.size).sum())
    }

    /// The purge log, times counted from T0.
    fn log(p: &mut AnyPolicy) -> Vec<super::PurgeRecord> {
        let mut log = p.as_xcache_mut().unwrap().purge_log();
        for r in &mut log {
            r.time -= T0 as u64;
        }
        log
    }

    #[test]
    fn golden_partial_reads() {
        // capacity 1000, block 10, every read at one time (one purge, at the first read: no-op).
        let mut p = xcache(1000, &[("block_size", 10.0)]);
        const F: u64 = 1;
        // F (95 bytes), read 25: extent ⌈25/10⌉·10 = 30 → miss, nothing cached yet, 30 filled.
        assert_eq!(read(&mut p, 0, F, 95, 25), (false, 0, 30, 0));
        // read 30: all 30 bytes are cached → hit.
        assert_eq!(read(&mut p, 0, F, 95, 30), (true, 30, 0, 0));
        // read 31: extent 40; 30 of the 31 bytes were cached → not a hit, 30 hit bytes, 10 filled.
        assert_eq!(read(&mut p, 0, F, 95, 31), (false, 30, 10, 0));
        // whole file: extent min(100, 95) = 95 (the last block is the 5-byte remainder).
        assert_eq!(read(&mut p, 0, F, 95, 95), (false, 40, 55, 0));
        assert_eq!(read(&mut p, 0, F, 95, 95), (true, 95, 0, 0));
        // an open without data read: a hit with no bytes (F has cached blocks)
        assert_eq!(read(&mut p, 0, F, 95, 0), (true, 0, 0, 0));
        // ... but a miss that caches nothing for a file with no cached blocks
        assert_eq!(read(&mut p, 0, 2, 50, 0), (false, 0, 0, 0));
        assert!(!p.contains(2));
        // H (5000 bytes, larger than the cache): a 15-byte read caches its 20-byte extent.
        assert_eq!(read(&mut p, 0, 3, 5000, 15), (false, 0, 20, 0));
        // reading all of H: the filesystem fills (885 bytes free: 88 whole blocks are written,
        // the rest fail); the 20 cached bytes are hits.
        assert_eq!(read(&mut p, 0, 3, 5000, 5000), (false, 20, 880, 0));
        assert_eq!((p.used_bytes(), p.len()), (995, 2));
        // full: a new file caches nothing and gets no entry
        assert_eq!(read(&mut p, 0, 4, 50, 50), (false, 0, 0, 0));
        assert!(!p.contains(4));
        super::super::testing::removes_once(&mut p, 3);
        assert_eq!((p.used_bytes(), p.len()), (95, 1));
        // a removed file starts again from nothing
        assert_eq!(read(&mut p, 0, 3, 5000, 15), (false, 0, 20, 0));
        assert_eq!(log(&mut p).len(), 1, "no purge after the first read's");
    }

    #[test]
    fn golden_prefetch_caches_whole_files() {
        // prefetch > 0: a 25-byte read of a 95-byte file caches all of it (block 10)
        let mut p = xcache(1000, &[("block_size", 10.0), ("prefetch", 10.0)]);
        assert_eq!(read(&mut p, 0, 1, 95, 25), (false, 0, 95, 0));
        assert_eq!(read(&mut p, 0, 1, 95, 95), (true, 95, 0, 0));
        // an open without data read caches nothing
        assert_eq!(read(&mut p, 0, 2, 50, 0), (false, 0, 0, 0));
        // the filesystem's room still bounds it: 905 bytes left, a 2000-byte file writes 900
        assert_eq!(read(&mut p, 0, 3, 2000, 1), (false, 0, 900, 0));
    }

    /// (hit, delayed, hit_bytes, delayed_bytes, filled) of one read with a duration.
    fn timed(p: &mut AnyPolicy, t: u32, id: u64, size: u64, bytes_read: u64, duration_us: u64) -> (bool, bool, u64, u64, u64) {
        let mut ev = Evictions::default();
        let o = p.access(&Request { id, size, bytes_read, tier: 0, next_access: u64::MAX, ts: T0 + t, duration_us }, &mut ev);
        (o.hit, o.delayed, o.hit_bytes, o.delayed_bytes, o.filled)
    }

    #[test]
    fn golden_delayed_hits_from_the_origin_rate() {
        // block 10, origin 10 bytes/s: a 40-byte miss at t=0 is on disk from t=4 (one block a
        // second, in offset order)
        let mut p = xcache(1000, &[("block_size", 10.0), ("origin_rate", 10.0)]);
        assert_eq!(timed(&mut p, 0, 1, 100, 40, 0), (false, false, 0, 0, 40));
        // t=2: the first 20 bytes are on disk, 20 of 40 still in flight: a delayed hit, no fetch
        assert_eq!(timed(&mut p, 2, 1, 100, 40, 0), (false, true, 20, 20, 0));
        // t=2, 20 bytes: they arrived at t=2 → a hit
        assert_eq!(timed(&mut p, 2, 1, 100, 20, 0), (true, false, 20, 0, 0));
        // t=3, 50 bytes: needs block 5 → a miss (fetching 10), with 30 on disk and 10 in flight
        assert_eq!(timed(&mut p, 3, 1, 100, 50, 0), (false, false, 30, 10, 10));
        // t=4: the earlier fetch is done (t=4), the new one (block 5) arrives at t=4 too → hit
        assert_eq!(timed(&mut p, 4, 1, 100, 50, 0), (true, false, 50, 0, 0));
        // without a rate or a duration the same reads are instant: no delayed hits (the default)
        let mut q = xcache(1000, &[("block_size", 10.0)]);
        assert_eq!(timed(&mut q, 0, 1, 100, 40, 0), (false, false, 0, 0, 40));
        assert_eq!(timed(&mut q, 2, 1, 100, 40, 0), (true, false, 40, 0, 0));
        // a request without event time cannot wait: instant as well
        let mut r = xcache(1000, &[("block_size", 10.0), ("origin_rate", 10.0)]);
        assert_eq!(read_at(&mut r, 0, 1, 100, 40), (false, 0, 40, 0));
        assert_eq!(read_at(&mut r, 0, 1, 100, 40), (true, 40, 0, 0));
        assert!(AnyPolicy::new("xcache", 1000, &params(&[("origin_rate", -1.0)])).is_err());
    }

    #[test]
    fn golden_delayed_hits_from_durations() {
        // no rate: the access's own duration is its fetch time (30 bytes in 3 s)
        let mut p = xcache(1000, &[("block_size", 10.0)]);
        assert_eq!(timed(&mut p, 0, 1, 100, 30, 3_000_000), (false, false, 0, 0, 30));
        assert_eq!(timed(&mut p, 1, 1, 100, 30, 0), (false, true, 10, 20, 0));
        assert_eq!(timed(&mut p, 3, 1, 100, 30, 0), (true, false, 30, 0, 0));
        // a whole-file hit of a file fetched long ago is a hit whatever its duration
        assert_eq!(timed(&mut p, 10, 1, 100, 30, 5_000_000), (true, false, 30, 0, 0));
        // with a rate too, a known duration decides: 30 bytes at 1000 bytes/s would take 30 ms
        let mut q = xcache(1000, &[("block_size", 10.0), ("origin_rate", 1000.0)]);
        assert_eq!(timed(&mut q, 0, 1, 100, 30, 3_000_000), (false, false, 0, 0, 30));
        assert_eq!(timed(&mut q, 1, 1, 100, 30, 0), (false, true, 10, 20, 0));
    }

    #[test]
    fn golden_prefetch_in_time() {
        // prefetch 2 blocks, block 10, origin 10 bytes/s: a 20-byte read of a 100-byte file
        // leaves 40 bytes cached (its 2 blocks and the 2 in flight at its end), not the file
        let mut p = xcache(1000, &[("block_size", 10.0), ("prefetch", 2.0), ("origin_rate", 10.0)]);
        assert_eq!(timed(&mut p, 0, 1, 100, 20, 0), (false, false, 0, 0, 40));
        // a hit (t=10) open for 5 s: the origin brings 50 bytes meanwhile and 2 more blocks
        // are in flight at its end → 40 + 70, bounded by the file: 60 fetched
        assert_eq!(timed(&mut p, 10, 1, 100, 20, 5_000_000), (true, false, 20, 0, 60));
        assert_eq!(p.used_bytes(), 100);
        // those blocks arrive until t=15 (its duration): a read of 80 at t=11 waits for them (a delayed hit:
        // 50 bytes on disk, 30 in flight, nothing fetched)
        assert_eq!(timed(&mut p, 11, 1, 100, 80, 0), (false, true, 50, 30, 0));
        // without fetch times prefetch still caches the whole file (golden_prefetch_caches_whole_files)
    }

    #[test]
    fn golden_purge_timing() {
        // capacity 100, block 1, interval 60: hwm ⌊95.5⌋ = 95, lwm 90. Purges at 0, 60, 120, …
        let mut p = xcache(100, &[("block_size", 1.0), ("purge_interval", 60.0)]);
        let (a, b, c, d, e, f) = (1, 2, 3, 4, 5, 6);
        assert_eq!(read(&mut p, 0, a, 30, 30), (false, 0, 30, 0));
        assert_eq!(read(&mut p, 1, b, 30, 30), (false, 0, 30, 0));
        assert_eq!(read(&mut p, 2, c, 30, 30), (false, 0, 30, 0));
        // 100 > hwm, but no purge until t = 60: usage sits above the high watermark
        assert_eq!(read(&mut p, 10, d, 10, 10), (false, 0, 10, 0));
        assert_eq!(p.used_bytes(), 100);
        // the filesystem is full: E's blocks cannot be written
        assert_eq!(read(&mut p, 20, e, 5, 5), (false, 0, 0, 0));
        assert!(!p.contains(e));
        // t = 60: the purge wants 10 bytes; its candidates (oldest first up to 2 × 10 bytes) are
        // A alone, opened since the previous purge (t = 0): protected, nothing removed
        assert_eq!(read(&mut p, 60, f, 1, 1), (false, 0, 0, 0));
        let rec = *log(&mut p).last().unwrap();
        assert_eq!((rec.time, rec.disk_usage, rec.bytes_to_remove), (60, 100, 10));
        assert_eq!((rec.removed_files, rec.protected_files, rec.protected_bytes), (0, 1, 30));
        // t = 119: still no purge
        assert_eq!(read(&mut p, 119, f, 1, 1), (false, 0, 0, 0));
        // t = 120: the purge runs before this read: A (oldest, not opened since t = 60) goes;
        // 70 ≤ lwm. Then A is read again: a miss that caches it anew.
        assert_eq!(read(&mut p, 120, a, 30, 30), (false, 0, 30, 30));
        assert!(p.contains(b) && p.contains(c) && p.contains(d));
        let rec = *log(&mut p).last().unwrap();
        assert_eq!((rec.time, rec.removed_files, rec.removed_bytes, rec.protected_files), (120, 1, 30, 0));
        // a gap of several intervals: the purges at 180 and 240 run before the read at 250;
        // 180 removes B (oldest) → 70, 240 has nothing to do
        assert_eq!(read(&mut p, 250, e, 5, 5), (false, 0, 5, 30));
        let times: Vec<u64> = log(&mut p).iter().map(|r| r.time).collect();
        assert_eq!(times, [0, 60, 120, 180, 240]);
    }

    #[test]
    fn golden_resmon_checks_every_minute() {
        // XRootD 6.2 (ResourceMonitor): purgeinterval 300 s, yet a check every 60 s. Capacity
        // 100, block 1: hwm 95, lwm 90.
        let v6 = [("block_size", 1.0), ("purge_interval", 300.0), ("xrootd_version", 6.02)];
        let mut p = xcache(100, &v6);
        let (a, b, c, d) = (1, 2, 3, 4);
        assert_eq!(read(&mut p, 0, a, 40, 40), (false, 0, 40, 0));
        assert_eq!(read(&mut p, 1, b, 40, 40), (false, 0, 40, 0));
        assert_eq!(read(&mut p, 2, c, 20, 20), (false, 0, 20, 0));
        // t = 60: a check (5.5 would wait for 300): all three opened since the one at 0
        assert_eq!(read(&mut p, 60, d, 1, 1), (false, 0, 0, 0));
        let rec = *log(&mut p).last().unwrap();
        assert_eq!((rec.time, rec.bytes_to_remove, rec.removed_files, rec.protected_files), (60, 10, 0, 1));
        // t = 120: A (oldest) goes
        assert_eq!(read(&mut p, 130, d, 1, 1), (false, 0, 1, 40));
        let times: Vec<u64> = log(&mut p).iter().map(|r| r.time).collect();
        assert_eq!(times, [0, 60, 120]);
        // the same reads under 5.5's timing: no purge before 300
        let mut q = xcache(100, &[("block_size", 1.0), ("purge_interval", 300.0)]);
        for (t, id, size) in [(0, a, 40), (1, b, 40), (2, c, 20), (60, d, 1), (130, d, 1)] {
            read(&mut q, t, id, size, size);
        }
        assert_eq!(log(&mut q).iter().map(|r| r.time).collect::<Vec<_>>(), [0]);
        assert!(q.contains(a));

        // a gap: idle checks are skipped, the clock stays on the minute
        read(&mut p, 10_000, 9, 1, 1);
        read(&mut p, 10_019, 9, 1, 1);
        assert_ne!(log(&mut p).last().unwrap().time, 10_020);
        read(&mut p, 10_020, 9, 1, 1);
        assert_eq!(log(&mut p).last().unwrap().time, 10_020);

        // a purgeinterval off the minute adds its own beats, each restarting the 60 s: the
        // heart-beat starts at −60 (first check 0), reports at 30, then 120, 210, …
        let mut r = xcache(100, &[("block_size", 1.0), ("purge_interval", 90.0), ("xrootd_version", 6.02)]);
        for t in [0, 61, 91, 151, 181, 241] {
            read(&mut r, t, t as u64 + 1, 1, 1);
        }
        assert_eq!(log(&mut r).iter().map(|x| x.time).collect::<Vec<_>>(), [0, 30, 90, 120, 180, 210]);
    }

    #[test]
    fn golden_resmon_counts_pages_and_purges_cold_files_on_its_cadence() {
        // ResourceMonitor counts a file by its 4 KiB pages, not its blocks (block 1 MiB here):
        // capacity 1 MiB, watermarks 400 000 / 500 000 bytes, files of 100 000 bytes (25 pages
        // = 102 400 bytes; 1 block = 1 048 576 to 5.5)
        let (mib, f) = (1u64 << 20, 100_000u64);
        let mut p = xcache(mib, &[("low_watermark", 400_000.0), ("high_watermark", 500_000.0), ("purge_interval", 60.0),
                                  ("xrootd_version", 6.02)]);
        for (i, t) in (0..6).zip([0, 1, 2, 3, 4, 5]) {
            read(&mut p, t, i + 1, f, f);
        }
        // t = 60: everything protected; t = 120: 600 000 − 400 000 = 200 000 to remove, which
        // is 391 st_blocks (200 192 bytes): two pages-counted files (204 800) reach it
        read(&mut p, 120, 99, 1, 1);
        let rec = *log(&mut p).last().unwrap();
        assert_eq!((rec.time, rec.removed_files, rec.removed_bytes), (120, 2, 2 * f));
        // 5.5 counts whole blocks: the first file (1 MiB to it) is enough
        let mut q = xcache(mib, &[("low_watermark", 400_000.0), ("high_watermark", 500_000.0), ("purge_interval", 60.0)]);
        for (i, t) in (0..6).zip([0, 1, 2, 3, 4, 5]) {
            read(&mut q, t, i + 1, f, f);
        }
        read(&mut q, 120, 99, 1, 1);
        assert_eq!(log(&mut q).last().unwrap().removed_files, 1);

        // cold files every purgeinterval × period seconds from the heart-beat's start (the
        // first check − 60), not at the first check: interval 120, period 2 → 180, 420, …
        let mut c = xcache(1000, &[("block_size", 1.0), ("purge_interval", 120.0), ("purge_cold_age", 100.0),
                                   ("purge_cold_period", 2.0), ("xrootd_version", 6.02)]);
        read(&mut c, 0, 1, 10, 10);
        read(&mut c, 130, 2, 10, 10);
        read(&mut c, 200, 3, 10, 10);
        let cold: Vec<(u64, bool)> = log(&mut c).iter().map(|r| (r.time, r.cold)).collect();
        assert_eq!(cold, [(0, false), (60, false), (120, false), (180, true)]);
        assert!(!c.contains(1) && c.contains(2), "1 (last read at 0 < 180 − 100) is cold");
    }

    #[test]
    fn golden_purge_counts_whole_blocks() {
        // capacity 1000, block 10, interval 60, watermarks 100 and 150 bytes. Five files of 35
        // bytes (4 blocks, the last one 5 bytes) read whole: 175 bytes cached.
        let mut p = xcache(1000, &[("block_size", 10.0), ("purge_interval", 60.0), ("low_watermark", 100.0),
                                   ("high_watermark", 150.0)]);
        for id in 1..=5u64 {
            assert_eq!(read(&mut p, id as u32 - 1, id, 35, 35), (false, 0, 35, 0));
        }
        // the purge at 60 finds them all opened since the one at 0; the one at 120 has 75 bytes
        // to remove and, as XrdPfc, counts each file by its downloaded blocks (40): 2 files go
        // (70 bytes of data), not 3
        assert_eq!(read(&mut p, 120, 9, 1, 0), (false, 0, 0, 70));
        let rec = *log(&mut p).last().unwrap();
        assert_eq!((rec.time, rec.bytes_to_remove, rec.removed_files, rec.removed_bytes), (120, 75, 2, 70));
        assert_eq!(p.used_bytes(), 105);
        assert!(!p.contains(1) && !p.contains(2) && p.contains(3));
    }

    #[test]
    fn golden_protection() {
        // capacity 100, block 1, interval 60 (hwm 95, lwm 90)
        let mut p = xcache(100, &[("block_size", 1.0), ("purge_interval", 60.0)]);
        let (a, c, d, e, g) = (1, 3, 4, 5, 7);
        assert_eq!(read(&mut p, 0, a, 3, 3), (false, 0, 3, 0));
        // after the purge at 60: C, D, E (93 bytes) are opened → 96
        assert_eq!(read(&mut p, 61, c, 31, 31), (false, 0, 31, 0));
        assert_eq!(read(&mut p, 62, d, 31, 31), (false, 0, 31, 0));
        assert_eq!(read(&mut p, 63, e, 31, 31), (false, 0, 31, 0));
        // purge at 120: 6 bytes to remove, candidates up to 12 bytes: A (3, removed) and C (31,
        // protected); D is past the candidates. It ends at 93, above the low watermark.
        assert_eq!(read(&mut p, 120, g, 1, 0), (false, 0, 0, 3));
        let rec = *log(&mut p).last().unwrap();
        assert_eq!((rec.bytes_to_remove, rec.removed_bytes, rec.protected_files, rec.protected_bytes), (6, 3, 1, 31));
        assert_eq!(p.used_bytes(), 93);
        // G (3 bytes) at 130 → 96; purge at 180: 6 bytes to remove, C (not opened since 120)
        // goes first and is enough
        assert_eq!(read(&mut p, 130, g, 3, 3), (false, 0, 3, 0));
        assert_eq!(read(&mut p, 180, 8, 1, 0), (false, 0, 0, 31));
        assert!(!p.contains(c) && p.contains(d) && p.contains(e) && p.contains(g));
        // an open without data read protects too: D (read before E) is opened at 200; the purge
        // at 240 (usage 100) takes E, not D
        assert_eq!(read(&mut p, 190, 9, 35, 35), (false, 0, 35, 0));
        assert_eq!(read(&mut p, 200, d, 31, 0), (true, 0, 0, 0));
        assert_eq!(p.used_bytes(), 100);
        assert_eq!(read(&mut p, 240, 10, 1, 0), (false, 0, 0, 31));
        assert!(!p.contains(e) && p.contains(d));
    }

    #[test]
    fn golden_cold_purge() {
        // cold files: not accessed for 100 s, removed every 2nd purge (the first purge included);
        // usage stays far below the watermarks
        let mut p = xcache(1000, &[("block_size", 1.0), ("purge_interval", 60.0), ("purge_cold_age", 100.0), ("purge_cold_period", 2.0)]);
        let (a, b, c, d) = (1, 2, 3, 4);
        assert_eq!(read(&mut p, 0, a, 10, 10), (false, 0, 10, 0)); // purge 0 (cold, nothing)
        assert_eq!(read(&mut p, 10, b, 10, 10), (false, 0, 10, 0));
        assert_eq!(read(&mut p, 70, b, 10, 10), (true, 10, 0, 0)); // purge 60: not a cold one
        // purge 120 (cold): A (last access 0 < 120 − 100) goes; B (70) stays
        assert_eq!(read(&mut p, 120, c, 10, 10), (false, 0, 10, 10));
        assert!(!p.contains(a) && p.contains(b));
        // purges 180 (not cold) and 240 (cold: before 140): B (70) and C (120) go
        assert_eq!(read(&mut p, 250, d, 10, 10), (false, 0, 10, 20));
        assert!(!p.contains(b) && !p.contains(c) && p.contains(d));
        let cold: Vec<(u64, bool, u64)> = log(&mut p).iter().map(|r| (r.time, r.cold, r.removed_bytes)).collect();
        assert_eq!(cold, [(0, true, 0), (60, false, 0), (120, true, 10), (180, false, 0), (240, true, 20)]);
        // a cold file opened since the previous purge is protected (interval 300 > age 100)
        let mut q = xcache(1000, &[("block_size", 1.0), ("purge_cold_age", 100.0), ("purge_cold_period", 1.0)]);
        assert_eq!(read(&mut q, 0, a, 10, 10), (false, 0, 10, 0));
        assert_eq!(read(&mut q, 300, b, 10, 10), (false, 0, 10, 0)); // purge 300: A protected
        assert!(q.contains(a));
        // purge 600: A goes; B (300, before 500: cold too) was opened since the purge at 300
        assert_eq!(read(&mut q, 600, c, 10, 10), (false, 0, 10, 10));
        assert!(!q.contains(a) && q.contains(b));
    }

    #[test]
    fn golden_watermarks_in_bytes_and_fractions() {
        // the same cache, watermarks as fractions (0.5, 0.3 of 1000) and as bytes (500, 300)
        let trace: Vec<(u32, u64, u64)> = (0..12u64).map(|i| (i as u32 * 30, i + 1, 100)).collect();
        let mut results = Vec::new();
        for (high, low) in [(0.5, 0.3), (500.0, 300.0)] {
            let mut p = xcache(1000, &[("block_size", 1.0), ("purge_interval", 60.0), ("high_watermark", high), ("low_watermark", low)]);
            let evicted: Vec<u64> = trace.iter().map(|&(t, id, s)| read(&mut p, t, id, s, s).3).collect();
            results.push((evicted, p.used_bytes()));
        }
        // reads every 30 s, purges every 60 s: at 180 usage is 600 (> 500) with files 1–6, of
        // which 5 and 6 (opened after the purge at 120) are protected: 1–3 go (300 bytes → 300);
        // at 240 (500, not above the high watermark) nothing; at 300 (700): 4–7, oldest first
        assert_eq!(results[0], results[1]);
        assert_eq!(results[0].0, [0, 0, 0, 0, 0, 0, 300, 0, 0, 0, 400, 0]);
        // a value ≤ 1 is a fraction, > 1 bytes; low < high ≤ capacity
        assert!(AnyPolicy::new("xcache", 1000, &params(&[("low_watermark", 0.95)])).is_err());
        assert!(AnyPolicy::new("xcache", 1000, &params(&[("high_watermark", 1001.0)])).is_err());
        // 1.0 is the whole size (1000 bytes), 2.0 two bytes
        assert!(AnyPolicy::new("xcache", 1000, &params(&[("high_watermark", 1000.0), ("low_watermark", 1.0)])).is_err());
        assert!(AnyPolicy::new("xcache", 1000, &params(&[("high_watermark", 1.0), ("low_watermark", 2.0)])).is_ok());
        assert!(AnyPolicy::new("xcache", 1000, &params(&[("high_watermark", -1.0)])).is_err());
    }

    #[test]
    fn golden_files_form() {
        // `files baseline nominal max` = 100 200 300 bytes of cached files, disk 900/950 of 1000
        let files = [("files_baseline", 100.0), ("files_nominal", 200.0), ("files_max", 300.0)];
        let run = |baseline_used: f64, fu: u64| {
            let mut kv = vec![("block_size", 1.0), ("purge_interval", 60.0), ("baseline_used", baseline_used)];
            kv.extend_from_slice(&files);
            let mut p = xcache(1000, &kv);
            for i in 0..fu / 10 {
                read(&mut p, 0, i + 1, 10, 10);
            }
            // nothing was opened since the purge at 60: the purge at 120 is unhindered
            read(&mut p, 120, 999, 1, 0);
            *log(&mut p).last().unwrap()
        };
        // files at 250 > nominal, disk far below lwm: frac_fu 0.75 ≤ 1 − frac_du = 1 → max(d, f) =
        // f = 250 − 200 = 50: back to the nominal file usage
        let r = run(0.0, 250);
        assert_eq!((r.bytes_to_remove, r.removed_bytes), (50, 50));
        // disk at 950 (720 other + 230 files): frac_du 1, frac_fu 0.65 > 0 → min(max(f 30, du − lwm
        // 50), fu − baseline 130) = 50
        let r = run(720.0, 230);
        assert_eq!((r.disk_usage, r.bytes_to_remove, r.removed_bytes), (950, 50, 50));
        // 820 other + 130 files: the files never go below their baseline: min(max(0, 50), 30) = 30
        let r = run(820.0, 130);
        assert_eq!((r.bytes_to_remove, r.removed_bytes), (30, 30));
        // files at 180 < nominal, disk low: nothing
        assert_eq!(run(0.0, 180).bytes_to_remove, 0);
        // all three or none, in order
        assert!(AnyPolicy::new("xcache", 1000, &params(&[("files_max", 300.0)])).is_err());
        assert!(AnyPolicy::new("xcache", 1000, &params(&[("files_baseline", 0.3), ("files_nominal", 0.2), ("files_max", 0.4)])).is_err());
    }

    #[test]
    fn golden_baseline_used() {
        // 500 bytes of other data on a 1000-byte filesystem (hwm 950, lwm 900)
        let mut p = xcache(1000, &[("block_size", 1.0), ("purge_interval", 60.0), ("baseline_used", 500.0)]);
        for i in 0..46u64 {
            read(&mut p, 0, i + 1, 10, 10); // 460 bytes of files: disk 960
        }
        // the filesystem has 40 bytes left: a 50-byte read writes 40 of them
        assert_eq!(read(&mut p, 1, 100, 50, 50), (false, 0, 40, 0));
        assert_eq!(p.used_bytes(), 500);
        // purge at 120 (nothing opened since 60): disk 1000 → 900, 100 bytes of the oldest files
        assert_eq!(read(&mut p, 120, 999, 1, 0), (false, 0, 0, 100));
        let rec = *log(&mut p).last().unwrap();
        assert_eq!((rec.disk_usage, rec.bytes_to_remove), (1000, 100));
        assert!(!p.contains(10) && p.contains(11) && p.contains(100));
        assert!(AnyPolicy::new("xcache", 1000, &params(&[("baseline_used", 1001.0)])).is_err());
    }

    #[test]
    fn seeded_warm_start() {
        let mut p = xcache(100, &[("block_size", 1.0), ("purge_interval", 60.0)]);
        // files 1..=4 of 24 bytes, 1 the oldest; 96 > hwm
        let seed: Vec<(u64, u64, u32)> = (1..=4).rev().map(|i| (i, 24, T0 - 100 + i as u32)).collect();
        p.as_xcache_mut().unwrap().seed(&seed).unwrap();
        assert_eq!((p.used_bytes(), p.len()), (96, 4));
        // the first read's purge (seeded files are not protected): 1 goes (96 → 72)
        assert_eq!(read(&mut p, 2000, 3, 24, 24), (true, 24, 0, 24));
        assert!(!p.contains(1) && p.contains(2));
        assert!(p.as_xcache_mut().unwrap().seed(&seed).is_err(), "only before the first request");
        let mut q = xcache(100, &[]);
        assert!(q.as_xcache_mut().unwrap().seed(&[(1, 60, 0), (2, 41, 0)]).is_err(), "101 bytes do not fit");
    }

    #[test]
    fn untimed_requests_purge_after_each_one() {
        // ts 0 (time not known): a purge right after each read that leaves bytes to remove,
        // only the file just read protected. Capacity 100, block 1: hwm 95, lwm 90.
        let mut p = xcache(100, &[("block_size", 1.0)]);
        assert_eq!(read_at(&mut p, 0, 1, 30, 30), (false, 0, 30, 0));
        assert_eq!(read_at(&mut p, 0, 2, 30, 30), (false, 0, 30, 0));
        assert_eq!(read_at(&mut p, 0, 3, 30, 30), (false, 0, 30, 0));
        assert_eq!(read_at(&mut p, 0, 1, 30, 30), (true, 30, 0, 0));
        // 96 > 95 after the read of 4: 6 bytes to remove, 2 (the least recently read) goes → 66
        assert_eq!(read_at(&mut p, 0, 4, 6, 6), (false, 0, 6, 30));
        assert!(!p.contains(2) && p.contains(3));
        // a 95-byte file: 34 bytes written (the rest fail), 100 → 10 to remove: 3 goes → 70
        assert_eq!(read_at(&mut p, 0, 5, 95, 95), (false, 0, 34, 30));
        assert!(p.contains(5) && p.contains(4) && p.contains(1) && !p.contains(3));
        assert_eq!(p.used_bytes(), 70);
    }

    #[test]
    fn default_block_size_and_watermarks() {
        // defaults: 1 MiB blocks, watermarks 0.95 / 0.90, purges every 300 s. Capacity 100 MiB.
        const MIB: u64 = 1 << 20;
        let mut p = AnyPolicy::new("xcache", 100 * MIB, &Params::default()).unwrap();
        // a 1-byte read of a 3.5 MiB file caches one block
        assert_eq!(read(&mut p, 0, 1, 7 * MIB / 2, 1), (false, 0, MIB, 0));
        // reading 2.5 MiB: 1 MiB hit, blocks 2–3 fetched
        assert_eq!(read(&mut p, 0, 1, 7 * MIB / 2, 5 * MIB / 2), (false, MIB, 2 * MIB, 0));
        assert_eq!(read(&mut p, 0, 2, 93 * MIB, 93 * MIB), (false, 0, 93 * MIB, 0));
        // 96 MiB > 95: the purge at 300 finds both files opened since the purge at 0
        // (protected); the one at 600 removes file 1 (3 MiB, the oldest), not enough for the 6 MiB
        // to remove, then file 2
        assert_eq!(read(&mut p, 299, 3, 1, 0), (false, 0, 0, 0));
        assert_eq!(read(&mut p, 300, 3, 1, 0), (false, 0, 0, 0));
        assert_eq!(read(&mut p, 600, 3, 1, 0), (false, 0, 0, 96 * MIB));
        assert!(AnyPolicy::new("xcache", 100, &params(&[("block_size", 0.5)])).is_err());
        assert!(AnyPolicy::new("xcache", 100, &params(&[("purge_interval", 0.0)])).is_err());
        assert!(AnyPolicy::new("xcache", 100, &params(&[("purge_cold_period", 0.0)])).is_err());
    }

    /// A random trace with times: usage never above capacity − baseline_used, bytes balance
    /// (filled = growth + evicted), and a snapshot halfway continues identically (purge clock,
    /// protection and log included).
    #[test]
    fn timed_invariants_and_snapshot() {
        for (seed, cap, kv) in [
            (7u64, 40u64, vec![("block_size", 4.0), ("purge_interval", 5.0)]),
            (11, 100, vec![("block_size", 1.0), ("purge_interval", 3.0), ("baseline_used", 20.0), ("purge_cold_age", 40.0)]),
            (23, 250, vec![("block_size", 2.0), ("purge_interval", 7.0), ("files_baseline", 0.2), ("files_nominal", 0.4), ("files_max", 0.6)]),
        ] {
            let baseline = kv.iter().find(|k| k.0 == "baseline_used").map_or(0, |k| k.1 as u64);
            let mut p = xcache(cap, &kv);
            let trace = super::super::arc::check::random_trace(seed, 20_000, true);
            let run = |p: &mut AnyPolicy, part: &[(u64, u64, u64, u8)], t0: usize| -> String {
                let mut out = String::new();
                let mut ev = Evictions::default();
                for (i, &(id, size, bytes_read, op)) in part.iter().enumerate() {
                    if op == 2 {
                        p.remove(id);
                        continue;
                    }
                    let before = p.used_bytes();
                    ev.items.clear();
                    let ts = ((t0 + i) / 3) as u32; // three reads a second
                    let o = p.access(&Request { id, size, bytes_read, tier: 0, next_access: u64::MAX, ts, duration_us: 0 }, &mut ev);
                    let evicted: u64 = ev.items.iter().map(|e| e.size).sum();
                    assert!(p.used_bytes() + baseline <= p.capacity());
                    assert_eq!(before + o.filled, p.used_bytes() + evicted);
                    out.push(if o.hit { 'H' } else { 'm' });
                }
                out
            };
            let (a, b) = trace.split_at(10_000);
            let first = run(&mut p, a, 0);
            assert!(first.contains('H') && first.contains('m'));
            let raw = |p: &mut AnyPolicy| p.as_xcache_mut().unwrap().purge_log();
            assert!(raw(&mut p).iter().any(|r| r.removed_files > 0));
            let mut q: AnyPolicy = postcard::from_bytes(&postcard::to_stdvec(&p).unwrap()).unwrap();
            assert_eq!(run(&mut p, b, 10_000), run(&mut q, b, 10_000));
            assert_eq!(raw(&mut p), raw(&mut q));
        }
    }

    #[test]
    fn invariants_and_snapshot() {
        super::super::arc::check::invariants_and_snapshot("xcache", &[("block_size", 4.0)], true);
        // partial reads only: the shared check's whole-file rule (a file larger than the cache is
        // not cached) is libCacheSim's; xcache writes the blocks that fit (see the module doc)
        super::super::arc::check::invariants_and_snapshot("xcache", &[("block_size", 1.0), ("low_watermark", 0.5)], true);
    }
}
