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


/// `next_access_times` of the streams the caches of a bank see: rows whose op is
/// `bank::OP_BYPASS` reach no cache (u64::MAX, not counted), and with `part` (a routed bank's
/// partition of each row) each partition's rows are a stream of their own, numbered from 0 in
/// it, as one cache per partition fed only those rows sees them.
pub fn next_access_in_streams(ids: &[u64], op: Option<&[u8]>, part: Option<&[u32]>) -> Result<Vec<u64>, String> {
    let n = ids.len();
    for (name, len) in [("op", op.map(|c| c.len())), ("partition", part.map(|c| c.len()))] {
        if let Some(len) = len.filter(|&l| l != n) {
            return Err(format!("column {name} has {len} values, file_id has {n}"));
        }
    }
    let counted = |i: usize| op.is_none_or(|o| o[i] != crate::bank::OP_BYPASS);
    if part.is_none() && (0..n).all(counted) {
        return Ok(next_access_times(ids));
    }
    let part_of = |i: usize| part.map_or(0, |p| p[i] as usize);
    let streams = part.map_or(1, |p| p.iter().max().map_or(1, |&m| m as usize + 1));
    // each row's place in its own stream
    let mut len = vec![0u64; streams];
    let mut place = vec![u64::MAX; n];
    for i in (0..n).filter(|&i| counted(i)) {
        place[i] = len[part_of(i)];
        len[part_of(i)] += 1;
    }
    let mut seen: Vec<Map<u64>> = (0..streams).map(|_| Map::default()).collect();
    let mut out = vec![u64::MAX; n];
    for i in (0..n).rev().filter(|&i| counted(i)) {
        if let Some(next) = seen[part_of(i)].insert(ids[i], place[i]) {
            out[i] = next;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    const NONE: u64 = u64::MAX;

    #[test]
    fn backward_pass() {
        assert_eq!(next_access_times(&[1, 2, 1, 1, 3]), vec![2, NONE, 3, NONE, NONE]);
    }

    #[test]
    fn streams_skip_bypassed_rows_and_number_each_partition_apart() {
        let ids = [1, 2, 1, 1, 2, 1];
        let bypass = crate::bank::OP_BYPASS;
        // row 2 bypasses: row 0's next is row 3, at place 2 of the rows that reach the cache
        let op = [0, 0, bypass, 0, 1, 0];
        assert_eq!(next_access_in_streams(&ids, Some(&op), None).unwrap(), vec![2, 3, NONE, 4, NONE, NONE]);
        // partitions: [0, 2, 3] and [1, 4, 5] are streams of their own
        let part = [0, 1, 0, 0, 1, 1];
        assert_eq!(next_access_in_streams(&ids, None, Some(&part)).unwrap(), vec![1, 1, 2, NONE, NONE, NONE]);
        assert_eq!(next_access_in_streams(&ids, Some(&op), Some(&part)).unwrap(), vec![1, 1, NONE, NONE, NONE, NONE]);
        assert_eq!(next_access_in_streams(&ids, None, None).unwrap(), next_access_times(&ids));
        assert!(next_access_in_streams(&ids, Some(&op[..2]), None).is_err());
    }
}
