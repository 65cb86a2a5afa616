//! Next-access times for the offline optimum (`belady`), computed in one backward pass.

use crate::policy::Map;

/// For each request i, the index of the next request of the same id, or u64::MAX if none.
pub fn next_access_times(ids: &[u64]) -> Vec<u64> {
    let mut seen: Map<u64> = Map::default();
    seen.reserve(ids.len() / 4);
    let mut out = vec![u64::MAX; ids.len()];
    for (i, &id) in ids.iter().enumerate().rev() {
        if let Some(n) = seen.insert(id, i as u64) {
            out[i] = n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn backward_pass() {
        assert_eq!(super::next_access_times(&[1, 2, 1, 1, 3]), vec![2, u64::MAX, 3, u64::MAX, u64::MAX]);
    }
}
