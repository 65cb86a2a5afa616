//! Per-cache counters, broken down by data tier (a small integer per event).

/// Counter fields, in the order they are exported to Python (last axis of the arrays).
pub const FIELDS: [&str; 7] =
    ["requests", "hits", "bytes_requested", "bytes_hit", "bytes_filled", "evictions", "bytes_evicted"];
pub const N_FIELDS: usize = FIELDS.len();
pub const REQUESTS: usize = 0;
pub const HITS: usize = 1;
pub const BYTES_REQUESTED: usize = 2;
pub const BYTES_HIT: usize = 3;
pub const BYTES_FILLED: usize = 4;
pub const EVICTIONS: usize = 5;
pub const BYTES_EVICTED: usize = 6;

pub type Counters = [u64; N_FIELDS];
