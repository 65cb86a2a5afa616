//! Cross-check against libCacheSim's results on the shared reference trace
//! (../shared/reference, see its README): hits and bytes hit (requests − n_miss,
//! n_req_bytes − n_miss_bytes) must equal libCacheSim's, unless a difference is explained in the
//! policy's doc comment and bounded in EXPLAINED below. A reference row of a policy this engine
//! does not have fails the test (nothing is skipped silently).
//!
//! Runs when the shared folder is beside the repository (as in CI); run it with
//! `cargo test --release --test reference` (debug builds are slow on a 1M-request trace).

use simcore::bank::{Bank, Events};
use simcore::shadow::CacheSpec;
use simcore::stats::{BYTES_HIT, BYTES_REQUESTED, HITS, REQUESTS};
use std::path::PathBuf;
use std::process::Command;

/// (policy, allowed |hit ratio difference|, allowed |byte hit ratio difference|) for
/// differences explained in the policy's file.
const EXPLAINED: &[(&str, f64, f64)] = &[
    // libCacheSim ran in KiB, so its LIR/HIR limits were whole KiB: 40 hits of 1,000,000 apart
    // at 1% (0.00004; 0.00008 of the bytes requested, other files stayed), identical at
    // 5/10/30% (see policy/lirs.rs).
    ("lirs", 0.00005, 0.0001),
];
/// Policies not in EXPLAINED must give libCacheSim's hit counts exactly (the issue allows 0.01).
const EXACT: f64 = 0.0;

fn reference_dir() -> Option<PathBuf> {
    // where cargo runs the test now: a test binary reused from a checkout at another path (one
    // cargo target directory for every clone) has that path compiled in
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), PathBuf::from);
    let d = manifest.join("../../shared/reference");
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
    let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let unknown: Vec<&str> = rows
        .iter()
        .map(|r| r["policy"].as_str().unwrap())
        .filter(|p| !simcore::policy::POLICY_NAMES.contains(p))
        .collect();
    assert!(unknown.is_empty(), "reference rows of policies this engine cannot check: {unknown:?}");
    if let Some(o) = &only {
        let missing: Vec<&String> = o.iter().filter(|p| !rows.iter().any(|r| r["policy"] == p.as_str())).collect();
        assert!(missing.is_empty(), "CROSSCHECK_POLICIES names policies without reference rows: {missing:?}");
    }
    let mut failures = Vec::new();
    let mut checked = 0;
    for r in &rows {
        let policy = r["policy"].as_str().unwrap();
        if only.as_ref().is_some_and(|o| !o.iter().any(|p| p == policy)) {
            continue;
        }
        let size = r["size_bytes"].as_u64().unwrap();
        let expect_hits = r["requests"].as_u64().unwrap() - r["n_miss"].as_u64().unwrap();
        let req_bytes = r["n_req_bytes"].as_u64().expect("reference rows carry n_req_bytes") as u128;
        let expect_bytes_hit = req_bytes - r["n_miss_bytes"].as_u64().expect("reference rows carry n_miss_bytes") as u128;
        let mut bank = Bank::new(vec![CacheSpec::new(policy, size)], 1).unwrap();
        let ev = Events {
            id: &trace.id,
            size: &trace.size,
            bytes_read: &trace.bytes_read,
            tier: &tiers,
            op: &ops,
            next_access: Some(&next),
            window: None,
            ts: None,
            key: None,
            duration_us: None,
        };
        let started = std::time::Instant::now();
        bank.feed_totals(&ev).unwrap();
        let rate = trace.id.len() as f64 / started.elapsed().as_secs_f64();
        let c = bank.totals();
        assert_eq!(c[REQUESTS], trace.id.len() as u128);
        assert_eq!(c[BYTES_REQUESTED], req_bytes, "{policy}: bytes requested");
        let (hits, bytes_hit) = (c[HITS] as u64, c[BYTES_HIT]);
        let diff = (hits as f64 - expect_hits as f64).abs() / trace.id.len() as f64;
        let byte_diff = (bytes_hit as f64 - expect_bytes_hit as f64).abs() / req_bytes as f64;
        // every policy reproduces libCacheSim exactly today: pin that, so a regression far
        // below the 0.01 the issue allows is still caught; explained differences have a bound.
        let (allowed, allowed_bytes) = EXPLAINED.iter().find(|e| e.0 == policy).map_or((EXACT, EXACT), |e| (e.1, e.2));
        println!(
            "{policy:>8} {size:>16} hits {hits:>7} libCacheSim {expect_hits:>7} diff {diff:.5} bytes diff {byte_diff:.5} (allowed {allowed}/{allowed_bytes}) {:.1}M req/s",
            rate / 1e6
        );
        if diff > allowed {
            failures.push(format!("{policy} at {size}: {hits} hits vs libCacheSim {expect_hits} ({diff:.5} > {allowed})"));
        }
        if byte_diff > allowed_bytes {
            failures.push(format!(
                "{policy} at {size}: {bytes_hit} bytes hit vs libCacheSim {expect_bytes_hit} ({byte_diff:.5} of bytes requested > {allowed_bytes})"
            ));
        }
        checked += 1;
    }
    assert!(checked >= if only.is_some() { 1 } else { 8 }, "only {checked} reference rows checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
