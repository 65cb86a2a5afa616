//! Hashes used to route files: sampling (SHARDS) and partitioning into sub-caches.
//!
//! file_id is already an xxh3 hash of the path for real logs, but traces may carry
//! sequential ids, so both decisions run the id through a mixer first. The Python side
//! calls the same functions (via the extension) so that Flink keying and the core agree.

/// splitmix64 finaliser: a bijective, well-mixed permutation of u64.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

/// SHARDS uses a modulus of 2^24: a file is sampled when its hash falls under the threshold.
pub const SAMPLE_MODULUS: u64 = 1 << 24;

#[inline]
pub fn sample_hash(id: u64) -> u64 {
    mix64(id) & (SAMPLE_MODULUS - 1)
}

/// Which of `parts` hash partitions a file belongs to (uses the high bits, independent of sampling).
#[inline]
pub fn partition_of(id: u64, parts: u32) -> u32 {
    (((mix64(id) >> 32) * parts as u64) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_balanced_and_in_range() {
        let mut counts = [0u32; 7];
        for i in 0..70_000u64 {
            counts[partition_of(i, 7) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn sample_hash_is_below_modulus() {
        assert!((0..10_000u64).all(|i| sample_hash(i) < SAMPLE_MODULUS));
    }
}
