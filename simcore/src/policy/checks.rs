//! The properties every policy keeps, checked over all of them from one table (a policy's
//! own file keeps its golden counts): byte accounting, removes, snapshots that continue
//! identically, and sizes above 4 GiB. Test-only.

use super::testing::*;
use super::*;

/// `bytes_and_snapshot` cases: policies that insert whatever fits, with parameter sets.
const BYTE_CASES: &[(&str, &[(&str, f64)])] = &[
    ("lru", &[]),
    ("fifo", &[]),
    ("clock", &[]),
    ("clock", &[("bits", 3.0)]),
    ("sieve", &[]),
    ("lfu", &[]),
    ("lfuda", &[]),
    ("gdsf", &[]),
    ("belady", &[]),
    ("slru", &[]),
    ("slru", &[("segments", 2.0)]),
];

/// `invariants_and_snapshot` cases (whole-file reads; xcache's partial reads are in its file).
const QUEUE_CASES: &[(&str, &[(&str, f64)])] = &[
    ("arc", &[]),
    ("lirs", &[("hir_ratio", 0.5)]),
    ("lirs", &[("hir_ratio", 0.2)]),
    ("s3fifo", &[]),
    ("s3fifo", &[("small_ratio", 0.5), ("move_threshold", 1.0)]),
    ("twoq", &[]),
    ("twoq", &[("ain_ratio", 0.6), ("aout_ratio", 0.2)]),
    ("wtinylfu", &[]),
    ("wtinylfu", &[("window_ratio", 0.2), ("protected_ratio", 0.5)]),
];

#[test]
fn byte_accounting_removes_and_snapshots() {
    for (name, params) in BYTE_CASES {
        bytes_and_snapshot(name, params);
    }
}

#[test]
fn invariants_and_snapshots() {
    for (name, params) in QUEUE_CASES {
        invariants_and_snapshot(name, params, false);
    }
}

#[test]
fn every_policy_is_checked() {
    let checked: BTreeSet<&str> = BYTE_CASES.iter().chain(QUEUE_CASES).map(|c| c.0).chain(["xcache"]).collect();
    assert_eq!(checked, POLICY_NAMES.iter().copied().collect());
}

#[test]
fn sizes_above_4_gib_are_not_truncated() {
    // the same trace with every size and the capacity times 2^30 (exact in f64, so ratios and
    // priorities scale exactly): the same hits and misses, the bytes used times 2^30. Not ARC:
    // its target p moves by at least one byte a ghost hit (libCacheSim's rule), not by a share
    // of the cache; nor xcache, which caches blocks of a fixed size.
    const G: u64 = 1 << 30;
    let trace = byte_trace(4000, 300, 1000, 5);
    let big: Vec<(u64, u64)> = trace.iter().map(|&(id, size)| (id, size * G)).collect();
    for &name in POLICY_NAMES.iter().filter(|&&n| n != "arc" && n != "xcache") {
        let (mut small, mut large) = (policy(name, 1000), policy(name, 1000 * G));
        let expect = replay(&mut small, &trace);
        assert!(expect.contains('H'), "{name}: no hits on the trace");
        assert_eq!(replay(&mut large, &big), expect, "{name}: outcomes differ at sizes times 2^30");
        assert_eq!((large.used_bytes(), large.len()), (small.used_bytes() * G, small.len()), "{name}");
    }
}

// ---- byte-size reads with removes between them (policies that insert whatever fits)

/// Deterministic pseudo-random trace of whole-file reads with byte sizes: skewed
/// popularity, sizes fixed per file from 1 byte to beyond 4 GiB, a few files larger than
/// `capacity`.
pub fn byte_trace(n: usize, n_files: u64, capacity: u64, seed: u64) -> Vec<(u64, u64)> {
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_add(0x9e3779b97f4a7c15);
        crate::util::hash::mix64(s)
    };
    (0..n)
        .map(|_| {
            let (a, b) = (next(), next());
            let id = a % (1 + b % n_files); // skewed towards small ids
            let h = crate::util::hash::mix64(id ^ 0x5eed);
            let size = if h.is_multiple_of(50) { capacity + 1 + h % 1000 } else { 1 + (h >> 8) % (capacity / 3) };
            (id + 1000, size)
        })
        .collect()
}

