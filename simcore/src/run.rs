//! A whole trace file through a bank in one pass: the reader's threads decompress and parse
//! while the caches simulate on every core (what `cachescope simulate` runs).

use crate::bank::{feed_cache, Bank, Events, OP_READ};
use crate::reader::{named, Format, Msg, Stream, BATCH_ROWS, CANCELLED};
use crate::shadow::{CacheSpec, Shadow};
use crate::stats::N_FIELDS;
use crate::trace::Columns;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// How far a whole-file run is, readable from another thread while it runs (a progress bar):
/// rows read, rows every cache is done with, and the share of the file read.
#[derive(Default)]
pub struct Progress {
    rows_read: AtomicU64,
    rows_done: AtomicU64,
    /// (bytes taken from the file so far, the file's size; 0 for standard input)
    file: OnceLock<(Arc<AtomicU64>, u64)>,
    cancelled: AtomicBool,
}

/// How often a waiting run looks whether it was cancelled.
const CANCEL_POLL: std::time::Duration = std::time::Duration::from_millis(50);

impl Progress {
    /// Stop the run at its next batch (from another thread: Ctrl-C in Python); it then fails
    /// with `reader::CANCELLED`.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }
    /// The flag `cancel` sets (for `reader::read_all_until`).
    pub fn cancelled(&self) -> &AtomicBool {
        &self.cancelled
    }
    fn check(&self) -> Result<(), String> {
        if self.cancelled.load(Ordering::Relaxed) {
            Err(CANCELLED.into())
        } else {
            Ok(())
        }
    }
    fn read(&self, rows: usize) {
        self.rows_read.fetch_add(rows as u64, Ordering::Relaxed);
    }
    fn done(&self, rows: usize) {
        self.rows_done.fetch_add(rows as u64, Ordering::Relaxed);
    }
    /// Rows every cache is done with.
    pub fn rows(&self) -> u64 {
        self.rows_done.load(Ordering::Relaxed)
    }
    /// Share of the run done, 0 to 1: the share of the file read times the share of the rows
    /// read that are done (exact at the end; 0 while nothing is known, as for standard input).
    pub fn fraction(&self) -> f64 {
        let Some((consumed, size)) = self.file.get() else { return 0.0 };
        let (read, done) = (self.rows_read.load(Ordering::Relaxed), self.rows_done.load(Ordering::Relaxed));
        if *size == 0 || read == 0 {
            return 0.0;
        }
        let file = (consumed.load(Ordering::Relaxed) as f64 / *size as f64).min(1.0);
        file * (done.min(read) as f64 / read as f64)
    }
}

/// Tier codes a streamed trace may use (its tier names are known only at its end).
pub const STREAM_TIERS: usize = 256;

#[derive(Debug)]
pub struct Run {
    /// Exact totals shaped (caches, tier_names.len(), fields), flat.
    pub totals: Vec<u128>,
    pub tier_names: Vec<String>,
    pub rows: u64,
}

pub fn simulate_file(path: &str, format: Format, specs: Vec<CacheSpec>) -> Result<Run, String> {
    simulate_file_with(path, format, specs, &Progress::default())
}

/// `simulate_file`, reporting how far it is into `progress`.
pub fn simulate_file_with(path: &str, format: Format, specs: Vec<CacheSpec>, progress: &Progress) -> Result<Run, String> {
    simulate_file_seeded(path, format, specs, &[], progress)
}

/// Files of a warm start: (cache index, files (id, cached bytes, last access in seconds)).
pub type Seeds = [(usize, Vec<(u64, u64, u32)>)];

