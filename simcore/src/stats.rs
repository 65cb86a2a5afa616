//! Per-cache counters, broken down by data tier (a small integer per event).

/// `FIELDS` and an index constant per field, from one list so that they cannot disagree.
macro_rules! fields {
    ($(#[$doc:meta])* $($index:ident = $name:literal,)*) => {
        $(#[$doc])*
        pub const FIELDS: [&str; [$($name),*].len()] = [$($name),*];
        fields!(@index 0, $($index,)*);
    };
    (@index $n:expr, $first:ident, $($rest:ident,)*) => {
        pub const $first: usize = $n;
        fields!(@index $n + 1, $($rest,)*);
    };
    (@index $n:expr,) => {};
}
fields! {
    /// Counter fields, in the order they are exported to Python (last axis of the arrays).
    /// The last three are residence ages, counted only when the batch carries timestamps (seconds):
    /// `evicted_age_s` sums, over the files evicted, how long each stayed since it came in
    /// (÷ evictions = mean residence before purge); `resident_age_s` sums, over the reads, the mean
    /// age of the files resident as the read found the cache, and `age_reads` counts those reads
    /// (÷ = mean age of the cache's files, as XCache's own monitoring reports it).
    /// `delayed_hits` counts reads that fetched nothing but found some of their blocks still in
    /// flight from the origin (`xcache` with fetch times; never a hit), `bytes_delayed` the bytes of
    /// reads that were in flight when the read came (neither hit bytes nor fetched).
    REQUESTS = "requests", HITS = "hits", BYTES_REQUESTED = "bytes_requested", BYTES_HIT = "bytes_hit",
    BYTES_FILLED = "bytes_filled", EVICTIONS = "evictions", BYTES_EVICTED = "bytes_evicted",
    EVICTED_AGE = "evicted_age_s", RESIDENT_AGE = "resident_age_s", AGE_READS = "age_reads",
    DELAYED_HITS = "delayed_hits", BYTES_DELAYED = "bytes_delayed",
}
pub const N_FIELDS: usize = FIELDS.len();

/// Counters of one (window, tier) as they leave the engine per window: u64 each (18.4 EB of
/// bytes per window, cache and tier); the engine refuses a batch rather than wrap one.
pub type Counters = [u64; N_FIELDS];

/// Exact counters: what the engine accumulates and keeps as totals. Byte sums of a long trace
/// of multi-GB files, or of a few files near 2^63 bytes, exceed u64; u128 never wraps here
/// (2^64 requests of 2^64 bytes each).
pub type Exact = [u128; N_FIELDS];

/// Add one exact block into another.
#[inline]
pub fn add_exact(into: &mut Exact, from: &Exact) {
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

/// Narrow exact counters to the per-window u64 form, or None if one does not fit.
pub fn narrow(c: &Exact) -> Option<Counters> {
    let mut out = [0u64; N_FIELDS];
    for (o, &v) in out.iter_mut().zip(c) {
        *o = u64::try_from(v).ok()?;
    }
    Some(out)
}

/// Counters per tier in a snapshot: each tier's fields as a tuple. A snapshot of an older format
/// had fewer fields (`read_fields`, set by `Bank::restore` from its version): those read, the new
/// ones start at 0.
pub mod totals_serde {
    use super::{Exact, N_FIELDS};
    use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};
    use serde::ser::{SerializeTuple, Serializer};
    use std::cell::Cell;
    use std::fmt;

    thread_local! {
        static READ_FIELDS: Cell<usize> = const { Cell::new(N_FIELDS) };
    }

    /// Run `f` reading snapshots whose counters have `n` fields (≤ N_FIELDS).
    pub fn with_read_fields<T>(n: usize, f: impl FnOnce() -> T) -> T {
        let before = READ_FIELDS.with(|c| c.replace(n));
        let out = f();
        READ_FIELDS.with(|c| c.set(before));
        out
    }

    pub fn serialize<S: Serializer>(totals: &[Exact], s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        struct Row<'a>(&'a Exact);
        impl serde::Serialize for Row<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut t = s.serialize_tuple(N_FIELDS)?;
                for v in self.0 {
                    t.serialize_element(v)?;
                }
                t.end()
            }
        }
        let mut seq = s.serialize_seq(Some(totals.len()))?;
        for row in totals {
            seq.serialize_element(&Row(row))?;
        }
        seq.end()
    }

    struct RowSeed(usize);
    impl<'de> DeserializeSeed<'de> for RowSeed {
        type Value = Exact;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Exact, D::Error> {
            struct V(usize);
            impl<'de> Visitor<'de> for V {
                type Value = Exact;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    write!(f, "{} counters", self.0)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Exact, A::Error> {
                    let mut out = [0u128; N_FIELDS];
                    for (i, slot) in out.iter_mut().enumerate().take(self.0) {
                        *slot = a.next_element()?.ok_or_else(|| serde::de::Error::invalid_length(i, &self))?;
                    }
                    Ok(out)
                }
            }
            d.deserialize_tuple(self.0, V(self.0))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Exact>, D::Error> {
        struct V(usize);
        impl<'de> Visitor<'de> for V {
            type Value = Vec<Exact>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("counters per tier")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<Exact>, A::Error> {
                let mut out = Vec::with_capacity(a.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(row) = a.next_element_seed(RowSeed(self.0))? {
                    out.push(row);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V(READ_FIELDS.with(|c| c.get())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_index_names_its_field() {
        let indices = [REQUESTS, HITS, BYTES_REQUESTED, BYTES_HIT, BYTES_FILLED, EVICTIONS, BYTES_EVICTED, EVICTED_AGE,
                       RESIDENT_AGE, AGE_READS, DELAYED_HITS, BYTES_DELAYED];
        assert_eq!(indices.to_vec(), (0..N_FIELDS).collect::<Vec<_>>());
        assert_eq!((FIELDS[HITS], FIELDS[EVICTED_AGE], FIELDS[BYTES_DELAYED]), ("hits", "evicted_age_s", "bytes_delayed"));
    }
}
