//! simcore: cachescope's shadow-cache engine.
//!
//! - `policy/`: one file per cache policy behind the `Policy` trait.
//! - `shadow`: one cache (policy + sampling + hash partitions + counters by tier).
//! - `bank`: many shadow caches fed by one stream, batch at a time; versioned snapshots.
//! - `mrc`: exact (or SHARDS-sampled) LRU miss-ratio curves in one pass.
//! - `trace`: the simulator's CSV trace parser; `reader`: trace files (plain/zstd/gzip, CSV or
//!   oracleGeneral) streamed as column batches from a reader thread.
//! - `billing`: the dCache billing fast path (ingest's `_fast`, compiled).
//! - `gstream`: the XRootD g-stream parser and enrichment, compiled, straight into event columns.
//! - `messages`: the Kafka event message (`cachescope.core.messages`) decoded straight into columns;
//!   `json`: the strict JSON reader both share.
//! - `tiers`: the data-tier classifier's per-path work (Python compiles the rules, this runs them).
//! - `windowed`: a bank's per-window counters as the sparse cells a batch touched.
//! - `python`: the PyO3 bindings (`cachescope._simcore`), behind the `python` feature.

pub mod bank;
pub mod future;
pub mod mrc;
pub mod policy;
pub mod reader;
pub mod run;
pub mod shadow;
pub mod stats;
pub mod tiers;
pub mod trace;
pub mod util;
pub mod windowed;

#[cfg(feature = "python")]
mod billing;
#[cfg(feature = "python")]
mod gstream;
#[cfg(feature = "python")]
mod json;
#[cfg(feature = "python")]
mod messages;
#[cfg(feature = "python")]
mod python;