/// `simulate_file_with`, some caches (xcache) first seeded with what a real cache holds.
pub fn simulate_file_seeded(path: &str, format: Format, specs: Vec<CacheSpec>, seeds: &Seeds, progress: &Progress) -> Result<Run, String> {
    let threads = rayon::current_num_threads();
    // a thread of several caches switches tables at every batch: batches of 64 Ki rows per
    // cache, up to 2 Mi rows, amortise it (24 caches: 13% less CPU than 256 Ki rows, ~70 MiB
    // more); one cache keeps small batches, its start comes sooner
    let rows = BATCH_ROWS * specs.len().clamp(1, 32);
    simulate_file_in(path, format, specs, seeds, rows, threads, progress)
}

/// `simulate_file` with `rows` per batch, the caches on up to `threads` threads.
fn simulate_file_in(
    path: &str,
    format: Format,
    specs: Vec<CacheSpec>,
    seeds: &Seeds,
    rows: usize,
    threads: usize,
    progress: &Progress,
) -> Result<Run, String> {
    let mut bank = Bank::new(specs, STREAM_TIERS)?;
    for (cache, files) in seeds {
        bank.seed(*cache, files)?;
    }
    if bank.needs_future() {
        return Err("policy belady needs the whole trace in memory (next-access times)".into());
    }
    // dense file keys: the caches index arrays instead of hashing ids (`SlotMap::dense`)
    let keys = bank.use_dense_ids();
    let stream = Stream::start(path, format, rows, keys)?;
    let size = if path == "-" { 0 } else { std::fs::metadata(path).map_or(0, |m| m.len()) };
    let _ = progress.file.set((stream.consumed.clone(), size));
    let threads = threads.min(bank.shadows.len());
    let end = if threads > 1 { feed_shared(&mut bank, &stream, keys, threads, progress) } else { feed(&mut bank, &stream, keys, progress) };
    let (tier_names, rows) = end.map_err(|e| named(path, e))?;
    let n_tiers = tier_names.len().max(1);
    let all = bank.totals();
    let per_cache = STREAM_TIERS * N_FIELDS;
    let totals = all.chunks(per_cache).flat_map(|c| c[..n_tiers * N_FIELDS].iter().copied()).collect();
    Ok(Run { totals, tier_names, rows })
}

/// The working set of a trace file, in one streamed pass without caches: the bytes of its
/// distinct files, each at its first-seen size, and its rows (what a size of `5%` is a share of).
pub fn working_set(path: &str, format: Format, progress: &Progress) -> Result<(u128, u64), String> {
    let stream = Stream::start(path, format, BATCH_ROWS * 8, true)?;
    let (mut distinct, mut bytes) = (0u64, 0u128);
    loop {
        match next(&stream, progress).map_err(|e| named(path, e))? {
            Ok(b) => {
                // keys number the files in order of first appearance: a new file's is the next one
                for (&key, &size) in b.key.iter().zip(&b.size) {
                    if key == distinct {
                        bytes += size as u128;
                        distinct += 1;
                    }
                }
                stream.recycle(b);
            }
            Err((_, rows)) => return Ok((bytes, rows)),
        }
    }
}

/// A reader batch as the bank's events (whole trace: every row a read, no windows).
fn events<'a>(b: &'a Columns, ops: &'a [u8], keys: bool) -> Events<'a> {
    Events {
        id: &b.id,
        size: &b.size,
        bytes_read: &b.bytes_read,
        tier: &b.tier,
        op: &ops[..b.len()],
        next_access: None,
        window: None,
        ts: None,
        key: keys.then_some(&b.key[..]),
        duration_us: None,
    }
}

/// A batch's event times as whole seconds, for the caches that run on them (`Bank::needs_clock`).
fn clock(b: &Columns, needed: bool) -> Option<Arc<[u32]>> {
    needed.then(|| b.timestamp.iter().map(|&t| t.clamp(0.0, u32::MAX as f64) as u32).collect())
}

/// The stream's next message: a batch, or its end (tier names, rows); `CANCELLED` once the run
/// is cancelled, even while the reader waits for its input.
fn next(stream: &Stream, progress: &Progress) -> Result<Result<Columns, (Vec<String>, u64)>, String> {
    match stream.next_msg(&progress.cancelled)? {
        Msg::Batch(b) => Ok(Ok(b)),
        Msg::End { tier_names, rows } => Ok(Err((tier_names, rows))),
        Msg::Error(e) => Err(e),
    }
}