/// Replays a random byte-size trace with interleaved removes and checks after every
/// step that `used ≤ capacity`, that the byte accounting adds up (used before + filled −
/// evicted = used after) and that a postcard snapshot taken half way continues with
/// identical outcomes and evictions.
pub fn bytes_and_snapshot(name: &str, params: &[(&str, f64)]) {
    for (capacity, seed) in [(20u64 << 30, 1u64), (1000, 2), (12 << 30, 3)] {
        let trace = byte_trace(6000, 400, capacity, seed);
        let next = next_access(&trace);
        let mut p = with_params(name, capacity, params);
        let mut restored: Option<AnyPolicy> = None;
        let mut hits = 0;
        for (i, (&(id, size), &next_access)) in trace.iter().zip(&next).enumerate() {
            if i == trace.len() / 2 {
                let bytes = postcard::to_stdvec(&p).unwrap();
                restored = Some(postcard::from_bytes(&bytes).unwrap());
            }
            let req = Request { id, size, bytes_read: size, tier: (id % 3) as u8, next_access, ts: 0, duration_us: 0 };
            if i % 41 == 7 {
                // a write at the source: the file leaves the cache
                let before = p.used_bytes();
                let was = p.contains(id);
                assert_eq!(p.remove(id).is_some(), was);
                assert!(!p.contains(id));
                assert_eq!(p.used_bytes() + if was { size } else { 0 }, before);
                if let Some(q) = restored.as_mut() {
                    assert_eq!(q.remove(id).is_some(), was);
                }
                continue;
            }
            let before = p.used_bytes();
            let mut ev = Evictions::default();
            let out = p.access(&req, &mut ev);
            hits += out.hit as u64;
            let evicted: u64 = ev.items.iter().map(|e| e.size).sum();
            assert!(p.used_bytes() <= p.capacity(), "{name}: used {} > capacity {}", p.used_bytes(), capacity);
            assert_eq!(before + out.filled - evicted, p.used_bytes(), "{name}: byte accounting at request {i}");
            if name != "slru" {
                // every policy but slru inserts whatever fits in the whole cache
                assert_eq!(out.hit || out.filled > 0, out.hit || size <= capacity);
            }
            if size > capacity {
                assert!(!out.hit && out.filled == 0 && ev.items.is_empty());
            }
            if let Some(q) = restored.as_mut() {
                let mut ev2 = Evictions::default();
                assert_eq!(q.access(&req, &mut ev2), out, "{name}: restored snapshot diverged at request {i}");
                assert_eq!(ev.items, ev2.items);
                assert_eq!((q.used_bytes(), q.len()), (p.used_bytes(), p.len()));
            }
        }
        assert!(hits > 0, "{name}: the random trace should produce hits");
    }
}

// ---- whole-file or partial reads with removes as ops (queue-based policies, xcache)

/// Deterministic xorshift generator for test traces.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A skewed random trace of (id, size, bytes_read, op) with op 0 = read, 2 = remove.
/// Sizes are fixed per id, from 1 to 45 (some above a capacity of 40); reads are whole-file
/// unless `partial`.
pub fn random_trace(seed: u64, n: usize, partial: bool) -> Vec<(u64, u64, u64, u8)> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| {
            // popularity skew: small ids are much more frequent
            let a = r.next() % 200;
            let id = (a * a) / 200 + 1;
            let size = 1 + crate::util::hash::mix64(id) % 45;
            let read = if partial { 1 + r.next() % size } else { size };
            let op = if r.next().is_multiple_of(50) { 2 } else { 0 };
            (id, size, read, op)
        })
        .collect()
}

fn run(p: &mut AnyPolicy, trace: &[(u64, u64, u64, u8)], partial: bool) -> String {
    let mut ev = Evictions::default();
    let mut out = String::new();
    for &(id, size, bytes_read, op) in trace {
        if op == 2 {
            let was = p.contains(id);
            assert_eq!(p.remove(id).is_some(), was, "remove({id}) must report residency");
            assert!(!p.contains(id));
            out.push('r');
            continue;
        }
        let before = p.used_bytes();
        ev.items.clear();
        let o = p.access(&Request { id, size, bytes_read, tier: (id % 3) as u8, next_access: u64::MAX, ts: 0, duration_us: 0 }, &mut ev);
        let evicted: u64 = ev.items.iter().map(|e| e.size).sum();
        assert!(p.used_bytes() <= p.capacity(), "{} used {} > capacity {}", p.name(), p.used_bytes(), p.capacity());
        assert_eq!(before + o.filled, p.used_bytes() + evicted, "{}: bytes filled and evicted must balance", p.name());
        assert!(o.hit_bytes <= bytes_read);
        if size > p.capacity() && !partial {
            assert!(!o.hit && o.filled == 0 && !p.contains(id), "{}: a file larger than the cache is not cached", p.name());
        }
        out.push(if o.hit { 'H' } else { 'm' });
    }
    out
}

/// used ≤ capacity on every request, bytes balance (filled = growth + evicted), a file larger
/// than the cache is not cached (whole-file reads), and a postcard snapshot of the AnyPolicy
/// taken halfway continues with identical hits.
pub fn invariants_and_snapshot(name: &str, params: &[(&str, f64)], partial: bool) {
    for (seed, cap) in [(7u64, 40u64), (11, 100), (23, 250)] {
        let mut p = with_params(name, cap, params);
        let trace = random_trace(seed, 20_000, partial);
        let (a, b) = trace.split_at(10_000);
        let first = run(&mut p, a, partial);
        assert!(first.contains('H') && first.contains('m'), "{name}: degenerate trace {first}");
        let bytes = postcard::to_stdvec(&p).unwrap();
        let mut q: AnyPolicy = postcard::from_bytes(&bytes).unwrap();
        assert_eq!((q.used_bytes(), q.len()), (p.used_bytes(), p.len()));
        let rest_p = run(&mut p, b, partial);
        let rest_q = run(&mut q, b, partial);
        assert_eq!(rest_p, rest_q, "{name}: restored snapshot diverged");
        assert_eq!((q.used_bytes(), q.len()), (p.used_bytes(), p.len()));
    }
}
