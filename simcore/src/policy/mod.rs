//! Cache policies: one file each, behind the small `Policy` trait.
//!
//! Every policy has a byte capacity (u64) and sees whole-file requests:
//! a request is a hit when the file is resident; on a miss the file is inserted unless it is
//! larger than the whole cache, evicting per policy until it fits (libCacheSim's rules, see
//! shared/reference/README.md). `xcache` is the exception: it caches blocks of the bytes read.
//! Each file documents how a unit-size paper policy was generalised to byte sizes.

use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

pub use crate::util::arena::{Arena, List, NIL};
pub use resident::{Buckets, Found, Queues, Resident, Table};
pub(crate) use resident::{queued_queries, resident_queries};

pub mod resident;
#[cfg(test)]
pub(crate) mod checks;

pub type Map<V> = rustc_hash::FxHashMap<u64, V>;

/// One read access as a policy sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Request {
    pub id: u64,
    /// Whole file size in bytes: what a whole-file cache stores.
    pub size: u64,
    /// Bytes this access read (≤ size); what transfer efficiency counts.
    pub bytes_read: u64,
    pub tier: u8,
    /// Logical time of the next access of this file (u64::MAX = never); only `belady` reads it.
    pub next_access: u64,
    /// Event time in seconds (0 = not known): a policy that keeps arrival times stores it in
    /// the entry of a file this request brings in, and reports it back when the file leaves.
    pub ts: u32,
    /// How long the access lasted, in microseconds (0 = not known): `xcache` takes the time its
    /// missed blocks need from it (delayed hits, see policy/xcache.rs).
    pub duration_us: u64,
}

/// What a policy did with one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Entirely served from cache.
    pub hit: bool,
    /// Bytes of `bytes_read` served from cache (a partial read of a cached file: all of them).
    pub hit_bytes: u64,
    /// Bytes written into the cache by this request (fill cost).
    pub filled: u64,
    /// The file became resident with this request, arriving at `Request::ts` (policies that
    /// keep arrival times only).
    pub arrived: bool,
    /// A delayed hit: nothing had to be fetched, but some of its blocks were still on their way
    /// from the origin (a fetch in flight). Not a hit (`hit` is false) and not a fetch.
    pub delayed: bool,
    /// Bytes of `bytes_read` that were in flight when the request came (neither hit nor fetched).
    pub delayed_bytes: u64,
}

impl Outcome {
    #[inline]
    pub fn hit(req: &Request) -> Self {
        Outcome { hit: true, hit_bytes: req.bytes_read, ..Outcome::default() }
    }
    #[inline]
    pub fn miss(filled: u64) -> Self {
        Outcome { filled, ..Outcome::default() }
    }
    /// A miss that brought the whole file in.
    #[inline]
    pub fn admitted(req: &Request) -> Self {
        Outcome { filled: req.size, arrived: true, ..Outcome::default() }
    }
}

/// A file a policy evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub size: u64,
    pub tier: u8,
    pub id: u64,
    /// When it came in (`Request::ts` of its arrival; 0 = not known, or the policy keeps no
    /// arrival times and the shadow cache's side table knows it).
    pub born: u32,
}

/// Files a policy evicted while serving one request.
#[derive(Default, Debug)]
pub struct Evictions {
    pub items: Vec<Evicted>,
}

impl Evictions {
    #[inline]
    pub fn push(&mut self, size: u64, tier: u8, id: u64, born: u32) {
        self.items.push(Evicted { size, tier, id, born });
    }
}

/// Named numeric parameters of a policy (`small_ratio`, `high_watermark`, ...).
/// Keys a policy does not read are an error, so typos do not pass silently.
#[derive(Debug, Default, Clone)]
pub struct Params {
    values: BTreeMap<String, f64>,
    read: RefCell<BTreeSet<String>>,
}

impl Params {
    pub fn new(values: BTreeMap<String, f64>) -> Self {
        Params { values, read: RefCell::new(BTreeSet::new()) }
    }
    pub fn get(&self, key: &str, default: f64) -> f64 {
        self.read.borrow_mut().insert(key.to_string());
        *self.values.get(key).unwrap_or(&default)
    }
    /// A fraction in (0, 1) (or [0, 1] with `allow_ends`).
    pub fn fraction(&self, key: &str, default: f64, allow_ends: bool) -> Result<f64, String> {
        let v = self.get(key, default);
        let ok = if allow_ends { (0.0..=1.0).contains(&v) } else { v > 0.0 && v < 1.0 };
        if ok {
            Ok(v)
        } else {
            Err(format!("parameter {key}={v} must be a fraction {}", if allow_ends { "in [0, 1]" } else { "in (0, 1)" }))
        }
    }
    /// A finite number ≥ 0.
    pub fn non_negative(&self, key: &str, default: f64) -> Result<f64, String> {
        let v = self.get(key, default);
        if v >= 0.0 && v.is_finite() {
            Ok(v)
        } else {
            Err(format!("parameter {key}={v} must be a non-negative number"))
        }
    }
    /// A whole number in `lo..=hi`.
    pub fn integer(&self, key: &str, default: f64, lo: u32, hi: u32) -> Result<u32, String> {
        let v = self.get(key, default);
        if v.fract() == 0.0 && (lo as f64..=hi as f64).contains(&v) {
            Ok(v as u32)
        } else {
            Err(format!("parameter {key}={v} must be an integer in {lo}..={hi}"))
        }
    }
    pub fn unread(&self) -> Vec<String> {
        let read = self.read.borrow();
        self.values.keys().filter(|k| !read.contains(*k)).cloned().collect()
    }
}