/// Every row a read: `ops` grown to the batch (a CSV batch can pass `rows` by a chunk's lines).
fn reads(ops: &mut Arc<[u8]>, n: usize) {
    if ops.len() < n {
        *ops = vec![OP_READ; n].into();
    }
}

/// Every batch through the whole bank in turn (its caches over all cores within a batch).
fn feed(bank: &mut Bank, stream: &Stream, keys: bool, progress: &Progress) -> Result<(Vec<String>, u64), String> {
    let mut ops: Arc<[u8]> = vec![OP_READ; stream.rows].into();
    let timed = bank.needs_clock();
    loop {
        match next(stream, progress)? {
            Ok(b) => {
                reads(&mut ops, b.len());
                progress.read(b.len());
                let clock = clock(&b, timed);
                bank.feed_totals_at(&events(&b, &ops, keys), clock.as_deref())?;
                progress.done(b.len());
                stream.recycle(b);
            }
            Err(end) => return Ok(end),
        }
    }
}

/// Work shared by the simulation threads: loaded batches and, per cache, the next batch it
/// needs (a cache runs its batches in order, one thread at a time).
struct Shared {
    /// Loaded batches, oldest first: (sequence number, columns, caches still to run it).
    batches: std::collections::VecDeque<(u64, Batch, usize)>,
    /// Sequence number of the next batch to load.
    loaded: u64,
    next: Vec<u64>,
    busy: Vec<bool>,
    /// Each cache's time on its last batch: the costliest go first, so that the last batch
    /// ends with short tasks on every thread.
    cost: Vec<std::time::Duration>,
    /// The reader is done (or failed): no batch will come.
    done: bool,
    failed: bool,
}

/// A loaded batch, its ops column (every row a read) and its `Events::uniform_tier`, found once
/// for every cache.
type Batch = (Arc<Columns>, Arc<[u8]>, Option<u8>, Option<Arc<[u32]>>);

impl Shared {
    /// The oldest task a free cache can run: (cache, batch sequence number, batch).
    fn pick(&self) -> Option<(usize, u64, Batch)> {
        for (seq, b, left) in &self.batches {
            if *left == 0 {
                continue;
            }
            let free = (0..self.next.len()).filter(|&c| self.next[c] == *seq && !self.busy[c]);
            if let Some(c) = free.max_by_key(|&c| self.cost[c]) {
                return Some((c, *seq, b.clone()));
            }
        }
        None
    }
}

/// Loaded batches at most (each up to `rows` rows): bounds memory, keeps the threads fed.
const LOADED: usize = 3;

