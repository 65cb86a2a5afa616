//! A whole trace file through a bank in one pass: the reader's threads decompress and parse
//! while the caches simulate, split into lanes of one thread each (what `cachescope simulate`
//! runs).

use crate::bank::{feed_cache, Bank, Events, OP_READ};
use crate::reader::{Format, Msg, Stream, BATCH_ROWS};
use crate::shadow::{CacheSpec, Shadow};
use crate::stats::N_FIELDS;
use crate::trace::Columns;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

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
    let lanes = rayon::current_num_threads();
    // a thread of several caches switches tables at every batch: batches of 64 Ki rows per
    // cache, up to 2 Mi rows, amortise it (24 caches: 13% less CPU than 256 Ki rows, ~70 MiB
    // more); one cache keeps small batches, its start comes sooner
    let rows = BATCH_ROWS * specs.len().clamp(1, 32);
    simulate_file_in(path, format, specs, rows, lanes)
}

/// `simulate_file` with `rows` per batch, the caches on up to `lanes` threads.
fn simulate_file_in(path: &str, format: Format, specs: Vec<CacheSpec>, rows: usize, lanes: usize) -> Result<Run, String> {
    let mut bank = Bank::new(specs, STREAM_TIERS)?;
    if bank.needs_future() {
        return Err("policy belady needs the whole trace in memory (next-access times)".into());
    }
    // dense file keys: the caches index arrays instead of hashing ids (`SlotMap::dense`)
    let keys = bank.use_dense_ids();
    let stream = Stream::start(path, format, rows, keys)?;
    let lanes = lanes.min(bank.shadows.len());
    let end = if lanes > 1 { feed_in_lanes(&mut bank, &stream, keys, lanes) } else { feed(&mut bank, &stream, keys) };
    let (tier_names, rows) = end.map_err(|e| format!("{path}: {e}"))?;
    let n_tiers = tier_names.len().max(1);
    let all = bank.totals();
    let per_cache = STREAM_TIERS * N_FIELDS;
    let totals = all.chunks(per_cache).flat_map(|c| c[..n_tiers * N_FIELDS].iter().copied()).collect();
    Ok(Run { totals, tier_names, rows })
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
    }
}

/// The stream's next message: a batch, or its end (tier names, rows).
fn next(stream: &Stream) -> Result<Result<Columns, (Vec<String>, u64)>, String> {
    match stream.rx.recv() {
        Ok(Msg::Batch(b)) => Ok(Ok(b)),
        Ok(Msg::End { tier_names, rows }) => Ok(Err((tier_names, rows))),
        Ok(Msg::Error(e)) => Err(e),
        Err(_) => Err("the reader stopped unexpectedly".into()),
    }
}

/// Every row a read: `ops` grown to the batch (a CSV batch can pass `rows` by a chunk's lines).
fn reads(ops: &mut Arc<[u8]>, n: usize) {
    if ops.len() < n {
        *ops = vec![OP_READ; n].into();
    }
}

/// Every batch through the whole bank in turn (its caches over all cores within a batch).
fn feed(bank: &mut Bank, stream: &Stream, keys: bool) -> Result<(Vec<String>, u64), String> {
    let mut ops: Arc<[u8]> = vec![OP_READ; stream.rows].into();
    loop {
        match next(stream)? {
            Ok(b) => {
                reads(&mut ops, b.len());
                bank.feed_totals(&events(&b, &ops, keys))?;
                stream.recycle(b);
            }
            Err(end) => return Ok(end),
        }
    }
}

