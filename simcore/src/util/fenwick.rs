//! Fenwick (binary indexed) tree of u64 values summed in u128 (sums of files near 2^63 bytes
//! pass u64) over positions 1..=n, with wrapping arithmetic so that removals are additions of
//! the two's complement.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Fenwick {
    tree: Vec<u128>,
}

impl Fenwick {
    pub fn new(n: usize) -> Self {
        Fenwick { tree: vec![0; n + 1] }
    }
    pub fn capacity(&self) -> usize {
        self.tree.len() - 1
    }
    #[inline]
    pub fn add(&mut self, pos: usize, delta: u64) {
        self.add_wide(pos, delta as u128);
    }
    #[inline]
    fn add_wide(&mut self, pos: usize, delta: u128) {
        let mut i = pos;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add(delta);
            i += i & i.wrapping_neg();
        }
    }
    #[inline]
    pub fn sub(&mut self, pos: usize, delta: u64) {
        self.add_wide(pos, (delta as u128).wrapping_neg());
    }
    /// Sum of positions 1..=pos.
    #[inline]
    pub fn prefix(&self, pos: usize) -> u128 {
        let mut i = pos;
        let mut s = 0u128;
        while i > 0 {
            s = s.wrapping_add(self.tree[i]);
            i &= i - 1;
        }
        s
    }
    /// Build from dense values at positions 1..=values.len(), in O(n).
    pub fn from_values(values: &[u64], capacity: usize) -> Self {
        let mut tree = vec![0u128; capacity + 1];
        for (t, &v) in tree[1..=values.len()].iter_mut().zip(values) {
            *t = v as u128;
        }
        for i in 1..=capacity {
            let j = i + (i & i.wrapping_neg());
            if j <= capacity {
                tree[j] = tree[j].wrapping_add(tree[i]);
            }
        }
        Fenwick { tree }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_rebuild_agree() {
        let vals = [5u64, 0, 3, 9, 1, 4];
        let mut f = Fenwick::new(8);
        for (i, v) in vals.iter().enumerate() {
            f.add(i + 1, *v);
        }
        let g = Fenwick::from_values(&vals, 8);
        for p in 0..=8 {
            let expect: u128 = vals.iter().take(p).map(|&v| v as u128).sum();
            assert_eq!(f.prefix(p), expect);
            assert_eq!(g.prefix(p), expect);
        }
        f.sub(4, 9);
        assert_eq!(f.prefix(6), 13);
    }
}
