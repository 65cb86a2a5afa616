//! A whole trace file through a bank in one pass: the reader thread decompresses and parses
//! while this thread simulates (what `cachescope simulate` runs).

use crate::bank::{Bank, Events};
use crate::reader::{Format, Msg, Stream, BATCH_ROWS};
use crate::shadow::CacheSpec;
use crate::stats::N_FIELDS;

/// Tier codes a streamed trace may use (its tier names are known only at its end).
pub const STREAM_TIERS: usize = 256;

pub struct Run {
    /// Exact totals shaped (caches, tier_names.len(), fields), flat.
    pub totals: Vec<u128>,
    pub tier_names: Vec<String>,
    pub rows: u64,
}

pub fn simulate_file(path: &str, format: Format, specs: Vec<CacheSpec>) -> Result<Run, String> {
    let mut bank = Bank::new(specs, STREAM_TIERS)?;
    if bank.needs_future() {
        return Err("policy belady needs the whole trace in memory (next-access times)".into());
    }
    // a bank of several caches switches tables and waits for its slowest cache at every batch:
    // a batch of 64 Ki rows per cache, up to 1 Mi rows, amortises both (24 caches: 12% less CPU
    // than at 256 Ki rows, for ~70 MiB; one cache keeps small batches, its start comes sooner)
    let rows = BATCH_ROWS * bank.shadows.len().clamp(1, 16);
    // dense file keys: the caches index arrays instead of hashing ids (`SlotMap::dense`)
    let keys = bank.use_dense_ids();
    let stream = Stream::start(path, format, rows, keys)?;
    let mut ops: Vec<u8> = Vec::new();
    loop {
        match stream.rx.recv() {
            Ok(Msg::Batch(b)) => {
                if ops.len() < b.len() {
                    ops.resize(b.len(), crate::bank::OP_READ);
                }
                let ev = Events {
                    id: &b.id,
                    size: &b.size,
                    bytes_read: &b.bytes_read,
                    tier: &b.tier,
                    op: &ops[..b.len()],
                    next_access: None,
                    window: None,
                    ts: None,
                    key: keys.then_some(&b.key[..]),
                };
                bank.feed_totals(&ev).map_err(|e| format!("{path}: {e}"))?;
                stream.recycle(b);
            }
            Ok(Msg::End { tier_names, rows }) => {
                let n_tiers = tier_names.len().max(1);
                let all = bank.totals();
                let per_cache = STREAM_TIERS * N_FIELDS;
                let totals = all.chunks(per_cache).flat_map(|c| c[..n_tiers * N_FIELDS].iter().copied()).collect();
                return Ok(Run { totals, tier_names, rows });
            }
            Ok(Msg::Error(e)) => return Err(e),
            Err(_) => return Err(format!("{path}: the reader stopped unexpectedly")),
        }
    }
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

    #[test]
    fn a_keyed_bank_refuses_batches_without_keys() {
        let mut bank = Bank::new(vec![CacheSpec::new("lru", 10)], 1).unwrap();
        assert!(bank.use_dense_ids());
        let z = [0u8];
        let ev = Events { id: &[1], size: &[1], bytes_read: &[1], tier: &z, op: &z, next_access: None, window: None, ts: None, key: None };
        assert!(bank.feed_totals(&ev).unwrap_err().contains("dense file keys"));
    }
}