/// The caches run by `threads` threads from a shared list of (cache, batch) tasks, oldest batch
/// first and costliest cache first: no thread waits for another at each batch (the slowest
/// cache of a batch set the pace with a barrier per batch), none ends long before the other,
/// and the first batch starts as soon as it is read. Each cache still sees its batches in
/// order, on one thread at a time.
fn feed_shared(bank: &mut Bank, stream: &Stream, keys: bool, threads: usize, progress: &Progress) -> Result<(Vec<String>, u64), String> {
    use std::sync::{Condvar, Mutex};
    let n = bank.shadows.len();
    let per_cache = bank.n_tiers;
    let timed = bank.needs_clock();
    let caches: Vec<Mutex<Shadow>> = std::mem::take(&mut bank.shadows).into_iter().map(Mutex::new).collect();
    let shared = Mutex::new(Shared {
        batches: Default::default(),
        loaded: 0,
        next: vec![0; n],
        busy: vec![false; n],
        cost: vec![Default::default(); n],
        done: false,
        failed: false,
    });
    let changed = Condvar::new();
    let mut ops: Arc<[u8]> = vec![OP_READ; stream.rows].into();
    let recycler = stream.recycler();
    let result = std::thread::scope(|scope| {
        let (shared, changed, caches) = (&shared, &changed, &caches);
        for _ in 0..threads {
            let recycler = recycler.clone();
            scope.spawn(move || {
                let mut state = shared.lock().unwrap();
                loop {
                    if state.failed {
                        return;
                    }
                    if let Some((c, seq, (b, ops, uniform, clock))) = state.pick() {
                        state.busy[c] = true;
                        drop(state);
                        let t = std::time::Instant::now();
                        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            let mut cache = caches[c].lock().unwrap();
                            feed_cache(&mut cache, &events(&b, &ops, keys), 1, per_cache, true, uniform, clock.as_deref());
                        }));
                        let took = t.elapsed();
                        drop(b);
                        state = shared.lock().unwrap();
                        if ran.is_err() {
                            // an error, never a hang or a count short of this batch
                            state.failed = true;
                            changed.notify_all();
                            return;
                        }
                        state.busy[c] = false;
                        state.next[c] = seq + 1;
                        state.cost[c] = took;
                        let i = (seq - state.batches[0].0) as usize;
                        state.batches[i].2 -= 1;
                        while state.batches.front().is_some_and(|(_, _, left)| *left == 0) {
                            let (_, (b, _, _, _), _) = state.batches.pop_front().unwrap();
                            progress.done(b.len());
                            if let Ok(cols) = Arc::try_unwrap(b) {
                                let _ = recycler.try_send(cols);
                            }
                        }
                        changed.notify_all();
                        continue;
                    }
                    if state.done && state.batches.is_empty() {
                        return;
                    }
                    state = changed.wait(state).unwrap();
                }
            });
        }
        // this thread loads batches (it waits on the reader or on the simulation threads)
        let result = loop {
            let msg = next(stream, progress);
            let batch = match msg {
                Ok(Ok(b)) => b,
                Ok(Err(end)) => break Ok(end),
                Err(e) => break Err(e),
            };
            reads(&mut ops, batch.len());
            let clock = clock(&batch, timed);
            let ev = events(&batch, &ops, keys);
            if let Err(e) = bank.admit(&ev) {
                break Err(e);
            }
            let uniform = ev.uniform_tier();
            bank.events_seen += batch.len() as u64;
            progress.read(batch.len());
            let mut state = shared.lock().unwrap();
            while state.batches.len() >= LOADED && !state.failed && progress.check().is_ok() {
                state = changed.wait_timeout(state, CANCEL_POLL).unwrap().0;
            }
            if state.failed {
                break Err("a simulation thread failed".into());
            }
            if let Err(e) = progress.check() {
                break Err(e);
            }
            let seq = state.loaded;
            state.loaded += 1;
            state.batches.push_back((seq, (Arc::new(batch), ops.clone(), uniform, clock), n));
            changed.notify_all();
        };
        let mut state = shared.lock().unwrap();
        state.done = true;
        state.failed |= result.is_err();
        changed.notify_all();
        let failed = state.failed;
        drop(state);
        if failed && result.is_ok() {
            return Err("a simulation thread failed".into());
        }
        result
    });
    // a thread that panicked poisons its cache's lock: an error, not a wrong count
    bank.shadows = caches.into_iter().map(|m| m.into_inner()).collect::<Result<_, _>>().map_err(|_| "a simulation thread failed")?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bank::{Events, OP_READ};
    use crate::policy::POLICY_NAMES;

    /// A skewed trace of (id, size): sparse 64-bit ids, sizes fixed per file.
    fn trace(n: usize) -> Vec<(u64, u64)> {
        (0..n as u64)
            .map(|i| {
                let a = crate::util::hash::mix64(i) % 500;
                let id = crate::util::hash::mix64((a * a) / 500 + 7);
                (id, 1 + id % 61)
            })
            .collect()
    }

    /// The bank fed the trace at once by id, its event times (xcache's clock) the row numbers
    /// as the CSV files below write them.
    fn totals_by_id(specs: Vec<CacheSpec>, t: &[(u64, u64)]) -> Vec<u128> {
        let mut bank = Bank::new(specs, STREAM_TIERS).unwrap();
        let (id, size): (Vec<u64>, Vec<u64>) = t.iter().copied().unzip();
        let (tier, op) = (vec![0u8; t.len()], vec![OP_READ; t.len()]);
        let clock: Vec<u32> = (0..t.len() as u32).collect();
        let ev = Events { id: &id, size: &size, bytes_read: &size, tier: &tier, op: &op, next_access: None, window: None, ts: None, key: None, duration_us: None };
        bank.feed_totals_at(&ev, Some(&clock)).unwrap();
        bank.totals()
    }

    #[test]
    fn xcache_runs_on_the_traces_timestamps_and_takes_seeds() {
        // a streamed CSV run gives xcache the timestamp column (seconds) as its clock: the same
        // counts as a bank fed that clock, other counts than one fed none (purges every 300 s of
        // event time, against one purge at the first read); a seeded cache starts warm
        let t = trace(20_000);
        let path = csv_file("xcache", &t, "");
        let spec = |cap| CacheSpec { params: [("block_size".to_string(), 1.0)].into(), ..CacheSpec::new("xcache", cap) };
        let specs = vec![spec(2_000), spec(8_000)];
        let run = simulate_file(path.to_str().unwrap(), Format::Csv, specs.clone()).unwrap();
        let by_id = totals_by_id(specs.clone(), &t);
        let per_cache = STREAM_TIERS * N_FIELDS;
        let mut untimed = Bank::new(specs.clone(), STREAM_TIERS).unwrap();
        let (id, size): (Vec<u64>, Vec<u64>) = t.iter().copied().unzip();
        let (tier, op) = (vec![0u8; t.len()], vec![OP_READ; t.len()]);
        untimed.feed_totals(&Events { id: &id, size: &size, bytes_read: &size, tier: &tier, op: &op, next_access: None, window: None, ts: None, key: None, duration_us: None }).unwrap();
        let untimed = untimed.totals();
        for c in 0..specs.len() {
            let ours = &run.totals[c * N_FIELDS..(c + 1) * N_FIELDS];
            assert_eq!(ours, &by_id[c * per_cache..c * per_cache + N_FIELDS]);
            assert_ne!(ours, &untimed[c * per_cache..c * per_cache + N_FIELDS]);
            assert!(ours[crate::stats::EVICTIONS] > 0);
        }
        // seeded with the trace's first file: its first read is a hit
        let seeds = vec![(1usize, vec![(t[0].0, t[0].1, 0u32)])];
        let cold = simulate_file_seeded(path.to_str().unwrap(), Format::Csv, specs.clone(), &[], &Progress::default()).unwrap();
        let warm = simulate_file_seeded(path.to_str().unwrap(), Format::Csv, specs.clone(), &seeds, &Progress::default()).unwrap();
        assert_eq!(warm.totals[crate::stats::HITS], cold.totals[crate::stats::HITS], "cache 0 is not seeded");
        assert!(warm.totals[N_FIELDS + crate::stats::HITS] > cold.totals[N_FIELDS + crate::stats::HITS]);
        let e = simulate_file_seeded(path.to_str().unwrap(), Format::Csv, vec![CacheSpec::new("lru", 10)], &[(0, vec![(1, 1, 0)])], &Progress::default());
        assert!(e.unwrap_err().contains("only xcache"));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn dense_keys_give_every_policy_the_counts_of_its_ids() {
        // whole-trace simulation (keys numbered by the reader, caches on arrays) against the
        // same caches fed the file ids: equal counters for every policy, sampled and
        // partitioned caches (which keep ids) among them
        let t = trace(40_000);
        let dir = std::env::temp_dir().join(format!("simcore-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.csv");
        let body: String = t.iter().enumerate().map(|(i, (id, s))| format!("{i},{id},{s}\n")).collect();
        std::fs::write(&path, format!("timestamp,obj_id,obj_size\n{body}")).unwrap();
        let mut specs: Vec<CacheSpec> =
            POLICY_NAMES.iter().filter(|&&p| p != "belady").flat_map(|p| [CacheSpec::new(p, 300), CacheSpec::new(p, 2_000)]).collect();
        specs.push(CacheSpec { sample_rate: 0.5, ..CacheSpec::new("lru", 1_000) });
        specs.push(CacheSpec { partitions: 3, ..CacheSpec::new("arc", 1_000) });
        let mut keyed = Bank::new(specs.clone(), STREAM_TIERS).unwrap();
        assert!(keyed.use_dense_ids());
        let taking: Vec<bool> = keyed.shadows.iter().map(|s| s.keyed()).collect();
        assert!(taking.iter().filter(|&&k| k).count() >= 20, "{taking:?}");
        assert!(!taking[taking.len() - 1] && !taking[taking.len() - 2], "sampled and partitioned caches keep ids");
        let run = simulate_file(path.to_str().unwrap(), Format::Csv, specs.clone()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let by_id = totals_by_id(specs.clone(), &t);
        let per_cache = STREAM_TIERS * N_FIELDS;
        for (c, spec) in specs.iter().enumerate() {
            let ours = &run.totals[c * N_FIELDS..(c + 1) * N_FIELDS];
            let theirs = &by_id[c * per_cache..c * per_cache + N_FIELDS];
            assert_eq!(ours, theirs, "{} {}", spec.policy, spec.capacity);
        }
        // a comparison of caches that do something: most both hit and evict here
        let busy = run.totals.chunks(N_FIELDS).filter(|c| c[crate::stats::HITS] > 0 && c[crate::stats::EVICTIONS] > 0).count();
        assert!(busy + 3 >= specs.len(), "{busy} of {} caches hit and evict", specs.len());
    }

    fn csv_file(name: &str, t: &[(u64, u64)], extra: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("simcore-run-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.csv");
        let body: String = t.iter().enumerate().map(|(i, (id, s))| format!("{i},{id},{s}\n")).collect();
        std::fs::write(&path, format!("timestamp,obj_id,obj_size\n{body}{extra}")).unwrap();
        path
    }

    #[test]
    fn shared_threads_give_the_counts_of_one_bank_over_many_batches() {
        // batches of 1,000 rows (CSV batches pass that by a chunk's lines), caches run by 1, 2, 3
        // and 5 threads taking (cache, batch) tasks: the totals of the whole bank fed the trace
        // at once, cache by cache
        let t = trace(60_000);
        let path = csv_file("threads", &t, "");
        let specs: Vec<CacheSpec> = ["lru", "arc", "s3fifo", "lirs", "fifo", "xcache"]
            .iter()
            .flat_map(|p| [CacheSpec::new(p, 400), CacheSpec::new(p, 3_000)])
            .chain([CacheSpec { sample_rate: 0.5, ..CacheSpec::new("lru", 1_000) }])
            .collect();
        let by_id = totals_by_id(specs.clone(), &t);
        let per_cache = STREAM_TIERS * N_FIELDS;
        for threads in [1, 2, 3, 5] {
            let progress = Progress::default();
            let run = simulate_file_in(path.to_str().unwrap(), Format::Csv, specs.clone(), &[], 1_000, threads, &progress).unwrap();
            assert_eq!(run.rows, t.len() as u64);
            assert_eq!((progress.rows(), progress.fraction()), (run.rows, 1.0), "every row done, the whole file read");
            for (c, spec) in specs.iter().enumerate() {
                let ours = &run.totals[c * N_FIELDS..(c + 1) * N_FIELDS];
                assert_eq!(ours, &by_id[c * per_cache..c * per_cache + N_FIELDS], "{threads} threads: {} {}", spec.policy, spec.capacity);
            }
        }
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_bad_row_after_many_batches_fails_with_any_threads() {
        let t = trace(30_000);
        let path = csv_file("bad", &t, "30000,not-a-number,5\n");
        let specs = vec![CacheSpec::new("lru", 400), CacheSpec::new("arc", 400), CacheSpec::new("s3fifo", 400)];
        for threads in [1, 2, 3] {
            let e = simulate_file_in(path.to_str().unwrap(), Format::Csv, specs.clone(), &[], 1_000, threads, &Progress::default()).unwrap_err();
            assert!(e.contains("t.csv") && e.contains("30002"), "{e}");
            assert_eq!(e.matches("t.csv").count(), 1, "the file named once: {e}");
        }
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn working_set_counts_each_file_once_at_its_first_size() {
        // file 5 comes back with another size: its first one counts
        let small = csv_file("wss", &[(5, 10), (6, 3), (5, 99), (7, 1), (6, 3)], "");
        assert_eq!(working_set(small.to_str().unwrap(), Format::Csv, &Progress::default()).unwrap(), (14, 5));
        let t = trace(50_000);
        let path = csv_file("wss-big", &t, "");
        let mut first = std::collections::HashMap::new();
        for &(id, size) in &t {
            first.entry(id).or_insert(size);
        }
        let want: u128 = first.values().map(|&s| s as u128).sum();
        assert_eq!(working_set(path.to_str().unwrap(), Format::Csv, &Progress::default()).unwrap(), (want, t.len() as u64));
        let bad = csv_file("wss-bad", &t, "50000,x,1\n");
        let e = working_set(bad.to_str().unwrap(), Format::Csv, &Progress::default()).unwrap_err();
        assert!(e.contains("line 50002") && e.matches("t.csv").count() == 1, "{e}");
        for p in [small, path, bad] {
            std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
        }
    }

    #[test]
    fn a_cancelled_run_fails_as_cancelled() {
        // cancelled before the first batch (Python cancels on Ctrl-C): fails with CANCELLED, on
        // one thread or several (`next` looks at the flag while it waits for the reader too)
        let t = trace(20_000);
        let path = csv_file("cancel", &t, "");
        let specs = vec![CacheSpec::new("lru", 400), CacheSpec::new("arc", 400)];
        for threads in [1, 2] {
            let progress = Progress::default();
            progress.cancel();
            let e = simulate_file_in(path.to_str().unwrap(), Format::Csv, specs.clone(), &[], 1_000, threads, &progress).unwrap_err();
            assert_eq!(e, CANCELLED);
        }
        let progress = Progress::default();
        progress.cancel();
        assert_eq!(working_set(path.to_str().unwrap(), Format::Csv, &progress).unwrap_err(), CANCELLED);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_line_without_end_is_refused_not_grown() {
        let mut body = b"timestamp,obj_id,obj_size\n1,1,5\n".to_vec();
        body.resize(body.len() + crate::reader::MAX_LINE + (1 << 20) + 5, b'7');
        let dir = std::env::temp_dir().join(format!("simcore-run-long-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.csv");
        std::fs::write(&path, &body).unwrap();
        let e = simulate_file(path.to_str().unwrap(), Format::Csv, vec![CacheSpec::new("lru", 10)]).unwrap_err();
        assert!(e.contains("t.csv") && e.contains("a line longer than 16 MiB"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_keyed_bank_refuses_batches_without_keys() {
        let mut bank = Bank::new(vec![CacheSpec::new("lru", 10)], 1).unwrap();
        assert!(bank.use_dense_ids());
        let z = [0u8];
        let ev = Events { id: &[1], size: &[1], bytes_read: &[1], tier: &z, op: &z, next_access: None, window: None, ts: None, key: None, duration_us: None };
        assert!(bank.feed_totals(&ev).unwrap_err().contains("dense file keys"));
    }
}
