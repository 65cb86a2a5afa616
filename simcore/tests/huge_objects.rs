//! Byte sums stay exact when files are near 2^63 bytes: a few requests already exceed u64.
//! Every policy runs them at the largest capacity and below it; overflow checks are on in the
//! test profiles, so any u64 sum that wraps in a policy panics here.

use simcore::bank::{Bank, Events};
use simcore::policy::POLICY_NAMES;
use simcore::shadow::{CacheSpec, MAX_CAPACITY};
use simcore::stats::*;

const BIG: u64 = 1 << 63;

fn trace() -> (Vec<u64>, Vec<u64>) {
    // ids 1..=5 with sizes from 2^61 to 2^64−1 (the last is larger than any cache)
    let sizes = [BIG - 1, BIG - 4096, (BIG / 4) * 3, BIG / 4, u64::MAX];
    let pattern = [1u64, 2, 1, 3, 4, 1, 2, 5, 3, 4, 4, 1, 5, 2, 2, 3, 1, 4];
    let ids: Vec<u64> = pattern.iter().cycle().take(400).copied().collect();
    let size = ids.iter().map(|&i| sizes[i as usize - 1]).collect();
    (ids, size)
}

#[test]
fn every_policy_keeps_exact_byte_sums_for_huge_files() {
    let (ids, sizes) = trace();
    let n = ids.len();
    let (tier, op) = (vec![0u8; n], vec![0u8; n]);
    let next = simcore::future::next_access_times(&ids);
    let requested: u128 = sizes.iter().map(|&s| s as u128).sum();
    assert!(requested > u64::MAX as u128 * 100, "the trace must overflow u64 many times over");
    for &policy in POLICY_NAMES {
        for capacity in [MAX_CAPACITY, BIG / 2 + 12345, BIG / 8] {
            let mut bank = Bank::new(vec![CacheSpec::new(policy, capacity)], 1).unwrap();
            let ev = Events { id: &ids, size: &sizes, bytes_read: &sizes, tier: &tier, op: &op, next_access: Some(&next), window: None, ts: None, key: None, duration_us: None };
            // two halves, to carry the totals across batches
            let half = n / 2;
            let first = Events { id: &ids[..half], size: &sizes[..half], bytes_read: &sizes[..half], tier: &tier[..half], op: &op[..half], next_access: Some(&next[..half]), window: None, ts: None, key: None, duration_us: None };
            let second = Events { id: &ids[half..], size: &sizes[half..], bytes_read: &sizes[half..], tier: &tier[half..], op: &op[half..], next_access: Some(&next[half..]), window: None, ts: None, key: None, duration_us: None };
            bank.feed_totals(&first).unwrap();
            bank.feed_totals(&second).unwrap();
            let t = bank.totals();
            assert_eq!(t[REQUESTS], n as u128, "{policy}");
            assert_eq!(t[BYTES_REQUESTED], requested, "{policy} at {capacity}");
            assert!(t[BYTES_HIT] <= requested && t[HITS] <= n as u128, "{policy}");
            let used = bank.shadows[0].used_bytes();
            assert!(used <= capacity, "{policy}: used {used} > capacity {capacity}");
            assert_eq!(t[BYTES_FILLED] - t[BYTES_EVICTED], used as u128, "{policy} at {capacity}: filled − evicted ≠ resident");
            // the same trace through per-window u64 counters is refused, not wrapped
            let mut windowed = Bank::new(vec![CacheSpec::new(policy, capacity)], 1).unwrap();
            let e = windowed.feed(&ev).unwrap_err();
            assert!(e.contains("exceeds 2^64-1 within one window"), "{policy}: {e}");
        }
    }
}

#[test]
fn lru_hits_on_huge_files_are_counted_exactly() {
    // capacity 2^63−1 holds exactly one of A (2^63−1) or B (2^63−4096): A, A, B, B, A
    let ids = [1u64, 1, 2, 2, 1];
    let sizes = [BIG - 1, BIG - 1, BIG - 4096, BIG - 4096, BIG - 1];
    let z = [0u8; 5];
    let mut bank = Bank::new(vec![CacheSpec::new("lru", MAX_CAPACITY)], 1).unwrap();
    bank.feed_totals(&Events { id: &ids, size: &sizes, bytes_read: &sizes, tier: &z, op: &z, next_access: None, window: None, ts: None, key: None, duration_us: None }).unwrap();
    let t = bank.totals();
    assert_eq!(t[HITS], 2);
    assert_eq!(t[BYTES_HIT], (BIG - 1) as u128 + (BIG - 4096) as u128);
    assert_eq!(t[BYTES_REQUESTED], 3 * (BIG - 1) as u128 + 2 * (BIG - 4096) as u128);
    assert_eq!(t[EVICTIONS], 2);
    assert!(Bank::new(vec![CacheSpec::new("lru", MAX_CAPACITY + 1)], 1).is_err());
}

#[test]
fn lru_curve_agrees_with_lru_on_huge_files() {
    // stack distances in bytes pass 2^64 here: a wrapped sum would turn misses into hits
    let (ids, sizes) = trace();
    let z = vec![0u8; ids.len()];
    let grid = [BIG / 8, BIG / 2 + 12345, MAX_CAPACITY];
    let mut curve = simcore::mrc::LruMrc::new(&grid, 1, 1.0, 0).unwrap();
    curve.feed(&ids, &sizes, &sizes, &z, &z, None);
    let c = curve.curve();
    for (j, &cap) in grid.iter().enumerate() {
        let mut bank = Bank::new(vec![CacheSpec::new("lru", cap)], 1).unwrap();
        bank.feed_totals(&Events { id: &ids, size: &sizes, bytes_read: &sizes, tier: &z, op: &z, next_access: None, window: None, ts: None, key: None, duration_us: None }).unwrap();
        let t = bank.totals();
        assert_eq!(c.hits[j * 2] as u128, t[HITS], "hits at {cap}");
        let rel = (c.hits[j * 2 + 1] - t[BYTES_HIT] as f64).abs() / (t[BYTES_HIT] as f64).max(1.0);
        assert!(rel < 1e-12, "bytes hit at {cap}: {} vs {}", c.hits[j * 2 + 1], t[BYTES_HIT]);
    }
}