pub trait Policy {
    fn build(capacity: u64, params: &Params) -> Result<Self, String>
    where
        Self: Sized;
    /// Serve one read.
    fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome;
    /// Drop a file (deleted or overwritten at the source); also forgets ghost history.
    /// Returns the file's arrival time (`Request::ts`, 0 when not kept) when it was resident.
    fn remove(&mut self, id: u64) -> Option<u32>;
    fn contains(&self, id: u64) -> bool;
    fn used_bytes(&self) -> u64;
    fn capacity(&self) -> u64;
    /// Resident files.
    fn len(&self) -> usize;
    /// Memory hint for a request a few events ahead (no effect on results), in two stages as
    /// the request comes closer: Place (where `id` sits in the policy's map), then Entry (its
    /// entry, once the place has arrived).
    #[inline(always)]
    fn prefetch(&self, _id: u64, _stage: Stage) {}
    /// From now on the ids of this policy's requests are dense keys (0, 1, 2, … numbering the
    /// files of a trace; see `SlotMap::dense`): keep them in arrays. Called before the first
    /// request; false when the policy cannot (it hashes ids, or keeps maps of its own).
    fn use_dense_ids(&mut self) -> bool {
        false
    }
    /// The policy keeps each resident file's arrival time in its entry (reported in `Evicted`,
    /// `Outcome::arrived` and `remove`); otherwise the shadow cache keeps them in a side table.
    const KEEPS_ARRIVALS: bool = false;
}

/// Stages of `Policy::prefetch`, furthest ahead first.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Stage {
    Place,
    Entry,
}

macro_rules! policies {
    ($( $variant:ident => $module:ident :: $ty:ident = $name:literal; )*) => {
        $( pub mod $module; )*

        /// Every policy, as one enum: static dispatch and serde snapshots for free.
        #[derive(Clone, Serialize, Deserialize)]
        pub enum AnyPolicy { $( $variant($module::$ty), )* }

        /// Policy names as the CLI and configuration spell them.
        pub const POLICY_NAMES: &[&str] = &[$($name),*];

        impl AnyPolicy {
            pub fn new(name: &str, capacity: u64, params: &Params) -> Result<Self, String> {
                let p = match name {
                    $( $name => AnyPolicy::$variant(<$module::$ty as Policy>::build(capacity, params)?), )*
                    _ => return Err(format!("unknown policy {name:?}; known: {}", POLICY_NAMES.join(", "))),
                };
                let unread = params.unread();
                if !unread.is_empty() {
                    return Err(format!("policy {name} has no parameter(s) {}", unread.join(", ")));
                }
                Ok(p)
            }
            pub fn name(&self) -> &'static str {
                match self { $( AnyPolicy::$variant(_) => $name, )* }
            }
            #[inline]
            pub fn access(&mut self, req: &Request, ev: &mut Evictions) -> Outcome {
                match self { $( AnyPolicy::$variant(p) => p.access(req, ev), )* }
            }
            pub fn remove(&mut self, id: u64) -> Option<u32> {
                match self { $( AnyPolicy::$variant(p) => p.remove(id), )* }
            }
            /// Run `v` over this policy, typed (see `Shadow::dispatch`).
            #[inline(always)]
            pub(crate) fn visit<V: crate::shadow::Visitor>(&mut self, v: V, ages: &mut crate::shadow::Ages) -> V::Out {
                match self { $( AnyPolicy::$variant(p) => v.visit(p, ages), )* }
            }
            pub fn use_dense_ids(&mut self) -> bool {
                match self { $( AnyPolicy::$variant(p) => p.use_dense_ids(), )* }
            }
            pub fn keeps_arrivals(&self) -> bool {
                match self { $( AnyPolicy::$variant(_) => <$module::$ty as Policy>::KEEPS_ARRIVALS, )* }
            }
            pub fn contains(&self, id: u64) -> bool {
                match self { $( AnyPolicy::$variant(p) => p.contains(id), )* }
            }
            pub fn used_bytes(&self) -> u64 {
                match self { $( AnyPolicy::$variant(p) => p.used_bytes(), )* }
            }
            pub fn capacity(&self) -> u64 {
                match self { $( AnyPolicy::$variant(p) => p.capacity(), )* }
            }
            pub fn len(&self) -> usize {
                match self { $( AnyPolicy::$variant(p) => p.len(), )* }
            }
            #[inline(always)]
            pub fn prefetch(&self, id: u64, stage: Stage) {
                match self { $( AnyPolicy::$variant(p) => p.prefetch(id, stage), )* }
            }
        }
    };
}

