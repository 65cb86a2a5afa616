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
    // a bank of several caches switches tables between batches: bigger batches amortise it
    let rows = BATCH_ROWS * bank.shadows.len().clamp(1, 4);
    let stream = Stream::start(path, format, rows)?;
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
