//! Thread pools of a given size for the caches of one bank (what-if's `threads` setting): one
//! pool per size, made on first use and kept for the process, so a request does not start
//! threads of its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Most threads a pool may have (a bank never has more caches busy than that pays for).
pub const MAX_THREADS: usize = 256;

/// Run `f` on a pool of `threads` threads (its rayon calls run there); 0: rayon's global pool
/// (every core, or RAYON_NUM_THREADS). A pool that cannot be made falls back to the global one:
/// the counts are the same on any pool.
pub fn install<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    if threads == 0 {
        return f();
    }
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let n = threads.min(MAX_THREADS);
    let pool = {
        let mut pools = POOLS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        match pools.get(&n) {
            Some(p) => Some(p.clone()),
            None => rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("simcore-bank-{i}"))
                .build()
                .ok()
                .map(|p| pools.entry(n).or_insert(Arc::new(p)).clone()),
        }
    };
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}