/// The caches split into `lanes` fixed groups, each run through the batches by a thread of its
/// own: no lane waits for the others at every batch (the slowest cache of each batch set the
/// pace before) and each cache stays on one thread. The first batch runs the whole bank at once
/// and times every cache; the groups are then balanced on those times (longest first, onto
/// the lane with the least work).
fn feed_in_lanes(bank: &mut Bank, stream: &Stream, keys: bool, lanes: usize) -> Result<(Vec<String>, u64), String> {
    use rayon::prelude::*;
    let mut ops: Arc<[u8]> = vec![OP_READ; stream.rows].into();
    let first = match next(stream)? {
        Ok(b) => b,
        Err(end) => return Ok(end),
    };
    reads(&mut ops, first.len());
    let ev = events(&first, &ops, keys);
    let n_windows = bank.admit(&ev)?;
    let per_cache = bank.n_tiers;
    let cost: Vec<std::time::Duration> = bank
        .shadows
        .par_iter_mut()
        .map(|s| {
            let t = std::time::Instant::now();
            feed_cache(s, &ev, n_windows, per_cache, true);
            t.elapsed()
        })
        .collect();
    bank.events_seen += ev.len() as u64;
    stream.recycle(first);

    let mut order: Vec<usize> = (0..cost.len()).collect();
    order.sort_by_key(|&c| std::cmp::Reverse(cost[c]));
    let mut load = vec![std::time::Duration::ZERO; lanes];
    let mut lane_of = vec![0; cost.len()];
    for c in order {
        let l = (0..lanes).min_by_key(|&l| load[l]).unwrap();
        lane_of[c] = l;
        load[l] += cost[c];
    }
    let mut groups: Vec<Vec<(usize, Shadow)>> = (0..lanes).map(|_| Vec::new()).collect();
    for (c, s) in std::mem::take(&mut bank.shadows).into_iter().enumerate() {
        groups[lane_of[c]].push((c, s));
    }

    let recycler = stream.recycler();
    let (result, groups) = std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(lanes);
        let mut workers = Vec::with_capacity(lanes);
        for mut group in groups {
            // one batch queued per lane: a lane runs at most two batches ahead of the slowest
            let (tx, rx) = sync_channel::<(Arc<Columns>, Arc<[u8]>)>(1);
            senders.push(tx);
            let recycler = recycler.clone();
            workers.push(scope.spawn(move || {
                for (b, ops) in rx {
                    let ev = events(&b, &ops, keys);
                    for (_, s) in group.iter_mut() {
                        feed_cache(s, &ev, n_windows, per_cache, true);
                    }
                    if let Ok(cols) = Arc::try_unwrap(b) {
                        let _ = recycler.try_send(cols); // the last lane done with it
                    }
                }
                group
            }));
        }
        let result = loop {
            match next(stream) {
                Ok(Ok(b)) => {
                    let n = b.len();
                    reads(&mut ops, n);
                    if let Err(e) = bank.admit(&events(&b, &ops, keys)) {
                        break Err(e);
                    }
                    bank.events_seen += n as u64;
                    let b = Arc::new(b);
                    if senders.iter().any(|tx| tx.send((b.clone(), ops.clone())).is_err()) {
                        break Err("a simulation thread stopped unexpectedly".into());
                    }
                }
                Ok(Err(end)) => break Ok(end),
                Err(e) => break Err(e),
            }
        };
        drop(senders); // the lanes finish their queued batches and end
        let groups: Vec<Vec<(usize, Shadow)>> = workers.into_iter().map(|w| w.join().unwrap_or_default()).collect();
        (result, groups)
    });
    let mut shadows: Vec<(usize, Shadow)> = groups.into_iter().flatten().collect();
    if shadows.len() != cost.len() {
        return Err("a simulation thread failed".into());
    }
    shadows.sort_by_key(|&(c, _)| c);
    bank.shadows = shadows.into_iter().map(|(_, s)| s).collect();
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

    fn totals_by_id(specs: Vec<CacheSpec>, t: &[(u64, u64)]) -> Vec<u128> {
        let mut bank = Bank::new(specs, STREAM_TIERS).unwrap();
        let (id, size): (Vec<u64>, Vec<u64>) = t.iter().copied().unzip();
        let (tier, op) = (vec![0u8; t.len()], vec![OP_READ; t.len()]);
        let ev = Events { id: &id, size: &size, bytes_read: &size, tier: &tier, op: &op, next_access: None, window: None, ts: None, key: None };
        bank.feed_totals(&ev).unwrap();
        bank.totals()
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
    fn lanes_give_the_counts_of_one_bank_over_many_batches() {
        // batches of 1,000 rows (CSV batches pass that by a chunk's lines), caches in 1, 2 and
        // 3 lanes: the totals of the whole bank fed the trace at once, cache by cache
        let t = trace(60_000);
        let path = csv_file("lanes", &t, "");
        let specs: Vec<CacheSpec> = ["lru", "arc", "s3fifo", "lirs", "fifo"]
            .iter()
            .flat_map(|p| [CacheSpec::new(p, 400), CacheSpec::new(p, 3_000)])
            .chain([CacheSpec { sample_rate: 0.5, ..CacheSpec::new("lru", 1_000) }])
            .collect();
        let by_id = totals_by_id(specs.clone(), &t);
        let per_cache = STREAM_TIERS * N_FIELDS;
        for lanes in [1, 2, 3] {
            let run = simulate_file_in(path.to_str().unwrap(), Format::Csv, specs.clone(), 1_000, lanes).unwrap();
            assert_eq!(run.rows, t.len() as u64);
            for (c, spec) in specs.iter().enumerate() {
                let ours = &run.totals[c * N_FIELDS..(c + 1) * N_FIELDS];
                assert_eq!(ours, &by_id[c * per_cache..c * per_cache + N_FIELDS], "{lanes} lanes: {} {}", spec.policy, spec.capacity);
            }
        }
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_bad_row_after_many_batches_fails_every_lane_run() {
        let t = trace(30_000);
        let path = csv_file("bad", &t, "30000,not-a-number,5\n");
        let specs = vec![CacheSpec::new("lru", 400), CacheSpec::new("arc", 400), CacheSpec::new("s3fifo", 400)];
        for lanes in [1, 2] {
            let e = simulate_file_in(path.to_str().unwrap(), Format::Csv, specs.clone(), 1_000, lanes).unwrap_err();
            assert!(e.contains("t.csv") && e.contains("30002"), "{e}");
        }
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_keyed_bank_refuses_batches_without_keys() {
        let mut bank = Bank::new(vec![CacheSpec::new("lru", 10)], 1).unwrap();
        assert!(bank.use_dense_ids());
        let z = [0u8];
        let ev = Events { id: &[1], size: &[1], bytes_read: &[1], tier: &z, op: &z, next_access: None, window: None, ts: None, key: None };
        assert!(bank.feed_totals(&ev).unwrap_err().contains("dense file keys"));
    }
}