policies! {
    Lru => lru::Lru = "lru";
    Fifo => fifo::Fifo = "fifo";
    Clock => clock::Clock = "clock";
    Slru => slru::Slru = "slru";
    Lfu => lfu::Lfu = "lfu";
    Lfuda => lfuda::Lfuda = "lfuda";
    Gdsf => gdsf::Gdsf = "gdsf";
    Sieve => sieve::Sieve = "sieve";
    Belady => belady::Belady = "belady";
    Arc => arc::ArcCache = "arc";
    Twoq => twoq::TwoQ = "twoq";
    Lirs => lirs::Lirs = "lirs";
    S3fifo => s3fifo::S3Fifo = "s3fifo";
    Wtinylfu => wtinylfu::WTinyLfu = "wtinylfu";
    Xcache => xcache::XCache = "xcache";
}

/// Whether a policy needs each request's next-access time (offline optimum only).
pub fn needs_future(name: &str) -> bool {
    name == "belady"
}

/// Whether a policy runs on event time (`Request::ts`) even where residence ages are not
/// counted: xcache's purges are periodic in event time.
pub fn needs_clock(name: &str) -> bool {
    name == "xcache"
}

#[cfg(test)]
mod tests {
    use super::Params;

    #[test]
    fn parameter_checks_name_the_parameter_and_the_rule() {
        let p = |k: &str, v: f64| Params::new([(k.to_string(), v)].into());
        assert_eq!(p("bits", 3.0).integer("bits", 1.0, 1, 8), Ok(3));
        assert_eq!(p("bits", 1.5).integer("bits", 1.0, 1, 8), Err("parameter bits=1.5 must be an integer in 1..=8".into()));
        assert!(p("bits", 9.0).integer("bits", 1.0, 1, 8).is_err());
        assert_eq!(Params::default().non_negative("aout_ratio", 0.5), Ok(0.5));
        assert_eq!(p("r", 0.0).non_negative("r", 0.5), Ok(0.0));
        assert_eq!(p("r", -0.5).non_negative("r", 0.5), Err("parameter r=-0.5 must be a non-negative number".into()));
        assert!(p("r", f64::NAN).non_negative("r", 0.5).is_err());
        assert!(p("r", f64::INFINITY).non_negative("r", 0.5).is_err());
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers for the golden tests in each policy file.
    use super::*;

    /// Replay (id, size) whole-file reads; returns the hit/miss string ("H"/"m" per request).
    pub fn replay(p: &mut AnyPolicy, reqs: &[(u64, u64)]) -> String {
        let mut ev = Evictions::default();
        let next = next_access(reqs);
        reqs.iter()
            .zip(next)
            .map(|(&(id, size), next_access)| {
                let r = Request { id, size, bytes_read: size, tier: 0, next_access, ts: 0, duration_us: 0 };
                if p.access(&r, &mut ev).hit { 'H' } else { 'm' }
            })
            .collect()
    }

    pub fn next_access(reqs: &[(u64, u64)]) -> Vec<u64> {
        let ids: Vec<u64> = reqs.iter().map(|r| r.0).collect();
        crate::future::next_access_times(&ids)
    }

    pub fn policy(name: &str, capacity: u64) -> AnyPolicy {
        with_params(name, capacity, &[])
    }

    pub fn with_params(name: &str, capacity: u64, kv: &[(&str, f64)]) -> AnyPolicy {
        AnyPolicy::new(name, capacity, &params(kv)).unwrap()
    }

    pub fn params(kv: &[(&str, f64)]) -> Params {
        Params::new(kv.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    /// A new `name` cache of `capacity` bytes replays `reqs` with these hits and misses (see
    /// `replay`); returned for further checks.
    pub fn golden(name: &str, capacity: u64, reqs: &[(u64, u64)], expect: &str) -> AnyPolicy {
        let mut p = policy(name, capacity);
        assert_eq!(replay(&mut p, reqs), expect, "{name} at capacity {capacity}");
        p
    }

    /// `remove(id)` drops a resident file, and a second remove finds nothing.
    pub fn removes_once(p: &mut AnyPolicy, id: u64) {
        assert!(p.remove(id).is_some(), "{} holds {id}", p.name());
        assert!(p.remove(id).is_none());
    }

    /// Unit-size trace from a string of single-letter ids.
    pub fn unit(s: &str) -> Vec<(u64, u64)> {
        s.bytes().filter(|b| !b.is_ascii_whitespace()).map(|b| (b as u64, 1)).collect()
    }
}
