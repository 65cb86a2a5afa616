//! Cross-check against libCacheSim's results on the shared reference trace
//! (../shared/reference, see its README): lru and fifo must match to the request; every other
//! policy libCacheSim also has must be within 0.01 hit ratio, unless its difference is explained
//! in the policy's doc comment and listed in EXPLAINED below.
//!
//! Runs when the shared folder is beside the repository (as in CI); run it with
//! `cargo test --release --test reference` (debug builds are slow on a 1M-request trace).

use simcore::bank::{Bank, Events};
use simcore::shadow::CacheSpec;
use simcore::stats::{HITS, N_FIELDS, REQUESTS};
use std::path::PathBuf;
use std::process::Command;

/// (policy, allowed |hit ratio difference|) for differences explained in the policy's file.
const EXPLAINED: &[(&str, f64)] = &[
    // libCacheSim ran in KiB, so its LIR/HIR limits were whole KiB: 40 hits of 1,000,000 apart
    // at 1% (0.00004), identical at 5/10/30% (see policy/lirs.rs).
    ("lirs", 0.00005),
];
/// Policies not in EXPLAINED must give libCacheSim's hit counts exactly (the issue allows 0.01).
const EXACT: f64 = 0.0;

fn reference_dir() -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference");
    d.join("shared_seed1.csv.zst").exists().then_some(d)
}

#[test]
fn matches_libcachesim_on_the_shared_trace() {
    let Some(dir) = reference_dir() else {
        panic!("../shared/reference is missing: the cross-check needs it beside the repository");
    };
    let csv = Command::new("zstd").arg("-dc").arg(dir.join("shared_seed1.csv.zst")).output().expect("zstd");
    assert!(csv.status.success());
    let trace = simcore::trace::parse_csv(&csv.stdout).unwrap();
    let next = simcore::future::next_access_times(&trace.id);
    let ops = vec![0u8; trace.id.len()];
    let tiers = vec![0u8; trace.id.len()];
    let text = std::fs::read_to_string(dir.join("shared_seed1_libcachesim.jsonl")).unwrap();
    let only: Option<Vec<String>> = std::env::var("CROSSCHECK_POLICIES").ok().map(|s| s.split(',').map(String::from).collect());
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let policy = r["policy"].as_str().unwrap();
        if !simcore::policy::POLICY_NAMES.contains(&policy) {
            continue; // not implemented yet
        }
        if only.as_ref().is_some_and(|o| !o.iter().any(|p| p == policy)) {
            continue;
        }
        let size = r["size_bytes"].as_u64().unwrap();
        let expect_hits = r["requests"].as_u64().unwrap() - r["n_miss"].as_u64().unwrap();
        let mut bank = Bank::new(vec![CacheSpec::new(policy, size)], 1).unwrap();
        let ev = Events {
            id: &trace.id,
            size: &trace.size,
            bytes_read: &trace.bytes_read,
            tier: &tiers,
            op: &ops,
            next_access: Some(&next),
            window: None,
        };
        let started = std::time::Instant::now();
        let (_, c) = bank.feed(&ev).unwrap();
        let rate = trace.id.len() as f64 / started.elapsed().as_secs_f64();
        assert_eq!(c[REQUESTS], trace.id.len() as u64);
        let hits = c[HITS];
        let diff = (hits as f64 - expect_hits as f64).abs() / trace.id.len() as f64;
        // every policy reproduces libCacheSim exactly today: pin that, so a regression far
        // below the 0.01 the issue allows is still caught; explained differences have a bound.
        let allowed = EXPLAINED.iter().find(|e| e.0 == policy).map_or(EXACT, |e| e.1);
        println!(
            "{policy:>8} {size:>16} hits {hits:>7} libCacheSim {expect_hits:>7} diff {diff:.4} (allowed {allowed}) {:.1}M req/s",
            rate / 1e6
        );
        if diff > allowed {
            failures.push(format!("{policy} at {size}: {hits} hits vs libCacheSim {expect_hits} ({diff:.4} > {allowed})"));
        }
        checked += 1;
        let _ = N_FIELDS;
    }
    assert!(checked >= 8, "only {checked} reference rows checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
